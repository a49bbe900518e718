"""OpenEnv clients for a SchemaShift server: `SchemaShiftEnv` (async) and `.sync()` (blocking).

    async with SchemaShiftEnv(base_url="ws://127.0.0.1:8000") as env:
        result = await env.reset(scenario="E1_onboard_new_hire", seed=0, ruleset="legacy")
        result = await env.step(SchemaShiftAction(type="inspect_schema", inspect={"tool": "mail"}))

    with SchemaShiftEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(scenario="E1_onboard_new_hire", seed=0)

Errors of the server's environment raise the core's own exceptions (`InvalidAction`,
`EpisodeStateError`, `UnknownScenario`, ...), as in-process.
"""

from __future__ import annotations

import asyncio
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from pydantic_core import from_json
from websockets.exceptions import ConnectionClosed

from schemashift.rollout.backends import remote_exception
from schemashift.rollout.wire import ViewDecoder
from schemashift.server.models import SchemaShiftAction, SchemaShiftObservation, SchemaShiftState


class SchemaShiftEnv(EnvClient[SchemaShiftAction, SchemaShiftObservation, SchemaShiftState]):
    """One WebSocket session (one episode at a time) on a SchemaShift server.

    Asks for observation deltas (`view_delta`, unless reset is told otherwise) and rebuilds the
    full `view` of every observation, so users always see whole observations.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._views = ViewDecoder()

    async def _reset_async(self, **kwargs: Any) -> StepResult[SchemaShiftObservation]:
        kwargs.setdefault("view_delta", True)
        return await super()._reset_async(**kwargs)

    def _step_payload(self, action: SchemaShiftAction | dict[str, Any]) -> dict[str, Any]:
        # The fields the action was given, so the server rebuilds the same action: `raw` given
        # as a JSON null is an action (one the environment refuses), not a missing field.
        if not isinstance(action, SchemaShiftAction):
            action = SchemaShiftAction.model_validate(action)
        return action.model_dump(exclude_unset=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SchemaShiftObservation]:
        fields = {
            **payload.get("observation", {}),
            "done": payload.get("done", False),
            "reward": payload.get("reward"),
        }
        if fields.get("view_delta") is not None:
            fields["view"] = self._views.decode(fields.pop("view_delta"))
        observation = SchemaShiftObservation.model_validate(fields)
        return StepResult(
            observation=observation, reward=payload.get("reward"), done=payload.get("done", False)
        )

    def _parse_state(self, payload: dict[str, Any]) -> SchemaShiftState:
        return SchemaShiftState.model_validate(payload)

    async def _receive(self) -> dict[str, Any]:
        """OpenEnv's `_receive`, parsing with pydantic's JSON parser: a reply carries a few
        kilobytes of observation, which it parses in about half of `json.loads`' time, the
        largest part of the client's work on a step. A reply that does not come within the
        message timeout drops the socket, as in OpenEnv's, so that a late reply cannot be
        taken for the answer to the next request."""
        ws = self._ws
        assert ws is not None
        try:
            raw = await asyncio.wait_for(ws.recv(decode=False), timeout=self._message_timeout)
        except (TimeoutError, asyncio.CancelledError):
            self._ws = None
            self._ws_loop = None
            self._schedule_socket_close(ws)
            raise
        return from_json(raw)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            await self._send(message)
        except ConnectionClosed:
            # A refused session (at capacity) sends its error frame and closes; read that frame.
            pass
        response = await self._receive()
        if response.get("type") == "error":
            raise remote_exception(response.get("data") or {})
        return response
