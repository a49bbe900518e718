"""The agent's actions as functions of a native tool-calling API (the `tools` harness, and the MCP face).

Every action has one function: each documented endpoint is `<tool>__<endpoint>` (a `call_tool`
whose params are the function's arguments), and the meta-actions are `inspect_schema`,
`retry_with_variant`, `report_drift` and `complete_task`, whose arguments are the action's
sub-object. Definitions are built from the documentation the agent is shown, so they go stale
exactly as that documentation does, and each endpoint's description is its documentation line
(`format.endpoint_line`): a model sees the same facts through either harness.

A model's function calls are read from `<tool_call>{"name": ..., "arguments": ...}</tool_call>`
blocks, the format of Qwen2.5-style chat templates and the form `api_client` gives an API's
structured `tool_calls`, so local and API models are read by one reader. `call_action` turns a
call into what the environment is handed:

- a known function: its action (the environment validates it as any action);
- a `<tool>__<endpoint>` name whose endpoint is not documented (any longer): the call still
  reaches the simulated API, which answers with its own error, as a JSON action naming that
  endpoint would; an unknown tool before the separator is an invalid action naming the tool;
- any other name: the action type of that name, which the environment rejects as unknown;
- a block that is not a JSON call, or arguments that are not JSON: an action of an unknown type
  that names the problem (`unreadable_action`), which the environment rejects with that name (the
  step counts as a parse failure). Never the unreadable text itself: text that is no call may
  still be a JSON action, which the environment would play.

No heavy imports: the MCP server and the policies share these definitions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemashift.env.actions import (
    CALL_TOOL,
    COMPLETE_TASK,
    INSPECT_SCHEMA,
    REPORT_DRIFT,
    RETRY_WITH_VARIANT,
    SUBOBJECT,
)
from schemashift.policies.llm.parser import MAX_CHARS, TOOL_CALL_BLOCK

#: between a tool and its endpoint in a function name (OpenAI allows [A-Za-z0-9_-] only)
ENDPOINT_SEPARATOR = "__"
#: documented parameter types as JSON schema types; other types stay unconstrained
JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}
META_FUNCTIONS = (INSPECT_SCHEMA, RETRY_WITH_VARIANT, REPORT_DRIFT, COMPLETE_TASK)


def function_name(tool: str, endpoint: str) -> str:
    return f"{tool}{ENDPOINT_SEPARATOR}{endpoint}"


def _type_schema(kind: Any) -> dict[str, Any]:
    if not isinstance(kind, str):
        return {}
    if kind.startswith("list[") and kind.endswith("]"):
        return {"type": "array", "items": _type_schema(kind[5:-1])}
    json_type = JSON_TYPES.get(kind)
    return {"type": json_type} if json_type else {}


def endpoint_schema(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema for an endpoint's params from its documentation entry."""
    params = doc.get("params") if isinstance(doc, Mapping) else None
    properties = {name: _type_schema(kind) for name, kind in (params or {}).items()}
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": True}
    required = [
        name for name in (doc.get("required") or () if isinstance(doc, Mapping) else ()) if name in properties
    ]
    if required:
        schema["required"] = required
    return schema


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def meta_functions(tool_names: Sequence[str], drift_kinds: Sequence[str]) -> list[dict[str, Any]]:
    """The meta-actions as functions; the allowed tools and drift kinds are their enums."""
    tool = {"type": "string", "enum": list(tool_names)}
    call = {
        "type": "object",
        "properties": {"tool": tool, "endpoint": {"type": "string"}, "params": {"type": "object"}},
        "required": ["tool", "endpoint", "params"],
    }
    return [
        _function(
            INSPECT_SCHEMA,
            "Read a tool's live schema, as it is now (one step).",
            {"type": "object", "properties": {"tool": tool}, "required": ["tool"]},
        ),
        _function(
            RETRY_WITH_VARIANT,
            "Repeat a failed call with a changed endpoint or params (one step).",
            call,
        ),
        _function(
            REPORT_DRIFT,
            "Report a schema change you noticed on a tool: its kind and what changed (one step).",
            {
                "type": "object",
                "properties": {
                    "tool": tool,
                    "drift_kind": {"type": "string", "enum": list(drift_kinds)},
                    "description": {"type": "string"},
                },
                "required": ["tool", "drift_kind", "description"],
            },
        ),
        _function(
            COMPLETE_TASK,
            "End the episode; the summary states the facts the task asked for.",
            {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
        ),
    ]


def function_definitions(
    docs: Mapping[str, Any] | None,
    tool_names: Sequence[str],
    drift_kinds: Sequence[str],
    describe: Callable[[str, Any], str],
) -> list[dict[str, Any]]:
    """The functions a model is offered: one per documented endpoint, described by `describe`
    (endpoint name, documentation entry) -> text, then the meta-actions."""
    functions = []
    for tool, endpoints in (docs or {}).items():
        if not isinstance(endpoints, Mapping):
            continue
        for endpoint, doc in endpoints.items():
            description = f"{tool}.{describe(endpoint, doc)}"
            functions.append(_function(function_name(tool, endpoint), description, endpoint_schema(doc)))
    return functions + meta_functions(tool_names, drift_kinds)


# -- calls as text ----------------------------------------------------------------------------------


def call_text(name: Any, arguments: Any) -> str:
    """One call as a Qwen2.5-style chat template writes it (arguments text that is not JSON is
    written as a string)."""
    return (
        f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"
    )


def action_call(action: Mapping[str, Any]) -> tuple[str, Any]:
    """(function name, arguments) of an action: the inverse of `call_action` for valid actions."""
    kind = action["type"]
    sub = action.get(SUBOBJECT.get(kind, ""))
    if kind == CALL_TOOL and isinstance(sub, Mapping):
        return function_name(sub["tool"], sub["endpoint"]), dict(sub.get("params") or {})
    return kind, dict(sub) if isinstance(sub, Mapping) else {}


def action_call_text(action: Mapping[str, Any]) -> str:
    """What a model is taught to emit for an action in the tools harness."""
    return call_text(*action_call(action))


@dataclass(frozen=True)
class FunctionCall:
    """One call read from a model's text: `arguments` is a dict when it decoded, else the text
    (or value) as given; `error` says why the call is unreadable, None when it is readable."""

    name: Any
    arguments: Any
    text: str
    error: str | None = None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_calls(text: str) -> list[FunctionCall]:
    """The calls in a model's output, in order (an unterminated last block counts: the token
    limit cut it)."""
    calls = []
    for match in TOOL_CALL_BLOCK.finditer(text[:MAX_CHARS] if isinstance(text, str) else ""):
        body = match.group(1)
        try:
            data = json.loads(body, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            calls.append(FunctionCall(None, body, match.group(0), f"the call is not JSON: {exc}"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            calls.append(FunctionCall(None, body, match.group(0), "the call has no function name"))
            continue
        arguments = data.get("arguments", data.get("parameters", {}))
        error = None
        if isinstance(arguments, str):
            try:
                arguments = (
                    json.loads(arguments, parse_constant=_refuse_constant) if arguments.strip() else {}
                )
            except (ValueError, RecursionError) as exc:
                error = f"the arguments are not JSON: {exc}"
        calls.append(FunctionCall(data["name"], arguments, match.group(0), error))
    return calls


def unreadable_action(reason: str) -> dict[str, str]:
    """An action the environment always rejects, whose unknown type says why: what a harness
    hands on for output it could not read as a call."""
    return {"type": reason}


#: a tools-harness turn that made no call
NO_CALL = "no function call (act only by calling the functions)"


def call_action(call: FunctionCall) -> tuple[Any, bool]:
    """(what the environment is handed, whether the call was unreadable): see the module text."""
    if call.error is not None:
        return unreadable_action(f"malformed function call: {call.error}"), True
    name, arguments = call.name, call.arguments
    tool, separator, endpoint = name.partition(ENDPOINT_SEPARATOR)
    if separator and name not in META_FUNCTIONS:
        return {
            "type": CALL_TOOL,
            SUBOBJECT[CALL_TOOL]: {"tool": tool, "endpoint": endpoint, "params": arguments},
        }, False
    if name in SUBOBJECT:
        return {"type": name, SUBOBJECT[name]: arguments}, False
    return {"type": name}, False
