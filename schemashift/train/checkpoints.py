"""Checkpoint folders: `checkpoint-<step>/` with the LoRA adapter and a `manifest.json`.

The manifest ties an adapter to everything that made it (base model, run settings, reward,
config hash, git sha) and to the sha256 of its weights, so that an evaluation row can name the
exact adapter it measured and a resumed run can tell which checkpoints are complete: a folder
without a manifest is an interrupted save and is ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from schemashift.lineage import CHECKPOINT_MANIFEST as MANIFEST
from schemashift.lineage import MANIFEST_VERSION, adapter_sha256, read_checkpoint_manifest
from schemashift.rollout.io import write_json

_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


def write_manifest(checkpoint: str | Path, step: int, **facts: Any) -> dict[str, Any]:
    """Write the manifest of a saved checkpoint (last, atomically: it marks the save complete)."""
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "step": int(step),
        "adapter_sha256": adapter_sha256(checkpoint),
        **facts,
    }
    write_json(Path(checkpoint) / MANIFEST, manifest)
    return manifest


def checkpoint_step(path: str | Path) -> int | None:
    match = _CHECKPOINT_DIR.match(Path(path).name)
    return int(match.group(1)) if match else None


def complete_checkpoints(run_dir: str | Path) -> dict[int, Path]:
    """Step -> folder of every checkpoint whose manifest exists and whose weights still match it."""
    found: dict[int, Path] = {}
    root = Path(run_dir)
    if not root.is_dir():
        return found
    for folder in root.iterdir():
        step = checkpoint_step(folder)
        if step is None or not (folder / MANIFEST).is_file():
            continue
        try:
            manifest = read_checkpoint_manifest(folder)
            if manifest.get("step") == step and manifest.get("adapter_sha256") == adapter_sha256(folder):
                found[step] = folder
        except (OSError, ValueError):
            continue
    return dict(sorted(found.items()))


def latest_checkpoint(run_dir: str | Path) -> tuple[int, Path] | None:
    complete = complete_checkpoints(run_dir)
    if not complete:
        return None
    step = max(complete)
    return step, complete[step]
