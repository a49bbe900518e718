"""OpenEnv layout entry point: the app and `main()` of `schemashift.server.app`.

`uv run server` (or `python -m server.app`) serves on $HOST:$PORT (default 127.0.0.1:8000), with
SCHEMASHIFT_MAX_SESSIONS, SCHEMASHIFT_SESSION_TIMEOUT_S and SCHEMASHIFT_READ_TIMEOUT_S as in
`schemashift serve`.
"""

from schemashift.server.app import build_app, main, settings_from_environment

app = build_app(**settings_from_environment())

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
