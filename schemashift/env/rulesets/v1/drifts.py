"""When a v1 episode's planned drifts fire, and which calls and responses count for them.

`due_on_call` is the one trigger rule: the ruleset fires drifts by it and the oracle plans with it.
`targets` and `shows_change` decide which calls count as evidence of, failures on and recoveries
from a fired drift (the ruleset's `apply_effects`).
"""

from __future__ import annotations

from schemashift.env.episode import DriftEvent, DriftSpec, Episode
from schemashift.env.rulesets.base import Response
from schemashift.env.rulesets.v1.api import Api


def due_on_call(ep: Episode, tool: str, canonical: str | None) -> list[DriftEvent]:
    """The drifts the next call to `tool`.`canonical` fires, in plan order: the one trigger rule
    that `fire_drifts` applies and the oracle plans with. A drift fires on the agent's
    `on_call`-th call to its endpoint, or to any endpoint of the tool for a tool-wide kind
    (`canonical` None: a call to no endpoint of the tool, which counts for tool-wide ones only)."""
    calls = ep.extra["calls"]
    on_tool = calls.get((tool, None), 0) + 1
    on_endpoint = calls.get((tool, canonical), 0) + 1 if canonical else 0
    due = []
    for d in ep.extra["drifts_of"].get(tool, ()):
        if d.fired:
            continue
        spec = d.spec
        if spec.endpoint is None:
            if spec.on_call == on_tool:
                due.append(d)
        elif canonical and spec.endpoint == canonical and spec.on_call == on_endpoint:
            due.append(d)
    return due


def targets(spec: DriftSpec) -> tuple[str, ...]:
    """Live endpoint names whose calls count for an endpoint-level drift."""
    details = spec.details
    if spec.kind == "endpoint_deprecation":
        return (spec.endpoint, details["replacement"])
    if spec.kind == "tool_removal":
        return (spec.endpoint, details["fallback"]["endpoint"])
    return (spec.endpoint,)


def shows_change(api: Api, endpoint: str, spec: DriftSpec, response: Response) -> bool:
    """Whether a successful response of the drifted endpoint itself carries the change: deprecation
    headers, a restructured body, or a renamed or retyped field in the records it returns."""
    kind = spec.kind
    if kind == "endpoint_deprecation":
        return "Deprecation" in response["headers"]
    if kind == "response_restructure":
        return endpoint == spec.endpoint
    live = api.endpoints.get(endpoint)
    if live is None or live.canonical != spec.endpoint:
        return False
    if kind == "field_rename":
        return bool(live.out_names)
    if kind == "type_change":
        field = spec.details["param"]
        return field in live.response_shape or field in api.RECORD_FIELDS
    return False
