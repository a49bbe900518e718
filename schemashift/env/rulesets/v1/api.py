"""The v1 simulated APIs: typed endpoints over a canonical world, with every drift kind.

Handlers work on canonical names and values (`mail`, `calendar`, `crm` data as the task seeds
it). Between the agent and a handler sits the endpoint's live contract: its current name,
parameter names and types, extra required parameters, response layout, error statuses and rate
limit. Drift changes only that contract, so every kind applies to every tool through the same
code, and the oracle can render a canonical call under the live contract (`render`).

Responses are read-only dicts (`schemashift.env.frozen`), frozen where they are made:
{ok, status, headers, body, error}. Errors carry
`body = {"code": label, "message": text}` so that the cause stays readable when a drift remaps
the status. Nothing here announces a drift: agents learn of it from responses, headers and the
live schema (`schema_view`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from schemashift.env.frozen import FrozenDict, FrozenList, freeze

Response = dict[str, Any]
NO_HEADERS: dict[str, str] = FrozenDict()

ERROR_LABELS = {
    400: "bad_request",
    404: "not_found",
    410: "gone",
    422: "validation_error",
    429: "rate_limited",
    503: "service_unavailable",
    504: "gateway_timeout",
}


def ok(body: Any, headers: dict[str, str] = NO_HEADERS) -> Response:
    """A success, frozen where it is made (the body may hold world records: it is copied)."""
    if type(headers) is not FrozenDict:
        headers = freeze(headers)
    return FrozenDict(ok=True, status=200, headers=headers, body=freeze(body), error=None)


def error(
    status: int, message: str, code: str | None = None, headers: dict[str, str] = NO_HEADERS
) -> Response:
    label = code or ERROR_LABELS.get(status, "error")
    if type(headers) is not FrozenDict:
        headers = freeze(headers)
    return FrozenDict(
        ok=False,
        status=status,
        headers=headers,
        body=FrozenDict(code=label, message=message),
        error=message,
    )


class ApiError(Exception):
    """Raised by a handler: becomes an error response (status remapped by drift, if any)."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


# -- value types ----------------------------------------------------------------------------------
def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_object_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": _is_str,
    "int": _is_int,
    "list[str]": _is_str_list,
    "list[object]": _is_object_list,
    "object": lambda v: isinstance(v, dict),
}


def _iso_to_epoch(value: str) -> int:
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())


def _epoch_to_iso(value: int) -> str:
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _id_number(value: str) -> int:
    return int(value.rsplit("_", 1)[-1])


#: type-change converters: name -> (canonical -> live, live -> canonical, new type, note)
CONVERTERS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], str, str]] = {
    "emails_as_objects": (
        lambda v: [{"email": e} for e in v],
        lambda v: [item["email"] for item in v],
        "list[object]",
        "each entry is an object {'email': str}",
    ),
    "iso_as_epoch": (
        _iso_to_epoch,
        _epoch_to_iso,
        "int",
        "unix seconds (UTC) instead of an ISO 8601 string",
    ),
    "emails_as_address_objects": (
        lambda v: [{"address": e} for e in v],
        lambda v: [item["address"] for item in v],
        "list[object]",
        "each entry is an object {'address': str}",
    ),
    "iso_as_epoch_ms": (
        lambda v: _iso_to_epoch(v) * 1000,
        lambda v: _epoch_to_iso(v // 1000),
        "int",
        "unix milliseconds (UTC) instead of an ISO 8601 string",
    ),
    "recipient_as_objects": (
        lambda v: [{"email": v}],
        lambda v: [item["email"] for item in v],
        "list[object]",
        "a list of recipient objects {'email': str} instead of one string",
    ),
    "status_as_value_object": (
        lambda v: {"value": v},
        lambda v: v["value"],
        "object",
        "an object {'value': str} instead of a string",
    ),
    "status_as_code_object": (
        lambda v: {"code": v},
        lambda v: v["code"],
        "object",
        "an object {'code': str} instead of a string",
    ),
    "recipient_as_list": (
        lambda v: [v],
        lambda v: v,
        "list[str]",
        "a list of recipient addresses instead of one string",
    ),
    "contact_id_as_int": (
        _id_number,
        lambda v: f"c_{v}",
        "int",
        "the numeric part of the contact id: 'c_12' is 12",
    ),
}


def _prefixed(prefix: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    return (lambda v: prefix + v, lambda v: v[len(prefix) :] if v.startswith(prefix) else v)


_STATUS_PREFIX = _prefixed("status:")

#: silent vocabularies, converters whose documented values the endpoint no longer takes: a value
#: that is not in the live vocabulary (whose round trip does not give it back) is silently ignored
VOCABULARIES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], str, str]] = {
    "upper": (
        str.upper,
        str.lower,
        "str",
        "values are upper-case codes now ('cancelled' is now 'CANCELLED'); any other value is ignored",
    ),
    "us_spelling": (
        lambda v: "canceled" if v == "cancelled" else v,
        lambda v: "cancelled" if v == "canceled" else v,
        "str",
        "US spelling now: 'cancelled' is now 'canceled'; any other value is ignored",
    ),
    "status_prefix": (
        *_STATUS_PREFIX,
        "str",
        "values carry the prefix 'status:' now ('active' is now 'status:active'); any other value is ignored",
    ),
}
CONVERTERS.update(VOCABULARIES)


class Endpoint:
    """The live contract of one endpoint in one episode."""

    __slots__ = (
        "name",
        "canonical",
        "params",
        "required",
        "response_shape",
        "errors",
        "notes",
        "to_canonical",
        "out_names",
        "converters",
        "extra",
        "restructure",
        "deprecated",
        "ignored",
    )

    def __init__(
        self,
        name: str,
        params: dict[str, str],
        required: list[str],
        response_shape: dict[str, str],
        errors: tuple[int, ...],
    ) -> None:
        self.name = name
        self.canonical = name
        self.params = params
        self.required = required
        self.response_shape = response_shape
        self.errors = errors
        self.notes: dict[str, str] = {}
        self.to_canonical: dict[str, str] = {}  # live param name -> canonical, where renamed
        self.out_names: dict[str, str] = {}  # canonical response field -> live name, where renamed
        self.converters: dict[str, str] = {}  # canonical param -> converter name, where retyped
        self.extra: dict[str, dict[str, Any]] = {}  # live-only required params and their rules
        self.restructure: tuple[str, str] | None = None  # response envelope and list key, once moved
        self.deprecated: dict[str, Any] | None = None
        self.ignored: frozenset[str] = frozenset()  # live params accepted and silently dropped

    def copy(self, name: str | None = None) -> Endpoint:
        new = Endpoint(
            name or self.name, dict(self.params), list(self.required), dict(self.response_shape), self.errors
        )
        new.canonical = self.canonical
        new.notes = dict(self.notes)
        new.to_canonical = dict(self.to_canonical)
        new.out_names = dict(self.out_names)
        new.converters = dict(self.converters)
        new.extra = {k: dict(v) for k, v in self.extra.items()}
        new.restructure = self.restructure
        new.deprecated = None if name else self.deprecated
        new.ignored = self.ignored
        return new

    def live_name(self, canonical: str) -> str:
        for live, canon in self.to_canonical.items():
            if canon == canonical:
                return live
        return canonical


class Api:
    """One tool of one episode: canonical handlers behind live, drifting endpoint contracts.

    Subclasses define `name`, `ENDPOINTS` (name, params, required, response shape, error
    statuses), `LIST_KEYS` (endpoint -> the list field its response carries) and handlers named
    `h_<endpoint>`, and load their canonical data in `load`.
    """

    name = ""
    ENDPOINTS: tuple[tuple[str, dict[str, str], list[str], dict[str, str], tuple[int, ...]], ...] = ()
    LIST_KEYS: dict[str, str] = {}
    #: canonical record fields that a field rename may rename in responses
    RECORD_FIELDS: frozenset[str] = frozenset()

    def __init__(self, data: dict[str, Any]) -> None:
        templates = _TEMPLATES.get(type(self))
        if templates is None:
            templates = _TEMPLATES[type(self)] = {
                name: Endpoint(name, dict(params), list(required), dict(shape), errors)
                for name, params, required, shape, errors in self.ENDPOINTS
            }
        # Copy-on-write: endpoints share the class's templates until a drift changes them.
        self.endpoints: dict[str, Endpoint] = dict(templates)
        self.owned: set[str] = set()
        self.retired: dict[str, dict[str, Any]] = {}
        self.removed: dict[str, dict[str, Any]] = {}
        self.remap: dict[int, int] = {}
        self.rate: tuple[int, int] | None = None
        self.accepted: list[int] = []  # steps of calls the rate limiter let through
        self.fault: tuple[int, str, int] | None = None  # a transient fault: status, code, back at step
        self.view: dict[str, Any] | None = None
        self.load(data)

    def load(self, data: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- the agent-facing call ---------------------------------------------------------------------
    def call(self, endpoint: str, params: dict[str, Any], step: int) -> Response:
        if self.fault is not None:
            status, code, back = self.fault
            if step < back:
                return error(
                    status,
                    f"{self.name} is temporarily unavailable ({code}); the request was not applied. "
                    f"Retry after {back - step} step(s).",
                    code,
                    FrozenDict({"Retry-After": str(back - step)}),
                )
            self.fault = None
        if self.rate is not None:
            limit, window = self.rate
            recent = [s for s in self.accepted if s > step - window]
            if len(recent) >= limit:
                wait = min(recent) + window - step
                return self._error(
                    429,
                    f"Rate limit exceeded on {self.name}: at most {limit} call(s) per {window} steps. "
                    f"Retry after {wait} step(s).",
                    headers={"Retry-After": str(wait)},
                )
            self.accepted.append(step)
        ep = self.endpoints.get(endpoint)
        if ep is None:
            return self._missing(endpoint)
        headers = NO_HEADERS
        if ep.deprecated is not None:
            dep = ep.deprecated
            headers = {
                "Deprecation": "true",
                "Sunset": f"step {dep['sunset_step']}",
                "Link": f'<{dep["replacement"]}>; rel="successor-version"',
            }
        declared = ep.params
        if not declared.keys() >= params.keys():
            unknown = tuple(params.keys() - declared.keys())
            answer = _unknown_params(self.name, endpoint, unknown, tuple(declared), self.remap.get(400, 400))
            if headers is not NO_HEADERS:  # a deprecation's headers go with the answer
                answer = error(answer["status"], answer["error"], "bad_request", headers)
            return answer
        for key in ep.required:
            if key not in params:
                missing = [k for k in ep.required if k not in params]
                described = ", ".join(f"{k} ({self._describe(ep, k)})" for k in missing)
                return self._error(
                    400,
                    f"Missing required parameter(s) on {self.name}.{endpoint}: {described}.",
                    headers=headers,
                )
        canonical: dict[str, Any] = {}
        rename, converters, ignored = ep.to_canonical, ep.converters, ep.ignored
        for key, value in params.items():
            kind = declared[key]
            if not TYPE_CHECKS[kind](value):
                return self._error(
                    422,
                    f"Parameter '{key}' of {self.name}.{endpoint} must be {self._describe(ep, key)}, "
                    f"got {type(value).__name__} {value!r:.60}.",
                    headers=headers,
                )
            rule = ep.extra.get(key)
            if rule is not None:
                allowed = rule.get("enum")
                if (allowed and value not in allowed) or not value:
                    return self._error(
                        422, f"Parameter '{key}' of {self.name}.{endpoint}: {rule['note']}.", headers=headers
                    )
                continue
            if key in ignored:
                continue
            name = rename.get(key, key)
            converter = converters.get(name)
            if converter is None:
                canonical[name] = value
                continue
            to_live, to_canonical = CONVERTERS[converter][:2]
            try:
                canonical[name] = to_canonical(value)
                if converter in VOCABULARIES and to_live(canonical[name]) != value:
                    del canonical[name]
            except (ValueError, OverflowError, OSError, KeyError, TypeError, IndexError):
                return self._error(
                    422,
                    f"Parameter '{key}' of {self.name}.{endpoint}: {value!r:.60} is out of range "
                    f"({self._describe(ep, key)}).",
                    headers=headers,
                )
        try:
            body = getattr(self, "h_" + ep.canonical)(canonical)
        except ApiError as exc:
            return self._error(exc.status, exc.message, exc.code, headers)
        return ok(self._present(ep, body), headers)

    def _describe(self, ep: Endpoint, key: str) -> str:
        note = ep.notes.get(key)
        return f"{ep.params[key]}: {note}" if note else ep.params[key]

    def _error(self, status: int, message: str, code: str | None = None, headers=NO_HEADERS) -> Response:
        label = code or ERROR_LABELS.get(status, "error")
        return error(self.remap.get(status, status), message, label, headers)

    def _missing(self, endpoint: str) -> Response:
        retired = self.retired.get(endpoint)
        if retired is not None:
            return self._error(
                410,
                f"{self.name}.{endpoint} was retired at step {retired['sunset_step']}; use "
                f"{self.name}.{retired['replacement']} (same parameters).",
                "endpoint_retired",
            )
        removed = self.removed.get(endpoint)
        if removed is not None:
            fallback = removed["fallback"]
            extra = ", ".join(f"{k}={v!r}" for k, v in fallback["params"].items())
            return self._error(
                404,
                f"{self.name}.{endpoint} was removed. Documented fallback: call {self.name}."
                f"{fallback['endpoint']} with the same identifying parameters"
                + (f" plus {extra}" if extra else "")
                + f". {removed['note']}",
                "endpoint_removed",
            )
        return self._error(
            404,
            f"Unknown endpoint {self.name}.{endpoint}; available: {sorted(self.endpoints)}.",
            "unknown_endpoint",
        )

    def _present(self, ep: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
        """The handler's canonical body as the live contract lays it out."""
        out = ep.out_names
        converters = ep.converters
        if out or converters:
            list_key = self.LIST_KEYS.get(ep.canonical)
            if list_key is not None:
                body = {**body, list_key: [self._record(r, out, converters) for r in body[list_key]]}
            else:
                body = self._record(body, out, converters)
        layout = ep.restructure
        if layout is not None:
            envelope, items = layout
            list_key = self.LIST_KEYS.get(ep.canonical)
            if list_key is not None:
                rest = {k: v for k, v in body.items() if k != list_key}
                body = {envelope: {items: body[list_key]}, "meta": rest}
            else:
                body = {envelope: body, "meta": {"endpoint": ep.name}}
        return body

    @staticmethod
    def _record(record: dict[str, Any], out: dict[str, str], converters: dict[str, str]) -> dict[str, Any]:
        result = {}
        for key, value in record.items():
            converter = converters.get(key)
            if converter is not None:
                value = CONVERTERS[converter][0](value)
            result[out.get(key, key)] = value
        return result

    # -- drift -------------------------------------------------------------------------------------
    def apply_drift(self, kind: str, endpoint: str | None, details: dict[str, Any], step: int) -> None:
        getattr(self, "d_" + kind)(endpoint, details, step)
        self.view = None

    def fork(self) -> Api:
        """A copy of the live contract that drifts may change without touching this one (the
        world is shared: a fork is for rendering calls, never for serving them)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.endpoints = dict(self.endpoints)
        twin.owned = set()
        twin.retired = dict(self.retired)
        twin.removed = dict(self.removed)
        twin.remap = dict(self.remap)
        twin.accepted = list(self.accepted)
        twin.view = None
        return twin

    def writable(self, endpoint: str) -> Endpoint:
        """The endpoint's contract, made private to this episode so a drift may change it."""
        if endpoint not in self.owned:
            self.endpoints[endpoint] = self.endpoints[endpoint].copy()
            self.owned.add(endpoint)
        return self.endpoints[endpoint]

    def d_field_rename(self, endpoint, details, step) -> None:
        ep = self.writable(endpoint)
        old, new = details["from"], details["to"]
        canonical = ep.to_canonical.pop(old, old)
        ep.params = {(new if k == old else k): v for k, v in ep.params.items()}
        ep.required = [new if k == old else k for k in ep.required]
        if old in ep.notes:
            ep.notes[new] = ep.notes.pop(old)
        ep.to_canonical[new] = canonical
        if canonical in ep.response_shape or canonical in self.RECORD_FIELDS:
            ep.out_names[canonical] = new
            ep.response_shape = {(new if k == canonical else k): v for k, v in ep.response_shape.items()}

    def d_endpoint_deprecation(self, endpoint, details, step) -> None:
        ep = self.writable(endpoint)
        replacement = details["replacement"]
        self.endpoints[replacement] = ep.copy(replacement)
        self.owned.add(replacement)
        ep.deprecated = {"replacement": replacement, "sunset_step": step + details["sunset_after"]}

    def retire(self, endpoint: str) -> None:
        """End a deprecated endpoint's sunset: from now on it answers 410."""
        ep = self.endpoints.pop(endpoint)
        self.retired[endpoint] = dict(ep.deprecated)
        self.view = None

    def d_new_required_param(self, endpoint, details, step) -> None:
        ep = self.writable(endpoint)
        param = details["param"]
        ep.params[param] = "str"
        ep.required.append(param)
        ep.notes[param] = details["note"]
        ep.extra[param] = {
            "enum": details.get("enum"),
            "note": details["note"],
            "example": details["example"],
        }

    def d_type_change(self, endpoint, details, step) -> None:
        ep = self.writable(endpoint)
        canonical, converter = details["param"], details["converter"]
        live = ep.live_name(canonical)
        _, _, new_type, note = CONVERTERS[converter]
        ep.params[live] = new_type
        ep.notes[live] = note
        ep.converters[canonical] = converter
        if canonical in ep.response_shape:
            ep.response_shape[canonical] = new_type

    def d_response_restructure(self, endpoint, details, step) -> None:
        ep = self.writable(endpoint)
        envelope, items = details["envelope"], details["items"]
        ep.restructure = (envelope, items)
        if ep.canonical in self.LIST_KEYS:
            list_key = self.LIST_KEYS[ep.canonical]
            rest = {k: v for k, v in ep.response_shape.items() if k != list_key}
            ep.response_shape = {envelope: f"object{{{items}: list}}", "meta": f"object{{{', '.join(rest)}}}"}
        else:
            ep.response_shape = {envelope: "object{" + ", ".join(ep.response_shape) + "}", "meta": "object"}

    def d_silent_change(self, endpoint, details, step) -> None:
        """The parameter keeps its name and type, so the call still answers 200: its successor
        takes its meaning and it is dropped, or its values follow a new vocabulary."""
        ep = self.writable(endpoint)
        canonical = details["param"]
        live = ep.live_name(canonical)
        if details["effect"] == "successor":
            successor = details["successor"]
            ep.to_canonical.pop(live, None)
            ep.to_canonical[successor] = canonical
            ep.params[successor] = ep.params[live]
            ep.ignored = ep.ignored | {live}
            ep.notes[live] = f"ignored since step {step}: use '{successor}'"
            ep.notes[successor] = f"replaces '{live}' (same values)"
            return
        vocabulary = details["vocabulary"]
        ep.converters[canonical] = vocabulary
        ep.notes[live] = VOCABULARIES[vocabulary][3]

    def d_transient_fault(self, endpoint, details, step) -> None:
        self.fault = (details["status"], details["code"], step + details["retry_after"])

    def d_error_code_remap(self, endpoint, details, step) -> None:
        self.remap = {int(k): v for k, v in details["remap"].items()}

    def d_tool_removal(self, endpoint, details, step) -> None:
        del self.endpoints[endpoint]
        self.removed[endpoint] = {"fallback": details["fallback"], "note": details["note"]}

    def d_rate_limit_tightening(self, endpoint, details, step) -> None:
        self.rate = (details["calls"], details["per_steps"])
        self.accepted = []

    # -- the live schema ---------------------------------------------------------------------------
    def schema_view(self) -> dict[str, Any]:
        """Live schema: endpoint -> contract, plus retired and removed endpoints. Cached per change."""
        view = self.view
        if view is None:
            view = self.view = build_view(self)
        return view

    def wait_needed(self, step: int) -> int:
        """Steps until a transient fault has passed and the rate limiter accepts a call made at
        `step` (0: it would now)."""
        if self.fault is not None and step < self.fault[2]:
            return self.fault[2] - step
        if self.rate is None:
            return 0
        limit, window = self.rate
        recent = [s for s in self.accepted if s > step - window]
        return 0 if len(recent) < limit else min(recent) + window - step

    # -- the oracle's view: a canonical call under the live contract -------------------------------
    def render(self, endpoint: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(live endpoint, live params) of a canonical call; follows replacements and fallbacks."""
        ep = self._live_endpoint(endpoint)
        if ep is None:
            removed = self.removed.get(endpoint)
            if removed is None:
                raise KeyError(f"{self.name}.{endpoint} has no live form")
            fallback = removed["fallback"]
            return self.render(fallback["endpoint"], {**params, **fallback["params"]})
        live: dict[str, Any] = {}
        for key, value in params.items():
            converter = ep.converters.get(key)
            live[ep.live_name(key)] = CONVERTERS[converter][0](value) if converter else value
        for param, rule in ep.extra.items():
            live[param] = rule["example"]
        return ep.name, live

    def canonical_of(self, endpoint: str) -> str | None:
        """The documented endpoint a call to `endpoint` addresses (None: none of this tool's)."""
        live = self.endpoints.get(endpoint)
        if live is not None:
            return live.canonical
        if endpoint in self.retired or endpoint in self.removed:
            return endpoint
        return None

    def _live_endpoint(self, canonical: str) -> Endpoint | None:
        found = None
        for ep in self.endpoints.values():
            if ep.canonical == canonical:
                if ep.deprecated is None:
                    return ep
                found = ep
        return found


#: per Api class: its documented endpoint contracts, shared read-only by every episode
_TEMPLATES: dict[type[Api], dict[str, Endpoint]] = {}


def build_view(api: Api) -> dict[str, Any]:
    """The live schema of a tool, built frozen: handed out as it is to every observation."""
    view: dict[str, Any] = {}
    templates = _TEMPLATES[type(api)]
    remap, rate = api.remap, api.rate
    remap_key = tuple(remap.items())
    # An endpoint no drift has touched shows as documented, under the tool's remap and rate limit
    # if it has them: its frozen entry is built once per (class, remap, rate) and shared.
    for name, ep in api.endpoints.items():
        if ep is templates.get(name):
            view[name] = _documented_entry(type(api), name, remap_key, rate)
            continue
        view[name] = _entry(name, ep, remap, rate)
    for name, retired in api.retired.items():
        view[name] = FrozenDict(name=name, status="retired", replacement=retired["replacement"])
    for name, removed in api.removed.items():
        fallback = {
            "endpoint": removed["fallback"]["endpoint"],
            "params": dict(removed["fallback"]["params"]),
        }
        view[name] = freeze(
            {"name": name, "status": "removed", "fallback": fallback, "note": removed["note"]}
        )
    return FrozenDict(view)


@lru_cache(maxsize=256)
def _unknown_params(tool: str, endpoint: str, unknown: tuple, declared: tuple, status: int) -> Response:
    """The unknown-parameter error, kept per call shape (frozen, so shared): the commonest error (stale
    names after a drift, a heuristic's legacy calls); writing it was most of a failed call."""
    message = f"Unknown parameter(s) {sorted(unknown)} on {tool}.{endpoint}; accepted: {sorted(declared)}."
    return error(status, message, ERROR_LABELS[400])


@lru_cache(maxsize=256)
def _documented_entry(
    api_class: type[Api], name: str, remap: tuple[tuple[int, int], ...], rate: tuple[int, int] | None
) -> dict[str, Any]:
    """An endpoint's entry as its class documents it, under a status remap and rate limit (frozen,
    shared by every view). The catalogue's remaps and limits are few, so the bound is a backstop."""
    return _entry(name, _TEMPLATES[api_class][name], dict(remap), rate)


def _entry(name: str, ep: Endpoint, remap: dict[int, int], rate: tuple[int, int] | None) -> dict[str, Any]:
    """An endpoint's entry, built frozen (its values are names, types and notes: all text)."""
    entry: dict[str, Any] = {
        "name": name,
        "params": FrozenDict(ep.params),
        "required": FrozenList(ep.required),
        "response_shape": FrozenDict(ep.response_shape),
        "error_codes": FrozenDict({"200": "ok"} | {str(remap.get(s, s)): ERROR_LABELS[s] for s in ep.errors}),
        "status": "active",
    }
    if ep.notes:
        entry["notes"] = FrozenDict(ep.notes)
    if ep.deprecated is not None:
        entry["status"] = "deprecated"
        entry["deprecation"] = FrozenDict(
            replacement=ep.deprecated["replacement"], sunset_step=ep.deprecated["sunset_step"]
        )
    if rate is not None:
        entry["rate_limit"] = FrozenDict(calls=rate[0], per_steps=rate[1])
    return FrozenDict(entry)
