"""Bad input over the wire gets a clear error frame or a 4xx, never a 500 or a dropped server,
and the server keeps serving the other sessions meanwhile."""

from __future__ import annotations

import json

import httpx
import pytest
from server_support import Session

from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy

SCENARIO = get_ruleset("legacy").scenario_ids()[0]
COMPLETE = {"type": "complete_task", "complete": {"summary": "done"}}
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_ACTION = {"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "send_message", "params": {}}}


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"x": value}
    return value


DEEP_ACTION["tool_call"]["params"] = nested(500)
TWO_MB = json.dumps(
    {"type": "step", "data": {"type": "complete_task", "complete": {"summary": "x" * 2_000_000}}}
)


def step(data) -> str:
    return json.dumps({"type": "step", "data": data})


def reset(data) -> str:
    return json.dumps({"type": "reset", "data": data})


# (name, frames sent before the checked one, the checked frame, expected code, words the message must hold)
WS_CASES = [
    ("malformed JSON", [], '{"type": "reset", "data": {', "INVALID_JSON", "Invalid JSON"),
    ("not an object", [], "[1, 2, 3]", "INVALID_JSON", "JSON object"),
    ("not an object, after whitespace", [], " \n\t[1]", "INVALID_JSON", "JSON object"),
    ("an object, then more", [], '{"type": "state"} [', "INVALID_JSON", "Invalid JSON"),
    ("binary garbage", [], b"\xff\xfe\x00", "INVALID_JSON", "not UTF-8"),
    ("unknown message type", [], json.dumps({"type": "dance"}), "UNKNOWN_TYPE", "dance"),
    ("wrong type of action type", ["reset"], step({"type": 5}), "VALIDATION_ERROR", ""),
    ("sub-object of the wrong type", ["reset"], step({"type": "call_tool", "tool_call": [1]}),
     "VALIDATION_ERROR", ""),
    ("negative tokens", ["reset"], step({**COMPLETE, "tokens_used": -1}), "VALIDATION_ERROR", ""),
    ("unexpected action field", ["reset"], step({**COMPLETE, "hack": 1}), "VALIDATION_ERROR", ""),
    ("seed of the wrong type", [], reset({"scenario": SCENARIO, "seed": "abc"}), "EXECUTION_ERROR",
     "seed must be an integer"),
    ("unknown reset parameter", [], reset({"scenario": SCENARIO, "level": 9}), "EXECUTION_ERROR",
     "unknown reset parameters"),
    ("unknown action type", ["reset"], step({"type": "teleport"}), "EXECUTION_ERROR",
     "InvalidAction: unknown action type 'teleport'"),
    ("unknown scenario", [], reset({"scenario": "Z9_nothing"}), "EXECUTION_ERROR", "UnknownScenario"),
    ("unknown ruleset", [], reset({"ruleset": "v0", "scenario": SCENARIO}), "EXECUTION_ERROR",
     "UnknownRuleset"),
    ("step before reset", [], step(COMPLETE), "EXECUTION_ERROR",
     "EpisodeStateError: Call reset() before step()"),
    ("step after done", ["reset", "complete"], step(COMPLETE), "EXECUTION_ERROR",
     "EpisodeStateError: Episode already done"),
    ("2 MB message", ["reset"], TWO_MB, "MESSAGE_TOO_LARGE", "exceeds the server's limit"),
    ("deeply nested frame", [], DEEP, "INVALID_JSON", "nested more than"),
    ("deeply nested action", ["reset"], step(DEEP_ACTION), "INVALID_JSON", "nested more than"),
]  # fmt: skip


def prepare(session: Session, steps: list[str]) -> None:
    for step in steps:
        if step == "reset":
            reply = session.send("reset", {"scenario": SCENARIO, "seed": 0})
        else:
            reply = session.send("step", COMPLETE)
        assert reply["type"] == "observation", reply


@pytest.mark.parametrize("name, before, frame, code, words", WS_CASES, ids=[c[0] for c in WS_CASES])
def test_bad_frames_get_an_error_frame_and_the_session_survives(server_url, name, before, frame, code, words):
    with Session(server_url) as bystander, Session(server_url) as session:
        assert bystander.send("reset", {"scenario": SCENARIO, "seed": 3})["type"] == "observation"
        prepare(session, before)
        reply = session.send_raw(frame)
        assert reply["type"] == "error", reply
        assert reply["data"]["code"] == code, reply
        assert words in reply["data"]["message"], reply
        # The same session still works, and so does the one beside it.
        assert session.send("reset", {"scenario": SCENARIO, "seed": 1})["type"] == "observation"
        assert bystander.send("step", COMPLETE)["data"]["done"] is True
    assert httpx.get(f"{server_url}/health").json() == {"status": "healthy"}


HTTP_CASES = [
    ("malformed JSON", "/step", b'{"action": {', 422, ""),
    ("wrong types", "/step", json.dumps({"action": {"type": ["x"]}}).encode(), 422, ""),
    ("unknown action type", "/step", json.dumps({"action": {"type": "teleport"}}).encode(), 409, "reset"),
    ("step without an episode", "/step", json.dumps({"action": COMPLETE}).encode(), 409, "EpisodeStateError"),
    ("unknown scenario", "/reset", json.dumps({"scenario": "Z9_nothing"}).encode(), 404, "UnknownScenario"),
    ("unknown ruleset", "/reset", json.dumps({"ruleset": "v0"}).encode(), 404, "UnknownRuleset"),
    ("negative seed", "/reset", json.dumps({"seed": -1}).encode(), 422, ""),
    ("seed of the wrong type", "/reset", json.dumps({"seed": "abc"}).encode(), 422, ""),
    ("2 MB body", "/reset", json.dumps({"scenario": "x" * 2_000_000}).encode(), 413, "limit"),
    ("deeply nested body", "/step", json.dumps({"action": DEEP_ACTION}).encode(), 400, "nested"),
    ("deeply nested garbage", "/reset", DEEP.encode(), 400, "nested"),
]


@pytest.mark.parametrize("name, path, body, status, words", HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
def test_bad_http_requests_get_a_4xx_with_a_message(server_url, name, path, body, status, words):
    response = httpx.post(server_url + path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert detail
    assert words in json.dumps(detail)


def test_http_reset_and_state_work(server_url):
    response = httpx.post(f"{server_url}/reset", json={"scenario": SCENARIO, "seed": 2})
    assert response.status_code == 200
    assert response.json()["observation"]["view"]["task_id"] == SCENARIO
    assert httpx.get(f"{server_url}/schema").status_code == 200


def test_an_episode_next_to_a_flood_of_bad_input_is_unaffected(server_url):
    from server_support import as_written

    from schemashift.rollout.backends import InProcessBackend, RemoteBackend
    from schemashift.rollout.runner import Cell, SweepContext, play_episode

    ruleset = get_ruleset("legacy")
    cell = Cell("legacy", ruleset.scenario_ids()[-1], 4)
    context = SweepContext("flood", "policy_aware_heuristic")
    remote = RemoteBackend(server_url)
    with Session(server_url) as attacker:
        observation = remote.reset(cell.ruleset, cell.scenario, cell.seed)
        for _, _, frame, _, _ in WS_CASES:
            assert attacker.send_raw(frame)["type"] == "error"
    remote.close()
    played = [
        play_episode(backend, make_policy("policy_aware_heuristic", ruleset), cell, context)
        for backend in (RemoteBackend(server_url), InProcessBackend())
    ]
    assert observation["task_id"] == cell.scenario
    assert as_written(played[:1]) == as_written(played[1:])
