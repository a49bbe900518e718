"""What every figure module shares: matplotlib with the file-only backend, and the panel a figure
shows in place of empty axes (it says why there is nothing to draw). A module of its own so the
figure modules (`figures`, `drift_cost_figure`, `training_figure`) need not import each other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def empty(title: str, why: str) -> Figure:
    figure, ax = pyplot().subplots(figsize=(6.0, 2.2), layout="constrained")
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}\n\nno data: {why}", ha="center", va="center", fontsize=11, wrap=True)
    return figure
