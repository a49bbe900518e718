"""`schemashift report html`: one self-contained page (`report.html`) from the tables and figures.

The page leads with the answer: a headline table per ruleset (every subject that ran: overall
success and score with their intervals, and coverage), one line per reason for the subjects that
never ran, and the key figures. Then the details (what ran, coverage, every table and figure),
then the provenance from the manifest, collapsed. Figures are embedded as base64 PNG; the page
references nothing outside itself.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.report import ReportError
from schemashift.report.analysis import OVERALL, TRAINED_ON
from schemashift.report.figures import INDEX_FILE
from schemashift.report.load import coverage, coverage_text, manifest_cells, read_json
from schemashift.report.tables.format import (
    CELL_NOTE,
    MISSING,
    PROVISIONAL,
    cell_text,
    p_text,
    read_index,
)
from schemashift.report.tables.format import INDEX_FILE as TABLES_FILE

if TYPE_CHECKING:
    import pandas as pd

    from schemashift.report.analysis import Analysis

REPORT_FILE = "report.html"
LISTED_CELLS = 50  # missing or failed cells listed by name before "and N more"

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1, h2, h3, h4 { line-height: 1.2; }
table { border-collapse: collapse; margin: 0.5rem 0 1.25rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.55rem; vertical-align: top; }
th { background: #f2f2f2; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
td.coverage { font-variant-numeric: tabular-nums; min-width: 7rem; }
.note { color: #555; font-size: 0.9rem; max-width: 60rem; }
.not-run { color: #555; font-style: italic; margin: 0.25rem 0; }
figure.chart { border-top: 1px solid #eee; padding-top: 0.5rem; }
.vega { min-height: 120px; }
details > summary { cursor: pointer; color: #333; }
.scroll { overflow-x: auto; }
figure { margin: 1.5rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.9rem; max-width: 60rem; }
code { font-size: 0.9em; }
"""


def render(a: Analysis, tables_dir: str | Path, figures_dir: str | Path) -> str:
    figures = figure_index(Path(figures_dir))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        "<title>SchemaShift report</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        "<h1>SchemaShift report</h1>",
        *headline_section(a),
        '<h2 id="details">Details</h2>',
        *what_ran(a),
        *tables_section(Path(tables_dir)),
        *figures_section(figures),
        *provenance_section(a.all_episodes, a.manifest),
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(parts)


def write(a: Analysis, tables_dir: str | Path, figures_dir: str | Path, out_dir: str | Path) -> Path:
    from schemashift.rollout import io

    text = render(a, tables_dir, figures_dir)
    path = Path(out_dir) / REPORT_FILE
    io.atomic_write(path, lambda f: f.write(text.encode("utf-8")))
    return path


# -- the answer -------------------------------------------------------------------------------------


def role(a: Analysis, subject: str) -> str:
    """What a subject is, in words: a baseline, an untrained base model, a run's checkpoint."""
    kind = a.kinds.get(subject)
    if kind == "checkpoint":
        run_name, _, step = subject.rpartition("@step-")
        run = a.runs.get(run_name)
        trained = run is not None and run.trained_subject == subject
        return f"{'trained' if trained else 'checkpoint'}: run {run_name}, step {step}"
    return {"rule": "rule baseline", "model": "model baseline", "base": "untrained base (step 0)"}.get(
        kind or "", kind or "unknown"
    )


def coverage_cell(a: Analysis, ruleset: str, subject: str) -> str:
    """Graded of expected cells over the ruleset's scenarios, infra_error apart; a dagger where
    the subject's numbers are provisional."""
    covers = [a.cover(ruleset, subject, s) for s in a.scenarios(ruleset)]
    graded = sum(c.graded for c in covers)
    infra = sum(c.infra_error for c in covers)
    if any(c.expected is None for c in covers):
        text = f"{graded} graded (expected unknown)"
    else:
        expected = sum(c.expected for c in covers)
        text = f"{graded}/{expected} ({graded / expected:.0%})" if expected else f"{graded}/0"
    if infra:
        text += f", {infra} infra_error"
    return text + (PROVISIONAL if any(c.provisional for c in covers) else "")


def headline_section(a: Analysis) -> list[str]:
    """The answer first: per ruleset, every subject that ran with its overall success rate and
    score (95% intervals over the seeds) and its coverage; the subjects that never ran in one line
    per reason; then the key figures."""
    out = [
        '<h2 id="results">Results</h2>',
        '<p class="note">Overall success rate and mean score of every subject that ran: the mean over '
        "scenarios (each weighs the same) of graded episodes, with 95% intervals over the seeds "
        "(n: distinct episodes; 'replays' where every seed of a task replays one episode, and "
        f"'{TRAINED_ON}' where the subject was trained on the tasks it is evaluated on); "
        f"{MISSING} where a scenario has no graded episode (never 0); {PROVISIONAL}: provisional "
        "(incomplete coverage). Coverage: graded of expected cells. Details, every table and the "
        'method follow under <a href="#details">Details</a>.</p>',
        '<p class="note">The same results as a Trackio dashboard: <code>TRACKIO_DIR=results/trackio '
        "trackio show --project schemashift</code> (docs/report.md gives the preset views). Screenshots "
        'taken by the workflow where Chromium is installed: <a href="screenshots/report.png">this page</a>, '
        '<a href="screenshots/trackio.png">the dashboard</a>.</p>',
    ]
    for ruleset in a.rulesets:
        body = [
            [
                _text(a.shown(ruleset, subject)),
                ("nowrap", html.escape(role(a, subject))),
                _num(cell_text(a.stat(ruleset, subject, "success", OVERALL))),
                _num(cell_text(a.stat(ruleset, subject, "score", OVERALL))),
                # the one column that may wrap: its notes (infra errors, expected unknown) are long
                ("coverage", html.escape(coverage_cell(a, ruleset, subject))),
            ]
            for subject in a.ran(ruleset)
        ]
        out.append(f'<h3 id="results-{html.escape(ruleset)}">Ruleset {html.escape(ruleset)}</h3>')
        out += drift_cost_section(a, ruleset)
        if body:
            header = ["subject", "what", "success rate (overall)", "mean score (overall)", "coverage"]
            out.append(_table(header, body))
        else:
            out.append('<p class="note">No subject has results on this ruleset.</p>')
        out += [f'<p class="not-run">{html.escape(line)}</p>' for line in a.not_run_lines(ruleset)]
    out.append("<h3>Key figures</h3>")
    out.append(
        '<p class="note">Interactive (hover, legend, zoom, selectors); every figure also follows as a '
        'static image under <a href="#figures">Figures</a> (PNG and PDF beside this page for papers).</p>'
    )
    out += interactive_figures(a)
    return out


def drift_cost_section(a: Analysis, ruleset: str) -> list[str]:
    """What drift costs on a ruleset with a control arm, compactly: each subject's success rate
    with drift and in the control arm on the cells played in both, the cost and its verdict (the
    `<ruleset>_drift_cost` table, scores included, follows under Details); one line where no
    control rows exist."""
    from schemashift.report import arms
    from schemashift.report.tables.drift_cost import drift_cost_table

    if not arms.plays_control(a, ruleset):
        return []
    table = drift_cost_table(a, ruleset)
    out = [f'<h4 id="drift-cost-{html.escape(ruleset)}">{html.escape(table.title)}</h4>']
    body = []
    for subject in arms.subjects(a, ruleset):
        cost = a.compared(ruleset, subject, arms.CONTROL_REFERENCE, "success")
        flag = PROVISIONAL if cost.provisional else ""
        interval = f"[{cost.ci_low:+.3f}, {cost.ci_high:+.3f}]" if cost.has_interval else f"({cost.note})"
        p = f", p_holm={p_text(cost.p_adjusted)}" if cost.p_adjusted is not None else ""
        body.append(
            [
                _text(a.shown(ruleset, subject)),
                _num(arms.matched_episodes(a, ruleset, subject)),
                *(
                    _num(cell_text(arms.arm_stat(a, ruleset, subject, arm, "success")))
                    for arm in (DRIFT, CONTROL)
                ),
                _num("missing" if cost.mean is None else f"{cost.mean:+.3f} {interval} n={cost.n}{flag}"),
                _text(arms.cost_verdict(cost) + p),
            ]
        )
    if body:
        header = ["subject", "matched episodes", "success with drift", "success without (control)"]
        out.append(_table([*header, "drift cost", "verdict"], body))
    out.append(f'<p class="note">{html.escape(table.note)}</p>')
    return out


def interactive_figures(a: Analysis) -> list[str]:
    """The interactive charts, each in its own element, rendered by the inlined Vega script; a
    chart without data is one line saying why."""
    from schemashift.report.interactive import charts, vega_script

    out, specs = [], {}
    for number, chart in enumerate(charts(a), start=1):
        element = f"chart-{chart.key}"
        out.append(f'<figure class="chart" id="{element}-figure"><h4>{html.escape(chart.title)}</h4>')
        if chart.spec is None:
            out.append(
                f'<p class="not-run">{html.escape(chart.title)}: nothing to show: '
                f"{html.escape(chart.empty or '')}</p>"
            )
        else:
            specs[element] = chart.spec
            out.append(f'<div class="vega" id="{element}"></div>')
        out.append(
            f"<figcaption>Interactive figure {number}. {html.escape(chart.caption)}</figcaption></figure>"
        )
    if specs:
        # JSON inside a script: "</" must not end the element early
        payload = json.dumps(specs, sort_keys=True).replace("</", "<\\/")
        out.append(f"<script>{vega_script()}</script>")
        out.append(
            "<script>const specs = " + payload + ";\n"
            "for (const [id, spec] of Object.entries(specs)) {\n"
            "  vegaEmbed('#' + id, spec, {actions: false, renderer: 'svg'}).catch((error) => {\n"
            "    document.getElementById(id).textContent = 'This chart could not be drawn: ' + error;\n"
            "    console.error(error);\n"
            "  });\n"
            "}</script>"
        )
    return out


# -- what ran ---------------------------------------------------------------------------------------


def what_ran(a: Analysis) -> list[str]:
    episodes, manifest = a.episodes, a.manifest
    out = ["<h3>What ran</h3>"]
    header = ["ruleset", "subjects", "scenarios", "seeds", "samples", "graded", "infra_error", "coverage"]
    body = []
    for ruleset in a.rulesets:
        rows = episodes[episodes["ruleset"] == ruleset]
        expected = [c for c in manifest_cells(manifest) if c["ruleset"] == ruleset]
        cov = coverage(episodes, manifest, ruleset)
        policies = a.ran(ruleset)
        not_run = len(a.not_run(ruleset))
        scenarios = sorted(set(rows["scenario"]) | {c["scenario"] for c in expected})
        seeds = {int(s) for s in rows["seed"].dropna()} | {c["seed"] for c in expected}
        # rule baselines may be expected on more seeds than models (evaluation.*.baseline_seeds)
        expected_seeds: dict[str, set[int]] = {}
        for cell in expected:
            expected_seeds.setdefault(cell["subject"], set()).add(cell["seed"])
        by_seeds: dict[str, list[str]] = {}
        for subject, subject_seeds in expected_seeds.items():
            by_seeds.setdefault(ranges(subject_seeds), []).append(subject)
        seeds_text = (
            "; ".join(f"{spans}: {', '.join(names)}" for spans, names in by_seeds.items())
            if len(by_seeds) > 1
            else ranges(seeds)
        )
        samples = {int(s) for s in rows["sample_index"].dropna()} | {c["sample_index"] for c in expected}
        body.append(
            [
                _text(ruleset),
                _text(", ".join(policies) + (f" (and {not_run} not run, see Results)" if not_run else "")),
                _text(", ".join(scenarios)),
                _text(seeds_text),
                _num(len(samples) or "\u2014"),
                _num(cov["graded"]),
                _num(cov["infra_error"]),
                _text(coverage_text(cov)),
            ]
        )
    out.append(_table(header, body))
    out += runs_section(a)
    out += coverage_section(a)
    return out


def coverage_section(a: Analysis) -> list[str]:
    """The expected cells by status; the missing and infra_error cells of subjects that ran,
    grouped by subject and scenario (those of subjects that never ran are their not-run line)."""
    manifest = a.manifest
    if not manifest:
        return [
            "<h4>Coverage</h4>",
            '<p class="note">No manifest was given: the expected and missing cells are unknown.</p>',
        ]
    cells = manifest_cells(manifest)  # the drift arm's: control cells are the drift cost's
    counts = {s: sum(c.get("status") == s for c in cells) for s in ("graded", "infra_error", "missing")}
    out = [
        "<h4>Coverage</h4>",
        f"<p>{len(cells)} expected cells: {counts.get('graded', 0)} graded, "
        f"{counts.get('infra_error', 0)} infra_error, {counts.get('missing', 0)} missing.</p>",
    ]
    never = {(r, s) for r in a.rulesets for s in a.not_run(r)}
    for status in ("missing", "infra_error"):
        groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
        for c in cells:
            if c.get("status") == status and (c["ruleset"], c["subject"]) not in never:
                groups.setdefault((c["ruleset"], c["subject"], c["scenario"]), []).append(c)
        if not groups:
            continue
        names = [
            f"{ruleset} / {subject} / {scenario}: seeds {ranges(c['seed'] for c in group)}, samples "
            f"{ranges(c['sample_index'] for c in group)} ({len(group)} cell{'s' * (len(group) != 1)})"
            for (ruleset, subject, scenario), group in list(groups.items())[:LISTED_CELLS]
        ]
        more = len(groups) - len(names)
        items = "".join(f"<li>{html.escape(n)}</li>" for n in names)
        if more:
            items += f"<li>and {more} more subject and scenario pairs</li>"
        out.append(f"<p>{status} cells of subjects that ran:</p><ul>{items}</ul>")
    lines = [f"{ruleset}: {line}" for ruleset in a.rulesets for line in a.not_run_lines(ruleset)]
    if lines:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
        out.append(f"<p>Subjects without a single result (their cells are all missing):</p><ul>{items}</ul>")
    return out


def provenance_section(episodes: pd.DataFrame, manifest: Mapping[str, Any] | None) -> list[str]:
    out = [
        '<h2 id="provenance">Provenance</h2>',
        "<details><summary>Code, config, packages and container of this report</summary>",
    ]
    rows: list[tuple[str, str]] = []
    if manifest:
        dirty = manifest.get("git_dirty")
        rows += [
            ("schemashift version", _str(manifest.get("schemashift_version"))),
            ("record schema version", _str(manifest.get("record_schema_version"))),
            ("git commit (aggregate)", _str(manifest.get("git_sha"))),
            (
                "uncommitted changes",
                "unknown" if dirty is None else ("yes (dirty)" if dirty else "no (clean)"),
            ),
            ("config hash", _str(manifest.get("config_hash"))),
            ("python", _str(manifest.get("python"))),
            (
                "packages",
                ", ".join(f"{k} {v}" for k, v in sorted((manifest.get("packages") or {}).items()))
                or "unknown",
            ),
            ("container image", _image(manifest.get("image"))),
        ]
    else:
        out.append('<p class="note">No manifest was given; what follows comes from the episode rows.</p>')
    for column, title in (
        ("git_sha", "git commits of the rows"),
        ("config_hash", "config hashes of the rows"),
        ("env_version", "schemashift versions of the rows"),
        ("ruleset_version", "ruleset versions of the rows"),
    ):
        values = sorted({str(v) for v in episodes[column].dropna()})
        rows.append((title, ", ".join(values) if values else "unknown"))
    out.append(_table(["", ""], [[_text(k), _text(v)] for k, v in rows], header_row=False))
    out.append("</details>")
    return out


def _image(image: Any) -> str:
    if image is None:
        return "none recorded"
    if isinstance(image, Mapping):
        return ", ".join(f"{k}: {v}" for k, v in sorted(image.items()))
    return str(image)


def _str(value: Any) -> str:
    return "unknown" if value is None else str(value)


def ranges(values: Iterable[int]) -> str:
    """`{0, 1, 2, 4}` -> `0-2, 4`."""
    values = sorted(set(values))
    if not values:
        return "\u2014"
    spans: list[list[int]] = []
    for v in values:
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


# -- tables and figures -----------------------------------------------------------------------------


def runs_section(a: Analysis) -> list[str]:
    if not a.runs:
        return []
    header = [
        "training run",
        "description",
        "base model",
        "ruleset",
        "reward",
        "split",
        "checkpoints",
        "trained",
        "step 0",
    ]
    body = [
        [
            _text(run.name),
            _text(run.description or ""),
            _text(run.base_model or "unknown"),
            _text(run.ruleset or "unknown"),
            _text(run.reward or "unknown"),
            _text(run.split or "unknown"),
            _text(", ".join(map(str, run.steps)) + ("" if run.indexed else " (planned, not trained)")),
            _text(run.trained_subject),
            _text(a.base_subject(run) or "missing"),
        ]
        for run in a.runs.values()
    ]
    return ["<h4>Training runs</h4>", _table(header, body)]


def tables_section(tables_dir: Path) -> list[str]:
    path = tables_dir / TABLES_FILE
    if not path.is_file():
        raise ReportError(f"{path}: no table index; run `schemashift report tables`")
    out = ["<h3>Tables</h3>", f'<p class="note">{html.escape(CELL_NOTE)}</p>']
    section = None
    for table in read_index(path):
        if table.section != section:
            section = table.section
            out.append(f"<h4>{html.escape(section)}</h4>")
        out.append(f'<h5 id="{html.escape(table.key)}">{html.escape(table.title)}</h5>')
        if table.note:
            out.append(f'<p class="note">{html.escape(table.note)}</p>')
        if not table.rows:
            out.append('<p class="note">(nothing to show)</p>')
            continue
        body = [[_text(r[0]), *(_num(c) for c in r[1:])] for r in table.rows]
        if table.header[-1] == TRACE_COLUMN:
            body = [[*cells[:-1], _trace(row[-1])] for cells, row in zip(body, table.rows, strict=True)]
        out.append(_table(table.header, body))
    return out


def figure_index(figures_dir: Path) -> list[dict[str, Any]]:
    """The figures `report figures` wrote, each with its stem, caption and PNG path."""
    index = read_json(figures_dir / INDEX_FILE, "figure index")
    if not isinstance(index, list) or not index:
        raise ReportError(f"{figures_dir / INDEX_FILE}: lists no figures; run `schemashift report figures`")
    return [{**entry, "png": figures_dir / f"{entry['stem']}.png"} for entry in index]


def figures_section(figures: Sequence[Mapping[str, Any]]) -> list[str]:
    return ['<h3 id="figures">Figures</h3>', *(_figure(entry) for entry in figures)]


def _figure(entry: Mapping[str, Any]) -> str:
    png = Path(entry["png"])
    try:
        data = base64.b64encode(png.read_bytes()).decode("ascii")
    except OSError as exc:
        raise ReportError(f"{png}: cannot read the figure: {exc}") from None
    caption = html.escape(entry.get("caption") or entry["stem"])
    stem = html.escape(entry["stem"])
    return (
        f'<figure id="{stem}"><img alt="{stem}" src="data:image/png;base64,{data}">'
        f"<figcaption>{caption}</figcaption></figure>"
    )


#: a table column of episode traces: "<dashboard link> <trace key>", rendered as a link
TRACE_COLUMN = "trace"


def _trace(value: str) -> tuple[str, str]:
    """A failed example's trace: a link to the dashboard's Traces tab, named by its key."""
    link, _, key = value.partition(" ")
    return (
        "",
        f'<a href="{html.escape(link)}" title="search the Traces tab for this key">{html.escape(key)}</a>',
    )


def _text(value: Any) -> tuple[str, str]:
    return ("", html.escape(str(value)))


def _num(value: Any) -> tuple[str, str]:
    return ("num", html.escape(str(value)))


def _table(header: Sequence[str], body: Sequence[Sequence[tuple[str, str]]], header_row: bool = True) -> str:
    lines = ['<div class="scroll"><table>']
    if header_row:
        lines.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead>")
    lines.append("<tbody>")
    for row in body:
        cells = []
        for i, (cls, text) in enumerate(row):
            if not header_row and i == 0:
                cells.append(f"<th>{text}</th>")
            else:
                cells.append(f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>")
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines += ["</tbody>", "</table></div>"]
    return "\n".join(lines)
