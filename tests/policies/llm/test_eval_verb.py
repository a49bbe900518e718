"""`schemashift eval`: result files, refusal of mixed configurations, infra errors, and resume
after SIGKILL giving the records of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from openai_server import OpenAIServer, Step
from test_api_policy import oracle_reply

from schemashift.cli import main
from schemashift.policies.llm.format import FORMAT_VERSION
from schemashift.rollout import io

REPO = Path(__file__).resolve().parents[3]
SCENARIOS = "E1_onboard_new_hire,E3_customer_lookup"


def episodes(out: Path) -> list[dict]:
    return [
        {k: v for k, v in row.items() if k != "wall_s"}
        for row in pq.read_table(out / "episodes.parquet").to_pylist()
    ]


def test_eval_with_an_api_model_writes_the_run_files(tmp_path: Path, capsys) -> None:
    with OpenAIServer(oracle_reply) as server:
        args = ["eval", "--policy", "openai:m", "--base-url", server.base_url, "--scenarios", SCENARIOS]
        assert main([*args, "--seeds", "0-1", "--out", str(tmp_path / "a"), "--batch-size", "3"]) == 0
        sent = len(server.chat_requests())
        # a rerun in the same directory resumes everything and asks nothing
        assert main([*args, "--seeds", "0-1", "--out", str(tmp_path / "a")]) == 0
        assert len(server.chat_requests()) == sent
    out = tmp_path / "a"
    assert {p.name for p in out.iterdir()} >= {"episodes.parquet", "drifts.parquet", "trajectories.jsonl.gz"}
    rows = episodes(out)
    assert [(r["scenario"], r["seed"]) for r in rows] == [
        (s, n) for s in SCENARIOS.split(",") for n in (0, 1)
    ]
    assert all(
        r["status"] == "graded" and r["policy"] == "openai:m" and r["harness"] == "default" for r in rows
    )
    assert all(
        r["base_model"] == "m" and json.loads(r["generation_config"])["format_version"] == FORMAT_VERSION
        for r in rows
    )
    assert len({r["sweep_id"] for r in rows}) == 1
    assert "4 resumed" in capsys.readouterr().out


def test_another_configuration_in_the_same_directory_is_refused(tmp_path: Path, capsys) -> None:
    with OpenAIServer(oracle_reply) as server:
        args = [
            "eval",
            "--policy",
            "openai:m",
            "--base-url",
            server.base_url,
            "--scenarios",
            "E1_onboard_new_hire",
        ]
        assert main([*args, "--seeds", "0", "--out", str(tmp_path)]) == 0
        assert main([*args, "--seeds", "0", "--out", str(tmp_path), "--temperature", "0.7"]) == 2
    assert "another configuration" in capsys.readouterr().err


def test_an_unreachable_api_gives_infra_error_rows(tmp_path: Path) -> None:
    args = [
        "eval",
        "--policy",
        "openai:m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--scenarios",
        "E1_onboard_new_hire",
    ]
    assert main([*args, "--seeds", "0", "--out", str(tmp_path), "--no-cache", "--max-retries", "0"]) == 1
    (row,) = episodes(tmp_path)
    assert row["status"] == "infra_error" and row["error"]
    assert not (tmp_path / "responses.sqlite").exists()


def test_a_slow_server_is_resumed_with_a_longer_timeout_and_each_invocation_records_its_settings(
    tmp_path: Path,
) -> None:
    """The request settings are applied and recorded per invocation, not pinned: a run whose
    requests timed out resumes in the same folder with a longer timeout."""
    with OpenAIServer(oracle_reply) as server:
        server.script(Step(delay_s=5.0))
        args = ["eval", "--policy", "openai:m", "--base-url", server.base_url]
        args += ["--scenarios", "E1_onboard_new_hire", "--seeds", "0", "--out", str(tmp_path)]
        assert main([*args, "--request-timeout", "0.3", "--max-retries", "0", "--max-concurrency", "1"]) == 1
        (row,) = episodes(tmp_path)
        assert row["status"] == "infra_error" and "no answer within 0.3 s" in row["error"]
        server.script(Step(delay_s=0.5))
        assert main([*args, "--request-timeout", "5", "--batch-size", "2", "--stream"]) == 0
    assert [row["status"] for row in episodes(tmp_path)] == ["graded"]
    applied = json.loads((tmp_path / "eval.json").read_text())["applied"]
    assert [{k: v for k, v in entry.items() if k != "at"} for entry in applied] == [
        {
            "cells": 1,
            "batch_size": 32,
            "timeout_s": 0.3,
            "max_retries": 0,
            "max_concurrency": 1,
            "stream": False,
        },
        {
            "cells": 1,
            "batch_size": 2,
            "timeout_s": 5.0,
            "max_retries": 5,
            "max_concurrency": 4,
            "stream": True,
        },
    ]


def test_heuristic_policies_are_pointed_to_run(tmp_path: Path, capsys) -> None:
    assert main(["eval", "--policy", "oracle", "--out", str(tmp_path)]) == 2
    assert "use `run`" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_sigkilled_evaluation_resumes_to_the_uninterrupted_result(tiny_model: Path, tmp_path: Path) -> None:
    def command(out: Path) -> list[str]:
        return [
            sys.executable, "-m", "schemashift.cli", "eval", "--policy", f"hf:{tiny_model}", "--scenarios",
            SCENARIOS, "--seeds", "0-2", "--out", str(out), "--batch-size", "1", "--sweep-id", "r1",
            "--dtype", "float64", "--max-new-tokens", "128",
        ]  # fmt: skip

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}  # see conftest
    killed = tmp_path / "killed"
    process = subprocess.Popen(command(killed), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    progress = killed / "progress"
    while time.monotonic() < deadline and len(list(progress.rglob("*.json"))) < 2:
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = {p: p.read_bytes() for p in progress.rglob("*.json")}
    assert 2 <= len(before) < 6 and not (killed / "episodes.parquet").exists()

    resumed = subprocess.run(command(killed), env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} resumed" in resumed.stdout
    assert all(path.read_bytes() == data for path, data in before.items())  # finished cells not redone

    whole = tmp_path / "whole"
    uninterrupted = subprocess.run(command(whole), env=env, capture_output=True, text=True, timeout=600)
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    assert episodes(killed) == episodes(whole)
    assert (
        pq.read_table(killed / "drifts.parquet").to_pylist()
        == pq.read_table(whole / "drifts.parquet").to_pylist()
    )
    assert list(io.read_jsonl(killed / "trajectories.jsonl.gz")) == list(
        io.read_jsonl(whole / "trajectories.jsonl.gz")
    )


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_checkpoint_evaluation_stamps_its_manifest_and_joins_it(
    tiny_model: Path, tmp_path: Path, capsys
) -> None:
    """Rows of a checkpoint's evaluation name the run, step and adapter hash of its manifest (so
    a row joins the manifest of the adapter it measured); a changed adapter is a clear error."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from schemashift import lineage
    from schemashift.train.checkpoints import write_manifest

    torch.manual_seed(4)
    checkpoint = tmp_path / "train" / "run_y" / "checkpoint-3"
    lora = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model), lora).save_pretrained(checkpoint)
    write_manifest(checkpoint, 3, train_run="run_y", base_model=str(tiny_model))
    args = ["eval", "--policy", f"hf:{tiny_model}@{checkpoint}", "--scenarios", "E3_customer_lookup"]
    args += ["--seeds", "0", "--max-new-tokens", "64"]
    assert main([*args, "--out", str(tmp_path / "eval")]) == 0
    (row,) = episodes(tmp_path / "eval")
    manifest = lineage.read_checkpoint_manifest(checkpoint)
    assert (row["train_run"], row["checkpoint_step"]) == (manifest["train_run"], manifest["step"])
    assert row["adapter_sha256"] == manifest["adapter_sha256"]

    weights = checkpoint / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "again")]) != 0
    assert "changed after it was saved" in capsys.readouterr().err
    assert not (tmp_path / "again" / "episodes.parquet").exists()


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_checkpoint_is_evaluated_with_its_runs_prompt_and_turn_budgets(
    tiny_model: Path, tmp_path: Path, capsys
) -> None:
    """Without --max-prompt-tokens / --max-new-tokens a checkpoint plays with the budgets its
    run's rollout trained with (its manifest's settings), and every row records them; a value
    given wins and is recorded; a budget beyond the model's positions is refused."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from schemashift.runs.contract import DEFAULTS
    from schemashift.train.checkpoints import write_manifest

    torch.manual_seed(5)
    checkpoint = tmp_path / "train" / "run_z" / "checkpoint-2"
    lora = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model), lora).save_pretrained(checkpoint)
    settings = {**DEFAULTS, "max_prompt_tokens": 1500, "max_turn_tokens": 48}
    write_manifest(checkpoint, 2, train_run="run_z", base_model=str(tiny_model), settings=settings)
    args = ["eval", "--policy", f"hf:{tiny_model}@{checkpoint}", "--scenarios", SCENARIOS, "--seeds", "0"]

    def budgets(out: Path) -> list[tuple[int, int]]:
        configs = [json.loads(row["generation_config"]) for row in episodes(out)]
        return [(config["max_prompt_tokens"], config["max_new_tokens"]) for config in configs]

    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    assert budgets(tmp_path / "run") == [(1500, 48)] * 2
    assert main([*args, "--max-new-tokens", "64", "--out", str(tmp_path / "given")]) == 0
    assert budgets(tmp_path / "given") == [(1500, 64)] * 2
    capsys.readouterr()
    assert main([*args, "--max-prompt-tokens", "4090", "--out", str(tmp_path / "long")]) != 0
    assert "4090 + 48 exceeds the 4096 positions" in capsys.readouterr().err
