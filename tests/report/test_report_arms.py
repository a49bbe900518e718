"""The control arm in the report: the arm in every cell identity, every existing table on the drift
arm only, and the drift-cost tables checked against computations of their own.

The hand-built frames hold known paired differences; the played ones are real episodes of
`Environment.reset(..., arm="control")` through the runner (`fixture_results`).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from fixture_results import CONFIG_HASH, _play, aggregate, build, config
from test_report_fixture import mover_reference

from schemashift.cli import main
from schemashift.env.arms import CONTROL, DRIFT
from schemashift.report import ReportError, arms, load
from schemashift.report.analysis import Analysis
from schemashift.report.stats import verdict
from schemashift.report.tables import build as build_tables
from schemashift.report.traces import trace_key, trace_runs
from schemashift.rollout import records
from schemashift.rollout.runner import SweepContext, write_results

A, B = "customer_lookup", "weekly_report"


def episode(subject: str, scenario: str, seed: int, arm: str, success: int, sample: int = 0) -> dict:
    """A graded v1 episode of a rule subject; the score follows success (0.9 or 0.2), the steps
    tell the seeds apart; the other declared columns null."""
    return {
        **{column.name: None for column in records.EPISODE_COLUMNS},
        "ruleset": "v1",
        "policy": subject,
        "label": subject,
        "kind": "rule",
        "train_run": None,
        "checkpoint_step": None,
        "harness": None,
        "base_model": None,
        "scenario": scenario,
        "family": scenario,
        "tier": "easy",
        "seed": seed,
        "split": "test",
        "sample_index": sample,
        "status": "graded",
        "success": float(success),
        "score": 0.9 if success else 0.2,
        "steps": 3 + seed,
        "tool_calls": 2,
        "failed_calls": 0,
        "tokens_out": 0,
        "final_action": "complete_task",
        "arm": arm,
    }


#: subject "mixed": (scenario, seed) -> (drift success, control success), and the kinds the drift
#: arm planned there; seed 3 of A is played under drift only and must not count
MIXED = {
    (A, 0): (1, 1, ("field_rename",)),
    (A, 1): (0, 1, ("field_rename",)),
    (A, 2): (1, 1, ("rate_limit",)),
    (B, 0): (0, 1, ("rate_limit",)),
    (B, 1): (0, 0, ("rate_limit",)),
    (B, 2): (1, 1, ("rate_limit",)),
}


def hand_frames(control: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, drifts = [], []
    for (scenario, seed), (drift, ctrl, kinds) in MIXED.items():
        rows.append(episode("mixed", scenario, seed, DRIFT, drift))
        if control:
            rows.append(episode("mixed", scenario, seed, CONTROL, ctrl))
        drifts += [drift_row("mixed", scenario, seed, kind) for kind in kinds]
    rows.append(episode("mixed", A, 3, DRIFT, 0))  # no control twin
    for scenario in (A, B):  # "oblivious": solves every task without drift, none with it
        for seed in range(3):
            rows.append(episode("oblivious", scenario, seed, DRIFT, 0))
            if control:
                rows.append(episode("oblivious", scenario, seed, CONTROL, 1))
            drifts.append(drift_row("oblivious", scenario, seed, "field_rename"))
    return pd.DataFrame(rows), pd.DataFrame(drifts)


def drift_row(subject: str, scenario: str, seed: int, kind: str) -> dict:
    """A planned drift of the drift arm that fired at step 1 and was never failed on."""
    cell = {"ruleset": "v1", "policy": subject, "label": subject, "scenario": scenario, "seed": seed}
    steps = dict.fromkeys(
        ("discovered_step", "reported_step", "failed_step", "recovered_step", "steps_to_recover")
    )
    return {**cell, "sample_index": 0, "kind": kind, "fired_step": 1, **steps, "arm": DRIFT}


def stratified(rows: list[dict], metric: str) -> float:
    """The benchmark's estimator written out: samples of a seed, seeds of a scenario, scenarios."""
    by: dict[str, dict[int, list[float]]] = {}
    for r in rows:
        by.setdefault(r["scenario"], {}).setdefault(r["seed"], []).append(r[metric])
    means = [sum(sum(v) / len(v) for v in seeds.values()) / len(seeds) for seeds in by.values()]
    return sum(means) / len(means)


def holm_by_hand(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_the_drift_cost_is_drift_minus_control_on_the_cells_played_in_both_arms():
    episodes, drifts = hand_frames()
    a = Analysis(episodes, drifts=drifts)
    assert arms.subjects(a, "v1") == ["mixed", "oblivious"]
    # the matched cells: seed 3 of A has no control twin
    assert arms.matched_episodes(a, "v1", "mixed") == 6
    for metric in ("success", "score"):
        rows = {
            arm: [episode("mixed", s, seed, arm, MIXED[s, seed][arm == CONTROL]) for s, seed in MIXED]
            for arm in (DRIFT, CONTROL)
        }
        want = {arm: stratified(r, metric) for arm, r in rows.items()}
        for arm in (DRIFT, CONTROL):
            assert arms.arm_stat(a, "v1", "mixed", arm, metric).mean == pytest.approx(want[arm])
        cost = arms.cost(a, "v1", "mixed", metric)
        assert cost.mean == pytest.approx(want[DRIFT] - want[CONTROL])
        low, high = mover_reference(pd.DataFrame(rows[DRIFT]), pd.DataFrame(rows[CONTROL]), metric, False)
        assert (cost.ci_low, cost.ci_high) == pytest.approx((low, high), abs=1e-6)
    # success: A 2/3 vs 1, B 1/3 vs 2/3
    assert arms.cost(a, "v1", "mixed", "success").mean == pytest.approx(-1 / 3)
    # per kind: the cells whose drift plan holds it; field_rename A0, A1: 1/2 vs 1
    assert arms.columns(a, "v1") == ["overall", "kind:field_rename", "kind:rate_limit"]
    assert arms.cost(a, "v1", "mixed", "success", "kind:field_rename").mean == pytest.approx(-0.5)
    # rate_limit: A2 (1 vs 1) and B (1/3 vs 2/3), each scenario weighing the same
    assert arms.cost(a, "v1", "mixed", "success", "kind:rate_limit").mean == pytest.approx(-1 / 6)
    assert arms.matched_episodes(a, "v1", "mixed", "kind:rate_limit") == 4


def test_success_in_control_and_failure_under_drift_costs_minus_one_and_is_worse_under_drift():
    episodes, drifts = hand_frames()
    a = Analysis(episodes, drifts=drifts)
    cost = a.compared("v1", "oblivious", arms.CONTROL_REFERENCE, "success")
    assert cost.mean == pytest.approx(-1.0)
    assert arms.arm_stat(a, "v1", "oblivious", CONTROL, "success").mean == 1.0
    assert arms.arm_stat(a, "v1", "oblivious", DRIFT, "success").mean == 0.0
    assert cost.family == "drift cost" and cost.p_adjusted < 0.05
    assert arms.cost_verdict(cost) == "worse under drift"
    # one Holm family for the overall question: both subjects, both metrics, adjusted by hand
    family = {k: s for k, s in a.families.items() if s.family == "drift cost"}
    assert sorted(family) == sorted(
        ("v1", s, arms.CONTROL_REFERENCE, m, "overall")
        for s in ("mixed", "oblivious")
        for m in ("success", "score")
    )
    keys = list(family)
    expected = holm_by_hand([family[k].p_value for k in keys])
    assert [family[k].p_adjusted for k in keys] == pytest.approx(expected)
    mixed = a.compared("v1", "mixed", arms.CONTROL_REFERENCE, "success")
    assert arms.cost_verdict(mixed) == verdict(mixed)
    assert arms.cost_verdict(mixed).startswith("not separable at this size (detectable >= ")
    by_kind = {k for k, s in a.families.items() if s.family == "drift cost by kind"}
    assert ("v1", "mixed", arms.CONTROL_REFERENCE, "success", "kind:rate_limit") in by_kind


def test_the_drift_cost_table_and_its_records():
    episodes, drifts = hand_frames()
    a = Analysis(episodes, drifts=drifts)
    tables = {t.key: t for t in build_tables(a)}
    keys = list(tables)
    assert keys.index("v1_drift_cost") == keys.index("v1_headline") - 1  # the v1 headline leads with it
    table = tables["v1_drift_cost"]
    assert table.headline
    assert [row[:3] for row in table.rows] == [["mixed", "rule", "6"], ["oblivious", "rule", "6"]]
    assert table.rows[1][table.header.index("success rate: drift cost")].startswith("-1.000 [")
    assert table.rows[1][table.header.index("success rate: verdict")] == "worse under drift"
    assert "12 episode pairs" in table.note and "of 13 graded drift-arm episodes" in table.note
    cost = [
        r
        for r in table.records
        if r["subject"] == "mixed" and r["metric"] == "success" and r["arm"] == "drift - control"
    ]
    assert len(cost) == 1 and cost[0]["mean"] == pytest.approx(-1 / 3) and cost[0]["family"] == "drift cost"
    kinds = tables["v1_drift_cost_by_kind"]
    assert [row[:4] for row in kinds.rows] == [
        ["mixed", "rule", "field_rename", "2"],
        ["mixed", "rule", "rate_limit", "4"],
        ["oblivious", "rule", "field_rename", "6"],
    ]


def test_without_control_rows_the_table_says_so_and_existing_tables_do_not_move():
    episodes, drifts = hand_frames()
    with_control = Analysis(episodes, drifts=drifts)
    episodes, drifts = (frame.drop(columns="arm") for frame in hand_frames(control=False))
    drift_only = Analysis(episodes, drifts=drifts)
    tables = {t.key: t for t in build_tables(drift_only)}
    assert tables["v1_drift_cost"].rows == []
    assert tables["v1_drift_cost"].note == arms_note("v1")
    changed = {t.key: t for t in build_tables(with_control)}
    for key, table in tables.items():
        if "drift_cost" in key or key == "cannot_conclude":
            continue
        assert (changed[key].rows, changed[key].note) == (table.rows, table.note), key
        assert same(changed[key].records, table.records), key


def arms_note(ruleset: str) -> str:
    from schemashift.report.tables.drift_cost import NO_CONTROL

    return NO_CONTROL.format(ruleset=ruleset)


def test_a_missing_arm_is_the_drift_arm_and_the_arm_is_part_of_a_cell():
    assert load.arm_of({}) == DRIFT and load.arm_of({"arm": None}) == DRIFT
    assert load.arm_of({"arm": CONTROL}) == CONTROL
    frame = load.with_arm(pd.DataFrame({"arm": [None, CONTROL]}))
    assert list(frame["arm"]) == [DRIFT, CONTROL]
    cell = {"ruleset": "v1", "policy": "oracle", "scenario": A, "seed": 0, "sample_index": 0}
    assert (
        load.cell_key(cell)
        == load.cell_key({**cell, "arm": DRIFT})
        != load.cell_key({**cell, "arm": CONTROL})
    )
    manifest = {"cells": [{**cell, "status": "graded"}, {**cell, "arm": CONTROL, "status": "missing"}]}
    assert [c["status"] for c in load.manifest_cells(manifest)] == ["graded"]
    assert [c["status"] for c in load.manifest_cells(manifest, CONTROL)] == ["missing"]
    assert trace_key(A, 0, 1) == f"{A}/seed-0/sample-1"
    assert trace_key(A, 0, 1, CONTROL) == f"{A}/seed-0/sample-1/control"


def test_expected_cells_take_an_arm(tmp_path):
    path = tmp_path / "expected.json"
    cell = {"ruleset": "v1", "policy": "oracle", "scenario": A, "seed": 0}
    path.write_text(json.dumps([cell, {**cell, "arm": CONTROL}]), encoding="utf-8")
    assert [c["arm"] for c in load.read_expected_cells(path)] == [DRIFT, CONTROL]
    path.write_text(json.dumps([{**cell, "arm": "placebo"}]), encoding="utf-8")
    with pytest.raises(ReportError, match="arm must be one of drift, control"):
        load.read_expected_cells(path)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    """The oracle and the naive heuristic on two v1 scenarios x two seeds, played for real in both
    arms, written and aggregated."""
    root = tmp_path_factory.mktemp("arms")
    scenarios = (A, B)
    for policy in ("oracle", "naive_heuristic"):
        context = SweepContext(sweep_id=f"arms-{policy}", policy=policy, config_hash=CONFIG_HASH)
        for arm in (DRIFT, CONTROL):
            results = [_play(policy, "v1", s, seed, 0, context, arm) for s in scenarios for seed in (0, 1)]
            write_results(root / "cells" / arm / policy, results)
    out = root / "out"
    args = ["aggregate", "--cells", str(root / "cells"), "--out-episodes", str(out / "episodes.parquet")]
    args += ["--out-drifts", str(out / "drifts.parquet"), "--manifest", str(out / "manifest.json")]
    assert main(args) == 0
    yield root, out


def test_played_control_episodes_merge_beside_their_drift_twins(played):
    root, out = played
    episodes = load.episodes_frame(out / "episodes.parquet")
    assert sorted(episodes.groupby("arm").size().items()) == [(CONTROL, 8), (DRIFT, 8)]
    drifts = load.drifts_frame(out / "drifts.parquet")
    assert set(drifts["arm"]) == {DRIFT}  # the control arm plays no drift plan
    oracle = episodes[episodes["policy"] == "oracle"]
    assert set(oracle["success"]) == {1.0}  # the oracle plays the arm of its cell
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert sum(c.get("arm") == CONTROL for c in manifest["cells"]) == 8
    a = Analysis(episodes, manifest, drifts=drifts)
    assert len(a.episodes) == 8 and len(a.control) == 8
    assert a.compared("v1", "oracle", arms.CONTROL_REFERENCE, "success").mean == 0.0
    # the same cell in one arm twice is still refused
    copy = root / "twice"
    context = SweepContext(sweep_id="arms-oracle", policy="oracle", config_hash=CONFIG_HASH)
    write_results(copy, [_play("oracle", "v1", "customer_lookup", 0, 0, context, CONTROL)])
    args = [
        "aggregate",
        "--cells",
        str(root / "cells"),
        str(copy),
        "--out-episodes",
        str(root / "e.parquet"),
    ]
    assert main([*args, "--out-drifts", str(root / "d.parquet")]) == 2


def test_control_traces_have_their_own_keys(played):
    root, _ = played
    from schemashift.report.traces import read_trajectories

    trajectories = read_trajectories([root / "cells"])
    runs = trace_runs(trajectories)
    keys = [(run["name"], next(iter(m))) for run in runs for m in run["metrics"]]
    assert len(keys) == len(set(keys)) == 16
    assert sum(k.endswith("/control") for _, k in keys) == 8


# -- the report fixture with its control arm --------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_sets(tmp_path_factory: pytest.TempPathFactory):
    """The report fixture with the control arm of its v1 subjects, aggregated with and without it."""
    root = tmp_path_factory.mktemp("fixture-arms")
    results = build(root / "results", control=True)
    (root / "config.json").write_text(json.dumps(config()), encoding="utf-8")
    aggregate(results, root / "drift", control=False)
    aggregate(results, root / "both", control=True)
    yield root


def frames(folder: Path, drop_arm: bool = False) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    episodes = load.episodes_frame(folder / "episodes.parquet")
    drifts = load.drifts_frame(folder / "drifts.parquet")
    if drop_arm:  # rows as written before arms existed
        episodes, drifts = episodes.drop(columns="arm"), drifts.drop(columns="arm")
    return episodes, drifts, json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_control_rows_change_none_of_the_existing_tables_or_charts(fixture_sets):
    from schemashift.report.interactive import charts

    before_frames, after_frames = (
        frames(fixture_sets / "drift", drop_arm=True),
        frames(fixture_sets / "both"),
    )
    cfg = load.read_config(fixture_sets / "config.json")
    before = Analysis(before_frames[0], before_frames[2], cfg, before_frames[1], samples=200)
    after = Analysis(after_frames[0], after_frames[2], cfg, after_frames[1], samples=200)
    assert len(after.control) > 0 and len(after.episodes) == len(before.episodes)
    old, new = ({t.key: t for t in build_tables(x)} for x in (before, after))
    assert set(new) == set(old)
    assert old["v1_drift_cost"].rows == [] and new["v1_drift_cost"].rows
    compared = 0
    for key, table in old.items():
        if "drift_cost" in key:
            continue
        rows = new[key].rows
        if key == "cannot_conclude":  # the drift-cost questions add their own rows
            rows = [r for r in rows if not r[0].startswith("comparisons: drift cost")]
        assert (rows, new[key].header, new[key].note) == (table.rows, table.header, table.note), key
        if key != "cannot_conclude":
            assert same(new[key].records, table.records), key
        compared += 1
    assert compared > 50
    assert [c.spec for c in charts(after)] == [c.spec for c in charts(before)]


def same(mine: list[dict], theirs: list[dict]) -> bool:
    """Equal records, NaN equal to NaN (a record's missing number)."""
    return json.dumps(mine, default=str) == json.dumps(theirs, default=str)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def control_report(fixture_sets: Path) -> Path:
    """tables, figures and report.html of the fixture with its control arm."""
    both, out = fixture_sets / "both", fixture_sets / "report"
    args = ["--episodes", str(both / "episodes.parquet"), "--drifts", str(both / "drifts.parquet")]
    args += ["--manifest", str(both / "manifest.json"), "--config", str(fixture_sets / "config.json")]
    args += ["--bootstrap-samples", "200"]
    assert (
        main(
            [
                "report",
                "tables",
                *args,
                "--out",
                str(out / "tables"),
                "--summary",
                str(out / "summary.md"),
            ]
        )
        == 0
    )
    assert main(["report", "figures", *args, "--out", str(out / "figures")]) == 0
    html = ["--tables", str(out / "tables"), "--figures", str(out / "figures"), "--out", str(out)]
    assert main(["report", "html", *args, *html]) == 0
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_drift_cost_csv_of_the_fixture_against_its_raw_episodes(fixture_sets, control_report):
    both, out = fixture_sets / "both", control_report / "tables"
    raw = load.episodes_frame(both / "episodes.parquet")
    raw = raw[(raw["ruleset"] == "v1") & (raw["status"] == "graded")]
    records = csv_rows(out / "v1_drift_cost.csv")
    subjects = {r["subject"] for r in records}
    assert {"oracle", "naive_heuristic", "policy_aware_heuristic", "coder@step-100"} <= subjects
    cell = ["scenario", "seed", "sample_index"]
    for record in records:
        if record["column"] != "overall":
            continue
        mine = raw[raw["label"] == record["subject"]]
        sides = {arm: mine[mine["arm"] == arm].set_index(cell) for arm in (DRIFT, CONTROL)}
        shared = sides[DRIFT].index.intersection(sides[CONTROL].index)
        assert int(record["matched_episodes"]) == len(shared)
        metric = record["metric"]
        values = {arm: sides[arm].loc[shared].reset_index() for arm in sides}
        means = {arm: stratified(values[arm].to_dict("records"), metric) for arm in values}
        want = means[DRIFT] - means[CONTROL] if record["arm"] == "drift - control" else means[record["arm"]]
        assert float(record["mean"]) == pytest.approx(want), record
    oracle = [
        r
        for r in records
        if r["subject"] == "oracle" and r["metric"] == "success" and r["column"] == "overall"
    ]
    assert [float(r["mean"]) for r in oracle] == [1.0, 1.0, 0.0]
    tested = [r for r in records if r["arm"] == "drift - control" and r["p_value"]]
    assert {r["family"] for r in tested} == {"drift cost"}
    p = holm_by_hand([float(r["p_value"]) for r in tested])
    assert [float(r["p_adjusted"]) for r in tested] == pytest.approx(p)
    summary = (control_report / "summary.md").read_text(encoding="utf-8")
    assert summary.index("Ruleset v1: what drift costs") < summary.index("Ruleset v1: overall score")
    assert (control_report / "figures" / "drift_cost.png").stat().st_size > 20_000
    page = (control_report / "report.html").read_text(encoding="utf-8")
    results = page[page.index('<h3 id="results-v1">') : page.index('<h2 id="details">')]
    assert results.index('id="drift-cost-v1"') < results.index("success rate (overall)")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_results_tables_with_the_drift_cost_fit_the_page(control_report, tmp_path):
    from browser_helpers import require_browser
    from test_report_fixture import OVERFLOW_PROBE

    from schemashift.report.screenshots import _run

    browser = require_browser()
    page = tmp_path / "probed.html"
    text = (control_report / "report.html").read_text(encoding="utf-8")
    page.write_text(text.replace("</body>", OVERFLOW_PROBE + "</body>"), encoding="utf-8")
    dom = _run(browser, page.as_uri(), "--window-size=1280,2400", "--dump-dom").stdout
    overflow = json.loads(re.search(r'data-overflow="([^"]*)"', dom).group(1).replace("&quot;", '"'))
    # legacy's headline, v1's drift cost and v1's headline
    assert len(overflow) == 3 and all(px <= 0 for px in overflow), overflow


def test_the_drift_cost_figure_draws_both_arms_of_every_subject():
    import matplotlib

    matplotlib.use("Agg")
    from schemashift.report.drift_cost_figure import drift_cost_figure

    episodes, drifts = hand_frames()
    figure = drift_cost_figure(Analysis(episodes, drifts=drifts))
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["mixed", "oblivious"]
    # oblivious: its drift point at 0 and its control point at 1, joined by the cost line
    assert [0.0, 1.0] in [list(map(float, line.get_xdata())) for line in ax.lines]
    episodes, drifts = hand_frames(control=False)
    alone = drift_cost_figure(Analysis(episodes, drifts=drifts)).axes[0]
    assert "the control arm was not played" in alone.get_title()
    assert [t.get_text() for t in alone.get_yticklabels()] == ["mixed", "oblivious"]
    legacy = (frame.assign(ruleset="legacy") for frame in (episodes, drifts))
    empty = drift_cost_figure(Analysis(next(legacy), drifts=next(legacy)))
    assert "no ruleset with a control arm ran" in empty.axes[0].texts[0].get_text()


def test_a_missing_control_cell_is_named_with_its_arm(played, tmp_path, capsys):
    root, _ = played
    cell = {"ruleset": "v1", "policy": "oracle", "scenario": A, "seed": 0, "sample_index": 0}
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps([cell, {**cell, "arm": CONTROL}, {**cell, "seed": 5, "arm": CONTROL}]))
    out = tmp_path / "out"
    args = ["aggregate", "--cells", str(root / "cells"), "--out-episodes", str(out / "e.parquet")]
    args += [
        "--out-drifts",
        str(out / "d.parquet"),
        "--manifest",
        str(out / "m.json"),
        "--expected",
        str(expected),
    ]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"missing cell v1/oracle/{A} seed 5 sample 0 (control arm)" in err
    cells = json.loads((out / "m.json").read_text(encoding="utf-8"))["cells"]
    assert [(c.get("arm"), c["status"]) for c in cells] == [
        (None, "graded"),
        (CONTROL, "graded"),
        (CONTROL, "missing"),
    ]
