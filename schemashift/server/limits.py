"""Wire limits: foreign origins, oversized, absurdly nested or unservable messages get a clear
error, never a crash, a dead session or a stalled server.

An ASGI middleware in front of the app. Requests from a browser page of a foreign origin get 403
(WebSocket handshakes included). HTTP request bodies over the size limit get 413, bodies nested
deeper than the depth limit 400, bodies that are not JSON the server can parse and echo 422.
WebSocket messages with any of these problems get an OpenEnv error frame and are dropped; the
session stays open and keeps its episode. (OpenEnv's loop catches only JSON syntax errors: a
recursion error, an integer of over 4,300 digits or a reply that cannot be encoded would end
the session, or apply a step whose reply never arrives.)

Every check runs in time linear in the message and with C-speed primitives; messages of
OFFLOAD_BYTES or more are checked in a worker thread, so one client's large message does not
hold up the other sessions' steps.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from itertools import accumulate, repeat
from operator import sub
from typing import Any
from urllib.parse import parse_qs, urlsplit

from schemashift.env.actions import holds_lone_surrogate

MAX_MESSAGE_BYTES = 1 << 20
MAX_DEPTH = 64
#: a WebSocket `step` message is at most this many bytes: the episode keeps every action and
#: replies echo the recent ones, so a session holds about max_steps times this at most
MAX_STEP_BYTES = 1 << 16
DEFAULT_MAX_SESSIONS = 64
#: a session (WebSocket or MCP) that plays nothing (no reset or step) for this long is closed
DEFAULT_SESSION_TIMEOUT_S = 120.0
#: an HTTP request's headers and body must arrive within this long
DEFAULT_READ_TIMEOUT_S = 30.0
#: the server's settings that the environment may give: variable -> (kind, default, least value,
#: whether the least value itself is allowed)
ENVIRONMENT_SETTINGS = {
    "SCHEMASHIFT_MAX_SESSIONS": (int, DEFAULT_MAX_SESSIONS, 1, True),
    "SCHEMASHIFT_SESSION_TIMEOUT_S": (float, DEFAULT_SESSION_TIMEOUT_S, 0.0, True),
    "SCHEMASHIFT_READ_TIMEOUT_S": (float, DEFAULT_READ_TIMEOUT_S, 0.0, False),
}
#: messages a WebSocket client may send ahead of the server (read, not yet taken by the app)
#: before `serve`'s transport closes the connection (BACKLOG_CLOSE_CODE)
MAX_BACKLOG = 64
#: close code of a WebSocket closed for its backlog (4000 + HTTP's 429)
BACKLOG_CLOSE_CODE = 4429
#: a WebSocket session's message budget: on average at most this many messages a second (reads,
#: refused messages and pings' neighbours included), in bursts of at most MESSAGE_BURST; a
#: message over the budget is read only when the budget allows (the session is slowed down)
MESSAGE_RATE = 5000.0
MESSAGE_BURST = 5000
#: messages at least this long are checked off the event loop
OFFLOAD_BYTES = 1 << 16
NOT_UTF8 = ("binary message is not UTF-8 JSON", "INVALID_JSON")
NOT_AN_OBJECT = ("a message must be a JSON object with a 'type'", "INVALID_JSON")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SQUARE = bytes.maketrans(b"{}", b"[]")


class Oversized(str):
    """What the app receives from `serve`'s transport instead of a WebSocket message over the
    limit (schemashift.server.transport): empty text, and the message's size. A str subclass,
    so no client can send one."""

    size: int

    def __new__(cls, size: int) -> Oversized:
        marker = super().__new__(cls, "")
        marker.size = size
        return marker


# (message, WebSocket error code, HTTP status)
Problem = tuple[str, str, int]


def too_deep(data: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests arrays/objects more than `limit` deep (brackets in strings are
    skipped). Exact for balanced brackets; text with unbalanced ones may be judged deeper than
    it is, which only ever refuses text that is not JSON anyway.

    Linear time in a few passes of bytes methods, with no per-character Python loop: strings
    are cut out, then innermost bracket pairs removed pass by pass, and the depth of what is
    left is read from its runs of opening and closing brackets.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    # Escaped backslashes first, so that `\\"` still ends its string; then escaped quotes. What
    # is left between odd and even quotes is string content.
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(_SQUARE, _NOT_BRACKETS)
    if brackets.count(b"[") <= limit:
        return False
    # Each pass removes the innermost pairs (the leaves): one level of depth. Stop when a pass
    # removes little, so that the passes cost at most a few times the message.
    passes = 0
    while passes < limit:
        reduced = brackets.replace(b"[]", b"")
        removed = len(brackets) - len(reduced)
        brackets = reduced
        if not removed:
            break
        passes += 1
        if removed * 16 < len(brackets):
            break
    # What is left is a chain of mountains `[...[]...]` split at valleys `][`; the depth at the
    # top of mountain i is the `[`s up to it minus the `]`s before it (the valleys' brackets cancel).
    mountains = brackets.split(b"][")
    ups = list(map(bytes.count, mountains, repeat(b"[")))
    downs = map(sub, map(len, mountains), ups)
    return passes + max(map(sub, accumulate(ups), accumulate(downs, initial=0))) > limit


#: OpenEnv's routes whose sessions could be created, attached to or closed by id
SESSION_ROUTES = frozenset({"/ws", "/mcp"})
SESSION_METHOD_PREFIX = "openenv/session/"
ATTACH_REFUSED = (
    "attaching to a session by id is turned off: every WebSocket connection has its own "
    "session, which ends with the connection"
)
SESSION_METHODS_REFUSED = (
    "OpenEnv's session methods (openenv/session/create, openenv/session/close) and requests "
    "naming a session_id are turned off: a session belongs to the WebSocket connection that made it"
)
#: close code of a WebSocket closed for idling (4000 + HTTP's 408)
IDLE_CLOSE_CODE = 4408
#: how OpenEnv's reply to an applied reset or step begins (`WSObservationResponse.model_dump_json()`):
#: the only replies that count as playing, so that a session that only reads is idle
OBSERVATION_REPLY_PREFIX = '{"type":"observation"'


def setting_from_environment(name: str) -> float:
    """One of ENVIRONMENT_SETTINGS from the environment (its default when unset); a value that is
    not a number in its range is a ValueError naming the variable, never a traceback later."""
    kind, default, least, least_allowed = ENVIRONMENT_SETTINGS[name]
    text = os.environ.get(name)
    if text is None:
        return default
    what = "an integer" if kind is int else "a finite number"
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"${name} is {text[:40]!r}, not {what}") from None
    if not math.isfinite(value):
        raise ValueError(f"${name} is {text[:40]!r}, not {what}")
    if value < least or (value == least and not least_allowed):
        bound = "at least" if least_allowed else "more than"
        raise ValueError(f"${name} is {text[:40]!r}: it must be {bound} {least:g}")
    return value


def parses_to_an_object(text: str | bytes, path: str) -> bool:
    """Whether OpenEnv's own parse of a WebSocket message, checked for depth already, can only
    give an object or fail with the JSONDecodeError it answers itself (INVALID_JSON), so that
    the guard need not parse the message too. True for ASCII text that opens an object, holds
    no \\u escape and, on a session route, no 'session', and is no longer than the digits
    Python parses in an integer (4,300): no integer it refuses, no surrogate, no session method
    or session_id (none can be spelled without these characters). That is the usual step;
    anything else is parsed and checked here."""
    digits = sys.get_int_max_str_digits()
    return (
        isinstance(text, str)
        and (not digits or len(text) <= digits)
        and text.isascii()
        and "\\u" not in text
        and (path not in SESSION_ROUTES or "session" not in text)
        and text.lstrip(" \t\n\r").startswith("{")
    )


def attaches(scope: dict) -> bool:
    """Whether a WebSocket handshake asks to attach to an existing session (`?session_id=`)."""
    return "session_id" in parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)


def session_request(value: Any) -> bool:
    """Whether a JSON-RPC request (bare, or in a `/ws` message of type "mcp") creates, closes or
    names a session: what would let a client hold a slot without a connection, or reach
    another connection's session."""
    if isinstance(value, dict) and value.get("type") == "mcp":
        value = value.get("data")
    if not isinstance(value, dict):
        return False
    method, params = value.get("method"), value.get("params")
    if isinstance(method, str) and method.startswith(SESSION_METHOD_PREFIX):
        return True
    return isinstance(params, dict) and "session_id" in params


def error_frame(message: str, code: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


HOST_REFUSED = (
    "this Host is not served (a DNS-rebinding guard): use localhost or an IP address, or allow the "
    "name (schemashift serve --allow-host NAME, or SCHEMASHIFT_ALLOWED_HOSTS)"
)


def host_name(header: bytes) -> str:
    """The name of a Host header, without its port and an IPv6 address's brackets, lower case."""
    text = header.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rpartition(":")[0] if text.count(":") == 1 else text


def loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WireLimits:
    def __init__(
        self,
        app: Any,
        max_bytes: int = MAX_MESSAGE_BYTES,
        max_depth: int = MAX_DEPTH,
        body_checks: dict[str, Callable[[bytes], tuple[int, Any] | None]] | None = None,
        allowed_origins: Iterable[str] = (),
        idle_timeout_s: float | None = None,
        message_rate: float | None = MESSAGE_RATE,
        message_burst: int = MESSAGE_BURST,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        """`body_checks`: path -> check of a request body, returning (status, detail) to refuse it.
        `allowed_origins`: browser origins (`scheme://host[:port]`, or `*` for any) allowed
        besides the loopback origins of the server's own port. `idle_timeout_s`: a WebSocket
        that plays nothing (no reset or step applied) for this long gets a SESSION_TIMEOUT
        error frame and is closed, whatever else it sends (None: never). `message_rate`,
        `message_burst`: a WebSocket session's message budget (a token bucket, every message
        counted); a message over it waits until the budget allows (None: no budget).
        `allowed_hosts`: `Host` names served besides loopback ones and the IP address the
        connection came in on (`*`: any); any other gets 421, so that a DNS-rebinding page cannot
        read the server."""
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.body_checks = body_checks or {}
        self.allowed_origins = frozenset(origin.strip().rstrip("/").lower() for origin in allowed_origins)
        self.idle_timeout_s = idle_timeout_s
        if message_rate is not None and not (message_rate > 0 and message_burst >= 1):
            raise ValueError(
                "message_rate must be positive and message_burst at least 1, "
                f"got {message_rate}, {message_burst}"
            )
        self.message_rate = message_rate
        self.allowed_hosts = frozenset(host_name(host.encode("latin-1")) for host in allowed_hosts)
        self.message_burst = message_burst

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self.host_allowed(scope):
            await self._refuse(scope, receive, send, 421, HOST_REFUSED)
        elif scope["type"] in ("http", "websocket") and not self.origin_allowed(scope):
            await self._refuse_origin(scope, receive, send)
        elif scope["type"] == "websocket" and scope.get("path") in SESSION_ROUTES and attaches(scope):
            await self._refuse_attach(receive, send)
        elif scope["type"] == "websocket":
            await self.app(scope, *self._guard_frames(scope, receive, send))
        elif scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            await self._guard_body(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- hosts ---------------------------------------------------------------------------------------
    def host_allowed(self, scope: dict) -> bool:
        """A request's Host must be a loopback name (localhost, 127.0.0.1, [::1]), the IP address
        the connection came in on, or a listed name: a page that rebinds its own name to this
        server's address sends that name. Requests without a Host (not a browser's) pass."""
        if "*" in self.allowed_hosts:
            return True
        server = str((scope.get("server") or (None, None))[0]).lower()
        for header, value in scope.get("headers", ()):
            if header == b"host":  # every one, should a client send several
                name = host_name(value)
                if not (name in self.allowed_hosts or loopback(name) or (name and name == server)):
                    return False
        return True

    async def _refuse(self, scope: dict, receive: Any, send: Any, status: int, detail: str) -> None:
        if scope["type"] == "http":
            await _reply(send, status, detail)
            return
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if "websocket.http.response" in scope.get("extensions") or {}:
            body = json.dumps({"detail": detail}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": detail})

    # -- origins -------------------------------------------------------------------------------------
    def origin_allowed(self, scope: dict) -> bool:
        """Requests without an Origin (non-browser clients) pass; a browser's must be a loopback
        origin of this server's port or a listed one, so a web page cannot drive the server."""
        origin = next((value for name, value in scope.get("headers", ()) if name == b"origin"), None)
        if origin is None:
            return True
        text = origin.decode("latin-1").strip().rstrip("/").lower()
        if "*" in self.allowed_origins or text in self.allowed_origins:
            return True
        try:
            parts = urlsplit(text)
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            return False
        server = scope.get("server") or (None, None)
        return parts.scheme in ("http", "https") and loopback(parts.hostname) and port == server[1]

    async def _refuse_origin(self, scope: dict, receive: Any, send: Any) -> None:
        detail = (
            "cross-origin requests are refused: this origin is not allowed "
            "(schemashift serve --allow-origin ORIGIN, or SCHEMASHIFT_ALLOWED_ORIGINS)"
        )
        await self._refuse(scope, receive, send, 403, detail)

    # -- session ownership ---------------------------------------------------------------------------
    async def _refuse_attach(self, receive: Any, send: Any) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": error_frame(ATTACH_REFUSED, "SESSION_ERROR")})
        await send({"type": "websocket.close", "code": 1008})

    # -- messages ------------------------------------------------------------------------------------
    def problem(self, data: str | bytes, websocket: bool = False, path: str = "") -> Problem | None:
        """What is wrong with a message or body, checked before any of it reaches the app."""
        if isinstance(data, Oversized):
            return self._too_large(data.size)
        if len(data) > self.max_bytes:
            return self._too_large(len(data))
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        if len(raw) > self.max_bytes:
            return self._too_large(len(raw))
        if too_deep(raw, self.max_depth):
            return f"message nested more than {self.max_depth} levels deep", "INVALID_JSON", 400
        if websocket and parses_to_an_object(data, path):
            return None  # OpenEnv parses it; a second parse here would find nothing more
        if not websocket and not raw.strip():
            return None
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:  # syntax, an integer of over 4,300 digits
            return f"Invalid JSON: {exc}", "INVALID_JSON", 422
        if websocket and not isinstance(value, dict):
            return (*NOT_AN_OBJECT, 422)
        if websocket and len(raw) > MAX_STEP_BYTES and value.get("type") == "step":
            message = (
                f"a step message of {len(raw)} bytes exceeds the server's limit of {MAX_STEP_BYTES} "
                "bytes per step (an episode keeps every action); the step was not applied"
            )
            return message, "MESSAGE_TOO_LARGE", 413
        if path in SESSION_ROUTES and session_request(value):
            return SESSION_METHODS_REFUSED, "SESSION_ERROR", 403
        if holds_lone_surrogate(raw, value):
            return (
                "Invalid JSON: a string holds a lone UTF-16 surrogate (\\ud800-\\udfff without "
                "its pair), which the server could not send back",
                "INVALID_JSON",
                422,
            )
        return None

    def _too_large(self, size: int) -> Problem:
        message = f"message of {size} bytes exceeds the server's limit of {self.max_bytes} bytes"
        return message, "MESSAGE_TOO_LARGE", 413

    async def _check(self, data: str | bytes, websocket: bool, path: str) -> Problem | None:
        if len(data) >= OFFLOAD_BYTES and not isinstance(data, Oversized):
            return await asyncio.to_thread(self.problem, data, websocket, path)
        return self.problem(data, websocket, path)

    def _guard_frames(self, scope: dict, receive: Any, send: Any) -> tuple[Any, Any]:
        """The receive and send of a guarded WebSocket session: messages are checked before the
        app sees them, and a session whose last applied reset or step (an observation reply) is
        `idle_timeout_s` old is closed. Reads (`state`), refused messages and pings do not count:
        a client that only polls cannot hold its slot."""
        path = scope.get("path", "")
        idle = self.idle_timeout_s
        loop = asyncio.get_running_loop()
        last = loop.time()
        timer: asyncio.TimerHandle | None = None
        ended = False
        closing: set[asyncio.Task] = set()  # holds the closing task until it is done
        rate = self.message_rate
        interval = 1.0 / rate if rate else 0.0
        burst_s = self.message_burst * interval
        due = 0.0  # budget (GCRA): when the next message is due; up to burst_s of it early

        def expire() -> None:
            # One timer per connection, moved on lazily: a play costs only a clock read.
            nonlocal timer
            timer = None
            if ended:
                return
            left = last + idle - loop.time()
            if left > 0:
                timer = loop.call_later(left, expire)
            else:
                task = loop.create_task(close_idle())
                closing.add(task)
                task.add_done_callback(closing.discard)

        async def close_idle() -> None:
            message = f"the session was closed after {idle:g} s without a reset or step; open a new session"
            try:
                await send({"type": "websocket.send", "text": error_frame(message, "SESSION_TIMEOUT")})
                await send({"type": "websocket.close", "code": IDLE_CLOSE_CODE, "reason": "idle timeout"})
            except (OSError, RuntimeError):  # the client left meanwhile
                pass

        def played(message: dict) -> Any:
            # A plain function handing on send's awaitable: no coroutine of its own per reply.
            nonlocal last
            text = message.get("text")
            if text is not None and text.startswith(OBSERVATION_REPLY_PREFIX):
                last = loop.time()
            return send(message)

        async def guarded() -> dict:
            nonlocal timer, ended, due
            while True:
                message = await receive()
                kind = message["type"]
                if rate and kind == "websocket.receive":
                    now = loop.time()
                    due = max(due, now - burst_s) + interval
                    if due > now:  # over the budget: this message waits its turn
                        await asyncio.sleep(due - now)
                if kind != "websocket.receive":
                    if kind == "websocket.connect" and idle is not None and timer is None:
                        timer = loop.call_later(idle, expire)
                    elif kind == "websocket.disconnect":
                        ended = True
                        if timer is not None:
                            timer.cancel()
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
                problem = await self._check(data, websocket=True, path=path)
                if problem is None:
                    return message
                await send({"type": "websocket.send", "text": error_frame(*problem[:2])})

        return guarded, (send if idle is None else played)

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
        problem = await self._check(body, websocket=False, path=scope.get("path", ""))
        if problem is not None:
            text, _, status = problem
            await _reply(send, status, text.replace("message", "request body", 1))
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
