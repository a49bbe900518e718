"""The `openai:` policy against a real model server: `transformers serve` on 127.0.0.1, serving a
warm-started copy of the tiny model, played through `schemashift eval` in both harnesses. With
greedy decoding (float64 on both sides) the records equal those of the same model played
in-process as `hf:` on the same cells, and the tools harness gets the server's structured
`tool_calls` (transformers parses Qwen2's `<tool_call>` blocks), never call blocks in the text.

The cells are v1 customer_lookup at the seeds the copy was warm-started on, which it solves in
five or six steps: every call it makes there is valid JSON (`transformers serve` answers a
malformed call block with HTTP 500) and no prompt reaches the local model's history budget,
where `hf:` compacts the history by its tokenizer's count and `openai:` (no budget) does not.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemashift.cli import main
from schemashift.policies.llm import api_client

pytestmark = [
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(
        importlib.util.find_spec("openai") is None,
        reason="transformers serve needs the openai package (the dev extra)",
    ),
]

SEEDS = (10000, 10001, 10002)
MAX_NEW_TOKENS = 64
#: the warm start that teaches the tiny model native calls (it knows only JSON actions)
RECIPE = {"ruleset": "v1", "scenario": "customer_lookup", "seeds": SEEDS, "steps": 300, "lr": 2e-3}
#: columns that name who played, not what happened
IDENTITY = {
    "policy",
    "base_model",
    "generation_config",
    "config_hash",
    "sweep_id",
    "wall_s",
    "checkpoint_step",
}


def warm_start(tiny_model: Path, out: Path) -> None:
    """The tiny model trained further on the oracle's conversations in both harnesses."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from schemashift.policies.llm.turn_end import end_of_turn_ids
    from schemashift.train.sft import encode_conversation, oracle_conversations, train_loop

    torch.set_num_threads(1)
    model, tokenizer = (
        AutoModelForCausalLM.from_pretrained(tiny_model),
        AutoTokenizer.from_pretrained(tiny_model),
    )
    stops = end_of_turn_ids(tokenizer, model.generation_config)
    seeds, scenarios = {RECIPE["ruleset"]: SEEDS}, {RECIPE["ruleset"]: [RECIPE["scenario"]]}
    examples = [
        encode_conversation(tokenizer, messages, stops)
        for harness in ("default", "tools")
        for messages in oracle_conversations([RECIPE["ruleset"]], seeds, scenarios, harness)
    ]
    train_loop(model, examples, steps=RECIPE["steps"], lr=RECIPE["lr"], device="cpu")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


@pytest.fixture(scope="module")
def served_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warm-started copy, kept beside the tiny model under SCHEMASHIFT_TEST_CACHE."""
    root = os.environ.get("SCHEMASHIFT_TEST_CACHE")
    cache = Path(root) if root else tmp_path_factory.mktemp("served")
    key = hashlib.sha256(json.dumps([tiny_model.name, RECIPE]).encode()).hexdigest()[:16]
    target = cache / f"served-{key}"
    if not (target / "config.json").exists():
        staging = Path(tempfile.mkdtemp(prefix=".served-", dir=cache))
        try:
            warm_start(tiny_model, staging / "model")
            os.replace(staging / "model", target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


#: a tool-call region as Qwen2's template writes it, up to its close tag or the end of the text
TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(served_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """`transformers serve` on 127.0.0.1, offline, the model preloaded; its base URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(served_model)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--dtype", "float64"]
    with open(log, "wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "transformers serve did not come up in 180 s"
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def evaluate(policy: str, harness: str, out: Path, *options: str) -> tuple[list[dict], list[dict]]:
    args = ["eval", "--policy", policy, "--ruleset", "v1", "--scenarios", "customer_lookup"]
    args += ["--seeds", ",".join(map(str, SEEDS)), "--harness", harness, "--no-cache"]
    args += ["--max-new-tokens", str(MAX_NEW_TOKENS), "--out", str(out), *options]
    assert main(args) == 0
    rows = pq.read_table(out / "episodes.parquet").to_pylist()
    with gzip.open(out / "trajectories.jsonl.gz", "rt") as lines:
        trajectories = [json.loads(line) for line in lines]
    return rows, trajectories


def unparsable_tool_calls(trajectories: list[dict]) -> list[str]:
    """The `<tool_call>` regions of the model's texts that are not JSON. The served model is
    trained in the test run, on this machine's floating point, so whether it writes one (e.g. an
    opened tool call closed by the end of turn) varies between machines."""
    broken = []
    for trajectory in trajectories:
        for step in trajectory["steps"]:
            for region in TOOL_CALL.findall(step.get("text") or ""):
                try:
                    json.loads(region)
                except ValueError:
                    broken.append(region)
    return broken


@pytest.mark.parametrize("harness", ["default", "tools"])
def test_a_served_model_plays_as_the_same_model_in_process(
    harness: str, served_model: Path, server: str, tmp_path: Path, monkeypatch
) -> None:
    """Non-streamed and streamed (`--stream`, whose abandoned requests the server stops)."""
    received: list[dict] = []
    text_of = api_client._text_of
    monkeypatch.setattr(api_client, "_text_of", lambda message: received.append(message) or text_of(message))
    started = time.monotonic()
    local, local_steps = evaluate(f"hf:{served_model}", harness, tmp_path / "hf", "--dtype", "float64")
    print(f"\n{harness}: hf {time.monotonic() - started:.1f} s")
    broken = unparsable_tool_calls(local_steps)
    if broken:
        pytest.skip(
            "transformers serve 5.24 answers HTTP 500 when a model's tool-call region is not JSON "
            f"(its response parser raises); the model trained here wrote {broken[0]!r}"
        )
    for stream in ([], ["--stream"]):
        received.clear()
        started = time.monotonic()
        api, api_steps = evaluate(
            f"openai:{served_model}",
            harness,
            tmp_path / f"api{len(stream)}",
            *("--base-url", server, "--request-timeout", "600", "--max-concurrency", "1", *stream),
        )
        print(f"{harness}: openai {' '.join(stream)} {time.monotonic() - started:.1f} s")
        print("cell | hf success, score, actions | openai success, score, actions")
        for a, b in zip(local, api, strict=True):
            print(
                f"customer_lookup/{a['seed']} | {a['success']}, {a['score']:.4f}, {a['steps']} | "
                f"{b['success']}, {b['score']:.4f}, {b['steps']}"
            )
        assert [r["status"] for r in api] == ["graded"] * len(SEEDS)
        assert any(r["success"] for r in api), "the warm-started copy solves its own seeds"
        assert [{k: v for k, v in r.items() if k not in IDENTITY} for r in api] == [
            {k: v for k, v in r.items() if k not in IDENTITY} for r in local
        ]
        for a, b in zip(local_steps, api_steps, strict=True):
            assert [s["action"] for s in a["steps"]] == [s["action"] for s in b["steps"]]
            assert [s.get("text") for s in a["steps"]] == [s.get("text") for s in b["steps"]]
        # one answer per model turn; the tools harness's calls arrive as structured tool_calls
        steps = sum(r["steps"] for r in api)
        if harness == "tools":  # a turn may hold several calls
            assert 0 < len(received) <= steps
            assert all(m.get("tool_calls") for m in received)
            assert not any("<tool_call>" in (m.get("content") or "") for m in received)
            assert {c["function"]["name"] for m in received for c in m["tool_calls"]} >= {
                "crm__update_contact",
                "complete_task",
            }
        else:
            assert len(received) == steps and not any(m.get("tool_calls") for m in received)
