"""What a training run produced, named the same way by every layer (standard library only).

A checkpoint's identity is written once, by the trainer, and read by everyone after it:
- `checkpoint-<step>/manifest.json` ties an adapter to its run, step, base model and the
  sha256 of its weights (`adapter_sha256`, the one adapter hash: evaluation rows carry the same
  value, so a row joins the manifest of the adapter it measured);
- `run.json` beside the checkpoints is the run index (`run_index`): the run's settings and its
  complete checkpoints, which the aggregation and the report read instead of rebuilding runs
  from config;
- `evaluated_identity` is what an evaluation row says it measured (training run, step), read
  from the manifest of the adapter it loads, and `checkpoint_budget` the prompt and turn budgets
  it plays with (`prompt_budget` of the run's settings, the ones its rollout used);
- `go_no_go` is the step-20 decision of the original training log (docs/original-training-log.md)
  on a run's metric lineage, applied by the trainer when it writes `go_no_go.json` and by the
  report when it recomputes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

CHECKPOINT_MANIFEST = "manifest.json"
#: the version of a checkpoint manifest's layout (written by `train.checkpoints.write_manifest`)
MANIFEST_VERSION = 1
#: the run's warm-started adapter (`<run dir>/sft-adapter/`): GRPO's starting point, its step 0,
#: with a checkpoint manifest of step 0 so that its evaluation rows name the run
WARM_START = "sft-adapter"
RUN_INDEX = "run.json"
RUN_INDEX_VERSION = 1
GO_NO_GO_FILE = "go_no_go.json"
GO_NO_GO_STEP = 20
#: Files whose bytes define an adapter (peft's names), in the order they are looked for.
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")


def adapter_sha256(checkpoint: str | Path) -> str:
    """SHA-256 of the adapter weights file of a checkpoint folder."""
    folder = Path(checkpoint)
    for name in ADAPTER_FILES:
        path = folder / name
        if path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()
    raise FileNotFoundError(f"{folder}: no adapter weights ({' or '.join(ADAPTER_FILES)})")


def read_checkpoint_manifest(checkpoint: str | Path) -> dict[str, Any]:
    """The manifest of a saved checkpoint; a clear error where there is none."""
    path = Path(checkpoint) / CHECKPOINT_MANIFEST
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{checkpoint}: no {CHECKPOINT_MANIFEST} (not a complete checkpoint of a training run)"
        ) from None


def chat_template_sha256(template: str | None) -> str | None:
    """The hash of a tokenizer's chat template: a checkpoint's manifest records the template the
    trainer rendered with (Unsloth may rewrite it), evaluation compares its own with it."""
    if template is None:
        return None
    text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def check_chat_template(adapter: str | Path | None, template: str | None) -> None:
    """Refuse to evaluate a checkpoint through another chat template than it was trained with:
    the prompts would differ from training's in every token of the format."""
    if adapter is None or not (Path(adapter) / CHECKPOINT_MANIFEST).is_file():
        return
    trained = read_checkpoint_manifest(adapter).get("chat_template_sha256")
    evaluated = chat_template_sha256(template)
    if trained is not None and trained != evaluated:
        raise ValueError(
            f"{adapter} was trained with a chat template of sha256 {trained[:12]}, and evaluation's "
            f"tokenizer has another ({str(evaluated)[:12]}): the prompts would not be the ones it learned "
            f"on; evaluate it with the tokenizer it was trained with"
        )


def prompt_budget(settings: Mapping[str, Any]) -> dict[str, int]:
    """A training run's prompt budget and tokens per turn, named as evaluation's options: its
    rollout plays with them, and so must the evaluation of its checkpoints and of the base model
    they are compared with (step 0), or training and evaluation would see different prompts."""
    return {
        "max_prompt_tokens": int(settings["max_prompt_tokens"]),
        "max_new_tokens": int(settings["max_turn_tokens"]),
    }


def checkpoint_budget(adapter: str | Path) -> dict[str, int] | None:
    """The `prompt_budget` of the run that saved a checkpoint, from its manifest's settings; None
    for an adapter without a manifest, or a manifest that records no settings."""
    if not (Path(adapter) / CHECKPOINT_MANIFEST).is_file():
        return None
    settings = read_checkpoint_manifest(adapter).get("settings")
    return prompt_budget(settings) if settings else None


def evaluated_identity(adapter: str | Path | None) -> dict[str, Any]:
    """The training run and optimizer step behind a local model's weights, as its rows carry them.

    A checkpoint of a training run: its manifest's run and step (the adapter's hash must still be
    the manifest's). A model evaluated as it is, without an adapter: step 0 of no run (the
    step-0 point of every run that starts from it). An adapter without a manifest (one from
    `schemashift sft`, say): unknown, null.
    """
    if adapter is None:
        return {"train_run": None, "checkpoint_step": 0}
    if not (Path(adapter) / CHECKPOINT_MANIFEST).is_file():
        return {"train_run": None, "checkpoint_step": None}
    manifest = read_checkpoint_manifest(adapter)
    recorded = manifest.get("adapter_sha256")
    actual = adapter_sha256(adapter)
    if recorded != actual:
        raise ValueError(
            f"{adapter}: the adapter weights (sha256 {actual[:12]}) are not the ones its "
            f"{CHECKPOINT_MANIFEST} names ({str(recorded)[:12]}): it changed after it was saved"
        )
    return {"train_run": manifest.get("train_run"), "checkpoint_step": int(manifest["step"])}


def run_index(
    *,
    train_run: str,
    base_model: str,
    ruleset: str,
    reward: str,
    split: str | None,
    description: str | None,
    max_steps: int,
    save_steps: Iterable[int],
    report_step: int,
    go_no_go_step: int,
    checkpoints: Mapping[int, str],
) -> dict[str, Any]:
    """The run index of a training run: its identity, planned checkpoints, the step the report
    calls trained, and its complete checkpoints (step -> adapter sha256), in step order."""
    return {
        "schema_version": RUN_INDEX_VERSION,
        "train_run": train_run,
        "base_model": base_model,
        "ruleset": ruleset,
        "reward": reward,
        "split": split,
        "description": description,
        "max_steps": int(max_steps),
        "save_steps": [int(step) for step in save_steps],
        "report_step": int(report_step),
        "go_no_go_step": int(go_no_go_step),
        "checkpoints": [
            {"step": int(step), "path": f"checkpoint-{int(step)}", "adapter_sha256": checkpoints[step]}
            for step in sorted(checkpoints)
        ],
    }


def read_run_index(run_dir: str | Path) -> dict[str, Any] | None:
    """The run index of a training run's folder, or None where the run never started."""
    path = Path(run_dir) / RUN_INDEX
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def go_no_go(rows: Iterable[Mapping[str, Any]], at_step: int = GO_NO_GO_STEP) -> dict[str, Any] | None:
    """The original training log's step-`at_step` decision (docs/original-training-log.md), from the
    live rows up to `at_step`.

    PROCEED needs all three: the mean reward trends up (least-squares slope over the logged
    steps), at least one step's maximum reward above 0, and rewards not stuck at one value.
    None until `at_step` is logged: before that there is nothing to decide.
    """
    live = sorted(
        (row for row in rows if not row.get("superseded") and int(row["step"]) <= at_step),
        key=lambda row: int(row["step"]),
    )
    if not live or int(live[-1]["step"]) < at_step:
        return None
    steps = [float(row["step"]) for row in live]
    means = [float(row["reward_mean"]) for row in live]
    slope = _slope(steps, means)
    values = {float(row[key]) for row in live for key in ("reward_min", "reward_max", "reward_mean")}
    checks = {
        "reward_trending_up": slope > 0,
        "any_reward_positive": any(float(row["reward_max"]) > 0 for row in live),
        "not_stuck": len(values) > 1 or any(float(row.get("reward_std") or 0) > 0 for row in live),
    }
    return {
        "step": at_step,
        "steps_seen": len(live),
        "reward_slope": slope,
        "first_reward_mean": means[0],
        "last_reward_mean": means[-1],
        "checks": checks,
        "decision": "PROCEED" if all(checks.values()) else "STOP AND DEBUG",
    }


def _slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0
