"""The training-reward figure (`figures`' `training_reward` stem): each run's mean reward per
optimizer step, raw and smoothed where the run is long enough to smooth, thinned to at most
`MAX_POINTS` points per run so a long run stays a small file (the Trackio export thins the
same way). It imports nothing of `figures`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from schemashift.report.analysis import smoothed, smoothing_window
from schemashift.report.plotting import empty, pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from schemashift.report.analysis import Analysis

MAX_POINTS = 800


def thin(frame: Any, limit: int = MAX_POINTS) -> Any:
    """Every k-th row (the last one kept) so that at most `limit` rows remain."""
    if len(frame) <= limit:
        return frame
    step = math.ceil(len(frame) / limit)
    keep = list(range(0, len(frame), step))
    if keep[-1] != len(frame) - 1:
        keep[-1] = len(frame) - 1
    return frame.iloc[keep]


def training_figure(a: Analysis) -> Figure:
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    if a.training is None or not len(a.training):
        return empty("Training reward", "no training metrics")
    plt = pyplot()
    runs = list(dict.fromkeys(a.training["train_run"].fillna("(unnamed run)")))
    figure, ax = plt.subplots(figsize=(9.0, 4.8), layout="constrained")
    palette = sns.color_palette("colorblind", n_colors=max(len(runs), 1))
    smoothing = False
    for color, run in zip(palette, runs, strict=False):
        rows = a.training[a.training["train_run"].fillna("(unnamed run)") == run].sort_values("step")
        if smoothing_window(len(rows)) == 1:
            # too few steps to smooth: the raw line alone, each step marked
            shown = thin(rows)
            ax.plot(shown["step"], shown["reward_mean"], color=color, linewidth=2.2, marker="o", label=run)
            continue
        smoothing = True
        rows = rows.assign(smooth=smoothed(rows["reward_mean"]).to_numpy())
        shown = thin(rows)
        ax.plot(shown["step"], shown["reward_mean"], color=color, linewidth=0.8, alpha=0.35)
        ax.plot(shown["step"], shown["smooth"], color=color, linewidth=2.2, label=run)
    ax.set_xlabel("optimizer step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no 1.2 ticks
    ax.set_ylabel("mean reward of the step's completions")
    shown_as = (
        "raw (thin) and smoothed (thick)" if smoothing else "raw, each step marked (too few steps to smooth)"
    )
    figure.suptitle(f"Training reward: {shown_as}", fontsize=12)
    figure.legend(title="training run", loc="outside right upper", frameon=False)
    return figure
