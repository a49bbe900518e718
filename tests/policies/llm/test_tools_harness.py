"""The tools harness (native tool calling) against a real OpenAI-compatible server on 127.0.0.1:
function definitions, scripted tool-call replies (parallel calls, bad JSON arguments, unknown
functions), the same oracle episode through both harnesses, and `eval --harness tools` records,
cache hits and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from openai_server import OpenAIServer

from schemashift.cli import main
from schemashift.env.arms import CONTROL
from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.policies.llm.cache import ResponseCache
from schemashift.policies.llm.format import (
    TOOLS_FIELD,
    Conversation,
    ToolConversation,
    action_text,
    endpoint_line,
)
from schemashift.policies.llm.functions import (
    action_call,
    action_call_text,
    call_action,
    call_text,
    read_calls,
)
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.runner import Cell, SweepContext, cells, run_sweep, run_sweep_batched

V1, LEGACY = get_ruleset("v1"), get_ruleset("legacy")
V1_CELLS = cells(["v1"], ["customer_lookup", "weekly_report", "event_cleanup"], [0, 1])
LEGACY_CELLS = cells(["legacy"], LEGACY.scenario_ids()[:3], [0])


def oracle_plans(ruleset, cell_list) -> dict[str, list[dict]]:
    """Task text -> the oracle's actions in that episode."""
    played = run_sweep(
        InProcessBackend(), make_policy("oracle", ruleset), cell_list, SweepContext("o", "oracle")
    )
    plans = {}
    for cell, result in zip(cell_list, played, strict=True):
        task = ruleset.build_task(cell.scenario, cell.seed).description
        plans[task] = [step["action"] for step in result.trajectory["steps"]]
    return plans


def plan_of(body: dict, plans: dict[str, list[dict]]) -> list[dict]:
    task = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return next(plan for text, plan in plans.items() if text in task)


def tool_call(name: str, arguments: str, index: int = 0) -> dict:
    return {"id": f"srv-{index}", "type": "function", "function": {"name": name, "arguments": arguments}}


def calls_so_far(body: dict) -> int:
    return sum(len(m.get("tool_calls") or []) for m in body["messages"] if m["role"] == "assistant")


def json_reply(plans):
    """The default harness's model: the oracle's next action as JSON text."""

    def reply(body: dict) -> str:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return action_text(plan_of(body, plans)[turn])

    return reply


def tools_reply(plans, per_turn: int = 2):
    """The tools harness's model: the oracle's next actions as native calls, `per_turn` at once."""

    def reply(body: dict) -> dict:
        done = calls_so_far(body)
        actions = plan_of(body, plans)[done : done + per_turn]
        calls = [tool_call(*action_call_args(a), k) for k, a in enumerate(actions)]
        return {"content": None, "tool_calls": calls}

    return reply


def action_call_args(action: dict) -> tuple[str, str]:
    name, arguments = action_call(action)
    return name, json.dumps(arguments)


def context(policy) -> SweepContext:
    return SweepContext(
        "h", policy.name, harness=policy.harness, generation_config=policy.generation_config()
    )


def play(server: OpenAIServer, ruleset, cell_list, harness: str, batch_size: int = 4):
    policy = make_policy("openai:m", ruleset, base_url=server.base_url, harness=harness)
    return run_sweep_batched(InProcessBackend, policy, cell_list, context(policy), batch_size=batch_size)


# -- the functions ------------------------------------------------------------------------------------


def test_functions_are_the_documented_endpoints_and_the_meta_actions() -> None:
    observation = Environment(V1).reset("weekly_report", 3)
    conversation = ToolConversation.for_ruleset(V1, observation)
    system = conversation.messages()[0]
    functions = {f["function"]["name"]: f["function"] for f in system[TOOLS_FIELD]}
    docs = observation["tool_schemas"]
    endpoints = {f"{tool}__{name}" for tool, eps in docs.items() for name in eps}
    assert set(functions) == endpoints | {
        "inspect_schema",
        "retry_with_variant",
        "report_drift",
        "complete_task",
    }
    for tool, eps in docs.items():
        for name, doc in eps.items():
            function = functions[f"{tool}__{name}"]
            # the description is the default harness's documentation line: the same facts
            assert function["description"] == f"{tool}.{endpoint_line(name, doc)}"
            assert set(function["parameters"]["properties"]) == set(doc["params"])
            assert function["parameters"].get("required", []) == list(doc["required"])
    assert functions["report_drift"]["parameters"]["properties"]["drift_kind"]["enum"] == list(V1.drift_kinds)
    assert functions["inspect_schema"]["parameters"]["properties"]["tool"]["enum"] == list(V1.tool_names)
    list_param = functions["calendar__create_event"]["parameters"]["properties"]["attendees"]
    assert list_param == {"type": "array", "items": {"type": "string"}}


def test_the_tools_harness_shows_what_the_default_harness_shows() -> None:
    """Task and criteria, the documentation (as function descriptions) and, step by step, the same
    observation text: the harness changes the presentation, not the information."""
    env = Environment(V1)
    observation = env.reset("customer_lookup", 4)
    default = Conversation.for_ruleset(V1, observation)
    tools = ToolConversation.for_ruleset(V1, observation)
    assert default.messages()[1]["content"].startswith(tools.messages()[1]["content"])
    oracle = make_policy("oracle", V1)
    oracle.start_episode(Cell("v1", "customer_lookup", 4))
    while not observation["done"]:
        action = oracle.act(observation)
        observation, _ = env.step(action)
        default.add_turn(action_text(action), observation)
        tools.add_turn(action_call_text(action), observation)
    shown_default = [m["content"] for m in default.messages()[2:] if m["role"] == "user"]
    shown_tools = [m["content"] for m in tools.messages()[2:] if m["role"] == "tool"]
    assert shown_tools == shown_default and len(shown_tools) == observation["step"]


def test_each_call_is_read_and_mapped_as_documented() -> None:
    text = "\n".join(
        [
            "I will look and then report.",
            call_text("crm__search_contacts", {"email": "a@b.c"}),
            '<tool_call>\n{"name": "crm__update_contact", "arguments": "{\\"status\\": "}\n</tool_call>',
            call_text("teleport", {"to": "mars"}),
            call_text("crm__retired_endpoint", {}),
            call_text("bank__transfer", {"amount": 1}),
            "<tool_call>\nnot json at all\n</tool_call>",
            call_text("complete_task", {"summary": "done"}),
            '<tool_call>\n{"name": "complete_task", "arguments": {"summary": "cut',
        ]
    )
    calls = read_calls(text)
    assert [c.name for c in calls] == [
        "crm__search_contacts",
        "crm__update_contact",
        "teleport",
        "crm__retired_endpoint",
        "bank__transfer",
        None,
        "complete_task",
        None,
    ]
    mapped = [call_action(c) for c in calls]
    assert mapped[0] == (
        {
            "type": "call_tool",
            "tool_call": {"tool": "crm", "endpoint": "search_contacts", "params": {"email": "a@b.c"}},
        },
        False,
    )
    # bad JSON arguments: an action of an unknown type naming the problem, a parse failure
    assert mapped[1][1] and mapped[1][0]["type"].startswith(
        "malformed function call: the arguments are not JSON"
    )
    assert mapped[2] == ({"type": "teleport"}, False)  # an unknown function: an unknown action type
    assert mapped[3][0]["tool_call"]["endpoint"] == "retired_endpoint"  # reaches the API, which answers
    assert mapped[4][0]["tool_call"]["tool"] == "bank"  # the environment names the unknown tool
    assert mapped[5][1] and mapped[7][1]  # unreadable blocks, a cut one included
    assert mapped[6] == ({"type": "complete_task", "complete": {"summary": "done"}}, False)
    assert read_calls("no calls here, just prose") == []


def test_non_finite_numbers_make_arguments_unreadable() -> None:
    (call,) = read_calls(call_text("crm__get_contact", '{"limit": NaN}'))
    assert call.error is not None and call_action(call)[1]


# -- against the server -------------------------------------------------------------------------------


@pytest.mark.parametrize(("ruleset", "cell_list"), [(V1, V1_CELLS), (LEGACY, LEGACY_CELLS)])
def test_one_oracle_sequence_scores_identically_through_either_harness(ruleset, cell_list) -> None:
    """The default harness gets the actions one JSON text per turn, the tools harness two native
    calls per turn: the episodes, and every record column but the harness's own, are the same."""
    plans = oracle_plans(ruleset, cell_list)
    with OpenAIServer(json_reply(plans), usage=False) as server:
        by_json = play(server, ruleset, cell_list, "default")
        json_requests = len(server.chat_requests())
    with OpenAIServer(tools_reply(plans), usage=False) as server:
        by_tools = play(server, ruleset, cell_list, "tools")
        tools_requests = len(server.chat_requests())
    own = {"harness", "generation_config", "wall_s"}
    for a, b in zip(by_json, by_tools, strict=True):
        assert a.record["status"] == b.record["status"] == "graded"
        assert {k: v for k, v in a.record.items() if k not in own} == {
            k: v for k, v in b.record.items() if k not in own
        }
        assert [{k: v for k, v in d.items() if k != "harness"} for d in a.drifts] == [
            {k: v for k, v in d.items() if k != "harness"} for d in b.drifts
        ]
        assert all(d["harness"] == "default" for d in a.drifts)
        assert all(d["harness"] == "tools" for d in b.drifts)
        steps_a = [{k: v for k, v in s.items() if k != "text"} for s in a.trajectory["steps"]]
        steps_b = [{k: v for k, v in s.items() if k != "text"} for s in b.trajectory["steps"]]
        assert steps_a == steps_b
    assert any(result.drifts for result in by_tools), "the cells meet drifts"
    assert by_tools[0].record["success"] and by_tools[0].record["parse_failures"] == 0
    assert tools_requests < json_requests  # two calls a turn: about half the requests


def test_parallel_calls_bad_arguments_and_unknown_functions_count_as_invalid_actions() -> None:
    replies = iter(
        [
            {
                "content": "Looking up.",
                "tool_calls": [
                    tool_call("crm__search_contacts", '{"email": "nobody@example.com"}', 0),
                    tool_call("crm__update_contact", '{"contact_key": ', 1),
                    tool_call("teleport", "{}", 2),
                ],
            },
            {"content": "I am not sure what to do."},
            {"content": None, "tool_calls": [tool_call("complete_task", '{"summary": "gave up"}')]},
        ]
    )
    with OpenAIServer(lambda body: next(replies)) as server:
        # the control arm: no drift answers the lookup otherwise than documented
        (result,) = play(server, V1, cells(["v1"], ["customer_lookup"], [0], arms=[CONTROL]), "tools")
        requests = server.chat_requests()
    record, steps = result.record, result.trajectory["steps"]
    assert record["status"] == "graded" and record["steps"] == 5 and record["final_action"] == "complete_task"
    assert record["invalid_actions"] == 3  # bad arguments, unknown function, a turn without a call
    assert record["parse_failures"] == 2  # the unreadable arguments and the turn without a call
    assert steps[0]["response"]["status"] == 200
    assert "malformed function call: the arguments are not JSON" in steps[1]["feedback"]
    assert "unknown action type 'teleport'" in steps[2]["feedback"]
    assert steps[3]["text"] == "I am not sure what to do." and "no function call" in steps[3]["feedback"]
    assert record["tokens_in"] > 0 and steps[0]["tokens_used"] > 0 and steps[1]["tokens_used"] == 0
    # three requests: the turn of three calls, the turn without one, the last call
    assert len(requests) == 3
    second = requests[1].body["messages"]
    assistant = second[2]
    assert assistant["content"] == "Looking up."
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert ids == ["call_0_0", "call_0_1", "call_0_2"]  # ours, not the server's
    assert assistant["tool_calls"][1]["function"]["arguments"] == '{"contact_key": '  # as the model wrote it
    assert [(m["role"], m.get("tool_call_id")) for m in second[3:]] == [("tool", i) for i in ids]
    third = requests[2].body["messages"]
    assert third[-2] == {"role": "assistant", "content": "I am not sure what to do."}
    assert third[-1]["role"] == "user" and "STEP 4 of" in third[-1]["content"]
    assert all(r.body["tools"] == requests[0].body["tools"] for r in requests)


def test_the_cache_key_holds_the_harness(tmp_path: Path) -> None:
    observation = Environment(V1).reset("customer_lookup", 0)
    identity, generation = {"model": "m"}, {"temperature": 0}
    keys = {
        ResponseCache.key(identity, kind.for_ruleset(V1, observation).messages(), generation, 0)
        for kind in (Conversation, ToolConversation)
    }
    assert len(keys) == 2


def episodes(out: Path) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k != "wall_s"}
        for r in pq.read_table(out / "episodes.parquet").to_pylist()
    ]


def test_eval_with_the_tools_harness_records_caches_and_resumes(tmp_path: Path, capsys) -> None:
    plans = oracle_plans(V1, cells(["v1"], ["customer_lookup"], [0, 1]))
    with OpenAIServer(tools_reply(plans)) as server:
        args = ["eval", "--policy", "openai:m", "--base-url", server.base_url, "--ruleset", "v1"]
        args += ["--scenarios", "customer_lookup", "--seeds", "0-1", "--harness", "tools"]
        out = tmp_path / "tools"
        assert main([*args, "--out", str(out)]) == 0
        first = episodes(out)
        sent = len(server.chat_requests())
        assert main([*args, "--out", str(out)]) == 0  # resumes every cell, asks nothing
        assert "2 resumed" in capsys.readouterr().out and len(server.chat_requests()) == sent
        # without its progress the evaluation replays from the response cache: the same records
        for path in sorted((out / "progress").rglob("*.json")):
            path.unlink()
        assert main([*args, "--out", str(out)]) == 0
        assert len(server.chat_requests()) == sent
        assert episodes(out) == first
        # the other harness is another configuration: refused in the same folder
        default = [a if a != "tools" else "default" for a in args]
        assert main([*default, "--out", str(out)]) == 2
        assert "another configuration" in capsys.readouterr().err
    assert all(r["harness"] == "tools" and r["status"] == "graded" and r["success"] for r in first)
    assert all(json.loads(r["generation_config"])["harness"] == "tools" for r in first)


def test_an_unknown_harness_is_refused(tmp_path: Path, capsys) -> None:
    args = ["eval", "--policy", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--harness", "native"]
    assert main([*args, "--out", str(tmp_path)]) == 2
    assert "--harness: unknown harness 'native'; known: default, legacy, tools" in capsys.readouterr().err


def test_a_json_action_written_as_text_is_no_call() -> None:
    """In the tools harness only calls act: an action written as JSON text (the default harness's
    form), or a call block without a function name, is an invalid step, never played."""
    complete = {"type": "complete_task", "complete": {"summary": "done"}}
    replies = iter(
        [
            {"content": action_text(complete)},
            {"content": f"<tool_call>\n{action_text(complete)}\n</tool_call>"},
            {"content": None, "tool_calls": [tool_call("complete_task", '{"summary": "done"}')]},
        ]
    )
    with OpenAIServer(lambda body: next(replies)) as server:
        (result,) = play(server, V1, cells(["v1"], ["customer_lookup"], [0]), "tools")
    steps = result.trajectory["steps"]
    assert result.record["steps"] == 3 and result.record["invalid_actions"] == 2
    assert result.record["parse_failures"] == 2
    assert "no function call" in steps[0]["feedback"] and "has no function name" in steps[1]["feedback"]
    assert steps[2]["action"] == complete
