"""What a training run shows on the Trackio dashboard, named once for the two writers: training's
live logging (`train.live_trackio`) and the report's export (`report.dashboard`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: the Trackio project of the benchmark: training's live logging and the report's export (one run
#: per training run, named as the run, grouped by `<ruleset>/<reward>`) both use it
TRACKIO_PROJECT = "schemashift"
#: where `trackio show` serves by default (GRADIO_SERVER_PORT changes the port)
DEFAULT_URL = "http://127.0.0.1:7860"
#: TRL's log key -> our metric column, for the engine/trainer mismatch TRL measures where it
#: generates with vLLM and corrects for it (importance-sampling ratios of trainer to engine
#: probability of the sampled tokens, after TRL's truncation; absolute log-probability
#: differences). The trainer records them, the report shows them; other stacks log none (null).
SAMPLING_COLUMNS = {
    "sampling/importance_sampling_ratio/min": "is_ratio_min",
    "sampling/importance_sampling_ratio/mean": "is_ratio_mean",
    "sampling/importance_sampling_ratio/max": "is_ratio_max",
    "sampling/sampling_logp_difference/mean": "logp_diff_mean",
    "sampling/sampling_logp_difference/max": "logp_diff_max",
}
#: the training-lineage columns a Trackio run shows under `train_verified/`
TRAIN_VERIFIED_COLUMNS = (
    "reward_mean",
    "reward_std",
    "reward_min",
    "reward_max",
    "loss",
    "kl",
    "grad_norm",
    "learning_rate",
    *SAMPLING_COLUMNS.values(),
    "completion_tokens",
    "tool_calls_per_episode",
    "seconds_per_step",
    "peak_gpu_mem_gb",
)


def train_verified_metrics(row: Mapping[str, Any], extra: Iterable[str] = ()) -> dict[str, float]:
    """A lineage row as Trackio metrics `train_verified/<column>` (finite numbers only), the same
    for training's live logging and the report's export."""
    out = {}
    for column in (*TRAIN_VERIFIED_COLUMNS, *extra):
        value = row.get(column)
        if value is None or isinstance(value, bool):
            continue
        value = float(value)
        if value == value and abs(value) != float("inf"):
            out[f"train_verified/{column}"] = value
    return out
