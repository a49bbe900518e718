"""What an evaluation measures, named one way everywhere: a subject's results folder (the
workflow), its label (the report, the dashboard) and the record columns both are read back from.

A subject is a rule baseline, a model (API or local), an untrained base model at step 0 or a
checkpoint of a training run, each through one harness. Before this module the harness mark and
the default harness were defined twice (the workflow's folders and the report's labels) and each
copy parsed its own strings; now both sides call these functions, and `check_harness` is the one
place a harness name is validated (against the harness registry, `policies.llm.harnesses`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from schemashift.policies.llm.harnesses import DEFAULT_HARNESS, HARNESSES, get_harness

#: between a subject's name and a harness other than the default one, in folders
#: (results/eval/api/<model>+tools/) and labels (`openai:gpt-4o-mini+tools`) alike
HARNESS_MARK = "+"
#: between a training run (or a model) and a checkpoint's optimizer step in a label
STEP_MARK = "@step-"
#: the kinds of subject, in the order the report shows them
KIND_ORDER = ("rule", "model", "base", "checkpoint")


def check_harness(harness: str) -> str:
    """`harness` if the harness registry knows it; a ValueError naming the known ones otherwise."""
    return get_harness(harness).name


def harness_folder(name: str, harness: str) -> str:
    """A subject's folder for `harness`: its name as it is for the default harness, else marked."""
    return name if harness == DEFAULT_HARNESS else f"{name}{HARNESS_MARK}{harness}"


def split_harness(folder: str) -> tuple[str, str]:
    """(subject name, harness) of a subject's folder (see `harness_folder`)."""
    name, _, harness = folder.partition(HARNESS_MARK)
    return name, harness or DEFAULT_HARNESS


def _present(value: Any) -> bool:
    """A record value that is there: not None and not a frame's NaN."""
    return value is not None and value == value


@dataclass(frozen=True)
class Subject:
    """What an evaluation measures: a rule baseline, a model (API or local), an untrained base
    model at step 0 or a checkpoint of a training run, through one harness (None: a rule
    baseline, which plays none). One value from the record columns (`of_record`) or from a label
    and its kind (`parse`), giving the label the report and the dashboard show (`label`), its
    place in their order (`order`) and the same subject through another harness (`through`).
    A new dimension of what is evaluated is one more field here."""

    kind: str
    #: the policy (rule, model, base) or the training run (checkpoint)
    name: str
    #: the checkpoint's optimizer step (None: the final one of a run, or no checkpoint)
    step: int | None = None
    harness: str | None = None

    @classmethod
    def of_record(cls, row: Mapping[str, Any]) -> Subject:
        """The subject a record (episode, drift row, trajectory or expected cell) measured."""
        policy, run = row["policy"], row.get("train_run")
        step = int(row["checkpoint_step"]) if _present(row.get("checkpoint_step")) else None
        harness = row.get("harness")
        harness = harness if isinstance(harness, str) else None
        if _present(run):
            return cls("checkpoint", run, step, harness)
        if step == 0:
            return cls("base", policy, 0, harness)
        if _present(row.get("base_model")) or ":" in policy:
            return cls("model", policy, step, harness)
        return cls("rule", policy, step, harness)

    @classmethod
    def parse(cls, label: str, kind: str) -> Subject:
        """The subject of a label (see `label`) of a known kind."""
        base, mark, harness = label.rpartition(HARNESS_MARK)
        if not mark or harness not in HARNESSES:  # a `+` of the name itself (`openai:a+b`)
            base, harness = label, None
        head, mark, step = base.rpartition(STEP_MARK)
        if mark and (step.isdigit() or (kind == "checkpoint" and step == "final")):
            return cls(kind, head, int(step) if step.isdigit() else None, harness)
        return cls(kind, base, 0 if kind == "base" else None, harness)

    @property
    def unmarked(self) -> str:
        """The label in the default harness: `<run>@step-<n>` for a checkpoint (`final` where the
        step is unknown), `<policy>@step-<n>` for a checkpoint evaluated outside a named run,
        else the policy."""
        if self.kind == "checkpoint":
            return f"{self.name}{STEP_MARK}{self.step if self.step is not None else 'final'}"
        if self.step:
            return f"{self.name}{STEP_MARK}{self.step}"
        return self.name

    @property
    def label(self) -> str:
        """How the subject appears everywhere; a harness other than the default one follows as
        `+<harness>` (each harness is a subject of its own)."""
        if self.harness in (None, "", DEFAULT_HARNESS):
            return self.unmarked
        return f"{self.unmarked}{HARNESS_MARK}{self.harness}"

    @property
    def columns(self) -> dict[str, Any]:
        """The record columns that name it beside the policy (which `of_record` reads back)."""
        return {
            "train_run": self.name if self.kind == "checkpoint" else None,
            "checkpoint_step": self.step,
            "harness": self.harness,
        }

    def through(self, harness: str | None) -> Subject:
        """The same subject through `harness`."""
        return replace(self, harness=harness)

    @property
    def order(self) -> tuple[Any, ...]:
        """Rule baselines, model baselines, untrained bases, then checkpoints by run and step; a
        subject's harnesses side by side (the default first)."""
        harness = self.harness if self.harness not in (None, "") else DEFAULT_HARNESS
        rank = KIND_ORDER.index(self.kind) if self.kind in KIND_ORDER else len(KIND_ORDER)
        if self.kind == "checkpoint" and self.step is not None:
            return (rank, self.name, self.step, harness != DEFAULT_HARNESS, harness)
        return (rank, self.unmarked, 0, harness != DEFAULT_HARNESS, harness)
