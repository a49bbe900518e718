"""Data that describes one episode: the task instance, its drift plan and its mutable state."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from schemashift.env.arms import DEFAULT_ARM


@dataclass(frozen=True)
class ScenarioInfo:
    """What a catalogue listing shows about a scenario, without building an episode."""

    id: str
    tier: str
    family: str
    tools: tuple[str, ...]
    max_steps: int
    description: str


@dataclass(frozen=True)
class DriftSpec:
    """One planned schema change: `kind` on `tool` (and `endpoint`, or tool-wide).

    It fires at step `fires_at_step` (the clock), or, when `on_call` is set, just before the
    agent's `on_call`-th call to `endpoint` (to any endpoint of the tool for a tool-wide kind),
    so that the call meets it whatever the agent's pace. `duration` is the number of steps a
    temporary drift lasts (None: for the rest of the episode).
    """

    tool: str
    kind: str
    fires_at_step: int | None
    endpoint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    duration: int | None = None
    on_call: int | None = None

    def to_dict(self) -> dict[str, Any]:
        spec = {
            "tool": self.tool,
            "endpoint": self.endpoint,
            "kind": self.kind,
            "fires_at_step": self.fires_at_step,
            "details": self.details,
            "duration": self.duration,
        }
        if self.on_call is not None:
            spec["on_call"] = self.on_call
        return spec


@dataclass(slots=True)
class Task:
    """A concrete task instance: everything a ruleset draws for (scenario, seed).

    Treat it as immutable; it is not frozen only because frozen dataclasses are slow to build
    and one is built at every reset.
    """

    scenario: str
    seed: int
    tier: str
    family: str
    max_steps: int
    token_budget: int
    tools: tuple[str, ...]
    seed_data: dict[str, dict[str, Any]]
    description: str
    success_criteria: tuple[str, ...]
    drift_plan: tuple[DriftSpec, ...]
    ground_truth: dict[str, Any]
    split: str | None = None
    #: the arm it is played in (`env.arms`): a control task is its drift task with no plan
    arm: str = DEFAULT_ARM
    #: the recorded name of the salt its streams were drawn under (v1's held-out split), if any
    salt_id: str | None = None

    def schedule(self) -> list[dict[str, Any]]:
        return [d.to_dict() for d in self.drift_plan]

    def schedule_hash(self) -> str:
        """A digest of the drift schedule: equal schedules give equal hashes on any machine."""
        text = json.dumps(self.schedule(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class DriftEvent:
    """A drift of the running episode: its spec plus what has happened to it so far."""

    __slots__ = ("spec", "index", "fired", "fired_step", "detected", "reported_step")

    def __init__(self, spec: DriftSpec, index: int) -> None:
        self.spec = spec
        self.index = index
        self.fired = False
        self.fired_step: int | None = None
        self.detected = False
        self.reported_step: int | None = None


class Episode:
    """Mutable state of one running episode, owned by the Environment and shaped by the ruleset."""

    __slots__ = (
        "task",
        "episode_id",
        "step",
        "tokens_remaining",
        "tools",
        "drifts",
        "drifts_by_step",
        "agent_state",
        "history",
        "visible_history",
        "done",
        "cumulative_reward",
        "docs",
        "extra",
    )

    def __init__(self, task: Task, episode_id: str, tools: dict[str, Any]) -> None:
        self.task = task
        self.episode_id = episode_id
        self.step = 0
        self.tokens_remaining = task.token_budget
        # The ruleset's own tool objects by name (`Ruleset.make_tools`); only its hooks use them.
        self.tools = tools
        self.drifts = [DriftEvent(spec, i) for i, spec in enumerate(task.drift_plan)]
        self.drifts_by_step: dict[int, list[DriftEvent]] = {}
        for drift in self.drifts:
            if drift.spec.fires_at_step is not None:
                self.drifts_by_step.setdefault(drift.spec.fires_at_step, []).append(drift)
        self.agent_state: dict[str, Any] = {}
        # Full step records: {step, action, response, feedback, drift_events, reward}.
        self.history: list[dict[str, Any]] = []
        # What observations show of each step, built once per step by the ruleset.
        self.visible_history: list[dict[str, Any]] = []
        self.done = False
        self.cumulative_reward = 0.0
        # The documentation observations show, cached by the ruleset; None after a schema change.
        self.docs: dict[str, Any] | None = None
        # Ruleset-specific scratch space (counters, caches), never shown to the agent.
        self.extra: dict[str, Any] = {}
