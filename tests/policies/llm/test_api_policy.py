"""The openai: policy against a real OpenAI-compatible server on 127.0.0.1 (openai_server.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from openai_server import OpenAIServer, Step

from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.policies.llm.format import action_text
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.runner import SweepContext, cells, run_sweep, run_sweep_batched

LEGACY = get_ruleset("legacy")
TASKS = {LEGACY.build_task(s, 0).description: s for s in LEGACY.scenario_ids()}
KEY_ENV, KEY = "SCHEMASHIFT_TEST_POLICY_KEY", "sk-test-do-not-leak-1234"
CELLS = cells(["legacy"], LEGACY.scenario_ids()[:4], [0])


def oracle_reply(body: dict) -> str:
    """A 'model' that reads the conversation: the scenario from the task, the step from the number
    of its own earlier turns, and answers with the oracle's action wrapped in chatter."""
    messages = body["messages"]
    task = next(m["content"] for m in messages if m["role"] == "user")
    scenario = next(s for description, s in TASKS.items() if description in task)
    turn = sum(1 for m in messages if m["role"] == "assistant")
    plan = LEGACY.solution(LEGACY.build_task(scenario, 0))
    action = plan[min(turn, len(plan) - 1)]
    if turn % 2:
        return f"Next I will do this.\n```json\n{action_text(action)}\n```"
    return action_text(action)


def context(policy) -> SweepContext:
    return SweepContext(
        "api", policy.name, harness=policy.harness, generation_config=policy.generation_config()
    )


def strip(result) -> tuple:
    return {k: v for k, v in result.record.items() if k != "wall_s"}, result.drifts, result.trajectory


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with OpenAIServer(oracle_reply, api_key=KEY) as running:
        yield running


def api_policy(server: OpenAIServer, **options):
    return make_policy("openai:test-model", LEGACY, base_url=server.base_url, api_key_env=KEY_ENV, **options)


def test_the_api_policy_plays_like_the_oracle_it_is_fed(server: OpenAIServer) -> None:
    policy = api_policy(server)
    results = run_sweep_batched(InProcessBackend, policy, CELLS, context(policy), batch_size=4)
    oracle = run_sweep(
        InProcessBackend(), make_policy("oracle", LEGACY), CELLS, SweepContext("api", "oracle")
    )
    for played, reference in zip(results, oracle, strict=True):
        assert played.record["status"] == "graded"
        assert played.record["score"] == reference.record["score"]
        assert [s["action"] for s in played.trajectory["steps"]] == [
            s["action"] for s in reference.trajectory["steps"]
        ]
        assert played.record["parse_failures"] == 0
        assert played.record["tokens_in"] > 0 and played.record["tokens_out"] > 0
    # one request per step, each carrying the whole conversation so far
    requests = server.chat_requests()
    assert len(requests) == sum(r.record["steps"] for r in results)
    longest = max(requests, key=lambda r: len(r.body["messages"]))
    roles = [m["role"] for m in longest.body["messages"]]
    assert roles[:2] == ["system", "user"] and roles[2::2] == ["assistant"] * len(roles[2::2])
    assert all(r.body["model"] == "test-model" and r.body["temperature"] == 0.0 for r in requests)
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in requests)


def test_requests_of_a_round_run_concurrently_under_the_cap(server: OpenAIServer) -> None:
    server.script(*[Step(delay_s=0.3) for _ in range(4)])
    policy = api_policy(server, max_concurrency=2)
    run_sweep_batched(InProcessBackend, policy, CELLS, context(policy), batch_size=4)
    assert server.max_in_flight == 2


@pytest.mark.timeout(30)
def test_closing_the_policy_cancels_its_requests_in_flight(server: OpenAIServer) -> None:
    server.script(Step(delay_s=10.0))
    policy = api_policy(server, timeout_s=30)
    settings = {"timeout_s": 30.0, "max_retries": 5, "max_concurrency": 4, "stream": False}
    assert policy.request_settings() == settings
    results: list = []
    worker = threading.Thread(
        target=lambda: results.extend(run_sweep(InProcessBackend(), policy, CELLS[:1], context(policy)))
    )
    worker.start()
    deadline = time.monotonic() + 5
    while not server.chat_requests() and time.monotonic() < deadline:
        time.sleep(0.02)
    policy.close()
    worker.join(timeout=5)
    assert not worker.is_alive()
    (failed,) = results
    assert failed.record["status"] == "infra_error" and "cancelled" in failed.record["error"]
    assert len(server.chat_requests()) == 1


def test_an_api_failure_is_an_infra_error_and_the_key_is_never_recorded(server: OpenAIServer) -> None:
    server.script(Step(status=400, body={"error": {"message": f"bad key {KEY}"}}))
    policy = api_policy(server)
    (failed,) = run_sweep(InProcessBackend(), policy, CELLS[:1], context(policy))
    assert failed.record["status"] == "infra_error"
    assert KEY not in json.dumps([failed.record, failed.trajectory])
    assert KEY not in policy.generation_config() and KEY not in json.dumps(policy.engine.identity())


def test_a_rerun_replays_from_the_cache_without_requests(server: OpenAIServer, tmp_path: Path) -> None:
    cache = str(tmp_path / "responses.sqlite")
    first = api_policy(server, cache=cache)
    played = run_sweep_batched(InProcessBackend, first, CELLS, context(first), batch_size=4)
    first.close()
    sent = len(server.chat_requests())
    second = api_policy(server, cache=cache)
    replayed = run_sweep_batched(InProcessBackend, second, CELLS, context(second), batch_size=3)
    second.close()
    assert len(server.chat_requests()) == sent
    assert [strip(r) for r in played] == [strip(r) for r in replayed]


def test_the_legacy_harness_sends_the_stateless_prompt(server: OpenAIServer) -> None:
    policy = api_policy(server, harness="legacy")
    run_sweep(InProcessBackend(), policy, CELLS[:1], context(policy))
    for request in server.chat_requests():
        (message,) = request.body["messages"]
        assert message["role"] == "user" and message["content"].endswith("Your next action:")
        assert request.body["max_tokens"] == 500  # as the original harness asked


def test_unknown_options_are_refused(server: OpenAIServer) -> None:
    with pytest.raises(ValueError, match="no option"):
        api_policy(server, dtype="float64")


def test_openais_key_never_travels_to_another_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-stay-home")
    with OpenAIServer() as local:
        policy = make_policy("openai:local-model", LEGACY, base_url=local.base_url)
        results = run_sweep(InProcessBackend(), policy, CELLS[:1], context(policy))
        assert results[0].record["status"] == "graded"
        assert local.chat_requests()
        for request in local.chat_requests():
            assert "sk-must-stay-home" not in json.dumps(request.headers)


def test_a_control_cell_never_replays_its_drift_twins_cached_completion(monkeypatch, tmp_path) -> None:
    """Both arms of a v1 cell open with the same prompt; each arm asks the model once for it and
    keeps its own completion, and a rerun of both arms asks nothing."""
    from schemashift.policies.base import complete_task

    monkeypatch.setenv(KEY_ENV, KEY)
    done = action_text(complete_task("done"))
    with OpenAIServer(lambda body: done, api_key=KEY) as server:
        _play_both_arms(server, tmp_path)


def _play_both_arms(server: OpenAIServer, tmp_path: Path) -> None:
    v1 = get_ruleset("v1")
    cache = tmp_path / "responses.sqlite"
    both = cells(["v1"], ["customer_lookup"], [0], arms=["drift", "control"])

    def play(cell_list):
        policy = make_policy(
            "openai:test-model", v1, base_url=server.base_url, api_key_env=KEY_ENV, cache=str(cache)
        )
        try:
            return run_sweep_batched(InProcessBackend, policy, cell_list, context(policy), batch_size=2)
        finally:
            policy.close()

    drift = play(both[:1])
    first = [r.body["messages"] for r in server.chat_requests()]
    assert drift[0].record["arm"] == "drift" and drift[0].record["status"] == "graded"
    control = play(both[1:])
    asked = [r.body["messages"] for r in server.chat_requests()][len(first) :]
    assert asked and asked[0] == first[0], "the arms' first prompts are the same text"
    assert control[0].record["arm"] == "control" and control[0].record["status"] == "graded"
    before = len(server.chat_requests())
    again = play(both)
    assert len(server.chat_requests()) == before
    assert [r.record["arm"] for r in again] == ["drift", "control"]
