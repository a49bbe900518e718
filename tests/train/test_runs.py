"""Training run resolution: the run matrix of the original training log (docs/original-training-log.md),
defaults, overrides and bad configs."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from schemashift.env.rulesets import get_ruleset
from schemashift.runs.contract import (
    DEFAULTS,
    RunConfigError,
    enabled_runs,
    repeat_name,
    resolve_run,
    split_repeat,
)
from schemashift.train.arguments import grpo_kwargs, lora_kwargs

ROOT = Path(__file__).parents[2]
# the original training log's GPU-scale matrix (docs/original-training-log.md; config.yaml holds
# its CPU-scale version)
CONFIG = yaml.safe_load((ROOT / "config.gpu.yaml").read_text())


def test_the_gpu_config_holds_the_seed_documents_run_matrix():
    runs = {name: resolve_run(CONFIG, name) for name in CONFIG["train"]["runs"]}
    main = runs["run1"]
    assert (main.base_model, main.ruleset, main.split, main.reward) == (
        "Qwen/Qwen2.5-1.5B-Instruct",
        "v1",
        "train",
        "v1",
    )
    assert runs["run2_binary"].reward == "binary" and runs["run2_binary"].base_model == main.base_model
    assert runs["run3_coder"].base_model == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert runs["run3_coder"].reward == main.reward
    assert (runs["run4_legacy"].ruleset, runs["run4_legacy"].reward) == ("legacy", "legacy_cumulative")
    assert runs["run5_compositions"]["compositions"] is True
    for run in runs.values():
        assert run.save_steps() == [25, 50, 75, 100]
        assert run.reported_step() == 100


def test_run1_settings_are_the_documented_defaults():
    run = resolve_run(CONFIG, "run1")
    lora = lora_kwargs(run)
    assert (lora["r"], lora["lora_alpha"], lora["lora_dropout"]) == (16, 32, 0.0)
    assert lora["target_modules"] == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    grpo = grpo_kwargs(run, "out", use_cpu=True, use_vllm=False)
    expected = {
        "learning_rate": 5e-6,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 2,
        "num_generations": 4,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 4,
        "max_steps": 100,
        "save_steps": 25,
        "loss_type": "dapo",
        "beta": 0.01,
        "max_grad_norm": 1.0,
        "push_to_hub": False,
        "use_cpu": True,
        "bf16": False,
    }
    assert {key: grpo[key] for key in expected} == expected
    assert "hub_model_id" not in grpo and "vllm_mode" not in grpo


def test_vllm_and_hub_arguments_appear_only_when_asked_for():
    config = copy.deepcopy(CONFIG)
    config["train"]["runs"]["run1"]["overrides"] = {"push_to_hub": True, "hub_model_id": "org/model"}
    grpo = grpo_kwargs(resolve_run(config, "run1"), "out", use_cpu=False, use_vllm=True)
    assert grpo["vllm_mode"] == "colocate" and grpo["bf16"] is True
    assert (grpo["hub_model_id"], grpo["hub_strategy"]) == ("org/model", "every_save")


def test_trackio_is_logged_by_the_live_logger_not_transformers_callback():
    """transformers' Trackio callback logs without steps and appends on resume: TRL reports to
    nothing and schemashift.train.live_trackio logs into the benchmark's project instead."""
    config = copy.deepcopy(CONFIG)
    config["train"]["runs"]["run1"]["overrides"] = {"report_to": "trackio"}
    grpo = grpo_kwargs(resolve_run(config, "run1"), "out", use_cpu=True, use_vllm=False)
    assert grpo["report_to"] == "none" and "project" not in grpo and "trackio_space_id" not in grpo


def test_precedence_is_defaults_then_config_defaults_then_run_then_command_line():
    config = {
        "train": {
            "defaults": {"max_steps": 8, "save_steps": 4},
            "runs": {
                "r": {"base_model": "m", "ruleset": "v1", "reward": "v1", "overrides": {"save_steps": 2}}
            },
        }
    }
    run = resolve_run(config, "r", {"max_steps": 6})
    assert (run["max_steps"], run["save_steps"], run["beta"]) == (6, 2, DEFAULTS["beta"])
    assert run.save_steps() == [2, 4, 6]
    uneven = resolve_run(config, "r", {"max_steps": 5})
    assert uneven.save_steps() == [2, 4, 5]


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"base_model": "m", "ruleset": "v1", "reward": "shaped"}, "unknown reward"),
        ({"base_model": "m", "ruleset": "v1", "reward": "legacy_cumulative"}, "only on the legacy ruleset"),
        ({"ruleset": "v1", "reward": "v1"}, "missing ['base_model']"),
        ({"base_model": "m", "ruleset": "v1", "reward": "v1", "learning_rate": 1e-5}, "under 'overrides'"),
        (
            {"base_model": "m", "ruleset": "v1", "reward": "v1", "overrides": {"lr": 1}},
            "unknown training settings",
        ),
        ({"base_model": "m", "ruleset": "v1", "reward": "v1", "overrides": {"num_generations": 1}}, ">= 2"),
        (
            {"base_model": "m", "ruleset": "v1", "reward": "v1", "overrides": {"max_steps": 0}},
            "positive integer",
        ),
        (
            {"base_model": "m", "ruleset": "v1", "reward": "v1", "overrides": {"push_to_hub": True}},
            "hub_model_id",
        ),
        ({"base_model": "m", "ruleset": "v1", "reward": "v1", "overrides": {"backend": "tpu"}}, "backend"),
        ({"base_model": "m", "ruleset": "v1", "reward": "v1", "report_step": 30}, "not a saved step"),
    ],
)
def test_bad_runs_fail_with_a_message_naming_the_problem(run, message):
    with pytest.raises(RunConfigError) as excinfo:
        resolve_run({"train": {"runs": {"bad": run}}}, "bad")
    assert message in str(excinfo.value)


def _v1_run(**overrides):
    spec = {"base_model": "m", "ruleset": "v1", "split": "train", "reward": "v1", "overrides": overrides}
    return resolve_run({"train": {"runs": {"r": spec}}}, "r")


def _limits(infos):
    return {info.id: info.max_steps for info in infos}


@pytest.mark.timeout(10)
def test_max_turns_defaults_to_each_scenarios_own_step_limit():
    v1 = get_ruleset("v1")
    assert DEFAULTS["max_turns"] is None
    assert _v1_run()["max_turns"] is None
    longest = max(_limits(v1.scenarios()).values())
    assert _v1_run(max_turns=longest)["max_turns"] == longest
    lookup = v1.scenario_info("customer_lookup").max_steps
    assert _v1_run(max_turns=lookup, scenarios=["customer_lookup"])["max_turns"] == lookup


@pytest.mark.timeout(10)
@pytest.mark.parametrize("compositions", [False, True])
def test_a_max_turns_below_a_trained_scenarios_limit_is_refused_naming_it(compositions):
    v1 = get_ruleset("v1")
    limits = _limits(v1.scenarios() + (v1.compositions() if compositions else []))
    below = max(limits.values()) - 1
    with pytest.raises(RunConfigError, match=f"max_turns {below} is below") as excinfo:
        _v1_run(max_turns=below, compositions=compositions)
    longer = {scenario: steps for scenario, steps in limits.items() if steps > below}
    assert str(longer) in str(excinfo.value)
    assert _v1_run(max_turns=below + 1, compositions=compositions)["max_turns"] == below + 1


@pytest.mark.timeout(10)
@pytest.mark.parametrize("value", [0, -1, "16", 2.5])
def test_max_turns_is_null_or_a_positive_integer(value):
    with pytest.raises(RunConfigError, match="null"):
        _v1_run(max_turns=value)


def test_unknown_run_names_the_runs_there_are():
    with pytest.raises(RunConfigError, match="run1"):
        resolve_run(CONFIG, "run9")


def test_grpo_kwargs_are_fields_of_the_installed_trl():
    trl = pytest.importorskip("trl")
    import dataclasses

    fields = {field.name for field in dataclasses.fields(trl.GRPOConfig)}
    grpo = grpo_kwargs(resolve_run(CONFIG, "run1"), "out", use_cpu=False, use_vllm=True)
    assert set(grpo) <= fields, sorted(set(grpo) - fields)


def test_a_base_model_may_be_named_by_its_models_entry():
    config = {
        "models": {"qwen-1.5b": {"policy": "hf:Qwen/Qwen2.5-1.5B-Instruct", "params_b": 1.5}},
        "train": {"runs": {"r": {"base_model": "qwen-1.5b", "ruleset": "v1", "reward": "v1"}}},
    }
    assert resolve_run(config, "r").base_model == "Qwen/Qwen2.5-1.5B-Instruct"


def test_a_repeated_run_trains_once_per_training_seed_under_names_of_its_own():
    config = copy.deepcopy(CONFIG)
    config["train"]["runs"]["run1"]["repeats"] = 3
    config["train"]["runs"]["run1"]["overrides"] = {"seed": 7}
    names = enabled_runs(config)
    assert names[:3] == ["run1", "run1.rep2", "run1.rep3"] and "run1.rep4" not in names
    runs = [resolve_run(config, name) for name in names[:3]]
    assert [run["seed"] for run in runs] == [7, 8, 9]
    assert {(run.configured, run.base_model, run.reward) for run in runs} == {
        ("run1", "Qwen/Qwen2.5-1.5B-Instruct", "v1")
    }
    assert [run.repeat for run in runs] == [1, 2, 3]
    # apart from the seed, a repeat is its run
    assert all({**run.settings, "seed": 0} == {**runs[0].settings, "seed": 0} for run in runs)


@pytest.mark.parametrize("name", ["run1.rep4", "run1.rep1", "run1.rep02", "run2_binary.rep2", "nope.rep2"])
def test_a_repeat_the_config_does_not_make_is_refused(name):
    config = copy.deepcopy(CONFIG)
    config["train"]["runs"]["run1"]["repeats"] = 3
    with pytest.raises(RunConfigError, match="no training run"):
        resolve_run(config, name)


@pytest.mark.parametrize("repeats", [0, -1, 1.5, True, "2"])
def test_repeats_must_be_a_positive_integer(repeats):
    config = copy.deepcopy(CONFIG)
    config["train"]["runs"]["run1"]["repeats"] = repeats
    with pytest.raises(RunConfigError, match="repeats must be a positive integer"):
        resolve_run(config, "run1")


def test_repeat_names_round_trip():
    for run in ("run1", "a.b", "x.rep", "r.repx"):
        for repeat in (1, 2, 10):
            assert split_repeat(repeat_name(run, repeat)) == (run, repeat)


@settings(max_examples=300, deadline=None)
@given(
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True).filter(
        lambda name: re.search(r"\.rep[0-9]+$", name) is None
    ),
    st.integers(1, 10_000),
)
def test_every_run_name_the_schema_allows_and_every_repeat_round_trip(run, repeat):
    """Any folder-safe run name the config schema accepts (none ends in .rep<n>) and any repeat:
    the repeat's name splits back into exactly that run and repeat, and no other run's."""
    name = repeat_name(run, repeat)
    assert split_repeat(name) == (run, repeat)
    assert (name == run) is (repeat == 1)
