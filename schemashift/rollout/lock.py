"""One writer per folder: an exclusive lock on `FOLDER/.lock`, held for a writer's lifetime.

Every CLI verb that writes a folder holds this lock on it (`cli.main`, from the verb's
`writes(args)`), so two writers into one `--out` cannot interleave: the second is refused at
once with `FolderBusy`, which names the holder. The lock is `fcntl.flock` on the lock file, so
the kernel releases it whenever the holder ends, SIGKILL included; the file's contents (pid,
host, verb, start time) only describe the holder for the refusal message. A holder that ended
normally removes the file; one that was killed leaves it behind, and the next writer takes it
over (the lock is free) and says whose it was. The file is removed only while it is locked, and
an acquirer checks after locking that the file it locked is still the one at the path, so two
writers never hold locks on different files of one name.

flock is advisory and local: it excludes schemashift writers on one machine (and on file
systems whose flock works across machines); it does not stop other programs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LOCK_FILE = ".lock"


class FolderBusy(Exception):
    """Another process holds the folder's lock; `holder` is what its lock file says of it."""

    def __init__(self, folder: Path, holder: dict[str, Any]) -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(f"{folder} is being written by {describe(holder)}")


def describe(holder: dict[str, Any]) -> str:
    """`schemashift run (pid 12, host h, since 2025-01-01 12:00:00 UTC)`, from a lock's contents."""
    if not holder:
        return "another process (which has not yet said who it is)"
    parts = [f"pid {holder.get('pid', '?')}"]
    if holder.get("host"):
        parts.append(f"host {holder['host']}")
    if holder.get("since"):
        parts.append(f"since {holder['since']}")
    return f"schemashift {holder.get('verb', '?')} ({', '.join(parts)})"


def lock_path(folder: str | os.PathLike[str], beside: bool = False) -> Path:
    """`FOLDER/.lock`; with `beside`, `PARENT/.FOLDER.lock`, for a folder its writer builds
    elsewhere and renames into place (`sft`, `tiny-model`), which a lock inside it would not
    survive."""
    folder = Path(folder)
    return folder.parent / f".{folder.name}{LOCK_FILE}" if beside else folder / LOCK_FILE


@contextlib.contextmanager
def hold(folder: str | os.PathLike[str], verb: str, beside: bool = False) -> Iterator[Path]:
    """Hold the exclusive lock on `folder` for the body of the `with` (its lock file's folder is
    created if absent); the lock file is `lock_path(folder, beside)`.

    Raises FolderBusy at once where another process holds it. A folder this call created and
    that is still empty at the end is removed again, so a refused or failed writer leaves
    nothing behind.
    """
    folder = Path(folder)
    path = lock_path(folder, beside)
    created = not path.parent.exists()
    try:
        fd, stale = _acquire(path)
    except FolderBusy as exc:
        if created:
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        raise FolderBusy(folder, exc.holder) from None
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        raise
    if stale:
        print(
            f"schemashift {verb}: taking over the lock on {folder} of {describe(stale)}, which ended "
            "without releasing it",
            file=sys.stderr,
        )
    since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    me = {"pid": os.getpid(), "host": socket.gethostname(), "verb": verb, "since": since}
    with contextlib.suppress(OSError):  # the description only serves the message: a full disk
        os.ftruncate(fd, 0)  # leaves it empty, and the verb then reports the full disk itself
        os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                path.parent.rmdir()


def _acquire(path: Path) -> tuple[int, dict[str, Any]]:
    """The open, locked lock file `path` and what a killed holder left in it ({} if none)."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except FileNotFoundError:  # the folder was removed meanwhile by a releasing writer
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FolderBusy(path.parent, holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(fd).st_ino:  # locked a file its holder removed on release
            os.close(fd)
            continue
        return fd, _read(fd)


def _holder(fd: int) -> dict[str, Any]:
    """The holder's description; it writes it right after locking, so wait a moment for it."""
    deadline = time.monotonic() + 0.5
    while True:
        holder = _read(fd)
        if holder or time.monotonic() > deadline:
            return holder
        time.sleep(0.02)


def _read(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
