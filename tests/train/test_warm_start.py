"""The optional supervised warm start: an adapter trained on oracle episodes of the run's split,
saved once and reloaded unchanged when the run resumes."""

from __future__ import annotations

import json

import pytest

from schemashift.runs.contract import resolve_run
from schemashift.train.arguments import lora_kwargs

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]


def test_warm_start_trains_saves_and_reloads_the_adapter(tiny_model, tmp_path):
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from schemashift.env.rulesets import get_ruleset
    from schemashift.lineage import evaluated_identity
    from schemashift.train.checkpoints import complete_checkpoints
    from schemashift.train.trainer import _warm_start, mark_warm_start

    spec = {
        "base_model": str(tiny_model),
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": {
            "sft_steps": 6,
            "sft_learning_rate": 3e-3,
            "sft_seeds": 1,
            "scenarios": get_ruleset("v1").scenario_ids()[:1],
            "lora_target_modules": ["q_proj", "v_proj"],
        },
    }
    run = resolve_run({"train": {"runs": {"r": spec}}}, "r")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    out = tmp_path / "run"

    warm = _warm_start(
        AutoModelForCausalLM.from_pretrained(tiny_model), tokenizer, run, LoraConfig(**lora_kwargs(run)), out
    )
    record = json.loads((out / "sft-adapter" / "sft.json").read_text())
    assert record["steps"] == 6 and record["examples"] == 1
    # the task it saw, for the report to mark a subject evaluated on it
    [task] = record["tasks"]
    assert task == {"ruleset": "v1", "scenario": spec["overrides"]["scenarios"][0], "seed": task["seed"]}
    assert get_ruleset("v1").split_of(task["seed"]) == "train"
    lora_b = {name: p.detach().clone() for name, p in warm.named_parameters() if "lora_B" in name}
    assert lora_b and any(t.abs().max() > 0 for t in lora_b.values()), "the warm start moved the adapter"

    again = _warm_start(
        AutoModelForCausalLM.from_pretrained(tiny_model), tokenizer, run, LoraConfig(**lora_kwargs(run)), out
    )
    reloaded = {name: p for name, p in again.named_parameters() if "lora_B" in name}
    assert reloaded.keys() == lora_b.keys()
    assert all(torch.equal(reloaded[name], lora_b[name]) for name in lora_b), (
        "a resume reuses the saved adapter"
    )
    assert any(p.requires_grad for name, p in again.named_parameters() if "lora_" in name)

    # the train job marks it as the run's step 0, which its evaluation rows then name
    assert evaluated_identity(out / "sft-adapter") == {"train_run": None, "checkpoint_step": None}
    mark_warm_start(out, {"train_run": "r", "base_model": str(tiny_model)})
    assert evaluated_identity(out / "sft-adapter") == {"train_run": "r", "checkpoint_step": 0}
    assert complete_checkpoints(out) == {}, "not a GRPO checkpoint a resume would start from"


def test_the_warmup_is_a_share_of_the_run_not_a_fixed_count():
    """A 2-step warm start trains at its full rate from its first step (a fixed 10-step warmup
    held it at a fifth), and the tiny model's 600 steps keep the 10 warmup steps they had."""
    from schemashift.train.sft import lr_factor

    assert [lr_factor(step, 2) for step in range(2)] == [1.0, 1.0]
    assert [lr_factor(step, 600) for step in (0, 9, 10)] == [0.1, 1.0, 1.0]
    assert lr_factor(599, 600) == pytest.approx(0.1, abs=1e-4)
    assert lr_factor(0, 40) == 1.0 and lr_factor(0, 300) == 0.2
