"""Constants and helpers of the report tests (the fixtures that use them are in conftest.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from schemashift.cli import main
from schemashift.rollout import records, resultset

SCENARIOS = ("E1_onboard_new_hire", "M1_customer_escalation")
POLICIES = ("naive_heuristic", "policy_aware_heuristic", "oracle")
SEEDS = (0, 1)
CONFIG_HASH = "cfg-report-tests"
#: the infra_error cell: oracle on M1, seed 2
INFRA_CELL = {
    "ruleset": "legacy",
    "policy": "oracle",
    "scenario": "M1_customer_escalation",
    "seed": 2,
    "sample_index": 0,
}
#: expected cells that never ran: a seed of a run policy and a policy that never ran at all
MISSING_CELLS = [
    {
        "ruleset": "legacy",
        "policy": "naive_heuristic",
        "scenario": "E1_onboard_new_hire",
        "seed": 2,
        "sample_index": 0,
    },
    {
        "ruleset": "legacy",
        "policy": "hf:tiny",
        "scenario": "E1_onboard_new_hire",
        "seed": 0,
        "sample_index": 0,
    },
]
BOOTSTRAP = "200"


def run_cell(out: Path, policy: str, scenarios: tuple[str, ...] = SCENARIOS, seeds: str = "0-1") -> None:
    status = main(
        [
            "run",
            "--ruleset",
            "legacy",
            "--policy",
            policy,
            "--scenarios",
            ",".join(scenarios),
            "--seeds",
            seeds,
            "--out",
            str(out),
            "--sweep-id",
            f"report-tests-{policy}",
            "--config-hash",
            CONFIG_HASH,
        ]
    )
    assert status == 0


def write_cell(out: Path, episodes: list[dict[str, Any]], drifts: list[dict[str, Any]] | None = None) -> Path:
    """A result directory of hand-made rows, written as one set (with no trajectories)."""
    resultset.write(
        out,
        records.to_table(episodes, records.EPISODE_COLUMNS),
        records.to_table(drifts or [], records.DRIFT_COLUMNS),
        [],
    )
    return out


def infra_row(**overrides: Any) -> dict[str, Any]:
    return {
        **INFRA_CELL,
        "sweep_id": "report-tests-infra",
        "ruleset_version": "1",
        "env_version": "0.1.0",
        "tier": "medium",
        "family": "M1_customer_escalation",
        "status": "infra_error",
        "error": "ConnectionError: backend unreachable",
        "config_hash": CONFIG_HASH,
        **overrides,
    }


def expected_cells() -> list[dict[str, Any]]:
    played = [
        {"ruleset": "legacy", "policy": p, "scenario": s, "seed": seed, "sample_index": 0}
        for p in POLICIES
        for s in SCENARIOS
        for seed in SEEDS
    ]
    return [*played, INFRA_CELL, *MISSING_CELLS]


def report_args(part: str, aggregated: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "report",
        part,
        "--episodes",
        str(aggregated["episodes"]),
        "--drifts",
        str(aggregated["drifts"]),
        "--manifest",
        str(aggregated["manifest"]),
        "--out",
        str(out),
        *extra,
    ]


def error_line(capsys: pytest.CaptureFixture[str], verb: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines and lines[-1].startswith(f"schemashift {verb}: error: "), captured.err
    return lines[-1]


def read_metrics(db: str | Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Run -> step -> metrics of an exported database, read with sqlite3 alone: what Trackio
    stored, not what our export meant to store."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        for run, step, metrics in conn.execute("SELECT run_name, step, metrics FROM metrics ORDER BY id"):
            out.setdefault(run, {})[int(step)] = json.loads(metrics)
    return out
