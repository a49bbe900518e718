"""A scripted agent that sees only serialised observations discovers and recovers from every
drift kind (see scripted_agent.py for what it reads and how)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from scripted_agent import ScriptedAgent
from v1_support import FAMILIES, RULESET, play_policy

from schemashift.env import Environment
from schemashift.env.rulesets.v1.catalogue import DRIFT_KINDS

EPISODES_PER_KIND = 12


def _episodes_by_kind() -> dict[str, list[tuple[str, int]]]:
    """The first episodes (families round-robin, test then train seeds) that plan each kind."""
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for seed in list(range(0, 200)) + list(range(10000, 10200)):
        for family in FAMILIES:
            for spec in RULESET.build_task(family, seed).drift_plan:
                if len(found[spec.kind]) < EPISODES_PER_KIND and (family, seed) not in found[spec.kind]:
                    found[spec.kind].append((family, seed))
    return found


EPISODES = _episodes_by_kind()


def test_every_kind_has_episodes():
    assert {kind: len(EPISODES[kind]) for kind in DRIFT_KINDS} == dict.fromkeys(
        DRIFT_KINDS, EPISODES_PER_KIND
    )


#: kinds whose drift makes the documented call fail (the others show up in headers, layouts, statuses)
BREAKING = {"field_rename", "new_required_param", "type_change", "tool_removal", "rate_limit_tightening"}


@pytest.mark.parametrize("kind", DRIFT_KINDS)
def test_scripted_agent_discovers_and_recovers(kind):
    env = Environment(RULESET)
    recoveries = 0
    for family, seed in EPISODES[kind]:
        task = RULESET.build_task(family, seed)
        agent = ScriptedAgent(RULESET.documented_plan(task), task.ground_truth["summary"])
        summary = play_policy(agent, family, seed, env)
        rows = RULESET.drift_outcomes(env.episode)
        where = f"{family} seed {seed}: {[r for r in rows]}"
        assert summary["success"], where
        fired = [r for r in rows if r["fired_step"] is not None]
        assert all(r["reported_step"] is not None for r in fired), where
        assert summary["drift_detection"] == 1.0, where
        of_kind = [r for r in fired if r["kind"] == kind]
        assert of_kind, where
        assert all(r["discovered_step"] is not None for r in of_kind), where
        assert all(r["failed_step"] is None or r["recovered_step"] is not None for r in fired), where
        recoveries += sum(1 for r in of_kind if r["recovered_step"] is not None)
    if kind in BREAKING:
        # the agent really hit the drift (a failed call) and came back from it
        assert recoveries >= EPISODES_PER_KIND // 2
