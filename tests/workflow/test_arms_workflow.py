"""The control arm through the real Snakemake: a v1 configuration with `arms: [drift, control]`
plays every baseline cell in both arms in one shard per policy, the aggregate keeps the arms apart,
and the report's drift-cost table shows what the arm was built to show: the drift-oblivious
scripted agent solves control and fails under drift (cost -1), the scripted agent solves both."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest
import yaml
from workflow_support import REPO, copy_repo, job_counts, snakemake, tool

pytestmark = pytest.mark.skipif(tool("snakemake") is None, reason="snakemake is not installed")

ARMS_CONFIG = "tests/workflow/config.arms.yaml"
with open(REPO / ARMS_CONFIG) as f:
    CONFIG = yaml.safe_load(f)
CELLS = CONFIG["evaluation"]["v1"]
POLICIES = CELLS["baselines"]
SCENARIO = CELLS["scenarios"][0]
SEEDS = (0, 1)
assert CELLS["seeds"] == "0-1", "keep SEEDS in step with the arms config"


@pytest.fixture(scope="module")
def arms_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The arms configuration run to completion in a copy of its own."""
    copy = copy_repo(tmp_path_factory.mktemp("arms") / "repo")
    started = time.perf_counter()
    proc = snakemake(copy, configfile=ARMS_CONFIG, timeout=540)
    counts = job_counts(proc.stdout)
    assert counts["baseline"] == len(POLICIES), proc.stdout[-4000:]
    print(f"full run of the arms config: {time.perf_counter() - started:.1f} s")
    return copy


def read_rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_cell_is_played_in_both_arms_in_one_shard(arms_run):
    for policy in POLICIES:
        shard = arms_run / f"results/cells/v1/{policy}/{SCENARIO}/seeds-0-1"
        rows = read_rows(shard / "episodes.parquet")
        assert sorted((r["seed"], r["arm"]) for r in rows) == sorted(
            (seed, arm) for seed in SEEDS for arm in ("drift", "control")
        )
    rows = read_rows(arms_run / "results/episodes.parquet")
    assert len(rows) == len(POLICIES) * len(SEEDS) * 2
    assert all(r["status"] == "graded" for r in rows)
    success = {(r["policy"], r["arm"]): 0 for r in rows}
    for r in rows:
        success[(r["policy"], r["arm"])] += r["success"]
    assert success == {
        ("scripted", "drift"): 2,
        ("scripted", "control"): 2,
        ("scripted_oblivious", "drift"): 0,
        ("scripted_oblivious", "control"): 2,
    }
    drifts = read_rows(arms_run / "results/drifts.parquet")
    assert drifts and {r["arm"] for r in drifts} == {"drift"}, "no drift fires in the control arm"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_drift_cost_table_and_headline(arms_run):
    with open(arms_run / "results/tables/v1_drift_cost.csv", newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["metric"] == "success" and row["column"] == "overall"]
    by_arm = {
        (row["subject"], row["arm"]): (float(row["mean"]), int(row["matched_episodes"])) for row in rows
    }
    assert by_arm == {
        ("scripted", "drift"): (1.0, 2),
        ("scripted", "control"): (1.0, 2),
        ("scripted", "drift - control"): (0.0, 2),
        ("scripted_oblivious", "drift"): (0.0, 2),
        ("scripted_oblivious", "control"): (1.0, 2),
        ("scripted_oblivious", "drift - control"): (-1.0, 2),
    }
    summary = (arms_run / "results/summary.md").read_text()
    first_table = summary.index("\n### ")
    assert summary[first_table:].startswith("\n### Ruleset v1: what drift costs"), (
        "the v1 headline leads with it"
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_nothing_changed_nothing_to_do(arms_run):
    proc = snakemake(arms_run, "--dry-run", configfile=ARMS_CONFIG)
    assert job_counts(proc.stdout) == {}
