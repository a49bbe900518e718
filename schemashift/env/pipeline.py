"""The step pipeline: one episode at a time over a ruleset instance, plain-dict observations.

It sits below the ruleset registry (it imports no ruleset), so that a ruleset may play its own
episodes through it (v1 builds its oracle's plan that way); `schemashift.env.Environment` adds
looking a ruleset up by name.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from schemashift.env.actions import Action, InvalidAction, parse_action
from schemashift.env.arms import DEFAULT_ARM, check_arm
from schemashift.env.episode import Episode
from schemashift.env.frozen import EMPTY_LIST, KEPT, FrozenDict, freeze, frozen_view

if TYPE_CHECKING:
    from schemashift.env.rulesets.base import Ruleset

#: how many frozen actions' parses a pipeline keeps (a policy's repertoire is far smaller)
PARSED_KEPT = 64
#: the seeds an episode may have: what the records' int64 `seed` column holds
SEED_MIN, SEED_MAX = -(1 << 63), (1 << 63) - 1


class EpisodeStateError(RuntimeError):
    """Misuse of the episode lifecycle: a step before reset or after the episode ended."""


class StepPipeline:
    """reset(scenario, seed) / step(action) over a ruleset instance.

    Observations and reward breakdowns are plain JSON-serialisable dicts, and each one is a
    snapshot that shares nothing mutable with the episode, the world, the ruleset's caches or
    other episodes: the top-level dict is the policy's own, and everything below it is
    read-only (`schemashift.env.frozen`: dict and list subclasses whose mutating methods raise
    `ReadOnlyError`; `copy.deepcopy(observation)` gives an editable copy). What a step produces
    (response, action, reward, history record) is frozen where it is made and shared by the
    records and every later view, so nothing is copied again to show it. Inbound, an action's
    parameters are frozen too, so a policy that edits an action it already stepped cannot reach
    the world through it.

    `snapshots=False` hands out the ruleset's own views instead (read-only by contract): for
    callers that only serialise them and never let a policy hold them, such as the server,
    whose observation deltas compare the parts of consecutive views by identity.
    """

    def __init__(self, ruleset: Ruleset, *, snapshots: bool = True) -> None:
        self.ruleset = ruleset
        self.episode: Episode | None = None
        self.snapshots = snapshots
        # The check costs as much as a twentieth of a legacy step (a type() call per part), and
        # the built-in rulesets build every part frozen (tests/env/test_observation_snapshots.py).
        self._check_views = snapshots and not ruleset.frozen_views
        # Set lookups for validating every action.
        self._tool_names = frozenset(self.ruleset.tool_names)
        self._drift_kinds = frozenset(self.ruleset.drift_kinds)
        #: id of a frozen action -> (the action, its parse, its record form), for actions that cannot change
        self._parsed: dict[int, tuple[FrozenDict, Action, FrozenDict]] = {}
        # Hooks a ruleset leaves as the base class has them are not called through it at every
        # step (`Ruleset.direct_hooks`).
        self._routes, self._before_effects = ruleset.direct_hooks()

    def reset(
        self, scenario: str, seed: int = 0, *, episode_id: str | None = None, arm: str = DEFAULT_ARM
    ) -> dict[str, Any]:
        """Start an episode of (scenario, seed) in `arm` (`env.arms`: `control` plays it with its
        drift plan off); returns the first observation."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        if not SEED_MIN <= seed <= SEED_MAX:
            # Not the value itself: a long one cannot even be turned into text.
            raise ValueError(
                f"seed must be between {SEED_MIN} and {SEED_MAX} (the records' int64 seed column), "
                f"got a {seed.bit_length()}-bit integer"
            )
        self.episode = self.ruleset.new_episode(scenario, seed, episode_id, arm=check_arm(arm))
        view = self.ruleset.observe(self.episode, "Episode started.")
        if not self._check_views or KEPT.issuperset(map(type, view.values())):
            return view
        return frozen_view(view)

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
        # A frozen action cannot change, so its validation could only give the same answer again:
        # one sent again (a policy that keeps its actions frozen) is looked up, not parsed.
        kept = self._parsed.get(id(action)) if type(action) is FrozenDict else None
        if kept is not None:
            parsed: Action | None = kept[1]
            form: FrozenDict | None = kept[2]
        else:
            form = None
            try:
                parsed = parse_action(action, self._tool_names, self._drift_kinds)
            except InvalidAction as exc:
                if not rs.invalid_actions_consume_step:
                    raise
                parsed, invalid = None, exc
            else:
                if type(action) is FrozenDict and _cannot_change(action):
                    if len(self._parsed) >= PARSED_KEPT:
                        self._parsed.clear()
                    # Its record form is built once too. The entry holds the action, so no other
                    # object takes its id while it is kept.
                    form = parsed.frozen()
                    self._parsed[id(action)] = (action, parsed, form)
        if parsed is not None and parsed.params is not None and type(parsed.params) is not FrozenDict:
            # A frozen copy: the policy's own objects never reach the world or the records.
            if parsed is action:
                parsed = copy.copy(parsed)
            parsed.params = freeze(parsed.params)
        # Below, `type(x) in KEPT` skips the call for parts a ruleset built frozen already.

        ep.step += 1
        if tokens_used:
            ep.tokens_remaining = max(0, ep.tokens_remaining - tokens_used)
        fired = rs.fire_drifts(ep, parsed)
        if parsed is None:
            response, feedback = rs.invalid_step(ep, action, invalid)
        elif self._routes is not None:
            response, feedback = self._routes[parsed.type](ep, parsed)
        else:
            response, feedback = rs.dispatch(ep, parsed)
        # What a step produces is frozen where it is made: the record, the history and every
        # view then share it, and no copy is needed when a policy is shown it.
        if type(response) not in KEPT:
            response = freeze(response)
        pre = None if self._before_effects is None else self._before_effects(ep, parsed, response)
        rs.apply_effects(ep, parsed, response)
        record = {
            "step": ep.step,
            "action": form
            if form is not None
            else parsed.frozen()
            if parsed is not None
            else freeze({"type": "invalid", "raw": _printable(action)}),
            "response": response,
            "feedback": feedback,
            "drift_events": [d.spec.to_dict() for d in fired] if fired else EMPTY_LIST,
            "reward": None,
        }
        ep.history.append(record)
        ep.done = rs.is_terminal(ep, parsed)
        reward = rs.reward(ep, parsed, response, pre)
        if type(reward) not in KEPT:
            reward = freeze(reward)
        record["reward"] = reward
        if fired:
            record["feedback"] = feedback = rs.decorate_feedback(ep, feedback, fired)
        shown = rs.visible_step(record)
        ep.visible_history.append(shown if type(shown) in KEPT else freeze(shown))
        view = rs.observe(ep, feedback)
        # `Ruleset.observe` makes a new top-level dict at every call, so a view whose parts are
        # all frozen already is the policy's own snapshot as it is: a ruleset that builds them so
        # says it (`frozen_views`), any other's views are checked and copied over frozen parts.
        if not self._check_views or KEPT.issuperset(map(type, view.values())):
            return view, reward
        return frozen_view(view), reward


def _cannot_change(action: FrozenDict) -> bool:
    """Whether everything parsing reads of a frozen action is frozen too: its values and those of
    its sub-objects (parameters are read as a whole, and a frozen dict of them is kept as it is)."""
    for value in action.values():
        if type(value) not in KEPT or (
            type(value) is FrozenDict and not KEPT.issuperset(map(type, value.values()))
        ):
            return False
    return True


def _printable(action: Any) -> Any:
    if isinstance(action, bytes):
        return action.decode("utf-8", "replace")
    return action
