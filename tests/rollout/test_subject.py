"""A subject's folder and label are read back to what made them, for any name, run, step and
harness; the harness names the config schema allows are the harness registry's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from schemashift.policies.llm.harnesses import HARNESSES
from schemashift.rollout.subject import (
    DEFAULT_HARNESS,
    HARNESS_MARK,
    STEP_MARK,
    check_harness,
    harness_folder,
    split_harness,
    split_label,
    split_step,
    subject_kind,
    subject_label,
)

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
#: names as configs and policies spell them: model ids, paths, colons, at-signs, dots
NAMES = st.text(
    st.characters(codec="ascii", categories=("L", "N"), include_characters="/:._-@"), min_size=1, max_size=30
).filter(lambda name: HARNESS_MARK not in name and STEP_MARK not in name)
HARNESS = st.sampled_from(sorted(HARNESSES))


@given(NAMES, HARNESS)
def test_a_folder_is_read_back_to_its_name_and_harness(name: str, harness: str) -> None:
    folder = harness_folder(name, harness)
    assert split_harness(folder) == (name, harness)
    assert (HARNESS_MARK in folder) == (harness != DEFAULT_HARNESS)


@given(NAMES, st.one_of(st.none(), NAMES), st.one_of(st.none(), st.integers(0, 10**6)), HARNESS)
def test_a_label_is_read_back_to_its_subject(policy, train_run, step, harness) -> None:
    label = subject_label(policy, train_run, step, harness)
    base, found = split_label(label)
    assert found == harness
    assert base == subject_label(policy, train_run, step, DEFAULT_HARNESS)
    head, found_step = split_step(base)
    if train_run is not None and step is not None:
        assert (head, found_step) == (train_run, step)
    elif train_run is not None:  # a run's checkpoint of unknown step
        assert (head, found_step) == (f"{train_run}{STEP_MARK}final", None)
    elif step:
        assert (head, found_step) == (policy, step)
    else:
        assert (head, found_step) == (policy, None)


def test_a_frames_missing_values_read_as_absent() -> None:
    nan = float("nan")
    assert subject_label("hf:m", nan, nan, DEFAULT_HARNESS) == "hf:m"
    assert subject_label("hf:m", "r", 20.0, "tools") == f"r{STEP_MARK}20{HARNESS_MARK}tools"
    assert subject_kind("hf:m", nan, 0.0, nan) == "base"
    assert subject_kind("policy_aware_heuristic", nan, nan, nan) == "rule"
    assert subject_kind("openai:gpt-4o-mini", None, None, None) == "model"
    assert subject_kind("hf:m", "r", 20, "m") == "checkpoint"


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
