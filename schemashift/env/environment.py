"""The SchemaShift environment: one episode at a time, any ruleset, plain-dict observations."""

from __future__ import annotations

import copy
import marshal
from collections import OrderedDict
from typing import Any

from schemashift.env.actions import Action, InvalidAction, parse_action
from schemashift.env.episode import Episode
from schemashift.env.ruleset import Ruleset
from schemashift.env.rulesets import get_ruleset


class EpisodeStateError(RuntimeError):
    """Misuse of the episode lifecycle: a step before reset or after the episode ended."""


class Environment:
    """reset(scenario, seed) / step(action) over a pluggable ruleset.

    Observations and reward breakdowns are plain JSON-serialisable dicts, and each one is a
    snapshot: it shares no mutable object with the episode, the world, the ruleset's caches,
    other observations or other episodes, so a policy may mutate what it is given in any way
    without changing grading, records or anything it is shown later. Inbound, the parameters of
    an action are copied too, so a policy that reuses or edits an action it already stepped
    cannot reach the world through it.

    Rulesets build their views from shared parts (documentation built once per schema
    revision, the step records); the copy is made here, at the boundary, for every ruleset:
    the documentation, which rarely changes, by a compiled constructor cached by content
    (`_Constructors`), everything else by `snapshot`, which shares only immutable leaves.
    The copies are the core's largest per-step cost: `benchmarks/step_speed.py --ruleset
    legacy,v1 --fresh-seeds` (policy-aware episodes, decision and resets included, 2-core
    machine, same ruleset code) measured legacy 13.4 -> 41 us/step and v1 40 -> 91 us/step
    (v1's task construction plays its oracle through an Environment, so it pays them too).

    `snapshots=False` hands out the ruleset's shared views instead (read-only by contract):
    for callers that only serialise them and never let a policy hold them, such as the server,
    whose observation deltas compare the parts of consecutive views by identity.
    """

    def __init__(self, ruleset: str | Ruleset = "legacy", *, snapshots: bool = True) -> None:
        self.ruleset: Ruleset = get_ruleset(ruleset) if isinstance(ruleset, str) else ruleset
        self.episode: Episode | None = None
        self.snapshots = snapshots
        # Set lookups for validating every action.
        self._tool_names = frozenset(self.ruleset.tool_names)
        self._drift_kinds = frozenset(self.ruleset.drift_kinds)
        # The documentation object last seen and its constructor (None: copy it with snapshot).
        self._docs: Any = _NOTHING
        self._docs_build: Any = None

    def reset(self, scenario: str, seed: int = 0, *, episode_id: str | None = None) -> dict[str, Any]:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self.episode = self.ruleset.new_episode(scenario, seed, episode_id)
        view = self.ruleset.observe(self.episode, "Episode started.")
        return self._snapshot(view) if self.snapshots else view

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
        if parsed is not None and parsed.params is not None:
            # The world may store parameter values (attendee lists, ...): keep the policy's out.
            if parsed is action:
                parsed = copy.copy(parsed)
            parsed.params = snapshot(parsed.params)

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
            else {"type": "invalid", "raw": snapshot(_printable(action))},
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
        view = rs.observe(ep, feedback)
        if not self.snapshots:
            return view, reward
        return self._snapshot(view), snapshot(reward)

    def _snapshot(self, view: dict[str, Any]) -> dict[str, Any]:
        """A private copy of the ruleset's view: new containers all the way down, leaves shared.

        The documentation (`ruleset.documentation`, immutable by the Ruleset contract: a new
        object whenever it changes) is built by a compiled constructor found by its content,
        so episodes with the same documentation share one; the rest goes through `snapshot`.
        """
        out = view.copy()
        docs = self.ruleset.documentation(self.episode)
        for key, value in view.items():
            if type(value) not in _LEAVES:
                if value is docs:
                    if docs is not self._docs:
                        self._docs, self._docs_build = docs, _CONSTRUCTORS.get(docs)
                    build = self._docs_build
                    out[key] = build() if build is not None else snapshot(value)
                else:
                    out[key] = snapshot(value)
        return out


_NOTHING = object()
#: exact types that are immutable and need no copy (subclasses are copied: they may hold state)
_LEAVES = frozenset({str, int, float, bool, type(None), bytes})


def snapshot(value: Any, _leaves: frozenset = _LEAVES) -> Any:
    """A deep copy of JSON-shaped data (dict, list, tuple over str, int, float, bool, None) that
    shares the immutable leaves: every container in the result is new. Containers of leaves
    only are copied at C speed. Other objects go through `copy.deepcopy` (kept as they are when
    even that fails)."""
    kind = type(value)
    if kind is dict:
        out = value.copy()
        for key, item in value.items():
            if type(item) not in _leaves:
                out[key] = snapshot(item)
        return out
    if kind is list:
        if _leaves.issuperset(map(type, value)):
            return value.copy()
        return [item if type(item) in _leaves else snapshot(item) for item in value]
    if kind in _leaves:
        return value
    if kind is tuple:
        return value if _leaves.issuperset(map(type, value)) else tuple(map(snapshot, value))
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an object that cannot be copied is handed on as it is
        return value


class _Constructors:
    """Compiled constructors of immutable JSON data, found by content (its marshal bytes, which
    tell int from bool from float and keep key order): calling one builds a fresh copy from
    constants, several times faster than walking the data. Bounded; least recently used out."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._by_content: OrderedDict[bytes, Any] = OrderedDict()

    def get(self, value: Any) -> Any:
        """The constructor for `value`, or None for data it cannot compile (copy those)."""
        if type(value) not in (dict, list):
            return None
        try:
            key = marshal.dumps(value)
        except ValueError:  # a type marshal does not know
            return None
        build = self._by_content.get(key, _NOTHING)
        if build is not _NOTHING:
            self._by_content.move_to_end(key)
            return build
        build = _compile(value) if _literal(value) else None
        self._by_content[key] = build
        if len(self._by_content) > self.size:
            self._by_content.popitem(last=False)
        return build


def _literal(value: Any, depth: int = 0) -> bool:
    """Whether repr(value) is a Python literal that evaluates back to an equal copy of it."""
    kind = type(value)
    if kind in (str, int, bool, type(None)):
        return True
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if depth > 50:
        return False
    if kind is dict:
        return all(_literal(k, depth + 1) and _literal(v, depth + 1) for k, v in value.items())
    if kind in (list, tuple):
        return all(_literal(v, depth + 1) for v in value)
    return False


def _compile(value: Any) -> Any:
    namespace: dict[str, Any] = {}
    try:
        exec(f"def build():\n    return {value!r}\n", {"__builtins__": {}}, namespace)  # noqa: S102
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    build = namespace["build"]
    return build if build() == value else None


_CONSTRUCTORS = _Constructors()


def _printable(action: Any) -> Any:
    if isinstance(action, bytes):
        return action.decode("utf-8", "replace")
    return action
