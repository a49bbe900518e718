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

FORMAT_VERSION = 1
HARNESSES = ("default", "legacy")

Message = dict[str, str]
#: counts the prompt tokens of a message list (exactly, through the chat template, or estimated)
TokenCounter = Callable[[Sequence[Message]], int]

#: characters of a response body shown before it is cut (bodies of list endpoints grow long)
BODY_CHARS = 1200
#: characters per token of the estimate used when no tokenizer is at hand
CHARS_PER_TOKEN = 4


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A tokenizer-free estimate (for API models whose tokenizer is not local)."""
    return sum(len(m["content"]) + 8 for m in messages) // CHARS_PER_TOKEN + 1


def action_text(action: dict[str, Any]) -> str:
    """The assistant text of an action: exactly what a model is trained to emit."""
    return json.dumps(action, ensure_ascii=False)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


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
        "You are an autonomous workflow agent. You complete tasks by calling the tools of simulated "
        "enterprise APIs. Their schemas can change during the episode (renamed fields, deprecated "
        "endpoints, new required parameters, rate limits, removed tools): read every response, inspect "
        "a tool's schema when a call fails, adapt your calls and report each change you notice.\n\n"
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
            lines.append(f"  {_endpoint_line(name, schema)}")
    return "\n".join(lines)


_KNOWN_SCHEMA_KEYS = ("name", "params", "required", "response_shape", "error_codes")


def _endpoint_line(name: str, schema: Any) -> str:
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


def render_task(observation: dict[str, Any]) -> str:
    criteria = observation.get("success_criteria") or []
    parts = [f"TASK: {observation.get('task_description', '')}"]
    if criteria:
        parts.append("SUCCESS CRITERIA:\n" + "\n".join(f"- {c}" for c in criteria))
    parts.append(
        f"LIMITS: at most {observation.get('max_steps')} steps; "
        f"token budget {observation.get('token_budget_remaining')}."
    )
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
    turns are replaced by a one-line summary each (and those summaries by a count, if needed).
    """

    harness = "default"

    def __init__(
        self,
        tool_names: Sequence[str],
        drift_kinds: Sequence[str],
        observation: dict[str, Any],
        *,
        max_prompt_tokens: int | None = None,
        count_tokens: TokenCounter = estimate_tokens,
    ) -> None:
        self.system = system_prompt(tool_names, drift_kinds)
        self.task = render_task(observation)
        self.max_prompt_tokens = max_prompt_tokens
        self.count_tokens = count_tokens
        self.turns: list[tuple[str, str, str]] = []  # (model text, observation text, summary line)
        self._shown_docs = observation.get("tool_schemas")
        self._shown_drifts = len(observation.get("drift_events_visible") or [])
        self._shown_state = observation.get("known_state")
        self.dropped = 0

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
        """The prompt for the next action, within the token budget where it can be."""
        first_kept = 0
        messages = self._build(0)
        if self.max_prompt_tokens is None:
            self.dropped = 0
            return messages
        while first_kept < len(self.turns) - 1 and self.count_tokens(messages) > self.max_prompt_tokens:
            first_kept += 1
            messages = self._build(first_kept)
        self.dropped = first_kept
        return messages


class LegacyPrompt:
    """The original harness: one stateless user message per step (legacy spec 9.3).

    It hides response bodies, errors, earlier params, state, feedback and the drift kinds; it is
    here to compare against, not to train on.
    """

    harness = "legacy"

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


def conversation_class(harness: str) -> type[Conversation] | type[LegacyPrompt]:
    if harness == "default":
        return Conversation
    if harness == "legacy":
        return LegacyPrompt
    raise ValueError(f"Unknown harness {harness!r}; available: {', '.join(HARNESSES)}")
