"""The held-out test split: v1's observations do not name the seed, and a salt given at run time
(`SALT_ENV`) draws the test split's tasks from streams the public code cannot reproduce.

The attack the salt answers: an agent that knows its cell (scenario and seed: a published cell
list names them) rebuilds the task with the public generator and plays its solution. Unsalted it
solves every episode, which is why the salt exists; salted it solves none.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import pytest
from v1_support import FAMILIES, RULESET, SCENARIOS, play_policy

from schemashift.cli import main
from schemashift.env import CONTROL, DRIFT, Environment
from schemashift.env.rulesets.base import SALT_ENV
from schemashift.env.rulesets.v1 import tasks
from schemashift.policies import make_policy
from schemashift.workflow import Plan

pytestmark = pytest.mark.timeout(600)

#: test-split seeds no other test uses, and two salts of the kind a held-out run would use
_DRAW = random.Random(20261206)
SEEDS = _DRAW.sample(range(200, 9999), 6)
SALT = "held-out-" + "".join(_DRAW.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24))
OTHER_SALT = SALT[::-1]


def identity(task) -> tuple[Any, ...]:
    """What makes two tasks the same task: the text, the world, the drift plan."""
    return (task.description, repr(task.seed_data), task.schedule_hash())


def keys(value: Any) -> set[str]:
    """Every mapping key anywhere in a JSON-like value."""
    if isinstance(value, dict):
        return set(value).union(*(keys(v) for v in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(keys(v) for v in value))
    return set()


def public_oracle_attack(scenario: str, seed: int) -> bool:
    """Play the solution the public generator gives for (scenario, seed) in the current
    process's environment (salted or not); whether it succeeds."""
    solution = RULESET.solution(tasks.build_task(scenario, seed))
    env = Environment(RULESET)
    observation = env.reset(scenario, seed)
    for action in solution:
        if observation["done"]:
            break
        observation, _ = env.step(action)
    return bool(RULESET.summary(env.episode)["success"])


def test_no_observation_names_the_seed():
    env = Environment(RULESET)
    oracle = make_policy("oracle", "v1")
    for scenario in SCENARIOS:
        seed = SEEDS[0]
        from schemashift.rollout.runner import Cell

        oracle.reset()
        oracle.start_episode(Cell("v1", scenario, seed))
        observation = env.reset(scenario, seed)
        seen = keys(dict(observation))
        while not observation["done"]:
            observation, _ = env.step(oracle.act(observation))
            seen |= keys(dict(observation))
        assert "seed" not in seen, scenario
        assert RULESET.summary(env.episode)["success"]


def test_the_public_generator_attack_needs_no_salt_to_win_and_fails_under_one(monkeypatch):
    """The attack is real (it wins every unsalted cell), so its failure under a salt is the salt's
    doing."""
    monkeypatch.delenv(SALT_ENV, raising=False)
    cells = [(scenario, seed) for scenario in FAMILIES for seed in SEEDS[:3]]
    assert all(public_oracle_attack(*cell) for cell in cells)
    monkeypatch.setenv(SALT_ENV, SALT)
    assert sum(public_oracle_attack(*cell) for cell in cells) == 0


def test_a_search_of_the_public_generator_finds_a_salted_task_nowhere(monkeypatch):
    """The attacker's search: the text an episode shows, looked up over the public generator's
    test seeds around it (its own included). Unsalted the search finds the seed; salted, no seed."""
    window = range(0, 1500)
    for scenario in ("customer_lookup", "weekly_report"):
        seed = _DRAW.choice(window)
        monkeypatch.delenv(SALT_ENV, raising=False)
        public = {tasks.build_task(scenario, s).description: s for s in window}
        shown = Environment(RULESET).reset(scenario, seed)["task_description"]
        assert public.get(shown) == seed, "the search works where there is no salt"
        monkeypatch.setenv(SALT_ENV, SALT)
        shown = Environment(RULESET).reset(scenario, seed)["task_description"]
        assert shown not in public, (scenario, seed)


def test_a_salt_moves_every_test_task_and_no_training_task(monkeypatch):
    monkeypatch.delenv(SALT_ENV, raising=False)
    public = {(s, seed): identity(RULESET.build_task(s, seed)) for s in SCENARIOS for seed in SEEDS}
    train = {(s, seed): identity(RULESET.build_task(s, seed)) for s in FAMILIES for seed in (10007, 25003)}
    assert RULESET.salt_id() is None and RULESET.build_task(FAMILIES[0], SEEDS[0]).salt_id is None
    monkeypatch.setenv(SALT_ENV, SALT)
    salted = {cell: identity(RULESET.build_task(*cell)) for cell in public}
    assert all(salted[cell] != public[cell] for cell in public)
    assert len(set(salted.values())) == len(salted), "distinct cells stay distinct tasks"
    assert {cell: identity(RULESET.build_task(*cell)) for cell in train} == train
    assert RULESET.build_task(FAMILIES[0], 10007).salt_id is None
    task = RULESET.build_task(FAMILIES[0], SEEDS[0])
    assert task.salt_id == RULESET.salt_id() == tasks.salt_id(SALT) and SALT not in task.salt_id
    tasks.build_task.cache_clear()
    assert {cell: identity(RULESET.build_task(*cell)) for cell in public} == salted, "a salt replays"
    monkeypatch.setenv(SALT_ENV, OTHER_SALT)
    assert all(identity(RULESET.build_task(*cell)) != salted[cell] for cell in public)
    monkeypatch.setenv(SALT_ENV, "")
    assert {cell: identity(RULESET.build_task(*cell)) for cell in public} == public, "empty is none"


@pytest.mark.parametrize("policy", ["oracle", "scripted"])
def test_salted_tasks_are_solved_in_both_arms(monkeypatch, policy):
    monkeypatch.setenv(SALT_ENV, SALT)
    agent = make_policy(policy, "v1")
    for scenario in SCENARIOS:
        for seed in SEEDS[3:]:
            for arm in (DRIFT, CONTROL):
                assert play_policy(agent, scenario, seed, arm=arm)["success"], (scenario, seed, arm)


def _files_text(folder: Path) -> str:
    text = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            text.append((gzip.decompress(data) if path.suffix == ".gz" else data).decode("latin-1"))
    return "\n".join(text)


def test_records_name_the_salt_by_its_id_and_never_hold_it(monkeypatch, tmp_path, capsys):
    import pyarrow.parquet as pq

    monkeypatch.setenv(SALT_ENV, SALT)
    out = tmp_path / "salted"
    cells = ["--ruleset", "v1", "--scenarios", "customer_lookup", "--seeds", f"{SEEDS[0]},10011"]
    assert main(["run", *cells, "--policy", "scripted", "--arms", "drift,control", "--out", str(out)]) == 0
    rows = pq.read_table(out / "episodes.parquet").to_pylist()
    assert {(row["seed"], row["salt_id"]) for row in rows} == {(SEEDS[0], tasks.salt_id(SALT)), (10011, None)}
    assert all(row["success"] for row in rows)
    assert SALT not in _files_text(out) + capsys.readouterr().out

    # a held-out run re-grades under its salt, and says which salt it needs without it
    assert main(["validate", str(out)]) == 0
    monkeypatch.delenv(SALT_ENV)
    assert main(["validate", str(out)]) != 0
    printed = capsys.readouterr()
    message = printed.out + printed.err
    assert (
        f"seed {SEEDS[0]} sample 0: cannot replay its trajectory: drawn under salt id {tasks.salt_id(SALT)}, "
        in message
    )
    assert "this process draws it under none (set SCHEMASHIFT_SALT" in message and SALT not in message
    monkeypatch.setenv(SALT_ENV, SALT)

    refused = tmp_path / "refused"
    assert main(["run", *cells, "--policy", "scripted", "--salt-id", "none", "--out", str(refused)]) == 2
    message = capsys.readouterr().err
    assert "--salt-id none" in message and tasks.salt_id(SALT) in message and SALT not in message
    assert not refused.exists() or not any(refused.iterdir())


def test_the_workflow_hands_the_salt_id_to_every_job(monkeypatch):
    import yaml

    with open(Path(__file__).parents[3] / "tests/workflow/config.arms.yaml") as f:
        config = yaml.safe_load(f)
    monkeypatch.delenv(SALT_ENV, raising=False)
    assert Plan(config).play_args("v1").endswith("--salt-id none")
    monkeypatch.setenv(SALT_ENV, SALT)
    plan = Plan(config)
    assert plan.play_args("v1").endswith(f"--salt-id {tasks.salt_id(SALT)}")
    assert f"--salt-id {tasks.salt_id(SALT)}" in plan.cells_args("v1")
    assert SALT_ENV in plan.api_key_variables(), "remote executors hand the salt on"
