"""The model stacks: the one table of what trains, evaluates and builds models.

A stack is a set of pinned packages: its pyproject extra, the conda env file that mirrors it, the
project image and wheelhouse that install it, its torch build, and the module a training run's
`backend` needs. The workflow chooses the stack of its model jobs from it
(`schemashift/workflow/stacks.py`: containers.model_image and train_stack), the images and
containers/wheelhouse.py take their extras and torch pin from it, and the trainer checks a run's
backend against it (`train/backends.py`); tests/workflow/test_stacks.py checks the table, the env
files, the extras and the config schema's enums against each other.
"""

from __future__ import annotations

from dataclasses import dataclass

#: torch's release in every stack: the CPU build in the runtime image, the CUDA build in the GPU
#: image (vLLM 0.31 requires exactly this one, and the others follow it)
TORCH_VERSION = "2.13.0"
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
    #: the module a training run's `backend` needs importable (None: the stack has no backend of
    #: its own; its runs train through transformers)
    module: str | None = None

    @property
    def gpu(self) -> bool:
        return self.torch_build == "cuda"


def gpu_stack(name: str, pins_note: str) -> Stack:
    """A stack of the GPU image, named as its backend module: its extra, `envs/train-<name>.yaml`
    and the `train-<name>` wheelhouse follow from the name."""
    return Stack(
        name=name,
        extra=name,
        conda_env=f"envs/train-{name}.yaml",
        image=GPU_IMAGE,
        wheelhouse=f"train-{name}",
        torch_build="cuda",
        pins_note=pins_note,
        module=name,
    )


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
        gpu_stack(
            "vllm",
            "vLLM 0.31 requires torch 2.13.0 and transformers < 5.18: transformers 5.17, datasets 4.8",
        ),
        gpu_stack(
            "unsloth",
            "Unsloth 2026.10 requires TRL <= 1.15 and transformers <= 5.17: TRL 1.15, transformers 5.17",
        ),
    )
}
#: `containers.train_stack` values: the stacks of the GPU image
GPU_STACKS = tuple(name for name, stack in STACKS.items() if stack.gpu)
