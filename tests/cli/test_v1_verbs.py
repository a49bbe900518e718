"""`run`, `replay` and `scenarios` on the v1 ruleset: splits, families, compositions, v1 columns."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemashift.cli import main

FAMILIES = [
    "onboard_new_hire",
    "meeting_invite_blast",
    "customer_lookup",
    "customer_escalation",
    "weekly_report",
    "event_cleanup",
]


def test_scenarios_lists_families_tiers_splits_and_held_out(capsys):
    assert main(["scenarios", "--ruleset", "v1", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in listing["scenarios"]] == FAMILIES
    assert [s["tier"] for s in listing["scenarios"]] == ["easy"] * 3 + ["medium"] * 3
    assert listing["splits"] == {
        "test": {"first_seed": 0, "last_seed": 9999},
        "train": {"first_seed": 10000, "last_seed": None},
    }
    assert listing["held_out"]["test-only drift kinds"] == ["error_code_remap", "transient_fault"]
    assert listing["compositions"] == ["composed_pair", "composed_triple"]
    assert main(["scenarios", "--ruleset", "v1"]) == 0
    table = capsys.readouterr().out
    assert "split test: seeds 0-9999" in table and "split train: seeds 10000-..." in table
    assert "composed_pair" in table
    assert main(["scenarios", "--ruleset", "v1", "--compositions", "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["scenarios"]][-2:] == [
        "composed_pair",
        "composed_triple",
    ]


def test_run_takes_seeds_from_a_split(tmp_path: Path, capsys):
    out = tmp_path / "train"
    code = main(["run", "--ruleset", "v1", "--policy", "oracle", "--split", "train", "--scenarios",
                 "customer_lookup", "--out", str(out)])  # fmt: skip
    assert code == 0
    rows = pq.read_table(out / "episodes.parquet").to_pylist()
    assert [r["seed"] for r in rows] == list(range(10000, 10005))
    assert all(r["split"] == "train" and r["success"] and r["training_reward"] > 0 for r in rows)
    assert all(r["shaped_total"] is None and r["binary"] is None for r in rows)
    assert "success 5/5" in capsys.readouterr().out


def test_run_with_compositions_adds_them_to_all(tmp_path: Path):
    out = tmp_path / "all"
    assert main(["run", "--ruleset", "v1", "--policy", "oracle", "--seeds", "0", "--compositions",
                 "--out", str(out)]) == 0  # fmt: skip
    scenarios = [r["scenario"] for r in pq.read_table(out / "episodes.parquet").to_pylist()]
    assert scenarios == FAMILIES + ["composed_pair", "composed_triple"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--split", "train", "--seeds", "3"], "not in split 'train'"),
        (["--split", "dev"], "unknown split 'dev'"),
        (["--ruleset", "legacy", "--split", "test"], "has no seed splits"),
        (["--ruleset", "legacy", "--compositions"], "has no generated compositions"),
    ],
)
def test_run_rejects_bad_splits(tmp_path: Path, capsys, args, message):
    base = ["run", "--ruleset", "v1", "--policy", "oracle", "--out", str(tmp_path / "x")]
    if "--ruleset" in args:
        base = ["run", "--policy", "oracle", "--out", str(tmp_path / "x")]
    assert main(base + args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_replay_final_carries_the_v1_columns(tmp_path: Path, capsys):
    actions = tmp_path / "actions.jsonl"
    actions.write_text(
        "\n".join(
            json.dumps(a)
            for a in [
                {"type": "inspect_schema", "inspect": {"tool": "crm"}},
                "not an action",
                {"type": "complete_task", "complete": {"summary": "nothing"}},
            ]
        )
    )
    assert main(["replay", "--ruleset", "v1", "--scenario", "customer_lookup", "--seed", "5",
                 "--actions", str(actions)]) == 0  # fmt: skip
    final = json.loads(capsys.readouterr().out)["final"]
    assert final["success"] is False and final["score"] == 0.0 and final["invalid_actions"] == 1
    assert final["training_reward"] <= 0 and len(final["schedule_hash"]) == 16
    assert final["shaped_total"] is None and final["steps"] == 3


def test_run_plays_each_cell_in_every_arm_asked_for_and_replay_replays_its_arm(tmp_path: Path, capsys):
    """`--arms drift,control`: each (scenario, seed) twice, the control row without drifts; the
    rows' config digest does not depend on the arms played beside them; `replay --trajectory`
    re-scores each in its own arm, `--arm` selecting it."""
    out, alone = tmp_path / "both", tmp_path / "alone"
    cells = ["--ruleset", "v1", "--policy", "oracle", "--scenarios", "customer_lookup", "--seeds", "0-1"]
    assert main(["run", *cells, "--arms", "drift,control", "--out", str(out)]) == 0
    rows = pq.read_table(out / "episodes.parquet").to_pylist()
    assert [(r["seed"], r["arm"]) for r in rows] == [
        (0, "drift"),
        (0, "control"),
        (1, "drift"),
        (1, "control"),
    ]
    assert all(r["success"] for r in rows)
    assert [r["drifts_fired"] == 0 for r in rows] == [False, True, False, True]
    assert {r["arm"] for r in pq.read_table(out / "drifts.parquet").to_pylist()} == {"drift"}
    assert main(["run", *cells, "--out", str(alone)]) == 0
    drift_alone = pq.read_table(alone / "episodes.parquet").to_pylist()
    assert [r["arm"] for r in drift_alone] == ["drift", "drift"]
    assert {r["config_hash"] for r in rows} == {r["config_hash"] for r in drift_alone}
    capsys.readouterr()
    trajectories = str(out / "trajectories.jsonl.gz")
    base = ["replay", "--trajectory", trajectories, "--scenario", "customer_lookup", "--seed", "0"]
    assert main(base) == 2  # two arms match
    assert "--arm" in capsys.readouterr().err
    for arm, row in (("control", rows[1]), ("drift", rows[0])):
        assert main([*base, "--arm", arm]) == 0
        final = json.loads(capsys.readouterr().out)["final"]
        assert final["score"] == row["score"] and final["success"] is True


def test_an_arm_a_ruleset_does_not_play_is_refused_before_anything_runs(tmp_path: Path, capsys):
    out = tmp_path / "never"
    assert main(["run", "--policy", "oracle", "--arms", "drift,control", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--arms: ruleset 'legacy' does not play the control arm (its arms: drift)" in err
    assert not (out / "episodes.parquet").exists()
