"""Which model stack (the table: `schemashift/runs/stacks.py`) runs the jobs that load models.

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
- the runs' training `backend` (schemashift/train/backends.py, which reads the same table): `auto`
  takes the stack that is installed; a run that names a GPU stack must name the configured one
  (`check_backends`).

Light to import (the Snakefile's parse and containers/wheelhouse.py import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemashift.runs.stacks import STACKS, Stack

#: `containers.model_image` values: the image the model jobs run in
MODEL_IMAGES = ("runtime", "gpu")
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
