"""Checkpoint manifests, the metric lineage across a resume, and the step-20 go/no-go."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from schemashift.lineage import GO_NO_GO_FILE, go_no_go, read_checkpoint_manifest
from schemashift.train.checkpoints import (
    adapter_sha256,
    complete_checkpoints,
    latest_checkpoint,
    write_manifest,
)
from schemashift.train.metrics import MetricsLog, write_go_no_go


def _save(run_dir, step, weights=b"w"):
    folder = run_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(weights + str(step).encode())
    return folder


def test_manifest_names_the_adapter_bytes_and_the_run(tmp_path):
    folder = _save(tmp_path, 25)
    manifest = write_manifest(
        folder, 25, base_model="m", ruleset="v1", reward="v1", config_hash="c", git_sha="g"
    )
    assert manifest == read_checkpoint_manifest(folder)
    assert manifest["adapter_sha256"] == adapter_sha256(folder)
    assert (manifest["step"], manifest["base_model"], manifest["reward"]) == (25, "m", "v1")


def test_only_checkpoints_with_a_matching_manifest_count_as_complete(tmp_path):
    for step in (25, 50):
        write_manifest(_save(tmp_path, step), step)
    _save(tmp_path, 75)  # killed before its manifest was written
    tampered = _save(tmp_path, 100)
    write_manifest(tampered, 100)
    (tampered / "adapter_model.safetensors").write_bytes(b"changed later")
    (tmp_path / "checkpoint-x").mkdir()
    assert list(complete_checkpoints(tmp_path)) == [25, 50]
    assert latest_checkpoint(tmp_path)[0] == 50
    assert latest_checkpoint(tmp_path / "missing") is None


def test_a_folder_without_weights_is_an_error_naming_it(tmp_path):
    (tmp_path / "checkpoint-5").mkdir()
    with pytest.raises(FileNotFoundError, match="no adapter weights"):
        adapter_sha256(tmp_path / "checkpoint-5")


def _row(step, reward):
    return {
        "step": step,
        "reward_mean": reward,
        "reward_std": 0.1,
        "reward_min": reward - 0.1,
        "reward_max": reward + 0.1,
        "loss": 0.5,
    }


def test_a_resume_supersedes_the_lost_steps_and_the_lineage_has_each_step_once(tmp_path):
    log = MetricsLog(tmp_path, "run1")
    for step in range(1, 8):
        log.append(_row(step, step / 10))
    with (tmp_path / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 8, "rew')  # torn by a kill mid-write
    assert log.resume_from(5) == 2
    for step in (6, 7, 8):
        log.append(_row(step, step))
    lineage = log.lineage()
    assert [row["step"] for row in lineage] == list(range(1, 9))
    assert [row["reward_mean"] for row in lineage][5:] == [6, 7, 8]
    table = pq.read_table(log.write_parquet())
    rows = table.to_pylist()
    assert len(rows) == 10
    assert sorted(row["step"] for row in rows if row["superseded"]) == [6, 7]
    assert {row["train_run"] for row in rows} == {"run1"}
    assert table.schema.metadata[b"schemashift.table"] == b"training_metrics"


def test_go_no_go_proceeds_on_a_rising_varied_reward(tmp_path):
    rows = [_row(step, step / 100) for step in range(1, 21)]
    verdict = write_go_no_go(tmp_path, rows)
    assert verdict["decision"] == "PROCEED" and all(verdict["checks"].values())
    assert json.loads((tmp_path / GO_NO_GO_FILE).read_text()) == verdict


@pytest.mark.parametrize(
    ("rewards", "failed"),
    [
        ([0.5 - step / 100 for step in range(1, 21)], "reward_trending_up"),
        ([-1 + step / 100 for step in range(1, 21)], "any_reward_positive"),
    ],
)
def test_go_no_go_stops_when_a_check_fails(rewards, failed):
    rows = [{**_row(step, reward), "reward_max": reward} for step, reward in enumerate(rewards, 1)]
    verdict = go_no_go(rows)
    assert verdict["decision"] == "STOP AND DEBUG" and not verdict["checks"][failed]


def test_go_no_go_sees_a_stuck_reward_and_waits_for_step_20():
    stuck = [
        {"step": s, "reward_mean": 0.0, "reward_std": 0.0, "reward_min": 0.0, "reward_max": 0.0}
        for s in range(1, 21)
    ]
    assert go_no_go(stuck)["checks"]["not_stuck"] is False
    assert go_no_go(stuck[:19]) is None


def test_the_run_index_names_the_complete_checkpoints_and_the_report_reads_it(tmp_path):
    """What the trainer writes beside its checkpoints is what the report builds the run from:
    identity, planned and complete checkpoints (an interrupted save is not one), the report step
    and the description."""
    from schemashift import lineage
    from schemashift.report.analysis import indexed_run
    from schemashift.runs.contract import resolve_run
    from schemashift.train.trainer import write_run_index

    config = {
        "train": {
            "defaults": {},
            "runs": {
                "r": {
                    "base_model": "some/model",
                    "ruleset": "v1",
                    "split": "train",
                    "reward": "binary",
                    "report_step": 2,
                    "description": "the run under test",
                    "overrides": {"max_steps": 6, "save_steps": 2},
                }
            },
        }
    }
    run = resolve_run(config, "r")
    for step in (2, 4):
        write_manifest(_save(tmp_path, step), step, train_run="r")
    _save(tmp_path, 6)  # interrupted: weights without a manifest
    written = write_run_index(tmp_path, run)
    assert lineage.read_run_index(tmp_path) == written
    assert [c["step"] for c in written["checkpoints"]] == [2, 4]
    assert (
        written["checkpoints"][1]["adapter_sha256"]
        == read_checkpoint_manifest(tmp_path / "checkpoint-4")["adapter_sha256"]
    )
    reported = indexed_run(written)
    assert (reported.name, reported.base_model, reported.reward, reported.split) == (
        "r",
        "some/model",
        "binary",
        "train",
    )
    assert (reported.steps, reported.trained_step, reported.description) == (
        [2, 4, 6],
        2,
        "the run under test",
    )
