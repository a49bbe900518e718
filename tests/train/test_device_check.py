"""The device check (benchmarks/train_gpu_smoke.py) in its CPU mode: it trains with rewards that
vary, saves, evaluates and resumes a checkpoint, and passes only when loss, gradient and
adapter moved."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "train_gpu_smoke.py"


def _load():
    spec = importlib.util.spec_from_file_location("train_gpu_smoke", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_device_check_passes_on_cpu(tiny_model, tmp_path, capsys):
    code = _load().main(
        [
            "--stack",
            "transformers",
            "--cpu",
            "--steps",
            "2",
            "--model",
            str(tiny_model),
            "--workdir",
            str(tmp_path),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "evaluated checkpoint-1: status graded" in printed and "transformers: passed" in printed


def test_an_absent_stack_exits_non_zero(capsys):
    assert _load().main(["--stack", "vllm", "--cpu"]) == 2
    assert "not checked" in capsys.readouterr().out
