"""Realistic model outputs and the action each must parse to (None: no action).

Collected from the shapes instruction-tuned models produce: bare JSON, fenced JSON, chatty
answers, several objects, tool-call tags, OpenAI function objects, flattened fields, truncation.
"""

SEND = {
    "type": "call_tool",
    "tool_call": {
        "tool": "mail",
        "endpoint": "send_message",
        "params": {"to": "priya@company.com", "subject": "Welcome!", "body": "Hi Priya"},
    },
}
SEND_JSON = (
    '{"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "send_message", '
    '"params": {"to": "priya@company.com", "subject": "Welcome!", "body": "Hi Priya"}}}'
)
INSPECT_CAL = {"type": "inspect_schema", "inspect": {"tool": "calendar"}}
INSPECT_CAL_JSON = '{"type": "inspect_schema", "inspect": {"tool": "calendar"}}'
REPORT = {
    "type": "report_drift",
    "report": {"tool": "calendar", "drift_kind": "field_rename", "description": "attendees -> participants"},
}
REPORT_JSON = (
    '{"type": "report_drift", "report": {"tool": "calendar", "drift_kind": "field_rename", '
    '"description": "attendees -> participants"}}'
)
DONE = {"type": "complete_task", "complete": {"summary": "Done."}}
DONE_JSON = '{"type": "complete_task", "complete": {"summary": "Done."}}'
RETRY = {
    "type": "retry_with_variant",
    "retry": {"tool": "crm", "endpoint": "search_contacts", "params": {"email_address": "bob@customer.com"}},
}
RETRY_JSON = (
    '{"type": "retry_with_variant", "retry": {"tool": "crm", "endpoint": "search_contacts", '
    '"params": {"email_address": "bob@customer.com"}}}'
)
SEARCH = {"type": "call_tool", "tool_call": {"tool": "crm", "endpoint": "search_contacts", "params": {}}}

#: (name, model output, expected action or None, expected `repaired`)
CASES = [
    # -- well-formed ------------------------------------------------------------------------------
    ("bare", SEND_JSON, SEND, False),
    ("bare-newline", SEND_JSON + "\n", SEND, False),
    ("leading-space", "   " + INSPECT_CAL_JSON, INSPECT_CAL, False),
    (
        "pretty-printed",
        '{\n  "type": "inspect_schema",\n  "inspect": {\n    "tool": "calendar"\n  }\n}',
        INSPECT_CAL,
        False,
    ),
    ("report", REPORT_JSON, REPORT, False),
    ("complete", DONE_JSON, DONE, False),
    ("retry", RETRY_JSON, RETRY, False),
    (
        "no-params",
        '{"type": "call_tool", "tool_call": {"tool": "crm", "endpoint": "search_contacts"}}',
        SEARCH,
        False,
    ),
    (
        "unicode-summary",
        '{"type": "complete_task", "complete": {"summary": "Priority Support \u2014 done \u2705"}}',
        {"type": "complete_task", "complete": {"summary": "Priority Support \u2014 done \u2705"}},
        False,
    ),
    (
        "escaped-quotes",
        '{"type": "complete_task", "complete": {"summary": "He said \\"ok\\"."}}',
        {"type": "complete_task", "complete": {"summary": 'He said "ok".'}},
        False,
    ),
    (
        "braces-in-string",
        '{"type": "complete_task", "complete": {"summary": "set {status} to {done}"}}',
        {"type": "complete_task", "complete": {"summary": "set {status} to {done}"}},
        False,
    ),
    (
        "extra-keys-ignored",
        '{"type": "inspect_schema", "inspect": {"tool": "calendar"}, "reason": "400 before"}',
        INSPECT_CAL,
        False,
    ),
    ("no-subobject", '{"type": "complete_task"}', {"type": "complete_task"}, False),
    # -- fenced -----------------------------------------------------------------------------------
    ("fenced-json", "```json\n" + SEND_JSON + "\n```", SEND, False),
    ("fenced-plain", "```\n" + INSPECT_CAL_JSON + "\n```", INSPECT_CAL, False),
    ("fenced-inline", "```json " + DONE_JSON + "```", DONE, False),
    ("fenced-unclosed", "```json\n" + REPORT_JSON, REPORT, False),
    (
        "fenced-with-prose",
        "Here is my action:\n```json\n" + RETRY_JSON + "\n```\nThis uses the new field.",
        RETRY,
        False,
    ),
    (
        "two-fences-first-valid",
        "```json\n" + INSPECT_CAL_JSON + "\n```\nor\n```json\n" + DONE_JSON + "\n```",
        INSPECT_CAL,
        False,
    ),
    ("fence-example-then-real", "```python\nprint('hi')\n```\n```json\n" + DONE_JSON + "\n```", DONE, False),
    # -- chatty -------------------------------------------------------------------------------------
    (
        "prose-before",
        "The create_event call failed with 400, so I will inspect the schema.\n" + INSPECT_CAL_JSON,
        INSPECT_CAL,
        False,
    ),
    (
        "prose-after",
        SEND_JSON + "\nI sent the welcome email first because it is the first criterion.",
        SEND,
        False,
    ),
    ("prose-around", "Okay. " + REPORT_JSON + " That should be it.", REPORT, False),
    (
        "think-tags",
        "<think>\nThe endpoint was deprecated. I should report it.\n</think>\n" + REPORT_JSON,
        REPORT,
        False,
    ),
    ("think-with-braces", "<think>params {to, subject} are needed</think>" + SEND_JSON, SEND, False),
    ("action-label", "Action: " + DONE_JSON, DONE, False),
    ("markdown-bold", "**Next action:**\n\n" + INSPECT_CAL_JSON, INSPECT_CAL, False),
    ("reasoning-json-then-action", '{"thought": "the field was renamed"}\n' + RETRY_JSON, RETRY, False),
    ("python-dict-then-json", "{'type': 'inspect_schema'}\n" + INSPECT_CAL_JSON, INSPECT_CAL, False),
    # -- several objects ----------------------------------------------------------------------------
    ("two-actions-first-wins", INSPECT_CAL_JSON + "\n" + DONE_JSON, INSPECT_CAL, False),
    ("plan-of-three", SEND_JSON + "\n" + INSPECT_CAL_JSON + "\n" + DONE_JSON, SEND, False),
    (
        "invalid-tool-then-valid",
        '{"type": "inspect_schema", "inspect": {"tool": "slack"}}\n' + INSPECT_CAL_JSON,
        INSPECT_CAL,
        False,
    ),
    ("array-of-actions", "[" + INSPECT_CAL_JSON + ", " + DONE_JSON + "]", INSPECT_CAL, False),
    # -- wrapped / tool-call tags -------------------------------------------------------------------
    (
        "qwen-tool-call",
        '<tool_call>\n{"name": "inspect_schema", "arguments": {"tool": "calendar"}}\n</tool_call>',
        INSPECT_CAL,
        False,
    ),
    (
        "tool-call-with-prose",
        "Let me check.\n<tool_call>\n"
        '{"name": "complete_task", "arguments": {"summary": "Done."}}\n</tool_call>',
        DONE,
        False,
    ),
    (
        "tool-call-string-args",
        '<tool_call>{"name": "retry_with_variant", "arguments": "{\\"tool\\": \\"crm\\", \\"endpoint\\": '
        '\\"search_contacts\\", \\"params\\": {\\"email_address\\": \\"bob@customer.com\\"}}"}</tool_call>',
        RETRY,
        False,
    ),
    (
        "tool-call-unclosed",
        '<tool_call>\n{"name": "inspect_schema", "arguments": {"tool": "calendar"}}',
        INSPECT_CAL,
        False,
    ),
    ("tool-call-our-shape", "<tool_call>" + DONE_JSON + "</tool_call>", DONE, False),
    (
        "two-tool-calls",
        '<tool_call>{"name": "inspect_schema", "arguments": {"tool": "calendar"}}</tool_call>\n'
        '<tool_call>{"name": "complete_task", "arguments": {"summary": "x"}}</tool_call>',
        INSPECT_CAL,
        False,
    ),
    (
        "openai-function",
        '{"function": {"name": "complete_task", "arguments": "{\\"summary\\": \\"Done.\\"}"}}',
        DONE,
        False,
    ),
    (
        "tool-calls-list",
        '{"tool_calls": [{"type": "function", "function": '
        '{"name": "inspect_schema", "arguments": {"tool": "calendar"}}}]}',
        INSPECT_CAL,
        False,
    ),
    ("action-wrapper", '{"action": ' + REPORT_JSON + "}", REPORT, False),
    ("parameters-key", '{"name": "inspect_schema", "parameters": {"tool": "calendar"}}', INSPECT_CAL, False),
    # -- nested / flattened -------------------------------------------------------------------------
    (
        "flattened-call",
        '{"type": "call_tool", "tool": "crm", "endpoint": "search_contacts", "params": {}}',
        SEARCH,
        False,
    ),
    ("flattened-inspect", '{"type": "inspect_schema", "tool": "calendar"}', INSPECT_CAL, False),
    ("flattened-complete", '{"type": "complete_task", "summary": "Done."}', DONE, False),
    (
        "deep-params",
        '{"type": "call_tool", "tool_call": {"tool": "calendar", "endpoint": "create_event", "params": '
        '{"title": "T", "start": "s", "end": "e", '
        '"participants": [{"email": "a@b.c", "role": "required"}]}}}',
        {
            "type": "call_tool",
            "tool_call": {
                "tool": "calendar",
                "endpoint": "create_event",
                "params": {
                    "title": "T",
                    "start": "s",
                    "end": "e",
                    "participants": [{"email": "a@b.c", "role": "required"}],
                },
            },
        },
        False,
    ),
    # -- truncated ----------------------------------------------------------------------------------
    (
        "truncated-summary",
        '{"type": "complete_task", "complete": {"summary": "Done.',
        {"type": "complete_task", "complete": {"summary": "Done."}},
        True,
    ),
    ("truncated-after-value", '{"type": "inspect_schema", "inspect": {"tool": "calendar"', INSPECT_CAL, True),
    (
        "truncated-after-comma",
        '{"type": "call_tool", "tool_call": {"tool": "crm", "endpoint": "search_contacts", "params": {},',
        SEARCH,
        True,
    ),
    (
        "truncated-mid-key",
        '{"type": "inspect_schema", "inspect": {"tool": "calendar", "rea',
        INSPECT_CAL,
        True,
    ),
    (
        "truncated-fenced",
        "```json\n" + '{"type": "complete_task", "complete": {"summary": "Done.',
        {"type": "complete_task", "complete": {"summary": "Done."}},
        True,
    ),
    ("truncated-before-tool", '{"type": "inspect_schema", "inspect": {"to', None, False),
    ("truncated-type", '{"type": "complete_', None, False),
    # -- no action --------------------------------------------------------------------------------------
    ("empty", "", None, False),
    ("whitespace", "  \n\t ", None, False),
    ("prose-only", "I think I should inspect the calendar first.", None, False),
    ("refusal", "I'm sorry, but I can't help with that.", None, False),
    ("function-syntax", 'inspect_schema(tool="calendar")', None, False),
    ("unknown-type-only", '{"type": "send_email", "to": "a@b.c"}', None, False),
    ("json-array-of-strings", '["inspect_schema", "calendar"]', None, False),
    ("python-dict", "{'type': 'complete_task', 'complete': {'summary': 'x'}}", None, False),
    ("unbalanced-closers", "}}} ]]", None, False),
    ("number", "42", None, False),
]

#: outputs that parse to an action of a known type that the vocabulary rejects (the environment
#: then names the problem), as (name, text, expected action)
INVALID_BUT_TYPED = [
    (
        "unknown-tool",
        '{"type": "call_tool", "tool_call": {"tool": "slack", "endpoint": "post"}}',
        {"type": "call_tool", "tool_call": {"tool": "slack", "endpoint": "post"}},
    ),
    (
        "unknown-drift-kind",
        '{"type": "report_drift", "report": {"tool": "mail", "drift_kind": "typo", "description": "d"}}',
        {"type": "report_drift", "report": {"tool": "mail", "drift_kind": "typo", "description": "d"}},
    ),
    (
        "params-not-object",
        '{"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "x", "params": "to=a"}}',
        {"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "x", "params": "to=a"}},
    ),
]
