"""The reward variants a training run can optimise, computed from an episode's final outcome:
a registry, one `RewardVariant` entry each (its name, the rulesets it applies to, its reward
function and whether it reports a shaping component). The run contract validates a run's reward
against it and the trainer computes with it; the config schema's reward enum is tested against it.

The outcome is the `final` object of a trajectory (the episode row's outcome columns), so the
same function scores a live rollout and a recorded trajectory.

- `v1`: the v1 ruleset's training reward (terminal score plus potential-based shaping). The
  ruleset takes the potential back from an episode that is not done, so its `training_reward`
  equals what a failed episode with that trajectory earns (and its `success` is False, its
  `score` 0): stopping an episode early cannot be farmed.
- `binary`: 1 when the episode ended (the environment said done) and the ruleset counts it as
  solved, else 0: criteria that hold in an episode the rollout cut off earn nothing.
- `legacy_cumulative`: the original trainer's reward: the sum of per-step shaped totals, minus
  0.5 when the episode did not end (the rollout stopped before the environment said done) or no
  step was taken. Legacy ruleset only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Penalty of the original trainer for an episode that did not end.
UNFINISHED_PENALTY = 0.5

#: Metric column -> outcome column for the per-component means of training_metrics.
COMPONENTS = {
    "reward_completion": "completion",
    "reward_drift_detection": "drift_detection",
    "reward_adaptation": "adaptation",
    "reward_efficiency": "efficiency",
}


class RewardError(ValueError):
    """The outcome lacks what the reward variant needs (e.g. a v1 reward on a legacy episode)."""


def _number(final: Mapping[str, Any], key: str, variant: str) -> float:
    value = final.get(key)
    if value is None:
        raise RewardError(
            f"reward {variant!r} needs {key!r} in the episode outcome, which is null here "
            f"(ruleset {final.get('ruleset')!r})"
        )
    return float(value)


def _solved(final: Mapping[str, Any], done: bool) -> float:
    """1 for an episode that ended solved; success without an end is not paid."""
    return 1.0 if done and final.get("success") else 0.0


def _v1(final: Mapping[str, Any], done: bool) -> float:
    return _number(final, "training_reward", "v1")


def _legacy_cumulative(final: Mapping[str, Any], done: bool) -> float:
    total = _number(final, "cumulative_reward", "legacy_cumulative")
    if not done or not final.get("steps"):
        total -= UNFINISHED_PENALTY
    return total


@dataclass(frozen=True)
class RewardVariant:
    """One reward a run can optimise."""

    name: str
    #: (the episode's outcome, whether the environment ended it) -> the scalar reward
    reward: Callable[[Mapping[str, Any], bool], float]
    #: the rulesets whose outcomes carry what it reads (None: every ruleset)
    rulesets: tuple[str, ...] | None = None
    #: the reward minus the episode's score is reported as its shaping component
    shaped: bool = False
    #: why it is limited to its rulesets, for the error that refuses another one
    why: str = ""

    def check_ruleset(self, ruleset: str) -> str | None:
        """None where it applies to `ruleset`, else the reason it does not."""
        if self.rulesets is None or ruleset in self.rulesets:
            return None
        where = " and ".join(self.rulesets) + (" rulesets" if len(self.rulesets) > 1 else " ruleset")
        return f"reward {self.name} {self.why} and exists only on the {where}, not {ruleset!r}"


REWARD_VARIANTS: dict[str, RewardVariant] = {
    variant.name: variant
    for variant in (
        RewardVariant("v1", _v1, shaped=True),
        RewardVariant("binary", _solved),
        RewardVariant(
            "legacy_cumulative",
            _legacy_cumulative,
            rulesets=("legacy",),
            why="is the original's summed shaped reward",
        ),
    )
}


def reward_variant(name: str) -> RewardVariant:
    """The registry's entry for `name`; a RewardError naming the known variants otherwise."""
    try:
        return REWARD_VARIANTS[name]
    except (KeyError, TypeError):
        raise RewardError(f"unknown reward variant {name!r}; choose one of {list(REWARD_VARIANTS)}") from None


def episode_reward(variant: str, final: Mapping[str, Any], *, done: bool) -> float:
    """The scalar reward of one episode under `variant`; `done` says whether the episode ended."""
    return reward_variant(variant).reward(final, done)


def reward_components(variant: str, final: Mapping[str, Any], *, done: bool) -> dict[str, float | None]:
    """Per-component values of one episode for the training metrics (null where unknown)."""
    components: dict[str, float | None] = {
        column: (None if final.get(key) is None else float(final[key])) for column, key in COMPONENTS.items()
    }
    components["reward_success"] = _solved(final, done)
    entry = reward_variant(variant)
    total = entry.reward(final, done)
    score = final.get("score")
    components["reward_shaping"] = total - float(score) if entry.shaped and score is not None else None
    return components
