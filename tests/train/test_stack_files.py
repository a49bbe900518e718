"""The GPU stacks' conda files parse and agree with pyproject's pins (the training image's lists:
tests/workflow/test_train_wheelhouse.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
STACKS = {"unsloth": "envs/train-unsloth.yaml", "vllm": "envs/train-vllm.yaml"}


def _pip_pins(env_file: str) -> dict[str, str]:
    env = yaml.safe_load((ROOT / env_file).read_text())
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict) and "pip" in item)
    return dict(line.split("==", 1) for line in pip if "==" in line)


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_conda_file_pins_equal_the_extra(stack):
    extra = dict(line.split("==", 1) for line in EXTRAS[stack])
    pins = _pip_pins(STACKS[stack])
    assert {name: pins.get(name) for name in extra} == extra
    assert set(pins) - set(extra) <= {"torch"}
    assert pins.get("torch", "2.13.0") == "2.13.0"


def test_gpu_stacks_never_mix_with_the_cpu_training_stack():
    cpu = dict(line.split("==", 1) for line in EXTRAS["train"])
    assert (
        cpu["trl"] == "1.16.0" and dict(line.split("==", 1) for line in EXTRAS["unsloth"])["trl"] == "1.15.0"
    )
