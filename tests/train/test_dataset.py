"""The GRPO dataset: episodes of the run's ruleset and split, each prompt the format's opening."""

from __future__ import annotations

import pytest

from schemashift.env.rulesets import get_ruleset
from schemashift.runs.contract import RunConfigError, resolve_run, training_scenarios
from schemashift.train.dataset import (
    EPISODE_FIELD,
    DatasetError,
    build_rows,
    parse_episode_key,
    training_seeds,
)

V1 = get_ruleset("v1")


def _run(**overrides):
    spec = {"base_model": "m", "ruleset": "v1", "split": "train", "reward": "v1", "overrides": overrides}
    return resolve_run({"train": {"runs": {"r": spec}}}, "r")


def test_rows_cycle_the_scenarios_with_seeds_of_the_train_split():
    rows = build_rows(_run(dataset_size=12, scenarios=V1.scenario_ids()[:3]))
    assert [row["scenario"] for row in rows[:3]] == V1.scenario_ids()[:3]
    first, _ = V1.splits()["train"]
    assert all(row["seed"] >= first and V1.split_of(row["seed"]) == "train" for row in rows)
    assert len({(row["scenario"], row["seed"]) for row in rows}) == 12
    for row in rows:
        key = row["prompt"][0][EPISODE_FIELD]
        assert parse_episode_key(key) == ("v1", row["scenario"], row["seed"])
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]


def test_the_draw_is_reproducible_and_follows_the_run_seed():
    assert training_seeds(_run(), 5) == training_seeds(_run(), 5)
    assert training_seeds(_run(), 5) != training_seeds(_run(seed=1), 5)


def test_explicit_seeds_must_lie_in_the_split():
    first, _ = V1.splits()["train"]
    assert training_seeds(_run(seeds=[first, first + 1]), 3) == [first, first + 1, first]
    with pytest.raises(DatasetError, match=r"seeds \[3\] are not in the 'train' split"):
        training_seeds(_run(seeds=[3]), 1)


def test_unknown_scenarios_and_splits_are_errors():
    with pytest.raises(RunConfigError, match="unknown scenarios"):
        _run(scenarios=["nope"])
    spec = {"base_model": "m", "ruleset": "v1", "split": "holdout", "reward": "v1"}
    with pytest.raises(DatasetError, match="has splits"):
        training_seeds(resolve_run({"train": {"runs": {"r": spec}}}, "r"), 1)


@pytest.mark.timeout(30)
def test_compositions_join_the_training_scenarios_when_on():
    composed = [info.id for info in V1.compositions()]
    assert training_scenarios(_run()) == V1.scenario_ids()
    assert training_scenarios(_run(compositions=True)) == V1.scenario_ids() + composed
    rows = build_rows(_run(compositions=True, dataset_size=len(V1.scenario_ids()) + len(composed)))
    assert [row["scenario"] for row in rows] == V1.scenario_ids() + composed
    legacy = {
        "base_model": "m",
        "ruleset": "legacy",
        "reward": "legacy_cumulative",
        "overrides": {"compositions": True},
    }
    with pytest.raises(RunConfigError, match="has none"):
        resolve_run({"train": {"runs": {"r": legacy}}}, "r")
