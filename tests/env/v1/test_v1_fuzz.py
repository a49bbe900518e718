"""Arbitrary calls never break a v1 episode: every response is a JSON-serialisable answer."""

from __future__ import annotations

import json
import random

from v1_support import FAMILIES, RULESET

from schemashift.env import Environment

VALUES = [
    None, True, 0, -1, 10**20, 2**63, 1.5, "", "x", "c_1", "evt_1", "msg_1", "2026-13-45T99:99:99Z",
    "2026-04-27T10:00:00Z", "a@b.co", [], ["a@b.co"], [{"email": "a@b.co"}], [{"mail": 1}], {}, {"k": []},
]  # fmt: skip


def test_random_calls_with_hostile_values_always_answer():
    rng = random.Random("v1-fuzz")
    env = Environment(RULESET)
    for family in FAMILIES + ["composed_triple"]:
        for seed in range(12):
            observation = env.reset(family, seed)
            tools = list(env.episode.tools)
            while not observation["done"]:
                tool = rng.choice(tools)
                view = env.episode.tools[tool].schema_view()
                endpoint = rng.choice(sorted(view) + ["nope"])
                names = list(view.get(endpoint, {}).get("params", {})) + ["extra"]
                params = {n: rng.choice(VALUES) for n in names if rng.random() < 0.6}
                action = {
                    "type": "call_tool",
                    "tool_call": {"tool": tool, "endpoint": endpoint, "params": params},
                }
                observation, reward = env.step(action)
                response = observation["last_response"]
                assert set(response) == {"ok", "status", "headers", "body", "error"}
                json.dumps(observation)
                json.dumps(reward)
            assert env.episode.step == env.episode.task.max_steps
