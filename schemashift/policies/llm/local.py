"""A local transformers model (+ an optional peft adapter) that completes many chats in one batch.

Prompts are rendered by the tokenizer's own chat template, left-padded into one batch and
decoded by the KV-cached loop training shares (`policies.llm.decoding`): greedy by default, or
sampled with one torch Generator per row whose seed is a digest of (seed, prompt, sample_index,
and the arm where it is control). A row's output therefore depends on its own prompt, sample and
arm only, not on its batch neighbours or on the rest of its cell, which keeps the response cache
and batched-versus-sequential play consistent. Every row stops at its own end of turn token.
torch, transformers and peft are imported inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from schemashift.env.arms import DEFAULT_ARM, check_arm
from schemashift.lineage import adapter_sha256
from schemashift.policies.llm.completion import Completion
from schemashift.policies.llm.decoding import CachedDecoder
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
        self.stop_ids = end_of_turn_ids(self.tokenizer, getattr(self.network, "generation_config", None))
        self._prompt_tokens = PromptTokens(self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.stop_ids[0]
        self.weights_sha256 = file_digest(model)
        self.decoder = CachedDecoder(
            self.network,
            stop_ids=self.stop_ids,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
        )
        self.context_length = self.decoder.context_length
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
        self.decoder.forget(session)

    def generate(
        self,
        prompts: Sequence[Sequence[dict[str, str]]],
        sample_indices: Sequence[int],
        sessions: Sequence[Any] | None = None,
        arms: Sequence[str] | None = None,
    ) -> list[Completion]:
        """One completion per prompt, all rows decoded together (`CachedDecoder.decode`: with
        `sessions`, a conversation's next turn computes only what follows its cached tokens)."""
        import torch

        if not prompts:
            return []
        ids = [self.prompt_ids(p) for p in prompts]
        generators = None
        if self.temperature > 0:
            generators = []
            row_arms = list(arms) if arms is not None else [DEFAULT_ARM] * len(prompts)
            for prompt, sample, arm in zip(prompts, sample_indices, row_arms, strict=True):
                generator = torch.Generator(device=self.device)
                generator.manual_seed(row_seed(self.seed, prompt, sample, arm))
                generators.append(generator)
        completions = []
        for prompt_ids, tokens in zip(ids, self.decoder.decode(ids, generators, sessions), strict=True):
            body = tokens[:-1] if tokens and tokens[-1] in self.stop_ids else tokens
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            completions.append(Completion(text=text, tokens_in=len(prompt_ids), tokens_out=len(tokens)))
        return completions
