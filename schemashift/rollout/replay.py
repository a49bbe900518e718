"""Replay an action sequence (or a stored trajectory's actions) and score it step by step, or
record it as an episode (`record_actions`): how an episode an external agent played (through the
MCP face, say) gets the same records as any policy's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from schemashift.env.actions import InvalidAction
from schemashift.env.arms import DEFAULT_ARM
from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.rollout.runner import FINAL_KEYS, Cell, EpisodeRecorder, EpisodeResult, SweepContext


class ReplayError(ValueError):
    """An action of the sequence that the ruleset rejects; names its position."""


def replay(
    ruleset: str,
    scenario: str,
    seed: int,
    actions: Iterable[Any],
    tokens_used: Iterable[int] | None = None,
    arm: str = DEFAULT_ARM,
) -> dict[str, Any]:
    """Play `actions` in order from reset in `arm`; actions left after the episode ends are listed as ignored
    with their 1-based position, as errors name them.

    Returns {"steps": [{step, action, response, feedback, reward}], "final": {...}, "ignored": [...]}.
    """
    env = Environment(get_ruleset(ruleset))
    env.reset(scenario, seed, arm=arm)
    charges = list(tokens_used) if tokens_used is not None else None
    ignored = []
    for index, action in enumerate(actions):
        if env.episode.done:
            ignored.append({"position": index + 1, "action": action})
            continue
        used = charges[index] if charges is not None and index < len(charges) else 0
        try:
            env.step(action, used)
        except InvalidAction as exc:
            raise ReplayError(f"action {index + 1}: {exc}") from None
    ep = env.episode
    summary = env.ruleset.summary(ep)
    final = {key: summary[key] for key in FINAL_KEYS if key in summary}
    final.update(steps=ep.step, done=ep.done)
    steps = [
        {key: record[key] for key in ("step", "action", "response", "feedback", "reward")}
        for record in ep.history
    ]
    return {"steps": steps, "final": final, "ignored": ignored}


def trajectory_actions(trajectory: dict[str, Any]) -> tuple[list[Any], list[int]]:
    """The actions a stored trajectory played and the tokens charged at each step.

    Steps that the ruleset recorded as invalid are replayed from their raw text, so that they
    are judged the same way again. A trajectory whose steps are not shaped like the ones `run`
    writes (an edited or damaged file) raises ReplayError naming the step.
    """
    steps = trajectory.get("steps", [])
    if not isinstance(steps, list):
        raise ReplayError(f"the trajectory's steps are not a list but {type(steps).__name__}")
    actions, tokens = [], []
    for number, step in enumerate(steps, start=1):
        action = step.get("action") if isinstance(step, dict) else None
        if not isinstance(action, dict):
            raise ReplayError(f"step {number} of the trajectory has no action object")
        used = step.get("tokens_used", 0) or 0
        if not isinstance(used, int) or isinstance(used, bool) or used < 0:
            raise ReplayError(f"step {number} of the trajectory: tokens_used {used!r} is not a count")
        if action.get("type") == "invalid":
            if "raw" not in action:
                raise ReplayError(f"step {number} of the trajectory: an invalid action without its raw text")
            actions.append(action["raw"])
        else:
            actions.append(action)
        tokens.append(used)
    return actions, tokens


def record_actions(
    ruleset: str,
    scenario: str,
    seed: int,
    actions: Iterable[Any],
    context: SweepContext,
    arm: str = DEFAULT_ARM,
) -> EpisodeResult:
    """The records of an episode played elsewhere, from its actions in order: the episode row,
    drift rows and trajectory the runner's own bookkeeping (`EpisodeRecorder`) writes for any
    policy. Actions after the episode ended are not played; an episode the actions leave running
    is recorded as it stands (not done, so not a success)."""
    from schemashift.rollout.backends import InProcessBackend

    recorder = EpisodeRecorder(InProcessBackend(), Cell(ruleset, scenario, seed, arm=arm), context)
    observation = recorder.start()
    for action in actions:
        if observation["done"]:
            break
        observation = recorder.apply(action)
    return recorder.finish()
