"""Helpers of the server tests: a real server on a free port, record comparison, raw sessions."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from schemashift.server.limits import DEFAULT_READ_TIMEOUT_S, MAX_MESSAGE_BYTES


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server(**settings) -> Iterator[str]:
    """Serve `build_app(**settings)` with `serve`'s uvicorn options; yields the base URL and
    stops the server afterwards."""
    from schemashift.server.app import build_app

    read_timeout_s = settings.pop("read_timeout_s", DEFAULT_READ_TIMEOUT_S)
    max_message_bytes = settings.get("max_message_bytes", MAX_MESSAGE_BYTES)
    with serving(build_app(**settings), max_message_bytes, read_timeout_s) as url:
        yield url


@contextlib.contextmanager
def serving(
    app, max_message_bytes: int = MAX_MESSAGE_BYTES, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
) -> Iterator[str]:
    """Serve an app built by the test (to look inside it while it runs) with `serve`'s options."""
    import uvicorn

    from schemashift.server.app import uvicorn_options

    port = free_port()
    options = uvicorn_options(max_message_bytes, read_timeout_s)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


#: columns that may differ between two plays of the same cell
VOLATILE = frozenset({"sweep_id", "wall_s"})


def comparable(value: Any) -> Any:
    """A record as it is written (JSON types), without its volatile columns."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    return value


def as_written(results) -> list[dict[str, Any]]:
    return [
        json.loads(
            json.dumps(comparable({"record": r.record, "drifts": r.drifts, "trajectory": r.trajectory}))
        )
        for r in results
    ]


class Session:
    def __init__(self, base_url: str, origin: str | None = None) -> None:
        url = base_url.replace("http://", "ws://") + "/ws"
        self.ws = connect(url, max_size=None, proxy=None, open_timeout=10, origin=origin).__enter__()

    def send_raw(self, frame: str | bytes) -> dict[str, Any]:
        try:
            self.ws.send(frame)
        except ConnectionClosed:
            pass  # a refused session sends its error frame, then closes: read that frame below
        return json.loads(self.ws.recv(timeout=30))

    def send(self, kind: str, data: Any = None) -> dict[str, Any]:
        message = {"type": kind} if data is None else {"type": kind, "data": data}
        return self.send_raw(json.dumps(message))

    def close(self) -> None:
        self.ws.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
