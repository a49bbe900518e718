"""The remote backend plays the same episodes as the in-process one: identical records."""

from __future__ import annotations

import pytest
from server_support import as_written, free_port

from schemashift.env.rulesets import available_rulesets, get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout.backends import InProcessBackend, RemoteBackend, make_backend
from schemashift.rollout.runner import SweepContext, cells, run_sweep

SEEDS = range(5)


def sweep(backend, ruleset: str, policy_name: str, seeds=SEEDS):
    rs = get_ruleset(ruleset)
    cell_list = cells([ruleset], rs.scenario_ids(), seeds)
    try:
        return run_sweep(
            backend, make_policy(policy_name, rs), cell_list, SweepContext("parity", policy_name)
        )
    finally:
        backend.close()


@pytest.mark.parametrize("ruleset", available_rulesets())
def test_policy_aware_sweep_over_the_server_equals_in_process(server_url, ruleset):
    remote = sweep(make_backend(server_url.replace("http", "ws")), ruleset, "policy_aware_heuristic")
    local = sweep(InProcessBackend(), ruleset, "policy_aware_heuristic")
    assert all(r.record["status"] == "graded" for r in remote), [r.record["error"] for r in remote]
    assert len(remote) == len(get_ruleset(ruleset).scenario_ids()) * len(SEEDS)
    assert as_written(remote) == as_written(local)


@pytest.mark.parametrize("ruleset", available_rulesets())
@pytest.mark.parametrize("policy", ["oracle", "naive_heuristic"])
def test_other_policies_agree_too(server_url, ruleset, policy):
    remote = sweep(RemoteBackend(server_url), ruleset, policy, seeds=[0, 7])
    local = sweep(InProcessBackend(), ruleset, policy, seeds=[0, 7])
    assert as_written(remote) == as_written(local)


class TextPolicy:
    """Emits model-like text: valid JSON, then garbage (which legacy rejects and the runner replaces)."""

    def __init__(self) -> None:
        self.turn = 0

    def reset(self) -> None:
        self.turn = 0

    def act(self, observation):
        self.turn += 1
        if self.turn == 1:
            return '{"type": "inspect_schema", "inspect": {"tool": "mail"}}'
        if self.turn == 2:
            return {"type": "call_tool", "tool_call": "not an object", "note": 1}
        return "I think I am done {"


@pytest.mark.parametrize("ruleset", available_rulesets())
def test_invalid_and_text_actions_are_judged_alike(server_url, ruleset):
    rs = get_ruleset(ruleset)
    cell_list = cells([ruleset], rs.scenario_ids()[:2], [1])
    context = SweepContext("parity", "text")
    results = []
    for backend in (RemoteBackend(server_url), InProcessBackend()):
        try:
            results.append(run_sweep(backend, TextPolicy(), cell_list, context))
        finally:
            backend.close()
    remote, local = results
    assert as_written(remote) == as_written(local)
    assert all(r.record["status"] == "graded" for r in remote)


def test_the_remote_backend_raises_the_core_exceptions(server_url):
    from schemashift.env import EpisodeStateError, UnknownRuleset, UnknownScenario

    backend = RemoteBackend(server_url)
    try:
        with pytest.raises(EpisodeStateError, match="reset"):
            backend.step({"type": "complete_task", "complete": {"summary": "x"}})
        with pytest.raises(UnknownScenario, match="Available"):
            backend.reset("legacy", "no_such_scenario", 0)
        with pytest.raises(UnknownRuleset, match="no_such_ruleset"):
            backend.reset("no_such_ruleset", "x", 0)
        with pytest.raises(EpisodeStateError, match="not finished"):
            backend.outcome()
    finally:
        backend.close()


def test_unreachable_server_is_a_connection_error():

    backend = RemoteBackend(f"ws://127.0.0.1:{free_port()}", open_timeout_s=2)
    with pytest.raises(ConnectionError, match="cannot reach"):
        backend.reset("legacy", get_ruleset("legacy").scenario_ids()[0], 0)


@pytest.mark.parametrize("spec", ["ftp://x", "ws://", "localhost:8000", "remote"])
def test_bad_backend_specs_are_refused(spec):
    with pytest.raises(ValueError, match="Unknown backend"):
        make_backend(spec)


def test_http_urls_map_to_the_websocket_route():
    assert RemoteBackend("http://127.0.0.1:8000").url == "ws://127.0.0.1:8000/ws"
    assert RemoteBackend("https://example.org/").url == "wss://example.org/ws"
    assert RemoteBackend("ws://127.0.0.1:8000/ws").url == "ws://127.0.0.1:8000/ws"
