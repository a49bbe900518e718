"""`schemashift serve`: run the OpenEnv server (WebSocket, HTTP and MCP) with uvicorn."""

from __future__ import annotations

import argparse
import math
import os

NAME = "serve"
HELP = "serve the environment over OpenEnv (WebSocket sessions, HTTP, MCP)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to bind; 0.0.0.0 exposes it (default: %(default)s)"
    )
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default: %(default)s)")
    # the environment is read by `run`, so that a bad value is an error there, not in --help
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=None,
        help="concurrent WebSocket sessions, and as many MCP sessions "
        "(default: $SCHEMASHIFT_MAX_SESSIONS or 64)",
    )
    parser.add_argument(
        "--session-timeout",
        type=float,
        default=None,
        help="seconds without a reset or step (an MCP tool call) after which a session is closed, "
        "however much else it sends; 0 never closes (default: $SCHEMASHIFT_SESSION_TIMEOUT_S or 120)",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        default=None,
        help="seconds within which an HTTP request's headers and body must arrive, else 408 and the "
        "connection is closed (default: $SCHEMASHIFT_READ_TIMEOUT_S or 30)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="a browser origin (scheme://host[:port], or * for any) allowed to use the server besides "
        "loopback pages on its own port; repeatable (default: $SCHEMASHIFT_ALLOWED_ORIGINS, "
        "comma-separated, or none)",
    )

    parser.add_argument(
        "--allow-host",
        action="append",
        default=None,
        metavar="NAME",
        help="a Host name (without port) served besides localhost, loopback and the server's own IP "
        "addresses and --host; * for any; repeatable (default: $SCHEMASHIFT_ALLOWED_HOSTS, "
        "comma-separated, or none)",
    )

    parser.add_argument(
        "--record",
        default=None,
        metavar="DIR",
        help="write every episode a WebSocket or MCP client plays to DIR as the records `run` writes, "
        "under the policy name the client declares at reset (docs/server.md)",
    )


def writes(args: argparse.Namespace) -> dict:
    """The folder recorded episodes go to, locked while the server runs (`cli.main`)."""
    return {"--record": args.record}


def run(args: argparse.Namespace) -> int:
    from schemashift.cli import CliError
    from schemashift.server.limits import setting_from_environment

    # a flag wins over its variable, which is read (and checked) only when the flag is absent
    try:
        if args.max_sessions is None:
            args.max_sessions = int(setting_from_environment("SCHEMASHIFT_MAX_SESSIONS"))
        if args.session_timeout is None:
            args.session_timeout = setting_from_environment("SCHEMASHIFT_SESSION_TIMEOUT_S")
        if args.read_timeout is None:
            args.read_timeout = setting_from_environment("SCHEMASHIFT_READ_TIMEOUT_S")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.max_sessions < 1:
        raise CliError(f"--max-sessions must be at least 1, got {args.max_sessions}")
    if args.session_timeout < 0:
        raise CliError(f"--session-timeout must not be negative, got {args.session_timeout}")
    if not math.isfinite(args.session_timeout):
        raise CliError(f"--session-timeout must be a finite number of seconds, got {args.session_timeout}")
    if not (math.isfinite(args.read_timeout) and args.read_timeout > 0):
        raise CliError(
            f"--read-timeout must be a positive, finite number of seconds, got {args.read_timeout}"
        )
    if args.record is not None and os.path.exists(args.record) and not os.path.isdir(args.record):
        raise CliError(f"--record {args.record} exists and is not a directory")
    if not 0 < args.port < 65536:
        raise CliError(f"--port must be between 1 and 65535, got {args.port}")
    try:
        from schemashift.server.app import (
            allowed_hosts_from_environment,
            allowed_origins_from_environment,
            serve,
        )
    except ImportError as exc:
        raise CliError(
            f"the server needs the 'server' extra (pip install 'schemashift[server]'): {exc}"
        ) from None
    recording = f", recording episodes to {args.record}" if args.record is not None else ""
    print(
        f"schemashift serve: http://{args.host}:{args.port} (WebSocket /ws, MCP /agent/mcp){recording}",
        flush=True,
    )
    origins = args.allow_origin if args.allow_origin is not None else allowed_origins_from_environment()
    hosts = args.allow_host if args.allow_host is not None else allowed_hosts_from_environment()
    serve(
        args.host,
        args.port,
        max_sessions=args.max_sessions,
        session_timeout_s=args.session_timeout or None,
        read_timeout_s=args.read_timeout,
        allowed_origins=origins,
        allowed_hosts=hosts,
        record_dir=args.record,
    )
    return 0
