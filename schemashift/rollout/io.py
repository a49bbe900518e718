"""Atomic, deterministic result files: Parquet tables, gzip'ed JSON lines and JSON documents.

A writer never leaves a half-written file under the final name: it writes a temporary file in
the same directory, fsyncs it and renames it over the target, so a reader (or a resumed run)
sees either the old file or the new one. pyarrow is imported inside the Parquet functions only.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import secrets
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

PathLike = str | os.PathLike[str]


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], None]) -> None:
    """Call `write` on a fresh binary file that replaces `path` only once it is complete and synced.

    Parent directories are created. On any exception, KeyboardInterrupt included, the temporary
    file is removed and an existing file at `path` is left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _create_temp(target: Path) -> tuple[Path, int]:
    # os.open with mode 0o666 lets the umask decide the final permissions (mkstemp would give 0o600).
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; directories cannot be opened for syncing on some platforms."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


GZIP_MAGIC = b"\x1f\x8b"


def write_parquet(path: PathLike, table: pa.Table) -> None:
    """Write `table` (schema metadata included) as a zstd-compressed Parquet file."""
    import pyarrow.parquet as pq

    atomic_write(path, lambda f: pq.write_table(table, f, compression="zstd"))


def write_jsonl_gz(path: PathLike, objects: Iterable[Any]) -> int:
    """Write one compact JSON document per line, gzip'ed; returns the number of lines.

    The output is byte-for-byte reproducible: the gzip header carries no timestamp or file name.
    """
    count = 0

    def write(f: IO[bytes]) -> None:
        nonlocal count
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=6) as gz:
            for obj in objects:
                gz.write(_dumps(obj).encode("utf-8") + b"\n")
                count += 1

    atomic_write(path, write)
    return count


def write_json(path: PathLike, obj: Any) -> None:
    """Write one JSON document, indented for people to read, with a final newline."""
    text = json.dumps(obj, ensure_ascii=False, indent=2) + "\n"
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def read_jsonl(path: PathLike) -> Iterator[dict[str, Any]]:
    """Yield the JSON object on each line of a JSON-lines file, gzip'ed or plain.

    A malformed line raises ValueError naming the file and line.
    """
    with open(path, "rb") as probe:
        compressed = probe.read(2) == GZIP_MAGIC
    with gzip.open(path, "rb") if compressed else open(path, "rb") as gz:
        number = 0
        try:
            for number, line in enumerate(gz, start=1):
                try:
                    obj = json.loads(line.decode("utf-8"))
                except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                    raise ValueError(f"{path}: line {number}: malformed JSON: {exc}") from None
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}: line {number}: not a JSON object but {type(obj).__name__}")
                yield obj
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise ValueError(f"{path}: corrupt gzip data after line {number}: {exc}") from None


def read_parquet_rows(path: PathLike) -> list[dict[str, Any]]:
    """All rows of a Parquet file as dicts, nulls as None."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
