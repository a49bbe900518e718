"""Episodes as Trackio traces (`trackio.Trace`, the dashboard's Traces tab), so a reader can look
at what an agent did, step by step, without a viewer of our own.

`report trackio --cells DIR...` logs, from the trajectories under DIR, every failed episode and a
sample of the successful ones (every episode of a small run: at most `ALL_BELOW` episodes) into
one Trackio run per ruleset and subject, `episodes.<ruleset>.<subject>`. A trace holds:

- messages: the task (the first observation's description and success criteria), the verdict
  as the request the Traces tab lists (`[FAILED score 0.000] v1 / subject / scenario seed n`),
  then per step the agent's action as an assistant tool call and the API's response as
  the tool's answer; a step where drifts fired starts its answer with `DRIFT FIRED: ...`;
- spans: the episode, one `tool` span per step (action in, response out, reward, feedback; error
  status where the call failed) and one span per drift event under the step it fired on, named
  `DRIFT <kind> on <tool>.<endpoint>`, with error status so the inspector marks it;
- metadata: ruleset, subject, scenario, seed, sample, success, score, steps, the planned drifts.

Traces are logged under the key `<scenario>/seed-<n>/sample-<k>` (searchable in the Traces tab;
`/control` after it for an episode of the control arm, whose verdict line and metadata say so)
with fixed ids and timestamps, so the same results give the same traces. The report's failed
examples link to their run's traces (`trace_link`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from schemashift.env.arms import DEFAULT_ARM
from schemashift.report import ReportError
from schemashift.report.load import arm_of
from schemashift.rollout.subject import Subject

#: a run with at most this many episodes is traced whole
ALL_BELOW = 200
#: successful episodes traced per (ruleset, subject, scenario) beyond a small run
SUCCESSES_PER_SCENARIO = 2
RUN_PREFIX = "episodes"
GROUP = "episodes"
#: where the traces' fixed timestamps start (one second per trace after it)
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
#: characters of a response or action kept in a message (the span keeps the whole)
MESSAGE_CHARS = 2000


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


def trace_run(ruleset: str, subject: str) -> str:
    """The Trackio run (name and id) that holds a subject's traces on a ruleset."""
    return f"{RUN_PREFIX}.{_slug(ruleset)}.{_slug(subject)}"


def trace_key(scenario: str, seed: int, sample_index: int, arm: str = DEFAULT_ARM) -> str:
    """`<scenario>/seed-<n>/sample-<k>`, and `/control` after it for an episode of the control arm
    (the same cell with its drift plan off is another episode)."""
    key = f"{scenario}/seed-{seed}/sample-{sample_index}"
    return key if arm == DEFAULT_ARM else f"{key}/{arm}"


def trace_link(base_url: str, project: str, ruleset: str, subject: str) -> str:
    """The dashboard's Traces tab with the subject's trace run selected."""
    query = urlencode({"project": project, "run_ids": trace_run(ruleset, subject)})
    return f"{base_url}/traces?{query}"


def selected(trajectories: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every graded episode of a small run; else every failed one and the first
    `SUCCESSES_PER_SCENARIO` successes (by seed and sample) of each ruleset, subject and scenario."""
    graded = [t for t in trajectories if t.get("status") == "graded"]
    if len(graded) <= ALL_BELOW:
        return graded
    kept, successes = [], {}
    for trajectory in sorted(graded, key=_order):
        if (trajectory.get("final") or {}).get("success") is not True:
            kept.append(trajectory)
            continue
        group = (
            trajectory["ruleset"],
            Subject.of_record(trajectory).label,
            trajectory["scenario"],
            arm_of(trajectory),
        )
        successes[group] = successes.get(group, 0) + 1
        if successes[group] <= SUCCESSES_PER_SCENARIO:
            kept.append(trajectory)
    return kept


def _order(t: Mapping[str, Any]) -> tuple:
    label = Subject.of_record(t).label
    return (t["ruleset"], label, arm_of(t) != DEFAULT_ARM, t["scenario"], t["seed"], t.get("sample_index", 0))


def read_trajectories(dirs: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The trajectories of every result set at or below `dirs`."""
    from schemashift.report.load import TRAJECTORIES_FILE, find_cells
    from schemashift.rollout import io

    out = []
    for cell in find_cells(dirs):
        path = cell.directory / TRAJECTORIES_FILE
        try:
            out += list(io.read_jsonl(path))
        except ValueError as exc:
            raise ReportError(f"{path}: unreadable trajectories: {exc}") from None
    return out


def trace_runs(trajectories: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The trace runs of the export plan: per run its name, group, config, steps, timestamps,
    log ids (which fix the trace ids) and one trace payload per step, under its trace key."""
    runs: dict[str, dict[str, Any]] = {}
    tasks = TaskTexts()
    for trajectory in sorted(selected(trajectories), key=_order):
        subject = Subject.of_record(trajectory).label
        name = trace_run(trajectory["ruleset"], subject)
        run = runs.setdefault(
            name,
            {
                "name": name,
                "group": GROUP,
                "config": {"_Group": GROUP, "ruleset": trajectory["ruleset"], "subject": subject},
                "steps": [],
                "timestamps": [],
                "metrics": [],
                "log_ids": [],
                "media": [],
            },
        )
        step = len(run["steps"])
        key = trace_key(
            trajectory["scenario"], trajectory["seed"], trajectory.get("sample_index", 0), arm_of(trajectory)
        )
        run["steps"].append(step)
        run["timestamps"].append((EPOCH + timedelta(seconds=step)).isoformat())
        run["log_ids"].append(f"{name}/{key}")  # Trackio keeps one metrics row per log id
        run["metrics"].append({key: episode_trace(trajectory, subject, tasks.text(trajectory))})
    return list(runs.values())


class TaskTexts:
    """The task an episode's agent was given (its first observation), rebuilt from the ruleset."""

    def __init__(self) -> None:
        self._environments: dict[str, Any] = {}

    def text(self, trajectory: Mapping[str, Any]) -> str:
        from schemashift.env import Environment, get_ruleset

        ruleset = trajectory["ruleset"]
        try:
            env = self._environments.get(ruleset) or Environment(get_ruleset(ruleset))
            self._environments[ruleset] = env
            view = env.reset(trajectory["scenario"], trajectory["seed"])
        except (KeyError, ValueError) as exc:
            return f"(the task cannot be rebuilt: {exc})"
        criteria = "\n".join(f"- {c}" for c in view.get("success_criteria") or [])
        return f"{view.get('task_description', '')}\n\nSuccess criteria:\n{criteria}".strip()


def episode_trace(trajectory: Mapping[str, Any], subject: str, task: str) -> dict[str, Any]:
    """One episode as a trace payload: `trackio.Trace(messages, metadata, spans)`'s fields."""
    final = trajectory.get("final") or {}
    success = final.get("success") is True
    verdict = "SOLVED" if success else "FAILED"
    header = (
        f"[{verdict} score {_fmt(final.get('score'))}] {trajectory['ruleset']} / {subject} / "
        f"{trajectory['scenario']} seed {trajectory['seed']}"
    )
    arm = arm_of(trajectory)
    if arm != DEFAULT_ARM:  # a control episode: the same cell with its drift plan off
        header += f" ({arm} arm)"
    # the dashboard lists a trace by its first user message: the verdict; the task comes first
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": task},
        {"role": "user", "content": header},
    ]
    spans: list[dict[str, Any]] = [
        {
            "id": "episode",
            "name": f"episode {trajectory['scenario']} seed {trajectory['seed']} ({verdict.lower()})",
            "kind": "span",
            "status": "success" if success else "error",
            "output": final,
        }
    ]
    for step in trajectory.get("steps") or []:
        number = step.get("step")
        action = step.get("action") or {}
        response = step.get("response")
        call = f"call-{number}"
        name = action_name(action)
        events = step.get("drift_events") or []
        marks = "".join(f"DRIFT FIRED: {drift_label(e)} {json.dumps(e.get('details'))}\n" for e in events)
        failed = isinstance(response, Mapping) and response.get("ok") is False
        arguments = json.dumps(_arguments(action), ensure_ascii=False)
        messages.append(
            {
                "role": "assistant",
                "content": f"step {number}: {name}"
                + (f" (invalid: {step['invalid']})" if step.get("invalid") else ""),
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": name, "arguments": arguments}}
                ],
            }
        )
        answer = json.dumps(response, ensure_ascii=False, default=str)[:MESSAGE_CHARS]
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call,
                "name": name,
                "content": f"{marks}{answer}\n{step.get('feedback') or ''}".strip(),
            }
        )
        spans.append(
            {
                "id": f"step-{number}",
                "parent_id": "episode",
                "name": f"#{number} {name}" + (" [DRIFT]" if events else ""),
                "kind": "tool",
                "status": "error" if failed else "success",
                "input": action,
                "output": response,
                "metadata": {"reward": step.get("reward"), "feedback": step.get("feedback")},
            }
        )
        spans += [
            {
                "id": f"step-{number}-drift-{index}",
                "parent_id": f"step-{number}",
                "name": f"DRIFT {drift_label(event)}",
                "kind": "span",
                "status": "error",
                "error": f"schema drift fired at step {number}: {drift_label(event)}",
                "metadata": dict(event),
            }
            for index, event in enumerate(events)
        ]
    metadata = {
        "status": "success" if success else "error",
        "ruleset": trajectory["ruleset"],
        "subject": subject,
        "scenario": trajectory["scenario"],
        "seed": trajectory["seed"],
        "sample_index": trajectory.get("sample_index", 0),
        "success": final.get("success"),
        "score": final.get("score"),
        "steps": len(trajectory.get("steps") or []),
        "drifts_fired": sum(len(s.get("drift_events") or []) for s in trajectory.get("steps") or []),
        "planned_drifts": [drift_label(d) for d in trajectory.get("schedule") or []],
        **({"arm": arm} if arm != DEFAULT_ARM else {}),
    }
    return {"messages": messages, "metadata": metadata, "spans": spans}


def action_name(action: Mapping[str, Any]) -> str:
    """`tool.endpoint` for calls and retries, else the action's type."""
    call = action.get("tool_call") or action.get("retry")
    if isinstance(call, Mapping):
        return f"{call.get('tool')}.{call.get('endpoint')}"
    if action.get("type") == "inspect_schema":
        return f"inspect_schema({(action.get('inspect') or {}).get('tool')})"
    return str(action.get("type"))


def _arguments(action: Mapping[str, Any]) -> Any:
    call = action.get("tool_call") or action.get("retry")
    if isinstance(call, Mapping):
        return call.get("params") or {}
    return {k: v for k, v in action.items() if k != "type"}


def drift_label(event: Mapping[str, Any]) -> str:
    where = event.get("tool") or "?"
    if event.get("endpoint"):
        where += f".{event['endpoint']}"
    return f"{event.get('kind')} on {where}"


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
