"""The device check (scripts/device-check.sh, benchmarks/train_gpu_smoke.py) in its CPU mode, through
the install path it takes on a lent GPU machine: the wheels `prepare` downloads, installed with
--no-index --no-deps into a scratch --target on PYTHONPATH, no editable install; then every part
(environment, the transformers stack trained, saved, evaluated and resumed, the real-shape step,
the weight sync's merge) passes."""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmarks" / "train_gpu_smoke.py"


def _load():
    spec = importlib.util.spec_from_file_location("train_gpu_smoke", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_device_check_passes_on_cpu_through_its_own_install_path(tiny_model, tmp_path):
    carry = tmp_path / "carry"
    shutil.copytree(tiny_model, carry / "tiny")
    env = {**os.environ, "DEVICE_DIR": str(carry), "PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    version = ".".join(platform.python_version_tuple()[:2])
    prepared = subprocess.run(
        ["bash", "scripts/device-check.sh", "prepare", version],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert sorted(p.name.split("-")[0] for p in (carry / "wheels").glob("*.whl")) == [
        "datasets",
        "dill",
        "multiprocess",
        "peft",
        "trl",
    ]
    checked = subprocess.run(
        ["bash", "scripts/device-check.sh", "run", "--cpu"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    printed = checked.stdout
    assert checked.returncode == 0, printed[-6000:] + checked.stderr[-3000:]
    for part in ("environment", "stack", "real-shape", "weight-sync"):
        assert f"== {part}: exit 0" in printed, printed[-6000:]
    assert "evaluated checkpoint-2: status graded" in printed
    assert "transformers: passed" in printed and "== device check: passed" in printed
    assert "out-of-place: 100 syncs" in printed and ", 0.00% of base elements changed" in printed
    # what trained came from the carried wheels, not from the environment's own packages
    for name in ("trl", "peft", "datasets"):
        origin = next(line for line in printed.splitlines() if line.startswith(f"{name} from "))
        assert "/site/" in origin and str(ROOT / ".venv") not in origin, origin


def test_an_absent_stack_exits_non_zero(capsys):
    assert _load().main(["stack", "--stack", "vllm", "--cpu"]) == 2
    assert "not checked" in capsys.readouterr().out


def test_a_driver_older_than_the_cuda_build_fails_the_environment_part(monkeypatch, capsys):
    from schemashift.train import backends

    monkeypatch.setattr(backends, "driver_version", lambda: (570, 86, 10))
    monkeypatch.setattr("torch.version.cuda", "13.0")
    assert _load().main(["environment", "--cpu"]) == 1
    assert "at least 580.65.6" in capsys.readouterr().out
