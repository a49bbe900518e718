"""Supervised warm-start: what is trained on, and the sft / tiny-model commands' outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemashift.cli import main
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.policies.llm.format import action_text
from schemashift.policies.llm.turn_end import end_of_turn_ids
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.runner import SweepContext, cells, run_sweep
from schemashift.train.sft import encode_conversation, oracle_conversation

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(600)]
LEGACY = get_ruleset("legacy")


def test_oracle_conversations_end_with_the_last_action() -> None:
    messages = oracle_conversation("legacy", "E2_meeting_invite_blast", 0)
    plan = LEGACY.solution(LEGACY.build_task("E2_meeting_invite_blast", 0))
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [action_text(a) for a in plan]
    assert messages[-1]["role"] == "assistant"


def test_only_the_assistant_turns_and_their_end_token_carry_loss(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    messages = oracle_conversation("legacy", "E3_customer_lookup", 0)
    ids, labels = encode_conversation(tokenizer, messages, end_of_turn_ids(tokenizer))
    assert len(ids) == len(labels)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    spans, current = [], []
    for token, label in zip(ids, labels, strict=True):
        if label != -100:
            assert label == token
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    expected = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(spans) == len(expected)
    for span, text in zip(spans, expected, strict=True):
        assert span[-1] == end
        assert tokenizer.decode(span[:-1]) == text


def test_sft_lora_and_full_outputs_load_as_policies(tiny_model: Path, tmp_path: Path, capsys) -> None:
    adapter, full = tmp_path / "adapter", tmp_path / "full"
    base = ["sft", "--model", str(tiny_model), "--scenarios", "E1_onboard_new_hire", "--seeds", "0"]
    assert main([*base, "--out", str(adapter), "--steps", "3", "--lora", "--lora-r", "4"]) == 0
    assert main([*base, "--out", str(full), "--steps", "2"]) == 0
    assert main([*base, "--out", str(full), "--steps", "2"]) == 2  # never overwrites
    assert "not empty" in capsys.readouterr().err
    manifest = json.loads((adapter / "sft.json").read_text())
    assert manifest["kind"] == "lora" and manifest["steps"] == 3 and manifest["examples"] == 1
    assert (adapter / "adapter_config.json").exists() and (full / "config.json").exists()
    cell = cells(["legacy"], ["E1_onboard_new_hire"], [0])
    for spec in (f"{tiny_model}@{adapter}", str(full)):
        policy = make_policy(f"hf:{spec}", LEGACY, max_new_tokens=32)
        (result,) = run_sweep(InProcessBackend(), policy, cell, SweepContext("sft", policy.name))
        assert result.record["status"] == "graded"


def test_the_tiny_model_command_builds_a_loadable_model(tmp_path: Path, capsys) -> None:
    out = tmp_path / "tiny"
    assert main(["tiny-model", "--out", str(out), "--steps", "2"]) == 0
    assert "tiny model" in capsys.readouterr().out
    manifest = json.loads((out / "sft.json").read_text())
    assert manifest["steps"] == 2 and manifest["code_digest"]
    policy = make_policy(f"hf:{out}", LEGACY, max_new_tokens=8)
    assert policy.engine.tokenizer.chat_template and policy.engine.context_length == 4096
