"""Sessions: 64 at once without cross-talk, capacity, idle reaping, the state route, the clients."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from server_support import Session, as_written, running_server

from schemashift.env.arms import DEFAULT_ARM
from schemashift.env.rulesets import available_rulesets, get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout.backends import InProcessBackend, RemoteBackend
from schemashift.rollout.runner import SweepContext, cells, play_episode

SESSIONS = 64


class BarrierBackend(RemoteBackend):
    """Waits after reset until every session is open, so all of them play at the same time."""

    def __init__(self, url: str, barrier: threading.Barrier) -> None:
        super().__init__(url)
        self.barrier = barrier

    def reset(self, ruleset, scenario, seed, arm=DEFAULT_ARM):
        observation = super().reset(ruleset, scenario, seed, arm)
        self.barrier.wait(timeout=60)
        return observation


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_64_concurrent_sessions_each_equal_their_in_process_twin(server_url):
    cell_list = []
    for ruleset in available_rulesets():
        scenarios = get_ruleset(ruleset).scenario_ids()
        cell_list += cells([ruleset], scenarios, range(-(-SESSIONS // len(scenarios))))
    cell_list = [cell_list[i * len(cell_list) // SESSIONS] for i in range(SESSIONS)]
    assert len(set(cell_list)) == SESSIONS
    context = SweepContext("concurrent", "policy_aware_heuristic")
    barrier = threading.Barrier(SESSIONS)
    remote: list = [None] * SESSIONS

    def play(i: int) -> None:
        cell = cell_list[i]
        backend = BarrierBackend(server_url, barrier)
        try:
            policy = make_policy("policy_aware_heuristic", get_ruleset(cell.ruleset))
            remote[i] = play_episode(backend, policy, cell, context)
        finally:
            backend.close()

    threads = [threading.Thread(target=play, args=(i,)) for i in range(SESSIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not barrier.broken, "not every session was open at once"
    local = []
    backend = InProcessBackend()
    for cell in cell_list:
        policy = make_policy("policy_aware_heuristic", get_ruleset(cell.ruleset))
        local.append(play_episode(backend, policy, cell, context))
    assert [r.record["status"] for r in remote] == ["graded"] * SESSIONS, [r.record["error"] for r in remote]
    assert as_written(remote) == as_written(local)


def test_sessions_beyond_capacity_are_refused_clearly():
    scenario = get_ruleset("legacy").scenario_ids()[0]
    with running_server(max_sessions=2) as url:
        with Session(url) as first, Session(url) as second:
            for session in (first, second):
                assert session.send("reset", {"scenario": scenario})["type"] == "observation"
            with Session(url) as third:
                reply = json.loads(third.ws.recv(timeout=10))
                assert reply["data"]["code"] == "CAPACITY_REACHED"
                assert "2" in reply["data"]["message"]
            assert first.send("step", {"type": "complete_task", "complete": {"summary": "x"}})["data"]["done"]
        # Closed sessions free their slots.
        with Session(url) as again:
            assert again.send("reset", {"scenario": scenario})["type"] == "observation"


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.timeout(60)
def test_idle_sessions_are_closed_after_the_timeout_and_free_their_slot():
    import time

    from websockets.exceptions import ConnectionClosed

    scenario = get_ruleset("legacy").scenario_ids()[0]
    with running_server(max_sessions=1, session_timeout_s=1.0) as url:
        with Session(url) as idle:
            assert idle.send("reset", {"scenario": scenario})["type"] == "observation"
            started = time.monotonic()
            # The server says why, then closes the socket: nothing is left half-open.
            frame = json.loads(idle.ws.recv(timeout=10))
            assert frame["data"]["code"] == "SESSION_TIMEOUT"
            with pytest.raises(ConnectionClosed) as closed:
                idle.ws.recv(timeout=10)
            assert closed.value.rcvd.code == 4408
            assert 0.9 < time.monotonic() - started < 5
        with Session(url) as newcomer:  # the slot is free at once
            assert newcomer.send("reset", {"scenario": scenario})["type"] == "observation"


@pytest.mark.timeout(60)
def test_a_session_that_keeps_playing_is_not_closed():
    import time

    scenario = get_ruleset("legacy").scenario_ids()[0]
    with running_server(max_sessions=1, session_timeout_s=1.0) as url, Session(url) as busy:
        assert busy.send("reset", {"scenario": scenario})["type"] == "observation"
        for turn in range(8):  # 3.2 s of play, over three times the timeout
            time.sleep(0.4)
            if turn % 2:
                reply = busy.send("step", {"type": "inspect_schema", "inspect": {"tool": "mail"}})
            else:
                reply = busy.send("reset", {"scenario": scenario, "seed": turn})
            assert reply["type"] == "observation", reply


def test_state_shows_no_ground_truth_and_no_drift_plan(server_url):
    ruleset = get_ruleset("legacy")
    scenario = next(s for s in ruleset.scenario_ids() if ruleset.build_task(s, 0).drift_plan)
    task = ruleset.build_task(scenario, 0)
    secrets = {json.dumps(spec.to_dict(), sort_keys=True) for spec in task.drift_plan}
    with Session(server_url) as session:
        session.send("reset", {"scenario": scenario, "seed": 0, "outcome": True})
        first = session.send("step", {"type": "inspect_schema", "inspect": {"tool": task.tools[0]}})
        state = session.send("state")["data"]
        http_state = httpx.get(f"{server_url}/state").json()
    assert state["scenario"] == scenario and state["step_count"] == 1
    assert set(state) == set(http_state) == {
        "episode_id", "step_count", "ruleset", "scenario", "seed", "done", "max_steps",
        "token_budget_remaining", "drifts_fired",
    }  # fmt: skip
    text = json.dumps(state)
    assert "ground_truth" not in text and "drift_plan" not in text and "fires_at_step" not in text
    # Before the end, observations carry no outcome, even when asked for (it holds the drift plan).
    assert first["data"]["observation"]["outcome"] is None
    assert not any(secret in json.dumps(first, sort_keys=True) for secret in secrets)


def test_sync_and_async_openenv_clients_play_an_episode(server_url):
    from schemashift.env import InvalidAction
    from schemashift.server.client import SchemaShiftEnv
    from schemashift.server.models import SchemaShiftAction

    ruleset = get_ruleset("legacy")
    scenario = ruleset.scenario_ids()[1]
    plan = ruleset.solution(ruleset.build_task(scenario, 5))

    with SchemaShiftEnv(base_url=server_url).sync() as env:
        result = env.reset(scenario=scenario, seed=5, ruleset="legacy", outcome=True)
        assert result.observation.view["task_id"] == scenario and not result.done
        with pytest.raises(InvalidAction, match="unknown action type"):
            env.step(SchemaShiftAction(type="teleport"))
        with pytest.raises(InvalidAction, match="must be a JSON object, got NoneType"):
            env.step(SchemaShiftAction(raw=None))  # a policy's output that was JSON null
        for action in plan:
            result = env.step(SchemaShiftAction.model_validate(action))
            if result.done:
                break
        sync_summary = result.observation.outcome["summary"]
        assert env.state().done is True

    async def play_async():
        async with SchemaShiftEnv(base_url=server_url.replace("http", "ws")) as env:
            result = await env.reset(scenario=scenario, seed=5, outcome=True)
            for action in plan:
                result = await env.step(action)
                if result.done:
                    return result.observation.outcome["summary"], result.reward

    async_summary, reward = asyncio.run(play_async())
    backend = InProcessBackend()
    backend.reset("legacy", scenario, 5)
    for action in plan:
        observation, breakdown = backend.step(action)
        if observation["done"]:
            break
    assert sync_summary == async_summary == json.loads(json.dumps(backend.outcome()["summary"]))
    assert reward == breakdown["score"]


@pytest.mark.timeout(30)
def test_the_openenv_client_drops_a_connection_whose_reply_came_too_late():
    """A reply that misses the message timeout may still arrive; the client must not take it for
    the answer to its next request. A server that answers a reset with seed 1 late and any other
    at once: the next reset gets its own reply, over a new connection."""
    from websockets.asyncio.server import serve

    from schemashift.server.client import SchemaShiftEnv

    connections = []

    async def answer(websocket):
        connections.append(websocket)
        async for text in websocket:
            seed = json.loads(text)["data"].get("seed")
            if seed == 1:
                await asyncio.sleep(0.6)
            reply = {"type": "observation", "data": {"observation": {"view": {"seed": seed}}, "done": False}}
            await websocket.send(json.dumps(reply))

    async def play():
        async with serve(answer, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            async with SchemaShiftEnv(base_url=f"ws://127.0.0.1:{port}", message_timeout_s=0.2) as env:
                with pytest.raises(TimeoutError):
                    await env.reset(seed=1)
                result = await env.reset(seed=2)
                assert result.observation.view == {"seed": 2}
        assert len(connections) == 2

    asyncio.run(play())
