"""How much accelerator memory a GRPO run needs at its peak, before it starts (standard library only).

A run that does not fit fails minutes in, after the model loaded and the first rollout played; a
run that fits by a wide margin wastes a larger machine. The estimate is built from the model's
shape and the run's settings, phase by phase, and the trainer records it beside the measured
peak (`peak_gpu_mem_gb` of every metric row), so the device check can hold the two against each
other at the real shape (Qwen2.5-1.5B: 151,936-token logits, head dim 128).

Counted, in bytes, for one process:
- the weights as loaded (their real size, read off the model);
- the LoRA adapter in float32 (peft keeps it there) with its gradient and Adam's two moments,
  and, with a KL term (beta > 0), TRL's frozen copy of it, its reference adapter;
- the larger of two phases:
  - generation: the key/value cache of the rollout's episodes, each up to the engine length;
  - the training step on one sequence of the engine length (batch 1 per forward): with gradient
    checkpointing (TRL's default) one saved hidden state per layer plus one layer recomputed;
    the logits in the model's dtype, divided by the temperature, their log-softmax in float32
    (TRL's `selective_log_softmax` upcasts) and the gradient of the logits.
Not counted: the CUDA context and the allocator's reserve (torch's `max_memory_allocated`,
which the check compares with, leaves them out too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 2**30
#: bytes an activation element takes at each dtype the stacks train in
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: elements of one layer's recomputed activations per token, in units of hidden and intermediate
#: size: attention (q, k, v, output, norms, residuals ~ 10 H) and the MLP (gate, up, product,
#: activation ~ 4 I), each kept for the backward pass of that layer
LAYER_HIDDEN_FACTOR = 10
LAYER_INTERMEDIATE_FACTOR = 4


@dataclass(frozen=True)
class ModelShape:
    """The dimensions of a decoder-only transformer that set its training memory."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    @classmethod
    def of(cls, config: Any) -> ModelShape:
        """From a Hugging Face config object or its dict."""
        get = (
            config.get
            if isinstance(config, Mapping)
            else lambda key, default=None: getattr(config, key, default)
        )
        heads = get("num_attention_heads")
        hidden = get("hidden_size")
        return cls(
            hidden=hidden,
            intermediate=get("intermediate_size"),
            layers=get("num_hidden_layers"),
            heads=heads,
            kv_heads=get("num_key_value_heads") or heads,
            head_dim=get("head_dim") or hidden // heads,
            vocab=get("vocab_size"),
        )

    def lora_parameters(self, rank: int, targets: list[str]) -> int:
        """Parameters of a LoRA adapter of `rank` on the named projections of every layer."""
        kv = self.kv_heads * self.head_dim
        q = self.heads * self.head_dim
        sizes = {
            "q_proj": (self.hidden, q),
            "k_proj": (self.hidden, kv),
            "v_proj": (self.hidden, kv),
            "o_proj": (q, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }
        unknown = sorted(set(targets) - set(sizes))
        if unknown:
            raise ValueError(f"no memory model for LoRA targets {unknown}; known: {sorted(sizes)}")
        return self.layers * sum(rank * (fan_in + fan_out) for fan_in, fan_out in (sizes[t] for t in targets))


def estimate_gib(
    shape: ModelShape,
    *,
    weight_bytes: int,
    dtype: str,
    sequence_tokens: int,
    rollout_episodes: int,
    lora_rank: int,
    lora_targets: list[str],
    reference_adapter: bool,
) -> dict[str, float]:
    """The estimated peak and its parts, in GiB (see the module docstring for what is counted)."""
    width = DTYPE_BYTES[dtype]
    tokens = sequence_tokens
    lora = shape.lora_parameters(lora_rank, lora_targets)
    adapter = lora * 4 * (4 + (1 if reference_adapter else 0))
    cache = rollout_episodes * tokens * shape.layers * 2 * shape.kv_heads * shape.head_dim * width
    layer = tokens * (LAYER_HIDDEN_FACTOR * shape.hidden + LAYER_INTERMEDIATE_FACTOR * shape.intermediate)
    saved = tokens * shape.hidden * shape.layers
    activations = (saved + layer) * width
    logits = tokens * shape.vocab * (width + width + 4 + width)
    parts = {
        "weights": weight_bytes / GIB,
        "adapter_and_optimizer": adapter / GIB,
        "generation_cache": cache / GIB,
        "training_activations": activations / GIB,
        "training_logits": logits / GIB,
    }
    peak = parts["weights"] + parts["adapter_and_optimizer"]
    peak += max(parts["generation_cache"], parts["training_activations"] + parts["training_logits"])
    return {"peak": peak, **parts}


def run_estimate_gib(model: Any, settings: Mapping[str, Any], sequence_tokens: int) -> dict[str, float]:
    """The estimate for a loaded (torch) model trained with a run's resolved settings."""
    base = [p for name, p in model.named_parameters() if "lora_" not in name]
    weights = sum(p.numel() * p.element_size() for p in base)
    dtype = str(base[0].dtype).removeprefix("torch.")
    return estimate_gib(
        ModelShape.of(model.config),
        weight_bytes=weights,
        dtype=dtype if dtype in DTYPE_BYTES else "bfloat16",
        sequence_tokens=sequence_tokens,
        rollout_episodes=settings["per_device_train_batch_size"] * settings["gradient_accumulation_steps"],
        lora_rank=settings["lora_r"],
        lora_targets=list(settings["lora_target_modules"]),
        reference_adapter=settings["beta"] != 0,
    )
