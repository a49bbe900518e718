"""The ASGI app: OpenEnv's `create_app` around `SchemaShiftEnvironment`, plus the MCP face.

Routes (OpenEnv's): `/ws` (one episode per WebSocket session), `/reset` `/step` `/state`
(stateless HTTP: each request gets a fresh environment), `/health`, `/metadata`, `/schema`, `/mcp`
(OpenEnv JSON-RPC); ours: `/agent/mcp` (MCP over streamable HTTP, one episode per MCP session,
built on its first request).
`python -m schemashift.server.app` and `schemashift serve` run it with uvicorn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import ConcurrencyConfig
from pydantic import ValidationError

from schemashift.server.environment import RequestError, SchemaShiftEnvironment
from schemashift.server.limits import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_SESSION_TIMEOUT_S,
    MAX_DEPTH,
    MAX_MESSAGE_BYTES,
    MESSAGE_BURST,
    MESSAGE_RATE,
    WireLimits,
    setting_from_environment,
)
from schemashift.server.models import SchemaShiftAction, SchemaShiftObservation, SchemaShiftState
from schemashift.server.recording import EpisodeStore

MCP_MOUNT = "/agent"


def build_app(
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_timeout_s: float | None = DEFAULT_SESSION_TIMEOUT_S,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    max_depth: int = MAX_DEPTH,
    allowed_origins: Iterable[str] = (),
    message_rate: float | None = MESSAGE_RATE,
    message_burst: int = MESSAGE_BURST,
    allowed_hosts: Iterable[str] = (),
    record_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """The server app: at most `max_sessions` WebSocket sessions (and as many MCP sessions),
    each closed after `session_timeout_s` seconds without a reset or step (None: never). Browser
    requests are served only from loopback origins of the server's port and from
    `allowed_origins` (`*`: any). A WebSocket session reads at most `message_rate` messages a
    second, in bursts of `message_burst` (None: no budget). Requests are served only for loopback
    Host names, the IP address they came in on and `allowed_hosts` (`*`: any). With
    `record_dir`, every episode a WebSocket or MCP client plays is written there as `run`'s
    records (`server.recording`).

    A session lives exactly as long as its connection (WebSocket) or MCP session: OpenEnv's
    routes that create, attach to or close sessions by id are refused (`limits.SESSION_ROUTES`),
    and idle WebSockets are closed by `WireLimits`, not reaped behind their back by OpenEnv."""
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
    if session_timeout_s is not None and session_timeout_s <= 0:
        raise ValueError(f"session_timeout_s must be positive, got {session_timeout_s}")
    store = EpisodeStore(record_dir) if record_dir is not None else None
    app: FastAPI = create_app(
        SchemaShiftEnvironment if store is None else functools.partial(SchemaShiftEnvironment, store),
        SchemaShiftAction,
        SchemaShiftObservation,
        env_name="schemashift",
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=None),
        state_cls=SchemaShiftState,
    )

    @app.exception_handler(RequestError)
    async def request_error(_: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content={"detail": str(exc), "kind": exc.kind})

    mcp = LazyMcp(max_sessions, session_timeout_s, store)
    app.mount(MCP_MOUNT, mcp)
    openenv_lifespan = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(asgi_app: Any):
        async with openenv_lifespan(asgi_app):
            try:
                yield
            finally:
                await mcp.stop()

    app.router.lifespan_context = lifespan
    return WireLimits(
        app,
        max_message_bytes,
        max_depth,
        body_checks={"/step": check_step_body},
        allowed_origins=allowed_origins,
        idle_timeout_s=session_timeout_s,
        message_rate=message_rate,
        message_burst=message_burst,
        allowed_hosts=allowed_hosts,
    )


class LazyMcp:
    """The MCP face, built on its first request: importing FastMCP's server takes about as long
    as the rest of the start-up, and a server that no MCP client uses should not wait for it.

    The MCP app's lifespan (its session manager) runs in a task of its own, entered and left in
    that task as anyio requires, from the first request until the server shuts down.
    """

    def __init__(self, max_sessions: int, session_timeout_s: float | None, store: Any = None) -> None:
        self.max_sessions = max_sessions
        self.session_timeout_s = session_timeout_s
        self.store = store
        self.app: Any = None
        #: the live MCP sessions' episodes (`mcp.Sessions`), once started
        self.sessions: Any = None
        self._starting: asyncio.Lock | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self.app is None:
            await self._start()
        await self.app(scope, receive, send)

    async def _start(self) -> None:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.app is not None:
                return
            from schemashift.server.mcp import bound_session_manager, build_mcp

            server = build_mcp(self.session_timeout_s, self.store)
            app = server.http_app(path="/mcp")
            ready = asyncio.Event()

            async def run_lifespan() -> None:
                async with app.lifespan(app):
                    bound_session_manager(app, self.max_sessions)
                    ready.set()
                    await self._stop.wait()

            self._task = asyncio.create_task(run_lifespan())
            waiter = asyncio.create_task(ready.wait())
            await asyncio.wait([self._task, waiter], return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():
                waiter.cancel()
                await self._task  # raises the lifespan's error
            self.sessions = server.sessions
            self.app = app

    async def stop(self) -> None:
        if self._task is not None:
            self._stop.set()
            await self._task
            self._task = None


def check_step_body(body: bytes) -> tuple[int, Any] | None:
    """422 for a /step body whose action does not validate. OpenEnv's handler answers some such
    bodies (an unhashable `type`) with a 500, so they are refused before they reach it."""
    try:
        request = json.loads(body)
        if not isinstance(request, dict):
            return 422, "the body must be a JSON object with an 'action'"
        SchemaShiftAction.model_validate(request.get("action"))
    except ValueError as exc:  # JSONDecodeError and pydantic's ValidationError are ValueErrors
        errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else str(exc)
        return 422, jsonable_encoder(errors)
    return None


def allowed_origins_from_environment() -> list[str]:
    """SCHEMASHIFT_ALLOWED_ORIGINS: browser origins allowed besides loopback ones, comma-separated."""
    listed = os.environ.get("SCHEMASHIFT_ALLOWED_ORIGINS", "").split(",")
    return [origin.strip() for origin in listed if origin.strip()]


def allowed_hosts_from_environment() -> list[str]:
    """SCHEMASHIFT_ALLOWED_HOSTS: Host names served besides loopback ones, comma-separated."""
    listed = os.environ.get("SCHEMASHIFT_ALLOWED_HOSTS", "").split(",")
    return [host.strip() for host in listed if host.strip()]


#: bound addresses that name no host: the server cannot add them to its Host allow-list
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


def settings_from_environment() -> dict[str, Any]:
    """App settings from SCHEMASHIFT_MAX_SESSIONS / SCHEMASHIFT_SESSION_TIMEOUT_S (0: never reap)
    / SCHEMASHIFT_ALLOWED_ORIGINS; a bad value is a ValueError naming its variable."""
    timeout = setting_from_environment("SCHEMASHIFT_SESSION_TIMEOUT_S")
    return {
        "max_sessions": int(setting_from_environment("SCHEMASHIFT_MAX_SESSIONS")),
        "session_timeout_s": timeout if timeout > 0 else None,
        "allowed_origins": allowed_origins_from_environment(),
        "allowed_hosts": allowed_hosts_from_environment(),
    }


def uvicorn_options(
    max_message_bytes: int = MAX_MESSAGE_BYTES, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
) -> dict[str, Any]:
    """How the server runs under uvicorn. Frames are small (observations travel as deltas), so
    per-message compression would cost more CPU than it saves bytes on a local network. The
    transport reads past messages over the limit instead of closing the connection, so that
    they get MESSAGE_TOO_LARGE like any other bad message; HTTP requests must arrive within
    `read_timeout_s`."""
    from schemashift.server.transport import DroppingWebSocketProtocol, read_deadline_protocol

    return {
        "log_level": "warning",
        "http": read_deadline_protocol(read_timeout_s),
        "ws": DroppingWebSocketProtocol,
        "ws_max_size": max_message_bytes,
        "ws_per_message_deflate": False,
    }


def serve(host: str, port: int, **settings: Any) -> None:
    import uvicorn

    options = uvicorn_options(
        settings.get("max_message_bytes", MAX_MESSAGE_BYTES),
        settings.pop("read_timeout_s", DEFAULT_READ_TIMEOUT_S),
    )
    if host not in WILDCARD_HOSTS:  # the name the server was bound to is served
        settings["allowed_hosts"] = [*settings.get("allowed_hosts", ()), host]
    uvicorn.run(build_app(**settings), host=host, port=port, **options)


def main() -> None:
    """Entry point of the OpenEnv layout (`server` script): serve on $HOST:$PORT (127.0.0.1:8000),
    with the settings of the environment (`settings_from_environment`, SCHEMASHIFT_READ_TIMEOUT_S)."""
    parser = argparse.ArgumentParser(description="Serve SchemaShift over OpenEnv")
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args()
    try:
        settings = settings_from_environment()
        settings["read_timeout_s"] = setting_from_environment("SCHEMASHIFT_READ_TIMEOUT_S")
    except ValueError as exc:
        parser.error(str(exc))
    serve(args.host, args.port, **settings)


def __getattr__(name: str) -> Any:
    """`app` (for `uvicorn schemashift.server.app:app`) is built on first access, from the environment."""
    if name == "app":
        return build_app(**settings_from_environment())
    raise AttributeError(name)


if __name__ == "__main__":
    main()
