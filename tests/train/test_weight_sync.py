"""The vLLM weight sync of a bf16 LoRA model through TRL's own `VLLMGeneration.sync_weights`,
with a recording stand-in engine (`vllm_standin.RecordingEngine`): TRL's merge/unmerge drifts
the base weights (TRL issue 6688); the out-of-place sync (`schemashift.train.weight_sync`)
leaves them bit-identical and sends `base + scale · B @ A`."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

SYNCS = 120
#: Per-step change of each adapter element, about an Adam step at the runs' learning rates.
ADAPTER_STEP = 1e-3
#: bf16 keeps 8 significant bits: rounding to it moves a value by at most 2**-8 of itself.
BF16_RTOL = 2**-8
#: Room for a float32 sum taken in another order than the sync's, in units of that bound.
FLOAT32_SLACK = 1e-3
HIDDEN, KV, VOCAB, QKV = 256, 64, 512, 192
LINEAR_TARGETS = ("q_proj", "v_proj")
CONV1D_TARGETS = ("c_attn",)


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread, as for the tiny model (tests/conftest.py): these matrices gain nothing
    from a second, and on busy shared cores waiting for one slows each sync many times over."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _toy():
    """A bf16 model: two `nn.Linear`s and a GPT-2 `Conv1D` (fan_in_fan_out) to put LoRA on, and
    an embedding, a norm and a head around them."""
    import torch
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)

    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
            self.q_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=True)
            self.v_proj = torch.nn.Linear(HIDDEN, KV, bias=False)
            self.c_attn = Conv1D(QKV, HIDDEN)
            torch.nn.init.normal_(self.c_attn.weight, std=0.02)
            self.norm = torch.nn.LayerNorm(HIDDEN)
            self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)

    return Toy().to(torch.bfloat16)


def _model(adapter: str, rank: int, alpha: int, rslora: bool, dropout: float):
    """The toy model with LoRA on its projections, as `get_peft_model` wraps it for training
    (float32 adapters over the bf16 base)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        use_rslora=rslora,
        lora_dropout=dropout,
        target_modules=[*LINEAR_TARGETS, *CONV1D_TARGETS],
    )
    return get_peft_model(_toy(), config, adapter_name=adapter)


def _train_adapter_a_little(model, generator) -> None:
    """One training-like move of every LoRA factor (B leaves its zero init at the first)."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.add_(ADAPTER_STEP * torch.randn(param.shape, generator=generator).to(param.dtype))


def _expected_merge(base, lora_a, lora_b, scale: float, conv1d: bool):
    """`base + scale · B @ A` in float32, computed here from the factors and the config."""
    delta = lora_b.detach().float() @ lora_a.detach().float()
    return base.float() + scale * (delta.T if conv1d else delta)


def _sync_repeatedly(model, generation, *, adapter: str, scale: float) -> dict[str, Any]:
    """`SYNCS` rounds of (move the adapter, TRL's `sync_weights`), comparing after each what the
    engine received with the merge of the pristine base. Returns the pristine weights, the
    fraction of LoRA-wrapped base elements changed, their change's norm relative to that of the
    LoRA update, and the largest error of a received LoRA weight in bf16 rounding bounds."""
    import torch

    pristine = {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" not in name}
    engine = generation.llm
    generator = torch.Generator().manual_seed(1)
    worst_merge_error = 0.0
    for _ in range(SYNCS):
        _train_adapter_a_little(model, generator)
        generation.sync_weights()
        layers = dict(model.base_model.model.named_children())
        for target in (*LINEAR_TARGETS, *CONV1D_TARGETS):
            layer = layers[target]
            expected = _expected_merge(
                pristine[f"base_model.model.{target}.base_layer.weight"],
                layer.lora_A[adapter].weight,
                layer.lora_B[adapter].weight,
                scale,
                conv1d=target in CONV1D_TARGETS,
            )
            received = engine.received[f"{target}.weight"]
            assert received.dtype == torch.bfloat16
            bound = BF16_RTOL * expected.abs() + 1e-12
            worst_merge_error = max(
                worst_merge_error, float(((received.float() - expected).abs() / bound).max())
            )
    bases = {name: p for name, p in model.named_parameters() if name.endswith("base_layer.weight")}
    changed = sum(int((pristine[name] != p).sum()) for name, p in bases.items())
    drift = sum(float((p.float() - pristine[name].float()).norm() ** 2) for name, p in bases.items())
    layers = dict(model.base_model.model.named_children())
    update = sum(
        float(
            (
                scale * layers[t].lora_B[adapter].weight.detach() @ layers[t].lora_A[adapter].weight.detach()
            ).norm()
            ** 2
        )
        for t in (*LINEAR_TARGETS, *CONV1D_TARGETS)
    )
    return {
        "base_fraction_changed": changed / sum(p.numel() for p in bases.values()),
        "drift_relative_to_update": (drift / update) ** 0.5,
        "worst_merge_error_in_rounding_bounds": worst_merge_error,
        "prefix_cache_resets": engine.prefix_cache_resets,
        "pristine": pristine,
    }


ADAPTERS = [
    pytest.param("default", 16, 32, False, 0.0, id="r16-alpha32-dropout0"),
    pytest.param("policy", 8, 16, True, 0.05, id="named-adapter-rslora-r8"),
]


@pytest.mark.parametrize(("adapter", "rank", "alpha", "rslora", "dropout"), ADAPTERS)
def test_out_of_place_sync_keeps_the_bf16_base_and_sends_base_plus_scaled_update(
    adapter, rank, alpha, rslora, dropout
):
    """120 syncs with the adapter moving between them: the base weights stay bit-identical, each
    LoRA weight the engine receives is `base + scale · B @ A` up to bf16 rounding, every other
    weight is the model's own, and TRL's prefix-cache reset still follows each sync."""
    import torch
    from vllm_standin import recording_generation

    from schemashift.train.weight_sync import install_out_of_place_sync

    model = _model(adapter, rank, alpha, rslora, dropout)
    generation = recording_generation(model)
    install_out_of_place_sync(generation)
    scale = alpha / rank**0.5 if rslora else alpha / rank

    outcome = _sync_repeatedly(model, generation, adapter=adapter, scale=scale)

    for name, param in model.named_parameters():
        if "lora_" not in name:
            assert torch.equal(param, outcome["pristine"][name]), name
    assert outcome["base_fraction_changed"] == 0
    assert outcome["worst_merge_error_in_rounding_bounds"] <= 1 + FLOAT32_SLACK
    received = generation.llm.received
    for name, param in model.named_parameters():
        vllm_name = name.removeprefix("base_model.model.").replace(".base_layer", "")
        if "lora_" not in name and vllm_name.removesuffix(".weight") not in (
            *LINEAR_TARGETS,
            *CONV1D_TARGETS,
        ):
            assert torch.equal(received[vllm_name], param), vllm_name
    assert outcome["prefix_cache_resets"] == SYNCS


def test_trls_in_place_merge_and_unmerge_drifts_the_bf16_base():
    """The same syncs through TRL's unmodified path (merge_adapter, read, unmerge_adapter)
    change the base weights: the bug the out-of-place sync removes."""
    from vllm_standin import recording_generation

    model = _model("default", 16, 32, False, 0.0)
    outcome = _sync_repeatedly(model, recording_generation(model), adapter="default", scale=2.0)

    assert outcome["base_fraction_changed"] > 0


def test_the_engine_receives_the_names_trl_sends():
    """One sync each way from the same model: the same weight names, in the same order."""
    import copy

    from vllm_standin import recording_generation

    from schemashift.train.weight_sync import install_out_of_place_sync

    model = _model("default", 16, 32, False, 0.0)
    trl_path = recording_generation(copy.deepcopy(model))
    ours = recording_generation(model)
    install_out_of_place_sync(ours)
    trl_path.sync_weights()
    ours.sync_weights()

    assert list(ours.llm.received) == list(trl_path.llm.received)
    assert not any("lora_" in name or "base_layer" in name for name in ours.llm.received)


@pytest.mark.parametrize(
    ("config", "refused"),
    [
        ({"use_dora": True, "target_modules": ["q_proj"]}, "LoRA variant"),
        ({"lora_bias": True, "target_modules": ["q_proj"]}, "lora_bias"),
        ({"target_modules": ["embed"]}, "linear layers only"),
    ],
    ids=["dora", "lora-bias", "embedding"],
)
def test_a_lora_kind_it_does_not_merge_is_refused_before_anything_is_sent(config, refused):
    """DoRA, lora_bias and LoRA on an embedding merge differently: the sync refuses them instead
    of sending `base + scale · B @ A`, and the engine receives nothing."""
    from peft import LoraConfig, get_peft_model
    from vllm_standin import recording_generation

    from schemashift.train.weight_sync import UnsupportedAdapter, install_out_of_place_sync

    generation = recording_generation(get_peft_model(_toy(), LoraConfig(r=4, **config)))
    install_out_of_place_sync(generation)

    with pytest.raises(UnsupportedAdapter, match=refused):
        generation.sync_weights()
    assert generation.llm.received == {}
