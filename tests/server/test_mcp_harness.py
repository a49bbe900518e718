"""The MCP face as a third harness: an external agent (fastmcp's Client standing in for a
framework) plays through /agent/mcp, its call log becomes actions by the tools harness's own
mapping, and `replay --out` writes the records any policy's episode gets, with the grade the
server returned."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemashift.cli import main
from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.functions import FunctionCall, action_call, call_action
from schemashift.rollout import records

pytest.importorskip("fastmcp")
from fastmcp import Client  # noqa: E402

pytestmark = pytest.mark.timeout(120)


async def play_and_log(
    url: str, ruleset: str, scenario: str, seed: int
) -> tuple[dict, list[tuple[str, dict]]]:
    """The oracle's plan as MCP tool calls; (the grade, every call made)."""
    rs = get_ruleset(ruleset)
    log = []
    async with Client(url) as client:
        await client.call_tool("reset", {"scenario": scenario, "seed": seed, "ruleset": ruleset})
        for action in rs.solution(rs.build_task(scenario, seed)):
            name, arguments = action_call(action)
            if action["type"] == "retry_with_variant":  # the MCP face has no retry tool: a call
                sub = action["retry"]
                name, arguments = f"{sub['tool']}__{sub['endpoint']}", dict(sub["params"])
            log.append((name, arguments))
            result = await client.call_tool(name, arguments, raise_on_error=False)
            if not result.is_error and result.structured_content["done"]:
                return result.structured_content["grade"], log
    raise AssertionError("the plan did not end the episode")


@pytest.mark.parametrize(
    ("ruleset", "scenario"), [("v1", "customer_lookup"), ("legacy", "E3_customer_lookup")]
)
def test_an_mcp_played_episode_gets_the_records_of_any_policy(
    server_url, tmp_path: Path, ruleset, scenario
) -> None:
    seed = 2
    grade, log = asyncio.run(play_and_log(f"{server_url}/agent/mcp", ruleset, scenario, seed))
    actions = tmp_path / "calls.jsonl"
    lines = [json.dumps(call_action(FunctionCall(name, arguments, ""))[0]) for name, arguments in log]
    actions.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    args = [
        "replay",
        "--ruleset",
        ruleset,
        "--scenario",
        scenario,
        "--seed",
        str(seed),
        "--actions",
        str(actions),
    ]
    assert main([*args, "--out", str(out), "--policy", "mcp:fastmcp-client"]) == 0
    table = pq.read_table(out / "episodes.parquet")
    assert table.schema.names == [column.name for column in records.EPISODE_COLUMNS]
    (row,) = table.to_pylist()
    assert (row["policy"], row["harness"], row["status"]) == ("mcp:fastmcp-client", "mcp", "graded")
    assert row["score"] == grade["score"] and row["success"] == grade["success"] is True
    assert row["steps"] == len(log)
    assert {p.name for p in out.iterdir()} >= {"episodes.parquet", "drifts.parquet", "trajectories.jsonl.gz"}
    # a stored trajectory is scored, not recorded again
    assert (
        main(["replay", "--trajectory", str(out / "trajectories.jsonl.gz"), "--out", str(tmp_path / "x")])
        == 2
    )
