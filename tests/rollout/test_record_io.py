"""Atomic result files: round trips, determinism, and failures that leave the old file intact."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemashift.rollout import io, records

OBJECTS = [{"a": 1, "text": "naïve — ünïcode"}, {"b": [1.5, None, True]}, {}]


def _leftovers(directory: Path, keep: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != keep)


def test_jsonl_gz_round_trip_counts_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    assert io.write_jsonl_gz(path, iter(OBJECTS)) == 3
    assert list(io.read_jsonl(path)) == OBJECTS


def test_jsonl_gz_is_deterministic_and_compact(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "sub" / "b.jsonl.gz"
    io.write_jsonl_gz(first, OBJECTS)
    io.write_jsonl_gz(second, OBJECTS)
    data = first.read_bytes()
    assert data == second.read_bytes()
    assert data[4:8] == b"\0\0\0\0", "gzip mtime must be 0"
    assert not data[3] & 0x08, "gzip header must not carry a file name"
    text = gzip.decompress(data).decode("utf-8")
    assert text.splitlines()[0] == '{"a":1,"text":"naïve — ünïcode"}'
    assert text.endswith("}\n")


def test_write_json_is_readable_json_with_a_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "manifest.json"
    io.write_json(path, {"name": "ü", "n": [1, 2]})
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == {"name": "ü", "n": [1, 2]}
    assert "ü" in text and text.endswith("}\n")


def test_parquet_round_trip_keeps_rows_and_schema_metadata(tmp_path: Path) -> None:
    rows = [{"sweep_id": "r", "seed": 1, "score": 0.5, "success": True}, {"sweep_id": "r", "seed": 2}]
    path = tmp_path / "episodes.parquet"
    io.write_parquet(path, records.to_table(rows, records.EPISODE_COLUMNS))
    read = io.read_parquet_rows(path)
    assert [(r["seed"], r["score"], r["success"], r["record_version"]) for r in read] == [
        (1, 0.5, True, records.RECORD_SCHEMA_VERSION),
        (2, None, None, records.RECORD_SCHEMA_VERSION),
    ]
    assert set(read[0]) == {c.name for c in records.EPISODE_COLUMNS}
    version = pq.read_schema(path).metadata[b"schemashift.record_version"]
    assert version == str(records.RECORD_SCHEMA_VERSION).encode()


def test_new_files_get_umask_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        io.write_json(tmp_path / "x.json", 1)
    finally:
        os.umask(old)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o644


def _failing_objects(exc: BaseException) -> Iterator[dict[str, int]]:
    yield {"new": 1}
    raise exc


@pytest.mark.parametrize("exc", [RuntimeError("policy crashed"), KeyboardInterrupt()])
def test_an_interrupted_jsonl_write_keeps_the_old_file(tmp_path: Path, exc: BaseException) -> None:
    path = tmp_path / "t.jsonl.gz"
    io.write_jsonl_gz(path, [{"old": 1}])
    before = path.read_bytes()
    with pytest.raises(type(exc)):
        io.write_jsonl_gz(path, _failing_objects(exc))
    assert path.read_bytes() == before
    assert _leftovers(tmp_path, path.name) == []


def test_an_unserialisable_json_document_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    io.write_json(path, {"old": True})
    with pytest.raises(TypeError):
        io.write_json(path, {"new": object()})
    assert json.loads(path.read_text()) == {"old": True}
    assert _leftovers(tmp_path, path.name) == []


def test_a_failed_parquet_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "e.parquet"
    io.write_parquet(path, records.to_table([{"seed": 1}], records.EPISODE_COLUMNS))
    before = path.read_bytes()
    with pytest.raises(Exception):  # noqa: B017 - whatever pyarrow raises for a non-table
        io.write_parquet(path, {"seed": [2]})  # type: ignore[arg-type]
    assert path.read_bytes() == before
    assert _leftovers(tmp_path, path.name) == []


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_failure_while_committing_removes_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    path = tmp_path / "m.json"
    io.write_json(path, "old")

    def broken(*args: object) -> None:
        raise OSError(f"{step} failed")

    monkeypatch.setattr(io.os, step, broken)
    with pytest.raises(OSError, match=f"{step} failed"):
        io.write_json(path, "new")
    monkeypatch.undo()
    assert json.loads(path.read_text()) == "old"
    assert _leftovers(tmp_path, path.name) == []


def test_without_an_old_file_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        io.write_jsonl_gz(tmp_path / "t.jsonl.gz", _failing_objects(RuntimeError()))
    assert list(tmp_path.iterdir()) == []


def _gz(path: Path, payload: bytes) -> Path:
    path.write_bytes(gzip.compress(payload))
    return path


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'{"a":1}\n{"a":\n', r"line 2: malformed JSON"),
        (b'{"a":1}\n\n{"b":2}\n', r"line 2: malformed JSON"),
        (b'{"a":1}\n{"a":1}\n[1,2]\n', r"line 3: not a JSON object but list"),
        (b'{"a":"\xff"}\n', r"line 1: malformed JSON"),
    ],
)
def test_a_malformed_line_is_named_with_file_and_line(tmp_path: Path, payload: bytes, message: str) -> None:
    path = _gz(tmp_path / "bad.jsonl.gz", payload)
    with pytest.raises(ValueError, match=message) as info:
        list(io.read_jsonl(path))
    assert str(path) in str(info.value)


def test_lines_before_a_malformed_one_are_still_yielded(tmp_path: Path) -> None:
    reader = io.read_jsonl(_gz(tmp_path / "bad.jsonl.gz", b'{"a":1}\nnot json\n'))
    assert next(reader) == {"a": 1}
    with pytest.raises(ValueError, match="line 2"):
        next(reader)


def test_a_truncated_gzip_file_raises_value_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    io.write_jsonl_gz(path, [{"i": i, "pad": "x" * 50} for i in range(200)])
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(ValueError, match=r"cut\.jsonl\.gz: corrupt gzip data after line \d+"):
        list(io.read_jsonl(path))


def test_plain_json_lines_are_read_whatever_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl.gz"
    path.write_text('{"a": 1}\n{"b": 2}\n')
    assert list(io.read_jsonl(path)) == [{"a": 1}, {"b": 2}]


def test_importing_io_does_not_import_pyarrow() -> None:
    code = "import sys, schemashift.rollout.io; print('pyarrow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
