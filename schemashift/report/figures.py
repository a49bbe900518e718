"""`schemashift report figures`: every figure of the report, PNG and PDF, with captions.

The same set of figures is written whatever the data (`STEMS`), so the workflow can name them as
outputs; a figure without data says so on its face. The numbers are `Analysis`'s, the same as the
tables'. `figures.json` lists every figure with its caption for the HTML report.
"""

from __future__ import annotations

import io as _io
import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.report.analysis import (
    EFFICIENCY_COLUMNS,
    METRICS,
    OVERALL,
    TRAINED_ON,
    Analysis,
    drift_outcomes,
)
from schemashift.report.comparisons import ablation_groups
from schemashift.report.drift_cost_figure import drift_cost_figure
from schemashift.report.load import coverage, coverage_text
from schemashift.report.plotting import empty, pyplot
from schemashift.report.stats import LEVEL, Stat
from schemashift.report.training_figure import MAX_POINTS, training_figure
from schemashift.rollout.subject import Subject

if TYPE_CHECKING:
    from matplotlib.figure import Figure

INDEX_FILE = "figures.json"
FORMATS = ("png", "pdf")
DPI = 150
BAR_SPAN = 0.8  # seaborn's default width of one x category's group of bars
#: figures made once (the overview is made per ruleset: <ruleset>_score, <ruleset>_success)
STEMS = (
    "learning_curves",
    "training_reward",
    "reward_ablation",
    "model_ablation",
    "drift_recovery",
    "coverage",
    "efficiency",
    "final_actions",
    "drift_cost",
)


DRIFT_COST_CAPTION = (
    "What drift costs: each subject's overall success rate with drift and in the control arm (drift "
    "plan off) on the cells it played in both; every other figure shows the drift arm only."
)


def stems(rulesets: Sequence[str]) -> list[str]:
    return [f"{r}_{m}" for r in rulesets for m in METRICS] + list(STEMS)


def write(a: Analysis, out_dir: str | Path) -> list[dict[str, Any]]:
    """Render every figure into `out_dir` (PNG and PDF) and the index; returns the index entries."""
    from schemashift.rollout import io

    plt = pyplot()
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    index = []
    makers: list[tuple[str, Callable[[], Figure], str]] = []
    for ruleset in a.rulesets:
        for metric, title in METRICS.items():
            makers.append(
                (
                    f"{ruleset}_{metric}",
                    lambda ruleset=ruleset, metric=metric: bar_figure(a, ruleset, metric),
                    f"Ruleset {ruleset}: {title} per scenario for every baseline, untrained model and "
                    f"trained checkpoint, with {LEVEL:.0%} intervals over the seeds (scenarios fixed; "
                    "exact for success rates, Student-t otherwise; a bar without whiskers: no variation "
                    "observed; n/a: no graded episode; \u2020 in the tables: provisional). Coverage: "
                    f"{coverage_text(coverage(a.episodes, a.manifest, ruleset))}",
                )
            )
    makers += [
        (
            "learning_curves",
            lambda: learning_figure(a, list(a.runs)),
            "Learning curves: overall score and success rate of each training run's checkpoints; step 0 is "
            "the run's warm start where it has one, else the "
            f"untrained base model (one shared evaluation). Bands: {LEVEL:.0%} intervals over the seeds "
            "(scenarios fixed), none where no variation was observed; hollow markers are provisional "
            "(incomplete coverage).",
        ),
        (
            "training_reward",
            lambda: training_figure(a),
            f"Training reward per optimizer step: raw (thin) and smoothed (thick; a run of under 20 "
            f"steps is drawn raw, each step marked), at most {MAX_POINTS} points per run; superseded "
            "steps of resumed runs are dropped.",
        ),
        (
            "reward_ablation",
            lambda: ablation_figure(a, "reward"),
            "Reward ablation: runs with the same base model and ruleset but different rewards, overall "
            "score by checkpoint (step 0 = untrained).",
        ),
        (
            "model_ablation",
            lambda: ablation_figure(a, "base_model"),
            "Model ablation: runs with the same reward and ruleset but different base models, overall score "
            "by checkpoint (step 0 = each run's untrained base).",
        ),
        (
            "drift_recovery",
            lambda: drift_figure(a),
            "Drift recovery by drift kind: share of drifts with a failed call that the subject recovered "
            "from (a successful call on the drifted tool afterwards); the number on a bar is the drifts "
            "failed on.",
        ),
        (
            "coverage",
            lambda: coverage_figure(a),
            "Coverage: graded / expected cells per subject and scenario from the manifest; i = infra_error "
            "cells, m = missing cells.",
        ),
        (
            "efficiency",
            lambda: efficiency_figure(a),
            "Efficiency: mean tool calls, tokens in and out, turns and wall-clock seconds per graded "
            "episode.",
        ),
        (
            "final_actions",
            lambda: final_action_figure(a),
            "Final action of each graded episode per subject: complete_task is a voluntary stop; any other "
            "action means the step limit was reached.",
        ),
        ("drift_cost", lambda: drift_cost_figure(a), DRIFT_COST_CAPTION),
    ]
    for stem, make, caption in makers:
        figure = make()
        _save(figure, Path(out_dir), stem)
        plt.close(figure)
        index.append({"stem": stem, "caption": caption})
    io.write_json(Path(out_dir) / INDEX_FILE, index)
    return index


def _save(figure: Figure, out_dir: Path, stem: str) -> None:
    from schemashift.rollout import io

    for fmt in FORMATS:
        buffer = _io.BytesIO()
        # no creation dates or software strings, so unchanged figures give (nearly) unchanged files
        metadata = {"Software": None} if fmt == "png" else {"CreationDate": None, "Producer": None}
        figure.savefig(buffer, format=fmt, dpi=DPI, bbox_inches="tight", metadata=metadata)
        data = buffer.getvalue()
        io.atomic_write(out_dir / f"{stem}.{fmt}", lambda f, data=data: f.write(data))


def _short(scenario: str) -> str:
    """`M1_customer_escalation` -> `M1\\ncustomer\\nescalation`: short lines under the axis."""
    head, sep, tail = scenario.partition("_")
    if not sep or len(scenario) <= 10:
        return scenario
    return head + "\n" + textwrap.fill(tail.replace("_", " "), width=14)


def _wrap(label: str, width: int = 28) -> str:
    return "\n".join(textwrap.wrap(label, width, break_on_hyphens=False, break_long_words=True)) or label


def overview_subjects(a: Analysis, ruleset: str) -> list[str]:
    """Baselines, untrained models and each run's trained checkpoint (the others: learning curves),
    each through every harness it played, side by side, of the subjects that ran (the report names
    the others once)."""
    finals = {run.trained_subject for run in a.runs.values()}
    return [
        s
        for s in a.ran(ruleset)
        if a.kinds.get(s) != "checkpoint" or Subject.parse(s, "checkpoint").unmarked in finals
    ]


def bar_figure(a: Analysis, ruleset: str, metric: str) -> Figure:
    import pandas as pd
    import seaborn as sns

    plt = pyplot()
    title = METRICS[metric]
    columns = [*a.scenarios(ruleset), OVERALL]
    subjects = overview_subjects(a, ruleset)
    labels = [_short(s) for s in columns]
    stats = {(s, c): a.stat(ruleset, s, metric, c) for s in subjects for c in columns}
    present = [
        {"column": _short(c), "subject": s, "mean": stats[s, c].mean}
        for c in columns
        for s in subjects
        if stats[s, c].mean is not None
    ]
    frame = pd.DataFrame(present, columns=["column", "subject", "mean"])
    ncols = min(len(subjects), 3) or 1
    legend_width = ncols * (0.6 + 0.08 * max([len(a.shown(ruleset, p)) for p in subjects] + [6]))
    width = max(7.0, legend_width + 0.5, 1.2 + len(columns) * max(1.3, 0.5 + 0.3 * len(subjects)))
    nrows = -(-len(subjects) // ncols)
    figure, ax = plt.subplots(figsize=(width, 5.0 + 0.25 * nrows), layout="constrained")
    palette = sns.color_palette("colorblind", n_colors=max(len(subjects), 1))
    if present:
        sns.barplot(
            data=frame,
            x="column",
            y="mean",
            hue="subject",
            order=labels,
            hue_order=subjects,
            palette=palette,
            errorbar=None,
            saturation=1.0,
            legend=False,
            ax=ax,
        )
    ax.set_xticks(range(len(labels)), labels)
    shown = [stats[s, c] for s in subjects for c in columns if stats[s, c].mean is not None]
    top = max([1.0] + [_high(stat) for stat in shown])
    # legacy's shaped score goes below 0 (step penalties): the axis reaches down to the lowest whisker
    bottom = min([0.0] + [_low(stat) for stat in shown])
    slot = BAR_SPAN / max(len(subjects), 1)
    small = len(subjects) > 6
    for i, column in enumerate(columns):
        for j, subject in enumerate(subjects):
            x = i - BAR_SPAN / 2 + slot * (j + 0.5)
            stat = stats[subject, column]
            if stat.mean is None:
                ax.text(x, 0.01 * top, "n/a", ha="center", va="bottom", rotation=90, fontsize=8, color="0.3")
                continue
            if stat.has_interval:
                ax.errorbar(
                    x,
                    stat.mean,
                    yerr=[[stat.mean - stat.ci_low], [stat.ci_high - stat.mean]],
                    fmt="none",
                    ecolor="0.15",
                    elinewidth=1.2,
                    capsize=2 if small else 3,
                )
            if not small:
                text = f"{stat.mean:.2f}" + ("\u2020" if stat.provisional else "")
                if stat.mean < 0:  # a bar hanging below 0 is labelled under its whisker
                    ax.text(x, _low(stat) - 0.015 * top, text, ha="center", va="top", fontsize=7.5)
                else:
                    ax.text(x, _high(stat) + 0.015 * top, text, ha="center", va="bottom", fontsize=7.5)
            elif stat.mean == 0:  # a bar of height 0 is invisible: say it is a 0, not a gap
                ax.text(x, 0.01 * top, "0", ha="center", va="bottom", fontsize=7, color="0.3")
    ax.axvline(len(columns) - 1.5, color="0.6", linewidth=0.8, linestyle=":")
    ax.set_xlim(-0.5, len(columns) - 0.5)
    if bottom < 0:
        ax.axhline(0, color="0.3", linewidth=0.8)
    ax.set_ylim(bottom - 0.08 * top if bottom < 0 else 0, top * 1.12)
    ax.set_xlabel("scenario (overall: mean of the scenario means)")
    ax.set_ylabel(f"{title} (mean, {LEVEL:.0%} CI)")
    figure.suptitle(
        f"{ruleset}: {title} per scenario and subject\nmean over graded episodes with {LEVEL:.0%} intervals "
        "over the seeds",
        fontsize=12,
    )
    if subjects:
        handles = [plt.Rectangle((0, 0), 1, 1, facecolor=color, edgecolor="none") for color in palette]
        labels = [a.shown(ruleset, s) for s in subjects]
        figure.legend(
            handles, labels, title="subject", loc="outside lower center", ncols=ncols, frameon=False
        )
    return figure


def _high(stat: Stat) -> float:
    """The top of a stat's whisker, or its mean where it has no interval."""
    return stat.ci_high if stat.has_interval else stat.mean


def _low(stat: Stat) -> float:
    return stat.ci_low if stat.has_interval else stat.mean


def _unit_ylim(ax: Any) -> None:
    """[0, 1] with a margin, wider where the data reach past it (legacy's shaped score can be < 0)."""
    low = ax.dataLim.y0  # the data's own extent: the view's autoscaled limits hug a flat line
    ax.set_ylim(-0.02 if low >= 0 else low - 0.05, max(1.02, ax.get_ylim()[1]))


def _curve_with_band(ax, points, color, label: str, **line) -> None:
    """A checkpoint curve of (step, Stat) points: the mean as a line, its interval as a band (which
    closes on the mean where a point has no interval)."""
    xs = [step for step, _ in points]
    ax.plot(xs, [stat.mean for _, stat in points], color=color, linewidth=1.8, label=label, **line)
    ax.fill_between(
        xs,
        [_low(stat) for _, stat in points],
        [_high(stat) for _, stat in points],
        color=color,
        alpha=0.18,
        linewidth=0,
    )


def _curve(a: Analysis, run, ruleset: str, metric: str) -> list[tuple[int, Stat]]:
    points = [
        (step, a.stat(ruleset, subject, metric, OVERALL)) for step, subject in a.checkpoints(run) if subject
    ]
    return [(step, stat) for step, stat in points if stat.mean is not None]


#: per training run, in order: its curve's line style and marker
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")


def _coinciding(curves: dict[str, tuple]) -> list[list[str]]:
    """Names of the curves grouped by identical points, in first-drawn order."""
    groups: dict[tuple, list[str]] = {}
    for name, points in curves.items():
        groups.setdefault(points, []).append(name)
    return list(groups.values())


def learning_figure(a: Analysis, run_names: Sequence[str], title: str = "Learning curves") -> Figure:
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    runs = [a.runs[name] for name in run_names]
    rulesets = sorted(
        {r for run in runs for r in a.run_rulesets(run) if any(_curve(a, run, r, m) for m in METRICS)}
    )
    if not rulesets:
        reasons = sorted({a.why_not_run(s) for run in runs for _, s in a.checkpoints(run) if s})
        return empty(
            title,
            "no checkpoint or step 0 of a training run was evaluated"
            + (f" ({'; '.join(reasons)})" if reasons else ""),
        )
    figure, axes = plt.subplots(
        len(METRICS),
        len(rulesets),
        figsize=(5.5 * len(rulesets) + 2.5, 7.0),
        layout="constrained",
        squeeze=False,
    )
    palette = dict(zip(run_names, sns.color_palette("colorblind", n_colors=max(len(runs), 1)), strict=False))
    # Runs often coincide (the same step 0; checkpoints that play alike): each run has its own
    # line style and a marker smaller than the previous run's, so every run stays visible.
    styles = {
        run.name: (LINE_STYLES[i % len(LINE_STYLES)], MARKERS[i % len(MARKERS)], max(9.0 - 1.6 * i, 3.0))
        for i, run in enumerate(runs)
    }
    for col, ruleset in enumerate(rulesets):
        for row, (metric, name) in enumerate(METRICS.items()):
            ax = axes[row][col]
            drawn = {}
            for run in runs:
                points = _curve(a, run, ruleset, metric)
                if not points:
                    continue
                drawn[run.name] = tuple((x, stat.mean) for x, stat in points)
                color = palette[run.name]
                linestyle, marker, size = styles[run.name]
                _curve_with_band(ax, points, color, run.name, linestyle=linestyle)
                for x, stat in points:
                    face = "white" if stat.provisional else color
                    ax.plot(
                        x,
                        stat.mean,
                        marker=marker,
                        markersize=size,
                        markerfacecolor=face,
                        markeredgecolor=color,
                    )
            # said under the axis, where no curve can hide it
            same = ["same points: " + ", ".join(names) for names in _coinciding(drawn) if len(names) > 1]
            recalled = [run.name for run in runs if a.trained_on(ruleset, run.trained_subject)]
            mark = f"\n{TRAINED_ON}: {', '.join(recalled)}" if recalled else ""
            ax.set_title(f"{ruleset}: {name}{mark}", fontsize=11)
            ax.set_xlabel("\n".join(["checkpoint step (0: the warm start, else the untrained base)", *same]))
            ax.set_ylabel(f"{name} (overall)")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no 0.25 ticks
            _unit_ylim(ax)
    handles = [
        plt.Line2D(
            [],
            [],
            color=palette[r.name],
            linestyle=styles[r.name][0],
            marker=styles[r.name][1],
            markersize=styles[r.name][2],
            label=r.name,
        )
        for r in runs
    ]
    handles.append(
        plt.Line2D(
            [], [], color="0.4", marker="o", markerfacecolor="white", linestyle="", label="provisional"
        )
    )
    figure.legend(handles=handles, title="training run", loc="outside right upper", frameon=False)
    figure.suptitle(f"{title}: checkpoints vs step 0, {LEVEL:.0%} bands over the seeds", fontsize=12)
    return figure


def ablation_figure(a: Analysis, vary: str) -> Figure:
    plt = pyplot()
    name = "Reward ablation" if vary == "reward" else "Model ablation"
    groups = ablation_groups(a, vary)
    if not groups:
        return empty(name, f"no runs that differ only in {'reward' if vary == 'reward' else 'base model'}")
    figure, axes = plt.subplots(
        1, len(groups), figsize=(6.5 * len(groups) + 2.0, 4.8), layout="constrained", squeeze=False
    )
    import seaborn as sns

    for ax, group in zip(axes[0], groups, strict=True):
        palette = sns.color_palette("colorblind", n_colors=len(group))
        ruleset = group[0].ruleset
        for color, run in zip(palette, group, strict=True):
            points = _curve(a, run, ruleset, "score") if ruleset in a.rulesets else []
            label = f"{run.name} ({run.reward if vary == 'reward' else run.base_model})"
            if not points:
                ax.plot([], [], color=color, label=label + ": no data")
                continue
            _curve_with_band(ax, points, color, label, marker="o")
        recalled = [run.name for run in group if a.trained_on(ruleset, run.trained_subject)]
        mark = f"\n{TRAINED_ON}: {', '.join(recalled)}" if recalled else ""
        ax.set_title(f"{ruleset}: {'reward' if vary == 'reward' else 'base model'} varies{mark}", fontsize=11)
        ax.set_xlabel("checkpoint step (0 = untrained base)")
        ax.set_ylabel("mean score (overall)")
        _unit_ylim(ax)
        ax.legend(loc="upper left", fontsize=8, frameon=False)
    figure.suptitle(f"{name}: overall score by checkpoint, {LEVEL:.0%} bands over the seeds", fontsize=12)
    return figure


def drift_figure(a: Analysis) -> Figure:
    import pandas as pd
    import seaborn as sns

    plt = pyplot()
    if a.drifts is None or not len(a.drifts):
        return empty("Drift recovery", "no drift rows")
    rulesets = [r for r in a.rulesets if len(a.drifts[a.drifts["ruleset"] == r])]
    most = max(len(set(a.drifts.loc[a.drifts["ruleset"] == r, "kind"].astype(str))) for r in rulesets)
    figure, axes = plt.subplots(
        len(rulesets),
        1,
        figsize=(max(11.0, 1.5 * most + 3.5), 4.6 * len(rulesets) + 0.6),
        layout="constrained",
        squeeze=False,
    )
    for ax, ruleset in zip(axes[:, 0], rulesets, strict=True):
        keep = set(overview_subjects(a, ruleset))
        frame = pd.DataFrame(drift_outcomes(a, ruleset))
        frame = frame[frame["subject"].isin(keep) & (frame["failed"] > 0)]
        if not len(frame):
            ax.axis("off")
            ax.text(0.5, 0.5, f"{ruleset}: no drift with a failed call", ha="center", va="center")
            continue
        order = [s for s in overview_subjects(a, ruleset) if s in set(frame["subject"])]
        kinds = sorted(set(frame["kind"].astype(str)))
        sns.barplot(
            data=frame.assign(kind=frame["kind"].astype(str)),
            x="kind",
            y="recovery_rate",
            hue="subject",
            order=kinds,
            hue_order=order,
            palette="colorblind",
            errorbar=None,
            ax=ax,
        )
        for container, subject in zip(ax.containers, order, strict=False):
            rows = frame[frame["subject"] == subject].set_index("kind")
            for patch, kind in zip(container.patches, kinds, strict=False):
                if patch is None or kind not in rows.index or not math.isfinite(patch.get_height()):
                    continue
                x = patch.get_x() + patch.get_width() / 2
                failed = int(rows.loc[kind, "failed"])
                ax.text(x, patch.get_height() + 0.01, str(failed), ha="center", va="bottom", fontsize=7)
        # kind names are long (response_restructure): one word a line, so neighbours never overlap
        ax.set_xticks(range(len(kinds)), [k.replace("_", "\n") for k in kinds])
        ax.set_ylim(0, 1.12)
        ax.set_title(f"{ruleset}: recovery rate by drift kind", fontsize=11)
        ax.set_xlabel("drift kind")
        ax.set_ylabel("recovered / failed on")
        ax.legend(title="subject", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    figure.suptitle("Drift recovery by drift kind", fontsize=12)
    return figure


def coverage_figure(a: Analysis) -> Figure:
    import numpy as np
    import seaborn as sns

    plt = pyplot()
    rulesets = a.rulesets
    heights = [max(2.5, 0.38 * len(a.ran(r)) + 1.6) for r in rulesets]
    width = max(7.0, 1.6 * max(len(a.scenarios(r)) for r in rulesets) + 4.5)
    figure, axes = plt.subplots(
        len(rulesets),
        1,
        figsize=(width, sum(heights)),
        layout="constrained",
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    for ax, ruleset in zip(axes[:, 0], rulesets, strict=True):
        subjects, scenarios = a.ran(ruleset), a.scenarios(ruleset)
        values = np.full((len(subjects), len(scenarios)), np.nan)
        notes = np.empty((len(subjects), len(scenarios)), dtype=object)
        for i, subject in enumerate(subjects):
            for j, scenario in enumerate(scenarios):
                c = a.cover(ruleset, subject, scenario)
                if c.expected:
                    values[i, j] = c.graded / c.expected
                extra = (f" i{c.infra_error}" if c.infra_error else "") + (
                    f" m{c.missing}" if c.missing else ""
                )
                notes[i, j] = f"{c.graded}/{'?' if c.expected is None else c.expected}{extra}"
        sns.heatmap(
            values,
            ax=ax,
            vmin=0,
            vmax=1,
            cmap="RdYlGn",
            annot=notes,
            fmt="",
            annot_kws={"fontsize": 8},
            cbar_kws={"label": "graded / expected"},
            xticklabels=[_short(s).replace("\n", " ") for s in scenarios],
            yticklabels=subjects,
            linewidths=0.5,
            linecolor="white",
        )
        ax.grid(False)
        ax.set_facecolor("0.88")  # cells no manifest lists: expected unknown
        for i, j in zip(*np.where(np.isnan(values)), strict=True):
            ax.text(j + 0.5, i + 0.5, notes[i, j], ha="center", va="center", fontsize=8, color="0.2")
        not_run = len(a.not_run(ruleset))
        ax.set_title(
            f"{ruleset}: coverage per subject and scenario (grey: not in the expected cells)"
            + (f"\n{not_run} expected subject(s) not run, not shown" if not_run else ""),
            fontsize=11,
        )
        ax.tick_params(axis="x", rotation=20)
        ax.tick_params(axis="y", rotation=0)
    figure.suptitle("Coverage of the expected cells (i: infra_error, m: missing)", fontsize=12)
    return figure


def efficiency_figure(a: Analysis) -> Figure:
    import pandas as pd
    import seaborn as sns

    plt = pyplot()
    frames = []
    for ruleset in a.rulesets:
        for subject in overview_subjects(a, ruleset):
            rows = a.rows(ruleset, subject)
            if len(rows):
                frames.append(rows.assign(subject=subject))
    if not frames:
        return empty("Efficiency", "no graded episodes")
    data = pd.concat(frames)
    order = list(dict.fromkeys(data["subject"]))
    columns = list(EFFICIENCY_COLUMNS.items())
    figure, axes = plt.subplots(
        1,
        len(columns),
        figsize=(3.4 * len(columns) + 1.5, 0.34 * len(order) + 2.2),
        layout="constrained",
        sharey=True,
    )
    for ax, (column, name) in zip(axes, columns, strict=True):
        part = data.dropna(subset=[column])
        if len(part):
            sns.barplot(
                data=part,
                y="subject",
                x=column,
                hue="ruleset",
                order=order,
                palette="colorblind",
                errorbar=("ci", 95),
                seed=a.seed,
                n_boot=min(a.samples, 1000),
                ax=ax,
                legend=ax is axes[-1],
            )
        ax.set_title(name, fontsize=11)
        ax.set_xlabel(f"{name} per episode")
        ax.set_ylabel("")
    axes[0].set_yticks(range(len(order)), [_wrap(s, 44) for s in order])
    if axes[-1].get_legend() is not None:
        sns.move_legend(axes[-1], "upper left", bbox_to_anchor=(1.02, 1.0), title="ruleset", frameon=False)
    figure.suptitle(
        f"Efficiency per graded episode (means, {LEVEL:.0%} bootstrap whiskers over episodes)", fontsize=12
    )
    return figure


def final_action_figure(a: Analysis) -> Figure:
    import seaborn as sns

    plt = pyplot()
    entries = []
    for ruleset in a.rulesets:
        g = a.graded[a.graded["ruleset"] == ruleset]
        for subject in overview_subjects(a, ruleset):
            counts = g.loc[g["label"] == subject, "final_action"].fillna("(none)").value_counts()
            if counts.sum():
                entries.append(
                    (f"{ruleset} | {a.shown(ruleset, subject)}", counts / counts.sum(), int(counts.sum()))
                )
    if not entries:
        return empty("Final actions", "no graded episodes")
    actions = sorted({x for _, shares, _ in entries for x in shares.index})
    palette = dict(zip(actions, sns.color_palette("colorblind", n_colors=len(actions)), strict=True))
    figure, ax = plt.subplots(figsize=(10.0, 0.38 * len(entries) + 2.0), layout="constrained")
    labels = [f"{label} (n={n})" for label, _, n in entries]
    left = [0.0] * len(entries)
    for action in actions:
        widths = [float(shares.get(action, 0.0)) for _, shares, _ in entries]
        ax.barh(
            range(len(entries)), widths, left=left, color=palette[action], label=action, edgecolor="white"
        )
        left = [x + w for x, w in zip(left, widths, strict=True)]
    ax.set_yticks(range(len(entries)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of graded episodes")
    figure.legend(title="final action", loc="outside right upper", frameon=False)
    figure.suptitle("How episodes ended: final action per subject", fontsize=12)
    return figure
