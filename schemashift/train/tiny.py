"""A tiny chat model built offline, warm-started to emit the interaction format's actions.

No weights can be downloaded in tests or CI, and a randomly initialised model never emits a
parseable action, which would make every model test vacuous. So: a byte-level BPE tokenizer
trained on the rendered oracle conversations, a Qwen2-shaped model with a Qwen2.5-style chat
template with tools (`policies.llm.templates.CHATML_TOOLS`, so that the
`tools` harness drives it through the template's own tool format), random weights from a fixed
seed, then a short supervised pass (`train.sft`) on those conversations, capped in wall time. The result loads
with `hf:DIR` like any Hugging Face checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import schemashift
from schemashift.policies.llm.templates import CHATML_TOOLS

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TINY_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    # grouped-query attention like the Qwen2.5 models it stands in for; one key/value head keeps
    # decoding's key/value reads, which dominate batched decoding over long prompts, 4x smaller
    "num_key_value_heads": 1,
    "max_position_embeddings": 4096,
}
#: how many seeds per scenario of each ruleset the tiny model learns from
TRAIN_SEEDS_PER_SCENARIO = 3
#: what the tiny model learns from, ruleset -> scenarios (None: all): every legacy scenario, and
#: v1's customer_lookup family, the task the training tests run GRPO on with the v1 reward. At
#: this size it does not generalise over v1's seed-varied families; it learns these few
#: train-split episodes well enough that greedy play solves them and sampled play sometimes
#: does not, so GRPO groups differ in reward.
CURRICULUM: dict[str, tuple[str, ...] | None] = {"legacy": None, "v1": ("customer_lookup",)}


def training_seeds(rulesets: Iterable[str]) -> dict[str, list[int]]:
    """The first seeds of each ruleset's train split (a ruleset without splits: 0, 1, 2). Where a
    ruleset's seeds vary the task these are not evaluation seeds; where they do not (legacy) every
    seed is the same task, so the model is warm-started on the very tasks it is evaluated on: its
    `sft.json` lists them (`tasks`) and the report marks such subjects."""
    from schemashift.env.rulesets import get_ruleset

    seeds = {}
    for name in rulesets:
        first = get_ruleset(name).splits().get("train", (0, None))[0]
        seeds[name] = list(range(first, first + TRAIN_SEEDS_PER_SCENARIO))
    return seeds


#: one thread: a model this small gains little from more, and on shared CI cores a second thread
#: that waits on a busy core made each step about five times slower (measured)
DEFAULTS = {"vocab_size": 2048, "steps": 600, "lr": 5e-3, "max_seconds": 600.0, "seed": 0, "threads": 1}

#: the code a tiny model depends on; its digest keys cached builds
_SOURCES = (
    "train/tiny.py",
    "train/sft.py",
    "policies/llm/format.py",
    "policies/llm/templates.py",
    "policies/oracle.py",
    "env",
)


def code_digest() -> str:
    """SHA-256 over the sources that decide what the tiny model becomes."""
    root = Path(schemashift.__file__).parent
    digest = hashlib.sha256(json.dumps(DEFAULTS, sort_keys=True).encode())
    for source in _SOURCES:
        path = root / source
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def build_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A byte-level BPE with Qwen2's normalizer and pre-tokenizer, which is what transformers
    rebuilds when it loads a tokenizer saved next to a Qwen2 config."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    core = Tokenizer(models.BPE())
    core.normalizer = normalizers.NFC()
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHATML_TOOLS
    return tokenizer


def build_tiny_model(
    out: str | Path,
    *,
    curriculum: Mapping[str, Sequence[str] | None] = CURRICULUM,
    steps: int = DEFAULTS["steps"],
    max_seconds: float | None = DEFAULTS["max_seconds"],
    seed: int = DEFAULTS["seed"],
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build, warm-start and save the tiny model to `out`, which appears complete or not at all:
    it is built in a staging folder beside `out` and renamed into place (a killed build leaves
    only the staging folder, which the next build of `out` removes)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    staging = out.parent / f".{out.name}.partial"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    manifest = _build(staging, curriculum, steps, max_seconds, seed, log)
    if out.exists():
        out.rmdir()
    os.replace(staging, out)
    return manifest


def _build(
    out: Path,
    curriculum: Mapping[str, Sequence[str] | None],
    steps: int,
    max_seconds: float | None,
    seed: int,
    log: Callable[[str], None] | None,
) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from schemashift.train.sft import oracle_conversations, sft_model

    rulesets = list(curriculum)
    seeds = training_seeds(rulesets)
    conversations = oracle_conversations(rulesets, seeds, curriculum)

    texts = [CHATML_TOOLS] + [m["content"] for messages in conversations for m in messages]
    # Train with the tokenizer exactly as it will be loaded again.
    with tempfile.TemporaryDirectory() as scratch:
        build_tokenizer(texts, DEFAULTS["vocab_size"]).save_pretrained(scratch)
        tokenizer = AutoTokenizer.from_pretrained(scratch)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        **TINY_SHAPE,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(DEFAULTS["threads"])
    try:
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
        model.generation_config.eos_token_id = config.eos_token_id
        model.generation_config.pad_token_id = config.pad_token_id
        manifest = sft_model(
            model,
            tokenizer,
            out,
            base_model="tiny-qwen2 (random init)",
            rulesets=rulesets,
            seeds=seeds,
            scenarios=curriculum,
            steps=steps,
            lr=DEFAULTS["lr"],
            lora=False,
            seed=seed,
            max_seconds=max_seconds,
            log=log,
            device="cpu",  # built the same on every machine
        )
    finally:
        torch.set_num_threads(threads)
    manifest.update(code_digest=code_digest(), shape=TINY_SHAPE, vocab_size=len(tokenizer))
    (out / "sft.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def cached_tiny_model(cache_dir: str | Path, **kwargs: Any) -> Path:
    """The tiny model for the current code under `cache_dir/tiny-<digest>`, built when absent."""
    target = Path(cache_dir) / f"tiny-{code_digest()[:16]}"
    if (target / "sft.json").exists():
        return target
    # a private folder to build in: processes sharing the cache must not share a staging folder
    private = Path(tempfile.mkdtemp(prefix=".tiny-build-", dir=cache_dir))
    try:
        build_tiny_model(private / "model", **kwargs)
        os.replace(private / "model", target)
    except OSError:  # another process finished first
        if not (target / "sft.json").exists():
            raise
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return target
