"""Observation deltas rebuild exactly the observations the environment built."""

from __future__ import annotations

import json

import pytest

from schemashift.env import Environment
from schemashift.env.rulesets import available_rulesets, get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout.wire import ViewDecoder, ViewEncoder


def wire(frame: dict) -> dict:
    """What crosses the wire: JSON text, so nothing is shared with the server's objects."""
    return json.loads(json.dumps(frame))


@pytest.mark.parametrize("ruleset", available_rulesets())
def test_deltas_rebuild_every_observation_of_real_episodes(ruleset):
    rs = get_ruleset(ruleset)
    env = Environment(rs, snapshots=False)  # as the server builds it: deltas compare by identity
    full_bytes = delta_bytes = 0
    for scenario in rs.scenario_ids():
        for seed in range(3):
            encoder, decoder = ViewEncoder(), ViewDecoder()
            policy = make_policy("policy_aware_heuristic", rs)
            view = env.reset(scenario, seed)
            assert decoder.decode(wire(encoder.encode(view))) == wire(view)
            while not view["done"]:
                view, _ = env.step(policy.act(view))
                frame = wire(encoder.encode(view))
                assert decoder.decode(frame) == wire(view)
                assert list(decoder.previous) == list(view)
                full_bytes += len(json.dumps(view))
                delta_bytes += len(json.dumps(frame))
    assert delta_bytes < full_bytes / 2


def test_changed_order_dropped_keys_and_lists_that_did_not_slide():
    encoder, decoder = ViewEncoder(), ViewDecoder()
    a, b, c, d = {"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}
    views = [
        {"x": 1, "h": [a, b], "docs": {"k": "v"}},
        {"x": 1, "h": [b, c], "docs": {"k": "v"}},  # slid by one (h), docs a new object
        {"h": [d, b], "x": 2, "new": True},  # reordered, docs dropped, h replaced
        {"h": [], "x": 2, "new": True},
        {"h": [a], "x": 2, "new": True},
    ]
    frames = [wire(encoder.encode(view)) for view in views]
    assert frames[1]["shift"] == {"h": [1, [{"n": 3}]]}
    assert frames[2]["drop"] == ["docs"] and frames[2]["order"] == ["h", "x", "new"]
    rebuilt = [decoder.decode(frame) for frame in frames]
    assert rebuilt == [wire(view) for view in views]
    assert [list(view) for view in rebuilt] == [list(view) for view in views]


def test_a_delta_without_a_full_observation_is_refused():
    with pytest.raises(ValueError, match="before any full observation"):
        ViewDecoder().decode({"set": {}})
