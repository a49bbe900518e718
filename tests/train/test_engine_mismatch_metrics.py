"""The engine/trainer mismatch TRL measures where it generates with vLLM reaches our metric rows:
TRL's `sampling/...` log keys (read from TRL's own source, so a rename there fails here) become
the `is_ratio_*` and `logp_diff_*` columns, null where a stack logs none of them, and a real
training run through TRL's vLLM-colocate path records ratios near 1."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from schemashift.runs.tracking import SAMPLING_COLUMNS, train_verified_metrics
from schemashift.train.metrics import LOG_NAME, MetricsLog

pytest.importorskip("trl")


def trl_sampling_keys() -> set[str]:
    """Every `sampling/...` metric key TRL's GRPO trainer logs, as its source spells it."""
    import trl.trainer.grpo_trainer as grpo_trainer

    source = Path(grpo_trainer.__file__).read_text(encoding="utf-8")
    return set(re.findall(r'"(sampling/[A-Za-z0-9_/]+)"', source))


def _spec(base_model: str, **overrides) -> dict:
    return {
        "base_model": base_model,
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": overrides,
    }


def _recorder(tiny_model: Path, out: Path):
    """The trainer's Recorder as `train()` builds it, before any episode was played."""
    from transformers import AutoTokenizer

    from schemashift.runs.contract import resolve_run
    from schemashift.train.closed_loop import ClosedLoopRollout
    from schemashift.train.trainer import _callback_class

    run = resolve_run({"train": {"runs": {"r": _spec(str(tiny_model))}}}, "r")
    rollout = ClosedLoopRollout(AutoTokenizer.from_pretrained(tiny_model), reward="v1", max_turn_tokens=16)
    metrics = MetricsLog(out, run.name)
    return _callback_class()(run, out, rollout, metrics, {"train_run": run.name}), metrics


@pytest.mark.timeout(120)
def test_the_columns_map_every_sampling_key_trl_logs() -> None:
    keys = trl_sampling_keys()
    assert keys, "TRL's GRPO trainer no longer logs sampling/ metrics"
    assert set(SAMPLING_COLUMNS) == keys


@pytest.mark.model
@pytest.mark.timeout(300)
def test_the_recorder_turns_trls_sampling_logs_into_columns(tiny_model: Path, tmp_path: Path) -> None:
    """A vLLM step's row carries TRL's values, a step without them (transformers, Unsloth) null;
    both reach the Parquet file and the Trackio `train_verified/` metrics."""
    import pyarrow.parquet as pq
    from transformers import TrainerControl, TrainerState

    recorder, metrics = _recorder(tiny_model, tmp_path / "run")
    logged = {key: 1.0 + index / 100 for index, key in enumerate(sorted(trl_sampling_keys()))}
    base = {"reward": 0.5, "reward_std": 0.1, "loss": 0.01, "grad_norm": 0.2, "learning_rate": 1e-5}
    for step, logs in ((1, {**base, **logged}), (2, base)):
        recorder.on_log(None, TrainerState(global_step=step), TrainerControl(), logs=logs)

    vllm_row, plain_row = metrics.lineage()
    assert {column: vllm_row[column] for column in SAMPLING_COLUMNS.values()} == {
        SAMPLING_COLUMNS[key]: value for key, value in logged.items()
    }
    assert all(plain_row[column] is None for column in SAMPLING_COLUMNS.values())
    table = pq.read_table(metrics.write_parquet()).to_pylist()
    assert [[row[column] for column in SAMPLING_COLUMNS.values()] for row in table] == [
        [vllm_row[column] for column in SAMPLING_COLUMNS.values()],
        [None] * len(SAMPLING_COLUMNS),
    ]
    names = {f"train_verified/{column}" for column in SAMPLING_COLUMNS.values()}
    assert names <= set(train_verified_metrics(vllm_row))
    assert not names & set(train_verified_metrics(plain_row))


@pytest.mark.timeout(60)
def test_rows_written_before_the_columns_existed_read_as_null(tmp_path: Path) -> None:
    """A run resumed over a metrics.jsonl of an earlier version keeps its old rows readable."""
    import pyarrow.parquet as pq

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    old = {"train_run": "r", "step": 1, "superseded": False, "reward_mean": 0.25, "grad_norm": 0.5}
    (run_dir / LOG_NAME).write_text(json.dumps(old) + "\n")
    metrics = MetricsLog(run_dir, "r")
    metrics.append({"step": 2, "reward_mean": 0.5, "is_ratio_mean": 1.0, "logp_diff_max": 0.01})

    rows = pq.read_table(metrics.write_parquet()).to_pylist()
    assert [row["reward_mean"] for row in rows] == [0.25, 0.5]
    assert [row["is_ratio_mean"] for row in rows] == [None, 1.0]
    assert [row["logp_diff_max"] for row in rows] == [None, 0.01]


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_vllm_run_records_importance_ratios_near_one(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    """`train()` itself on TRL's vLLM-colocate path, with the stand-in engine (`vllm_standin`)
    where vLLM would start: the engine samples from the weights TRL synced into it, so the rows
    the run writes hold ratios of 1 and log-probability differences of 0, up to float error."""
    import pyarrow.parquet as pq
    import trl.generation.vllm_generation as vllm_generation
    import trl.trainer.grpo_trainer as grpo_trainer
    from vllm_standin import SamplingParams, colocated_generation

    from schemashift.train import backends
    from schemashift.train.tiny import CURRICULUM, training_seeds
    from schemashift.train.trainer import train

    # the stand-in engine stands for vLLM on a CUDA machine, which this one need not be
    vllm_here = functools.partial(backends.select_backend, has_cuda=lambda: True, is_installed=lambda _: True)
    monkeypatch.setattr(backends, "select_backend", vllm_here)
    monkeypatch.setattr(vllm_generation, "SamplingParams", SamplingParams, raising=False)
    monkeypatch.setattr(grpo_trainer, "VLLMGeneration", colocated_generation(str(tiny_model)))
    spec = _spec(
        str(tiny_model),
        backend="vllm",
        max_steps=2,
        save_steps=2,
        num_generations=4,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=1,
        learning_rate=5e-3,
        warmup_steps=0,
        max_turn_tokens=128,
        scenarios=list(CURRICULUM["v1"]),
        seeds=training_seeds(["v1"])["v1"],
        dataset_size=4,
        lora_target_modules=["q_proj", "v_proj"],
    )
    out = tmp_path / "run"
    train({"train": {"runs": {"r": spec}}}, "r", out)

    rows = pq.read_table(out / "metrics.parquet").to_pylist()
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert abs(row["is_ratio_mean"] - 1) < 1e-3, row
        assert 0.99 < row["is_ratio_min"] <= row["is_ratio_mean"] <= row["is_ratio_max"] < 1.01, row
        assert 0 <= row["logp_diff_mean"] <= row["logp_diff_max"] < 1e-2, row
