"""Everything the report computes, from the aggregated results: subjects, coverage, statistics.

`Analysis` is built once per `schemashift report` part; `tables` renders its numbers and
`figures` plots the same numbers, so a table and a figure never disagree.

Subjects are what was evaluated: rule baselines (`rule`), model baselines such as API models
(`model`), untrained base models at step 0 (`base`) and the checkpoints of training runs
(`checkpoint`, labelled `<run>@step-<n>`, the rows of one (train_run, checkpoint_step)).

Training runs come from their run index (`run.json`, which the aggregate copies into the
manifest's `training` section): base model, checkpoints, the step the report calls trained.
A run configured but never trained comes from its config entry, resolved as the trainer would,
so its checkpoints read missing. A run's step 0 is its warm start where it has one (the run's
rows of step 0), else the `base` subject `hf:<its base model>`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.lineage import GO_NO_GO_STEP, go_no_go
from schemashift.report import ReportError, published
from schemashift.report.load import (
    ARM,
    OVERALL,
    catalogue_tier,
    manifest_cells,
    report_policies,
    sorted_scenarios,
    tier_rank,
    with_arm,
)
from schemashift.report.stats import (
    BOUNDED,
    MISSING_STAT,
    UNIT,
    Stat,
    generalisation_stat,
    metric_stat,
    paired_stat,
    savings_stat,
    seed_means,
)
from schemashift.rollout.subject import DEFAULT_HARNESS, Subject

if TYPE_CHECKING:
    import pandas as pd

TIER_PREFIX = "tier:"
#: headline metrics: episode column -> name
METRICS = {"score": "mean score", "success": "success rate"}
#: the original training log's names for the legacy ruleset's headline columns
#: (docs/original-training-log.md)
SEED_METRICS = {"legacy": ("shaped_total", "binary")}
#: per-episode cost columns -> their names in tables and figures
EFFICIENCY_COLUMNS = {
    "tool_calls": "tool calls",
    "tokens_in": "tokens in",
    "tokens_out": "tokens out",
    "steps": "turns",
    "wall_s": "wall s",
}
#: share of the way from the first to the peak smoothed reward that counts as converged
CONVERGED = 0.9
#: the mark of a subject evaluated on tasks it was trained on (`Analysis.trained_on`)
TRAINED_ON = "trained on these tasks"


@dataclass
class TrainingRun:
    """A training run: what it trains, its checkpoints (saved or planned) and the one the report
    calls trained (the run's `report_step`). `indexed`: built from the run's own index."""

    name: str
    base_model: str
    ruleset: str
    reward: str
    split: str | None
    steps: list[int]
    trained_step: int
    indexed: bool
    go_no_go_step: int = GO_NO_GO_STEP
    description: str | None = None
    saved: tuple[int, ...] = ()

    def label(self, step: int) -> str:
        return f"{self.name}@step-{step}"

    @property
    def trained_subject(self) -> str:
        """The subject the report calls "trained": the checkpoint at `trained_step`."""
        return self.label(self.trained_step)

    @property
    def configured(self) -> str:
        """The configured run this run is a repeat of (`train.runs.<run>.repeats`), and itself
        for the first repeat."""
        from schemashift.runs.contract import split_repeat

        return split_repeat(self.name)[0]


def indexed_run(index: Mapping[str, Any]) -> TrainingRun:
    """A trained run from its run index: the saved and planned checkpoints, and its report step
    (the trainer resolves it; an index without one reports its last saved step)."""
    saved = [int(c["step"]) for c in index.get("checkpoints") or []]
    planned = [int(s) for s in index.get("save_steps") or []]
    steps = sorted({*saved, *planned})
    report_step = index.get("report_step")
    if report_step is None and not planned:
        raise ReportError(f"run index of {index.get('train_run')!r}: neither report_step nor save_steps")
    return TrainingRun(
        name=index["train_run"],
        base_model=index["base_model"],
        ruleset=index["ruleset"],
        reward=index["reward"],
        split=index.get("split"),
        steps=steps,
        trained_step=int(report_step) if report_step is not None else planned[-1],
        indexed=True,
        go_no_go_step=int(index.get("go_no_go_step") or GO_NO_GO_STEP),
        description=index.get("description"),
        saved=tuple(sorted(saved)),
    )


def configured_run(config: Mapping[str, Any], name: str) -> TrainingRun:
    """A run that never trained, from its config entry resolved as the trainer resolves it: its
    planned checkpoints and its report step (default: the last saved step)."""
    from schemashift.runs.contract import RunConfigError, resolve_run

    try:
        run = resolve_run(dict(config), name)
    except RunConfigError as exc:
        raise ReportError(f"report config: {exc}") from None
    return TrainingRun(
        name=name,
        base_model=run.base_model,
        ruleset=run.ruleset,
        reward=run.reward,
        split=run.split,
        steps=run.save_steps(),
        trained_step=run.reported_step(),
        indexed=False,
        go_no_go_step=run["go_no_go_step"],
        description=run.description,
    )


@dataclass
class Cover:
    expected: int | None
    graded: int
    infra_error: int
    missing: int | None

    @property
    def provisional(self) -> bool:
        return self.infra_error > 0 or (self.expected is not None and self.graded < self.expected)


class Analysis:
    def __init__(
        self,
        episodes: pd.DataFrame,
        manifest: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        drifts: pd.DataFrame | None = None,
        training: pd.DataFrame | None = None,
        examples: Sequence[Mapping[str, Any]] = (),
        samples: int = 2000,
        seed: int = 0,
    ) -> None:
        # every table, figure and comparison but the drift cost reads the drift arm (`episodes`,
        # `drifts`, `expected`): control rows change none of them; `report.arms` reads both arms
        episodes = with_arm(episodes.copy())
        self.all_episodes = episodes
        self.episodes = episodes[episodes[ARM] == DRIFT].reset_index(drop=True)
        self.control = episodes[episodes[ARM] == CONTROL].reset_index(drop=True)
        self.manifest = manifest
        self.config = config or {"models": {}, "train": {"runs": {}, "defaults": {}}, "report": {}}
        self.all_drifts = None if drifts is None else with_arm(drifts.copy())
        self.drifts = (
            None if drifts is None else self.all_drifts[self.all_drifts[ARM] == DRIFT].reset_index(drop=True)
        )
        self.training = training
        self.examples = list(examples)
        self.samples = samples
        self.seed = seed
        self.expected = manifest_cells(manifest)
        self.expected_control = manifest_cells(manifest, CONTROL)
        self.rulesets = sorted(set(self.episodes["ruleset"]) | {c["ruleset"] for c in self.expected})
        self.graded = self.episodes[self.episodes["status"] == "graded"]
        self._stats: dict[tuple[Any, ...], Stat] = {}
        self._trained: dict[tuple[str, str], bool] = {}

    # -- subjects, scenarios and coverage ------------------------------------------------------------

    @cached_property
    def tiers(self) -> dict[str, dict[str, str | None]]:
        out: dict[str, dict[str, str | None]] = {}
        for ruleset in self.rulesets:
            rows = self.episodes[self.episodes["ruleset"] == ruleset]
            tiers: dict[str, str | None] = {}
            for scenario, tier in zip(rows["scenario"], rows["tier"], strict=True):
                if tiers.get(scenario) is None:
                    tiers[scenario] = tier if isinstance(tier, str) else None
            for cell in self.expected:
                if cell["ruleset"] == ruleset and tiers.get(cell["scenario"]) is None:
                    tiers[cell["scenario"]] = catalogue_tier(ruleset, cell["scenario"])
            out[ruleset] = tiers
        return out

    def scenarios(self, ruleset: str) -> list[str]:
        tiers = self.tiers[ruleset]
        return sorted_scenarios(tiers, tiers)

    def tier_names(self, ruleset: str) -> list[str]:
        return sorted({t for t in self.tiers[ruleset].values() if t is not None}, key=tier_rank)

    def groups(self, ruleset: str) -> dict[str, list[str]]:
        """Aggregate columns: each scenario, each tier, overall -> the scenarios they average."""
        scenarios = self.scenarios(ruleset)
        out = {s: [s] for s in scenarios}
        for tier in self.tier_names(ruleset):
            out[TIER_PREFIX + tier] = [s for s in scenarios if self.tiers[ruleset][s] == tier]
        out[OVERALL] = scenarios
        return out

    def subjects(self, ruleset: str) -> list[str]:
        rows = self.episodes[self.episodes["ruleset"] == ruleset]
        return report_policies(rows, [c for c in self.expected if c["ruleset"] == ruleset])

    @cached_property
    def kinds(self) -> dict[str, str]:
        kinds = dict(zip(self.episodes["label"], self.episodes["kind"], strict=True))
        for cell in self.expected:
            kinds.setdefault(cell["subject"], Subject.of_record(cell).kind)
        return kinds

    @cached_property
    def _coverage(self) -> dict[tuple[str, str, str], Cover]:
        out: dict[tuple[str, str, str], Cover] = {}
        if self.expected:
            for cell in self.expected:
                key = (cell["ruleset"], cell["subject"], cell["scenario"])
                c = out.setdefault(key, Cover(0, 0, 0, 0))
                c.expected += 1
                status = cell.get("status")
                if status == "graded":
                    c.graded += 1
                elif status == "infra_error":
                    c.infra_error += 1
                else:
                    c.missing += 1
        from_manifest = set(out)
        counts = self.episodes.groupby(["ruleset", "label", "scenario", "status"]).size()
        for (ruleset, label, scenario, status), n in counts.items():
            key = (ruleset, label, scenario)
            if key in from_manifest:
                continue
            c = out.setdefault(key, Cover(None, 0, 0, None))  # rows outside the expected cells
            if status == "graded":
                c.graded += int(n)
            else:
                c.infra_error += int(n)
        return out

    def cover(self, ruleset: str, subject: str, scenario: str) -> Cover:
        return self._coverage.get(
            (ruleset, subject, scenario),
            Cover(0 if self.manifest else None, 0, 0, 0 if self.manifest else None),
        )

    def provisional(self, ruleset: str, subject: str, scenarios: Sequence[str]) -> bool:
        return any(self.cover(ruleset, subject, s).provisional for s in scenarios)

    def ran(self, ruleset: str) -> list[str]:
        """The subjects with at least one row (graded or infra_error) on `ruleset`, in subject order:
        those the report shows row by row. The others are `not_run`."""
        played = set(self.episodes.loc[self.episodes["ruleset"] == ruleset, "label"])
        return [s for s in self.subjects(ruleset) if s in played]

    def harnesses(self, ruleset: str) -> dict[str, dict[str, str]]:
        """Each model that ran on `ruleset` (rule baselines have no harness), by its label in the
        default harness -> harness -> the subject that played it, in subject order (the default
        harness first): the harness table's rows and the dashboard's harness dimension."""
        by_model: dict[str, dict[str, str]] = {}
        for subject in self.ran(ruleset):
            if self.kinds.get(subject) != "rule":
                parsed = Subject.parse(subject, self.kinds[subject])
                by_model.setdefault(parsed.unmarked, {})[parsed.harness or DEFAULT_HARNESS] = subject
        return by_model

    def not_run(self, ruleset: str) -> dict[str, str]:
        """Expected subjects without a single row on `ruleset` -> why they did not run (one line),
        so the report says so once instead of a row of `missing` per column."""
        ran = set(self.ran(ruleset))
        return {s: self.why_not_run(s) for s in self.subjects(ruleset) if s not in ran}

    def not_run_lines(self, ruleset: str, kinds: Sequence[str] | None = None) -> list[str]:
        """One line per reason: `not run: <reason>: <subjects>`, a run's checkpoints written as
        `run@step-2, 4, 6`; only subjects of `kinds` where given."""
        by_reason: dict[str, list[str]] = {}
        for subject, reason in self.not_run(ruleset).items():
            if kinds is not None and self.kinds.get(subject) not in kinds:
                continue
            by_reason.setdefault(reason, []).append(subject)
        return [f"not run: {reason}: {compact_subjects(names)}" for reason, names in by_reason.items()]

    def why_not_run(self, subject: str) -> str:
        """The reason a subject has no results: training switched off here, a run not trained (yet),
        a checkpoint not saved (yet), or an evaluation that has not run or failed."""
        kind = self.kinds.get(subject)
        runs = [r for r in self.runs.values() if subject in {s for _, s in self.checkpoints(r)}]
        if kind in ("base", "checkpoint") and runs and not any(r.indexed for r in runs):
            train = self.config.get("train") or {}
            if train.get("enabled") is False:
                return "training is disabled (train.enabled: false)"
            if self.config.get("trains_here") is False:
                return "training is disabled on this machine (train.enabled: auto and no GPU visible)"
            if kind == "checkpoint":
                return f"training run {runs[0].name} has not trained yet (no run index)"
        if kind == "checkpoint" and runs:
            run, step = runs[0], int(subject.rpartition("@step-")[2])
            if step and step not in run.saved:
                last = f"its last saved checkpoint is step {run.saved[-1]}" if run.saved else "none saved"
                return f"checkpoint not saved yet ({run.name}: {last})"
        return "no results: its evaluation has not run or failed (see results/logs)"

    # -- statistics --------------------------------------------------------------------------------

    def rows(self, ruleset: str, subject: str) -> pd.DataFrame:
        g = self.graded
        return g[(g["ruleset"] == ruleset) & (g["label"] == subject)]

    def stat(self, ruleset: str, subject: str, metric: str, column: str) -> Stat:
        """`metric` of `subject` over one aggregate column (scenario, tier:<t> or overall)."""
        key = ("stat", ruleset, subject, metric, column)
        if key not in self._stats:
            scenarios = self.groups(ruleset).get(column)
            if not scenarios:
                self._stats[key] = MISSING_STAT
            else:
                rows = self.rows(ruleset, subject)
                flag = self.provisional(ruleset, subject, scenarios)
                self._stats[key] = metric_stat(rows, metric, scenarios, flag, self.seeds_vary_task(ruleset))
        return self._stats[key]

    def paired(self, ruleset: str, subject: str, reference: str, metric: str, column: str = OVERALL) -> Stat:
        """`subject - reference` on the cells both graded (see stats.paired_stat)."""
        key = ("paired", ruleset, subject, reference, metric, column)
        if key not in self._stats:
            scenarios = self.groups(ruleset).get(column) or []
            flag = self.provisional(ruleset, subject, scenarios) or self.provisional(
                ruleset, reference, scenarios
            )
            self._stats[key] = paired_stat(
                self.rows(ruleset, subject),
                self.rows(ruleset, reference),
                metric,
                scenarios,
                flag,
                self.seeds_vary_task(ruleset),
            )
        return self._stats[key]

    def compared(
        self, ruleset: str, subject: str, reference: str, metric: str, column: str = OVERALL
    ) -> Stat:
        """`subject - reference` with the adjusted p-value and detectable difference of the one
        Holm family (question) it belongs to (`comparisons.FAMILIES`), the same in every table;
        unadjusted where no family holds it."""
        key = (ruleset, subject, reference, metric, column)
        return self.families.get(key) or self.paired(ruleset, subject, reference, metric, column)

    @cached_property
    def families(self) -> dict[tuple[str, str, str, str, str], Stat]:
        """Every comparison of a Holm family, adjusted (`comparisons.adjusted_families`)."""
        from schemashift.report.comparisons import adjusted_families

        return adjusted_families(self)

    def seeds_vary_task(self, ruleset: str) -> bool:
        """Whether a seed draws a new task instance on `ruleset` (`Ruleset.seeds_vary_task`);
        where not, its seeds are attempts at one task per scenario."""
        from schemashift.env.rulesets import UnknownRuleset, get_ruleset

        try:
            return get_ruleset(ruleset).seeds_vary_task
        except UnknownRuleset:  # a ruleset this checkout does not know: its seeds are taken as tasks
            return True

    def shown(self, ruleset: str, subject: str | None) -> str:
        """A subject's label in tables and figures, marked where it is evaluated on tasks it was
        trained on (`missing` for no subject)."""
        if subject is None:
            return "missing"
        return f"{subject} ({TRAINED_ON})" if self.trained_on(ruleset, subject) else subject

    def trained_on(self, ruleset: str, subject: str) -> bool:
        """Whether `subject` is evaluated on tasks it was trained on: a checkpoint of a run trained
        on `ruleset` where its seeds do not vary the task or its evaluated split is the run's, or
        a model whose warm start (`sft.json`'s tasks) saw this ruleset's evaluated tasks."""
        key = (ruleset, subject)
        if key not in self._trained:
            self._trained[key] = self._trained_on(ruleset, subject)
        return self._trained[key]

    def _trained_on(self, ruleset: str, subject: str) -> bool:
        from schemashift.report.comparisons import warm_start_tasks

        kind = self.kinds.get(subject)
        rows = self.rows(ruleset, subject)
        vary = self.seeds_vary_task(ruleset)
        if kind == "checkpoint":
            run = self.runs.get(Subject.parse(subject, kind).name)
            if run is not None and run.ruleset == ruleset:
                if not vary or (run.split is not None and run.split in set(rows["split"].dropna())):
                    return True
        seen = {(s, seed) for r, s, seed in warm_start_tasks(self, subject) if r == ruleset}
        played = {
            (s, int(seed) if vary else None) for s, seed in zip(rows["scenario"], rows["seed"], strict=True)
        }
        return bool(seen & played)

    def generalisation(self, ruleset: str, subject: str, metric: str, column: str) -> Stat:
        """`metric` over new scenarios like those of `column` (see stats.generalisation_stat)."""
        key = ("general", ruleset, subject, metric, column)
        if key not in self._stats:
            scenarios = self.groups(ruleset).get(column) or []
            groups, n = seed_means(self.rows(ruleset, subject), metric, scenarios)
            if not scenarios or any(len(g) == 0 for g in groups):
                self._stats[key] = Stat(None, None, None, n)
            else:
                bounds = UNIT if metric in BOUNDED else None
                stat = generalisation_stat([float(g.mean()) for g in groups], n, bounds=bounds)
                self._stats[key] = replace(stat, provisional=self.provisional(ruleset, subject, scenarios))
        return self._stats[key]

    # -- training runs ----------------------------------------------------------------------------

    @cached_property
    def runs(self) -> dict[str, TrainingRun]:
        """Each trained run from its index, and each enabled configured run that has none (a
        disabled one is not planned, so it is not missing either)."""
        from schemashift.runs.contract import enabled_runs

        runs = {}
        for name, record in ((self.manifest or {}).get("training") or {}).items():
            if (record or {}).get("index") is not None:
                runs[name] = indexed_run(record["index"])
        for name in enabled_runs(self.config):
            if name not in runs:
                runs[name] = configured_run(self.config, name)
        return dict(sorted(runs.items()))

    def run_rulesets(self, run: TrainingRun) -> list[str]:
        """Rulesets on which the run's checkpoints were evaluated or expected; where none was, the
        run's own ruleset (so a run that never trained reads missing there)."""
        labels = {run.label(s) for s in run.steps}
        found = {r for r in self.rulesets if labels & set(self.subjects(r))}
        return sorted(found) or ([run.ruleset] if run.ruleset in self.rulesets else [])

    def base_subject(self, run: TrainingRun) -> str | None:
        """A run's step 0: the untrained evaluation of exactly its base model (the `base` subject
        `hf:<base_model>`), or None where that model was neither evaluated nor expected."""
        label = f"hf:{run.base_model}"
        return label if self.kinds.get(label) == "base" else None

    def start_subject(self, run: TrainingRun) -> str | None:
        """A run's step 0 on its learning curve: its warm start (the run's rows of step 0,
        evaluated or expected: `workflow.Plan.evaluated_steps`), the point GRPO starts from,
        where it has one; else its base model's evaluation (`base_subject`)."""
        warm = run.label(0)
        return warm if self.kinds.get(warm) == "checkpoint" else self.base_subject(run)

    def checkpoints(self, run: TrainingRun) -> list[tuple[int, str | None]]:
        """(step, subject) of every point of a run's learning curve: step 0 (`start_subject`) and
        each checkpoint, whose subject is the rows of (run, step)."""
        return [(0, self.start_subject(run)), *((step, run.label(step)) for step in run.steps)]

    def model_entry(self, subject: str) -> Mapping[str, Any] | None:
        """The `models` entry of a subject's model (a checkpoint's: its run's base model), or None."""
        models = self.config.get("models") or {}
        kind = self.kinds.get(subject)
        if kind == "checkpoint":
            run = self.runs.get(subject.rpartition("@step-")[0])
            return None if run is None else self.model_entry(f"hf:{run.base_model}")
        for name, model in models.items():
            if subject in (name, model.get("policy")):
                return model
        rows = self.episodes[self.episodes["label"] == subject]["base_model"].dropna()
        for base in set(rows):
            for name, model in models.items():
                if base in (name, model.get("policy"), (model.get("policy") or "").partition(":")[2]):
                    return model
        return None

    def params_b(self, subject: str) -> float | None:
        """Parameter count (billions) of a subject's model from `models.<name>.params_b`."""
        entry = self.model_entry(subject)
        return None if entry is None else entry.get("params_b")

    def price(self, subject: str) -> Mapping[str, float] | None:
        """The price of a subject's model (`models.<name>.price`): USD per million input and
        output tokens, or per GPU hour; None where the config gives none."""
        entry = self.model_entry(subject)
        return None if entry is None else entry.get("price")

    def params_estimated(self, subject: str) -> bool:
        """Whether that count is an estimate (`models.<name>.params_estimated`), not a published one."""
        entry = self.model_entry(subject)
        return bool(entry and entry.get("params_estimated"))

    def go_no_go(self, run: TrainingRun) -> dict[str, Any] | None:
        """The step-20 decision on the run's metric lineage, by the rule the trainer applies
        (None until that step is logged)."""
        rows = self.training_rows(run.name)
        return None if rows is None else go_no_go(rows.to_dict("records"), run.go_no_go_step)

    def training_rows(self, run: str) -> pd.DataFrame | None:
        if self.training is None or not len(self.training):
            return None
        rows = self.training[self.training["train_run"] == run].sort_values("step")
        return rows if len(rows) else None

    def convergence_step(self, run: str) -> int | None:
        """First step where the smoothed training reward covers CONVERGED of the way from its
        first value to its peak (smoothing: centred rolling mean over a tenth of the steps)."""
        rows = self.training_rows(run)
        if rows is None:
            return None
        smooth = smoothed(rows["reward_mean"])
        if smooth.isna().all():
            return None
        first, peak = float(smooth.dropna().iloc[0]), float(smooth.max())
        if peak <= first:
            return None
        reached = rows["step"][smooth >= first + CONVERGED * (peak - first)]
        return int(reached.iloc[0]) if len(reached) else None


def compact_subjects(labels: Sequence[str]) -> str:
    """`a, r@step-2, r@step-4` -> `a, r@step-2, 4`: a run's checkpoints after its name once."""
    out: list[str] = []
    steps: dict[str, list[str]] = {}
    for label in labels:
        run, sep, step = label.rpartition("@step-")
        if sep and step.isdigit():
            if run not in steps:
                steps[run] = []
                out.append(run)
            steps[run].append(step)
        else:
            out.append(label)
    return ", ".join(f"{x}@step-{', '.join(steps[x])}" if x in steps else x for x in out)


def repeat_groups(a: Analysis) -> dict[str, list[TrainingRun]]:
    """Configured run -> its repeats over training seeds (the run itself first)."""
    from schemashift.runs.contract import split_repeat

    groups: dict[str, list[TrainingRun]] = {}
    for run in sorted(a.runs.values(), key=lambda r: split_repeat(r.name)[::-1]):
        groups.setdefault(run.configured, []).append(run)
    return dict(sorted(groups.items()))


def published_stat(a: Analysis, metric: str, scenarios: Sequence[str]) -> Stat:
    """The original training log's published rows (legacy) over `scenarios`, their seeds read as
    legacy's are: attempts at one task per scenario."""
    import pandas as pd

    rows = pd.DataFrame(published.gpt_oss_rows())
    return metric_stat(rows, metric, scenarios, seeds_vary_task=a.seeds_vary_task("legacy"))


def efficiency_reference(a: Analysis, ruleset: str, subject: str) -> str | None:
    """What a subject's savings are against: a checkpoint's untrained base through the same
    harness (the learning curve's step 0), anything else `report.efficiency_reference`."""
    kind = a.kinds.get(subject)
    if kind == "checkpoint":  # its run's step 0 through the same harness
        checkpoint = Subject.parse(subject, kind)
        run = a.runs.get(checkpoint.name)
        base = a.base_subject(run) if run else None
        return Subject.parse(base, "base").through(checkpoint.harness).label if base else None
    reference = (a.config.get("report") or {}).get("efficiency_reference", "policy_aware_heuristic")
    return reference if reference != subject and reference in a.subjects(ruleset) else None


#: the cost columns whose savings the efficiency table gives
SAVING_COLUMNS = ("tool_calls", "tokens_in", "tokens_out", "steps")


def savings(a: Analysis, ruleset: str, subject: str, reference: str) -> dict[str, Any]:
    """Savings of `subject` against `reference`, paired by cell (scenario, seed): each side's cost
    on a cell is the mean over its successful samples there, and the saving of a cost column is
    1 - sum(subject) / sum(reference) over the cells both solved (`stats.savings_stat`, with a
    bootstrap interval stratified by scenario). Coverage: `solved_by_both` of `graded_by_both`
    cells; `provisional` when either subject's coverage is incomplete."""
    keys = ["scenario", "seed"]

    def solved(subject: str) -> pd.DataFrame:
        rows = a.rows(ruleset, subject)
        return rows[rows["success"] == 1].groupby(keys, sort=True)[list(SAVING_COLUMNS)].mean()

    def graded(subject: str) -> set[tuple[Any, ...]]:
        return set(map(tuple, a.rows(ruleset, subject)[keys].itertuples(index=False)))

    both = solved(subject).merge(solved(reference), left_index=True, right_index=True, suffixes=("", "_ref"))
    scenarios = a.scenarios(ruleset)
    flag = a.provisional(ruleset, subject, scenarios) or a.provisional(ruleset, reference, scenarios)
    strata = both.index.get_level_values("scenario").to_numpy() if len(both) else []
    out: dict[str, Any] = {
        "solved_by_both": len(both),
        "graded_by_both": len(graded(subject) & graded(reference)),
        "provisional": flag,
    }
    for column in SAVING_COLUMNS:
        mine = both[column].to_numpy() if len(both) else []
        theirs = both[f"{column}_ref"].to_numpy() if len(both) else []
        out[column] = savings_stat(mine, theirs, strata, a.samples, a.seed, flag)
    return out


def drift_outcomes(a: Analysis, ruleset: str) -> list[dict[str, Any]]:
    """Per subject and drift kind: planned, fired, discovered, reported, failed-on and recovered
    drifts, the recovery rate (recovered / failed on) and the mean steps to recover."""
    records = []
    drifts = a.drifts[a.drifts["ruleset"] == ruleset]
    for (subject, kind), group in sorted(
        drifts.groupby(["label", "kind"], dropna=False), key=lambda x: (str(x[0][0]), str(x[0][1]))
    ):
        recovered = int(group["recovered_step"].notna().sum())
        failed = int(group["failed_step"].notna().sum())
        recover = group["steps_to_recover"].dropna()
        records.append(
            {
                "ruleset": ruleset,
                "subject": subject,
                "kind": kind,
                "planned": len(group),
                "fired": int(group["fired_step"].notna().sum()),
                "discovered": int(group["discovered_step"].notna().sum()),
                "reported": int(group["reported_step"].notna().sum()),
                "failed": failed,
                "recovered": recovered,
                "recovery_rate": recovered / failed if failed else None,
                "mean_steps_to_recover": float(recover.mean()) if len(recover) else None,
            }
        )
    return records


def smoothing_window(points: int) -> int:
    """How many points `smoothed` averages: about a tenth (at least 1, so under 20 none, at most 50)."""
    return max(1, min(50, points // 10))


def smoothed(series: pd.Series) -> pd.Series:
    """Centred rolling mean over `smoothing_window` points."""
    return series.rolling(smoothing_window(len(series)), center=True, min_periods=1).mean()
