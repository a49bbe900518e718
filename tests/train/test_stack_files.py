"""The GPU stacks' conda files and training image parse and agree with pyproject's pins."""

from __future__ import annotations

import re
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


def test_training_image_installs_the_stack_extras_it_allows():
    text = (ROOT / "containers" / "train.Dockerfile").read_text()
    assert re.search(r"^ARG CUDA_IMAGE=\S*cuda\S*$", text, re.M)
    allowed = re.search(r'case "\$STACK" in ([\w|]+)\)', text).group(1).split("|")
    assert sorted(allowed) == sorted(STACKS)
    assert '"torch==2.13.0"' in text
    # the extras install under a constraint file that holds torch at the pin
    constraint = re.search(r'pip install -c (\S+) "\.\[\$\{STACK\}\]"', text).group(1)
    assert f'echo "torch==2.13.0" > {constraint}' in text
    # uid 1000 is taken on CUDA's Ubuntu bases: freed before useradd claims it
    assert text.index("getent passwd 1000") < text.index("useradd --create-home --uid 1000")
    assert re.search(r"^USER \w+$", text, re.M), "runs as a non-root user"
