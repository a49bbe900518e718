"""Simulated SaaS tools: endpoint schemas, call validation and drift hooks.

A tool owns its endpoint schemas (what the API accepts right now) and the handlers behind them.
Drift mutates the schemas through `apply_drift`; every mutation drops the tool's cached
serialised schema view, so the view is rebuilt only when something changed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from schemashift.env.frozen import FrozenDict, FrozenList, freeze

Response = dict[str, Any]
Handler = Callable[[dict[str, Any]], Response]


def ok(body: dict[str, Any]) -> Response:
    """A success, frozen where it is made: a body a handler built frozen is kept, any other (it
    may hold world records) is copied."""
    if type(body) is not FrozenDict:
        body = freeze(body)
    return FrozenDict(ok=True, status=200, body=body, error=None)


def fail(status: int, error: str) -> Response:
    return FrozenDict(ok=False, status=status, body=None, error=error)


def copy_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Private copies of seed records. Shallow on purpose: handlers replace nested values
    (attendee lists and the like) and never mutate them in place, so sharing them is safe."""
    return list(map(dict, records))


class NotFound(LookupError):
    """A handler's record does not exist: the call answers 404 with this message."""


def find_record(records: list[dict[str, Any]], key: str, value: Any, noun: str) -> dict[str, Any]:
    """The first record whose `key` is `value`; NotFound ("<noun> <value> not found") where none is."""
    for record in records:
        if record.get(key) == value:
            return record
    raise NotFound(f"{noun} {value} not found")


class UnsupportedDrift(ValueError):
    """A drift (kind, endpoint) pair that a tool has no handler for."""


class EndpointSchema:
    """One endpoint's contract: parameter types, required parameters, response and error codes.

    A `shared` schema (a class's baseline, or the result of an edit of one, `Tool.edit_schema`) may
    be held by many tools at once and is never mutated.
    """

    __slots__ = ("name", "params", "required", "response_shape", "error_codes", "shared")

    def __init__(
        self,
        name: str,
        params: dict[str, str],
        required: list[str],
        response_shape: dict[str, str],
        error_codes: dict[int, str],
    ) -> None:
        self.name = name
        self.params = params
        self.required = required
        self.response_shape = response_shape
        self.error_codes = error_codes
        self.shared = False

    def copy(self, name: str | None = None) -> EndpointSchema:
        return EndpointSchema(
            name or self.name,
            dict(self.params),
            list(self.required),
            dict(self.response_shape),
            dict(self.error_codes),
        )

    def frozen(self) -> FrozenDict:
        """JSON form, read-only and built directly; error-code keys become strings as they would
        over the wire."""
        return FrozenDict(
            name=self.name,
            params=FrozenDict(self.params),
            required=FrozenList(self.required),
            response_shape=FrozenDict(self.response_shape),
            error_codes=FrozenDict({str(code): label for code, label in self.error_codes.items()}),
        )


class Tool:
    """Base class: schema-checked dispatch to handlers, plus a registry of drift handlers.

    Subclasses define `name`, `baseline_schemas()` and the handlers (a method named as its
    endpoint), and register drift handlers in `drift_handlers` keyed by (kind, endpoint-or-None).
    A handler raises NotFound (`find_record`) for a record that does not exist.
    """

    name: str = ""

    def __init__(self, seed_data: dict[str, Any] | None = None) -> None:
        cls = type(self)
        templates = _TEMPLATES.get(cls)
        if templates is None:
            templates = _TEMPLATES[cls] = {s.name: s for s in self.baseline_schemas()}
            for schema in templates.values():
                schema.shared = True
            _BASELINE_VIEWS[cls] = FrozenDict({name: s.frozen() for name, s in templates.items()})
        self._templates = templates
        # Copy-on-write: endpoints share the class's baseline schemas until drift changes them.
        self.schemas: dict[str, EndpointSchema] = dict(templates)
        handlers = _HANDLER_TABLES.get(cls)
        if handlers is None:
            # baseline_handlers() returns bound methods; keep their functions once per class.
            handlers = _HANDLER_TABLES[cls] = {
                name: h.__func__ for name, h in self.baseline_handlers().items()
            }
        # Shared with every tool of the class until drift adds or removes an endpoint.
        self.handlers: dict[str, Callable[[Tool, dict[str, Any]], Response]] = handlers
        # Every fresh tool of a class starts from the same schemas, so they share one view.
        self._schema_view: dict[str, dict[str, Any]] | None = _BASELINE_VIEWS[cls]
        self.load(seed_data or {})

    # -- subclass surface -------------------------------------------------------------------
    @classmethod
    def baseline_schemas(cls) -> list[EndpointSchema]:
        raise NotImplementedError

    def baseline_handlers(self) -> dict[str, Handler]:
        """Endpoint -> bound method serving it; read once per class. By default each baseline
        endpoint is served by the method of its name."""
        return {name: getattr(self, name) for name in self._templates}

    def load(self, seed_data: dict[str, Any]) -> None:
        """Populate the tool's state from the scenario's seed data (shared: copy what you keep)."""

    def drift_handlers(self) -> dict[tuple[str, str | None], Callable[[dict[str, Any]], None]]:
        """(kind, endpoint or None) -> bound method applying that drift; read once per class."""
        return {}

    # -- behaviour ------------------------------------------------------------------------------
    def call(self, endpoint: str, params: dict[str, Any]) -> Response:
        schema = self.schemas.get(endpoint)
        if schema is None:
            return fail(410, f"Endpoint '{endpoint}' is no longer available on {self.name}.")
        declared = schema.params
        # Key-view comparisons run in C; the lists are built only to word an error.
        if not declared.keys() >= params.keys():
            unknown = [key for key in params if key not in declared]
            return fail(400, f"Unknown params on {endpoint}: {unknown!r}")
        for key in schema.required:
            if key not in params:
                missing = [k for k in schema.required if k not in params]
                return fail(400, f"Missing required params: {missing!r}")
        handler = self.handlers.get(endpoint)
        if handler is None:
            return fail(501, f"Endpoint '{endpoint}' has no implementation on {self.name}.")
        try:
            return handler(self, params)
        except NotFound as exc:
            return fail(404, str(exc))

    def apply_drift(self, kind: str, endpoint: str | None, details: dict[str, Any]) -> None:
        table = _DRIFT_TABLES.get(type(self))
        if table is None:
            # drift_handlers() returns bound methods; keep their functions once per class.
            table = _DRIFT_TABLES[type(self)] = {key: h.__func__ for key, h in self.drift_handlers().items()}
        handler = table.get((kind, endpoint))
        if handler is None:
            raise UnsupportedDrift(
                f"{self.name} has no drift handler for kind={kind!r} endpoint={endpoint!r}"
            )
        handler(self, details)
        self.changed()

    def changed(self) -> None:
        """Mark the schemas as modified so cached views are rebuilt."""
        self._schema_view = None

    def schema_view(self) -> dict[str, dict[str, Any]]:
        """Serialised schemas of the active endpoints, in endpoint order.

        Built once per change of the schemas, frozen (`schemashift.env.frozen`) and shared between
        observations; drift builds a new one.
        """
        view = self._schema_view
        if view is None:
            # Endpoints still sharing the baseline schema reuse its serialised form.
            templates, baseline = self._templates, _BASELINE_VIEWS[type(self)]
            view = self._schema_view = FrozenDict(
                {
                    name: baseline[name] if schema is templates.get(name) else schema.frozen()
                    for name, schema in self.schemas.items()
                }
            )
        return view

    # -- helpers for drift handlers ----------------------------------------------------------------
    def edit_schema(self, endpoint: str, key: Hashable, edit: Callable[[EndpointSchema], None]) -> None:
        """Apply `edit` to the endpoint's schema. `edit` depends on nothing but the schema and `key`,
        which names it; so the edit of a shared schema (every episode with the drift makes it) is
        made once, on a copy, and that result is shared in turn."""
        schema = self.schemas[endpoint]
        if not schema.shared:
            edit(schema)
            return
        edited = _EDITED.get((schema, key))
        if edited is None:
            edited = schema.copy()
            edit(edited)
            edited.shared = True
            _EDITED[(schema, key)] = edited
        self.schemas[endpoint] = edited

    def remove_endpoint(self, endpoint: str) -> None:
        self.schemas.pop(endpoint, None)
        self._own_handlers().pop(endpoint, None)

    def add_endpoint(self, schema: EndpointSchema, handler: Handler) -> None:
        """Serve `schema` with `handler`, a bound method of this tool."""
        self.schemas[schema.name] = schema
        self._own_handlers()[schema.name] = handler.__func__

    def _own_handlers(self) -> dict[str, Callable[[Tool, dict[str, Any]], Response]]:
        if self.handlers is _HANDLER_TABLES[type(self)]:
            self.handlers = dict(self.handlers)
        return self.handlers

    def baseline_schema(self, endpoint: str, name: str | None = None) -> EndpointSchema:
        """A private copy of the endpoint's schema as it was before any drift (optionally renamed)."""
        return self._templates[endpoint].copy(name)


#: per tool class: its baseline schemas (never mutated; tools work on copies) and their view
_TEMPLATES: dict[type[Tool], dict[str, EndpointSchema]] = {}
_BASELINE_VIEWS: dict[type[Tool], dict[str, dict[str, Any]]] = {}
_HANDLER_TABLES: dict[type[Tool], dict[str, Callable[[Tool, dict[str, Any]], Response]]] = {}
#: (a shared schema, the key of an edit) -> the shared result of that edit (`Tool.edit_schema`)
_EDITED: dict[tuple[EndpointSchema, Hashable], EndpointSchema] = {}
_DRIFT_TABLES: dict[type[Tool], dict[tuple[str, str | None], Callable[[Tool, dict[str, Any]], None]]] = {}
