"""Fixtures of the server tests: a real server (uvicorn on 127.0.0.1, a free port) per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("openenv")
pytest.importorskip("fastmcp")

from server_support import running_server  # noqa: E402


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with running_server() as url:
        yield url
