"""Published reference numbers the benchmark compares against without rerunning them.

The original training log (docs/original-training-log.md; its section 1, "Baseline - gpt-oss:120b")
publishes a per-seed table
of gpt-oss:120b on the original SchemaShift: 3 seeds x 6 scenarios, evaluated through Ollama Cloud
on 2026-04-22. Its rows are the legacy ruleset's columns; the report shows them marked
"published, not rerun", with intervals computed from these rows like any other.
"""

from __future__ import annotations

from typing import Any

GPT_OSS_120B = "gpt-oss:120b (published)"
GPT_OSS_PARAMS_B = 120.0
SOURCE = "TRAINING_LOG, section 1, gpt-oss:120b baseline (3 seeds x 6 scenarios, Ollama Cloud)"

_COLUMNS = ("completion", "drift_detection", "adaptation", "efficiency", "shaped_total", "cumulative_reward")
# scenario, seed, completion, drift, adaptation, efficiency, shaped, cumulative, binary, steps
_ROWS = (
    ("E1_onboard_new_hire", 0, 0.400, 0.000, 0.000, 0.812, 0.000, 0.672, 0, 3),
    ("E1_onboard_new_hire", 1, 0.400, 0.000, 0.000, 0.688, 0.000, 1.226, 0, 5),
    ("E1_onboard_new_hire", 2, 0.400, 0.000, 0.000, 0.750, 0.000, 0.954, 0, 4),
    ("E2_meeting_invite_blast", 0, 0.000, 0.000, 1.000, 0.500, 0.000, 1.562, 0, 6),
    ("E2_meeting_invite_blast", 1, 0.000, 0.000, 1.000, 0.500, 0.000, 1.562, 0, 6),
    ("E2_meeting_invite_blast", 2, 0.000, 0.000, 1.000, 0.500, 0.000, 1.762, 0, 6),
    ("E3_customer_lookup", 0, 0.000, 0.000, 0.000, 0.812, 0.000, 0.272, 0, 3),
    ("E3_customer_lookup", 1, 0.000, 0.000, 1.000, 0.500, 0.000, 1.737, 0, 8),
    ("E3_customer_lookup", 2, 0.000, 0.000, 1.000, 0.500, 0.000, 1.737, 0, 8),
    ("M1_customer_escalation", 0, 0.000, 0.000, 1.000, 0.750, 0.000, 1.406, 0, 6),
    ("M1_customer_escalation", 1, 0.000, 0.000, 1.000, 0.708, 0.000, 1.719, 0, 7),
    ("M1_customer_escalation", 2, 0.000, 0.000, 1.000, 0.875, 0.000, 0.431, 0, 3),
    ("M2_weekly_report", 0, 0.000, 0.000, 0.000, 0.850, 0.000, 0.277, 0, 3),
    ("M2_weekly_report", 1, 0.000, 0.000, 0.000, 0.800, 0.000, 0.405, 0, 4),
    ("M2_weekly_report", 2, 0.000, 0.000, 0.000, 0.750, 0.000, 0.525, 0, 5),
    ("M3_event_cleanup", 0, 0.000, 0.000, 0.000, 0.917, 0.000, 0.144, 0, 2),
    ("M3_event_cleanup", 1, 0.000, 0.000, 1.000, 0.750, 0.000, 1.256, 0, 6),
    ("M3_event_cleanup", 2, 0.000, 0.000, 0.000, 0.917, 0.000, 0.144, 0, 2),
)


def gpt_oss_rows() -> list[dict[str, Any]]:
    """The published per-episode rows as legacy episode columns (score = shaped, success = binary)."""
    rows = []
    for scenario, seed, *values, binary, steps in _ROWS:
        row = dict(zip(_COLUMNS, values, strict=True))
        rows.append(
            {
                "ruleset": "legacy",
                "label": GPT_OSS_120B,
                "scenario": scenario,
                "seed": seed,
                "sample_index": 0,
                "status": "graded",
                **row,
                "score": row["shaped_total"],
                "binary": float(binary),
                "success": float(binary),
                "steps": steps,
            }
        )
    return rows
