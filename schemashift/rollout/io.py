"""Atomic, deterministic result files: Parquet tables, gzip'ed JSON lines and JSON documents.

A writer never leaves a half-written file under the final name: it writes a temporary file in
the same directory, fsyncs it and renames it over the target, so a reader (or a resumed run)
sees either the old file or the new one. `write_set` does the same for files that belong
together. Temporary files are named `.<target>.<8 hex>.tmp`; a killed writer's are removed by
`remove_stale_temps`. pyarrow is imported inside the Parquet functions only.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import secrets
import struct
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
    tmp = _stage(target, write)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def write_set(writers: dict[Path, Callable[[IO[bytes]], None]], commit: Path) -> None:
    """Write files that belong together, so that `commit` names a complete set or is absent.

    Every file is written and synced under a temporary name first, so a full disk or a failing
    writer changes nothing. Then `commit` is removed, the other files are renamed into place and
    `commit` last: a kill between the renames leaves no `commit` file, never `commit` beside
    files of another set. Readers treat a set without its `commit` file as absent.
    """
    commit = Path(commit)
    if commit not in {Path(target) for target in writers}:
        raise ValueError(f"the commit file {commit} is not among the files to write")
    staged: dict[Path, Path] = {}
    try:
        for target, write in writers.items():
            staged[Path(target)] = _stage(Path(target), write)
        if commit.exists():
            commit.unlink()
            _fsync_dir(commit.parent)
        for target in [t for t in staged if t != commit] + [commit]:
            os.replace(staged.pop(target), target)
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise
    for directory in {Path(t).parent for t in writers}:
        _fsync_dir(directory)


def _stage(target: Path, write: Callable[[IO[bytes]], None]) -> Path:
    """A synced temporary file beside `target` holding what `write` wrote; removed on failure."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


_TEMP_NAME = re.compile(r"\.(.+)\.[0-9a-f]{8}\.tmp")


def remove_stale_temps(directory: PathLike, names: Iterable[str] | None = None) -> list[Path]:
    """Remove the temporary files a killed writer left for the targets `names` (default: any)
    in `directory`.

    Only files named like this module's temporaries are touched; a directory has one writer at a
    time, so any such file is a leftover. Returns what was removed.
    """
    wanted = None if names is None else set(names)
    removed = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        match = _TEMP_NAME.fullmatch(entry.name)
        if match and (wanted is None or match[1] in wanted) and entry.is_file(follow_symlinks=False):
            Path(entry.path).unlink(missing_ok=True)
            removed.append(Path(entry.path))
    return removed


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
    atomic_write(path, parquet_writer(table))


def parquet_writer(table: pa.Table) -> Callable[[IO[bytes]], None]:
    """What writes `table` as a zstd-compressed Parquet file (for atomic_write and write_set)."""

    def write(f: IO[bytes]) -> None:
        import pyarrow.parquet as pq

        pq.write_table(table, f, compression="zstd")

    return write


def write_jsonl_gz(path: PathLike, objects: Iterable[Any]) -> int:
    """Write one compact JSON document per line, gzip'ed; returns the number of lines.

    The output is byte-for-byte reproducible: the gzip header carries no timestamp or file name.
    """
    counter = [0]
    atomic_write(path, jsonl_gz_writer(objects, counter=counter))
    return counter[0]


def jsonl_gz_writer(
    objects: Iterable[Any], extra: dict[bytes, bytes] | None = None, counter: list[int] | None = None
) -> Callable[[IO[bytes]], None]:
    """What writes `objects` as gzip'ed JSON lines, with `extra` as subfields (two-byte id ->
    data) of the gzip header's extra field (RFC 1952 2.3.1.1): metadata that a reader gets from
    the first bytes without decompressing, and that gzip readers skip. `counter[0]` counts lines."""
    field = b"".join(key + struct.pack("<H", len(data)) + data for key, data in (extra or {}).items())

    def write(f: IO[bytes]) -> None:
        flags = GZIP_FEXTRA if field else 0
        # method deflate, no mtime, no extra flags, OS unknown: what GzipFile writes, plus FEXTRA
        f.write(GZIP_MAGIC + bytes([8, flags]) + b"\0\0\0\0\0\xff")
        if field:
            f.write(struct.pack("<H", len(field)) + field)
        deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        crc = size = 0
        for obj in objects:
            line = _dumps(obj).encode("utf-8") + b"\n"
            crc, size = zlib.crc32(line, crc), size + len(line)
            f.write(deflate.compress(line))
            if counter is not None:
                counter[0] += 1
        f.write(deflate.flush())
        f.write(struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF))

    return write


GZIP_FEXTRA = 0x04


def gzip_extra(path: PathLike) -> dict[bytes, bytes]:
    """The subfields of a gzip file's header extra field (none for other files)."""
    with open(path, "rb") as f:
        header = f.read(10)
        if len(header) < 10 or header[:2] != GZIP_MAGIC or not header[3] & GZIP_FEXTRA:
            return {}
        (length,) = struct.unpack("<H", f.read(2))
        field = f.read(length)
    subfields, offset = {}, 0
    while offset + 4 <= len(field):
        key, (size,) = field[offset : offset + 2], struct.unpack("<H", field[offset + 2 : offset + 4])
        subfields[key] = field[offset + 4 : offset + 4 + size]
        offset += 4 + size
    return subfields


def write_json(path: PathLike, obj: Any) -> None:
    """Write one JSON document, indented for people to read, with a final newline."""
    atomic_write(path, json_writer(obj))


def json_writer(obj: Any) -> Callable[[IO[bytes]], None]:
    """What writes `obj` as write_json does; the text is built at once, so a document that does
    not serialise fails before any file is made."""
    data = (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    return lambda f: f.write(data)


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
                except RecursionError:
                    raise ValueError(f"{path}: line {number}: JSON nested too deeply") from None
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}: line {number}: not a JSON object but {type(obj).__name__}")
                yield obj
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise ValueError(f"{path}: corrupt gzip data after line {number}: {exc}") from None


def count_lines(path: PathLike) -> int:
    """The number of lines of a JSON-lines file, gzip'ed or plain, read to its end: a gzip file
    that is truncated or corrupt (its length and CRC are checked at the end), or text that does
    not end with a newline, raises ValueError naming the file. Lines are not parsed."""
    with open(path, "rb") as probe:
        compressed = probe.read(2) == GZIP_MAGIC
    lines, last = 0, b"\n"
    with gzip.open(path, "rb") if compressed else open(path, "rb") as f:
        try:
            while chunk := f.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise ValueError(f"{path}: truncated or corrupt gzip data after line {lines}: {exc}") from None
    if last != b"\n":
        raise ValueError(f"{path}: truncated: its last line ends without a newline (after line {lines})")
    return lines


def read_parquet_rows(path: PathLike) -> list[dict[str, Any]]:
    """All rows of a Parquet file as dicts, nulls as None."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
