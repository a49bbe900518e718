"""Helpers of the server tests: a free loopback port, and a real server (uvicorn on 127.0.0.1 in a
background thread). A module of its own, so that test files import it by a name no other
directory's conftest shares."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server(**settings) -> Iterator[str]:
    """Serve `build_app(**settings)`; yields the base URL and stops the server afterwards."""
    import uvicorn

    from schemashift.server.app import build_app

    port = free_port()
    config = uvicorn.Config(build_app(**settings), host="127.0.0.1", port=port, log_level="warning")
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
