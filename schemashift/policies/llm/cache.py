"""Response cache on disk (SQLite): rerunning an evaluation replays the completions it already
paid for, so a rerun gives identical records without touching the model or the API.

A key is the SHA-256 of the canonical JSON of (model identity, rendered messages, generation
parameters, sample index, and the arm where it is not the drift arm: a control cell's first prompt
can equal its drift twin's, and must not replay that cell's completion; drift keys are the ones
written before arms existed); anything that changes the distribution a completion is drawn from
changes the key. One file may be shared by every job of a workflow: SQLite in WAL mode lets
processes and threads read and write it concurrently, and each write is one atomic transaction.
The first completion stored under a key is kept (later `put`s of the same key are ignored), so
every rerun replays the same text.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from schemashift.env.arms import DEFAULT_ARM, check_arm
from schemashift.policies.llm.completion import Completion

SCHEMA_VERSION = 1
# How long a writer waits for another process's transaction before giving up.
_BUSY_TIMEOUT_S = 60.0


def _canonical(value: Any, where: str) -> Any:
    """JSON-ready copy of `value` in which 1.0 and 1 are the same number, so that a temperature
    written as 0 or 0.0 gives the same key; rejects what JSON cannot carry exactly."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cache key: {where} is {value}, which JSON cannot represent")
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        out = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise TypeError(f"cache key: {where} has a non-string key {name!r}")
            out[name] = _canonical(item, f"{where}.{name}")
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise TypeError(f"cache key: {where} is a {type(value).__name__}, not a JSON value")


class ResponseCache:
    """Completions by key in one SQLite file; see the module docstring."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():
            raise ValueError(f"response cache {self.path} exists and is not a file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        try:
            connection = self._connection()
            with connection:
                connection.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
                    "tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, created REAL NOT NULL)"
                )
                connection.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            (version,) = connection.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ValueError(f"response cache {self.path} is not a usable SQLite database: {exc}") from None
        if version != str(SCHEMA_VERSION):
            self.close()
            raise ValueError(
                f"response cache {self.path} has schema version {version}, this code reads "
                f"{SCHEMA_VERSION}; move it aside to start a new cache"
            )

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def key(
        model_identity: dict,
        messages: list[dict],
        generation: dict,
        sample_index: int,
        arm: str = DEFAULT_ARM,
    ) -> str:
        """SHA-256 (hex) of the canonical JSON of everything a completion depends on."""
        if not isinstance(model_identity, dict) or not model_identity:
            raise TypeError("cache key: model_identity must be a non-empty dict")
        if not isinstance(messages, (list, tuple)):
            raise TypeError("cache key: messages must be a list of message dicts")
        if not isinstance(generation, dict):
            raise TypeError("cache key: generation must be a dict of generation parameters")
        if isinstance(sample_index, bool) or not isinstance(sample_index, int) or sample_index < 0:
            raise ValueError(f"cache key: sample_index must be a non-negative int, got {sample_index!r}")
        payload = {
            "model": _canonical(model_identity, "model_identity"),
            "messages": _canonical(list(messages), "messages"),
            "generation": _canonical(generation, "generation"),
            "sample_index": sample_index,
        }
        try:
            if check_arm(arm) != DEFAULT_ARM:
                payload["arm"] = arm
        except ValueError as exc:
            raise ValueError(f"cache key: {exc}") from None
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections are not shared between threads)."""
        if self._closed:
            raise ValueError(f"response cache {self.path} is closed")
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.DatabaseError:
                connection.close()
                raise
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def get(self, key: str) -> Completion | None:
        row = (
            self._connection()
            .execute("SELECT text, tokens_in, tokens_out FROM completions WHERE key = ?", (key,))
            .fetchone()
        )
        if row is None:
            return None
        return Completion(text=row[0], tokens_in=row[1], tokens_out=row[2], cached=True)

    def put(self, key: str, completion: Completion) -> None:
        """Store `completion` under `key` unless the key is already there (the first one wins)."""
        if not isinstance(completion, Completion):
            raise TypeError(f"response cache stores Completion objects, not {type(completion).__name__}")
        self._connection().execute(
            "INSERT OR IGNORE INTO completions VALUES (?, ?, ?, ?, ?)",
            (key, completion.text, completion.tokens_in, completion.tokens_out, time.time()),
        )

    def get_or_compute(
        self,
        keys: Sequence[str],
        compute: Callable[[list[int]], Sequence[Completion | BaseException]],
    ) -> list[Completion | BaseException]:
        """Completions for `keys`: hits come from the cache; `compute(missing_positions)` makes
        the rest in one call (one batch or one concurrent API round), which are then stored. A key
        that occurs twice is computed once. A request that failed comes back as its exception and
        is not stored, so a rerun asks again."""
        found: list[Completion | BaseException | None] = [self.get(key) for key in keys]
        first: dict[str, int] = {}
        for position, (key, completion) in enumerate(zip(keys, found, strict=True)):
            if completion is None:
                first.setdefault(key, position)
        missing = list(first.values())
        if missing:
            made = list(compute(missing))
            if len(made) != len(missing):
                raise ValueError(f"compute returned {len(made)} completions for {len(missing)} requests")
            fresh = dict(zip((keys[i] for i in missing), made, strict=True))
            for key, completion in fresh.items():
                if isinstance(completion, Completion):
                    self.put(key, completion)
            # A key asked for twice is generated once: both get the same completion.
            found = [
                fresh[key] if completion is None else completion
                for key, completion in zip(keys, found, strict=True)
            ]
        return found  # type: ignore[return-value]

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def close(self) -> None:
        """Close every thread's connection; further use raises."""
        self._closed = True
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
