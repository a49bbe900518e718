"""The server image: built with podman from containers/env.Dockerfile, started, and played against.

Needs podman and the images' debootstrap base (the `debootstrap_base` fixture; `.ci/run` builds it
beforehand) and an index for the wheelhouse. Skipped where they are missing, unless
SCHEMASHIFT_REQUIRE_CONTAINER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from server_support import as_written, free_port

from schemashift.env.rulesets import available_rulesets, get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout.backends import InProcessBackend, RemoteBackend
from schemashift.rollout.runner import Cell, SweepContext, play_episode

REPO = Path(__file__).resolve().parents[2]
TAG = "localhost/schemashift-env:test"
STARTUP_LIMIT_S = 5.0

pytestmark = [pytest.mark.container, pytest.mark.slow]


@pytest.fixture(scope="module")
def image(tmp_path_factory, debootstrap_base) -> str:
    record = tmp_path_factory.mktemp("image") / "image.json"
    build = [
        sys.executable, str(REPO / "workflow/scripts/build_image.py"), "--engine", "podman",
        "--dockerfile", "containers/env.Dockerfile", "--base-image", debootstrap_base["id"],
        "--context", str(REPO),
        "--wheelhouse", "--tag", TAG, "--out", str(record),
    ]  # fmt: skip
    result = subprocess.run(build, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(record.read_text())["id"]


def start_and_wait(container_id: str, url: str) -> float:
    """Seconds from `podman start` until /health answers."""
    started = time.monotonic()
    subprocess.run(["podman", "start", container_id], capture_output=True, check=True)
    while time.monotonic() - started < 60:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            time.sleep(0.05)
    logs = subprocess.run(["podman", "logs", container_id], capture_output=True, text=True).stdout
    raise AssertionError(f"the container did not become healthy: {logs}")


@pytest.fixture(scope="module")
def container(image):
    port = free_port()
    # Created first, so the start-up figures are the image's, not podman's storage set-up.
    create = ["podman", "create", "-p", f"127.0.0.1:{port}:8000", image]
    container_id = subprocess.run(create, capture_output=True, text=True, check=True).stdout.strip()
    url = f"http://127.0.0.1:{port}"
    try:
        # Started twice: the first start also pays for reading the image's files from disk.
        first = start_and_wait(container_id, url)
        subprocess.run(["podman", "stop", "-t", "5", container_id], capture_output=True, check=True)
        second = start_and_wait(container_id, url)
        yield {"id": container_id, "url": url, "healthy_after": (first, second)}
    finally:
        subprocess.run(["podman", "rm", "-f", container_id], capture_output=True)


@pytest.mark.timeout(1200)
def test_the_image_starts_fast_as_a_non_root_user_with_a_healthcheck(container):
    first, second = container["healthy_after"]
    assert min(first, second) < STARTUP_LIMIT_S, f"healthy after {first:.2f} s, then {second:.2f} s"
    user = subprocess.run(
        ["podman", "exec", container["id"], "id", "-u"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert user != "0"
    inspected = json.loads(
        subprocess.run(["podman", "image", "inspect", TAG], capture_output=True, text=True, check=True).stdout
    )[0]
    assert list(inspected["Config"]["ExposedPorts"]) == ["8000/tcp"]
    healthcheck = inspected.get("Healthcheck") or inspected["Config"].get("Healthcheck")
    assert healthcheck["Test"][0] == "CMD"
    assert (
        subprocess.run(["podman", "healthcheck", "run", container["id"]], capture_output=True).returncode == 0
    )
    # Only the server's dependencies: no pyarrow, pandas, torch or gradio in the image.
    check = "import importlib.util as u; print([m for m in ('pyarrow', 'pandas', 'torch', 'gradio') "
    check += "if u.find_spec(m)])"
    found = subprocess.run(
        ["podman", "exec", container["id"], "python", "-c", check], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == "[]"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("ruleset", available_rulesets())
def test_a_sweep_against_the_container_equals_in_process(container, ruleset):
    rs = get_ruleset(ruleset)
    context = SweepContext("container", "policy_aware_heuristic")
    results = []
    for backend in (RemoteBackend(container["url"]), InProcessBackend()):
        try:
            cell = Cell(ruleset, rs.scenario_ids()[-1], 2)
            results.append(play_episode(backend, make_policy("policy_aware_heuristic", rs), cell, context))
        finally:
            backend.close()
    assert results[0].record["status"] == "graded", results[0].record["error"]
    assert as_written(results[:1]) == as_written(results[1:])
