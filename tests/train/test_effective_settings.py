"""Every stack trains with the settings the run declares: the trainer's effective GRPOConfig is
compared with them before the first step, recorded with the run, and a difference is refused."""

from __future__ import annotations

import json

import pytest

from schemashift.env.rulesets import get_ruleset
from schemashift.runs.contract import resolve_run
from schemashift.train.arguments import SettingsChanged, check_effective_settings, grpo_kwargs


def _spec(base_model: str = "no/such-model", **overrides):
    return {
        "base_model": base_model,
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": {"backend": "transformers", **overrides},
    }


def _run(**overrides):
    return resolve_run({"train": {"runs": {"r": _spec(**overrides)}}}, "r")


@pytest.mark.parametrize("use_vllm", [False, True])
def test_trls_own_config_keeps_every_declared_setting(tmp_path, use_vllm):
    from trl import GRPOConfig

    declared = grpo_kwargs(_run(), str(tmp_path), use_cpu=True, use_vllm=use_vllm)
    effective = check_effective_settings(declared, GRPOConfig(**declared))
    assert effective["optim"] == "adamw_torch" and effective["weight_decay"] == 0.0
    assert effective["epsilon_high"] == 0.2 and effective["mask_truncated_completions"] is False
    assert effective["lr_scheduler_type"] == "cosine" and effective["report_to"] == []
    json.dumps(effective)


def test_a_stack_that_changes_declared_settings_is_refused_naming_each(tmp_path):
    """What Unsloth's GRPOConfig does to a DAPO run: 8-bit AdamW, a weight decay, truncation
    masking and DAPO's epsilon_high."""
    from trl import GRPOConfig

    declared = grpo_kwargs(_run(), str(tmp_path), use_cpu=True, use_vllm=False)
    swapped = {
        "optim": "adamw_8bit",
        "weight_decay": 0.01,
        "mask_truncated_completions": True,
        "epsilon_high": 0.28,
    }
    changed = GRPOConfig(**{**declared, **swapped})
    with pytest.raises(SettingsChanged) as error:
        check_effective_settings(declared, changed)
    for key in swapped:
        assert repr(key) in str(error.value)
    assert "'learning_rate'" not in str(error.value)


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_cpu_run_records_its_effective_settings(tiny_model, tmp_path):
    from schemashift.train.trainer import EFFECTIVE_SETTINGS, train

    spec = _spec(
        str(tiny_model),
        max_steps=1,
        save_steps=1,
        num_generations=2,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        max_turn_tokens=48,
        scenarios=get_ruleset("v1").scenario_ids()[:1],
        dataset_size=2,
        lora_target_modules=["q_proj", "v_proj"],
    )
    config = {"train": {"runs": {"r": spec}}}
    out = tmp_path / "run"
    train(config, "r", out)
    record = json.loads((out / EFFECTIVE_SETTINGS).read_text())
    run = resolve_run(config, "r")
    declared = grpo_kwargs(run, str(out), use_cpu=True, use_vllm=False)
    assert record["backend"] == "transformers"
    assert record["settings"] == check_effective_settings(declared, _as_config(declared))
    assert record["settings"]["optim"] == "adamw_torch" and record["settings"]["temperature"] == 1.0


def _as_config(declared):
    from trl import GRPOConfig

    return GRPOConfig(**declared)
