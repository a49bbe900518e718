"""Device check of GRPO training: one stack per process, a few steps that learn, a checkpoint
saved, evaluated and resumed; figures printed; a non-zero exit on any failure.

    python benchmarks/train_gpu_smoke.py --stack transformers [--steps 3] [--model DIR] [--workdir DIR]
    python benchmarks/train_gpu_smoke.py --stack transformers --cpu     # the same check on CPU (CI)

A two-step supervised warm start, which must run on the training device, precedes GRPO.
The tiny model trains on its own curriculum (v1 `customer_lookup` at its training seeds), so the
rewards of a group differ and loss and gradient are not zero. The run stops after `steps - 1`
steps (a checkpoint per step), that checkpoint is evaluated (one episode through evaluation's
`hf:` policy on the training device), then the run resumes to `steps`. Exit status: 0 passed,
1 a check failed, 2 the stack is absent or no CUDA (without --cpu).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

TURN_TOKENS = 128
EPISODES_PER_STEP = 4


def _config(model: Path, steps: int, stack: str) -> dict:
    from schemashift.train.tiny import CURRICULUM, training_seeds

    overrides = {
        "backend": stack,
        "max_steps": steps,
        "save_steps": 1,
        "num_generations": EPISODES_PER_STEP,
        "gradient_accumulation_steps": EPISODES_PER_STEP,
        "max_turn_tokens": TURN_TOKENS,
        "max_prompt_tokens": 4096 - TURN_TOKENS,
        "temperature": 0.85,
        "scenarios": list(CURRICULUM["v1"]),
        "seeds": training_seeds(["v1"])["v1"],
        "dataset_size": 8,
        "learning_rate": 1e-3,
        "warmup_steps": 0,
        "load_in_4bit": False,
        "go_no_go_step": 1,
        # a short supervised warm start, which must run on the training device
        "sft_steps": 2,
        "sft_seeds": 1,
    }
    spec = {
        "base_model": str(model),
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": overrides,
    }
    return {"train": {"runs": {"check": spec}}}


def _lora_b(checkpoint: Path) -> dict:
    from safetensors.torch import load_file

    return {k: v for k, v in load_file(checkpoint / "adapter_model.safetensors").items() if "lora_B" in k}


def _evaluate(model: Path, checkpoint: Path, device: str) -> dict:
    """One episode of the checkpoint through evaluation's own policy, on the training device."""
    from schemashift.policies import make_policy
    from schemashift.rollout.backends import make_backend
    from schemashift.rollout.runner import Cell, SweepContext, play_episode
    from schemashift.train.tiny import CURRICULUM, training_seeds

    policy = make_policy(f"hf:{model}@{checkpoint}", "v1", device=device, max_new_tokens=TURN_TOKENS)
    cell = Cell("v1", CURRICULUM["v1"][0], training_seeds(["v1"])["v1"][0])
    result = play_episode(
        make_backend("inprocess"), policy, cell, SweepContext(run_id="device-check", policy="hf")
    )
    return result.record


def check(stack: str, model: Path, workdir: Path, steps: int, device: str) -> list[str]:
    """Run the check; returns the failures (empty: passed). Prints the figures."""
    from schemashift.train.trainer import EFFECTIVE_SETTINGS, train

    out = workdir / f"run-{stack}"
    failures = []
    started = time.perf_counter()
    train(_config(model, steps - 1, stack), "check", out)
    first = out / f"checkpoint-{steps - 1}"
    record = _evaluate(model, first, device)
    print(f"evaluated checkpoint-{steps - 1}: status {record['status']}, success {record.get('success')}")
    if record["status"] != "graded":
        failures.append(f"the evaluation of checkpoint-{steps - 1} ended {record['status']}")
    train(_config(model, steps, stack), "check", out, resume=True)
    total = time.perf_counter() - started

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    live = [row for row in rows if not row["superseded"]]
    if [row["step"] for row in live] != list(range(1, steps + 1)):
        failures.append(f"steps logged {[row['step'] for row in live]}, expected 1..{steps}")
    seconds = sorted(row["seconds_per_step"] for row in live)
    tokens = [row["completion_tokens"] * EPISODES_PER_STEP / row["seconds_per_step"] for row in live]
    peak = max((row["peak_gpu_mem_gb"] or 0) for row in live)
    spread = [round(row["reward_max"] - row["reward_min"], 3) for row in live]
    print(
        f"{stack}: median {seconds[len(seconds) // 2]:.2f} s/step, {sorted(tokens)[len(tokens) // 2]:.0f} "
        f"model tokens/s, peak GPU memory {peak:.2f} GiB, reward spread per step {spread}, "
        f"losses {[row['loss'] for row in live]}, grad norms {[row['grad_norm'] for row in live]}, "
        f"total {total:.0f} s"
    )
    if not any(spread):
        failures.append("no step had any reward spread (the check would train nothing)")
    if not any(row["loss"] for row in live) or not any(row["grad_norm"] for row in live):
        failures.append("loss or gradient norm was zero at every step")
    adapter = _lora_b(out / f"checkpoint-{steps}")
    if not any(float(t.abs().max()) > 0 for t in adapter.values()):
        failures.append("the adapter did not move")
    if not (out / "train.done.json").exists():
        failures.append("no train.done.json after the resumed run")
    warm = json.loads((out / "sft-adapter" / "sft.json").read_text())
    print(f"warm start: {warm['steps']} steps on {warm['device']}")
    if warm["device"].split(":")[0] != device:
        failures.append(f"the warm start ran on {warm['device']}, not {device}")
    settings = json.loads((out / EFFECTIVE_SETTINGS).read_text())
    print(f"effective settings recorded for {settings['backend']}: optim {settings['settings']['optim']}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, choices=("transformers", "unsloth", "vllm"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--model", default=None, help="a tiny model built already (default: built here)")
    parser.add_argument("--workdir", default=None, help="keep the model and runs here (default: a temp dir)")
    parser.add_argument("--cpu", action="store_true", help="run the check on the CPU (transformers only)")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (one step before the resume, one after)")

    from schemashift.train.backends import BackendUnavailable, cuda_available, select_backend

    if not cuda_available() and not (args.cpu and args.stack == "transformers"):
        print(f"no CUDA here: {args.stack} not checked (--cpu checks the transformers stack on the CPU)")
        return 2
    try:
        select_backend(args.stack)
    except BackendUnavailable as exc:
        print(f"{args.stack} absent: {exc}")
        return 2
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(
        f"device: {torch.cuda.get_device_name(0) if device == 'cuda' else 'CPU'}, torch {torch.__version__}"
    )

    from schemashift.train.tiny import cached_tiny_model

    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(args.workdir) if args.workdir else Path(scratch)
        model = Path(args.model) if args.model else cached_tiny_model(workdir)
        try:
            failures = check(args.stack, model, workdir, args.steps, device)
        except Exception as exc:  # noqa: BLE001 - any failure is the check's result
            failures = [f"{type(exc).__name__}: {exc}"]
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"{args.stack}: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
