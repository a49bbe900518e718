"""Where the jobs run (schemashift.workflow.containers): the engine named, or under auto the first
that answers where the base image can be had, else the host with the reason in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from schemashift.workflow import containers
from schemashift.workflow.containers import VERDICT_ENV, job_engine

REPO = Path(__file__).resolve().parents[2]
AUTO = {"engine": "auto", "base_image": "debootstrap"}


def fake_tools(monkeypatch, tmp_path: Path, answering: dict[str, int]) -> None:
    """PATH holds only the named tools; an engine exits with the given status."""
    for name, status in answering.items():
        tool = tmp_path / name
        tool.write_text(f"#!/bin/sh\necho '{name} says {status}' >&2\nexit {status}\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_a_named_engine_or_none_is_taken_as_it_is() -> None:
    assert job_engine({**AUTO, "engine": "none"}, {}) == (None, "containers.engine is none")
    assert job_engine({**AUTO, "engine": "docker"}, {})[0] == "docker"


def test_auto_takes_the_first_engine_that_answers(monkeypatch, tmp_path: Path) -> None:
    fake_tools(monkeypatch, tmp_path, {"podman": 125, "docker": 0, "debootstrap": 0})
    monkeypatch.setattr(containers.os, "geteuid", lambda: 0)
    environ: dict[str, str] = {}
    assert job_engine(AUTO, environ) == ("docker", "docker answers")
    assert environ[VERDICT_ENV] == "docker:docker answers", "the verdict is kept for child processes"


@pytest.mark.parametrize(
    ("tools", "root", "reason"),
    [
        ({"debootstrap": 0}, True, "neither podman nor docker is installed"),
        ({"podman": 0}, True, "debootstrap, which builds the base image here, is not installed"),
        ({"podman": 0, "debootstrap": 0}, False, "the debootstrap base image needs root"),
        ({"podman": 125, "debootstrap": 0}, True, "`podman images` failed (podman says 125)"),
    ],
)
def test_auto_falls_back_to_the_host_and_says_why(monkeypatch, tmp_path, tools, root, reason) -> None:
    fake_tools(monkeypatch, tmp_path, tools)
    monkeypatch.setattr(containers.os, "geteuid", lambda: 0 if root else 1000)
    environ: dict[str, str] = {}
    assert job_engine(AUTO, environ) == (None, reason)
    # a child process takes the kept verdict without probing again
    monkeypatch.setenv("PATH", "")
    assert job_engine(AUTO, environ) == (None, reason)


def test_the_set_up_prints_one_line_saying_where_the_jobs_run(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("containers: {engine: none}\n")
    out = subprocess.run(
        [sys.executable, "-m", "schemashift.workflow.containers", str(config)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    assert out == "containers: the workflow's jobs run on the host: containers.engine is none\n"
