"""Which comparisons the report tests together, and what a warm start trained on.

Holm's adjustment is per question: every comparison belongs to exactly one family, so a
comparison shown in several tables (a run's trained checkpoint against its step 0 is in Table A,
the learning curves and the baselines table) has one adjusted p-value and one detectable
difference. `FAMILIES` names each question; `members` lists its comparisons as
(ruleset, subject, reference, metric, column) keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.report import arms
from schemashift.report.load import OVERALL
from schemashift.report.stats import Stat, adjust
from schemashift.rollout.subject import DEFAULT_HARNESS

if TYPE_CHECKING:
    from schemashift.report.analysis import Analysis

Key = tuple[str, str, str, str, str]
HEADLINE = ("score", "success")


def _training(a: Analysis) -> Iterator[Key]:
    for run in a.runs.values():
        base = a.base_subject(run)
        for ruleset in a.run_rulesets(run):
            for _, subject in a.checkpoints(run):
                if subject and base and subject != base:
                    yield from ((ruleset, subject, base, m, OVERALL) for m in HEADLINE)


def _training_columns(a: Analysis) -> Iterator[Key]:
    for run in a.runs.values():
        base = a.base_subject(run)
        for ruleset in a.run_rulesets(run):
            columns = [c for c in a.groups(ruleset) if c != OVERALL]
            if base:
                yield from ((ruleset, run.trained_subject, base, m, c) for m in HEADLINE for c in columns)


def _versus(a: Analysis) -> Iterator[Key]:
    for run in a.runs.values():
        for ruleset in a.run_rulesets(run):
            for baseline in a.subjects(ruleset):
                if a.kinds.get(baseline) in ("model", "base") and baseline != a.base_subject(run):
                    yield from ((ruleset, run.trained_subject, baseline, m, OVERALL) for m in HEADLINE)


def _ablation(vary: str) -> Callable[[Analysis], Iterator[Key]]:
    def members(a: Analysis) -> Iterator[Key]:
        for group in ablation_groups(a, vary):
            for run in group[1:]:
                if run.ruleset in a.rulesets:
                    yield (run.ruleset, run.trained_subject, group[0].trained_subject, "score", OVERALL)

    return members


def _harnesses(a: Analysis) -> Iterator[Key]:
    for ruleset in a.rulesets:
        for found in a.harnesses(ruleset).values():
            for harness, subject in found.items():
                if harness != DEFAULT_HARNESS and DEFAULT_HARNESS in found:
                    yield from ((ruleset, subject, found[DEFAULT_HARNESS], m, OVERALL) for m in HEADLINE)


#: family -> (the question it answers, its comparisons)
FAMILIES: dict[str, tuple[str, Callable[[Analysis], Iterator[Key]]]] = {
    "training": (
        "does a checkpoint or warm start differ from its untrained base overall (every run, step, ruleset)?",
        _training,
    ),
    "training by column": (
        "where does the trained checkpoint differ from its untrained base (each scenario and tier)?",
        _training_columns,
    ),
    "versus baselines": ("does the trained checkpoint differ from another model or base model?", _versus),
    "reward ablation": ("does another reward change the trained score?", _ablation("reward")),
    "model ablation": ("does another base model change the trained score?", _ablation("base_model")),
    "harnesses": ("does a harness change a model's result against the default one?", _harnesses),
    "drift cost": (
        "does drift change a subject's result against the same cells without drift (overall)?",
        arms.members,
    ),
    "drift cost by kind": (
        "does a drift kind change a subject's result against the same cells without drift?",
        arms.members_by_kind,
    ),
}


def adjusted_families(a: Analysis) -> dict[Key, Stat]:
    """Every family's comparisons, Holm-adjusted within it; a key in two families stays in the
    first (the families above are disjoint by construction, the order only settles that)."""
    out: dict[Key, Stat] = {}
    for family, (_, members) in FAMILIES.items():
        keys = list(dict.fromkeys(k for k in members(a) if k not in out))
        stats = [_stat(a, key) for key in keys]
        out.update(zip(keys, adjust(stats, family), strict=True))
    return out


def _stat(a: Analysis, key: Key) -> Stat:
    """A comparison of a family, unadjusted: a drift cost against the subject's own control arm
    (`arms.CONTROL_REFERENCE`), else two subjects paired (`Analysis.paired`)."""
    ruleset, subject, reference, metric, column = key
    if reference == arms.CONTROL_REFERENCE:
        return arms.cost(a, ruleset, subject, metric, column)
    return a.paired(*key)


def family_sizes(a: Analysis) -> dict[str, int]:
    """How many tested comparisons (with a p-value) each family holds."""
    sizes = dict.fromkeys(FAMILIES, 0)
    for stat in a.families.values():
        if stat.family is not None and stat.p_value is not None:
            sizes[stat.family] += 1
    return sizes


def warm_start_tasks(a: Analysis, subject: str) -> set[tuple[str, str, int | None]]:
    """(ruleset, scenario, seed or None where the seed does not vary the task) of every task the
    warm start of `subject`'s model learned from, from the `tasks` of the `sft.json` beside a
    local model (`models.<name>.policy: hf:<folder>`); empty where there is none."""
    entry = a.model_entry(subject) or {}
    policy = str(entry.get("policy") or "")
    manifest = Path(policy.partition(":")[2]) / "sft.json" if policy.startswith("hf:") else None
    if manifest is None or not manifest.is_file():
        return set()
    document: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
    return {(t["ruleset"], t["scenario"], t["seed"]) for t in document.get("tasks") or []}


def ablation_groups(a: Analysis, vary: str) -> list[list[Any]]:
    """Runs that differ only in `vary` (reward or base_model): same ruleset and the other field.
    One arm per configured run (its first repeat); the repeats table pools the others."""
    keep = "base_model" if vary == "reward" else "reward"
    groups: dict[tuple[Any, Any], list[Any]] = {}
    for run in a.runs.values():
        if run.name != run.configured:
            continue
        groups.setdefault((run.ruleset, getattr(run, keep)), []).append(run)
    return [g for g in groups.values() if len({getattr(r, vary) for r in g}) > 1]
