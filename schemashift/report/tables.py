"""`schemashift report tables`: per ruleset, policy x scenario tables of mean score and success rate.

Writes `<ruleset>_summary.csv` (tidy: ruleset, policy, scenario, metric, mean, ci_low, ci_high, n;
`scenario` is a scenario id, `tier:<tier>` or `overall`; empty mean where nothing was graded),
`<ruleset>_drifts.csv` when drift rows are given, and `summary.md` with one section per ruleset.
"""

from __future__ import annotations

import csv
import io as _io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.report import ReportError
from schemashift.report.load import coverage_text
from schemashift.report.stats import LEVEL, METRICS, TIER_PREFIX, RulesetSummary

if TYPE_CHECKING:
    import pandas as pd

SUMMARY_COLUMNS = ("ruleset", "policy", "scenario", "metric", "mean", "ci_low", "ci_high", "n")
DRIFT_COLUMNS = (
    "ruleset",
    "policy",
    "kind",
    "planned",
    "fired",
    "discovered",
    "reported",
    "recovered",
    "mean_steps_to_recover",
)
MISSING = "\u2014"  # an em dash: a cell without graded episodes, never a 0
SUMMARY_SUFFIX = "_summary.csv"
DRIFTS_SUFFIX = "_drifts.csv"

NOTE = (
    f"Cells: mean [{LEVEL:.0%} bootstrap interval] (n = graded episodes). Intervals resample episodes "
    "within a cell. Tier and overall columns average the scenario means (each scenario weighs the "
    f"same) and resample within each scenario. {MISSING}: no graded episode (a tier or overall "
    f"column: some scenario of it has none). infra_error episodes are excluded from every mean."
)


def write(
    summaries: Sequence[RulesetSummary], out_dir: str | Path, drifts: pd.DataFrame | None = None
) -> list[Path]:
    """Write the CSV files and summary.md into `out_dir`; returns the paths written."""
    from schemashift.rollout import io

    out = Path(out_dir)
    written = []
    sections = ["# SchemaShift results", ""]
    for summary in summaries:
        rows = summary.tidy_rows()
        path = out / f"{summary.ruleset}{SUMMARY_SUFFIX}"
        io.atomic_write(path, lambda f, rows=rows: f.write(to_csv(rows, SUMMARY_COLUMNS).encode("utf-8")))
        written.append(path)
        sections += [
            f"## Ruleset `{summary.ruleset}`",
            "",
            "Coverage: " + coverage_text(summary.coverage),
            "",
        ]
        for metric, title in METRICS.items():
            sections += [f"### {title.capitalize()}", "", markdown_table(*grid(rows, metric)), ""]
        if drifts is not None:
            drift_rows = drift_summary(drifts, summary.ruleset)
            path = out / f"{summary.ruleset}{DRIFTS_SUFFIX}"
            text = to_csv(drift_rows, DRIFT_COLUMNS)
            io.atomic_write(path, lambda f, text=text: f.write(text.encode("utf-8")))
            written.append(path)
            sections += ["### Drift outcomes", "", DRIFT_NOTE, ""]
            sections += [markdown_table(*drift_grid(drift_rows)), ""]
    sections += [NOTE, ""]
    path = out / "summary.md"
    text = "\n".join(sections)
    io.atomic_write(path, lambda f: f.write(text.encode("utf-8")))
    written.append(path)
    return written


def to_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    buffer = _io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row[c] is None else _csv_value(row[c]) for c in columns])
    return buffer.getvalue()


def _csv_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def read_summary_csv(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a `<ruleset>_summary.csv`, numbers parsed, empty fields as None."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if tuple(reader.fieldnames or ()) != SUMMARY_COLUMNS:
                raise ReportError(f"{path}: not a summary table (columns {reader.fieldnames})")
            rows = list(reader)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc}") from None
    for row in rows:
        for key in ("mean", "ci_low", "ci_high"):
            row[key] = float(row[key]) if row[key] != "" else None
        row["n"] = int(row["n"])
    return rows


def cell_text(row: Mapping[str, Any]) -> str:
    """`0.522 [0.522, 0.522] (n=5)`, or an em dash without a mean."""
    if row["mean"] is None:
        return MISSING
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] (n={row['n']})"


def column_title(column: str) -> str:
    if column.startswith(TIER_PREFIX):
        return f"{column.removeprefix(TIER_PREFIX)} (tier)"
    return column


def grid(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[str], list[list[str]]]:
    """Header and body of the policy x column table of `metric`, in the rows' order."""
    rows = [r for r in rows if r["metric"] == metric]
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    columns = list(dict.fromkeys(r["scenario"] for r in rows))
    cells = {(r["policy"], r["scenario"]): cell_text(r) for r in rows}
    header = ["policy", *map(column_title, columns)]
    body = [[p, *(cells.get((p, c), MISSING) for c in columns)] for p in policies]
    return header, body


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "| " + " | ".join("---" for _ in header) + " |", *map(line, body)])


# -- drift outcomes ---------------------------------------------------------------------------------

DRIFT_NOTE = (
    "Per policy and drift kind over graded episodes: drifts planned, fired, discovered (evidence seen "
    "on the drifted tool), reported correctly and recovered from (a successful call after a failure), "
    "and the mean steps from failure to recovery."
)


def drift_summary(drifts: pd.DataFrame, ruleset: str) -> list[dict[str, Any]]:
    rows = drifts[drifts["ruleset"] == ruleset]
    out = []
    for (policy, kind), group in sorted(rows.groupby(["label", "kind"], dropna=False), key=_group_key):
        recover = group["steps_to_recover"].dropna()
        out.append(
            {
                "ruleset": ruleset,
                "policy": policy,
                "kind": kind,
                "planned": len(group),
                "fired": int(group["fired_step"].notna().sum()),
                "discovered": int(group["discovered_step"].notna().sum()),
                "reported": int(group["reported_step"].notna().sum()),
                "recovered": int(group["recovered_step"].notna().sum()),
                "mean_steps_to_recover": float(recover.mean()) if len(recover) else None,
            }
        )
    return out


def _group_key(item: tuple[tuple[Any, Any], Any]) -> tuple[str, str]:
    (policy, kind), _ = item
    return (str(policy), "" if kind is None or kind != kind else str(kind))


def drift_grid(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = [
        "policy",
        "drift kind",
        "planned",
        "fired",
        "discovered",
        "reported",
        "recovered",
        "steps to recover",
    ]
    body = []
    for r in rows:
        steps = MISSING if r["mean_steps_to_recover"] is None else f"{r['mean_steps_to_recover']:.2f}"
        counts = [str(r[k]) for k in ("planned", "fired", "discovered", "reported", "recovered")]
        body.append([str(r["policy"]), str(r["kind"]), *counts, steps])
    return header, body


def read_drifts_csv(path: str | Path) -> list[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key in ("planned", "fired", "discovered", "reported", "recovered"):
            row[key] = int(row[key])
        value = row["mean_steps_to_recover"]
        row["mean_steps_to_recover"] = float(value) if value != "" else None
    return rows
