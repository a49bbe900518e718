"""The wire types: pydantic Action, Observation and State for OpenEnv clients and servers.

The Action mirrors the environment's action JSON (a `type` plus its sub-object) so that any
OpenEnv client can build one; `raw` carries anything else a policy produced (a model's text, a
malformed object) as is, and the server hands it to the environment core unchanged, so remote
and in-process episodes agree on every invalid action too.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError, SchemaSerializer, core_schema

from schemashift.env.actions import SUBOBJECT
from schemashift.env.frozen import FrozenDict, FrozenList

#: the Action fields that hold an action's sub-object, by name
SUBOBJECT_FIELDS = tuple(SUBOBJECT.values())

# The environment's observations are built of read-only dicts and lists (dict and list
# subclasses, schemashift.env.frozen). pydantic serialises a subclass of a type it knows through
# a generic path (failed attribute lookups, then its base classes), about 0.7 us per container,
# which made a step's reply several times dearer to serialise than the same data in plain
# containers. Told how, it serialises them as the dicts and lists they are: the same output, at
# its plain containers' speed.
FrozenDict.__pydantic_serializer__ = SchemaSerializer(core_schema.dict_schema())
FrozenList.__pydantic_serializer__ = SchemaSerializer(core_schema.list_schema())


class SchemaShiftAction(Action):
    """One agent action: `type` and its sub-object, or `raw`: what the policy produced, as is."""

    type: str | None = Field(default=None, description=f"one of {list(SUBOBJECT)}")
    tool_call: dict[str, Any] | None = Field(default=None, description="call_tool: tool, endpoint, params")
    inspect: dict[str, Any] | None = Field(default=None, description="inspect_schema: tool")
    retry: dict[str, Any] | None = Field(
        default=None, description="retry_with_variant: tool, endpoint, params"
    )
    report: dict[str, Any] | None = Field(
        default=None, description="report_drift: tool, drift_kind, description"
    )
    complete: dict[str, Any] | None = Field(default=None, description="complete_task: summary")
    raw: Any = Field(
        default=None,
        description="the policy's output as is (JSON text or any JSON value), validated by the server",
    )
    tokens_used: int = Field(default=0, ge=0, description="tokens the policy spent on this decision")

    @model_validator(mode="after")
    def _type_or_raw(self) -> SchemaShiftAction:
        # `raw` may be a JSON null, so its presence is whether it was given at all. A custom
        # error, not a ValueError: its context must serialise into OpenEnv's error frame.
        if (self.type is None) == ("raw" not in self.model_fields_set):
            raise PydanticCustomError(
                "type_or_raw", "give exactly one of 'type' (with its sub-object) or 'raw'"
            )
        return self

    def payload(self) -> Any:
        """What the environment core validates: the action dict, or the raw output."""
        if self.type is None:
            return self.raw
        action: dict[str, Any] = {"type": self.type}
        for name in SUBOBJECT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                action[name] = value
        return action


class SchemaShiftObservation(Observation):
    """What the agent sees after reset or a step, plus the step's reward breakdown.

    `outcome` stays empty until the episode is done; then, in sessions reset with outcome=true,
    it holds the task facts, the ruleset's summary, the per-drift rows and the step history that
    the episode records need.
    """

    view: dict[str, Any] = Field(default_factory=dict, description="the ruleset's observation")
    view_delta: dict[str, Any] | None = Field(
        default=None,
        description="instead of `view`, in sessions reset with view_delta=true: what changed since the "
        "previous observation (see schemashift.rollout.wire)",
    )
    reward_breakdown: dict[str, Any] | None = Field(default=None, description="the step's full reward")
    outcome: dict[str, Any] | None = Field(default=None, description="records of a finished episode")


class SchemaShiftState(State):
    """Episode bookkeeping safe to show an agent: no ground truth, no drift plan."""

    ruleset: str | None = None
    scenario: str | None = None
    seed: int | None = None
    done: bool = False
    max_steps: int | None = None
    token_budget_remaining: int | None = None
    drifts_fired: int = 0
