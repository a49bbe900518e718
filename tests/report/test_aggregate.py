"""`schemashift aggregate`: merging cells, validating their schemas, and the manifest."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from report_helpers import (
    CONFIG_HASH,
    INFRA_CELL,
    MISSING_CELLS,
    POLICIES,
    SCENARIOS,
    error_line,
    infra_row,
    run_cell,
    write_cell,
)

import schemashift
from schemashift import provenance
from schemashift.cli import main
from schemashift.rollout import io, records, resultset

KEYS = ("ruleset", "policy", "scenario", "seed", "sample_index")


def aggregate(cells: list[Path], out: Path, *extra: str) -> int:
    return main(
        [
            "aggregate",
            "--cells",
            *map(str, cells),
            "--out-episodes",
            str(out / "episodes.parquet"),
            "--out-drifts",
            str(out / "drifts.parquet"),
            *extra,
        ]
    )


def keys(rows: list[dict[str, Any]], names: tuple[str, ...] = KEYS) -> list[tuple[Any, ...]]:
    return [tuple(row[k] for k in names) for row in rows]


def test_merges_every_cell_in_a_deterministic_order(cells_root: Path, aggregated: dict[str, Path]) -> None:
    rows = io.read_parquet_rows(aggregated["episodes"])
    assert len(rows) == len(POLICIES) * len(SCENARIOS) * 2 + 1
    assert keys(rows) == sorted(keys(rows))
    assert [r["policy"] for r in rows[:4]] == ["naive_heuristic"] * 4
    inputs = [
        row for path in sorted(cells_root.rglob("episodes.parquet")) for row in io.read_parquet_rows(path)
    ]
    assert sorted(keys(inputs)) == keys(rows)
    drifts = io.read_parquet_rows(aggregated["drifts"])
    drift_inputs = [row for path in cells_root.rglob("drifts.parquet") for row in io.read_parquet_rows(path)]
    assert len(drifts) == len(drift_inputs) > 0
    drift_keys = keys(drifts, (*KEYS, "drift_index"))
    assert drift_keys == sorted(drift_keys)
    assert pq.read_schema(aggregated["episodes"]).equals(records.episode_schema(), check_metadata=True)
    assert pq.read_schema(aggregated["drifts"]).equals(records.drift_schema(), check_metadata=True)


def test_cell_directories_or_a_parent_give_the_same_tables(
    cells_root: Path, aggregated: dict[str, Path], tmp_path: Path
) -> None:
    cell_dirs = sorted(p.parent for p in cells_root.rglob("episodes.parquet"))
    assert aggregate(list(reversed(cell_dirs)), tmp_path) == 0
    for name in ("episodes", "drifts"):
        assert pq.read_table(tmp_path / f"{name}.parquet").equals(pq.read_table(aggregated[name]))


def test_manifest_records_provenance_and_cell_statuses(aggregated: dict[str, Path]) -> None:
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    sha = provenance.git_sha()
    assert manifest["schemashift_version"] == schemashift.__version__
    assert manifest["record_schema_version"] == records.RECORD_SCHEMA_VERSION
    assert manifest["git_sha"] == (sha.removesuffix("-dirty") if sha else None)
    assert manifest["git_dirty"] == (sha.endswith("-dirty") if sha else None)
    assert manifest["config_hash"] == CONFIG_HASH
    assert manifest["python"].count(".") == 2
    assert "pyarrow" in manifest["packages"]
    assert manifest["image"] is None
    statuses = {tuple(c[k] for k in KEYS): c["status"] for c in manifest["cells"]}
    assert statuses[tuple(INFRA_CELL[k] for k in KEYS)] == "infra_error"
    for cell in MISSING_CELLS:
        assert statuses[tuple(cell[k] for k in KEYS)] == "missing"
    assert statuses["legacy", "oracle", "M1_customer_escalation", 0, 0] == "graded"
    assert manifest["counts"] == {"graded": 12, "infra_error": 1, "missing": 2}
    assert len(manifest["cells"]) == 15
    assert manifest["inputs"]["episodes"] == 13 and manifest["inputs"]["not_expected"] == 0


def test_manifest_includes_the_container_image_next_to_it(cells_root: Path, tmp_path: Path) -> None:
    image = {"image": "schemashift-env", "digest": "sha256:abc"}
    (tmp_path / "containers").mkdir()
    (tmp_path / "containers" / "env.image.json").write_text(json.dumps(image), encoding="utf-8")
    assert aggregate([cells_root], tmp_path, "--manifest", str(tmp_path / "manifest.json")) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["image"] == image
    # without --expected every cell with rows is listed
    assert manifest["counts"] == {"graded": 12, "infra_error": 1, "missing": 0}
    assert manifest["config_hash"] is None


def test_rejects_a_cell_with_another_record_version(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "cells" / "old"
    shutil.copytree(cells_root / "legacy" / "oracle", old)
    table = pq.read_table(old / "episodes.parquet")
    metadata = {**table.schema.metadata, records.VERSION_KEY.encode(): b"0"}
    io.write_parquet(old / "episodes.parquet", table.replace_schema_metadata(metadata))
    assert aggregate([tmp_path / "cells"], tmp_path / "out") == 2
    line = error_line(capsys, "aggregate")
    assert str(old / "episodes.parquet") in line
    assert "record schema version 0" in line
    assert not (tmp_path / "out" / "episodes.parquet").exists()


def test_rejects_a_file_without_the_declared_columns(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = tmp_path / "cell"
    shutil.copytree(cells_root / "legacy" / "oracle", cell)
    io.write_parquet(cell / "drifts.parquet", pq.read_table(cell / "drifts.parquet").drop_columns(["kind"]))
    assert aggregate([cell], tmp_path / "out") == 2
    line = error_line(capsys, "aggregate")
    assert str(cell / "drifts.parquet") in line and "missing column(s) kind" in line


def test_rejects_an_episode_found_twice(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(cells_root / "legacy" / "oracle", tmp_path / "copy")
    assert aggregate([cells_root, tmp_path / "copy"], tmp_path / "out") == 2
    assert "also in" in error_line(capsys, "aggregate")


def test_an_empty_set_of_cells_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert aggregate([tmp_path / "empty"], tmp_path / "out") == 2
    assert "no cells" in error_line(capsys, "aggregate")
    assert aggregate([tmp_path / "absent"], tmp_path / "out") == 2
    assert "no such directory" in error_line(capsys, "aggregate")


def test_a_malformed_expected_file_is_an_error(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = tmp_path / "expected.json"
    expected.write_text(
        json.dumps([{"ruleset": "legacy", "policy": "oracle", "scenario": "E1"}]), encoding="utf-8"
    )
    assert aggregate([cells_root], tmp_path / "out", "--expected", str(expected)) == 2
    assert "entry 0: seed must be an integer" in error_line(capsys, "aggregate")


def test_an_episode_with_an_unknown_status_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cell(tmp_path / "cell", [infra_row(status="skipped")])
    assert aggregate([tmp_path / "cell"], tmp_path / "out") == 2
    assert "unknown episode status 'skipped'" in error_line(capsys, "aggregate")


def test_aggregate_imports_no_pandas_and_runs_as_a_module(cells_root: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from schemashift.cli import main\n"
        f"status = main(['aggregate', '--cells', {str(cells_root)!r}, '--out-episodes', "
        f"{str(tmp_path / 'e.parquet')!r}, '--out-drifts', {str(tmp_path / 'd.parquet')!r}])\n"
        "assert status == 0, status\n"
        "print(sorted(m for m in ('pandas', 'matplotlib', 'seaborn') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"
    result = subprocess.run(
        [sys.executable, "-m", "schemashift.cli", "aggregate", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "--out-episodes" in result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "schemashift.cli", "aggregate"], capture_output=True, text=True
    )
    assert result.returncode == 2


# -- result sets: a directory's files come from one write ------------------------------------------


@pytest.mark.parametrize("swapped", ["drifts.parquet", "trajectories.jsonl.gz", "episodes.parquet"])
def test_refuses_a_directory_whose_files_come_from_different_writes(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], swapped: str
) -> None:
    # the same cell written twice: rows alike, but two writes
    cell = tmp_path / "cells" / "oracle"
    shutil.copytree(cells_root / "legacy" / "oracle", cell)
    again = tmp_path / "again"
    run_cell(again, "oracle")
    shutil.copyfile(again / swapped, cell / swapped)
    assert aggregate([tmp_path / "cells"], tmp_path / "out") == 2
    line = error_line(capsys, "aggregate")
    assert f"{cell}: mixed result set" in line and "different writes" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("removed", ["drifts.parquet", "trajectories.jsonl.gz"])
def test_refuses_an_incomplete_directory(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], removed: str
) -> None:
    cell = tmp_path / "cell"
    shutil.copytree(cells_root / "legacy" / "oracle", cell)
    (cell / removed).unlink()
    assert aggregate([cell], tmp_path / "out") == 2
    assert f"incomplete result set, no {removed}" in error_line(capsys, "aggregate")


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "cut mid-line"])
@pytest.mark.parametrize("examples", [False, True])
def test_refuses_a_truncated_or_corrupt_trajectories_file(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, examples: bool
) -> None:
    """Always, not only where --out-examples reads the trajectories."""
    cell = tmp_path / "cell"
    shutil.copytree(cells_root / "legacy" / "oracle", cell)
    path = cell / "trajectories.jsonl.gz"
    data = path.read_bytes()
    if damage == "truncated":  # a gzip stream cut short: header (and set id) intact
        damaged = data[: len(data) // 2]
    elif damage == "corrupt":  # one flipped byte in the compressed data: the CRC disagrees
        middle = len(data) // 2
        damaged = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
    else:  # a complete gzip stream whose text stops inside a line
        text = gzip.decompress(data)
        damaged = _gzip_with_extra(text[: len(text) - 10], io.gzip_extra(path))
    path.write_bytes(damaged)
    out = tmp_path / "out"
    extra_args = ["--out-examples", str(out / "examples.json")] if examples else []
    assert aggregate([cell], out, *extra_args) == 2
    line = error_line(capsys, "aggregate")
    assert str(path) in line and "rerun this cell" in line
    assert ("truncated" in line) or ("corrupt" in line)
    assert not out.exists()


def _gzip_with_extra(text: bytes, extra: dict[bytes, bytes]) -> bytes:
    """`text` as a complete gzip stream with `extra` in its header, as a result set's writer
    makes it (so the set id still agrees)."""
    field = b"".join(key + struct.pack("<H", len(value)) + value for key, value in extra.items())
    header = io.GZIP_MAGIC + bytes([8, io.GZIP_FEXTRA]) + b"\0\0\0\0\0\xff" + struct.pack("<H", len(field))
    deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(text) + deflate.flush()
    return header + field + body + struct.pack("<II", zlib.crc32(text), len(text))


def test_refuses_files_without_a_result_set_id(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = tmp_path / "cell"
    shutil.copytree(cells_root / "legacy" / "oracle", cell)
    table = pq.read_table(cell / "drifts.parquet")
    metadata = {k: v for k, v in table.schema.metadata.items() if k != resultset.SET_KEY.encode()}
    io.write_parquet(cell / "drifts.parquet", table.replace_schema_metadata(metadata))
    assert aggregate([cell], tmp_path / "out") == 2
    assert "drifts.parquet carry no result-set id" in error_line(capsys, "aggregate")


def test_refuses_drift_rows_of_another_run(
    cells_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # one write, but rows that do not belong together (as a hand-assembled set would have)
    source = cells_root / "legacy" / "oracle"
    episodes = io.read_parquet_rows(source / "episodes.parquet")
    drifts = [{**row, "sweep_id": "another-run"} for row in io.read_parquet_rows(source / "drifts.parquet")]
    write_cell(tmp_path / "cell", episodes, drifts)
    assert aggregate([tmp_path / "cell"], tmp_path / "out") == 2
    line = error_line(capsys, "aggregate")
    assert "a drift row of sweep another-run" in line and "do not belong together" in line


def test_an_aggregate_removes_its_own_leftovers_and_nothing_else(cells_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    stale = [out / ".episodes.parquet.0badc0de.tmp", out / ".manifest.json.12345678.tmp"]
    foreign = [out / ".other.parquet.12345678.tmp", out / "notes.tmp"]
    for path in stale + foreign:
        path.write_bytes(b"partial")
    assert aggregate([cells_root], out, "--manifest", str(out / "manifest.json")) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["episodes.parquet", "drifts.parquet", "manifest.json", *(p.name for p in foreign)]
    )
