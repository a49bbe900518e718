"""`schemashift report figures`: bar charts of mean score and success rate, PNG and PDF.

Per ruleset, `<ruleset>_score` and `<ruleset>_success`: scenarios on the x axis, one bar per policy
with its 95% bootstrap interval (the same numbers as the tables), "n/a" where a cell has no graded
episode. With training metrics, `training_reward`: mean reward per optimizer step. `figures.json`
lists every figure with its caption, for the HTML report.
"""

from __future__ import annotations

import io as _io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.report.load import coverage_text
from schemashift.report.stats import LEVEL, METRICS, RulesetSummary

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

INDEX_FILE = "figures.json"
FORMATS = ("png", "pdf")
DPI = 150
BAR_SPAN = 0.8  # seaborn's default width of one x category's group of bars


def write(
    summaries: Sequence[RulesetSummary], out_dir: str | Path, training: pd.DataFrame | None = None
) -> list[dict[str, Any]]:
    """Render every figure into `out_dir` (PNG and PDF) and the index; returns the index entries."""
    from schemashift.rollout import io

    plt = _pyplot()
    index = []
    for summary in summaries:
        for metric, title in METRICS.items():
            figure = bar_figure(summary, metric)
            stem = f"{summary.ruleset}_{metric}"
            _save(figure, Path(out_dir), stem)
            plt.close(figure)
            index.append(
                {
                    "stem": stem,
                    "ruleset": summary.ruleset,
                    "metric": metric,
                    "caption": (
                        f"Ruleset {summary.ruleset}: {title} per scenario and policy, with "
                        f"{LEVEL:.0%} bootstrap intervals over graded episodes (n/a: no graded episode). "
                        f"Coverage: {coverage_text(summary.coverage)}"
                    ),
                }
            )
    if training is not None and len(training):
        figure = training_figure(training)
        _save(figure, Path(out_dir), "training_reward")
        plt.close(figure)
        index.append(
            {
                "stem": "training_reward",
                "ruleset": None,
                "metric": "reward_mean",
                "caption": "Mean reward of the completions at each optimizer step, per training run "
                "(shaded: plus or minus one standard deviation).",
            }
        )
    io.write_json(Path(out_dir) / INDEX_FILE, index)
    return index


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


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
    import textwrap

    head, sep, tail = scenario.partition("_")
    if not sep or len(scenario) <= 10:
        return scenario
    return head + "\n" + textwrap.fill(tail.replace("_", " "), width=14)


def bar_figure(summary: RulesetSummary, metric: str) -> Figure:
    import pandas as pd
    import seaborn as sns

    plt = _pyplot()
    title = METRICS[metric]
    scenarios, policies = summary.scenarios, summary.policies
    labels = [_short(s) for s in scenarios]
    present = [
        {"scenario": _short(s), "policy": p, "mean": stat.mean, "stat": stat}
        for s in scenarios
        for p in policies
        if (stat := summary.stats[metric, p, s]).mean is not None
    ]
    frame = pd.DataFrame(present, columns=["scenario", "policy", "mean", "stat"])
    sns.set_theme(style="whitegrid", context="notebook")
    columns = min(len(policies), 3) or 1
    legend_width = columns * (0.6 + 0.08 * max([len(p) for p in policies] + [6]))
    width = max(6.0, legend_width + 0.5, 1.2 + len(scenarios) * max(1.3, 0.5 + 0.3 * len(policies)))
    rows = -(-len(policies) // columns)
    figure, ax = plt.subplots(figsize=(width, 5.0 + 0.25 * rows), layout="constrained")
    palette = sns.color_palette("colorblind", n_colors=max(len(policies), 1))
    if present:
        sns.barplot(
            data=frame,
            x="scenario",
            y="mean",
            hue="policy",
            order=labels,
            hue_order=policies,
            palette=palette,
            errorbar=None,
            saturation=1.0,
            legend=False,
            ax=ax,
        )
    ax.set_xticks(range(len(labels)), labels)
    top = max([1.0] + [r["stat"].ci_high for r in present])
    slot = BAR_SPAN / max(len(policies), 1)
    for i, scenario in enumerate(scenarios):
        for j, policy in enumerate(policies):
            x = i - BAR_SPAN / 2 + slot * (j + 0.5)
            stat = summary.stats[metric, policy, scenario]
            if stat.mean is None:
                ax.text(x, 0.01 * top, "n/a", ha="center", va="bottom", rotation=90, fontsize=9, color="0.3")
                continue
            ax.errorbar(
                x,
                stat.mean,
                yerr=[[stat.mean - stat.ci_low], [stat.ci_high - stat.mean]],
                fmt="none",
                ecolor="0.15",
                elinewidth=1.2,
                capsize=3,
            )
            ax.text(x, stat.ci_high + 0.015 * top, f"{stat.mean:.2f}", ha="center", va="bottom", fontsize=7.5)
    ax.set_xlim(-0.5, len(scenarios) - 0.5)
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel("scenario")
    ax.set_ylabel(f"{title} (mean, {LEVEL:.0%} CI)")
    # a figure title spans the legend too, so a long title never runs into it
    figure.suptitle(
        f"{summary.ruleset}: {title} per scenario and policy\n"
        f"mean over graded episodes with {LEVEL:.0%} bootstrap intervals",
        fontsize=12,
    )
    if policies:
        handles = [plt.Rectangle((0, 0), 1, 1, facecolor=color, edgecolor="none") for color in palette]
        figure.legend(
            handles, policies, title="policy", loc="outside lower center", ncols=columns, frameon=False
        )
    return figure


def training_figure(training: pd.DataFrame) -> Figure:
    import seaborn as sns

    plt = _pyplot()
    sns.set_theme(style="whitegrid", context="notebook")
    figure, ax = plt.subplots(figsize=(8.0, 4.5), layout="constrained")
    frame = training.sort_values(["train_run", "step"]).copy()
    frame["train_run"] = frame["train_run"].fillna("(unnamed run)")
    runs = list(dict.fromkeys(frame["train_run"]))
    palette = sns.color_palette("colorblind", n_colors=max(len(runs), 1))
    sns.lineplot(
        data=frame,
        x="step",
        y="reward_mean",
        hue="train_run",
        hue_order=runs,
        palette=palette,
        marker="o",
        errorbar=None,
        ax=ax,
    )
    for color, run in zip(palette, runs, strict=False):
        part = frame[(frame["train_run"] == run) & frame["reward_std"].notna()]
        if len(part):
            low = part["reward_mean"] - part["reward_std"]
            high = part["reward_mean"] + part["reward_std"]
            ax.fill_between(part["step"], low, high, color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean reward")
    figure.suptitle("Training: mean reward per optimizer step", fontsize=12)
    handles, labels = ax.get_legend_handles_labels()
    ax.get_legend().remove()
    figure.legend(handles, labels, title="training run", loc="outside right upper", frameon=False)
    return figure
