"""How a table looks: cells, the `Table` record, and writing summary.md, the CSVs and tables.json.

Cells read `value [low, high] n=N`, or `value (no variation observed) n=N` where the data give no
interval; `missing` where nothing was graded (never a 0); a trailing dagger marks a provisional
value (computed over incomplete coverage).
"""

from __future__ import annotations

import csv
import io as _io
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from schemashift.report import ReportError
from schemashift.report.analysis import TIER_PREFIX, TRAINED_ON
from schemashift.report.stats import LEVEL, Stat

INDEX_FILE = "tables.json"
SUMMARY_FILE = "summary.md"
MISSING = "missing"
#: a subject that is not evaluated on a ruleset at all (nothing was expected there)
NOT_PLAYED = "not played"
PROVISIONAL = "\u2020"
SUMMARY_NOTE = (
    "The answer first: each ruleset's overall results, the comparisons that carry a verdict and what "
    "the results cannot support. Every other table (per scenario, per seed, efficiency, drifts, "
    "examples...) is linked at the end as CSV and shown in report.html."
)
CELL_NOTE = (
    f"Cells: mean [{LEVEL:.0%} interval] n=distinct episodes. The question every interval answers: what "
    "would this subject score on these scenarios (fixed: they are the benchmark) over all of their "
    "seeds? Only the seeds are a sample: a seed's samples are averaged first, tier and overall "
    "columns average the scenario means (each scenario weighs the same), and the interval comes "
    "from the seeds within each scenario. Success, score and pass^k lie in [0, 1] and get bounded "
    "intervals (Clopper-Pearson on the effective number of seeds), which hold at these sizes, "
    "also for 0/n and n/n; differences of them get Newcombe's square-and-add interval "
    "(docs/report.md gives the coverage simulation). 'replays': the ruleset's seeds do not vary the "
    "task (legacy) and every seed of each scenario replays the same episode, so n counts the distinct "
    "episodes and no interval is given over copies. "
    f"'{TRAINED_ON}': the subject (or the warm start of its model) was trained on the tasks it is "
    "evaluated on; its numbers measure recall, not skill. "
    f"{MISSING}: no graded episode (for a tier or overall: some scenario of it has none), never 0. "
    f"{PROVISIONAL}: provisional, computed over incomplete coverage (missing or infra_error cells). "
    "infra_error episodes never enter a mean."
)


@dataclass
class Table:
    key: str
    section: str
    title: str
    header: list[str]
    rows: list[list[str]]
    records: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    #: shown in summary.md (the others only as their CSV, linked from it)
    headline: bool = False


# -- cell formatting -----------------------------------------------------------------------------


def _interval(stat: Stat, fmt: str) -> str:
    if stat.has_interval:
        return f"[{stat.ci_low:{fmt}}, {stat.ci_high:{fmt}}]"
    return f"({stat.note or 'no interval'})"


def cell_text(stat: Stat, digits: int = 3) -> str:
    if stat.mean is None:
        return MISSING
    flag = PROVISIONAL if stat.provisional else ""
    return f"{stat.mean:.{digits}f} {_interval(stat, f'.{digits}f')} n={stat.n}{flag}"


def stat_record(stat: Stat, **keys: Any) -> dict[str, Any]:
    return {**keys, **asdict(stat)}


def column_title(column: str) -> str:
    if column.startswith(TIER_PREFIX):
        return f"{column.removeprefix(TIER_PREFIX)} (tier)"
    return column


def num(value: Any, digits: int = 3) -> str:
    if value is None or value != value:
        return MISSING
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def signed(stat: Stat) -> str:
    """A difference: value, interval, pairs and, where tested, its p-value (Holm-adjusted where
    its table adjusted it)."""
    if stat.mean is None:
        return MISSING
    flag = PROVISIONAL if stat.provisional else ""
    text = f"{stat.mean:+.3f} {_interval(stat, '+.3f')} n={stat.n}{flag}"
    if stat.p_adjusted is not None:
        return f"{text} p_holm={p_text(stat.p_adjusted)}"
    return text if stat.p_value is None else f"{text} p={p_text(stat.p_value)}"


def detectable_note(diffs: Sequence[Stat]) -> str:
    """What the comparisons of a table could have found: the range of their minimum detectable
    differences at 80% power, each at its Holm family's size (the family named)."""
    present = [d for d in diffs if d.mean is not None]
    found = [d.detectable for d in present if d.detectable is not None]
    if not present:
        return "No comparison here has results."
    if not found:
        return "Minimum detectable difference: none (no comparison here has an interval: replays)."
    families = sorted({d.family for d in present if d.family})
    where = f" (Holm family: {', '.join(families)})" if families else ""
    return (
        f"Minimum detectable difference at 80% power and this size{where}: {detectable_span(found)}. "
        "A comparison that is not significant is 'not separable at this size', not a tie: a "
        "difference below its detectable one would mostly go unseen."
    )


def detectable_span(found: Sequence[float]) -> str:
    """`0.41` or `0.39 to 0.46`; above 1 a difference of [0, 1] means cannot reach it."""
    low, high = min(found), max(found)
    span = f"{low:.2f}" if round(low, 2) == round(high, 2) else f"{low:.2f} to {high:.2f}"
    return span + (" (above 1: no difference of [0, 1] means can reach it)" if high > 1 else "")


def p_text(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def size_text(size: Any, estimated: bool = False) -> str:
    """A parameter count in billions; an estimate (not a published count) is marked with ~."""
    if size is None:
        return "\u2014"
    return f"~{size:g}B (estimate)" if estimated else f"{size:g}B"


def slug(text: str) -> str:
    """`text` fit for a file name: anything but letters, digits, - and _ becomes _."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


# -- writing -------------------------------------------------------------------------------------


def write(tables: Sequence[Table], out_dir: str | Path, summary: str | Path | None = None) -> list[Path]:
    """Write each table's CSV, `tables.json` and summary.md; returns the paths written."""
    from schemashift.rollout import io

    out = Path(out_dir)
    written = []
    for table in tables:
        path = out / f"{table.key}.csv"
        text = to_csv(table.records)
        io.atomic_write(path, lambda f, text=text: f.write(text.encode("utf-8")))
        written.append(path)
    io.write_json(out / INDEX_FILE, [asdict(t) for t in tables])
    written.append(out / INDEX_FILE)
    path = Path(summary) if summary is not None else out / SUMMARY_FILE
    text = markdown(tables, Path(os.path.relpath(out.resolve(), path.parent.resolve())).as_posix())
    io.atomic_write(path, lambda f: f.write(text.encode("utf-8")))
    written.append(path)
    return written


def markdown(tables: Sequence[Table], link: str = ".") -> str:
    """summary.md: the headline tables (the answer, the verdicts, what cannot be concluded), then a
    link to every table's CSV, `link` the folder of the CSVs relative to summary.md."""
    lines = ["# SchemaShift results", "", SUMMARY_NOTE, "", CELL_NOTE, ""]
    section = None
    for table in (t for t in tables if t.headline):
        if table.section != section:
            section = table.section
            lines += [f"## {section}", ""]
        lines += [f"### {table.title}", ""]
        if table.note:
            lines += [table.note, ""]
        lines += [markdown_table(table.header, table.rows) if table.rows else "(nothing to show)", ""]
    lines += ["## Every table", "", "Each table in full, as CSV (report.html shows them all):", ""]
    lines += [f"- {t.section}: [{t.title}]({link}/{t.key}.csv)" for t in tables]
    return "\n".join([*lines, ""])


def to_csv(records: Sequence[Mapping[str, Any]]) -> str:
    columns = list(dict.fromkeys(k for r in records for k in r))
    buffer = _io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in records:
        writer.writerow(["" if row.get(c) is None else _csv_value(row[c]) for c in columns])
    return buffer.getvalue()


def _csv_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return "\n".join([line(header), "| " + " | ".join("---" for _ in header) + " |", *map(line, body)])


def read_index(path: str | Path) -> list[Table]:
    """The tables a `report tables` run wrote (its tables.json)."""
    from schemashift.report.load import read_json

    data = read_json(path, "table index")
    if not isinstance(data, list):
        raise ReportError(f"{path}: not a table index")
    try:
        return [Table(**entry) for entry in data]
    except TypeError as exc:
        raise ReportError(f"{path}: not a table index: {exc}") from None
