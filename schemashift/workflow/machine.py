"""What the workflow asks of the machine it plans on, without starting a process (parse time
stays cheap: no nvidia-smi)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

#: where a GPU shows without running nvidia-smi: the driver lists one folder per GPU
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def gpu_visible(environ: Mapping[str, str], gpus: Path | None = None) -> bool:
    """A GPU this machine can use: CUDA_VISIBLE_DEVICES names one, or the NVIDIA driver lists one
    (in `gpus`, by default `NVIDIA_GPUS` as it is when called)."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return visible.strip() not in ("", "-1", "NoDevFiles")
    try:
        return any((gpus or NVIDIA_GPUS).iterdir())
    except OSError:
        return False
