"""The scripted v1 baseline: a hand-written expert for the v1 task families that sees only what an
agent is shown.

It is the proof that v1 tasks are solvable from the observation alone. `act` reads nothing but
the (JSON round-tripped) observation: the task text, the start-of-episode documentation
(`tool_schemas`), the last response and `known_state`. It never calls the ruleset.

- Task text: the six family templates and the composition parts ("Do all of the following...:
  part; part") are parsed with the patterns of `plans` into a plan of reads (the lookups every task
  needs: the inbox for HR's 'New starter' message or a team roster and out-of-office replies,
  the CRM by e-mail or by company and status, the calendar over a day or a week) and writes
  whose values come from the text and from those responses. A write whose values no response
  gave is dropped, never guessed.
- Drift: after a failed call it inspects the tool and compares the live schema with the
  documentation (renamed parameters are paired by position and type, required additions are
  recognised by their notes, retyped parameters converted as their notes say), then renders the
  call under the live contract and retries. Replacements and fallbacks are followed (from the
  schema, the Deprecation/Link headers or a 410/404 message); rate limits (429 with Retry-After,
  or a rate_limit in the schema) are waited out with other work, pending reports or an
  inspection. Responses are unwrapped whatever their envelope, and record fields renamed by
  drift are mapped back. A 503/504 with Retry-After (a transient fault) is waited out and the
  call made once more. Silent changes answer 200, so it checks what a status update or a
  contact search did: the record returned must hold every value it set and every contact found
  must match every filter it passed; otherwise it inspects the tool and makes the call again as
  the live notes say (a successor parameter, a new vocabulary), never the same call twice.
- Reports: each drift with evidence (a failed call on the tool, an inspection of it, or a
  response that shows the change) is reported once, keyed by tool, kind and endpoint. Reports
  wait for steps the agent would lose anyway (a rate limit blocking every remaining call) or for
  the end; before completing it inspects each tool it called since that tool's last inspection
  and has no tool-wide drift known on (a tool carries one at most), catching error-code remaps
  and rate limits that never got in its way, when the step budget leaves room for the
  inspection, what it may find and the completion. Measured over 1,600 episodes (8 scenarios,
  seeds 0-99 and 10000-10099): detection 1.000 with these inspections, 0.954 without, at the
  same mean score (0.909 vs 0.910): the steps cost what the reports earn.
- Safety: one message per recipient, one event per title, writes only to records a lookup
  identified, and a write is retried only after a response that says it did not happen (an
  unclear one is checked against `known_state` first).

The drift-oblivious variant (`scripted_oblivious`, `ScriptedPolicy(handles_drift=False)`) is
this agent with all of the drift handling above switched off and nothing else: same plan,
lookups, writes and completion, no inspection, no report, no call adapted, rerouted or waited,
responses read as documented, a refused write lost. It solves the control arm (no drift) and
fails under drift: the reference that shows what the arms measure. It plays v1 only.

On another ruleset (legacy) it plays the policy-aware heuristic, so that a configuration that
lists it among the baselines of every ruleset still plays the legacy cells (the embedded default
lists it for v1 only, under `evaluation.v1.baselines`).

The package, by concern: `wording` (the task text's patterns and dates), `plans` (a planner per
family turns the task text into ops), `ops` (the `Op` a plan is made of and its builders),
`contract` (the live contract against the documentation: renames, additions, conversions,
response records) and `policy` (`ScriptedPolicy`, which plays the plan).
"""

from schemashift.policies.scripted.ops import Op
from schemashift.policies.scripted.plans import plan_task
from schemashift.policies.scripted.policy import OBLIVIOUS, ScriptedPolicy, make, make_oblivious
from schemashift.policies.scripted.wording import TaskNotUnderstood, parse_slot

__all__ = [
    "OBLIVIOUS",
    "Op",
    "ScriptedPolicy",
    "TaskNotUnderstood",
    "make",
    "make_oblivious",
    "parse_slot",
    "plan_task",
]
