"""Where episodes run. The runner talks to a backend, never to an Environment directly, so the
same sweep can run in-process (default, fastest) or against a server (the remote backend)."""

from __future__ import annotations

from typing import Any, Protocol

from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset


class EnvBackend(Protocol):
    """One episode at a time: reset, step until done, then `outcome()` for the records.

    `outcome()` returns {"task": {tier, family, split, max_steps, ruleset_version, schedule},
    "summary": ruleset summary columns, "drifts": per-drift rows, "history": full step records}.
    Invalid actions on rulesets that reject them raise `schemashift.env.InvalidAction`.
    """

    name: str

    def reset(self, ruleset: str, scenario: str, seed: int) -> dict[str, Any]: ...

    def step(self, action: Any, tokens_used: int = 0) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def outcome(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class InProcessBackend:
    """Environments in this process, one per ruleset, reused across episodes."""

    name = "inprocess"

    def __init__(self) -> None:
        self._envs: dict[str, Environment] = {}
        self._env: Environment | None = None

    def reset(self, ruleset: str, scenario: str, seed: int) -> dict[str, Any]:
        env = self._envs.get(ruleset)
        if env is None:
            env = self._envs[ruleset] = Environment(get_ruleset(ruleset))
        self._env = env
        return env.reset(scenario, seed)

    def step(self, action: Any, tokens_used: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
        return self._env.step(action, tokens_used)

    def outcome(self) -> dict[str, Any]:
        env = self._env
        ep, rs = env.episode, env.ruleset
        task = ep.task
        return {
            "task": {
                "tier": task.tier,
                "family": task.family,
                "split": task.split,
                "max_steps": task.max_steps,
                "ruleset_version": rs.version,
                "schedule": task.schedule(),
            },
            "summary": rs.summary(ep),
            "drifts": rs.drift_outcomes(ep),
            "history": ep.history,
        }

    def close(self) -> None:
        self._envs.clear()
        self._env = None


def make_backend(spec: str = "inprocess") -> EnvBackend:
    if spec == "inprocess":
        return InProcessBackend()
    raise ValueError(f"Unknown backend {spec!r}; available: inprocess")
