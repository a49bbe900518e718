"""The model stacks: the one table of what runs the jobs that load models.

A stack is the set of pinned packages that trains, evaluates and builds models (the workflow's
`train`, `evaluate` and `tiny_model` rules). It is chosen in one place, the config's `containers`
section: `model_image: runtime` runs those jobs on the CPU stack, `model_image: gpu` on the GPU
stack named by `train_stack`. Everything else follows from this table:

- the rules' `conda:` env under `--sdm conda` (`Stack.conda_env`), the same for training and
  evaluation, so a checkpoint is evaluated with the transformers it was trained with;
- the image their jobs run in under podman, docker or apptainer (`Stack.image`: the runtime image,
  or the GPU image of containers/train.Dockerfile, built by the `train_image` rule) and that image's
  wheelhouse (`Stack.wheelhouse`, containers/wheelhouse.py, which takes its extras from here);
- the pins: a stack installs its pyproject extra (`Stack.extra`), which its conda env mirrors
  (tests/workflow/test_stacks.py checks the table, the env files, the extras and the config
  schema's enums against each other);
- the runs' training `backend` (schemashift/train/backends.py): `auto` takes the stack that is
  installed; a run that names a GPU stack must name the configured one (`check_backends`).

Light to import (the Snakefile's parse and containers/wheelhouse.py import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: torch's release in every stack: the CPU build in the runtime image, the CUDA build in the GPU
#: image (vLLM 0.31 requires exactly this one, and the others follow it)
TORCH_VERSION = "2.13.0"
#: `containers.model_image` values: the image the model jobs run in
MODEL_IMAGES = ("runtime", "gpu")
#: the image of containers/train.Dockerfile (rule train_image, its record train.image.json)
GPU_IMAGE = "train"


@dataclass(frozen=True)
class Stack:
    name: str
    #: pyproject.toml extra it installs (with the package's own dependencies): its pins
    extra: str
    #: conda env file (repository-relative) of the model rules under `--sdm conda`
    conda_env: str
    #: project image its jobs run in (container.smk: runtime_image or train_image)
    image: str
    #: containers/wheelhouse.py image whose wheels that image installs
    wheelhouse: str
    #: torch's build: cpu or cuda
    torch_build: str
    #: why its pins differ from the other stacks'
    pins_note: str

    @property
    def gpu(self) -> bool:
        return self.torch_build == "cuda"


STACKS: dict[str, Stack] = {
    stack.name: stack
    for stack in (
        Stack(
            name="cpu",
            extra="train",
            conda_env="envs/model.yaml",
            image="runtime",
            wheelhouse="runtime",
            torch_build="cpu",
            pins_note=(
                "the newest releases that run together on a CPU: transformers 5.24, TRL 1.16, "
                "datasets 5.2; no vLLM or Unsloth, which pin older ones and need CUDA"
            ),
        ),
        Stack(
            name="vllm",
            extra="vllm",
            conda_env="envs/train-vllm.yaml",
            image=GPU_IMAGE,
            wheelhouse="train-vllm",
            torch_build="cuda",
            pins_note=(
                "vLLM 0.31 requires torch 2.13.0 and transformers < 5.18: transformers 5.17, datasets 4.8"
            ),
        ),
        Stack(
            name="unsloth",
            extra="unsloth",
            conda_env="envs/train-unsloth.yaml",
            image=GPU_IMAGE,
            wheelhouse="train-unsloth",
            torch_build="cuda",
            pins_note=(
                "Unsloth 2026.10 requires TRL <= 1.15 and transformers <= 5.17: TRL 1.15, transformers 5.17"
            ),
        ),
    )
}
#: `containers.train_stack` values: the stacks of the GPU image
GPU_STACKS = tuple(name for name, stack in STACKS.items() if stack.gpu)
#: config values that were renamed: (section, key, old value) -> the message that says so
RENAMED = {
    ("containers", "model_image", "train"): (
        "containers.model_image: train is now `gpu` (the GPU image runs the evaluations of local "
        "models and the tiny model's build as well as training; containers.train_stack says which "
        "stack it holds)"
    ),
}


def model_stack(containers: Mapping[str, Any]) -> Stack:
    """The stack of the model jobs for the config's `containers` section."""
    return STACKS["cpu"] if containers["model_image"] == "runtime" else STACKS[containers["train_stack"]]


def gpu_stack(containers: Mapping[str, Any]) -> Stack:
    """The stack the GPU image holds (whether or not the model jobs run in it)."""
    return STACKS[containers["train_stack"]]


def check_renamed(config: Mapping[str, Any]) -> None:
    """A ConfigError naming the new spelling of a renamed value (before schema validation, whose
    own message would only list the allowed values)."""
    from schemashift.workflow.plan import ConfigError

    for (section, key, old), message in RENAMED.items():
        if (config.get(section) or {}).get(key) == old:
            raise ConfigError(message)


def check_backends(stack: Stack, backends: Mapping[str, str]) -> None:
    """Each training run's `backend` (run name -> backend) can run on `stack`: `auto` and
    `transformers` run anywhere, a GPU stack's name only on that stack."""
    from schemashift.workflow.plan import ConfigError

    for run, backend in sorted(backends.items()):
        if backend in STACKS and STACKS[backend].gpu and backend != stack.name:
            where = (
                f"the {stack.name} stack (containers.model_image: gpu, train_stack: {stack.name})"
                if stack.gpu
                else "the cpu stack (containers.model_image: runtime)"
            )
            raise ConfigError(
                f"train.runs.{run}: backend {backend!r} needs the {backend} stack, but the model jobs "
                f"run {where}; set containers.model_image: gpu and containers.train_stack: {backend}, "
                "or backend: auto"
            )
