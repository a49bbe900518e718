"""A reply is serialised once, without pydantic's deep copy, and says exactly what pydantic's own
dump of the same observation says (schemashift.server.environment.ServedObservation; the core's
read-only containers serialised through server/models.py)."""

from __future__ import annotations

import pytest
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import WSObservationResponse
from pydantic_core import to_json

from schemashift.env.frozen import FrozenDict, FrozenList, freeze
from schemashift.env.rulesets import available_rulesets, get_ruleset
from schemashift.server.environment import SchemaShiftEnvironment
from schemashift.server.models import SchemaShiftAction, SchemaShiftObservation


def reply(observation: SchemaShiftObservation) -> str:
    """The text of OpenEnv's WebSocket reply to a reset or step."""
    return WSObservationResponse(data=serialize_observation(observation)).model_dump_json()


def pydantic_reply(observation: SchemaShiftObservation) -> str:
    """The same reply through pydantic's own dump (a deep copy) of the wire type."""
    return reply(SchemaShiftObservation.model_construct(**dict(observation)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ruleset", available_rulesets())
@pytest.mark.parametrize("session", [{"view_delta": True, "outcome": True}, {}])
def test_replies_are_what_pydantics_own_dump_gives(ruleset, session):
    rs = get_ruleset(ruleset)
    env = SchemaShiftEnvironment()
    for scenario in rs.scenario_ids()[:4]:
        observation = env.reset(scenario=scenario, seed=3, ruleset=ruleset, **session)
        assert reply(observation) == pydantic_reply(observation)
        for action in rs.solution(rs.build_task(scenario, 3)):
            observation = env.step(SchemaShiftAction.model_validate(action))
            assert reply(observation) == pydantic_reply(observation)
            if observation.done:
                break
        assert observation.done


def test_read_only_containers_serialise_as_plain_ones():
    value = {"a": [1, 2.5, {"b": None, "c": ["x", {"d": True}]}], "e": {"f": []}, "g": "é"}
    frozen = freeze(value)
    assert type(frozen) is FrozenDict and type(frozen["a"]) is FrozenList
    assert to_json(frozen) == to_json(value)
    assert to_json(frozen, indent=2) == to_json(value, indent=2)
    assert SchemaShiftObservation(view=frozen).model_dump() == SchemaShiftObservation(view=value).model_dump()
