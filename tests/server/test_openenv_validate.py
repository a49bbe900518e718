"""`openenv validate` passes on the package layout (containers/openenv) and on a running server.

The lean openenv install has no typer, so the tests call the functions behind the CLI
(`openenv validate DIR --level static --skip-build` and `openenv validate --url URL`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from openenv.cli._validation import validate_running_environment
from openenv.validation import Level, run_validation, write_report

REPO = Path(__file__).resolve().parents[2]
LAYOUT = REPO / "containers" / "openenv"


def test_the_package_layout_passes_static_validation():
    report = json.loads(write_report(run_validation(LAYOUT, max_level=Level.STATIC, skip_build=True), None))
    assert report["verdict"] == "pass", report["results"]
    assert report["signature"] == "openenv.yaml"


def test_a_broken_manifest_fails_validation(tmp_path):
    (tmp_path / "openenv.yaml").write_text(
        (LAYOUT / "openenv.yaml").read_text().replace("reward_channel", "magic")
    )
    report = json.loads(write_report(run_validation(tmp_path, max_level=Level.STATIC, skip_build=True), None))
    assert report["verdict"] == "fail"


def test_the_running_server_passes_runtime_validation(server_url):
    report = validate_running_environment(server_url)
    assert report["passed"], report["criteria"]
    assert report["mode"] == "simulation"


def test_the_layout_entry_point_serves_the_app():
    code = "import server.app as m; print(type(m.app).__name__, callable(m.main))"
    env = {"PYTHONPATH": f"{LAYOUT}:{REPO}", "PATH": ""}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=LAYOUT, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["WireLimits", "True"]
