"""The reward variants a training run can optimise, computed from an episode's final outcome.

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

from collections.abc import Mapping
from typing import Any

from schemashift.train.runs import REWARD_VARIANTS

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


def episode_reward(variant: str, final: Mapping[str, Any], *, done: bool) -> float:
    """The scalar reward of one episode under `variant`; `done` says whether the episode ended."""
    if variant == "v1":
        return _number(final, "training_reward", variant)
    if variant == "binary":
        return _solved(final, done)
    if variant == "legacy_cumulative":
        total = _number(final, "cumulative_reward", variant)
        if not done or not final.get("steps"):
            total -= UNFINISHED_PENALTY
        return total
    raise RewardError(f"unknown reward variant {variant!r}; choose one of {list(REWARD_VARIANTS)}")


def reward_components(variant: str, final: Mapping[str, Any], *, done: bool) -> dict[str, float | None]:
    """Per-component values of one episode for the training metrics (null where unknown)."""
    components: dict[str, float | None] = {
        column: (None if final.get(key) is None else float(final[key])) for column, key in COMPONENTS.items()
    }
    components["reward_success"] = _solved(final, done)
    total = episode_reward(variant, final, done=done)
    score = final.get("score")
    components["reward_shaping"] = total - float(score) if variant == "v1" and score is not None else None
    return components
