"""The GPU train images' wheelhouse lists (containers/wheelhouse.py) and their recipe
(containers/train.Dockerfile): torch's CUDA build first and held by the constraint, then exactly
the stack's extra; never the CPU torch, never the other stack."""

from __future__ import annotations

import re
import sys
import tomllib

import pytest
from workflow_support import REPO

sys.path.insert(0, str(REPO / "containers"))
import wheelhouse  # noqa: E402

EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
DEPENDENCIES = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
STACKS = {"train-vllm": "vllm", "train-unsloth": "unsloth"}
DOCKERFILE = (REPO / "containers" / "train.Dockerfile").read_text()


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("image", sorted(STACKS))
def test_wheelhouse_of_a_train_image_is_cuda_torch_first_then_its_stack_under_the_constraint(image):
    stack = STACKS[image]
    files = wheelhouse.requirements(image)
    assert wheelhouse.stack(image) == stack
    # torch's CUDA build: the plain pin, no local label such as +cpu, installed before the rest
    assert lines(files["requirements-first.txt"]) == ["torch==2.13.0"]
    assert lines(files[wheelhouse.CONSTRAINTS]) == ["torch==2.13.0"]
    rest = lines(files["requirements.txt"])
    assert not any(re.match(r"torch\b", line) for line in rest), "torch comes from the first file only"
    # every pin of the stack's extra but torch, and the package's own dependencies: nothing else
    assert rest == [*DEPENDENCIES, *(line for line in EXTRAS[stack] if not line.startswith("torch"))]
    assert lines(files["requirements-nodeps.txt"]) == [wheelhouse.OPENENV]
    everything = "".join(files.values())
    assert "+cpu" not in everything
    other = next(name for name in STACKS.values() if name != stack)
    assert not re.search(rf"^{other}\b", everything, re.M), f"the {other} stack slipped into {image}"
    # the CPU training stack's own pins (transformers 5.24, datasets 5.2) are not the GPU stacks'
    cpu_only = set(EXTRAS["train"]) - set(EXTRAS[stack]) - {"torch==2.13.0"}
    assert not cpu_only & set(rest), f"the CPU train extra slipped into {image}: {cpu_only & set(rest)}"


def test_gpu_wheelhouses_are_filled_only_when_asked_for():
    """Several GB each: set-up (`wheelhouse.py` without --image) fills the CPU images only."""
    assert set(wheelhouse.DEFAULT_IMAGES) == {"server", "runtime"}
    assert set(wheelhouse.GPU_IMAGES) == set(STACKS)
    assert wheelhouse.stack("runtime") is None


def test_wheelhouse_refuses_a_cpu_torch_among_a_train_images_wheels(tmp_path):
    (tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    wheelhouse._refuse_local_torch(tmp_path)
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    with pytest.raises(SystemExit, match=r"torch-2\.13\.0\+cpu"):
        wheelhouse._refuse_local_torch(tmp_path)


def test_train_image_is_built_from_the_local_base_and_its_wheelhouse_only():
    assert re.search(r"^ARG BASE_IMAGE=\S+$", DOCKERFILE, re.M) and "FROM ${BASE_IMAGE}" in DOCKERFILE
    assert "nvidia/cuda" not in DOCKERFILE and "apt-get" not in DOCKERFILE
    installs = re.findall(r"pip install (.*?) \\$", DOCKERFILE, re.M)
    assert len(installs) == len(wheelhouse.FILES)
    for command, file in zip(installs, wheelhouse.FILES, strict=True):
        assert "--no-index --find-links /wheels" in command and command.endswith(f"-r /wheels/{file}")
    assert f"-c /wheels/{wheelhouse.CONSTRAINTS} -r /wheels/requirements.txt" in installs[1]
    allowed = re.search(r'case "\$STACK" in ([\w|]+)\)', DOCKERFILE).group(1).split("|")
    assert sorted(allowed) == sorted(STACKS.values())
    assert "torch.__version__.split('+')[0] == '2.13.0' and torch.version.cuda" in DOCKERFILE
    assert "SCHEMASHIFT_IMAGE=${IMAGE_TAG}" in DOCKERFILE
    assert re.search(r"^USER \w+$", DOCKERFILE, re.M), "runs as a non-root user"
