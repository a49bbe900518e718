"""Junk pairs of the v1 damage tests: two writes that undo each other's final state but not what
the world already sent (invitations, updates, cancellation notices), and a player that puts one
into an honest solution at any two positions.

An honest solution here is the task's writes in plan order, each rendered under the contract the
call will meet (`oracle._oracle_call`, so a drift never rejects it), waiting out rate limits with
inspections and making a call a transient fault met once more after its Retry-After, then the
honest completion. Junk writes are rendered the same way, so every junk
write the tests insert is accepted by the API (a rejected write sends nothing and is no damage).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from v1_support import RULESET

from schemashift.env import DRIFT, Environment
from schemashift.env.rulesets.v1.catalogue import TRANSIENT_CODES
from schemashift.env.rulesets.v1.oracle import _oracle_call
from schemashift.env.rulesets.v1.tools import WRITE_ENDPOINTS

JUNK_TITLE = "Team Party"

#: an intent: (tool, endpoint, params or a function of the played context giving them, name)
Intent = tuple[str, str, Any, str | None]


def honest_intents(task) -> list[Intent]:
    """The task's writes, in plan order; a create is named by its title (its id is looked up)."""
    intents = []
    for op in task.ground_truth["ops"]:
        if (op["tool"], op["endpoint"]) in WRITE_ENDPOINTS:
            name = f"event:{op['params']['title']}" if op["endpoint"] == "create_event" else None
            intents.append((op["tool"], op["endpoint"], dict(op["params"]), name))
    return intents


class JunkWriteRejected(AssertionError):
    pass


def play_intents(
    scenario: str,
    seed: int,
    intents: list[Intent],
    env: Environment | None = None,
    arm: str = DRIFT,
    before: list[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Play the actions `before` as they are, then `intents` (each rendered under the live
    contract), then complete honestly."""
    env = env or Environment(RULESET)
    env.reset(scenario, seed, arm=arm)
    ep = env.episode
    for action in before:
        observation, _ = env.step(action)
        assert not observation["last_response"]["ok"], (scenario, seed, action)
    task = ep.task
    ctx: dict[str, str] = {}
    for tool, endpoint, params, name in intents:
        api = ep.tools[tool]
        while api.wait_needed(ep.step + 1) and not ep.done:
            env.step({"type": "inspect_schema", "inspect": {"tool": tool}})
        if ep.done:
            break
        if callable(params):
            params = params(ctx)
        before = {e["event_id"] for e in ep.tools["calendar"].events} if "calendar" in ep.tools else set()
        live_endpoint, live = _oracle_call(ep, {"tool": tool, "endpoint": endpoint, "params": params})
        action = {"type": "call_tool", "tool_call": {"tool": tool, "endpoint": live_endpoint, "params": live}}
        observation, _ = env.step(action)
        if observation["last_response"]["body"].get("code") in TRANSIENT_CODES:
            # A transient fault: the call was not applied; wait out its Retry-After and make it again.
            while api.wait_needed(ep.step + 1) and not ep.done:
                env.step({"type": "inspect_schema", "inspect": {"tool": tool}})
            observation, _ = env.step(action)
        if not observation["last_response"]["ok"]:
            raise JunkWriteRejected((scenario, seed, tool, endpoint, params, observation["last_response"]))
        if name is not None and endpoint == "create_event":
            (ctx[name],) = {e["event_id"] for e in ep.tools["calendar"].events} - before
    if not ep.done:
        env.step({"type": "complete_task", "complete": {"summary": task.ground_truth["summary"]}})
    return RULESET.summary(ep)


def _wanted_events(task) -> list[dict[str, Any]]:
    return [
        dict(op["params"])
        for op in task.ground_truth["ops"]
        if (op["tool"], op["endpoint"]) == ("calendar", "create_event")
    ]


def _cancel_targets(task) -> list[str]:
    return [
        op["params"]["event_id"]
        for op in task.ground_truth["ops"]
        if (op["tool"], op["endpoint"]) == ("calendar", "delete_event")
    ]


def _update(name: str, **changes: Any) -> Intent:
    return ("calendar", "update_event", lambda ctx: {"event_id": ctx[name], **changes}, None)


def _update_id(event_id: str, **changes: Any) -> Intent:
    return ("calendar", "update_event", {"event_id": event_id, **changes}, None)


# A junk pair: (first intents, second intents, the name of the honest intent the first must
# follow or None, the name of the honest intent the second must precede or None).
Pair = tuple[list[Intent], list[Intent], str | None, str | None]


def extra_copy_deleted(task, rng) -> Pair | None:
    """An extra copy of a wanted event (invitations sent), deleted later."""
    events = _wanted_events(task)
    if not events:
        return None
    event = rng.choice(events)
    create = ("calendar", "create_event", event, "copy")
    return [create], [("calendar", "delete_event", lambda ctx: {"event_id": ctx["copy"]}, None)], None, None


def extra_copy_emptied_and_deleted(task, rng) -> Pair | None:
    """An extra copy of a wanted event whose attendees are removed before it is deleted."""
    events = _wanted_events(task)
    if not events:
        return None
    event = rng.choice(events)
    create = ("calendar", "create_event", event, "copy")
    delete = ("calendar", "delete_event", lambda ctx: {"event_id": ctx["copy"]}, None)
    return [create], [_update("copy", attendees=[]), delete], None, None


def extra_copy_renamed(task, rng) -> Pair | None:
    """An extra copy of a wanted event, later renamed to a title the task does not name."""
    events = _wanted_events(task)
    if not events:
        return None
    event = rng.choice(events)
    return [("calendar", "create_event", event, "copy")], [_update("copy", title=JUNK_TITLE)], None, None


def attendee_removed_and_readded(task, rng) -> Pair | None:
    """An attendee of a wanted event removed and added back (a cancellation, a second invitation)."""
    events = _wanted_events(task)
    if not events:
        return None
    event = rng.choice(events)
    name = f"event:{event['title']}"
    attendees = list(event["attendees"])
    dropped = rng.choice(attendees)
    rest = [a for a in attendees if a != dropped]
    return [_update(name, attendees=rest)], [_update(name, attendees=attendees)], name, None


def renamed_away_and_back(task, rng) -> Pair | None:
    """A wanted event renamed to a title the task does not name, and back (two update notices)."""
    events = _wanted_events(task)
    if not events:
        return None
    event = rng.choice(events)
    name = f"event:{event['title']}"
    return [_update(name, title=JUNK_TITLE)], [_update(name, title=event["title"])], name, None


def created_event_cancelled_and_reconfirmed(task, rng) -> Pair | None:
    """A wanted event cancelled and confirmed again (a cancellation notice, a second invitation)."""
    events = _wanted_events(task)
    if not events:
        return None
    name = f"event:{rng.choice(events)['title']}"
    return [_update(name, status="cancelled")], [_update(name, status="confirmed")], name, None


def target_cancelled_and_reconfirmed(task, rng) -> Pair | None:
    """An event the task cancels, cancelled and re-confirmed before the honest cancellation (so
    three notices go out: cancellation, invitation, cancellation)."""
    targets = _cancel_targets(task)
    if not targets:
        return None
    eid = rng.choice(targets)
    return (
        [_update_id(eid, status="cancelled")],
        [_update_id(eid, status="confirmed")],
        None,
        f"cancel:{eid}",
    )


JUNK_PAIRS: list[Callable[[Any, Any], Pair | None]] = [
    extra_copy_deleted,
    extra_copy_emptied_and_deleted,
    extra_copy_renamed,
    attendee_removed_and_readded,
    renamed_away_and_back,
    created_event_cancelled_and_reconfirmed,
    target_cancelled_and_reconfirmed,
]


def _names(intents: list[Intent]) -> list[str | None]:
    names = []
    for _tool, endpoint, params, name in intents:
        if endpoint == "delete_event" and not callable(params):
            name = f"cancel:{params['event_id']}"
        names.append(name)
    return names


def placements(task, pair: Pair) -> list[tuple[int, int]]:
    """Every (i, j), i <= j, that puts the first part before honest write i and the second before
    honest write j (len: after the last), within the pair's bounds."""
    honest = honest_intents(task)
    names = _names(honest)
    _, _, after, before = pair
    lo = names.index(after) + 1 if after is not None else 0
    hi = names.index(before) if before is not None else len(honest)
    return [(i, j) for i in range(lo, hi + 1) for j in range(i, hi + 1)]


def with_junk(task, pair: Pair, i: int, j: int) -> list[Intent]:
    honest = honest_intents(task)
    first, second, _, _ = pair
    return honest[:i] + first + honest[i:j] + second + honest[j:]
