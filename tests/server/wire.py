"""A raw WebSocket session on the server's `/ws` route, for tests that send arbitrary frames."""

from __future__ import annotations

import json
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


class Session:
    def __init__(self, base_url: str) -> None:
        url = base_url.replace("http://", "ws://") + "/ws"
        self.ws = connect(url, max_size=None, proxy=None, open_timeout=10).__enter__()

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
