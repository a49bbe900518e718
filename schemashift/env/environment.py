"""The SchemaShift environment: one episode at a time, any ruleset, plain-dict observations."""

from __future__ import annotations

from typing import Any

from schemashift.env.actions import Action, InvalidAction, parse_action
from schemashift.env.episode import Episode
from schemashift.env.ruleset import Ruleset
from schemashift.env.rulesets import get_ruleset


class EpisodeStateError(RuntimeError):
    """Misuse of the episode lifecycle: a step before reset or after the episode ended."""


class Environment:
    """reset(scenario, seed) / step(action) over a pluggable ruleset.

    Observations and reward breakdowns are plain JSON-serialisable dicts. Parts of an
    observation that do not change between steps (documentation, past step records) are shared
    with later observations, so treat observations as read-only.
    """

    def __init__(self, ruleset: str | Ruleset = "legacy") -> None:
        self.ruleset: Ruleset = get_ruleset(ruleset) if isinstance(ruleset, str) else ruleset
        self.episode: Episode | None = None
        # Set lookups for validating every action.
        self._tool_names = frozenset(self.ruleset.tool_names)
        self._drift_kinds = frozenset(self.ruleset.drift_kinds)

    def reset(self, scenario: str, seed: int = 0, *, episode_id: str | None = None) -> dict[str, Any]:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self.episode = self.ruleset.new_episode(scenario, seed, episode_id)
        return self.ruleset.observe(self.episode, "Episode started.")

    def parse(self, action: Any) -> Action:
        """Validate an action against the ruleset's vocabulary (raises InvalidAction)."""
        return parse_action(action, self._tool_names, self._drift_kinds)

    def step(self, action: Any, tokens_used: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
        """Apply one action (dict, JSON text or Action); returns (observation, reward breakdown).

        Raises InvalidAction for an action the ruleset rejects (nothing changes) and
        EpisodeStateError when called before reset or after the episode ended.
        """
        ep = self.episode
        if ep is None:
            raise EpisodeStateError("Call reset() before step().")
        if ep.done:
            raise EpisodeStateError("Episode already done; call reset() to start a new one.")
        if tokens_used and (
            isinstance(tokens_used, bool) or not isinstance(tokens_used, int) or tokens_used < 0
        ):
            raise ValueError(f"tokens_used must be a non-negative integer, got {tokens_used!r}")
        rs = self.ruleset
        invalid: InvalidAction | None = None
        try:
            parsed: Action | None = parse_action(action, self._tool_names, self._drift_kinds)
        except InvalidAction as exc:
            if not rs.invalid_actions_consume_step:
                raise
            parsed, invalid = None, exc

        ep.step += 1
        if tokens_used:
            ep.tokens_remaining = max(0, ep.tokens_remaining - tokens_used)
        fired = rs.fire_drifts(ep, parsed)
        if parsed is None:
            response, feedback = rs.invalid_step(ep, action, invalid)
        else:
            response, feedback = rs.dispatch(ep, parsed)
        pre = rs.before_effects(ep, parsed, response)
        rs.apply_effects(ep, parsed, response)
        record = {
            "step": ep.step,
            "action": parsed.to_dict()
            if parsed is not None
            else {"type": "invalid", "raw": _printable(action)},
            "response": response,
            "feedback": feedback,
            "drift_events": [d.spec.to_dict() for d in fired] if fired else [],
            "reward": None,
        }
        ep.history.append(record)
        ep.done = rs.is_terminal(ep, parsed)
        reward = rs.reward(ep, parsed, response, pre)
        record["reward"] = reward
        if fired:
            record["feedback"] = feedback = rs.decorate_feedback(ep, feedback, fired)
        ep.visible_history.append(rs.visible_step(record))
        return rs.observe(ep, feedback), reward


def _printable(action: Any) -> Any:
    if isinstance(action, bytes):
        return action.decode("utf-8", "replace")
    return action
