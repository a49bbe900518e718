"""docs/server.md's route table names every route the app serves (`build_app()`'s routes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("openenv")
pytest.importorskip("fastmcp")

from starlette.routing import Mount  # noqa: E402

from schemashift.server.app import build_app  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def documented_paths() -> set[str]:
    """The paths in the first column of the table whose header is `| route | ...`."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| route |"))
    paths = set()
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        first = line.split("|")[1]
        for span in re.findall(r"`([^`]*)`", first):
            paths.update(re.findall(r"/[^\s,`()]*", span))
    return paths


def served_paths() -> tuple[set[str], set[str]]:
    """The app's route paths, and the paths of its mounted apps (whose own routes are theirs)."""
    app = build_app()
    app = getattr(app, "app", app)  # below the wire guard
    paths, mounts = set(), set()
    for route in app.routes:
        (mounts if isinstance(route, Mount) else paths).add(route.path)
    return paths, mounts


def test_every_route_of_the_app_is_in_the_route_table():
    (served, mounts), documented = served_paths(), documented_paths()
    assert {"/ws", "/reset", "/docs", "/{env_name}/task_range"} <= served and mounts == {"/agent"}
    unmounted = {path for path in documented if not any(path.startswith(m + "/") for m in mounts)}
    assert len(unmounted) < len(documented), "no route under a mount is documented"
    missing = sorted(served - documented)
    assert not missing, f"docs/server.md's route table lacks {missing}"
    stale = sorted(unmounted - served)
    assert not stale, f"docs/server.md's route table names routes the app does not serve: {stale}"
