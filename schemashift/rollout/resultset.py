"""A result directory's three files (episodes, drifts, trajectories) as one set.

The names are fixed (the workflow declares them as outputs), so the set cannot be swapped in by
one rename. Instead each write stamps one fresh result-set id into all three files (Parquet
schema metadata; the gzip header's extra field), writes them all before renaming any, and
renames `episodes.parquet` last after removing the old one (`io.write_set`). A directory
therefore holds a complete set, or no `episodes.parquet` (a set being written, or a killed
write: absent to readers), never episodes of one write beside drifts of another. Readers
(`check`) verify that the ids agree, so a mix made any other way (files copied between
directories, an older writer) is refused too. The next write removes a killed write's
temporary files. pyarrow is imported by the functions that need it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.rollout import io

if TYPE_CHECKING:
    import pyarrow as pa

EPISODES_FILE = "episodes.parquet"
DRIFTS_FILE = "drifts.parquet"
TRAJECTORIES_FILE = "trajectories.jsonl.gz"
FILES = (EPISODES_FILE, DRIFTS_FILE, TRAJECTORIES_FILE)
#: Parquet schema metadata key of the result-set id
SET_KEY = "schemashift.result_set"
#: gzip extra-field subfield id of the result-set id
GZIP_SUBFIELD = b"RS"


class MixedResultSet(ValueError):
    """A result directory whose files are incomplete or come from different writes."""


def write(
    out: str | Path, episodes: pa.Table, drifts: pa.Table, trajectories: Iterable[dict[str, Any]]
) -> dict[str, str]:
    """Write the three files of a result directory as one set; returns their paths by kind."""
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    clean(directory)
    set_id = uuid.uuid4().hex
    paths = {name: directory / name for name in FILES}
    io.write_set(
        {
            paths[TRAJECTORIES_FILE]: io.jsonl_gz_writer(trajectories, {GZIP_SUBFIELD: set_id.encode()}),
            paths[DRIFTS_FILE]: io.parquet_writer(_stamped(drifts, set_id)),
            paths[EPISODES_FILE]: io.parquet_writer(_stamped(episodes, set_id)),
        },
        commit=paths[EPISODES_FILE],
    )
    return {
        "episodes": str(paths[EPISODES_FILE]),
        "drifts": str(paths[DRIFTS_FILE]),
        "trajectories": str(paths[TRAJECTORIES_FILE]),
    }


def clean(out: str | Path) -> list[Path]:
    """Remove the temporary files a killed write of the set left in `out`."""
    return io.remove_stale_temps(out, FILES)


def _stamped(table: pa.Table, set_id: str) -> pa.Table:
    metadata = {**(table.schema.metadata or {}), SET_KEY.encode(): set_id.encode()}
    return table.replace_schema_metadata(metadata)


def set_id(path: str | Path) -> str | None:
    """The result-set id a file of a set carries, None where it has none."""
    path = Path(path)
    if path.name == TRAJECTORIES_FILE:
        found = io.gzip_extra(path).get(GZIP_SUBFIELD)
    else:
        import pyarrow.parquet as pq

        found = (pq.read_schema(path).metadata or {}).get(SET_KEY.encode())
    return None if found is None else found.decode("ascii", "replace")


def check(directory: str | Path) -> str:
    """The result-set id of the complete set in `directory` (readers find sets by their
    episodes file); a missing file, a file without an id or files of different writes raise
    MixedResultSet naming them."""
    directory = Path(directory)
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        raise MixedResultSet(f"{directory}: incomplete result set, no {', '.join(missing)}; rerun this cell")
    ids = {}
    for name in FILES:
        try:
            ids[name] = set_id(directory / name)
        except Exception as exc:  # noqa: BLE001 - any unreadable file makes the set unusable
            raise MixedResultSet(f"{directory / name}: unreadable: {exc}") from None
    unstamped = [name for name, found in ids.items() if found is None]
    if unstamped:
        raise MixedResultSet(
            f"{directory}: {', '.join(unstamped)} carry no result-set id (written by hand, or by a "
            "schemashift older than result sets); rerun this cell"
        )
    if len(set(ids.values())) > 1:
        described = ", ".join(f"{name} of write {found[:8]}" for name, found in ids.items())
        raise MixedResultSet(
            f"{directory}: mixed result set ({described}): the files come from different writes; "
            "rerun this cell"
        )
    return ids[EPISODES_FILE]
