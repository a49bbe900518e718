"""The OpenEnv `Environment` that serves SchemaShift: one instance per session.

Each instance wraps the core `schemashift.env.Environment` (one per ruleset it has been reset
with) and translates its dict observations into the pydantic wire types. Errors of the core
leave as `RequestError`s whose text starts with the core exception's name, so clients can raise
the same exception the in-process environment would have raised.
"""

from __future__ import annotations

import inspect
from typing import Any

from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.types import EnvironmentMetadata

import schemashift
from schemashift.env import (
    DEFAULT_ARM,
    Environment,
    EpisodeStateError,
    InvalidAction,
    UnknownRuleset,
    UnknownScenario,
    available_rulesets,
    check_arm,
    get_ruleset,
)
from schemashift.rollout.backends import episode_outcome
from schemashift.rollout.wire import ViewEncoder
from schemashift.server.models import SchemaShiftAction, SchemaShiftObservation, SchemaShiftState
from schemashift.server.recording import DEFAULT_POLICY, EpisodeStore, ServedEpisode, check_name

DEFAULT_RULESET = "legacy"
#: reward breakdown keys read, in order, as the step's scalar reward
SCALAR_REWARD_KEYS = ("reward", "score", "shaped_total")


class RequestError(Exception):
    """A request the environment cannot serve; `kind` names the core exception, `status` the HTTP code."""

    def __init__(self, kind: str, message: str, status: int = 400) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.status = status


def request_error(exc: Exception) -> RequestError:
    """The wire form of a core exception."""
    if isinstance(exc, (InvalidAction, UnknownScenario, UnknownRuleset)):
        return RequestError(type(exc).__name__, str(exc), 400 if isinstance(exc, InvalidAction) else 404)
    if isinstance(exc, EpisodeStateError):
        return RequestError("EpisodeStateError", str(exc), 409)
    return RequestError("ValueError", str(exc), 400)


class SchemaShiftEnvironment(OpenEnvEnvironment[SchemaShiftAction, SchemaShiftObservation, SchemaShiftState]):
    """reset(scenario, seed, ruleset, arm) / step(action) for one session; nothing shared between sessions."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, store: EpisodeStore | None = None) -> None:
        """`store`: where the session's episodes are recorded (`serve --record`), if anywhere."""
        super().__init__()
        self._envs: dict[str, Environment] = {}
        self._env: Environment | None = None
        self._store = store
        self._played: ServedEpisode | None = None
        self._closed_reason: str | None = None
        self._encoder: ViewEncoder | None = None
        self._with_outcome = False

    # -- OpenEnv interface ---------------------------------------------------------------------------
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        scenario: str | None = None,
        ruleset: str | None = None,
        view_delta: bool = False,
        outcome: bool = False,
        policy: str | None = None,
        harness: str | None = None,
        arm: str | None = None,
        **kwargs: Any,
    ) -> SchemaShiftObservation:
        """Start an episode in `arm` (`env.arms`; default drift: `control` plays the task with its
        drift plan off). `view_delta=True` makes this session's observations deltas;
        `outcome=True` adds the records' outcome to the episode's last observation; `policy` and
        `harness` name the client in the records of a recording server. A refused reset leaves
        the session's episode as it was."""
        self._check_open()
        if kwargs:
            raise RequestError(
                "ValueError",
                f"unknown reset parameters {sorted(kwargs)}; "
                "expected scenario, seed, ruleset, arm, episode_id, view_delta, outcome, policy, harness",
            )
        try:
            policy = check_name("policy", DEFAULT_POLICY if policy is None else policy)
            harness = None if harness is None else check_name("harness", harness)
            arm = check_arm(DEFAULT_ARM if arm is None else arm)
        except ValueError as exc:
            raise request_error(exc) from None
        for name, flag in (("view_delta", view_delta), ("outcome", outcome)):
            if not isinstance(flag, bool):
                raise RequestError("ValueError", f"{name} must be true or false, got {flag!r}")
        name = DEFAULT_RULESET if ruleset is None else ruleset
        if not isinstance(name, str):
            raise RequestError("ValueError", f"ruleset must be a string, got {type(name).__name__}")
        if episode_id is not None and not isinstance(episode_id, str):
            raise RequestError("ValueError", f"episode_id must be a string, got {type(episode_id).__name__}")
        try:
            env = self._envs.get(name)
            if env is None:
                # Shared views, not snapshots: they are only serialised here, and the observation
                # deltas compare the parts of consecutive views by identity.
                env = self._envs[name] = Environment(get_ruleset(name), snapshots=False)
            if scenario is None:
                scenario = env.ruleset.scenario_ids()[0]
            elif not isinstance(scenario, str):
                raise ValueError(f"scenario must be a string, got {type(scenario).__name__}")
            view = env.reset(scenario, 0 if seed is None else seed, episode_id=episode_id, arm=arm)
        except (UnknownRuleset, UnknownScenario, ValueError) as exc:
            raise request_error(exc) from None
        self._end_played()
        self._env = env
        if self._store is not None:
            self._played = self._store.begin(env, policy, harness)
        self._encoder = ViewEncoder() if view_delta else None
        self._with_outcome = outcome
        return self._observation(view, False, None, None, None)

    def step(
        self, action: SchemaShiftAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SchemaShiftObservation:
        self._check_open()
        env = self._env
        if env is None:
            raise RequestError("EpisodeStateError", "Call reset() before step().", 409)
        try:
            view, breakdown = env.step(action.payload(), action.tokens_used)
        except (InvalidAction, EpisodeStateError, ValueError) as exc:
            raise request_error(exc) from None
        if self._played is not None:
            self._played.stepped(action.tokens_used)
        done = bool(view["done"])
        return self._observation(
            view,
            done,
            scalar_reward(breakdown),
            breakdown,
            episode_outcome(env) if done and self._with_outcome else None,
        )

    def _observation(self, view, done, reward, breakdown, outcome) -> SchemaShiftObservation:
        # Built by the environment from trusted values: no validation pass.
        encoder = self._encoder
        return ServedObservation.model_construct(
            view={} if encoder else view,
            view_delta=encoder.encode(view) if encoder else None,
            done=done,
            reward=reward,
            reward_breakdown=breakdown,
            outcome=outcome,
            metadata={},
        )

    # A step takes tens of microseconds of pure Python: running it on the event loop costs less
    # than OpenEnv's default hand-off to the session's worker thread and back.
    async def reset_async(self, *args: Any, **kwargs: Any) -> SchemaShiftObservation:
        return self.reset(*args, **kwargs)

    async def step_async(self, *args: Any, **kwargs: Any) -> SchemaShiftObservation:
        return self.step(*args, **kwargs)

    # OpenEnv passes a request only the fields these signatures name: they are reset's and step's.
    reset_async.__signature__ = inspect.signature(reset)
    step_async.__signature__ = inspect.signature(step)

    @property
    def state(self) -> SchemaShiftState:
        env = self._env
        if env is None or env.episode is None:
            return SchemaShiftState()
        ep = env.episode
        return SchemaShiftState(
            episode_id=ep.episode_id,
            step_count=ep.step,
            ruleset=env.ruleset.name,
            scenario=ep.task.scenario,
            seed=ep.task.seed,
            done=ep.done,
            max_steps=ep.task.max_steps,
            token_budget_remaining=ep.tokens_remaining,
            drifts_fired=sum(1 for drift in ep.drifts if drift.fired),
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="schemashift",
            description=(
                "Tool-using agents under API schema drift: mail, calendar and CRM APIs whose schemas "
                f"change mid-episode. Rulesets: {', '.join(available_rulesets())}."
            ),
            version=schemashift.__version__,
        )

    def close(self) -> None:
        """Called when the session ends or is reaped; later calls get a clear error."""
        self._closed_reason = "the session was closed (idle past the server's session timeout, or shut down)"
        self._end_played()
        self._envs.clear()
        self._env = None

    # -- for the MCP face ----------------------------------------------------------------------------
    @property
    def core(self) -> Environment | None:
        """The core environment of the current episode (None before the first reset)."""
        return self._env

    def _end_played(self) -> None:
        """Record the episode in play, if any, before its environment is reset or dropped."""
        if self._played is not None:
            self._played.end()
            self._played = None

    def _check_open(self) -> None:
        if self._closed_reason is not None:
            raise RequestError("SessionClosed", f"{self._closed_reason}; open a new session", 410)


class ServedObservation(SchemaShiftObservation):
    """An observation as the environment hands it to OpenEnv, which turns it into a reply with
    `model_dump()` and then serialises that dict to JSON.

    Its values are what the environment just built: the core's views and breakdowns (read-only
    by contract, see `StepPipeline`) and fresh dicts. pydantic's python-mode dump would deep-copy
    every container of them first, which cost the server more than the step itself; a plain
    dump here hands them on as they are, so a reply is serialised once, straight to JSON, before
    the session's next step. Any other dump (JSON mode, include, aliases, ...) is pydantic's."""

    def model_dump(self, *, mode: str = "python", exclude: Any = None, **options: Any) -> dict[str, Any]:
        if mode != "python" or options or not isinstance(exclude, (set, frozenset, type(None))):
            return super().model_dump(mode=mode, exclude=exclude, **options)
        excluded = exclude or ()
        return {name: value for name, value in self.__dict__.items() if name not in excluded}


def scalar_reward(breakdown: dict[str, Any]) -> float | None:
    for key in SCALAR_REWARD_KEYS:
        value = breakdown.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None
