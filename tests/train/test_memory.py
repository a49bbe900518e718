"""The memory estimate's counts against what torch and peft actually build: the adapter's size
for any choice of LoRA targets and ranks (peft's own count), at the tiny model's shape and at
Qwen2.5-1.5B's (on the meta device: no memory taken), and the weights read off the model."""

from __future__ import annotations

import itertools

import pytest

from schemashift.train.memory import DTYPE_BYTES, GIB, ModelShape, estimate_gib, run_estimate_gib

pytestmark = [pytest.mark.model, pytest.mark.timeout(120)]

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
QWEN25_15B = {
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}


def _meta_model(config):
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)


def _peft_trainable(model, rank, targets):
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=list(targets)))
    return peft_model, sum(p.numel() for p in peft_model.parameters() if p.requires_grad)


@pytest.mark.parametrize("rank", [1, 8, 16])
def test_the_adapter_size_is_peft_s_own_for_every_choice_of_targets(tiny_model, rank):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model)
    shape = ModelShape.of(config)
    for size in (1, 2, 3, 7):
        for targets in itertools.islice(itertools.combinations(TARGETS, size), 5):
            _, counted = _peft_trainable(_meta_model(config), rank, targets)
            assert shape.lora_parameters(rank, list(targets)) == counted, (rank, targets)


def test_at_qwen25_15b_s_shape_the_weights_and_adapter_are_counted_as_built():
    from transformers import Qwen2Config

    config = Qwen2Config(**QWEN25_15B)
    model = _meta_model(config)
    shape = ModelShape.of(config)
    assert shape.head_dim == 128
    peft_model, counted = _peft_trainable(model, 16, TARGETS)
    assert shape.lora_parameters(16, list(TARGETS)) == counted
    estimate = run_estimate_gib(
        peft_model,
        {
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 4,
            "lora_r": 16,
            "lora_target_modules": list(TARGETS),
            "beta": 0.01,
        },
        sequence_tokens=2048,
    )
    base = sum(p.numel() for name, p in peft_model.named_parameters() if "lora_" not in name)
    assert 1.5e9 < base < 1.6e9
    assert estimate["weights"] == pytest.approx(base * DTYPE_BYTES["bfloat16"] / GIB)
    # float32 adapter, gradient, two Adam moments, and TRL's reference copy of it
    assert estimate["adapter_and_optimizer"] == pytest.approx(counted * 4 * 5 / GIB)


def test_the_reference_adapter_is_counted_only_with_a_kl_term():
    shape = ModelShape.of(QWEN25_15B | {"head_dim": None})
    common = dict(
        weight_bytes=0,
        dtype="bfloat16",
        sequence_tokens=1024,
        rollout_episodes=4,
        lora_rank=16,
        lora_targets=list(TARGETS),
    )
    with_kl = estimate_gib(shape, reference_adapter=True, **common)
    without = estimate_gib(shape, reference_adapter=False, **common)
    assert with_kl["adapter_and_optimizer"] == pytest.approx(without["adapter_and_optimizer"] * 5 / 4)


def test_a_target_without_a_memory_model_is_named():
    with pytest.raises(ValueError, match="lm_head"):
        ModelShape.of(QWEN25_15B | {"head_dim": None}).lora_parameters(8, ["q_proj", "lm_head"])
