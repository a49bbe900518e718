"""v1's silent changes and transient faults as an agent meets them, on seeds no other test uses.

A silent change keeps answering 200: the final state alone shows that a write did not take, so an
agent that sends the documented form fails and one that makes the write again as the live schema
says succeeds (a write made again to a record it names is no damage). A transient fault answers
503/504 with a Retry-After hint and applies nothing: the call made once more after the hint
succeeds, giving up loses the write and sending it twice is damage.
"""

from __future__ import annotations

import functools

import pytest
from v1_support import RULESET, SCENARIOS, call, complete, inspect

from schemashift.env import Environment
from schemashift.env.rulesets.v1.api import VOCABULARIES
from schemashift.env.rulesets.v1.catalogue import HELD_OUT_KINDS, TRANSIENT_CODES
from schemashift.env.rulesets.v1.drifts import due_on_call
from schemashift.env.rulesets.v1.oracle import _oracle_call
from schemashift.env.rulesets.v1.tools import WRITE_ENDPOINTS

#: seeds no other test plays: test-split and train-split ones
SILENT_SEEDS = [*range(6000, 6250), *range(16000, 16250)]
TRANSIENT_SEEDS = range(6000, 6150)


def cells(kind: str, seeds, endpoints=None):
    for scenario in SCENARIOS:
        for seed in seeds:
            plan = RULESET.build_task(scenario, seed).drift_plan
            specs = [d for d in plan if d.kind == kind and (endpoints is None or d.endpoint in endpoints)]
            if specs:
                yield scenario, seed, specs


def documented_form(spec, live: dict) -> dict:
    """The call as the documentation writes it: the parameter under its documented name, its
    value in the documented vocabulary."""
    details = spec.details
    param = details["param"]
    if details["effect"] == "successor":
        out = {k: v for k, v in live.items() if k != details["successor"]}
        out[param] = live[details["successor"]]
        return out
    return {**live, param: VOCABULARIES[details["vocabulary"]][1](live[param])}


def send(env: Environment, op: dict, transform=None) -> dict:
    """Make the call of `op` as rendered under the contract it meets (`transform` may rewrite its
    live parameters), waiting out rate limits and transient faults; returns the response."""
    ep = env.episode
    api = ep.tools[op["tool"]]
    while True:
        while api.wait_needed(ep.step + 1):
            env.step(inspect(op["tool"]))
        endpoint, live = _oracle_call(ep, op)
        if transform is not None:
            live = transform(live)
        response = env.step(call(op["tool"], endpoint, **live))[0]["last_response"]
        if not (response["body"] and response["body"].get("code") in TRANSIENT_CODES):
            return response


def play_writes(scenario: str, seed: int, *, documented: bool = False, repair: bool = False, fault="retry"):
    """The task's writes, each rendered under the contract it meets (waiting out rate limits),
    then the honest completion. The call a silent change meets is sent in its documented form
    when `documented`, and made again as rendered right after when `repair`. After a transient
    fault, `fault` says what the player does: `retry` once the Retry-After has passed,
    `impatient`: retry at once until it passes, `give_up` on the write, or retry and then send
    it `twice` (a message or an event: another write would change nothing more). Returns
    (summary, [(spec, response, live schema entry) per silent change met], [(tool, endpoint, fault
    response, known state before and after it, whether it was sent twice)])."""
    env = Environment(RULESET)
    env.reset(scenario, seed)
    ep = env.episode
    queue = [
        (op, documented, False)
        for op in ep.task.ground_truth["ops"]
        if (op["tool"], op["endpoint"]) in WRITE_ENDPOINTS
    ]
    met, faults = [], []
    while queue and not ep.done:
        op, undo, faulted = queue.pop(0)
        tool, api = op["tool"], ep.tools[op["tool"]]
        while api.wait_needed(ep.step + 1) and not ep.done and not (faults and fault == "impatient"):
            env.step(inspect(tool))
        endpoint, live = _oracle_call(ep, op)
        silent = [
            d.spec
            for d in due_on_call(ep, tool, api.canonical_of(endpoint))
            if d.spec.kind == "silent_change" and d.spec.details["param"] in op["params"]
        ]
        sent = documented_form(silent[0], live) if silent and undo else live
        known = dict(ep.extra["known"])
        response = env.step(call(tool, endpoint, **sent))[0]["last_response"]
        if response["body"] and response["body"].get("code") in TRANSIENT_CODES:
            again = fault == "twice" and op["endpoint"] in ("send_message", "create_event")
            faults.append((tool, op["endpoint"], response, known, dict(ep.extra["known"]), again))
            if fault != "give_up":
                queue.insert(0, (op, undo, True))
            continue
        assert response["ok"], (scenario, seed, op, response)
        if silent:
            schema = env.step(inspect(tool))[0]["last_response"]["body"]["schema"]
            met.append((silent[0], response, schema[endpoint]))
            if undo and repair:
                queue.insert(0, (op, False, faulted))
        if faulted and fault == "twice" and op["endpoint"] in ("send_message", "create_event"):
            endpoint, live = _oracle_call(ep, op)
            assert env.step(call(tool, endpoint, **live))[0]["last_response"]["ok"], (scenario, seed, op)
    if not ep.done:
        env.step(complete(ep.task.ground_truth["summary"]))
    return RULESET.summary(ep), met, faults


def test_a_write_a_silent_change_drops_answers_200_and_fails_on_the_final_state():
    found = 0
    for scenario, seed, _ in cells("silent_change", SILENT_SEEDS, {e for _, e in WRITE_ENDPOINTS}):
        summary, met, _ = play_writes(scenario, seed, documented=True)
        if not met:
            continue  # the call that fires it passes no value of its parameter: nothing to drop
        found += 1
        spec, response, entry = met[0]
        assert response["ok"] and response["status"] == 200 and not response["headers"]
        param = spec.details["param"]
        assert "ignored" in entry["notes"][param], entry
        assert not summary["success"] and not summary["catastrophe"], (scenario, seed, spec)
        repaired, _, _ = play_writes(scenario, seed, documented=True, repair=True)
        assert repaired["success"] and not repaired["catastrophe"], (scenario, seed, spec, repaired)
        rendered, _, _ = play_writes(scenario, seed)
        assert rendered["success"], (scenario, seed, spec)
    assert found >= 40, found


def test_a_search_whose_filter_a_silent_change_drops_answers_200_with_contacts_it_does_not_ask_for():
    found = 0
    for scenario, seed, specs in cells("silent_change", SILENT_SEEDS, {"search_contacts"}):
        spec = specs[0]
        env = Environment(RULESET)
        env.reset(scenario, seed)
        ep = env.episode
        searches = [
            op
            for op in ep.task.ground_truth["ops"]
            if op["endpoint"] == "search_contacts" and spec.details["param"] in op["params"]
        ]
        if len(searches) < spec.on_call:
            continue
        op = searches[spec.on_call - 1]
        param, wanted = spec.details["param"], str(op["params"][spec.details["param"]]).lower()
        if all(str(c[param]).lower() == wanted for c in ep.tools["crm"].contacts):
            continue
        for earlier in searches[: spec.on_call - 1]:
            send(env, earlier)
        found += 1
        response = send(env, op, functools.partial(documented_form, spec))
        assert response["ok"] and response["status"] == 200, (scenario, seed, response)
        body = response["body"]
        if "contacts" in body:
            rows = body["contacts"]
        else:  # a restructured response: {envelope: {items: records}, "meta": ...}
            envelope = next(value for key, value in body.items() if key != "meta")
            rows = next(iter(envelope.values()))
        assert any(str(row[param]).lower() != wanted for row in rows), (scenario, seed, spec)
        again = send(env, op)
        assert again["ok"], again
    assert found >= 20, found


def test_a_transient_fault_applies_nothing_and_passes_after_its_retry_after():
    found = 0
    for scenario, seed, specs in cells("transient_fault", TRANSIENT_SEEDS):
        summary, _, faults = play_writes(scenario, seed)
        if not faults:
            continue  # it waits for a call this player, which reads nothing, never makes
        found += 1
        waits = {}
        for tool, _, response, before, after, _ in faults:
            (spec,) = [s for s in specs if s.tool == tool]
            assert response["status"] == spec.details["status"]
            assert response["body"]["code"] == spec.details["code"]
            waits[tool] = wait = spec.details["retry_after"]
            assert response["headers"]["Retry-After"] == str(wait) and "not applied" in response["error"]
            assert before == after
        assert len(waits) == len(faults), (scenario, seed, faults)
        assert summary["success"] and summary["drift_detection"] < 1.0, (scenario, seed, summary)
        summary, _, faults = play_writes(scenario, seed, fault="impatient")
        for tool, wait in waits.items():
            hints = [r["headers"]["Retry-After"] for t, _, r, _, _, _ in faults if t == tool]
            assert hints == [str(n) for n in range(wait, 0, -1)], (scenario, seed, faults)
        assert all(before == after for _, _, _, before, after, _ in faults)
        assert summary["success"], (scenario, seed, summary)
    assert found >= 40, found


def test_giving_up_after_a_transient_fault_fails_and_sending_the_write_twice_is_damage():
    found = twice = 0
    for scenario, seed, _ in cells("transient_fault", TRANSIENT_SEEDS):
        summary, _, faults = play_writes(scenario, seed, fault="give_up")
        if not faults:
            continue
        found += 1
        assert not summary["success"], (scenario, seed)
        summary, _, faults = play_writes(scenario, seed, fault="twice")
        if any(again for *_, again in faults):
            twice += 1
            assert summary["catastrophe"], (scenario, seed, faults)
    assert found >= 40 and twice >= 20, (found, twice)


def test_transient_faults_are_held_out_of_the_train_split():
    assert "transient_fault" in HELD_OUT_KINDS
    assert not list(cells("transient_fault", range(16000, 16100)))
    assert list(cells("transient_fault", range(6000, 6020)))


@pytest.mark.parametrize("kind", ["silent_change", "transient_fault"])
def test_the_oracle_solves_every_cell_with_the_new_kinds(kind):
    env = Environment(RULESET)
    for scenario, seed, _ in cells(kind, SILENT_SEEDS[:60] + SILENT_SEEDS[250:310]):
        env.reset(scenario, seed)
        for action in RULESET.solution(env.episode.task):
            env.step(action)
        summary = RULESET.summary(env.episode)
        assert summary["success"] and summary["drift_detection"] == 1.0, (scenario, seed, summary)
