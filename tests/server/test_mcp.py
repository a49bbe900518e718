"""The MCP face: a standard MCP client (fastmcp's Client) plays episodes and gets the in-process grade."""

from __future__ import annotations

import asyncio
import json

import pytest

from schemashift.env.rulesets import available_rulesets, get_ruleset
from schemashift.rollout.backends import InProcessBackend

pytest.importorskip("fastmcp")
from fastmcp import Client  # noqa: E402


def mcp_url(server_url: str) -> str:
    return f"{server_url}/agent/mcp"


def as_tool_call(action: dict) -> tuple[str, dict]:
    kind = action["type"]
    if kind in ("call_tool", "retry_with_variant"):
        sub = action.get("tool_call") or action.get("retry")
        return f"{sub['tool']}__{sub['endpoint']}", sub.get("params") or {}
    if kind == "inspect_schema":
        return "inspect_schema", {"tool": action["inspect"]["tool"]}
    if kind == "report_drift":
        return "report_drift", dict(action["report"])
    return "complete_task", {"summary": action["complete"]["summary"]}


def in_process_grade(ruleset: str, scenario: str, seed: int, plan: list[dict]) -> dict:
    backend = InProcessBackend()
    backend.reset(ruleset, scenario, seed)
    for action in plan:
        observation, _ = backend.step(action)
        if observation["done"]:
            break
    return json.loads(json.dumps(backend.outcome()["summary"]))


async def play_oracle(url: str, ruleset: str, scenario: str, seed: int) -> tuple[dict, list[str]]:
    rs = get_ruleset(ruleset)
    plan = rs.solution(rs.build_task(scenario, seed))
    failures = []
    async with Client(url) as client:
        first = await client.call_tool("reset", {"scenario": scenario, "seed": seed, "ruleset": ruleset})
        assert first.structured_content["task_id"] == scenario
        listed = {tool.name: tool for tool in await client.list_tools()}
        documented = rs.documentation(rs.new_episode(scenario, seed))
        for api, endpoints in documented.items():
            for endpoint, doc in endpoints.items():
                schema = listed[f"{api}__{endpoint}"].inputSchema
                assert set(schema["properties"]) == set(doc["params"])
                assert set(schema.get("required", [])) == set(doc["required"])
        for action in plan:
            name, arguments = as_tool_call(action)
            result = await client.call_tool(name, arguments, raise_on_error=False)
            if result.is_error:
                failures.append(result.content[0].text)
                continue
            if result.structured_content["done"]:
                return result.structured_content["grade"], failures
    raise AssertionError("the oracle's plan did not end the episode")


@pytest.mark.parametrize("ruleset", available_rulesets())
def test_oracle_episodes_over_mcp_get_the_in_process_grade(server_url, ruleset):
    rs = get_ruleset(ruleset)
    for scenario in rs.scenario_ids():
        seed = 3
        grade, _ = asyncio.run(play_oracle(mcp_url(server_url), ruleset, scenario, seed))
        plan = rs.solution(rs.build_task(scenario, seed))
        assert grade == in_process_grade(ruleset, scenario, seed, plan)
        assert grade["success"] is True


def test_stale_endpoint_names_fail_with_the_apis_own_error(server_url):
    ruleset = get_ruleset("legacy")
    scenario, task = next(
        (s, ruleset.build_task(s, 0))
        for s in ruleset.scenario_ids()
        if any(d.kind == "endpoint_deprecation" for d in ruleset.build_task(s, 0).drift_plan)
    )
    drift = next(d for d in task.drift_plan if d.kind == "endpoint_deprecation")

    async def play():
        async with Client(mcp_url(server_url)) as client:
            await client.call_tool("reset", {"scenario": scenario, "seed": 0})
            name = f"{drift.tool}__{drift.endpoint}"
            assert name in {tool.name for tool in await client.list_tools()}
            for _ in range(drift.fires_at_step - 1):
                await client.call_tool("inspect_schema", {"tool": drift.tool})
            result = await client.call_tool(name, {}, raise_on_error=False)
            names = {tool.name for tool in await client.list_tools()}
            return result, names

    result, names = asyncio.run(play())
    assert result.is_error
    assert "410" in result.content[0].text
    assert f"{drift.tool}__{drift.endpoint}" not in names  # legacy documents the live schema


def test_tools_before_reset_and_bad_arguments_are_clear_errors(server_url):
    async def play():
        async with Client(mcp_url(server_url)) as client:
            before = await client.call_tool("complete_task", {"summary": "x"}, raise_on_error=False)
            unknown = await client.call_tool("reset", {"scenario": "Z9_nothing"}, raise_on_error=False)
            await client.call_tool("reset", {})
            bad_kind = await client.call_tool(
                "report_drift",
                {"tool": "mail", "drift_kind": "gremlins", "description": "x"},
                raise_on_error=False,
            )
            missing = await client.call_tool("no_such_tool", {}, raise_on_error=False)
            return before, unknown, bad_kind, missing

    before, unknown, bad_kind, missing = asyncio.run(play())
    assert before.is_error and "reset" in before.content[0].text
    assert unknown.is_error and "UnknownScenario" in unknown.content[0].text
    assert bad_kind.is_error and "InvalidAction" in bad_kind.content[0].text
    assert missing.is_error


def test_mcp_sessions_are_independent(server_url):
    ruleset = get_ruleset("legacy")
    scenarios = ruleset.scenario_ids()[:3]

    async def both():
        return await asyncio.gather(*(play_oracle(mcp_url(server_url), "legacy", s, 1) for s in scenarios))

    grades = asyncio.run(both())
    for scenario, (grade, _) in zip(scenarios, grades, strict=True):
        plan = ruleset.solution(ruleset.build_task(scenario, 1))
        assert grade == in_process_grade("legacy", scenario, 1, plan)
