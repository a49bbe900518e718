"""The one interaction format between a model and the environment, for evaluation and training.

A `Conversation` turns an episode into chat messages: a system prompt with the action grammar
and the allowed values, a task message (task, success criteria, limits and the tool
documentation the ruleset exposes), then one (assistant, user) pair per step, where the
assistant message is the model's own text and the user message shows the step's outcome:
response status, body and error message, feedback, drift notices, and the documentation again
whenever it changed. Actions are our own JSON objects (the Action shape of
`schemashift.env.actions`), read back by `schemashift.policies.llm.parser`. The rendered
messages go through the model's chat template; nothing here depends on a tokenizer except the
token counter that keeps the history within budget.

`LegacyPrompt` reproduces the original harness's stateless prompt (legacy spec 9.3) with the
same interface, so `--harness legacy` swaps the format and nothing else.

Bump FORMAT_VERSION whenever the rendered text changes: cached responses and trained adapters
are tied to it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from schemashift.env.actions import ACTION_TYPES, SUBOBJECT
from schemashift.policies.llm.functions import (
    FunctionCall,
    function_definitions,
    read_calls,
)
from schemashift.policies.llm.parser import TOOL_CALL_BLOCK

FORMAT_VERSION = 2
#: where a tools-harness prompt carries its function definitions: on its system message, so that
#: whatever keys, counts or renders a prompt sees them
TOOLS_FIELD = "tools"

Message = dict[str, Any]
#: counts the prompt tokens of a message list (exactly, through the chat template, or estimated)
TokenCounter = Callable[[Sequence[Message]], int]

#: characters of a response body shown before it is cut (bodies of list endpoints grow long)
BODY_CHARS = 1200
#: characters per token of the estimate used when no tokenizer is at hand
CHARS_PER_TOKEN = 4


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A tokenizer-free estimate (for API models whose tokenizer is not local); function
    definitions and structured calls count by their JSON text."""
    chars = 0
    for message in messages:
        chars += len(message.get("content") or "") + 8
        extra = {k: v for k, v in message.items() if k not in ("role", "content")}
        if extra:
            chars += len(json.dumps(extra, ensure_ascii=False))
    return chars // CHARS_PER_TOKEN + 1


def action_text(action: dict[str, Any]) -> str:
    """The assistant text of an action: exactly what a model is trained to emit."""
    return json.dumps(action, ensure_ascii=False)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


#: the agent's job, as every harness but the legacy one states it
AGENT_JOB = (
    "You are an autonomous workflow agent. You complete tasks by calling the tools of simulated "
    "enterprise APIs. Their schemas can change during the episode (renamed fields, deprecated "
    "endpoints, new required parameters, rate limits, removed tools): read every response, inspect "
    "a tool's schema when a call fails, adapt your calls and report each change you notice."
)


def system_prompt(tool_names: Sequence[str], drift_kinds: Sequence[str]) -> str:
    examples = {
        "call_tool": (
            '{"type": "call_tool", "tool_call": {"tool": TOOL, "endpoint": ENDPOINT, "params": {...}}}'
        ),
        "inspect_schema": '{"type": "inspect_schema", "inspect": {"tool": TOOL}}',
        "retry_with_variant": (
            '{"type": "retry_with_variant", "retry": {"tool": TOOL, "endpoint": ENDPOINT, "params": {...}}}'
        ),
        "report_drift": (
            '{"type": "report_drift", "report": {"tool": TOOL, "drift_kind": KIND, "description": TEXT}}'
        ),
        "complete_task": '{"type": "complete_task", "complete": {"summary": TEXT}}',
    }
    grammar = "\n".join(examples[kind] for kind in ACTION_TYPES)
    return (
        AGENT_JOB + "\n\n"
        "Answer every turn with exactly one JSON object, your next action, and nothing else. Actions:\n"
        f"{grammar}\n"
        f"TOOL is one of: {', '.join(tool_names)}.\n"
        f"KIND is one of: {', '.join(drift_kinds)}.\n"
        "ENDPOINT and params come from the tool documentation. retry_with_variant repeats a failed "
        "call with changed endpoint or params. complete_task ends the episode; its summary states the "
        "facts the task asked for."
    )


def render_documentation(docs: dict[str, Any] | None) -> str:
    """Tool documentation, one line per endpoint: signature, required params, response, errors."""
    if not docs:
        return "(no tools available)"
    lines = []
    for tool, endpoints in docs.items():
        lines.append(f"{tool}:")
        if not isinstance(endpoints, dict):
            lines.append(f"  {_compact(endpoints)}")
            continue
        for name, schema in endpoints.items():
            lines.append(f"  {endpoint_line(name, schema)}")
    return "\n".join(lines)


_KNOWN_SCHEMA_KEYS = ("name", "params", "required", "response_shape", "error_codes")


def endpoint_line(name: str, schema: Any) -> str:
    """One endpoint's documentation: `name(param: type, ...) required: ... -> field: type | errors: ...`."""
    if not isinstance(schema, dict) or not isinstance(schema.get("params", {}), dict):
        return f"{name}: {_compact(schema)}"
    params = ", ".join(f"{p}: {t}" for p, t in schema.get("params", {}).items())
    line = f"{name}({params})"
    required = schema.get("required")
    if required:
        line += f" required: {', '.join(map(str, required))}"
    shape = schema.get("response_shape")
    if isinstance(shape, dict) and shape:
        line += " -> " + ", ".join(f"{k}: {v}" for k, v in shape.items())
    codes = schema.get("error_codes")
    if isinstance(codes, dict):
        errors = [f"{code} {meaning}" for code, meaning in codes.items() if str(code) != "200"]
        if errors:
            line += f" | errors: {', '.join(errors)}"
    extra = {k: v for k, v in schema.items() if k not in _KNOWN_SCHEMA_KEYS}
    if extra:
        line += f" | {_compact(extra)}"
    return line


def render_task(observation: dict[str, Any], documentation: bool = True) -> str:
    """The task message; without `documentation` where the tool documentation is shown as
    function definitions instead (the tools harness)."""
    criteria = observation.get("success_criteria") or []
    parts = [f"TASK: {observation.get('task_description', '')}"]
    if criteria:
        parts.append("SUCCESS CRITERIA:\n" + "\n".join(f"- {c}" for c in criteria))
    parts.append(
        f"LIMITS: at most {observation.get('max_steps')} steps; "
        f"token budget {observation.get('token_budget_remaining')}."
    )
    if documentation:
        parts.append("TOOL DOCUMENTATION:\n" + render_documentation(observation.get("tool_schemas")))
    return "\n\n".join(parts)


def _response_lines(response: Any) -> list[str]:
    if response is None:
        return ["RESPONSE: none (no tool was called)"]
    if not isinstance(response, dict):
        return [f"RESPONSE: {_compact(response)}"]
    state = "ok" if response.get("ok") else "error"
    lines = [f"RESPONSE: status {response.get('status')} {state}"]
    if response.get("error"):
        lines.append(f"ERROR: {response['error']}")
    body = response.get("body")
    if body is not None:
        text = _compact(body)
        if len(text) > BODY_CHARS:
            text = f"{text[:BODY_CHARS]}... ({len(text) - BODY_CHARS} more characters)"
        lines.append(f"BODY: {text}")
    return lines


def step_summary(action_text_: str, observation: dict[str, Any]) -> str:
    """One line for a step whose turn was dropped from the history."""
    response = observation.get("last_response")
    action = observation.get("history", [{}])[-1].get("action") if observation.get("history") else None
    if isinstance(action, dict):
        sub = action.get(SUBOBJECT.get(action.get("type"), ""), None)
        what = str(action.get("type"))
        if isinstance(sub, dict) and sub.get("tool"):
            what += f" {sub['tool']}" + (f".{sub['endpoint']}" if sub.get("endpoint") else "")
    else:
        what = f"output {action_text_[:40]!r}"
    status = response.get("status") if isinstance(response, dict) else None
    return f"step {observation.get('step')}: {what} -> {status if status is not None else 'no call'}"


class Conversation:
    """An episode as chat messages for the default harness.

    `messages()` is the prompt for the next action; `add_turn(model_text, observation)` appends
    the model's output and what the environment answered. The system prompt and the task are
    always kept; when `count_tokens` says the prompt exceeds `max_prompt_tokens`, the oldest
    turns are replaced by a one-line summary each, in one block (`messages`).
    """

    #: the share of the budget a compacted prompt fits in (`messages`)
    COMPACT_TO = 0.75

    def __init__(
        self,
        tool_names: Sequence[str],
        drift_kinds: Sequence[str],
        observation: dict[str, Any],
        *,
        max_prompt_tokens: int | None = None,
        count_tokens: TokenCounter = estimate_tokens,
    ) -> None:
        self.system = self.system_prompt(tool_names, drift_kinds)
        self.task = self.task_text(observation)
        self.max_prompt_tokens = max_prompt_tokens
        self.count_tokens = count_tokens
        self.turns: list[tuple[str, str, str]] = []  # (model text, observation text, summary line)
        self._shown_docs = observation.get("tool_schemas")
        self._shown_drifts = len(observation.get("drift_events_visible") or [])
        self._shown_state = observation.get("known_state")
        self.dropped = 0

    @staticmethod
    def system_prompt(tool_names: Sequence[str], drift_kinds: Sequence[str]) -> str:
        return system_prompt(tool_names, drift_kinds)

    @staticmethod
    def task_text(observation: dict[str, Any]) -> str:
        return render_task(observation)

    @classmethod
    def for_ruleset(cls, ruleset: Any, observation: dict[str, Any], **kwargs: Any) -> Conversation:
        return cls(ruleset.tool_names, ruleset.drift_kinds, observation, **kwargs)

    def render_observation(self, observation: dict[str, Any]) -> str:
        lines = [f"STEP {observation.get('step')} of {observation.get('max_steps')}"]
        lines += _response_lines(observation.get("last_response"))
        if observation.get("feedback"):
            lines.append(f"FEEDBACK: {observation['feedback']}")
        drifts = observation.get("drift_events_visible") or []
        if len(drifts) > self._shown_drifts:
            lines.append("DRIFT NOTICES: " + _compact(drifts[self._shown_drifts :]))
        self._shown_drifts = len(drifts)
        state = observation.get("known_state")
        if state and state != self._shown_state:
            lines.append(f"STATE: {_compact(state)}")
        self._shown_state = state
        docs = observation.get("tool_schemas")
        if docs != self._shown_docs:
            changed = {
                tool: endpoints
                for tool, endpoints in (docs or {}).items()
                if (self._shown_docs or {}).get(tool) != endpoints
            }
            removed = sorted(set(self._shown_docs or {}) - set(docs or {}))
            text = render_documentation(changed) if changed else ""
            if removed:
                text += ("\n" if text else "") + f"removed tools: {', '.join(removed)}"
            lines.append("TOOL DOCUMENTATION CHANGED:\n" + text)
            self._shown_docs = docs
        if not observation.get("done"):
            left = (observation.get("max_steps") or 0) - (observation.get("step") or 0)
            lines.append(
                f"{left} steps left; token budget {observation.get('token_budget_remaining')}. Next action?"
            )
        return "\n".join(lines)

    def add_turn(self, model_text: str, observation: dict[str, Any]) -> None:
        self.turns.append(
            (model_text, self.render_observation(observation), step_summary(model_text, observation))
        )

    def _build(self, first_kept: int) -> list[Message]:
        task = self.task
        if first_kept:
            summaries = [summary for _, _, summary in self.turns[:first_kept]]
            task += "\n\nEARLIER STEPS (summarised):\n" + "\n".join(summaries)
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": task}]
        for model_text, observation_text, _ in self.turns[first_kept:]:
            messages.append({"role": "assistant", "content": model_text})
            messages.append({"role": "user", "content": observation_text})
        return messages

    def messages(self) -> list[Message]:
        """The prompt for the next action, within the token budget where it can be.

        Over budget, the oldest turns are summarised until the prompt fits in `COMPACT_TO` of
        the budget, and they stay summarised: the next prompts extend this one until it is over
        budget again. Summarising one more turn at every step instead would change the task
        message at every step, and a model would recompute its whole prompt each turn (most of
        the time of a CPU evaluation whose episodes run long)."""
        if self.max_prompt_tokens is None:
            self.dropped = 0
            return self._build(0)
        first_kept = self.dropped
        messages = self._build(first_kept)
        if self.count_tokens(messages) <= self.max_prompt_tokens:
            return messages
        target = int(self.max_prompt_tokens * self.COMPACT_TO)
        while first_kept < len(self.turns) - 1 and self.count_tokens(messages) > target:
            first_kept += 1
            messages = self._build(first_kept)
        self.dropped = first_kept
        return messages


class LegacyPrompt:
    """The original harness: one stateless user message per step (legacy spec 9.3).

    It hides response bodies, errors, earlier params, state, feedback and the drift kinds; it is
    here to compare against, not to train on.
    """

    def __init__(
        self, tool_names: Sequence[str], drift_kinds: Sequence[str], observation: dict[str, Any], **_
    ):
        self.observation = observation
        self.dropped = 0

    @classmethod
    def for_ruleset(cls, ruleset: Any, observation: dict[str, Any], **kwargs: Any) -> LegacyPrompt:
        return cls(ruleset.tool_names, ruleset.drift_kinds, observation, **kwargs)

    def add_turn(self, model_text: str, observation: dict[str, Any]) -> None:
        self.observation = observation

    def messages(self) -> list[Message]:
        return [{"role": "user", "content": legacy_prompt(self.observation)}]


def legacy_prompt(obs: dict[str, Any]) -> str:
    criteria = "\n".join(f"- {c}" for c in obs.get("success_criteria") or [])
    schemas = obs.get("tool_schemas")
    history = obs.get("history") or []
    if history:
        recent = "\n".join(
            f"Step {h.get('step')}: {(h.get('action') or {}).get('type')} -> "
            f"status={((h.get('response') or {}).get('status')) or 'N/A'}, "
            f"ok={((h.get('response') or {}).get('ok')) or False}"
            for h in history[-3:]
        )
    else:
        recent = "(no history yet)"
    return (
        "You are an autonomous workflow agent. Complete the task using tools.\n\n"
        f"TASK: {obs.get('task_description', '')}\n\n"
        f"SUCCESS CRITERIA:\n{criteria}\n\n"
        f"CURRENT TOOL SCHEMAS:\n{json.dumps(schemas, indent=2) if schemas else '{}'}\n\n"
        f"RECENT HISTORY (last {len(history)} steps):\n{recent}\n\n"
        "AVAILABLE ACTIONS:\n"
        "- call_tool(tool, endpoint, params)\n"
        "- inspect_schema(tool)\n"
        "- retry_with_variant(tool, endpoint, params)\n"
        "- report_drift(tool, drift_kind, description)\n"
        "- complete_task(summary)\n\n"
        "IMPORTANT: Output ONLY a JSON object matching the Action schema. No explanation, no markdown, "
        "no code fences.\n\n"
        "Example:\n"
        '{"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "send_message", "params": '
        '{"to": "x@y.com", "subject": "Hi", "body": "Hello"}}}\n\n'
        "Your next action:"
    )


def tools_system_prompt(tool_names: Sequence[str], drift_kinds: Sequence[str]) -> str:
    return (
        AGENT_JOB + "\n\n"
        "Act only by calling the functions you are given; every call is one step. A function named "
        "TOOL__ENDPOINT calls that endpoint of that tool as the documentation at the start of the "
        "episode describes it (its description is that documentation); an endpoint that is no longer "
        "documented can still be called by its name. inspect_schema, retry_with_variant, report_drift "
        "and complete_task are the other actions. Several calls in one turn run in the order given, "
        "each a step, until the episode ends; a turn without a function call is an invalid step.\n"
        f"TOOL is one of: {', '.join(tool_names)}.\n"
        f"KIND is one of: {', '.join(drift_kinds)}.\n"
        "retry_with_variant repeats a failed call with changed endpoint or params. complete_task ends "
        "the episode; its summary states the facts the task asked for."
    )


def call_id(turn: int, position: int) -> str:
    """The id of a turn's n-th call: ours, not the API's, so that prompts (and cache keys) do not
    depend on ids a server draws."""
    return f"call_{turn}_{position}"


#: the name an unreadable call (a block that is not a JSON call) is echoed under
UNREADABLE_CALL = "unreadable_call"


class ToolConversation(Conversation):
    """An episode as chat messages for native tool calling (the `tools` harness).

    The system prompt states the job and carries the function definitions (`TOOLS_FIELD`); the task
    message is the default harness's without the documentation, which the function descriptions
    carry. A turn is the model's message, its calls read back as structured `tool_calls` (ids
    `call_id`), then one `tool` message per call that ran, holding exactly what the default
    harness shows of that step (`render_observation`); a turn without a call is answered by a user
    message instead. The definitions follow the documentation the agent is shown: when it changes,
    the next prompt offers the changed functions (and the step's answer says what changed).
    """

    def __init__(
        self,
        tool_names: Sequence[str],
        drift_kinds: Sequence[str],
        observation: dict[str, Any],
        **options: Any,
    ) -> None:
        super().__init__(tool_names, drift_kinds, observation, **options)
        self._vocabulary = (tuple(tool_names), tuple(drift_kinds))
        self.functions = self._functions(observation)
        self.turns: list[tuple[list[Message], list[str]]] = []  # (the turn's messages, summary lines)

    @staticmethod
    def system_prompt(tool_names: Sequence[str], drift_kinds: Sequence[str]) -> str:
        return tools_system_prompt(tool_names, drift_kinds)

    @staticmethod
    def task_text(observation: dict[str, Any]) -> str:
        # the functions carry the documentation
        return render_task(observation, documentation=False)

    def _functions(self, observation: dict[str, Any]) -> list[dict[str, Any]]:
        return function_definitions(observation.get("tool_schemas"), *self._vocabulary, endpoint_line)

    @staticmethod
    def _structured(call: FunctionCall, turn: int, position: int) -> dict[str, Any]:
        name = call.name if isinstance(call.name, str) else UNREADABLE_CALL
        function = {"name": name, "arguments": call.arguments}
        return {"id": call_id(turn, position), "type": "function", "function": function}

    def add_turn(self, model_text: str, *observations: dict[str, Any]) -> None:
        """The model's turn and the observation after each call that ran (one, for a turn
        without a call)."""
        turn = len(self.turns)
        calls = read_calls(model_text)
        assistant: Message = {"role": "assistant", "content": model_text}
        if calls:
            assistant["tool_calls"] = [self._structured(c, turn, k) for k, c in enumerate(calls)]
        messages, summaries = [assistant], []
        for k, observation in enumerate(observations):
            text = self.render_observation(observation)
            if k < len(calls):
                messages.append({"role": "tool", "tool_call_id": call_id(turn, k), "content": text})
            else:
                messages.append({"role": "user", "content": text})
            summaries.append(step_summary(calls[k].text if k < len(calls) else model_text, observation))
        if observations:
            self.functions = self._functions(observations[-1])
        self.turns.append((messages, summaries))

    def _build(self, first_kept: int) -> list[Message]:
        task = self.task
        if first_kept:
            summaries = [line for _, lines in self.turns[:first_kept] for line in lines]
            task += "\n\nEARLIER STEPS (summarised):\n" + "\n".join(summaries)
        system = {"role": "system", "content": self.system, TOOLS_FIELD: self.functions}
        messages = [system, {"role": "user", "content": task}]
        for turn_messages, _ in self.turns[first_kept:]:
            messages += turn_messages
        return messages


def _split_tools(messages: Sequence[Message]) -> tuple[list[Message], list[dict[str, Any]] | None]:
    tools = None
    plain = []
    for message in messages:
        if message.get(TOOLS_FIELD) is not None:
            tools = message[TOOLS_FIELD]
            # a training dataset holds the definitions as JSON text (its rows need one schema)
            tools = json.loads(tools) if isinstance(tools, str) else tools
        plain.append({k: v for k, v in message.items() if k != TOOLS_FIELD})
    return plain, tools


def template_calls_tools(chat_template: Any) -> bool:
    """Whether a chat template renders function definitions (it reads the `tools` variable)."""
    import re

    templates = chat_template.values() if isinstance(chat_template, dict) else [chat_template]
    return any(isinstance(t, str) and re.search(r"\btools\b", t) for t in templates)


def template_request(messages: Sequence[Message]) -> tuple[list[Message], list[dict[str, Any]] | None]:
    """(messages, tools) for a chat template (`apply_chat_template(messages, tools=tools)`): each
    message's role and content only, so a model's turn is its own text, verbatim (its calls are
    already written in the template's format)."""
    plain, tools = _split_tools(messages)
    return [{"role": m["role"], "content": m["content"]} for m in plain], tools


def api_request(messages: Sequence[Message]) -> tuple[list[Message], list[dict[str, Any]] | None]:
    """(messages, tools) for an OpenAI-compatible chat API: a model's calls go back as
    `tool_calls` with their arguments as JSON text (unreadable arguments as the model wrote them),
    and its text without the call blocks as `content`."""
    plain, tools = _split_tools(messages)
    out = []
    for message in plain:
        calls = message.get("tool_calls")
        if message["role"] == "assistant" and calls:
            text = TOOL_CALL_BLOCK.sub("", message["content"] or "").strip()
            message = {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        **call,
                        "function": {
                            "name": call["function"]["name"],
                            "arguments": _arguments_text(call["function"]["arguments"]),
                        },
                    }
                    for call in calls
                ],
            }
        out.append(message)
    return out, tools


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
