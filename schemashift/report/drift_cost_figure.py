"""The drift-cost figure (`figures`' `drift_cost` stem): per ruleset with a control arm, each
subject's overall success rate in the drift and the control arm on the cells it played in both,
with their 95% intervals, joined by a line whose length is the drift cost (`report.arms`, the same
numbers as the `<ruleset>_drift_cost` table); where the ruleset's control arm was not played, its
subjects' drift-arm success alone, and the title says so. It imports nothing of `figures`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.report import arms
from schemashift.report.load import OVERALL
from schemashift.report.plotting import empty, pyplot
from schemashift.report.stats import MISSING_STAT

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from schemashift.report.analysis import Analysis

TITLE = "What drift costs"
#: marker and colour of each arm
STYLE = {DRIFT: ("o", "#d55e00"), CONTROL: ("s", "#0072b2")}


def drift_cost_figure(a: Analysis) -> Figure:
    panels = [(r, arms.subjects(a, r) or a.ran(r)) for r in a.rulesets if arms.plays_control(a, r)]
    panels = [(r, subjects) for r, subjects in panels if subjects]
    if not panels:
        return empty(TITLE, "no ruleset with a control arm ran")
    plt = pyplot()
    most = max(len(subjects) for _, subjects in panels)
    figure, axes = plt.subplots(
        len(panels), 1, figsize=(9.0, 0.55 * most * len(panels) + 1.6), layout="constrained", squeeze=False
    )
    for ax, (ruleset, subjects) in zip(axes[:, 0], panels, strict=True):
        played = bool(arms.subjects(a, ruleset))
        for y, subject in enumerate(subjects):
            if played:
                stats = {arm: arms.arm_stat(a, ruleset, subject, arm, "success") for arm in STYLE}
            else:  # the control arm was not played: the drift arm's overall success alone
                stats = {DRIFT: a.stat(ruleset, subject, "success", OVERALL), CONTROL: MISSING_STAT}
            means = [stats[arm].mean for arm in STYLE]
            if None not in means:
                ax.plot(means, [y, y], color="#999999", linewidth=2, zorder=1)
            for offset, (arm, (marker, colour)) in zip((-0.12, 0.12), STYLE.items(), strict=True):
                stat = stats[arm]
                if stat.mean is None:
                    continue
                error = None
                if stat.has_interval:
                    error = [[stat.mean - stat.ci_low], [stat.ci_high - stat.mean]]
                ax.errorbar(
                    stat.mean,
                    y + offset,
                    xerr=error,
                    fmt=marker,
                    color=colour,
                    capsize=3,
                    label=arm if y == 0 else None,
                    zorder=2,
                )
        ax.set_yticks(range(len(subjects)), [a.shown(ruleset, s) for s in subjects])
        ax.invert_yaxis()
        ax.set_xlim(-0.03, 1.03)
        if played:
            ax.set_xlabel("success rate on the cells played in both arms (95% intervals over the seeds)")
            ax.set_title(
                f"{ruleset}: success with drift and without (control arm); the line is the drift cost"
            )
        else:
            ax.set_xlabel("success rate with drift (95% intervals over the seeds)")
            ax.set_title(
                f"{ruleset}: the control arm was not played, so there is no drift cost: drift arm only"
            )
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    figure.suptitle(TITLE, fontsize=12)
    return figure
