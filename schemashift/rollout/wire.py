"""Observation deltas for the server's WebSocket sessions (standard library only).

Consecutive observations share most of their content (documentation, task text, most of the
history window); the core builds those parts once and, with `Environment(..., snapshots=False)`
as the server builds it, hands out the same objects until they change. A session that asks for
deltas gets, after its first observation, only what changed: keys whose value is a new object,
and for lists that slid (the history window) how many items fell off the front and the items
appended. The client rebuilds the full observation, equal to the one the server built.

Delta frame: {"full": view} or {"set": {key: value}, "shift": {key: [dropped, appended]},
"drop": [keys gone], "order": [keys] (only when the key order changed)}.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


class ViewEncoder:
    """Server side: remembers the last observation sent and encodes the next one against it."""

    def __init__(self) -> None:
        self.previous: dict[str, Any] | None = None

    def encode(self, view: dict[str, Any], full: bool = False) -> dict[str, Any]:
        previous, self.previous = self.previous, view
        if previous is None or full:
            return {"full": view}
        changed: dict[str, Any] = {}
        shifted: dict[str, list[Any]] = {}
        for key, value in view.items():
            old = previous.get(key, _MISSING)
            if old is value:
                continue
            # Lists of either kind: plain, or read-only (the history window a ruleset built frozen).
            if isinstance(value, list) and isinstance(old, list):
                slid = _slide(old, value)
                if slid is not None:
                    shifted[key] = slid
                    continue
            changed[key] = value
        frame: dict[str, Any] = {"set": changed}
        if shifted:
            frame["shift"] = shifted
        keys = list(view)
        if keys == list(previous):  # the usual case: the same keys in the same order
            return frame
        gone = [key for key in previous if key not in view]
        if gone:
            frame["drop"] = gone
        if keys != [key for key in previous if key in view] + [k for k in view if k not in previous]:
            frame["order"] = keys
        return frame


class ViewDecoder:
    """Client side: rebuilds full observations from delta frames."""

    def __init__(self) -> None:
        self.previous: dict[str, Any] | None = None

    def decode(self, frame: dict[str, Any]) -> dict[str, Any]:
        if "full" in frame:
            view = frame["full"]
        else:
            previous = self.previous
            if previous is None:
                raise ValueError("an observation delta arrived before any full observation")
            # The previous keys in their places, less the dropped ones; new keys at the end in
            # the order they were set; or the order the frame gives.
            view = dict(previous)
            for key in frame.get("drop", ()):
                view.pop(key, None)
            view.update(frame.get("set", {}))
            for key, (dropped, appended) in frame.get("shift", {}).items():
                view[key] = previous[key][dropped:] + appended
            order = frame.get("order")
            if order:
                view = {key: view[key] for key in order}
        self.previous = view
        return view


def _slide(old: list[Any], new: list[Any]) -> list[Any] | None:
    """[dropped, appended] when `new` is `old` minus `dropped` leading items plus `appended`
    (items compared by identity), else None."""
    if not old or not new:
        return None
    first = new[0]
    for dropped, item in enumerate(old):
        if item is first:
            kept = len(old) - dropped
            if kept > len(new) or any(a is not b for a, b in zip(old[dropped:], new, strict=False)):
                return None
            return [dropped, new[kept:]]
    return None
