"""A realistic results set for the report: baselines, an untrained base, checkpoints, an API model.

Every episode is played for real by the in-process runner and written by its writers
(`runner.write_results`), in the workflow's layout:

- `results/cells/<ruleset>/<baseline>/<scenario>/seeds-0-99/` (the workflow's shards) for three
  rule baselines on legacy and on v1;
- `results/eval/base/<model>/` (step 0, two base models), `results/eval/<run>/step-<n>/` for three
  runs (a reward ablation and a model ablation of `shaped`), `results/eval/api/gpt-4o-mini/` and
  the same API model through the tools harness, `results/eval/api/gpt-4o-mini+tools/`; the coder
  run's base and trained checkpoint also on v1 and through the tools harness (`EXTRA`), under
  `results/eval/<ruleset>/` (none of these folders is an output path of the workflow's
  evaluation rules, so its report rules take them as found);
- `results/train/<run>/metrics.parquet` (with superseded rows after a resume), `go_no_go.json`
  and the run index `run.json`;
- with `control=True`, the control arm (`env.arms`: the same cells with the drift plan off) of
  every v1 subject, under `results/control/`: the rule baselines (`cells/v1/<baseline>/`) and the
  coder run's base and trained checkpoint (`eval/v1/<folder>/`), each cell played for real with
  `Environment.reset(..., arm="control")` through the runner, a model's choice of policy at each
  cell the same as in its drift arm.

A model is stood in for by the built-in policies it is recorded as: at each (scenario, seed,
sample) a checkpoint plays the oracle with a probability that grows with its step, else the naive
heuristic, so later checkpoints solve more and samples differ (pass^k has something to measure).
Model columns (base model, adapter, tokens, parse failures) are filled like a model run's.
The cells are made missing or infra_error where the fixture says so.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from schemashift import lineage
from schemashift.env.arms import CONTROL, DEFAULT_ARM
from schemashift.env.rulesets import get_ruleset
from schemashift.lineage import RUN_INDEX
from schemashift.policies import make_policy
from schemashift.rollout import io, records
from schemashift.rollout.backends import make_backend
from schemashift.rollout.runner import Cell, SweepContext, play_episode, write_results

SCENARIOS = ("E1_onboard_new_hire", "E3_customer_lookup", "M1_customer_escalation", "M2_weekly_report")
SEEDS = (0, 1, 2)
SAMPLES = 4
#: the workflow's default block of seeds per baseline shard
SHARD_SEEDS = 100
BASELINES = ("naive_heuristic", "policy_aware_heuristic", "oracle")
STEPS = (25, 50, 75, 100)
QWEN = "Qwen/Qwen2.5-1.5B-Instruct"
CODER = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
#: the config the fixture stands for (the workflow test writes it as its config file)
MODELS = {
    "qwen-1.5b": {"policy": f"hf:{QWEN}", "params_b": 1.5, "price": {"gpu_hour": 2.0}},
    "qwen-coder-1.5b": {"policy": f"hf:{CODER}", "params_b": 1.5},
    "gpt-4o-mini": {
        "policy": "openai:gpt-4o-mini",
        "base_url": "https://api.openai.com/v1",
        "key_env": "SCHEMASHIFT_FIXTURE_KEY",
        "params_b": 8,
        "params_estimated": True,
        "price": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
    },
}
RUNS = {
    "shaped": {
        "base_model": "qwen-1.5b",
        "ruleset": "legacy",
        "split": "train",
        "reward": "legacy_cumulative",
    },
    "binary": {"base_model": "qwen-1.5b", "ruleset": "legacy", "split": "train", "reward": "binary"},
    "coder": {
        "base_model": "qwen-coder-1.5b",
        "ruleset": "legacy",
        "split": "train",
        "reward": "legacy_cumulative",
    },
}
#: chance that a checkpoint plays the oracle, per run and step (0: the untrained base)
SKILL = {
    "shaped": {0: 0.0, 25: 0.25, 50: 0.5, 75: 0.7, 100: 0.85},
    "binary": {0: 0.0, 25: 0.0, 50: 0.1, 75: 0.2, 100: 0.3},
    "coder": {0: 0.1, 25: 0.3, 50: 0.5, 75: 0.6, 100: 0.75},
}
#: evaluations of a run beyond its own ruleset through the default harness, as the workflow
#: plays them (every ruleset, the run's harnesses): (run, ruleset, harness) -> steps (0: its base)
EXTRA = {("coder", "v1", "default"): (0, 100), ("coder", "legacy", "tools"): (0, 100)}
#: cells the fixture leaves out (missing) or turns into infra_error
MISSING = {("binary", 75, "M2_weekly_report")}
INFRA = {("api", None, "M1_customer_escalation", 1)}
CONFIG_HASH = "fixture-config"
#: runs trained on the vLLM stack: their rows hold TRL's importance-sampling diagnostics, the
#: other runs' (transformers, Unsloth) hold null there
VLLM_RUNS = ("coder",)


def config(
    scenarios: tuple[str, ...] = SCENARIOS, rulesets: tuple[str, ...] = ("legacy", "v1")
) -> dict[str, Any]:
    """The workflow configuration the fixture results answer."""
    return {
        "rulesets": list(rulesets),
        "baselines": list(BASELINES),
        "samples": SAMPLES,
        # the workflow's layout holds the drift arm; `build(control=True)` puts the control arm
        # beside it under results/control/, which no rule of the workflow expects
        "arms": ["drift"],
        "shard_seeds": SHARD_SEEDS,
        "evaluation": {
            r: {"scenarios": list(scenarios_for(r, scenarios)), "seeds": f"{SEEDS[0]}-{SEEDS[-1]}"}
            for r in rulesets
        },
        "models": MODELS,
        "train": {"enabled": False, "defaults": {"save_steps": 25, "max_steps": 100}, "runs": RUNS},
        "containers": {"engine": "none", "base_image": "python:3.11-slim", "apptainer_image": None},
        "report": {"bootstrap_samples": 200, "seed": 0, "price_per_gpu_hour": 2.5},
    }


def scenarios_for(ruleset: str, scenarios: tuple[str, ...] = SCENARIOS) -> tuple[str, ...]:
    """The fixture's scenarios, or for a ruleset whose catalogue names them otherwise (v1), the
    first two scenarios of each of its first two tiers."""
    catalogue = get_ruleset(ruleset)
    ids = catalogue.scenario_ids()
    if set(scenarios) <= set(ids):
        return scenarios
    by_tier: dict[str, list[str]] = {}
    for scenario in ids:
        by_tier.setdefault(catalogue.scenario_info(scenario).tier or "", []).append(scenario)
    return tuple(s for tier in list(by_tier)[:2] for s in by_tier[tier][:2])


def _chance(*key: Any) -> float:
    digest = hashlib.sha256(json.dumps(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _play(
    policy_name: str,
    ruleset: str,
    scenario: str,
    seed: int,
    sample: int,
    context: SweepContext,
    arm: str = DEFAULT_ARM,
):
    backend = make_backend("inprocess")
    try:
        policy = make_policy(policy_name, ruleset)
        cell = Cell(ruleset, scenario, seed, sample, arm=arm)
        result = play_episode(backend, policy, cell, context)
    finally:
        backend.close()
    return result


def _model_columns(
    result, base_model: str, adapter: str | None, rng: random.Random, harness: str = "default"
) -> None:
    steps = result.record["steps"] or 1
    tokens_in = sum(900 + 350 * i for i in range(steps))
    model = {
        "base_model": base_model,
        "adapter_sha256": adapter,
        "harness": harness,
        "tokens_in": tokens_in,
        "tokens_out": 60 * steps + rng.randrange(0, 40),
        "parse_failures": 1 if rng.random() < 0.1 else 0,
        "wall_s": round(0.8 * steps + rng.random(), 3),
        "generation_config": json.dumps({"temperature": 0.7, "max_new_tokens": 256}),
        "split": "test",
    }
    result.record.update(model)
    result.trajectory.update({k: model[k] for k in ("base_model", "adapter_sha256", "harness")})


def _infra(result, error: str) -> None:
    keep = {k: v for k, v in result.record.items() if k in IDENTITY_KEEP}
    result.record.clear()
    result.record.update(keep, status="infra_error", error=error)
    result.drifts.clear()
    result.trajectory.update(status="infra_error", steps=[], final={})


IDENTITY_KEEP = {
    "record_version",
    "sweep_id",
    "train_run",
    "ruleset",
    "ruleset_version",
    "env_version",
    "policy",
    "base_model",
    "adapter_sha256",
    "checkpoint_step",
    "harness",
    "scenario",
    "family",
    "tier",
    "seed",
    "split",
    "sample_index",
    "config_hash",
    "git_sha",
}


def _baseline_cells(results: Path, rulesets: tuple[str, ...], scenarios: tuple[str, ...]) -> None:
    """The rule baselines' cells, written in the shards the workflow plans for `config()`."""
    from schemashift.workflow import Plan

    plan = Plan(config(scenarios, rulesets), environ={}, results=str(results))
    for ruleset in rulesets:
        for policy in BASELINES:
            context = SweepContext(
                sweep_id=f"fixture-{ruleset}-{policy}", policy=policy, config_hash=CONFIG_HASH
            )
            shards: dict[str, list] = {}
            for scenario in scenarios_for(ruleset, scenarios):
                for seed in SEEDS:
                    first = seed - seed % plan.config["shard_seeds"]
                    shard = shards.setdefault(plan.shard_dir(ruleset, policy, scenario, first), [])
                    shard += [_play(policy, ruleset, scenario, seed, i, context) for i in range(SAMPLES)]
            for folder, played in shards.items():
                write_results(Path(folder), played)


def _evaluation(
    out_dir: Path,
    context: SweepContext,
    skill: float,
    key: tuple[Any, ...],
    scenarios: tuple[str, ...],
    base_model: str,
    missing: set[str] = frozenset(),
    good: str = "oracle",
    bad: str = "naive_heuristic",
    harness: str = "default",
    ruleset: str = "legacy",
    arm: str = DEFAULT_ARM,
) -> None:
    rng = random.Random(json.dumps(key))
    out = []
    for scenario in scenarios:
        if scenario in missing:
            continue
        for seed in SEEDS:
            for sample in range(SAMPLES):
                chosen = good if _chance(*key, scenario, seed, sample) < skill else bad
                result = _play(chosen, ruleset, scenario, seed, sample, context, arm)
                _model_columns(result, base_model, context.adapter_sha256, rng, harness)
                if (key[0], key[1], scenario, seed) in INFRA:
                    _infra(result, "TimeoutError: the API did not answer in 120 s")
                out.append(result)
    write_results(out_dir, out)


def _base_model(name: str) -> str:
    return MODELS[name]["policy"].partition(":")[2]


def _training(results: Path) -> None:
    for run, skill in SKILL.items():
        rng = random.Random(run)
        rows = []
        final = skill[100]
        for step in range(1, 101):
            mean = 0.05 + final * (1 - 2.718 ** (-step / 30)) + rng.gauss(0, 0.06)
            rows.append(_metric_row(run, step, mean, rng))
        if run == "shaped":  # killed after step 60, resumed from checkpoint-50: steps 51-60 rerun
            rerun = [
                _metric_row(run, s, rows[s - 1]["reward_mean"] + rng.gauss(0, 0.05), rng)
                for s in range(51, 61)
            ]
            for s in range(51, 61):
                rows[s - 1]["superseded"] = True
            rows += rerun
        if run in VLLM_RUNS:
            engine = random.Random(f"{run}-engine")  # its own draws: the other columns stay as they were
            for row in rows:
                row.update(_engine_mismatch(engine))
        table = records.to_table(rows, records.TRAINING_METRICS_COLUMNS)
        io.write_parquet(results / "train" / run / "metrics.parquet", table)
        io.write_json(results / "train" / run / RUN_INDEX, run_index(run))
        early = [r["reward_mean"] for r in rows if r["step"] <= 20 and not r["superseded"]]
        io.write_json(
            results / "train" / run / "go_no_go.json",
            {
                "step": 20,
                "trending_up": early[-1] > early[0],
                "any_reward_positive": max(early) > 0,
                "not_stuck": len(set(early)) > 1,
                "decision": "PROCEED",
            },
        )


def run_index(run: str) -> dict[str, Any]:
    """The run index the trainer writes beside a run's metrics (schemashift.lineage.run_index)."""
    spec = RUNS[run]
    return lineage.run_index(
        train_run=run,
        base_model=_base_model(spec["base_model"]),
        ruleset=spec["ruleset"],
        reward=spec["reward"],
        split=spec["split"],
        description=f"fixture run {run}",
        max_steps=STEPS[-1],
        save_steps=STEPS,
        report_step=STEPS[-1],
        go_no_go_step=lineage.GO_NO_GO_STEP,
        checkpoints={step: _adapter(run, step) for step in STEPS},
    )


def _adapter(run: str, step: int) -> str:
    return hashlib.sha256(f"{run}-{step}".encode()).hexdigest()


def _metric_row(run: str, step: int, mean: float, rng: random.Random) -> dict[str, Any]:
    return {
        "train_run": run,
        "step": step,
        "reward_mean": mean,
        "reward_std": 0.1 + 0.05 * rng.random(),
        "reward_min": mean - 0.2,
        "reward_max": mean + 0.25,
        "loss": 0.02 * rng.random(),
        "kl": 0.001 * step,
        "learning_rate": 5e-6,
        "seconds_per_step": 140.0 + 10 * rng.random(),
        "peak_gpu_mem_gb": 11.5 + rng.random(),
        "gpu_type": "Tesla T4",
        "gpu_count": 2,
        "superseded": False,
        "config_hash": CONFIG_HASH,
    }


def _engine_mismatch(rng: random.Random) -> dict[str, float]:
    """A step's importance-sampling diagnostics of an engine that agrees with the trainer up to
    bf16 rounding: ratios within a few percent of 1, log-probability differences near 0."""
    low, high = 1 - 0.04 * rng.random(), 1 + 0.04 * rng.random()
    difference = 0.002 + 0.003 * rng.random()
    return {
        "is_ratio_min": low,
        "is_ratio_mean": (low + high) / 2,
        "is_ratio_max": high,
        "logp_diff_mean": difference,
        "logp_diff_max": 10 * difference,
    }


def build(
    results: Path,
    scenarios: tuple[str, ...] = SCENARIOS,
    rulesets: tuple[str, ...] = ("legacy", "v1"),
    control: bool = False,
) -> Path:
    """Write the whole fixture under `results` (the workflow's results/ folder); returns it. With
    `control`, also the control arm of the v1 subjects under `results/control/`."""
    _baseline_cells(results, rulesets, scenarios)
    if control and CONTROL_RULESET in rulesets:
        _control_arm(results / CONTROL_FOLDER, scenarios)
    for name in ("qwen-1.5b", "qwen-coder-1.5b"):
        run = "coder" if name == "qwen-coder-1.5b" else "shaped"
        context = SweepContext(
            sweep_id=f"fixture-base-{name}",
            policy=MODELS[name]["policy"],
            checkpoint_step=0,
            config_hash=CONFIG_HASH,
        )
        _evaluation(
            results / "eval" / "base" / name,
            context,
            SKILL[run][0],
            ("base", name),
            scenarios,
            _base_model(name),
        )
    for run, spec in RUNS.items():
        base = _base_model(spec["base_model"])
        for step in STEPS:
            adapter = _adapter(run, step)
            context = SweepContext(
                sweep_id=f"fixture-{run}-{step}",
                policy=f"{MODELS[spec['base_model']]['policy']}@results/train/{run}/checkpoint-{step}",
                train_run=run,
                checkpoint_step=step,
                adapter_sha256=adapter,
                config_hash=CONFIG_HASH,
            )
            missing = {s for r, st, s in MISSING if r == run and st == step}
            _evaluation(
                results / "eval" / run / f"step-{step}",
                replace(context, base_model=base),
                SKILL[run][step],
                (run, step),
                scenarios,
                base,
                missing,
            )
    api = SweepContext(sweep_id="fixture-api", policy="openai:gpt-4o-mini", config_hash=CONFIG_HASH)
    _evaluation(
        results / "eval" / "api" / "gpt-4o-mini",
        api,
        0.4,
        ("api", None),
        scenarios,
        "gpt-4o-mini",
        good="policy_aware_heuristic",
    )
    # the same model through native tool calling: its own folder, rows marked harness "tools"
    _evaluation(
        results / "eval" / "api" / "gpt-4o-mini+tools",
        replace(api, sweep_id="fixture-api-tools", harness="tools"),
        0.6,
        ("api-tools", None),
        scenarios,
        "gpt-4o-mini",
        good="policy_aware_heuristic",
        harness="tools",
    )
    _extra(results / "eval", rulesets, scenarios)
    _training(results)
    return results


def _extra(out: Path, rulesets: tuple[str, ...], scenarios: tuple[str, ...], arm: str = DEFAULT_ARM) -> None:
    """The evaluations of `EXTRA` on `rulesets`, in `arm`, under `out/<ruleset>/<folder>`."""
    for (run, ruleset, harness), steps in EXTRA.items():
        if ruleset not in rulesets:
            continue
        for step in steps:
            policy, train_run, adapter = _model_subject(run, step)
            context = SweepContext(
                sweep_id=f"fixture-{run}-{step}-{ruleset}-{harness}",
                policy=policy,
                train_run=train_run,
                checkpoint_step=step,
                adapter_sha256=adapter,
                config_hash=CONFIG_HASH,
                harness=harness,
            )
            _evaluation(
                out / ruleset / _eval_folder(run, step, harness),
                context,
                SKILL[run][step],
                (run, step, ruleset, harness),
                scenarios_for(ruleset, scenarios),
                _base_model(RUNS[run]["base_model"]),
                harness=harness,
                ruleset=ruleset,
                arm=arm,
            )


#: the ruleset whose subjects the fixture also plays in the control arm, and where
CONTROL_RULESET = "v1"
CONTROL_FOLDER = "control"


def _control_arm(out: Path, scenarios: tuple[str, ...]) -> None:
    """The control arm of every v1 subject (rule baselines, the EXTRA models on v1), played for
    real on the same cells and sweeps as their drift arm."""
    for policy in BASELINES:
        context = SweepContext(
            sweep_id=f"fixture-{CONTROL_RULESET}-{policy}", policy=policy, config_hash=CONFIG_HASH
        )
        played = [
            _play(policy, CONTROL_RULESET, scenario, seed, i, context, CONTROL)
            for scenario in scenarios_for(CONTROL_RULESET, scenarios)
            for seed in SEEDS
            for i in range(SAMPLES)
        ]
        write_results(out / "cells" / CONTROL_RULESET / policy, played)
    _extra(out / "eval", (CONTROL_RULESET,), scenarios, CONTROL)


def _model_subject(run: str, step: int) -> tuple[str, str | None, str | None]:
    """(policy, train_run, adapter digest) of a run's checkpoint, or of its base model at step 0."""
    model = MODELS[RUNS[run]["base_model"]]["policy"]
    if not step:
        return model, None, None
    return f"{model}@results/train/{run}/checkpoint-{step}", run, _adapter(run, step)


def _eval_folder(run: str, step: int, harness: str) -> str:
    """An evaluation's folder as the workflow names it (docs/workflow.md), less the ruleset."""
    folder = f"base/{RUNS[run]['base_model']}" if not step else f"{run}/step-{step}"
    return folder if harness == "default" else f"{folder}+{harness}"


def expected_cells(
    rulesets: tuple[str, ...] = ("legacy", "v1"),
    scenarios: tuple[str, ...] = SCENARIOS,
    control: bool = False,
) -> list[dict]:
    """The cells the fixture's config expects: baselines on every ruleset, and on each run's ruleset
    its base model at step 0 and every checkpoint (the API model is not expected: no key is set);
    with `control`, every v1 cell once more in the control arm."""
    cells = [
        {"ruleset": r, "policy": p, "scenario": s, "seed": seed, "sample_index": i}
        for r in rulesets
        for p in BASELINES
        for s in scenarios_for(r, scenarios)
        for seed in SEEDS
        for i in range(SAMPLES)
    ]
    models = [(MODELS[spec["base_model"]]["policy"], None, 0) for spec in RUNS.values()]
    models += [
        (f"{MODELS[spec['base_model']]['policy']}@results/train/{run}/checkpoint-{step}", run, step)
        for run, spec in RUNS.items()
        for step in STEPS
    ]
    evaluations = [("legacy", policy, run, step, "default") for policy, run, step in dict.fromkeys(models)]
    evaluations += [
        (ruleset, *_model_subject(run, step)[:2], step, harness)
        for (run, ruleset, harness), steps in EXTRA.items()
        if ruleset in rulesets
        for step in steps
    ]
    for ruleset, policy, run, step, harness in evaluations:
        cells += [
            {
                "ruleset": ruleset,
                "policy": policy,
                "train_run": run,
                "checkpoint_step": step,
                "harness": harness,
                "scenario": s,
                "seed": seed,
                "sample_index": i,
            }
            for s in scenarios_for(ruleset, scenarios)
            for seed in SEEDS
            for i in range(SAMPLES)
        ]
    if control:
        cells += [{**cell, "arm": CONTROL} for cell in cells if cell["ruleset"] == CONTROL_RULESET]
    return cells


def build_aggregated(
    root: Path, config_overrides: dict[str, Any] | None = None, control: bool = False
) -> Path:
    """The whole fixture under `root/results`, aggregated as the workflow's aggregate rule does
    (episodes, drifts, training metrics, failed-episode examples, manifest against the expected
    cells), with the report's config at `root/config.json`; returns the results folder. With
    `control`, the control arm of the v1 subjects too (`build`)."""
    results = build(root / "results", control=control)
    (root / "config.json").write_text(json.dumps({**config(), **(config_overrides or {})}), encoding="utf-8")
    aggregate(results, results, control)
    return results


def aggregate(results: Path, out: Path, control: bool) -> None:
    """Aggregate the fixture under `results` into `out` (with `out/expected.json`), its control
    arm included or not."""
    from schemashift.cli import main

    out.mkdir(parents=True, exist_ok=True)
    expected = out / "expected.json"
    expected.write_text(json.dumps(expected_cells(control=control)), encoding="utf-8")
    outputs = {
        "--out-episodes": "episodes.parquet",
        "--out-drifts": "drifts.parquet",
        "--out-training": "training_metrics.parquet",
        "--out-examples": "examples.json",
        "--manifest": "manifest.json",
    }
    cells = [results / "cells", results / "eval"] + ([results / CONTROL_FOLDER] if control else [])
    args = ["aggregate", "--cells", *map(str, cells), "--train", str(results / "train")]
    args += [arg for option, name in outputs.items() for arg in (option, str(out / name))]
    args += ["--expected", str(expected), "--config-hash", CONFIG_HASH]
    if main(args) != 0:
        raise RuntimeError("aggregating the report fixture failed")
