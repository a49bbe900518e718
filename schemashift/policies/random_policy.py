"""The floor: uniformly random calls on the endpoints the agent knows to be live.

Parameters are drawn from the task's own entities (addresses, quoted phrases, dates, ids seen
in responses), so a random success means the task is too easy, not that the policy guessed a
format. It occasionally inspects, reports or completes. Its generator is seeded from the
scenario and seed of the cell it is started on (`start_episode`; else the ones the observation
names, as legacy's does, or its task text where it names no seed), so an episode replays
identically.
"""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING, Any

from schemashift.policies import base
from schemashift.policies.base import EMAIL_PATTERN, ActionDict, Observation

if TYPE_CHECKING:
    from schemashift.env.rulesets.base import Ruleset

EMAIL = re.compile(EMAIL_PATTERN)
QUOTED = re.compile(r"'([^']{2,80})'")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}Z)?")
RECORD_ID = re.compile(r"\b(?:c|evt|msg)_\d+\b")
DEFAULT_KINDS = ("field_rename", "endpoint_deprecation", "new_required_param", "rate_limit_tightening")

P_COMPLETE, P_INSPECT, P_REPORT, P_OPTIONAL = 0.04, 0.06, 0.04, 0.3
#: the address it writes to where the task text names none (v1's tasks make the agent look them up)
NO_ADDRESS = "someone@example.com"


class RandomPolicy:
    name = "random"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.rng: random.Random | None = None
        self.cell: Any = None
        self.schemas: dict[str, dict[str, Any]] = {}
        self.words: list[str] = []
        self.emails: list[str] = []
        self.ids: list[str] = []

    def start_episode(self, cell: Any) -> None:
        """The cell about to be played (after `reset`): its scenario and seed seed the generator."""
        self.cell = cell

    def _start(self, observation: Observation) -> None:
        if self.cell is not None:
            scenario, seed = self.cell.scenario, self.cell.seed
        else:
            # v1 names no seed: its task text, drawn from the seed, tells the episodes apart
            scenario = observation.get("task_id")
            seed = observation.get("seed", observation.get("task_description"))
        self.rng = random.Random(f"random-policy/{scenario}/{seed}")
        self.schemas = {tool: dict(view) for tool, view in (observation.get("tool_schemas") or {}).items()}
        text = observation.get("task_description", "")
        self.emails = sorted(set(EMAIL.findall(text))) or [NO_ADDRESS]
        self.words = sorted(set(QUOTED.findall(text)) | set(ISO_TIME.findall(text))) or ["update"]

    def _learn(self, observation: Observation) -> None:
        """Keep what the last response revealed: a live schema, or record ids."""
        last = observation.get("last_response") or {}
        body = last.get("body")
        if isinstance(body, dict) and "schema" in body and body.get("tool") in self.schemas:
            self.schemas[body["tool"]] = dict(body["schema"])
        if last.get("ok") and body is not None:
            for found in RECORD_ID.findall(str(body)):
                if found not in self.ids:
                    self.ids.append(found)

    def act(self, observation: Observation) -> ActionDict:
        if self.rng is None:
            self._start(observation)
        self._learn(observation)
        rng = self.rng
        tools = sorted(self.schemas)
        if not tools:
            return base.complete_task("No tools.")
        roll = rng.random()
        if roll < P_COMPLETE:
            return base.complete_task(f"Done. {rng.choice(self.words)}")
        if roll < P_COMPLETE + P_INSPECT:
            return base.inspect_schema(rng.choice(tools))
        if roll < P_COMPLETE + P_INSPECT + P_REPORT:
            kinds = observation.get("drift_kinds") or DEFAULT_KINDS
            return base.report_drift(rng.choice(tools), rng.choice(kinds), "Something changed.")
        tool = rng.choice(tools)
        live = [
            name
            for name, entry in self.schemas[tool].items()
            if entry.get("status", "active") in ("active", "deprecated")
        ]
        if not live:
            return base.inspect_schema(tool)
        endpoint = rng.choice(live)
        entry = self.schemas[tool][endpoint]
        required = set(entry.get("required") or ())
        params = {
            name: self._value(kind)
            for name, kind in (entry.get("params") or {}).items()
            if name in required or rng.random() < P_OPTIONAL
        }
        return base.call_tool(tool, endpoint, params)

    def _value(self, kind: str) -> Any:
        rng = self.rng
        if kind == "int":
            return rng.randint(1, 20)
        if kind.startswith("list"):
            emails = rng.sample(self.emails, rng.randint(1, min(3, len(self.emails))))
            return [{"email": e} for e in emails] if "object" in kind else emails
        pool = self.words + self.emails + self.ids
        return rng.choice(pool)


def make(_ruleset: Ruleset) -> RandomPolicy:
    """The factory `schemashift.policies.BUILTIN` names for this policy."""
    return RandomPolicy()
