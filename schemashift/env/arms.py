"""The two arms a cell is played in: `drift`, the task with its drift plan, and `control`, the
same world, task text and seed with the drift plan off.

The difference of one subject's results between the arms on the same cells is what drift costs
it: a 0 under drift beside a 1 in control is an agent that cannot adapt, a 0 in both one that
cannot do the task. Every layer (records, plans, the server's reset, the report) names arms with
these constants and validates them with `check_arm`.
"""

from __future__ import annotations

DRIFT = "drift"
CONTROL = "control"
#: every arm, in the order tables show them
ARMS = (DRIFT, CONTROL)
#: the arm of a cell that names none (records written before arms existed played this one)
DEFAULT_ARM = DRIFT


def check_arm(arm: object) -> str:
    """`arm` if it names an arm; a ValueError naming the arms otherwise."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}: the arms are {', '.join(ARMS)}")
    return arm  # type: ignore[return-value]
