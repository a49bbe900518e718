"""A subject's folder and label are read back to what made them, for any name, run, step and
harness; its order groups kinds, runs and harnesses; the harness names the config schema allows
are the harness registry's."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from schemashift.policies.llm.harnesses import HARNESSES
from schemashift.rollout.subject import (
    DEFAULT_HARNESS,
    HARNESS_MARK,
    KIND_ORDER,
    STEP_MARK,
    Subject,
    check_harness,
    harness_folder,
    split_harness,
)

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
#: names as configs and policies spell them: model ids, paths, colons, at-signs, dots
NAMES = st.text(
    st.characters(codec="ascii", categories=("L", "N"), include_characters="/:._-@"), min_size=1, max_size=30
).filter(lambda name: HARNESS_MARK not in name and STEP_MARK not in name)
HARNESS = st.sampled_from(sorted(HARNESSES))
#: policy specs and run names may hold a `+` of their own (`openai:a+b`), except one that ends the
#: name as a harness mark would
POLICIES = st.text(
    st.characters(codec="ascii", categories=("L", "N"), include_characters="/:._-@+"), min_size=1, max_size=30
).filter(lambda name: STEP_MARK not in name and name.rpartition(HARNESS_MARK)[2] not in HARNESSES)


@given(NAMES, HARNESS)
def test_a_folder_is_read_back_to_its_name_and_harness(name: str, harness: str) -> None:
    folder = harness_folder(name, harness)
    assert split_harness(folder) == (name, harness)
    assert (HARNESS_MARK in folder) == (harness != DEFAULT_HARNESS)


def record(policy, train_run=None, step=None, harness=None, base_model=None) -> dict:
    return {
        "policy": policy,
        "train_run": train_run,
        "checkpoint_step": step,
        "harness": harness,
        "base_model": base_model,
    }


@given(
    POLICIES,
    st.one_of(st.none(), POLICIES),
    st.one_of(st.none(), st.integers(0, 10**6)),
    st.one_of(st.none(), HARNESS),
    st.one_of(st.none(), NAMES),
)
def test_a_label_is_read_back_to_its_subject(policy, train_run, step, harness, base_model) -> None:
    subject = Subject.of_record(record(policy, train_run, step, harness, base_model))
    assert Subject.parse(subject.label, subject.kind) == (
        subject if harness != DEFAULT_HARNESS else subject.through(None)
    )
    marked = harness not in (None, DEFAULT_HARNESS)
    assert subject.label == (f"{subject.unmarked}{HARNESS_MARK}{harness}" if marked else subject.unmarked)
    assert subject.through(DEFAULT_HARNESS).label == subject.through(None).label == subject.unmarked
    if train_run is not None:
        expected = f"{train_run}{STEP_MARK}{step if step is not None else 'final'}"
        assert (subject.kind, subject.unmarked) == ("checkpoint", expected)
    elif step == 0:
        assert (subject.kind, subject.unmarked) == ("base", policy)
    else:
        assert subject.unmarked == (f"{policy}{STEP_MARK}{step}" if step else policy)
        is_model = base_model is not None or ":" in policy
        assert subject.kind == ("model" if is_model else "rule")


@given(
    st.lists(
        st.tuples(NAMES, st.one_of(st.none(), NAMES), st.one_of(st.none(), st.integers(0, 50)), HARNESS),
        min_size=2,
        max_size=12,
    )
)
def test_the_order_groups_kinds_then_runs_by_step_with_harnesses_side_by_side(rows) -> None:
    subjects = [Subject.of_record(record(*row)) for row in rows]
    ordered = sorted(subjects, key=lambda s: s.order)
    ranks = [KIND_ORDER.index(s.kind) for s in ordered]
    assert ranks == sorted(ranks)
    for first, second in pairwise(ordered):
        if first.kind == second.kind == "checkpoint" and first.name == second.name:
            if None not in (first.step, second.step) and first.step != second.step:
                assert first.step < second.step
        if first.through(None) == second.through(None) and first.harness != second.harness:
            assert first.harness == DEFAULT_HARNESS or second.harness != DEFAULT_HARNESS


def test_a_frames_missing_values_read_as_absent() -> None:
    nan = float("nan")
    assert Subject.of_record(record("hf:m", nan, nan, DEFAULT_HARNESS)).label == "hf:m"
    assert Subject.of_record(record("hf:m", "r", 20.0, "tools")).label == f"r{STEP_MARK}20{HARNESS_MARK}tools"
    assert Subject.of_record(record("hf:m", nan, 0.0, nan, nan)).kind == "base"
    assert Subject.of_record(record("policy_aware_heuristic", nan, nan, nan, nan)).kind == "rule"
    assert Subject.of_record(record("openai:gpt-4o-mini")).kind == "model"
    assert Subject.of_record(record("hf:m", "r", 20, "m", "m")).kind == "checkpoint"


def test_only_registered_harnesses_pass() -> None:
    for harness in HARNESSES:
        assert check_harness(harness) == harness
    with pytest.raises(ValueError, match="unknown harness 'xml'; known: " + ", ".join(HARNESSES)):
        check_harness("xml")


def _harness_enums(node) -> list[list[str]]:
    """Every `enum` the schema gives the items of a `harnesses` list."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "harnesses" and isinstance(value, dict) and "items" in value:
                found.append(value["items"]["enum"])
            found += _harness_enums(value)
    elif isinstance(node, list):
        for value in node:
            found += _harness_enums(value)
    return found


def test_the_config_schema_allows_exactly_the_registered_harnesses() -> None:
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    enums = _harness_enums(schema)
    assert enums, "the schema lists no harnesses"
    assert all(sorted(enum) == sorted(HARNESSES) for enum in enums)
