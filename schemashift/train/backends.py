"""Which training stack a run uses: transformers + peft everywhere, Unsloth or vLLM on a GPU.

`auto` takes the fastest stack that is installed and usable here. A GPU stack asked for by name
on a machine without CUDA fails at once with the reason, instead of minutes into model loading.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

from schemashift.runs.stacks import STACKS

#: Preference order of `auto` on a GPU machine.
AUTO_ORDER = ("unsloth", "vllm", "transformers")


#: The NVIDIA kernel module's own statement of its version (present wherever the driver is loaded).
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")
#: CUDA major version of a torch build -> the oldest driver that runs it (NVIDIA's CUDA toolkit
#: release notes, table "CUDA Toolkit and Corresponding Driver Versions", Linux, major release).
MINIMUM_DRIVER = {12: (525, 60, 13), 13: (580, 65, 6)}


class BackendUnavailable(RuntimeError):
    """The requested training backend cannot run on this machine."""


def driver_version(source: Path = DRIVER_VERSION_FILE) -> tuple[int, ...] | None:
    """The loaded NVIDIA driver's version (580.159.4 -> (580, 159, 4)), None without one."""
    try:
        text = source.read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module(?: for [A-Za-z0-9_]+)?\s+(\d+(?:\.\d+)+)", text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def driver_problem(cuda_build: str | None, driver: tuple[int, ...] | None) -> str | None:
    """Why a torch build for CUDA `cuda_build` ("13.0") cannot run on `driver`, or None.

    torch only reports "no CUDA" on a driver older than its build needs, and vLLM fails deep in
    its start-up; this names the versions before anything loads.
    """
    if cuda_build is None or driver is None:
        return None
    major = int(cuda_build.split(".")[0])
    needed = MINIMUM_DRIVER.get(major)
    if needed is None or driver >= needed:
        return None
    return (
        f"torch is built for CUDA {cuda_build}, which needs an NVIDIA driver of at least "
        f"{'.'.join(map(str, needed))}; this machine's driver is {'.'.join(map(str, driver))}: "
        f"update the driver or use a torch build for an older CUDA"
    )


def torch_cuda_build() -> str | None:
    """The CUDA version torch was built for (None: a CPU build or no torch)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


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
    stack = STACKS.get(requested)
    if stack is not None and stack.module is not None:
        module, env_file = stack.module, stack.conda_env
        if not has_cuda():
            problem = driver_problem(torch_cuda_build(), driver_version())
            raise BackendUnavailable(
                f"training backend {requested!r} needs a CUDA GPU and none is usable here "
                f"(torch.cuda.is_available() is False"
                + (f": {problem}" if problem else "")
                + "); use --backend transformers or auto"
            )
        problem = driver_problem(torch_cuda_build(), driver_version())
        if problem:
            raise BackendUnavailable(f"training backend {requested!r}: {problem}")
        if not is_installed(module):
            raise BackendUnavailable(
                f"training backend {requested!r} is not installed in this environment; it has its own "
                f"pinned stack: create it from {env_file} (or use containers/train.Dockerfile)"
            )
        return requested
    if requested == "auto":
        if has_cuda():
            for name in AUTO_ORDER[:-1]:
                if is_installed(STACKS[name].module):
                    return name
        return "transformers"
    raise BackendUnavailable(
        f"unknown training backend {requested!r}; choose auto, transformers, unsloth or vllm"
    )
