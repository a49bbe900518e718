"""The report's interactive figures: Vega-Lite charts (built with Altair) that report.html embeds
with the Vega JavaScript inlined, so the page opens from file:// with no network.

The figures people explore: learning curves from step 0 with their interval bands, per-scenario
scores with intervals, coverage beside score, and efficiency. Each has tooltips, a legend that
selects, and zoom or a selector where it helps. The numbers are `Analysis`'s, the same as the
tables' and the static figures' (which stay, PNG and PDF, for papers). A chart with nothing to
show is replaced by one line that says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from schemashift.report.analysis import EFFICIENCY_COLUMNS, METRICS, OVERALL, TIER_PREFIX
from schemashift.report.figures import overview_subjects
from schemashift.report.stats import LEVEL

if TYPE_CHECKING:
    from schemashift.report.analysis import Analysis

WIDTH = 520


@dataclass
class Chart:
    """One interactive figure: its id, caption and Vega-Lite spec, or `empty`: why there is none."""

    key: str
    title: str
    caption: str
    spec: dict[str, Any] | None = None
    empty: str | None = None


@cache
def vega_script() -> str:
    """Vega, Vega-Lite and vega-embed as one script (vl-convert bundles the versions Altair
    writes), inlined once per page."""
    import altair as alt
    import vl_convert

    version = alt.SCHEMA_VERSION.removeprefix("v")
    return vl_convert.javascript_bundle(vl_version=".".join(version.split(".")[:2]))


def _stat_fields(stat: Any) -> dict[str, Any]:
    return {
        "mean": stat.mean,
        "low": stat.ci_low if stat.has_interval else stat.mean,
        "high": stat.ci_high if stat.has_interval else stat.mean,
        "n": stat.n,
        "interval": "yes" if stat.has_interval else (stat.note or "none"),
        "provisional": bool(stat.provisional),
    }


def learning_chart(a: Analysis) -> Chart:
    import altair as alt

    title = "Learning curves"
    caption = (
        f"Overall score and success rate of every training run's checkpoints; step 0 is the untrained "
        f"base (one shared evaluation). Bands: {LEVEL:.0%} intervals over the seeds; hollow points are "
        "provisional. Click a run in the legend to pick it out (shift-click for more), drag or scroll to "
        "zoom, hover for the numbers."
    )
    rows = []
    for run in a.runs.values():
        for ruleset in a.run_rulesets(run):
            ran = set(a.ran(ruleset))
            for step, subject in a.checkpoints(run):
                if subject not in ran:
                    continue
                for metric, name in METRICS.items():
                    stat = a.stat(ruleset, subject, metric, OVERALL)
                    if stat.mean is not None:
                        rows.append(
                            {"run": run.name, "ruleset": ruleset, "metric": name, "step": step}
                            | {"subject": a.shown(ruleset, subject)}
                            | _stat_fields(stat)
                        )
    if not rows:
        reasons = sorted({a.why_not_run(s) for run in a.runs.values() for _, s in a.checkpoints(run) if s})
        why = "no training run has an evaluated checkpoint or step 0"
        return Chart("learning", title, caption, empty=why + (f" ({'; '.join(reasons)})" if reasons else ""))
    data = alt.Data(values=rows)
    pick = alt.selection_point(fields=["run"], bind="legend")
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    base = alt.Chart(data).encode(
        x=alt.X("step:Q", title="checkpoint step (0 = untrained base)"),
        color=alt.Color("run:N", title="training run"),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
    )
    tooltip = ["run:N", "subject:N", "step:Q", alt.Tooltip("mean:Q", format=".3f")]
    tooltip += [alt.Tooltip("low:Q", format=".3f"), alt.Tooltip("high:Q", format=".3f"), "n:Q"]
    tooltip += ["interval:N", "provisional:N"]
    band = base.mark_area(opacity=0.15).encode(
        y=alt.Y("low:Q", title="overall (mean, 95% interval)", scale=alt.Scale(domain=[0, 1])),
        y2="high:Q",
        opacity=alt.condition(pick, alt.value(0.18), alt.value(0.03)),
    )
    line = base.mark_line().encode(y="mean:Q")
    solid = base.mark_point(size=60, filled=True).transform_filter("!datum.provisional")
    hollow = base.mark_point(size=60, filled=False).transform_filter("datum.provisional")
    points = [layer.encode(y="mean:Q", tooltip=tooltip) for layer in (solid, hollow)]
    layered = alt.layer(band, line, *points).properties(width=WIDTH // 2 + 60, height=240)
    chart = layered.facet(
        column=alt.Column("metric:N", title=None), row=alt.Row("ruleset:N", title="ruleset")
    ).add_params(pick, zoom)
    return Chart("learning", title, caption, spec=chart.to_dict())


def scenario_chart(a: Analysis) -> Chart:
    import altair as alt

    title = "Scores per scenario"
    caption = (
        f"Mean score or success rate per scenario, tier and overall for the baselines, untrained models "
        f"and trained checkpoints, with {LEVEL:.0%} intervals over the seeds. Pick the metric below the "
        "chart; click a subject in the legend to pick it out; hover for the numbers."
    )
    rows = []
    for ruleset in a.rulesets:
        for subject in overview_subjects(a, ruleset):
            for column in a.groups(ruleset):
                label = (
                    column.removeprefix(TIER_PREFIX) + " (tier)" if column.startswith(TIER_PREFIX) else column
                )
                for metric, name in METRICS.items():
                    stat = a.stat(ruleset, subject, metric, column)
                    if stat.mean is not None:
                        rows.append(
                            {"ruleset": ruleset, "subject": a.shown(ruleset, subject), "column": label}
                            | {"metric": name}
                            | _stat_fields(stat)
                        )
    if not rows:
        return Chart("scenarios", title, caption, empty="no subject has a graded episode")
    metric = alt.param(
        name="metric_choice",
        value=METRICS["score"],
        bind=alt.binding_select(options=list(METRICS.values()), name="metric "),
    )
    pick = alt.selection_point(fields=["subject"], bind="legend")
    tooltip = ["subject:N", "column:N", alt.Tooltip("mean:Q", format=".3f")]
    tooltip += [alt.Tooltip("low:Q", format=".3f"), alt.Tooltip("high:Q", format=".3f"), "n:Q"]
    tooltip += ["interval:N", "provisional:N"]
    panels = []
    for ruleset in a.rulesets:
        mine = [r for r in rows if r["ruleset"] == ruleset]
        if not mine:
            continue
        order = list(dict.fromkeys(r["column"] for r in mine))
        subjects = list(dict.fromkeys(r["subject"] for r in mine))
        base = (
            alt.Chart(alt.Data(values=mine), title=f"ruleset {ruleset}")
            .transform_filter("datum.metric == metric_choice")
            .encode(
                x=alt.X("column:N", title=None, sort=order, axis=alt.Axis(labelAngle=-30, labelLimit=160)),
                xOffset=alt.XOffset("subject:N", sort=subjects),
                color=alt.Color("subject:N", sort=subjects, legend=alt.Legend(columns=1, labelLimit=260)),
                opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            )
        )
        bars = base.mark_bar().encode(
            y=alt.Y("mean:Q", title="mean (95% interval)", scale=alt.Scale(domain=[0, 1], clamp=True)),
            tooltip=tooltip,
        )
        whiskers = base.mark_rule(color="#333").encode(y="low:Q", y2="high:Q")
        panels.append(alt.layer(bars, whiskers).properties(width=WIDTH + 200, height=240))
    # a selection lives in one view (the legend picks it in all of them); the metric is global
    panels[0] = panels[0].add_params(pick)
    chart = alt.vconcat(*panels).add_params(metric).resolve_scale(color="shared")
    return Chart("scenarios", title, caption, spec=chart.to_dict())


def coverage_chart(a: Analysis) -> Chart:
    import altair as alt

    title = "Coverage beside score"
    caption = (
        "Every subject that ran: the share of its expected cells that were graded, beside its overall "
        "score with its 95% interval (none where a scenario has no graded episode: missing, never 0). "
        "Below 100% the score is provisional. Hover for the counts; click a kind in the legend to pick it "
        "out."
    )
    rows = []
    for ruleset in a.rulesets:
        for subject in a.ran(ruleset):
            covers = [a.cover(ruleset, subject, s) for s in a.scenarios(ruleset)]
            if any(c.expected is None for c in covers):
                continue
            expected = sum(c.expected for c in covers)
            graded = sum(c.graded for c in covers)
            stat = a.stat(ruleset, subject, "score", OVERALL)
            rows.append(
                {
                    "ruleset": ruleset,
                    "subject": a.shown(ruleset, subject),
                    "kind": a.kinds.get(subject, "unknown"),
                    "coverage": graded / expected if expected else 0.0,
                    "graded": graded,
                    "expected": expected,
                    "infra_error": sum(c.infra_error for c in covers),
                }
                | _stat_fields(stat)
            )
    if not rows:
        return Chart("coverage", title, caption, empty="no manifest: the expected cells are unknown")
    data = alt.Data(values=[r | {"label": f"{r['ruleset']} | {r['subject']}"} for r in rows])
    order = [f"{r['ruleset']} | {r['subject']}" for r in rows]
    pick = alt.selection_point(fields=["kind"], bind="legend")
    tooltip = ["subject:N", "ruleset:N", "graded:Q", "expected:Q", "infra_error:Q"]
    tooltip += [alt.Tooltip("mean:Q", title="overall score", format=".3f"), "provisional:N"]
    base = alt.Chart(data).encode(
        y=alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
        color=alt.Color("kind:N", title="subject kind"),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
        tooltip=tooltip,
    )
    covered = base.mark_bar().encode(
        x=alt.X("coverage:Q", title="graded / expected cells", scale=alt.Scale(domain=[0, 1]))
    )
    scored = alt.layer(
        base.mark_rule().encode(x=alt.X("low:Q", title="overall score (95% interval)"), x2="high:Q"),
        base.mark_point(filled=True, size=50).encode(x=alt.X("mean:Q", scale=alt.Scale(domain=[0, 1]))),
    )
    chart = alt.hconcat(
        covered.properties(width=220, height=alt.Step(16)).add_params(pick),
        scored.properties(width=WIDTH - 120, height=alt.Step(16)),
    )
    return Chart("coverage", title, caption, spec=chart.to_dict())


def efficiency_chart(a: Analysis) -> Chart:
    import altair as alt

    title = "Efficiency"
    caption = (
        "Mean tool calls, tokens in and out, turns and wall-clock seconds per graded episode for the "
        "baselines, untrained models and trained checkpoints. Pick the measure below the chart; hover for "
        "the numbers (the efficiency table gives the savings with their intervals)."
    )
    rows = []
    for ruleset in a.rulesets:
        for subject in overview_subjects(a, ruleset):
            mine = a.rows(ruleset, subject)
            for column, name in EFFICIENCY_COLUMNS.items():
                values = mine[column].dropna()
                if len(values):
                    rows.append(
                        {"ruleset": ruleset, "subject": subject, "measure": name}
                        | {"mean": float(values.mean()), "episodes": len(values)}
                    )
    if not rows:
        return Chart("efficiency", title, caption, empty="no graded episode")
    data = alt.Data(values=rows)
    measure = alt.param(
        name="measure_choice",
        value=next(iter(EFFICIENCY_COLUMNS.values())),
        bind=alt.binding_select(options=list(EFFICIENCY_COLUMNS.values()), name="measure "),
    )
    chart = (
        alt.Chart(data)
        .transform_filter("datum.measure == measure_choice")
        .mark_bar()
        .encode(
            y=alt.Y("subject:N", sort=None, title=None, axis=alt.Axis(labelLimit=320)),
            yOffset=alt.YOffset("ruleset:N"),
            x=alt.X("mean:Q", title="mean per graded episode"),
            color=alt.Color("ruleset:N"),
            tooltip=[
                "subject:N",
                "ruleset:N",
                "measure:N",
                alt.Tooltip("mean:Q", format=".2f"),
                "episodes:Q",
            ],
        )
        .properties(width=WIDTH, height=alt.Step(14))
        .add_params(measure)
    )
    return Chart("efficiency", title, caption, spec=chart.to_dict())


def charts(a: Analysis) -> list[Chart]:
    """The interactive figures, in the order report.html shows them."""
    return [learning_chart(a), scenario_chart(a), coverage_chart(a), efficiency_chart(a)]
