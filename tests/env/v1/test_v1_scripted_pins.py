"""The scripted agent's success is pinned per scenario: a change to a task template's wording
that the agent no longer reads (its patterns live in `schemashift/policies/scripted/plans.py`)
fails here, naming the scenario whose success dropped.

`PINNED` is data: the agent's success count over `SEEDS` of each split, as the current code
plays them. To refresh it after an intended change (a template and the agent's patterns changed
together, or a better agent), run this file with `-s`: the failure message prints the counts
as they are now, to paste over `PINNED`.
"""

from __future__ import annotations

import dataclasses
import sys

from v1_support import RULESET, SCENARIOS, play_policy

from schemashift.env import Environment
from schemashift.env.rulesets.v1 import families
from schemashift.policies import make_policy

SEEDS = {"test": range(0, 50), "train": range(10000, 10050)}
#: split -> scenario -> episodes the scripted agent succeeds in over SEEDS[split]
PINNED = {
    split: {
        "onboard_new_hire": 50,
        "meeting_invite_blast": 50,
        "customer_lookup": 50,
        "customer_escalation": 50,
        "weekly_report": 50,
        "event_cleanup": 50,
        "composed_pair": 50,
        "composed_triple": 50,
    }
    for split in SEEDS
}


def success_counts() -> dict[str, dict[str, int]]:
    """split -> scenario -> the scripted agent's successes over SEEDS[split]."""
    env = Environment(RULESET)
    policy = make_policy("scripted", "v1")
    return {
        split: {s: sum(play_policy(policy, s, seed, env)["success"] for seed in seeds) for s in SCENARIOS}
        for split, seeds in SEEDS.items()
    }


def dropped(counts: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """scenario -> 'split: pinned -> now' for each split where it succeeds less than pinned."""
    out: dict[str, list[str]] = {}
    for split, pinned in PINNED.items():
        for scenario, expected in pinned.items():
            now = counts[split].get(scenario, 0)
            if now < expected:
                out.setdefault(scenario, []).append(f"{split}: {expected} -> {now}")
    return out


def _forget_built_tasks() -> None:
    """Clear the v1 ruleset's caches (built tasks among them), so a patched template is used."""
    for name, module in list(sys.modules.items()):
        if name.startswith("schemashift.env.rulesets.v1"):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def test_success_stays_at_its_pins():
    counts = success_counts()
    lost = dropped(counts)
    assert not lost, (
        f"a template's wording no longer reads for the scripted agent; success dropped on {lost}. "
        f"Counts now (PINNED, if the drop is intended): {counts}"
    )
    assert counts == PINNED, f"success rose: refresh PINNED with {counts}"


def test_a_reworded_family_is_named(monkeypatch):
    """The pin check catches a wording the agent does not read, and names only that family."""
    tier, builder, limit, tools = families.FAMILIES["weekly_report"]

    def reworded(b: families.Builder) -> families.FamilySpec:
        spec = builder(b)
        text = spec.description.replace("Prepare the weekly report for", "Put together the weekly report for")
        assert text != spec.description
        return dataclasses.replace(spec, description=text)

    monkeypatch.setitem(families.FAMILIES, "weekly_report", (tier, reworded, limit, tools))
    _forget_built_tasks()
    try:
        lost = dropped(success_counts())
    finally:
        monkeypatch.undo()
        _forget_built_tasks()
    assert list(lost) == ["weekly_report"], lost
    assert lost["weekly_report"] == ["test: 50 -> 0", "train: 50 -> 0"]
