"""The tools harness with a local model: the tiny model played through its chat template's own
tool format (function definitions in the system turn, results as `<tool_response>` blocks), with
records, cache replay and resume as for the JSON harness."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemashift.cli import main
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.runner import SweepContext, cells, run_sweep, run_sweep_batched

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(900)]

V1 = get_ruleset("v1")
MAX_NEW_TOKENS = 64


def tools_policy(model: Path, **options):
    return make_policy(f"hf:{model}", V1, harness="tools", max_new_tokens=MAX_NEW_TOKENS, **options)


def test_the_prompt_goes_through_the_templates_tool_branches(tiny_model: Path) -> None:
    policy = tools_policy(tiny_model)
    cell = cells(["v1"], ["customer_lookup"], [0])
    context = SweepContext("t", policy.name, harness="tools", generation_config=policy.generation_config())
    (result,) = run_sweep(InProcessBackend(), policy, cell, context)
    assert result.record["status"] == "graded" and result.record["harness"] == "tools"
    conversation = policy._slots[0].conversation
    from schemashift.policies.llm.format import template_request

    messages, tools = template_request(conversation.messages())
    text = policy.engine.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    assert "<tools>\n" in text and '"name": "crm__update_contact"' in text
    # each step's observation text is in the prompt: a tool turn per call, a user turn per turn
    # without a call
    answers = [m for m in conversation.messages() if m["role"] in ("tool", "user")][1:]
    assert text.count("<tool_response>") == sum(m["role"] == "tool" for m in answers)
    assert 0 < len(answers) < result.record["steps"]
    assert all(m["content"] in text for m in answers)


def test_a_template_without_tool_support_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    copy = tmp_path / "no-tools"
    shutil.copytree(tiny_model, copy)
    template_file = copy / "chat_template.jinja"
    config_file = copy / "tokenizer_config.json"
    plain = (
        "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content']"
        " + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
        "{%- endif %}"
    )
    if template_file.exists():
        template_file.write_text(plain)
    config = json.loads(config_file.read_text())
    if "chat_template" in config:
        config["chat_template"] = plain
        config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no tool support"):
        tools_policy(copy)
    make_policy(f"hf:{copy}", V1, max_new_tokens=MAX_NEW_TOKENS)  # the JSON harness still plays it


def test_batched_and_one_at_a_time_tools_play_agree(tiny_model: Path) -> None:
    cell_list = cells(["v1"], ["customer_lookup"], [0, 1, 2])
    batched = tools_policy(tiny_model, dtype="float64")
    context = SweepContext("t", batched.name, harness="tools", generation_config=batched.generation_config())
    together = run_sweep_batched(InProcessBackend, batched, cell_list, context, batch_size=3)
    alone = run_sweep(InProcessBackend(), tools_policy(tiny_model, dtype="float64"), cell_list, context)
    for a, b in zip(together, alone, strict=True):
        assert [s["action"] for s in a.trajectory["steps"]] == [s["action"] for s in b.trajectory["steps"]]
        assert [s.get("text") for s in a.trajectory["steps"]] == [
            s.get("text") for s in b.trajectory["steps"]
        ]


def episodes(out: Path) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k != "wall_s"}
        for r in pq.read_table(out / "episodes.parquet").to_pylist()
    ]


def test_eval_of_the_tiny_model_through_tools_records_caches_and_resumes(
    tiny_model: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "tools"
    args = ["eval", "--policy", f"hf:{tiny_model}", "--ruleset", "v1", "--scenarios", "customer_lookup"]
    args += ["--seeds", "0-1", "--harness", "tools", "--max-new-tokens", str(MAX_NEW_TOKENS)]
    args += ["--out", str(out), "--batch-size", "2"]
    assert main(args) == 0
    first = episodes(out)
    assert [r["harness"] for r in first] == ["tools", "tools"]
    assert all(r["status"] == "graded" and r["tokens_out"] > 0 for r in first)
    assert all(json.loads(r["generation_config"])["harness"] == "tools" for r in first)
    assert main(args) == 0
    assert "2 resumed" in capsys.readouterr().out
    # without its progress, every turn is answered by the response cache: the same records
    for path in (out / "progress").rglob("*.json"):
        path.unlink()
    import sqlite3

    with sqlite3.connect(out / "responses.sqlite") as db:
        stored = db.execute("select count(*) from completions").fetchone()[0]
    assert stored > 0
    assert main(args) == 0
    with sqlite3.connect(out / "responses.sqlite") as db:
        assert db.execute("select count(*) from completions").fetchone()[0] == stored
    assert episodes(out) == first
