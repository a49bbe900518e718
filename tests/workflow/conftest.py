"""Fixtures of the workflow tests: one temporary copy of the repository per test session, and
the runtime image the container tests run jobs in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_support import REPO, copy_repo, tool


@pytest.fixture(scope="session")
def repo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the repository per test session, shared by every workflow test."""
    return copy_repo(tmp_path_factory.mktemp("workflow") / "repo")


@pytest.fixture(scope="session")
def runtime(tmp_path_factory: pytest.TempPathFactory, debootstrap_base: dict) -> dict:
    """The runtime image's record (built by build_image.py, as the runtime_image rule does, or
    reused where it is built), with its job shell's path under `job_shell`."""
    if tool("snakemake") is None:
        pytest.skip("snakemake is not installed")
    out = tmp_path_factory.mktemp("images")
    command = [
        *[sys.executable, str(REPO / "workflow" / "scripts" / "build_image.py"), "--engine", "podman"],
        *["--image", "runtime", "--dockerfile", str(REPO / "containers" / "runtime.Dockerfile")],
        *["--base-image", debootstrap_base["id"], "--out", str(out / "runtime.json")],
        *["--job-shell", str(out / "runtime.job-shell")],
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = json.loads((out / "runtime.json").read_text())
    record["job_shell"] = str(out / "runtime.job-shell")
    return record
