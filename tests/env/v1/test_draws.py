"""`Draws` is `random.Random` with faster draws: same values, same bits consumed, same errors."""

from __future__ import annotations

import dataclasses
import random
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemashift.env.episode import DriftSpec
from schemashift.env.rulesets.v1 import tasks
from schemashift.env.rulesets.v1.draws import Draws

pytestmark = pytest.mark.timeout(120)

#: one draw: which method, and its arguments
CALLS = st.one_of(
    st.tuples(st.just("choice"), st.lists(st.integers(), min_size=1, max_size=70)),
    st.tuples(
        st.just("randint"),
        st.integers(-(2**70), 2**70),
        st.integers(0, 2**70) | st.integers(0, 40),
    ),
    st.tuples(st.just("random")),
    st.tuples(st.just("sample"), st.integers(1, 30)),
    st.tuples(st.just("sample_list"), st.integers(0, 25), st.integers(0, 7), st.booleans()),
)


def _draw(rng: random.Random, call: tuple):
    name, *args = call
    if name == "choice":
        return rng.choice(args[0])
    if name == "randint":
        low, span = args
        return rng.randint(low, low + span)
    if name == "sample":
        return rng.sample(range(40), args[0])
    if name == "sample_list":  # short lists and tuples, as tasks sample them (k may exceed n)
        n, k, as_tuple = args
        population = tuple(range(n)) if as_tuple else [f"item{i}" for i in range(n)]
        try:
            return rng.sample(population, k)
        except ValueError as exc:
            return type(exc)
    return rng.random()


@settings(max_examples=300, deadline=None)
@given(seed=st.text(max_size=30) | st.integers(0, 2**64), calls=st.lists(CALLS, max_size=60))
def test_every_draw_and_the_stream_after_it_match_random(seed, calls):
    fast, reference = Draws(seed), random.Random(seed)
    for call in calls:
        assert _draw(fast, call) == _draw(reference, call)
    assert fast.getstate() == reference.getstate()


def _outcome(rng: random.Random, method: str, args: tuple):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return getattr(rng, method)(*args)
        except Exception as exc:  # the outcome compared is the exception's type
            return type(exc)


@pytest.mark.parametrize(
    ("method", "args"),
    [("choice", ([],)), ("randint", (5, 4)), ("randint", (1.5, 4)), ("randint", (1, 4.0))],
)
def test_bad_arguments_end_as_random_ends(method, args):
    """The same value or the same error as the running Python's own `random.Random`."""
    assert _outcome(Draws(1), method, args) == _outcome(random.Random(1), method, args)


def test_a_drawn_drift_spec_is_the_dataclass_its_constructor_builds():
    """`tasks._spec` fills a `DriftSpec` without its `__init__`: every field, in order, must be what
    the constructor sets (a field added to `DriftSpec` fails here, not in a drawn plan)."""
    details = {"from": "to", "to": "recipient"}
    drawn = tasks._spec("mail", "field_rename", "send_message", details, 2)
    built = DriftSpec("mail", "field_rename", None, "send_message", details, on_call=2)
    assert drawn == built
    assert list(vars(drawn)) == [field.name for field in dataclasses.fields(DriftSpec)]
