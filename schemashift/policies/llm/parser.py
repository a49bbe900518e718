"""Reading one action out of a model's text. Never raises.

Models wrap their JSON in many ways: plain, in code fences, with prose around it, several
objects in one answer, chat-template tool-call tags (`<tool_call>{"name": ..., "arguments":
...}</tool_call>`), OpenAI-style `{"function": {"name", "arguments"}}` objects, the
sub-object's fields flattened into the top level, or cut off by the token limit. `parse_output`
looks at tool-call tags first, then fenced blocks, then the whole text; within each it decodes
every top-level JSON object in order and takes the first one that is a valid action for the
ruleset's vocabulary (or, when none validates, the first that has a known action type, so that
the environment names the exact problem). A truncated final object is closed and accepted
only when it then validates (`repaired`).

`legacy_parse` reproduces the original harness's parser (legacy spec 9.3) for `--harness legacy`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from schemashift.env.actions import ACTION_TYPES, SUBOBJECT, InvalidAction, parse_action

#: longest text searched; model outputs are far shorter, this bounds the work on garbage
MAX_CHARS = 50_000
#: JSON objects decoded per text before giving up
MAX_OBJECTS = 200

#: a `<tool_call>` block (an unterminated one runs to the end: the token limit cut it)
TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)(?:```|$)", re.S)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class ParseResult:
    """`action` is the extracted action dict, or None with `error` saying why."""

    action: dict[str, Any] | None
    error: str | None = None
    repaired: bool = False
    valid: bool = False  # the action passed validation against the vocabulary

    @property
    def ok(self) -> bool:
        return self.action is not None


def parse_output(
    text: Any, tools: Collection[str] | None = None, drift_kinds: Collection[str] | None = None
) -> ParseResult:
    """The action in a model's output. Validation uses `tools`/`drift_kinds` when given."""
    try:
        return _parse(_as_text(text), tools, drift_kinds)
    except Exception as exc:  # noqa: BLE001 - the contract is that parsing never raises
        return ParseResult(None, f"parser failure: {type(exc).__name__}: {exc}")


def _as_text(text: Any) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    return "" if text is None else str(text)


def _parse(text: str, tools, drift_kinds) -> ParseResult:
    text = text[:MAX_CHARS]
    if not text.strip():
        return ParseResult(None, "empty output")
    segments = [m.group(1) for m in TOOL_CALL_BLOCK.finditer(text)]
    segments += [m.group(1) for m in _FENCE.finditer(text)]
    segments.append(text)
    fallback: dict[str, Any] | None = None
    objects = 0
    for segment in segments:
        for obj in _objects(segment):
            objects += 1
            for candidate in _candidates(obj):
                action = _validate(candidate, tools, drift_kinds)
                if action is not None:
                    return ParseResult(action, valid=True)
                if fallback is None:
                    fallback = candidate
            if objects >= MAX_OBJECTS:
                break
    if fallback is not None and tools is not None:
        return ParseResult(fallback)
    repaired = _repair_tail(text)
    if repaired is not None:
        for candidate in _candidates(repaired):
            action = _validate(candidate, tools, drift_kinds)
            if action is not None:
                return ParseResult(action, repaired=True, valid=True)
    if fallback is not None:
        return ParseResult(fallback)
    if objects:
        return ParseResult(None, f"no action among {objects} JSON object(s)")
    if "{" in text:
        return ParseResult(None, "malformed or truncated JSON")
    return ParseResult(None, "no JSON object in output")


def _objects(text: str) -> Iterator[Any]:
    """Every top-level JSON object in `text`, in order (strings with braces are handled)."""
    i = text.find("{")
    while i != -1:
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        yield obj
        i = text.find("{", end)


def _candidates(obj: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Action dicts an object may stand for, most literal first."""
    if not isinstance(obj, dict) or depth > 3:
        return
    kind = obj.get("type")
    if isinstance(kind, str) and kind in SUBOBJECT:
        key = SUBOBJECT[kind]
        if obj.get(key) is None and len(obj) > 1:
            fields = {k: v for k, v in obj.items() if k != "type" and k not in SUBOBJECT.values()}
            if fields:
                yield {"type": kind, key: fields}
                return
        yield obj
        return
    name = obj.get("name")
    if isinstance(name, str) and name in SUBOBJECT:
        args = obj.get("arguments", obj.get("parameters", obj.get("args")))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = None
        if isinstance(args, dict):
            yield {"type": name, SUBOBJECT[name]: args}
            return
    for key in ("action", "function", "tool_call", "next_action"):
        inner = obj.get(key)
        if isinstance(inner, dict):
            yield from _candidates(inner, depth + 1)
    for inner in obj.get("tool_calls") or []:
        yield from _candidates(inner, depth + 1)


def _validate(candidate: dict[str, Any], tools, drift_kinds) -> dict[str, Any] | None:
    if tools is None:
        return candidate if candidate.get("type") in ACTION_TYPES else None
    try:
        action = parse_action(candidate, tools, drift_kinds or ())
    except InvalidAction:
        return None
    return action.to_dict()


class _Strings:
    """Whether a JSON text read one character at a time is inside a string literal."""

    __slots__ = ("inside", "escape")

    def __init__(self) -> None:
        self.inside = self.escape = False

    def structural(self, ch: str, may_open: bool = True) -> bool:
        """Read `ch`; True where it stands outside every string literal (a quote opens one only
        where `may_open`)."""
        if self.inside:
            if self.escape:
                self.escape = False
            elif ch == "\\":
                self.escape = True
            elif ch == '"':
                self.inside = False
            return False
        if ch == '"' and may_open:
            self.inside = True
            return False
        return True


def _repair_tail(text: str) -> Any:
    """Close the last unterminated JSON object of a truncated output, or None."""
    start = _last_open_object(text)
    if start is None:
        return None
    fragment = text[start:]
    stack: list[str] = []
    strings = _Strings()
    for ch in fragment:
        if not strings.structural(ch):
            continue
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
    if not stack:
        return None
    if strings.escape:
        fragment = fragment[:-1]
    if strings.inside:
        fragment += '"'
    for attempt in (fragment, _drop_dangling(fragment)):
        if attempt is None:
            continue
        try:
            return json.loads(attempt + "".join(reversed(stack)))
        except (ValueError, RecursionError):
            continue
    return None


def _brace_spans(text: str, strings: _Strings | None = None) -> Iterator[tuple[int, int | None]]:
    """(start, end) of each top-level `{...}` a brace-depth counter finds in `text`, in order, then
    (start, None) for the outermost one left open, if any. With `strings`, braces inside string
    literals do not count (a quote opens a string only inside an object); without, every brace does.
    """
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if strings is not None and not strings.structural(ch, may_open=depth > 0):
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                yield start, i + 1
    if depth:
        yield start, None


def _last_open_object(text: str) -> int | None:
    """Where the outermost object that is never closed begins (strings count only inside one)."""
    last = None
    for span in _brace_spans(text, _Strings()):
        last = span
    return last[0] if last is not None and last[1] is None else None


_DANGLING = re.compile(r'(?:,\s*"(?:[^"\\]|\\.)*"\s*:?\s*|,\s*|:\s*)$')


def _drop_dangling(fragment: str) -> str | None:
    """The fragment without a trailing comma, key without value, or colon."""
    trimmed = _DANGLING.sub("", fragment.rstrip())
    return trimmed if trimmed != fragment else None


# -- the original harness's parser ----------------------------------------------------------------

_LEGACY_FENCE = re.compile(r"```(?:json)?\s*|\s*```")


def legacy_parse(text: Any, tools: Collection[str], drift_kinds: Collection[str]) -> ParseResult:
    """Strip fences, scan with a brace-depth counter (not string-aware, like the original) and take
    the first chunk that decodes and validates."""
    try:
        raw = _LEGACY_FENCE.sub("", _as_text(text)[:MAX_CHARS])
        for start, end in _brace_spans(raw):
            if end is None:
                break
            try:
                data = json.loads(raw[start:end])
                action = parse_action(data, tools, drift_kinds)
            except (ValueError, RecursionError, InvalidAction):
                continue
            return ParseResult(action.to_dict(), valid=True)
        return ParseResult(None, "no valid action JSON")
    except Exception as exc:  # noqa: BLE001 - the contract is that parsing never raises
        return ParseResult(None, f"parser failure: {type(exc).__name__}: {exc}")
