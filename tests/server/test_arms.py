"""The control arm over the wire: WebSocket, HTTP and MCP resets take `arm`, refuse a bad one
with a clear error and the session intact, and play the control episode (the task with its drift
plan off); the runner's remote backend asks for it and gets a clear error from a server older
than arms; `serve --record` records the control episode apart from the drift one."""

from __future__ import annotations

import asyncio
import inspect
import json

import httpx
import pytest
from server_support import Session, comparable, running_server, serving
from test_mcp import as_tool_call, mcp_url
from test_recording import recorded

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.env.rulesets import get_ruleset
from schemashift.rollout.backends import InProcessBackend, RemoteBackend

pytest.importorskip("fastmcp")
import mcp.types as mt  # noqa: E402
from fastmcp import Client  # noqa: E402

SCENARIO, SEED = "customer_escalation", 2
V1_RESET = {"ruleset": "v1", "scenario": SCENARIO, "seed": SEED}
LEGACY_SCENARIO = get_ruleset("legacy").scenario_ids()[0]


def plan(arm: str, scenario: str = SCENARIO, seed: int = SEED, ruleset: str = "v1") -> list[dict]:
    rs = get_ruleset(ruleset)
    return rs.solution(rs.arm_task(scenario, seed, arm))


def first_view(reply: dict) -> dict:
    view = dict(reply["data"]["observation"]["view"])
    view.pop("episode_id")
    return view


def play(backend, arm: str) -> dict:
    backend.reset("v1", SCENARIO, SEED, arm=arm)
    for action in plan(arm):
        observation, _ = backend.step(action)
        if observation["done"]:
            break
    return json.loads(json.dumps(backend.outcome(), default=str))


def test_websocket_reset_plays_the_arm_asked_for(server_url):
    with Session(server_url) as session:
        drift = session.send("reset", V1_RESET)
        control = session.send("reset", {**V1_RESET, "arm": CONTROL})
        assert first_view(control) == first_view(drift)  # the agent is not told the arm
        assert session.send("state")["data"]["drifts_fired"] == 0
        for action in plan(CONTROL):
            reply = session.send("step", action)
            assert reply["type"] == "observation", reply
        state = session.send("state")["data"]
        assert state["done"] is True and state["drifts_fired"] == 0


def test_remote_backend_plays_the_control_arm_as_in_process(server_url):
    remote = RemoteBackend(server_url)
    try:
        outcomes = {arm: play(remote, arm) for arm in (CONTROL, DRIFT)}
    finally:
        remote.close()
    local = InProcessBackend()
    for arm, outcome in outcomes.items():
        assert outcome == play(local, arm)
        assert outcome["task"]["arm"] == arm and outcome["summary"]["success"] is True
    assert outcomes[CONTROL]["drifts"] == [] and outcomes[DRIFT]["drifts"]


BAD_ARMS = [
    ("v1", "placebo", "unknown arm 'placebo': the arms are drift, control"),
    ("v1", 5, "unknown arm 5"),
    ("v1", ["control"], "unknown arm ['control']"),
    ("legacy", CONTROL, "ruleset legacy plays only the drift arm(s), not 'control'"),
]


@pytest.mark.parametrize("ruleset, arm, words", BAD_ARMS)
def test_a_bad_arm_over_websocket_is_refused_and_the_episode_goes_on(server_url, ruleset, arm, words):
    with Session(server_url) as session:
        assert session.send("reset", V1_RESET)["type"] == "observation"
        assert session.send("step", plan(DRIFT)[0])["type"] == "observation"
        scenario = SCENARIO if ruleset == "v1" else LEGACY_SCENARIO
        reply = session.send("reset", {"ruleset": ruleset, "scenario": scenario, "arm": arm})
        assert reply["type"] == "error", reply
        assert f"ValueError: {words}" in reply["data"]["message"], reply
        state = session.send("state")["data"]
        assert (state["ruleset"], state["scenario"], state["step_count"]) == ("v1", SCENARIO, 1)
        for action in plan(DRIFT)[1:]:
            assert session.send("step", action)["type"] == "observation"
        assert session.send("state")["data"]["done"] is True


def test_http_reset_takes_the_arm(server_url):
    control = httpx.post(f"{server_url}/reset", json={**V1_RESET, "arm": CONTROL})
    assert control.status_code == 200 and control.json()["observation"]["view"]["task_id"] == SCENARIO
    bad = httpx.post(f"{server_url}/reset", json={**V1_RESET, "arm": "placebo"})
    assert bad.status_code == 400 and "unknown arm 'placebo'" in bad.json()["detail"]
    legacy = httpx.post(f"{server_url}/reset", json={"ruleset": "legacy", "arm": CONTROL})
    assert legacy.status_code == 400 and "plays only the drift arm" in legacy.json()["detail"]


def pre_arm_app():
    """A server as it was before arms (6841c30): its reset knows no `arm` and refuses unknown
    parameters, and its outcome does not name the arm. Built from today's environment with the
    old reset's signature and refusal, since the old code itself is not importable."""
    from openenv.core.env_server.http_server import create_app

    from schemashift.server.environment import RequestError, SchemaShiftEnvironment
    from schemashift.server.models import SchemaShiftAction, SchemaShiftObservation, SchemaShiftState

    class PreArmEnvironment(SchemaShiftEnvironment):
        def reset(
            self,
            seed=None,
            episode_id=None,
            scenario=None,
            ruleset=None,
            view_delta=False,
            outcome=False,
            policy=None,
            harness=None,
            **kwargs,
        ):
            if kwargs:
                raise RequestError(
                    "ValueError",
                    f"unknown reset parameters {sorted(kwargs)}; "
                    "expected scenario, seed, ruleset, episode_id, view_delta, outcome, policy, harness",
                )
            return super().reset(seed, episode_id, scenario, ruleset, view_delta, outcome, policy, harness)

        def step(self, *args, **kwargs):
            observation = super().step(*args, **kwargs)
            if observation.outcome is not None:
                observation.outcome["task"].pop("arm")
            return observation

        async def reset_async(self, *args, **kwargs):
            return self.reset(*args, **kwargs)

        async def step_async(self, *args, **kwargs):
            return self.step(*args, **kwargs)

        reset_async.__signature__ = inspect.signature(reset)

    return create_app(
        PreArmEnvironment,
        SchemaShiftAction,
        SchemaShiftObservation,
        env_name="schemashift",
        state_cls=SchemaShiftState,
    )


def test_a_server_before_arms_refuses_the_control_arm_clearly_and_still_plays_drift():
    with serving(pre_arm_app()) as url:
        backend = RemoteBackend(url)
        try:
            with pytest.raises(ValueError, match=r"plays no arms .* cannot play the control arm") as caught:
                backend.reset("v1", SCENARIO, SEED, arm=CONTROL)
            assert "unknown reset parameters ['arm']" in str(caught.value)
            outcome = play(backend, DRIFT)  # the default arm is not sent: the old server plays it
        finally:
            backend.close()
    assert "arm" not in outcome["task"] and outcome["drifts"] and outcome["summary"]["success"] is True


async def play_over_mcp(url: str, arguments: dict, actions: list[dict]) -> tuple[dict, list, list]:
    """Reset with `arguments`, play `actions`; the reset's result, the results and the
    tools/list_changed notifications received after the reset's."""
    notices: list = []

    async def on_message(message) -> None:
        if isinstance(getattr(message, "root", None), mt.ToolListChangedNotification):
            notices.append(message.root)

    async with Client(url, message_handler=on_message) as client:
        first = await client.call_tool("reset", arguments)
        await client.list_tools()
        after_reset = len(notices)
        assert after_reset >= 1  # the reset announces its episode's tools
        results = []
        for action in actions:
            name, args = as_tool_call(action)
            results.append(await client.call_tool(name, args, raise_on_error=False))
        await client.ping()
        return first.structured_content, results, notices[after_reset:]


def test_mcp_reset_plays_the_arm_asked_for(server_url):
    url = mcp_url(server_url)
    drift_first, drift, _ = asyncio.run(play_over_mcp(url, V1_RESET, plan(DRIFT)))
    control_first, control, _ = asyncio.run(play_over_mcp(url, {**V1_RESET, "arm": CONTROL}, plan(CONTROL)))
    drift_first.pop("episode_id"), control_first.pop("episode_id")
    assert control_first == drift_first
    grades = {}
    for arm, results in ((DRIFT, drift), (CONTROL, control)):
        grades[arm] = results[-1].structured_content["grade"]
        local = InProcessBackend()
        assert comparable(grades[arm]) == comparable(play(local, arm)["summary"])
        assert grades[arm]["success"] is True
    assert grades[CONTROL]["drifts_fired"] == 0 < grades[DRIFT]["drifts_fired"]


def test_a_bad_arm_over_mcp_is_a_tool_error_and_the_episode_goes_on(server_url):
    async def play():
        async with Client(mcp_url(server_url)) as client:
            await client.call_tool("reset", V1_RESET)
            actions = plan(DRIFT)
            await client.call_tool(*as_tool_call(actions[0]), raise_on_error=False)
            refused = []
            for ruleset, arm, _ in BAD_ARMS:
                scenario = SCENARIO if ruleset == "v1" else LEGACY_SCENARIO
                arguments = {"ruleset": ruleset, "scenario": scenario, "arm": arm}
                refused.append(await client.call_tool("reset", arguments, raise_on_error=False))
            for action in actions[1:]:
                result = await client.call_tool(*as_tool_call(action), raise_on_error=False)
            return refused, result

    refused, last = asyncio.run(play())
    for result, (_, arm, words) in zip(refused, BAD_ARMS, strict=True):
        assert result.is_error
        # a wrongly typed arm is refused by the tool's input schema, the rest by the environment
        assert (words if isinstance(arm, str) else "arm") in result.content[0].text
    assert last.structured_content["done"] is True and last.structured_content["grade"]["success"] is True


def test_mcp_announces_tool_list_changes_when_the_listed_schema_drifts(server_url):
    """tools/list_changed is sent when the listed tools change: in legacy, whose documentation is
    the live schema, at every drift that changes it; v1 lists the documentation published at the
    start of the episode, which drift leaves stale, so neither arm announces anything after the
    reset (a notice would tell an MCP agent what no other harness is told: that a drift fired)."""
    rs = get_ruleset("legacy")
    url = mcp_url(server_url)
    for scenario in rs.scenario_ids():
        actions = plan(DRIFT, scenario, 0, "legacy")
        _, results, notices = asyncio.run(
            play_over_mcp(url, {"ruleset": "legacy", "scenario": scenario}, actions)
        )
        assert results[-1].structured_content["grade"]["success"] is True
        fired = results[-1].structured_content["grade"]["drifts_fired"]
        assert fired >= 1 and len(notices) == fired, (scenario, fired, notices)
    for arm in (DRIFT, CONTROL):
        _, results, notices = asyncio.run(play_over_mcp(url, {**V1_RESET, "arm": arm}, plan(arm)))
        assert results[-1].structured_content["grade"]["success"] is True
        assert notices == []


def test_recordings_keep_the_control_episode_apart(tmp_path):
    with running_server(record_dir=tmp_path) as url:
        for arm in (DRIFT, CONTROL):
            asyncio.run(play_over_mcp(mcp_url(url), {**V1_RESET, "arm": arm, "policy": "oracle"}, plan(arm)))
        backend = RemoteBackend(url, policy="oracle")
        try:
            play(backend, CONTROL)
        finally:
            backend.close()
    episodes = {episode["folder"].relative_to(tmp_path).as_posix(): episode for episode in recorded(tmp_path)}
    cell = f"v1/oracle/{SCENARIO}/seed-{SEED}"
    assert sorted(episodes) == [f"{cell}/control/sample-0", f"{cell}/control/sample-1", f"{cell}/sample-0"]
    drift = episodes[f"{cell}/sample-0"]
    assert drift["record"]["drifts_fired"] > 0 and drift["drifts"]
    for folder in (f"{cell}/control/sample-0", f"{cell}/control/sample-1"):
        control = episodes[folder]
        record = control["record"]
        assert record["success"] is True and record["sample_index"] == int(folder[-1])
        assert record["drifts_fired"] == 0 and control["drifts"] == []
        assert record["schedule_hash"] != drift["record"]["schedule_hash"]
        actions = [step["action"] for step in control["trajectory"]["steps"]]
        assert actions == comparable(plan(CONTROL))
    assert episodes[f"{cell}/control/sample-0"]["record"]["harness"] == "mcp"
    assert episodes[f"{cell}/control/sample-1"]["record"]["harness"] is None
