"""What an evaluation measures, named one way everywhere: a subject's results folder (the
workflow), its label (the report, the dashboard) and the record columns both are read back from.

A subject is a rule baseline, a model (API or local), an untrained base model at step 0 or a
checkpoint of a training run, each through one harness. Before this module the harness mark and
the default harness were defined twice (the workflow's folders and the report's labels) and each
copy parsed its own strings; now both sides call these functions, and `check_harness` is the one
place a harness name is validated (against the harness registry, `policies.llm.harnesses`).
"""

from __future__ import annotations

from typing import Any

from schemashift.policies.llm.harnesses import DEFAULT_HARNESS, get_harness

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


def subject_label(
    policy: str, train_run: Any = None, checkpoint_step: Any = None, harness: Any = None
) -> str:
    """How an evaluated subject appears everywhere, from its record columns: a checkpoint of a
    training run as `<run>@step-<n>` (its policy name carries an adapter path), anything else by
    its policy name, with `@step-<n>` for a checkpoint evaluated outside a named run; a harness
    other than the default one follows as `+<harness>` (each harness is a subject of its own)."""
    step = int(checkpoint_step) if _present(checkpoint_step) else None
    if _present(train_run):
        label = f"{train_run}{STEP_MARK}{step if step is not None else 'final'}"
    elif step is None or step == 0:
        label = policy
    else:
        label = f"{policy}{STEP_MARK}{step}"
    return harness_label(label, harness) if isinstance(harness, str) else label


def harness_label(label: str, harness: str) -> str:
    """The label of a subject through `harness`, from its label in the default harness."""
    return label if harness in ("", DEFAULT_HARNESS) else f"{label}{HARNESS_MARK}{harness}"


def split_label(label: str) -> tuple[str, str]:
    """(the subject's label in the default harness, its harness) of a subject label."""
    base, mark, harness = label.rpartition(HARNESS_MARK)
    if not mark or not harness.isidentifier():
        return label, DEFAULT_HARNESS
    return base, harness


def split_step(label: str) -> tuple[str, int | None]:
    """(run or model, checkpoint step) of a label in the default harness; no step: None."""
    head, mark, step = label.rpartition(STEP_MARK)
    return (head, int(step)) if mark and step.isdigit() else (label, None)


def subject_kind(policy: str, train_run: Any, checkpoint_step: Any, base_model: Any) -> str:
    """`checkpoint` (of a training run), `base` (an untrained model at step 0), `model` (an API or
    other model baseline) or `rule` (a rule-based baseline), from the record columns."""
    if _present(train_run):
        return "checkpoint"
    if _present(checkpoint_step) and int(checkpoint_step) == 0:
        return "base"
    if _present(base_model) or ":" in policy:
        return "model"
    return "rule"


def subject_order(label: str, kind: str) -> tuple[Any, ...]:
    """Rule baselines, model baselines, untrained bases, then checkpoints by run and step; a
    subject's harnesses side by side (the default first)."""
    base, harness = split_label(label)
    order = (harness != DEFAULT_HARNESS, harness)
    run, step = split_step(base)
    if kind == "checkpoint" and step is not None:
        return (KIND_ORDER.index(kind), run, step, *order)
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), base, 0, *order)
