"""`policy_aware.first_email` searches from shortly before the first "@": it must find exactly the
address a search of the whole text finds, on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemashift.env import Environment
from schemashift.policies.policy_aware import EMAIL, LOOK_BACK, first_email

# Address characters, separators, the "@" and the dot, and a few non-ASCII word characters.
_CHARS = st.sampled_from(list("ab_9.+-@ ,;:'\"()<>") + ["é", "ß", "٣", "\u200b"])
_RUN = st.integers(LOOK_BACK - 3, LOOK_BACK + 3).map(lambda n: "x" * n)


def whole_search(text: str) -> str | None:
    match = EMAIL.search(text)
    return match.group(1) if match else None


@pytest.mark.timeout(120)
@settings(max_examples=1500, deadline=None)
@given(
    st.lists(st.one_of(st.text(_CHARS, max_size=12), _RUN, st.just("name@host.com")), max_size=8).map("".join)
)
def test_the_first_address_is_the_one_a_whole_search_finds(text):
    """Texts of address-like pieces, runs near the look-back limit, "@"s that start no address."""
    assert first_email(text) == whole_search(text)


@pytest.mark.timeout(120)
def test_every_task_text_gives_the_same_address():
    for ruleset in ("legacy", "v1"):
        env = Environment(ruleset)
        for scenario in env.ruleset.scenario_ids():
            for seed in range(0, 40, 3):
                text = env.reset(scenario, seed)["task_description"]
                assert first_email(text) == whole_search(text), (ruleset, scenario, seed)


def test_a_local_part_longer_than_the_look_back_is_found_whole():
    text = "see " + "y" * (LOOK_BACK + 10) + "@corp.example and bob@corp.example"
    assert first_email(text) == "y" * (LOOK_BACK + 10) + "@corp.example"
