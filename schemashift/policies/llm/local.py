"""A local transformers model (+ an optional peft adapter) that completes many chats in one batch.

Prompts are rendered by the tokenizer's own chat template, left-padded into one batch and
decoded by a plain KV-cached loop: greedy by default, or sampled with one torch Generator per
row whose seed is a digest of (seed, prompt, sample_index, and the arm where it is control). A
row's output therefore depends on its own prompt, sample and arm only, not on its batch neighbours
or on the rest of its cell, which keeps the response cache and batched-versus-sequential play
consistent. Every row stops at its own end of
turn token. torch, transformers and peft are imported inside the functions that need them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from schemashift.env.arms import DEFAULT_ARM, check_arm
from schemashift.lineage import adapter_sha256
from schemashift.policies.llm.completion import Completion
from schemashift.policies.llm.format import template_request
from schemashift.policies.llm.turn_end import end_of_turn_ids

DTYPES = ("auto", "float32", "bfloat16", "float16", "float64")
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def file_digest(directory: str | Path, suffixes: Sequence[str] = WEIGHT_SUFFIXES) -> str | None:
    """SHA-256 over a directory's weight files (names and bytes, in name order); None if none."""
    path = Path(directory)
    if not path.is_dir():
        return None
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(tuple(suffixes)))
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def row_seed(seed: int, messages: Sequence[dict[str, str]], sample_index: int, arm: str = DEFAULT_ARM) -> int:
    """A sampled row's generator seed; a control cell's differs from its drift twin's on the same
    prompt (the drift arm's is the one rows had before arms existed)."""
    parts: list[Any] = [seed, list(messages), sample_index]
    if check_arm(arm) != DEFAULT_ARM:
        parts.append(arm)
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


class PromptTokens:
    """Token ids of chat prompts, tokenized piece by piece with the pieces remembered.

    A conversation's prompt grows by one turn per step, and re-tokenizing all of it each turn
    (the system prompt and tool documentation are thousands of tokens) cost as much as the
    batched model itself. A tokenizer splits text at its added tokens (`<|im_start|>`, ...)
    before anything else, so the rendered prompt is tokenized as the pieces between them, each
    looked up in a bounded cache. The first prompts are also tokenized whole and compared; a
    tokenizer whose pieces do not add up (one that strips or prefixes around added tokens) is
    tokenized whole from then on.
    """

    CHECKED_PROMPTS = 8
    MAX_PIECES = 8192
    #: prompts of recent turns: the history budget counts a prompt, then it is generated from
    MAX_PROMPTS = 256

    def __init__(self, tokenizer: Any) -> None:
        import re

        self.tokenizer = tokenizer
        added = sorted(tokenizer.get_added_vocab().items(), key=lambda item: -len(item[0]))
        self._added = dict(added)
        self._splitter = re.compile("(" + "|".join(re.escape(t) for t, _ in added) + ")") if added else None
        self._pieces: OrderedDict[str, list[int]] = OrderedDict()
        self._prompts: OrderedDict[str, list[int]] = OrderedDict()
        self._unchecked = self.CHECKED_PROMPTS if self._splitter is not None else 0
        self.piecewise = self._splitter is not None

    def ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        plain, tools = template_request(messages)
        text = self.tokenizer.apply_chat_template(
            plain, tools=tools, add_generation_prompt=True, tokenize=False
        )
        known = self._prompts.get(text)
        if known is not None:
            self._prompts.move_to_end(text)
            return list(known)
        if not self.piecewise:
            ids = self._whole(text)
        else:
            ids = self._piecewise(text)
            if self._unchecked:
                self._unchecked -= 1
                whole = self._whole(text)
                if whole != ids:
                    self.piecewise, ids = False, whole
        self._remember(self._prompts, text, ids, limit=self.MAX_PROMPTS)
        return list(ids)

    def _whole(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _piecewise(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in self._splitter.split(text):
            if not piece:
                continue
            if piece in self._added:
                ids.append(self._added[piece])
                continue
            cached = self._pieces.get(piece)
            if cached is None:
                cached = self._whole(piece)
                self._remember(self._pieces, piece, cached, limit=self.MAX_PIECES)
            else:
                self._pieces.move_to_end(piece)
            ids.extend(cached)
        return ids

    @staticmethod
    def _remember(table: OrderedDict, key: str, value: list[int], *, limit: int) -> None:
        table[key] = value
        if len(table) > limit:
            table.popitem(last=False)


class LocalModel:
    """A chat model on this machine: bf16 on a GPU, fp32 on a CPU unless `dtype` says otherwise."""

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        *,
        device: str | None = None,
        dtype: str = "auto",
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        if temperature < 0 or not 0 < top_p <= 1:
            raise ValueError(f"need temperature >= 0 and 0 < top_p <= 1, got {temperature}, {top_p}")
        if adapter is not None and not Path(adapter).is_dir():
            raise ValueError(f"adapter directory {adapter!r} does not exist")
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if dtype == "auto":
            dtype = "bfloat16" if self.device.type == "cuda" else "float32"
        self.dtype_name = dtype
        self.model_name, self.adapter = model, adapter
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        if self.tokenizer.chat_template is None:
            raise ValueError(f"model {model!r} has no chat template; the interaction format needs one")
        network = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype))
        if adapter is not None:
            from peft import PeftModel

            network = PeftModel.from_pretrained(network, adapter)
            # Nothing here trains the adapter: in float32 its merged weights compute the same
            # model without the adapter's extra matrix products in every layer (a CPU
            # evaluation of the default's checkpoints ran about 20% faster, identical records).
            # In 16-bit the merged sum would be rounded, so it stays an adapter there.
            if dtype == "float32":
                network = network.merge_and_unload()
        self.network = network.to(self.device).eval()
        self.max_new_tokens, self.temperature, self.top_p, self.seed = (
            max_new_tokens,
            temperature,
            top_p,
            seed,
        )
        config = self.network.config
        self.context_length = int(getattr(config, "max_position_embeddings", 0) or 32768)
        self.stop_ids = end_of_turn_ids(self.tokenizer, getattr(self.network, "generation_config", None))
        self._prompt_tokens = PromptTokens(self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.stop_ids[0]
        self.weights_sha256 = file_digest(model)
        self._cache_keyword = _cache_keyword(self.network)
        #: session -> (token ids held, per-layer (keys, values) of one row)
        self._sessions: dict[Any, tuple[list[int], list[tuple[Any, Any]]]] = {}
        # the one adapter hash (schemashift.lineage): a checkpoint's manifest carries the same value
        self.adapter_sha256 = adapter_sha256(adapter) if adapter else None

    # -- what results depend on -------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        return {
            "kind": "hf",
            "model": self.model_name,
            "weights_sha256": self.weights_sha256,
            "revision": getattr(self.network.config, "_commit_hash", None),
            "adapter_sha256": self.adapter_sha256,
            "dtype": self.dtype_name,
        }

    def generation(self) -> dict[str, Any]:
        sampled = self.temperature > 0
        return {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": sampled,
            "temperature": self.temperature if sampled else 0.0,
            "top_p": self.top_p if sampled else 1.0,
            "seed": self.seed if sampled else None,
            "stop_token_ids": self.stop_ids,
        }

    # -- tokens ---------------------------------------------------------------------------------------
    def prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        return self._prompt_tokens.ids(messages)

    def count_tokens(self, messages: Sequence[dict[str, str]]) -> int:
        return len(self.prompt_ids(messages))

    # -- generation ----------------------------------------------------------------------------------
    def forget(self, session: Any) -> None:
        """Drop the key/value cache kept for a session (an episode that ended)."""
        self._sessions.pop(session, None)

    def generate(
        self,
        prompts: Sequence[Sequence[dict[str, str]]],
        sample_indices: Sequence[int],
        sessions: Sequence[Any] | None = None,
        arms: Sequence[str] | None = None,
    ) -> list[Completion]:
        """One completion per prompt, all rows decoded together.

        With `sessions`, each row's keys and values are kept after the turn, and the next prompt
        of the same session computes only what follows the longest common prefix with the
        tokens already cached (a conversation grows by one turn per step, so most of a prompt
        is cached). The new tokens of each row are computed alone; the rows' caches are then
        left-padded into one batch, with the padding masked, for decoding.
        """
        import torch
        from transformers import DynamicCache

        if not prompts:
            return []
        rows = len(prompts)
        ids = [self.prompt_ids(p) for p in prompts]
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
        generators = None
        if self.temperature > 0:
            generators = []
            row_arms = list(arms) if arms is not None else [DEFAULT_ARM] * rows
            for prompt, sample, arm in zip(prompts, sample_indices, row_arms, strict=True):
                generator = torch.Generator(device=self.device)
                generator.manual_seed(row_seed(self.seed, prompt, sample, arm))
                generators.append(generator)
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
        completions = []
        for prompt_ids, tokens in zip(ids, out, strict=True):
            body = tokens[:-1] if tokens and tokens[-1] in self.stop_ids else tokens
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            completions.append(Completion(text=text, tokens_in=len(prompt_ids), tokens_out=len(tokens)))
        return completions

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
