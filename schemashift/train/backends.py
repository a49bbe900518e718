"""Which training stack a run uses: transformers + peft everywhere, Unsloth or vLLM on a GPU.

`auto` takes the fastest stack that is installed and usable here. A GPU stack asked for by name
on a machine without CUDA fails at once with the reason, instead of minutes into model loading.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

#: Stack -> (module that must be importable, conda env file that pins it).
GPU_STACKS = {
    "unsloth": ("unsloth", "envs/train-unsloth.yaml"),
    "vllm": ("vllm", "envs/train-vllm.yaml"),
}
#: Preference order of `auto` on a GPU machine.
AUTO_ORDER = ("unsloth", "vllm", "transformers")


class BackendUnavailable(RuntimeError):
    """The requested training backend cannot run on this machine."""


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def select_backend(
    requested: str,
    *,
    has_cuda: Callable[[], bool] = cuda_available,
    is_installed: Callable[[str], bool] = installed,
) -> str:
    """Resolve `auto|transformers|unsloth|vllm` to the stack this machine runs, or raise."""
    if requested == "transformers":
        return requested
    if requested in GPU_STACKS:
        module, env_file = GPU_STACKS[requested]
        if not has_cuda():
            raise BackendUnavailable(
                f"training backend {requested!r} needs a CUDA GPU and none is visible here "
                f"(torch.cuda.is_available() is False); use --backend transformers or auto"
            )
        if not is_installed(module):
            raise BackendUnavailable(
                f"training backend {requested!r} is not installed in this environment; it has its own "
                f"pinned stack: create it from {env_file} (or use containers/train.Dockerfile)"
            )
        return requested
    if requested == "auto":
        if has_cuda():
            for stack in AUTO_ORDER[:-1]:
                if is_installed(GPU_STACKS[stack][0]):
                    return stack
        return "transformers"
    raise BackendUnavailable(
        f"unknown training backend {requested!r}; choose auto, transformers, unsloth or vllm"
    )
