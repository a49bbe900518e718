"""`serve --record`: episodes played over MCP (fastmcp's Client) and WebSocket (the runner's remote
backend) are written as `run`'s records, under the policy the client declares, one complete set
per episode even when the server is killed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from server_support import comparable, free_port, running_server
from test_mcp import as_tool_call, mcp_url

from schemashift import provenance
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout import io, resultset
from schemashift.rollout.backends import InProcessBackend, RemoteBackend
from schemashift.rollout.runner import SweepContext, cells, run_sweep
from schemashift.rollout.validate import differences

pytest.importorskip("fastmcp")
from fastmcp import Client  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: what a served episode cannot know (the client's tokens and parse failures) or may differ in
#: between two plays of a cell
NOT_COMPARED = frozenset({"sweep_id", "wall_s", "tokens_in", "tokens_out", "parse_failures", "harness"})
CELLS = [
    ("legacy", "E1_onboard_new_hire", 0),
    ("legacy", "E3_customer_lookup", 2),
    ("v1", "onboard_new_hire", 1),
]


def recorded(directory: Path) -> list[dict]:
    """Every complete result set under `directory`: its episode row, drift rows and trajectory."""
    found = []
    for episodes in sorted(directory.rglob(resultset.EPISODES_FILE)):
        resultset.check(episodes.parent)
        [record] = io.read_parquet_rows(episodes)
        drifts = io.read_parquet_rows(episodes.parent / resultset.DRIFTS_FILE)
        [trajectory] = io.read_jsonl(episodes.parent / resultset.TRAJECTORIES_FILE)
        found.append(
            {"record": record, "drifts": drifts, "trajectory": trajectory, "folder": episodes.parent}
        )
    return found


def run_records(policy: str, cell_list) -> dict:
    """`run`'s records of the cells, in process, by cell."""
    results = []
    for ruleset, scenario, seed in cell_list:
        results += run_sweep(
            InProcessBackend(),
            make_policy(policy, get_ruleset(ruleset)),
            cells([ruleset], [scenario], [seed]),
            SweepContext(
                sweep_id="run", policy=policy, git_sha=provenance.git_sha(), image=provenance.image()
            ),
        )
    return {(r.record["ruleset"], r.record["scenario"], r.record["seed"]): r for r in results}


def without(row: dict, keys=NOT_COMPARED) -> dict:
    return {k: v for k, v in comparable(row).items() if k not in keys}


async def play_over_mcp(url: str, ruleset: str, scenario: str, seed: int, policy: str, plan, steps=None):
    async with Client(url) as client:
        await client.call_tool(
            "reset", {"scenario": scenario, "seed": seed, "ruleset": ruleset, "policy": policy}
        )
        for action in plan[:steps]:
            name, arguments = as_tool_call(action)
            await client.call_tool(name, arguments, raise_on_error=False)


def oracle_plan(ruleset: str, scenario: str, seed: int) -> list[dict]:
    rs = get_ruleset(ruleset)
    return rs.solution(rs.build_task(scenario, seed))


def test_mcp_episodes_are_recorded_as_runs_records(tmp_path):
    with running_server(record_dir=tmp_path) as url:
        for ruleset, scenario, seed in CELLS:
            plan = oracle_plan(ruleset, scenario, seed)
            asyncio.run(play_over_mcp(mcp_url(url), ruleset, scenario, seed, "oracle", plan))
    assert next(differences(tmp_path), None) is None  # `validate` re-grades the recordings
    episodes = recorded(tmp_path)
    expected = run_records("oracle", CELLS)
    assert len(episodes) == len(CELLS)
    for episode in episodes:
        record = episode["record"]
        run = expected[(record["ruleset"], record["scenario"], record["seed"])]
        assert record["policy"] == "oracle" and record["harness"] == "mcp"
        assert record["success"] is True and record["score"] == run.record["score"]
        assert without(record) == without(run.record)
        assert [without(d) for d in episode["drifts"]] == [without(d) for d in run.drifts]
        actions = [step["action"] for step in episode["trajectory"]["steps"]]
        assert actions == comparable([step["action"] for step in run.trajectory["steps"]])
        assert episode["folder"].relative_to(tmp_path).parts == (
            record["ruleset"],
            "oracle",
            record["scenario"],
            f"seed-{record['seed']}",
            "sample-0",
        )


def test_websocket_episodes_are_recorded_under_the_declared_policy(tmp_path):
    policy = "policy_aware_heuristic"
    with running_server(record_dir=tmp_path) as url:
        backend = RemoteBackend(url, policy=policy)
        try:
            for ruleset, scenario, seed in CELLS + CELLS[:1]:  # one cell twice: a second sample
                run_sweep(
                    backend,
                    make_policy(policy, get_ruleset(ruleset)),
                    cells([ruleset], [scenario], [seed]),
                    SweepContext(sweep_id="remote", policy=policy),
                )
        finally:
            backend.close()
    episodes = recorded(tmp_path)
    expected = run_records(policy, CELLS)
    samples = sorted((e["record"]["scenario"], e["record"]["sample_index"]) for e in episodes)
    assert samples == sorted([(s, 0) for _, s, _ in CELLS] + [(CELLS[0][1], 1)])
    for episode in episodes:
        record = episode["record"]
        run = expected[(record["ruleset"], record["scenario"], record["seed"])]
        assert record["policy"] == policy and record["harness"] is None
        ignored = NOT_COMPARED | {"sample_index"}
        assert without(record, ignored) == without(run.record, ignored)
        assert [without(d, ignored) for d in episode["drifts"]] == [without(d, ignored) for d in run.drifts]
        steps = [{k: v for k, v in s.items() if k != "tokens_used"} for s in episode["trajectory"]["steps"]]
        assert steps == comparable(
            [{k: v for k, v in s.items() if k != "tokens_used"} for s in run.trajectory["steps"]]
        )


def test_a_left_episode_is_recorded_as_it_stands_and_bad_policy_names_are_refused(tmp_path):
    ruleset, scenario, seed = CELLS[0]
    plan = oracle_plan(ruleset, scenario, seed)

    async def play():
        async with Client(mcp_url(url)) as client:
            bad = await client.call_tool("reset", {"policy": "../escape"}, raise_on_error=False)
            await client.call_tool("reset", {"scenario": scenario, "seed": seed, "policy": "hf:org/model"})
            name, arguments = as_tool_call(plan[0])
            await client.call_tool(name, arguments, raise_on_error=False)
            await client.call_tool("reset", {"scenario": scenario, "seed": seed, "policy": "nothing-played"})
            return bad

    with running_server(record_dir=tmp_path) as url:
        bad = asyncio.run(play())
    assert bad.is_error and "policy must be" in bad.content[0].text
    [episode] = recorded(tmp_path)  # the episode reset with no step taken is not recorded
    assert episode["record"]["policy"] == "hf:org/model" and episode["record"]["steps"] == 1
    assert episode["record"]["success"] is False
    assert episode["folder"].parent.parent.parent.name == "hf:org%2Fmodel"
    assert not (tmp_path / "..escape").exists() and not (tmp_path.parent / "escape").exists()


def test_an_episode_that_cannot_be_written_is_logged_and_the_session_goes_on(tmp_path, caplog):
    (tmp_path / "legacy").write_text("a file where the ruleset's folder would go")
    ruleset, scenario, seed = CELLS[0]
    plan = oracle_plan(ruleset, scenario, seed)

    async def play():
        async with Client(mcp_url(url)) as client:
            await client.call_tool("reset", {"scenario": scenario, "seed": seed, "policy": "oracle"})
            for action in plan:
                name, arguments = as_tool_call(action)
                result = await client.call_tool(name, arguments, raise_on_error=False)
            return result

    with (
        caplog.at_level("ERROR", logger="schemashift.server.recording"),
        running_server(record_dir=tmp_path) as url,
    ):
        last = asyncio.run(play())
    assert not last.is_error and last.structured_content["grade"]["success"] is True
    assert recorded(tmp_path) == []
    assert any("cannot record the episode" in r.getMessage() for r in caplog.records)


def wait_for_health(port: int, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.2)


def test_a_killed_server_loses_only_the_episode_in_flight(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "schemashift.cli",
            "serve",
            "--port",
            str(port),
            "--record",
            str(tmp_path / "rec"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_health(port, server)
        url = f"http://127.0.0.1:{port}/agent/mcp"
        ruleset, scenario, seed = CELLS[0]
        plan = oracle_plan(ruleset, scenario, seed)
        asyncio.run(play_over_mcp(url, ruleset, scenario, seed, "oracle", plan))

        async def half_then_kill():
            async with Client(url) as client:
                ruleset, scenario, seed = CELLS[1]
                await client.call_tool("reset", {"scenario": scenario, "seed": seed, "policy": "oracle"})
                plan = oracle_plan(ruleset, scenario, seed)
                name, arguments = as_tool_call(plan[0])
                await client.call_tool(name, arguments, raise_on_error=False)
                server.send_signal(signal.SIGKILL)
                server.wait(timeout=30)

        asyncio.run(half_then_kill())
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=30)
    [episode] = recorded(tmp_path / "rec")
    assert episode["record"]["scenario"] == CELLS[0][1] and episode["record"]["success"] is True
    leftovers = [p for p in (tmp_path / "rec").rglob("*") if p.is_file() and p.parent != episode["folder"]]
    assert leftovers == [tmp_path / "rec" / ".lock"]  # the folder lock `serve` held; no torn set
