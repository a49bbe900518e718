"""Replay an action sequence (or a stored trajectory's actions) and score it step by step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from schemashift.env.actions import InvalidAction
from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.rollout.runner import FINAL_KEYS


class ReplayError(ValueError):
    """An action of the sequence that the ruleset rejects; names its position."""


def replay(
    ruleset: str,
    scenario: str,
    seed: int,
    actions: Iterable[Any],
    tokens_used: Iterable[int] | None = None,
) -> dict[str, Any]:
    """Play `actions` in order from reset; actions left after the episode ends are listed as ignored
    with their 1-based position, as errors name them.

    Returns {"steps": [{step, action, response, feedback, reward}], "final": {...}, "ignored": [...]}.
    """
    env = Environment(get_ruleset(ruleset))
    env.reset(scenario, seed)
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
    are judged the same way again.
    """
    actions, tokens = [], []
    for step in trajectory.get("steps", []):
        action = step["action"]
        actions.append(action["raw"] if action.get("type") == "invalid" else action)
        tokens.append(int(step.get("tokens_used", 0) or 0))
    return actions, tokens
