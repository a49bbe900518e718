"""Wire limits: oversized or absurdly nested messages get a clear error, never a crash.

An ASGI middleware in front of the app. HTTP request bodies over the size limit get 413,
bodies nested deeper than the depth limit 400. WebSocket frames over either limit get an
OpenEnv error frame and are dropped; the session stays open and keeps its episode. (The JSON
decoder would otherwise hit Python's recursion limit inside OpenEnv's loop and end the session.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

MAX_MESSAGE_BYTES = 1 << 20
MAX_DEPTH = 64
NOT_UTF8 = ("binary message is not UTF-8 JSON", "INVALID_JSON")
NOT_AN_OBJECT = ("a message must be a JSON object with a 'type'", "INVALID_JSON")
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests arrays/objects more than `limit` deep (strings are skipped)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def error_frame(message: str, code: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


class WireLimits:
    def __init__(
        self,
        app: Any,
        max_bytes: int = MAX_MESSAGE_BYTES,
        max_depth: int = MAX_DEPTH,
        body_checks: dict[str, Callable[[bytes], tuple[int, Any] | None]] | None = None,
    ) -> None:
        """`body_checks`: path -> check of a request body, returning (status, detail) to refuse it."""
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.body_checks = body_checks or {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await self.app(scope, self._guard_frames(receive, send), send)
        elif scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            await self._guard_body(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _problem(self, data: str | bytes) -> tuple[str, str] | None:
        if len(data) > self.max_bytes:
            return (
                f"message of {len(data)} bytes exceeds the server's limit of {self.max_bytes} bytes",
                "MESSAGE_TOO_LARGE",
            )
        if too_deep(data, self.max_depth):
            return f"message nested more than {self.max_depth} levels deep", "INVALID_JSON"
        return None

    def _guard_frames(self, receive: Any, send: Any) -> Any:
        async def guarded() -> dict:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                data = message.get("text")
                if data is None:
                    # OpenEnv reads text frames only; a binary frame holding UTF-8 JSON is read as text.
                    try:
                        data = (message.get("bytes") or b"").decode("utf-8")
                    except UnicodeDecodeError:
                        await send({"type": "websocket.send", "text": error_frame(*NOT_UTF8)})
                        continue
                    message = {"type": "websocket.receive", "text": data}
                problem = self._problem(data)
                if problem is None and not data.lstrip().startswith("{"):
                    problem = NOT_AN_OBJECT
                if problem is None:
                    return message
                await send({"type": "websocket.send", "text": error_frame(*problem)})

        return guarded

    async def _guard_body(self, scope: dict, receive: Any, send: Any) -> None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await _reply(send, 413, f"request body exceeds the server's limit of {self.max_bytes} bytes")
                return
            chunks.append(body)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if too_deep(body, self.max_depth):
            await _reply(send, 400, f"request body nested more than {self.max_depth} levels deep")
            return
        check = self.body_checks.get(scope.get("path", ""))
        refusal = check(body) if check is not None else None
        if refusal is not None:
            await _reply(send, *refusal)
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _reply(send: Any, status: int, detail: Any) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
