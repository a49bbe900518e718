"""`schemashift validate`: a workflow-shaped results folder (cells by `run`, the manifest and
merged tables by `aggregate`) is verified; a tampered score, merged row or setting is the
difference printed, with status 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemashift.cli import main
from schemashift.rollout import io, resultset


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("validate") / "results"
    for ruleset in ("legacy", "v1"):
        for policy in ("oracle", "naive_heuristic"):
            out = root / "cells" / ruleset / policy
            assert (
                main(["run", "--ruleset", ruleset, "--policy", policy, "--seeds", "0-1", "--out", str(out)])
                == 0
            )
    merged = ["--out-episodes", str(root / "episodes.parquet"), "--out-drifts", str(root / "drifts.parquet")]
    assert (
        main(
            ["aggregate", "--cells", str(root / "cells"), *merged, "--manifest", str(root / "manifest.json")]
        )
        == 0
    )
    return root


def copy(results: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(results, tmp_path / "results"))


def edit_rows(path: Path, edit) -> None:
    """Rewrite a Parquet file with `edit` applied to its first row, its schema (and result-set id) kept."""
    table = pq.read_table(path)
    rows = table.to_pylist()
    edit(rows[0])
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


def validate(folder: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["validate", str(folder)])
    return status, capsys.readouterr().out


def test_a_results_folder_is_verified(results, capsys):
    status, out = validate(results, capsys)
    assert status == 0
    assert out.startswith("verified: 4 result set(s) re-graded") and "manifest.json agree" in out


def test_a_tampered_score_is_the_difference(results, tmp_path, capsys):
    folder = copy(results, tmp_path)
    edit_rows(
        folder / "cells" / "v1" / "naive_heuristic" / "episodes.parquet", lambda row: row.update(score=0.75)
    )
    status, out = validate(folder, capsys)
    assert status == 1
    assert out.startswith("difference: ") and "v1/naive_heuristic/" in out
    assert "score recorded 0.75, re-graded 0.0" in out


def test_a_tampered_merged_table_is_the_difference(results, tmp_path, capsys):
    folder = copy(results, tmp_path)
    edit_rows(folder / "episodes.parquet", lambda row: row.update(score=row["score"] + 0.25))
    status, out = validate(folder, capsys)
    assert status == 1 and f"{folder / 'episodes.parquet'}: " in out and ": score " in out


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (
            lambda m: m["cells"][0].update(harness="tools"),
            "is 'graded' there, the records hold no such episode (theirs has harness None)",
        ),
        (
            lambda m: m["sources"].update(generation_config=['{"temperature": 0.0}']),
            "sources.generation_config",
        ),
        (
            lambda m: m["sources"].update(ruleset_version=["1"]),
            "sources.ruleset_version ['1'], the records show",
        ),
        (lambda m: m["inputs"].update(graded=7), "inputs.graded 7, the records show 48"),
    ],
)
def test_a_tampered_setting_is_the_difference(results, tmp_path, capsys, tamper, expected):
    folder = copy(results, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    tamper(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    status, out = validate(folder, capsys)
    assert status == 1 and expected in out, out


def test_a_tampered_trajectory_is_the_difference(results, tmp_path, capsys):
    """An action edited in a trajectory replays to another outcome than the recorded row."""
    folder = copy(results, tmp_path)
    path = folder / "cells" / "legacy" / "oracle" / "trajectories.jsonl.gz"
    set_id = resultset.set_id(path).encode()
    trajectories = list(io.read_jsonl(path))
    trajectories[0]["steps"] = trajectories[0]["steps"][-1:]  # only the final complete_task
    io.atomic_write(path, io.jsonl_gz_writer(trajectories, {resultset.GZIP_SUBFIELD: set_id}))
    status, out = validate(folder, capsys)
    assert status == 1 and "legacy/oracle/" in out and "re-graded" in out


def test_a_folder_without_result_sets_is_a_difference(tmp_path, capsys):
    status, out = validate(tmp_path, capsys)
    assert status == 1 and "no result set" in out
