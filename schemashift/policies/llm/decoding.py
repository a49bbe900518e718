"""Key/value-cached decoding of token-id prompts, shared by evaluation and training.

`LocalModel` (evaluation) and the GRPO rollout on transformers (`train.closed_loop`) decode with
the same loop, so a turn is generated the same way in both. A conversation grows by one turn per
step; with a session key per conversation, each turn computes only the tokens that follow what is
cached, where `generate` would compute the whole conversation again at every turn.
torch and transformers are imported inside the functions that need them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any


class CachedDecoder:
    """Decodes batches of token-id prompts with a network, keeping each session's cache.

    `generators` (one torch Generator per row) sample at `temperature` with `top_p`; without
    them decoding is greedy. A decoder holds caches computed with the network's current weights:
    whoever changes the weights makes a new decoder (or forgets every session).
    """

    def __init__(
        self,
        network: Any,
        *,
        stop_ids: Sequence[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
    ) -> None:
        self.network, self.device = network, network.device
        self.stop_ids = list(stop_ids)
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.context_length = int(getattr(network.config, "max_position_embeddings", 0) or 32768)
        self._cache_keyword = _cache_keyword(network)
        #: session -> (token ids held, per-layer (keys, values) of one row)
        self._sessions: dict[Any, tuple[list[int], list[tuple[Any, Any]]]] = {}

    def forget(self, session: Any) -> None:
        """Drop the key/value cache kept for a session (an episode that ended)."""
        self._sessions.pop(session, None)

    def decode(
        self,
        ids: Sequence[Sequence[int]],
        generators: Sequence[Any] | None = None,
        sessions: Sequence[Any] | None = None,
    ) -> list[list[int]]:
        """The tokens generated for each prompt, its stop token included where it stopped.

        With `sessions`, each row's keys and values are kept after the turn, and the next prompt
        of the same session computes only what follows the longest common prefix with the
        tokens already cached. The new tokens of each row are computed alone; the rows' caches
        are then left-padded into one batch, with the padding masked, for decoding.
        """
        import torch
        from transformers import DynamicCache

        rows = len(ids)
        keys = list(sessions) if sessions is not None else [None] * rows
        reuse, stored = [], []
        for row, key in zip(ids, keys, strict=True):
            cached = self._sessions.get(key) if key is not None else None
            common = 0
            if cached is not None:
                limit = min(len(cached[0]), len(row) - 1)
                while common < limit and cached[0][common] == row[common]:
                    common += 1
            reuse.append(common)
            stored.append(cached)
        # Each row's new tokens are computed alone: without padding, attention needs no mask and
        # takes the fused causal kernel. Decoding then runs all rows together.
        logits, row_caches = [], []
        with torch.inference_mode():
            for row, n, entry in zip(ids, reuse, stored, strict=True):
                past, causal = DynamicCache(config=self.network.config), None
                if n:
                    past = _reserved_cache([(k[None, :, :n], v[None, :, :n]) for k, v in entry[1]], len(row))
                    causal = self._causal_after(n, len(row) - n, entry[1][0][0].dtype)
                result = self.network(
                    input_ids=torch.tensor([row[n:]], device=self.device),
                    attention_mask=causal,
                    position_ids=torch.arange(n, len(row), device=self.device)[None],
                    logits_to_keep=1,
                    use_cache=True,
                    **{self._cache_keyword: past},
                )
                logits.append(result.logits[:, -1, :].float())
                row_caches.append([(layer.keys[0], layer.values[0]) for layer in past.layers])
        longest = max(len(row) for row in ids)
        budget = min(self.max_new_tokens, max(1, self.context_length - longest))
        cache, bias, pads = self._batched_cache(row_caches, budget)
        stops = set(self.stop_ids)
        out: list[list[int]] = [[] for _ in range(rows)]
        active = list(range(rows))  # the prompt index of each row still in the batch
        with torch.inference_mode():
            next_logits = torch.cat(logits)
            next_position = torch.tensor([[len(row)] for row in ids], device=self.device)
            for produced in range(1, budget + 1):
                row_generators = None if generators is None else [generators[r] for r in active]
                chosen = self._choose(next_logits, row_generators)
                ended = []
                for position, row in enumerate(active):
                    token = int(chosen[position])
                    out[row].append(token)
                    if token in stops or produced == budget:
                        ended.append(position)
                if sessions is not None:
                    self._keep([(active[p], p) for p in ended], keys, ids, out, cache, pads)
                if len(ended) == len(active):
                    break
                if ended:
                    # Finished rows leave the batch: later steps compute only the running ones.
                    done = set(ended)
                    keep = [p for p in range(len(active)) if p not in done]
                    index = torch.tensor(keep, device=self.device)
                    cache.batch_select_indices(index)
                    next_position, chosen = next_position[index], chosen[index]
                    active, pads = [active[p] for p in keep], [pads[p] for p in keep]
                    bias = None if bias is None or not any(pads) else bias[index]
                visible = cache.layers[0].length + 1
                result = self.network(
                    input_ids=chosen[:, None],
                    attention_mask=None if bias is None else bias[..., :visible],
                    position_ids=next_position,
                    use_cache=True,
                    **{self._cache_keyword: cache},
                )
                next_logits = result.logits[:, -1, :].float()
                next_position = next_position + 1
        return out

    def _causal_after(self, cached: int, new: int, dtype):
        """The additive causal mask of `new` tokens that follow `cached` ones, shaped
        [1, 1, new, cached + new]: a prepared float mask is cheaper for the attention kernel than
        the boolean one transformers would build (measured)."""
        import torch

        visible = torch.arange(cached + new, device=self.device)[None, :] <= (
            cached + torch.arange(new, device=self.device)[:, None]
        )
        blocked = torch.zeros(visible.shape, dtype=dtype, device=self.device)
        return blocked.masked_fill_(~visible, torch.finfo(dtype).min)[None, None]

    def _batched_cache(self, row_caches, room: int):
        """One cache over all rows, left-padded to the longest with `room` positions to spare for
        decoding; the additive attention mask that hides the padding (None when no row is padded:
        attention then needs no mask), and each row's padding.

        The mask is a prepared 4D float mask, sliced to the cache's length at each step: the 2D
        mask transformers would expand into a boolean one at every step cost more than the
        attention it masks (measured)."""
        import torch

        lengths = [layers[0][0].shape[-2] for layers in row_caches]
        width = max(lengths)
        pads = [width - n for n in lengths]
        layers = []
        for layer, (k0, v0) in enumerate(row_caches[0]):
            keys = k0.new_zeros((len(row_caches), k0.shape[0], width, k0.shape[-1]))
            values = v0.new_zeros((len(row_caches), v0.shape[0], width, v0.shape[-1]))
            for i, (per_layer, pad) in enumerate(zip(row_caches, pads, strict=True)):
                keys[i, :, pad:] = per_layer[layer][0]
                values[i, :, pad:] = per_layer[layer][1]
            layers.append((keys, values))
        bias = None
        if any(pads):
            dtype = row_caches[0][0][0].dtype
            bias = torch.zeros((len(row_caches), 1, 1, width + room), dtype=dtype, device=self.device)
            for i, pad in enumerate(pads):
                bias[i, ..., :pad] = torch.finfo(dtype).min
        return _reserved_cache(layers, width + room), bias, pads

    def _keep(self, ended, keys, ids, out, cache, pads) -> None:
        """Store the cache of each (prompt index, batch row) that ended: its positions after the
        padding and the tokens they hold (the last chosen token was never fed)."""
        for row, position in ended:
            key = keys[row]
            if key is None:
                continue
            fed = ids[row] + out[row][:-1]
            if len(fed) != cache.layers[0].length - pads[position]:
                self._sessions.pop(key, None)
                continue
            pad = pads[position]
            per_layer = [
                (layer.keys[position, :, pad:].clone(), layer.values[position, :, pad:].clone())
                for layer in cache.layers
            ]
            self._sessions[key] = (fed, per_layer)

    def _choose(self, logits, generators):
        import torch

        if generators is None:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            keep = sorted_probs.cumsum(-1) - sorted_probs < self.top_p
            sorted_probs = sorted_probs * keep
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        picks = [
            torch.multinomial(probs[i] / probs[i].sum(), 1, generator=generators[i])
            for i in range(probs.shape[0])
        ]
        return torch.cat(picks)


def _cache_keyword(network) -> str:
    """The name under which the model's forward takes its key/value cache: `cache` in the
    transformers this project tests (5.24), `past_key_values` in older ones."""
    import inspect

    base = network.get_base_model() if hasattr(network, "get_base_model") else network
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _reserved_cache(layers, capacity: int):
    """A key/value cache whose layers hold `layers` (per layer (keys, values), shaped
    [batch, heads, positions, head_dim]) in buffers with room for `capacity` positions."""
    from transformers.cache_utils import Cache

    layer_class = _reserved_layer_class()
    return Cache(layers=[layer_class(keys, values, capacity) for keys, values in layers])


@functools.cache
def _reserved_layer_class():
    """The cache layer class, defined on first use so that transformers loads only then."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """Appends by writing into a preallocated buffer. The stock layer concatenates, which
        copies every cached position of every row at each decoded token: with 32 rows of ~3k
        positions that copying took more time than the model (measured)."""

        def __init__(self, keys, values, capacity: int) -> None:
            super().__init__()
            self.device, self.is_initialized, self.length = keys.device, True, keys.shape[-2]
            room = max(capacity, self.length)
            self._keys = keys.new_empty((*keys.shape[:-2], room, keys.shape[-1]))
            self._values = values.new_empty((*values.shape[:-2], room, values.shape[-1]))
            self._keys[..., : self.length, :] = keys
            self._values[..., : self.length, :] = values
            self._expose()

        def _expose(self) -> None:
            self.keys = self._keys[..., : self.length, :]
            self.values = self._values[..., : self.length, :]

        def update(self, key_states, value_states, *args, **kwargs):
            end = self.length + key_states.shape[-2]
            if end > self._keys.shape[-2]:
                grown = max(end, 2 * self._keys.shape[-2])
                for name in ("_keys", "_values"):
                    old = getattr(self, name)
                    new = old.new_empty((*old.shape[:-2], grown, old.shape[-1]))
                    new[..., : self.length, :] = old[..., : self.length, :]
                    setattr(self, name, new)
            self._keys[..., self.length : end, :] = key_states
            self._values[..., self.length : end, :] = value_states
            self.length = end
            self._expose()
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._expose()

    return ReservedLayer
