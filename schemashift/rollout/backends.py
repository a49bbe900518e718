"""Where episodes run. The runner talks to a backend, never to an Environment directly, so the
same sweep can run in-process (default, fastest) or against a server (the remote backend)."""

from __future__ import annotations

import json
import random
import time
from typing import Any, Protocol

from schemashift.env.actions import SUBOBJECT, InvalidAction
from schemashift.env.arms import DEFAULT_ARM, check_arm
from schemashift.env.environment import Environment, EpisodeStateError
from schemashift.env.frozen import freeze, frozen_view
from schemashift.env.rulesets import UnknownRuleset, get_ruleset
from schemashift.env.rulesets.base import UnknownScenario
from schemashift.rollout.wire import ViewDecoder


class EnvBackend(Protocol):
    """One episode at a time: reset, step until done, then `outcome()` for the records.

    `reset` plays the cell in `arm` (`env.arms`: `control` is the task with its drift plan off);
    a backend that cannot play the arm raises ValueError, never plays another one.
    `outcome()` returns {"task": {tier, family, split, max_steps, ruleset_version, schedule, arm},
    "summary": ruleset summary columns, "drifts": per-drift rows, "history": full step records}.
    Invalid actions on rulesets that reject them raise `schemashift.env.InvalidAction`.
    """

    name: str

    def reset(self, ruleset: str, scenario: str, seed: int, arm: str = DEFAULT_ARM) -> dict[str, Any]: ...

    def step(self, action: Any, tokens_used: int = 0) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def outcome(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def episode_outcome(env: Environment) -> dict[str, Any]:
    """Everything the records of a finished episode need (the `EnvBackend.outcome()` dict)."""
    return outcome_of(env.ruleset, env.episode)


def outcome_of(rs: Any, ep: Any) -> dict[str, Any]:
    """`episode_outcome` of an episode that its environment may since have left (reset to the next)."""
    task = ep.task
    return {
        "task": {
            "tier": task.tier,
            "family": task.family,
            "split": task.split,
            "max_steps": task.max_steps,
            "ruleset_version": rs.version,
            "schedule": task.schedule(),
            "arm": task.arm,
            "salt_id": task.salt_id,
        },
        "summary": rs.summary(ep),
        "drifts": rs.drift_outcomes(ep),
        "history": ep.history,
    }


class InProcessBackend:
    """Environments in this process, one per ruleset, reused across episodes."""

    name = "inprocess"

    def __init__(self) -> None:
        self._envs: dict[str, Environment] = {}
        self._env: Environment | None = None

    def reset(self, ruleset: str, scenario: str, seed: int, arm: str = DEFAULT_ARM) -> dict[str, Any]:
        env = self._envs.get(ruleset)
        if env is None:
            env = self._envs[ruleset] = Environment(get_ruleset(ruleset))
        self._env = env
        return env.reset(scenario, seed, arm=arm)

    def step(self, action: Any, tokens_used: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
        return self._env.step(action, tokens_used)

    def outcome(self) -> dict[str, Any]:
        return episode_outcome(self._env)

    def close(self) -> None:
        self._envs.clear()
        self._env = None


#: error kinds a SchemaShift server names at the start of an error message, and what they raise here
REMOTE_ERRORS: dict[str, type[Exception]] = {
    "InvalidAction": InvalidAction,
    "EpisodeStateError": EpisodeStateError,
    "UnknownScenario": UnknownScenario,
    "UnknownRuleset": UnknownRuleset,
    "ValueError": ValueError,
}
_ACTION_KEYS = frozenset({"type", *SUBOBJECT.values()})
#: how long a remote reset waits for a full server to free a session, and its backoff's bounds
CAPACITY_WAIT_S = 60.0
CAPACITY_FIRST_DELAY_S = 0.25
CAPACITY_MAX_DELAY_S = 8.0
#: error codes after which the server has closed the connection
SESSION_ENDING_CODES = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR", "SESSION_TIMEOUT"})


class RemoteError(RuntimeError):
    """The server refused a request for a reason the in-process environment has no exception for."""


class CapacityReached(RemoteError):
    """The server holds as many sessions as it allows (error code CAPACITY_REACHED)."""


class RemoteBackend:
    """Episodes on a SchemaShift server, over one WebSocket session (OpenEnv's `/ws` protocol).

    Speaks the protocol with the `websockets` package directly, so the rollout layer needs
    neither openenv nor pydantic, and asks for observation deltas (`rollout.wire`). Errors of
    the server's environment are raised as the same exceptions the in-process environment
    raises, so the runner treats both alike.
    """

    name = "remote"

    def __init__(
        self,
        url: str,
        open_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        capacity_wait_s: float = CAPACITY_WAIT_S,
        policy: str | None = None,
    ) -> None:
        """`capacity_wait_s`: how long a reset keeps retrying, with backoff, a server at capacity;
        `policy`: the name a recording server (`serve --record`) records the episodes under."""
        self.policy = policy
        self.url = websocket_url(url)
        self.open_timeout_s = open_timeout_s
        self.message_timeout_s = message_timeout_s
        self.capacity_wait_s = capacity_wait_s
        self._ws: Any = None
        self._outcome: dict[str, Any] | None = None
        self._arm = DEFAULT_ARM
        self._views = ViewDecoder()

    def reset(self, ruleset: str, scenario: str, seed: int, arm: str = DEFAULT_ARM) -> dict[str, Any]:
        """Start the cell on the server. The arm is sent only when it is not the default, so a
        server older than arms still plays drift cells; asked for another arm, such a server
        refuses the unknown parameter, raised here as a ValueError that says so."""
        self._outcome = None
        self._arm = check_arm(arm)
        request = {
            "ruleset": ruleset,
            "scenario": scenario,
            "seed": seed,
            "view_delta": True,
            "outcome": True,
        }
        if arm != DEFAULT_ARM:
            request["arm"] = arm
        if self.policy is not None:
            request["policy"] = self.policy
        try:
            data = self._open_and_reset(request)
        except ValueError as exc:
            if "arm" in request and "unknown reset parameters" in str(exc) and "'arm'" in str(exc):
                raise ValueError(
                    f"the server at {self.url} plays no arms (a version before them), so it cannot "
                    f"play the {arm} arm: {exc}"
                ) from None
            raise
        # The decoder rebuilds later views from this one: the policy gets a frozen copy of it.
        return frozen_view(self._views.decode(data["observation"]["view_delta"]))

    def step(self, action: Any, tokens_used: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
        data = self._request("step", {**wire_action(action), "tokens_used": tokens_used})
        observation = data["observation"]
        if data["done"]:
            self._outcome = self._checked(observation["outcome"])
        view = frozen_view(self._views.decode(observation["view_delta"]))
        return view, freeze(observation["reward_breakdown"])

    def outcome(self) -> dict[str, Any]:
        if self._outcome is None:
            raise EpisodeStateError("The remote episode has not finished; outcome() needs a done episode.")
        return self._outcome

    def _checked(self, outcome: dict[str, Any]) -> dict[str, Any]:
        """The outcome of the arm asked for: a server that played another one (an outcome
        without `arm` comes from a server before arms, which played drift) is an error."""
        played = outcome["task"].get("arm", DEFAULT_ARM)
        if played != self._arm:
            raise RemoteError(f"asked {self.url} for the {self._arm} arm, but it played the {played} arm")
        return outcome

    def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.send(json.dumps({"type": "close"}))
            except Exception:  # noqa: BLE001 - closing a socket the server already dropped
                pass
            ws.close()

    def _connect(self) -> Any:
        from websockets.sync.client import connect

        try:
            # Entered as a context manager (websockets >= 17 deprecates the plain call) and closed
            # in close(); no compression: messages are small and latency matters.
            self._ws = connect(
                self.url, open_timeout=self.open_timeout_s, max_size=None, proxy=None, compression=None
            ).__enter__()
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(f"cannot reach the SchemaShift server at {self.url}: {exc}") from None
        return self._ws

    def _open_and_reset(self, request: dict[str, Any]) -> dict[str, Any]:
        """A reset; on a new connection to a full server, retried with exponential backoff for
        up to `capacity_wait_s`, then the server's own refusal is raised. A kept connection the
        server has ended is replaced by a new one."""
        started = time.monotonic()
        delay, deadline = CAPACITY_FIRST_DELAY_S, started + self.capacity_wait_s
        tries = 0
        while True:
            fresh = self._ws is None
            tries += 1
            try:
                return self._request("reset", request)
            except (ConnectionError, RemoteError) as exc:
                if not fresh:  # the server ended the kept session (idle timeout, restart): a new one
                    self._drop()
                    continue
                if not isinstance(exc, CapacityReached):
                    raise
                self._drop()
                left = deadline - time.monotonic()
                if left <= 0:
                    waited = time.monotonic() - started
                    raise CapacityReached(f"{exc}; gave up after {tries} tries over {waited:.1f} s") from None
                time.sleep(min(delay * random.uniform(0.5, 1.0), left))
                delay = min(delay * 2, CAPACITY_MAX_DELAY_S)

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.close()

    def _request(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        ws = self._ws or self._connect()
        try:
            try:
                ws.send(json.dumps({"type": kind, "data": data}))
            except ConnectionClosed:
                pass  # a refused session (at capacity) sends its error frame, then closes: read it below
            reply = json.loads(ws.recv(timeout=self.message_timeout_s))
        except (ConnectionClosed, TimeoutError) as exc:
            # The session is gone (server restart, idle timeout); a later reset reconnects.
            self._ws = None
            raise ConnectionError(f"lost the session with {self.url}: {_close_reason(exc)}") from None
        if reply.get("type") == "error":
            error = reply.get("data") or {}
            if error.get("code") in SESSION_ENDING_CODES:
                self._drop()
            raise remote_exception(error)
        return reply["data"]


def _close_reason(exc: Exception) -> str:
    """Why the server closed the connection, in its words where it gave a reason."""
    rcvd = getattr(exc, "rcvd", None)
    if rcvd is not None and rcvd.reason:
        return f"{rcvd.reason} (close code {rcvd.code})"
    return str(exc) or type(exc).__name__


def remote_exception(error: dict[str, Any]) -> Exception:
    """The exception an error frame stands for: the core's own where the server names one."""
    message = str(error.get("message", "unknown error"))
    if error.get("code") == "CAPACITY_REACHED":
        return CapacityReached(f"{message} (code: CAPACITY_REACHED)")
    kind, sep, text = message.partition(": ")
    if sep and kind in REMOTE_ERRORS:
        return REMOTE_ERRORS[kind](text)
    if error.get("code") == "VALIDATION_ERROR":
        return ValueError(f"{message}: {json.dumps(error.get('errors'), default=str)}")
    return RemoteError(f"{message} (code: {error.get('code', 'unknown')})")


def wire_action(action: Any) -> dict[str, Any]:
    """An action as the server's Action model takes it: its fields when it is a well-formed
    action dict, else `raw`, the value as is, which the server validates exactly as in-process
    (values JSON cannot carry go as their text)."""
    if (
        type(action) is dict
        and isinstance(action.get("type"), str)
        and action.keys() <= _ACTION_KEYS
        and all(type(action.get(key)) in (dict, type(None)) for key in SUBOBJECT.values())
    ):
        return action
    if isinstance(action, bytes):
        return {"raw": action.decode("utf-8", "replace")}
    try:
        json.dumps(action, allow_nan=False)
    except (TypeError, ValueError):
        return {"raw": _as_json_text(action)}
    return {"raw": action}


def _as_json_text(action: Any) -> str:
    try:
        return json.dumps(action, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(action)


def websocket_url(url: str) -> str:
    """The `/ws` URL of a server given as ws(s):// or http(s):// base URL."""
    scheme, sep, rest = url.partition("://")
    schemes = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}
    if not sep or scheme not in schemes or not rest.strip("/"):
        raise ValueError(f"Unknown backend {url!r}; available: inprocess, or a server URL ws://host:port")
    rest = rest.rstrip("/")
    if not rest.endswith("/ws"):
        rest += "/ws"
    return f"{schemes[scheme]}://{rest}"


def make_backend(spec: str = "inprocess", policy: str | None = None) -> EnvBackend:
    """`inprocess`, or a server URL (`ws://host:port`, `http://host:port`) for the remote backend,
    which declares `policy` to the server."""
    if spec == "inprocess":
        return InProcessBackend()
    return RemoteBackend(spec, policy=policy)
