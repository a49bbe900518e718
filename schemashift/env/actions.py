"""The agent's action vocabulary and its validation.

Actions keep the original SchemaShift JSON shape: a `type` plus one sub-object named after it,
for example `{"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "send_message",
"params": {...}}}`. Validation follows the original's rules (extra keys ignored, a missing
sub-object is allowed and makes the step a no-op) but reports every problem as an
`InvalidAction` that names it, instead of crashing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from schemashift.env.frozen import FrozenDict, freeze

CALL_TOOL = "call_tool"
INSPECT_SCHEMA = "inspect_schema"
RETRY_WITH_VARIANT = "retry_with_variant"
REPORT_DRIFT = "report_drift"
COMPLETE_TASK = "complete_task"

#: action type -> the name of the sub-object that carries its arguments
SUBOBJECT = {
    CALL_TOOL: "tool_call",
    INSPECT_SCHEMA: "inspect",
    RETRY_WITH_VARIANT: "retry",
    REPORT_DRIFT: "report",
    COMPLETE_TASK: "complete",
}
ACTION_TYPES = tuple(SUBOBJECT)
TOOL_CALL_TYPES = frozenset({CALL_TOOL, RETRY_WITH_VARIANT})


class InvalidAction(ValueError):
    """An action that cannot be read: malformed JSON, unknown type, tool or drift kind, bad fields."""


class Action:
    """A validated action. `present` is False when the type's sub-object was absent (a no-op step)."""

    __slots__ = (
        "type",
        "present",
        "tool",
        "endpoint",
        "params",
        "drift_kind",
        "description",
        "summary",
    )

    def __init__(
        self,
        type: str,
        present: bool,
        tool: str | None = None,
        endpoint: str | None = None,
        params: dict[str, Any] | None = None,
        drift_kind: str | None = None,
        description: str | None = None,
        summary: str | None = None,
    ) -> None:
        self.type = type
        self.present = present
        self.tool = tool
        self.endpoint = endpoint
        self.params = params
        self.drift_kind = drift_kind
        self.description = description
        self.summary = summary

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form: the type and its own sub-object only."""
        key = SUBOBJECT[self.type]
        if not self.present:
            return {"type": self.type}
        if self.type in TOOL_CALL_TYPES:
            sub: dict[str, Any] = {"tool": self.tool, "endpoint": self.endpoint, "params": self.params}
        elif self.type == INSPECT_SCHEMA:
            sub = {"tool": self.tool}
        elif self.type == REPORT_DRIFT:
            sub = {"tool": self.tool, "drift_kind": self.drift_kind, "description": self.description}
        else:
            sub = {"summary": self.summary}
        return {"type": self.type, key: sub}

    def frozen(self) -> FrozenDict:
        """`to_dict()` as read-only data (see schemashift.env.frozen), built directly: the step
        record's action, shared with the history and every view."""
        params = self.params
        if type(params) is not FrozenDict and self.type in TOOL_CALL_TYPES and self.present:
            params = freeze(params)
        return self._build(params)

    def _build(self, params: FrozenDict | None) -> FrozenDict:
        key = SUBOBJECT[self.type]
        if not self.present:
            return FrozenDict(type=self.type)
        if self.type in TOOL_CALL_TYPES:
            sub = FrozenDict(tool=self.tool, endpoint=self.endpoint, params=params)
        elif self.type == INSPECT_SCHEMA:
            sub = FrozenDict(tool=self.tool)
        elif self.type == REPORT_DRIFT:
            sub = FrozenDict(tool=self.tool, drift_kind=self.drift_kind, description=self.description)
        else:
            sub = FrozenDict(summary=self.summary)
        return FrozenDict({"type": self.type, key: sub})

    def __repr__(self) -> str:
        return f"Action({self.to_dict()!r})"


#: a JSON escape of a UTF-16 surrogate, or the surrogate itself (as text or as UTF-8 bytes)
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def load_action_json(text: str | bytes) -> Any:
    """Decode one action's JSON text, turning decoder errors into `InvalidAction`: malformed
    text, an integer of over 4,300 digits, and strings with a lone surrogate, which no record
    (nor a server's reply) could hold."""
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise InvalidAction(f"malformed action JSON: {exc}") from None
    except RecursionError:
        raise InvalidAction("malformed action JSON: nested too deeply") from None
    try:
        lone = holds_lone_surrogate(text, value)
    except RecursionError:
        raise InvalidAction("malformed action JSON: nested too deeply") from None
    if lone:
        raise InvalidAction("malformed action JSON: a string holds a lone UTF-16 surrogate")
    return value


def holds_lone_surrogate(text: str | bytes, value: Any) -> bool:
    """Whether `value`, decoded from the JSON `text`, holds a string with a lone UTF-16 surrogate
    (which no UTF-8 record or reply can carry); a scan of `text` spares the re-encoding when it
    shows no surrogate at all."""
    binary = isinstance(text, bytes)
    if text.isascii() and (b"\\u" if binary else "\\u") not in text:
        return False  # the usual case, told at C speed: no surrogate, nor an escape of one
    if not (_SURROGATE_BYTES if binary else _SURROGATE).search(text):
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_action(data: Any, tools: Collection[str], drift_kinds: Collection[str]) -> Action:
    """Validate an action given as a dict (or JSON text) against the ruleset's vocabulary."""
    if type(data) is not dict and type(data) is not FrozenDict:
        if isinstance(data, Action):
            return data
        if isinstance(data, (str, bytes)):
            data = load_action_json(data)
        if not isinstance(data, dict):
            raise InvalidAction(f"an action must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    try:
        key = SUBOBJECT[kind]
    except (KeyError, TypeError):  # not a type's name, or not even hashable
        if "type" not in data:
            raise InvalidAction(f"action has no 'type'; expected one of {list(ACTION_TYPES)}") from None
        raise InvalidAction(f"unknown action type {kind!r}; expected one of {list(ACTION_TYPES)}") from None
    if len(data) > 1 + (key in data):  # a key beside `type` and this type's own sub-object
        # Sub-objects of other types are not read, but they are validated as the original did.
        for other_kind, other_key in SUBOBJECT.items():
            if other_key != key and data.get(other_key) is not None:
                _PARSERS[other_kind](other_key, data[other_key], tools, drift_kinds)
    sub = data.get(key)
    if sub is None:
        return Action(kind, False)
    return _PARSERS[kind](key, sub, tools, drift_kinds)


def _object(key: str, sub: Any) -> dict[str, Any]:
    if not isinstance(sub, dict):
        raise InvalidAction(f"'{key}' must be an object, got {type(sub).__name__}")
    return sub


def _string(key: str, sub: dict[str, Any], field: str) -> str:
    value = sub.get(field)
    if value is None:
        raise InvalidAction(f"'{key}.{field}' is required")
    if not isinstance(value, str):
        raise InvalidAction(f"'{key}.{field}' must be a string, got {type(value).__name__}")
    return value


def _tool(key: str, sub: dict[str, Any], tools: Collection[str]) -> str:
    tool = sub.get("tool")
    if not isinstance(tool, str) or tool not in tools:
        _string(key, sub, "tool")
        raise InvalidAction(f"unknown tool {tool!r} in '{key}.tool'; expected one of {sorted(tools)}")
    return tool


def _parse_call(key, sub, tools, drift_kinds) -> Action:
    if not isinstance(sub, dict):
        _object(key, sub)
    tool = sub.get("tool")
    if not isinstance(tool, str) or tool not in tools:
        _tool(key, sub, tools)
    endpoint = sub.get("endpoint")
    if not isinstance(endpoint, str):
        _string(key, sub, "endpoint")
    params = sub.get("params")
    if params is None:
        if key == "retry":
            raise InvalidAction(f"'{key}.params' is required")
        params = {}
    elif not isinstance(params, dict):
        raise InvalidAction(f"'{key}.params' must be an object, got {type(params).__name__}")
    kind = CALL_TOOL if key == "tool_call" else RETRY_WITH_VARIANT
    return Action(kind, True, tool, endpoint, params)


def _parse_inspect(key, sub, tools, drift_kinds) -> Action:
    sub = _object(key, sub)
    return Action(INSPECT_SCHEMA, True, tool=_tool(key, sub, tools))


def _parse_report(key, sub, tools, drift_kinds) -> Action:
    sub = _object(key, sub)
    tool = _tool(key, sub, tools)
    kind = _string(key, sub, "drift_kind")
    if kind not in drift_kinds:
        raise InvalidAction(
            f"unknown drift kind {kind!r} in '{key}.drift_kind'; expected one of {sorted(drift_kinds)}"
        )
    description = _string(key, sub, "description")
    return Action(REPORT_DRIFT, True, tool=tool, drift_kind=kind, description=description)


def _parse_complete(key, sub, tools, drift_kinds) -> Action:
    sub = _object(key, sub)
    return Action(COMPLETE_TASK, True, summary=_string(key, sub, "summary"))


_PARSERS = {
    CALL_TOOL: _parse_call,
    INSPECT_SCHEMA: _parse_inspect,
    RETRY_WITH_VARIANT: _parse_call,
    REPORT_DRIFT: _parse_report,
    COMPLETE_TASK: _parse_complete,
}
