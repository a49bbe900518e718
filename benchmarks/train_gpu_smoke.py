"""GPU smoke test of GRPO training: seconds per optimizer step for each training stack.

Builds the tiny model on the spot (offline), then runs a few closed-loop GRPO steps with each
stack: transformers + peft in bf16, and Unsloth and vLLM (colocate) where they are installed.
Prints one line per stack: seconds per step, or why it did not run. Without CUDA it says so and
stops (pass --cpu to time the transformers stack on the CPU instead).

    python benchmarks/train_gpu_smoke.py [--steps 5] [--workdir DIR] [--cpu]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from schemashift.train.backends import (
    GPU_STACKS,
    BackendUnavailable,
    cuda_available,
    installed,
    select_backend,
)


def _config(model: Path, steps: int, backend: str) -> dict:
    return {
        "train": {
            "runs": {
                "smoke": {
                    "base_model": str(model),
                    "ruleset": "v1",
                    "split": "train",
                    "reward": "v1",
                    "overrides": {
                        "backend": backend,
                        "max_steps": steps,
                        "save_steps": steps,
                        "num_generations": 4,
                        "gradient_accumulation_steps": 4,
                        "max_turns": None,
                        "max_turn_tokens": 96,
                        "dataset_size": 16,
                        "warmup_steps": 0,
                        "load_in_4bit": False,
                    },
                }
            }
        }
    }


def _time_stack(model: Path, workdir: Path, steps: int, backend: str) -> str:
    from schemashift.train.trainer import train

    out = workdir / f"run-{backend}"
    started = time.perf_counter()
    train(_config(model, steps, backend), "smoke", out)
    total = time.perf_counter() - started
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    per_step = sorted(row["seconds_per_step"] for row in rows if not row["superseded"])
    median = per_step[len(per_step) // 2]
    peak = max((row["peak_gpu_mem_gb"] or 0) for row in rows)
    return f"median {median:.2f} s/step over {len(per_step)} steps (total {total:.0f} s, peak {peak:.2f} GiB)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--workdir", default=None, help="keep the model and runs here (default: a temp dir)")
    parser.add_argument("--cpu", action="store_true", help="without CUDA, time the transformers stack on CPU")
    args = parser.parse_args(argv)

    has_cuda = cuda_available()
    if not has_cuda and not args.cpu:
        print("CUDA is not available on this machine: GPU smoke test not run (use --cpu for a CPU figure).")
        return 0
    if has_cuda:
        import torch

        print(
            f"device: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}, torch {torch.__version__}"
        )
    else:
        print("device: CPU (no CUDA); the GPU stacks are reported as unavailable")

    from schemashift.train.tiny import build_tiny_model

    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(args.workdir) if args.workdir else Path(scratch)
        model = workdir / "tiny-model"
        if not (model / "sft.json").exists():
            started = time.perf_counter()
            build_tiny_model(model, max_seconds=120)
            print(f"tiny model built in {time.perf_counter() - started:.0f} s")
        for backend in ("transformers", *GPU_STACKS):
            try:
                select_backend(backend)
            except BackendUnavailable as exc:
                print(f"{backend:<13} absent: {exc}")
                continue
            try:
                print(f"{backend:<13} {_time_stack(model, workdir, args.steps, backend)}")
            except Exception as exc:  # noqa: BLE001 - one stack failing must not hide the others
                print(f"{backend:<13} FAILED: {type(exc).__name__}: {exc}")
    print(
        "stacks installed:",
        ", ".join(name for name, (module, _) in GPU_STACKS.items() if installed(module)) or "none",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
