"""`schemashift report trackio`: the benchmark as a local Trackio project, built from results/.

One Trackio run per training run (run id = run name, grouped by `<ruleset>/<reward>`), with the
metric groups of the reference dashboard (docs/report.md, "Trackio dashboard"):

- `eval_observed/...`: every graded result at the checkpoint's step, provisional ones included
  (flagged in `eval_coverage/provisional`), missing cases left out, never counted as failures;
  the run's untrained base at step 0 (one shared evaluation, repeated in every run from it);
- `eval_coverage/...`: graded, missing, infra_error, expected and correct counts, completeness;
- `eval_efficiency/...`: savings against step 0 on the cells both solved, with the matched count;
- `eval_usage/...`: mean tool calls, tokens in and out, turns and seconds per graded episode;
- `train_verified/...`: the committed training lineage (superseded pre-resume rows dropped),
  thinned to at most `training_figure.MAX_POINTS` steps for the browser.

The eval_* names without a dimension are the run's own ruleset through the default harness.
Every other evaluation of the run's checkpoints and base (another ruleset, another harness: the
subjects `Analysis.harnesses` lists as having run) is the same set of metrics inside each group
under `ruleset/<ruleset>/` and `harness/<harness>/` (`eval_observed/harness/tools/score`,
`eval_coverage/ruleset/v1/graded`), its base at step 0 as well.

Baselines are references, not curves: their overall numbers go into each run's config and a
`references/baselines` table. The learning-curve table (with intervals) and the interval figures
Trackio cannot draw go in as media. Provenance (manifest, run index) is in the run config.

Everything is computed here from `Analysis` (the numbers of the tables and figures); the write
happens in a child process with `TRACKIO_DIR` pointing at a staging folder (Trackio fixes its
paths at import), through Trackio's bulk path with fixed run ids and timestamps, so the same
results give the same database apart from what Trackio stamps itself (a config's `created_at`).
The staged project then replaces the previous one: rerunning replaces, never appends.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.report import ReportError
from schemashift.report.analysis import (
    EFFICIENCY_COLUMNS,
    METRICS,
    OVERALL,
    SAVING_COLUMNS,
    TIER_PREFIX,
    efficiency_reference,
    savings,
    smoothed,
)
from schemashift.report.stats import metric_stat
from schemashift.rollout.subject import DEFAULT_HARNESS
from schemashift.runs.tracking import TRACKIO_PROJECT, train_verified_metrics

if TYPE_CHECKING:
    from schemashift.report.analysis import Analysis, TrainingRun

GROUPS = ("eval_observed", "eval_coverage", "eval_efficiency", "eval_usage", "train_verified")
#: the fixed origin of every exported timestamp: step times are this plus the run's wall-clock
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
#: the report figures attached to every run as media (intervals: Trackio draws no bands)
MEDIA_FIGURES = ("learning_curves", "training_reward")
PLAN_FILE = "plan.json"


def _number(value: Any) -> float | None:
    """A finite float, or None (JSON has no NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def _put(metrics: dict[str, Any], name: str, value: Any) -> None:
    number = _number(value)
    if number is not None:
        metrics[name] = number


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def observed_stats(a: Analysis, ruleset: str, subject: str, metric: str) -> dict[str, Any]:
    """`metric` per aggregate column over the scenarios the subject has graded episodes on: the
    reference dashboard's observed value (missing cases left out, not counted as failures; the
    coverage group says how much is missing)."""
    rows = a.rows(ruleset, subject)
    graded = set(rows["scenario"])
    out = {}
    for column, scenarios in a.groups(ruleset).items():
        present = [s for s in scenarios if s in graded]
        if present:
            out[column] = metric_stat(rows, metric, present).mean
    return out


def evaluation_metrics(a: Analysis, ruleset: str, subject: str, reference: str | None) -> dict:
    """The eval_* groups of one evaluation (a checkpoint, or step 0) on `ruleset`; the savings
    against `reference` (a checkpoint's `efficiency_reference`: its step 0 through the same
    harness; None at step 0)."""
    metrics: dict[str, Any] = {}
    for metric in METRICS:
        for column, value in observed_stats(a, ruleset, subject, metric).items():
            if column == OVERALL:
                name = f"eval_observed/{metric}"
            elif column.startswith(TIER_PREFIX):
                name = f"eval_observed/tier/{_slug(column.removeprefix(TIER_PREFIX))}/{metric}"
            else:
                name = f"eval_observed/scenario/{_slug(column)}/{metric}"
            _put(metrics, name, value)
    covers = [a.cover(ruleset, subject, s) for s in a.scenarios(ruleset)]
    rows = a.rows(ruleset, subject)
    graded = sum(c.graded for c in covers)
    expected = None if any(c.expected is None for c in covers) else sum(c.expected for c in covers)
    coverage = {
        "graded": graded,
        "infra_error": sum(c.infra_error for c in covers),
        "missing": None if expected is None else sum(c.missing or 0 for c in covers),
        "expected": expected,
        "correct": int((rows["success"] == 1).sum()),
        "completeness": None if not expected else graded / expected,
        "provisional": int(any(c.provisional for c in covers)),
    }
    for name, value in coverage.items():
        _put(metrics, f"eval_coverage/{name}", value)
    for column, name in EFFICIENCY_COLUMNS.items():
        values = rows[column].dropna()
        _put(metrics, f"eval_usage/{name.replace(' ', '_')}", values.mean() if len(values) else None)
    if reference is not None and len(a.rows(ruleset, reference)) and len(rows):
        saved = savings(a, ruleset, subject, reference)
        _put(metrics, "eval_efficiency/matched", saved["solved_by_both"])
        _put(metrics, "eval_efficiency/graded_by_both", saved["graded_by_both"])
        for column in SAVING_COLUMNS:
            name = EFFICIENCY_COLUMNS[column].replace(" ", "_")
            _put(metrics, f"eval_efficiency/{name}_saving", saved[column].mean)
    return metrics


def dimension(run: TrainingRun, ruleset: str, harness: str) -> str:
    """Where an evaluation's metrics sit inside each eval_* group: nothing for the run's own
    ruleset through the default harness (the main curves), else `ruleset/<ruleset>/` for another
    ruleset and `harness/<harness>/` for another harness, in that order."""
    prefix = "" if ruleset == run.ruleset else f"ruleset/{_slug(ruleset)}/"
    return prefix + ("" if harness == DEFAULT_HARNESS else f"harness/{_slug(harness)}/")


def run_evaluations(a: Analysis, run: TrainingRun) -> dict[int, dict[str, Any]]:
    """The eval_* metrics of every point of a run's learning curve (step 0: its warm start, else
    its base model) on every ruleset and through every harness it was played
    (`Analysis.harnesses`: the subjects that ran), each set under its `dimension`; savings
    against step 0 of the same ruleset and harness."""
    out: dict[int, dict[str, Any]] = {}
    for ruleset in a.rulesets:
        models = a.harnesses(ruleset)
        for step, subject in a.checkpoints(run):
            for harness, played in models.get(subject, {}).items():
                reference = efficiency_reference(a, ruleset, played) if step else None
                prefix = dimension(run, ruleset, harness)
                for name, value in evaluation_metrics(a, ruleset, played, reference).items():
                    group, _, rest = name.partition("/")
                    out.setdefault(step, {})[f"{group}/{prefix}{rest}"] = value
    return out


def training_metrics(a: Analysis, run: TrainingRun) -> dict[int, dict[str, Any]]:
    """train_verified per step: the committed lineage (superseded rows dropped), thinned."""
    from schemashift.report.training_figure import thin

    rows = a.training_rows(run.name)
    if rows is None:
        return {}
    rows = rows[~rows["superseded"].fillna(False).astype(bool)].sort_values("step")
    rows = rows.assign(reward_mean_smoothed=smoothed(rows["reward_mean"]).to_numpy())
    return {
        int(row["step"]): train_verified_metrics(row, ("reward_mean_smoothed",))
        for row in thin(rows).to_dict("records")
    }


def step_times(a: Analysis, run: TrainingRun, steps: Sequence[int]) -> dict[int, str]:
    """A fixed timestamp per step: EPOCH plus the run's committed wall-clock up to that step (its
    seconds_per_step; one second a step where none was logged)."""
    rows = a.training_rows(run.name)
    seconds: dict[int, float] = {}
    if rows is not None:
        live = rows[~rows["superseded"].fillna(False).astype(bool)]
        seconds = {
            int(s): float(v) for s, v in zip(live["step"], live["seconds_per_step"], strict=True) if v == v
        }
    out, clock, last = {}, 0.0, 0
    for step in sorted(steps):
        clock += sum(seconds.get(s, 1.0) for s in range(last + 1, step + 1))
        last = step
        out[step] = (EPOCH + timedelta(seconds=round(clock, 3))).isoformat()
    return out


def references(a: Analysis, ruleset: str) -> list[dict[str, Any]]:
    """The baselines of a ruleset (rule and model baselines that ran): overall numbers with intervals."""
    out = []
    for subject in a.ran(ruleset):
        if a.kinds.get(subject) not in ("rule", "model"):
            continue
        entry = {"subject": subject, "kind": a.kinds[subject], **overall_numbers(a, ruleset, subject)}
        entry["n"] = a.stat(ruleset, subject, "score", OVERALL).n
        out.append(entry)
    return out


def overall_numbers(a: Analysis, ruleset: str, subject: str, provisional: bool = False) -> dict[str, Any]:
    """A subject's overall score and success with their intervals (and provisional flags)."""
    numbers: dict[str, Any] = {}
    for metric in METRICS:
        stat = a.stat(ruleset, subject, metric, OVERALL)
        numbers |= {
            metric: _number(stat.mean),
            f"{metric}_ci_low": _number(stat.ci_low),
            f"{metric}_ci_high": _number(stat.ci_high),
        }
        if provisional:
            numbers[f"{metric}_provisional"] = stat.provisional
    return numbers


def learning_rows(a: Analysis, run: TrainingRun, ruleset: str) -> list[dict[str, Any]]:
    """The run's learning curve with intervals (the numbers Trackio cannot draw as bands)."""
    out = []
    for step, subject in a.checkpoints(run):
        if subject is None or subject not in a.ran(ruleset):
            continue
        numbers = overall_numbers(a, ruleset, subject, provisional=True)
        out.append({"step": step, "subject": subject, **numbers})
    return out


def plan(
    a: Analysis,
    figures_dir: str | Path | None = None,
    project: str = TRACKIO_PROJECT,
    trajectories: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Everything the export writes, as plain data: per run its group, config, steps, timestamps,
    metrics per step and media files, and the episodes of `trajectories` as trace runs
    (`traces.trace_runs`); deterministic for the same results."""
    from schemashift.report.traces import trace_runs

    runs = []
    for run in a.runs.values():
        ruleset = run.ruleset
        evaluated = run_evaluations(a, run)
        trained = training_metrics(a, run)
        steps = sorted(set(evaluated) | set(trained))
        if not steps:
            continue  # nothing of this run ran: the report says why
        times = step_times(a, run, steps)
        metrics = [{**trained.get(step, {}), **evaluated.get(step, {})} for step in steps]
        media = []
        first = steps[0]
        baseline_rows = references(a, ruleset) if ruleset in a.rulesets else []
        metrics[0]["references/baselines"] = {"_type": "trackio.table", "_value": baseline_rows}
        if ruleset in a.rulesets:
            metrics[0]["tables/learning_curve"] = {
                "_type": "trackio.table",
                "_value": learning_rows(a, run, ruleset),
            }
        if figures_dir is not None:
            for stem in MEDIA_FIGURES:
                source = Path(figures_dir) / f"{stem}.png"
                if source.is_file():
                    relative = f"{_project_dir(project)}/{run.name}/{first}/{stem}.png"
                    media.append({"source": str(source), "path": relative})
                    metrics[0][f"figures/{stem}"] = {
                        "_type": "trackio.image",
                        "file_path": relative,
                        "caption": f"{stem} (the report's figure, with {ruleset} intervals)",
                    }
        runs.append(
            {
                "name": run.name,
                "group": f"{run.ruleset}/{run.reward}",
                "config": run_config(a, run, baseline_rows),
                "steps": steps,
                "timestamps": [times[s] for s in steps],
                "metrics": metrics,
                "media": media,
            }
        )
    return {"project": project, "runs": runs, "traces": trace_runs(trajectories)}


def run_config(a: Analysis, run: TrainingRun, baseline_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the run is and where its numbers come from (the dashboard's run config)."""
    manifest = a.manifest or {}
    training = (manifest.get("training") or {}).get(run.name) or {}
    return {
        "_Group": f"{run.ruleset}/{run.reward}",
        "train_run": run.name,
        "description": run.description,
        "base_model": run.base_model,
        "ruleset": run.ruleset,
        "reward": run.reward,
        "split": run.split,
        "checkpoints": run.steps,
        "trained_step": run.trained_step,
        "step_0": a.base_subject(run),
        "references": {r["subject"]: {m: r[m] for m in METRICS} for r in baseline_rows},
        "provenance": {
            "source": "schemashift report trackio (from results/, not from live training)",
            "schemashift_version": manifest.get("schemashift_version"),
            "git_sha": manifest.get("git_sha"),
            "git_dirty": manifest.get("git_dirty"),
            "config_hash": manifest.get("config_hash"),
            "run_index": training.get("index"),
            "go_no_go": training.get("go_no_go"),
        },
    }


def _project_dir(project: str) -> str:
    """Trackio's on-disk name of a project (its canonical_project_name)."""
    return "".join(c for c in project if c.isalnum() or c in ("-", "_")).rstrip() or "default"


def export(
    a: Analysis,
    out_dir: str | Path,
    figures_dir: str | Path | None = None,
    project: str = TRACKIO_PROJECT,
    trajectories: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """Write the project under `out_dir` (a TRACKIO_DIR): `<project>.db` and `media/<project>/`,
    with the episodes of `trajectories` as traces, replacing what an earlier export left there.
    Returns the database path."""
    import importlib.util

    if importlib.util.find_spec("trackio") is None:
        raise ModuleNotFoundError("No module named 'trackio'", name="trackio")
    data = plan(a, figures_dir, project, trajectories)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    staging = out / f".staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for run in data["runs"]:
            for item in run["media"]:
                target = staging / "media" / item["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(item["source"], target)
        (staging / PLAN_FILE).write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        env = {**os.environ, "TRACKIO_DIR": str(staging), "TRACKIO_SQLITE_JOURNAL_MODE": "delete"}
        result = subprocess.run(
            [sys.executable, "-m", "schemashift.report.dashboard", str(staging / PLAN_FILE)],
            env=env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise ReportError(f"writing the Trackio project failed: {result.stderr.strip()[-2000:]}")
        name = _project_dir(project)
        db = out / f"{name}.db"
        for sidecar in (out / f"{name}.db-wal", out / f"{name}.db-shm"):
            sidecar.unlink(missing_ok=True)
        os.replace(staging / f"{name}.db", db)
        media = out / "media" / name
        old = out / f".old-{os.getpid()}"
        if media.exists():
            os.replace(media, old)
        if (staging / "media" / name).exists():
            media.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / "media" / name, media)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return db


def hub_token() -> str | None:
    """The Hugging Face token the Hub client would use (HF_TOKEN or a stored login), or None."""
    try:
        from huggingface_hub import get_token
    except ImportError:
        return os.environ.get("HF_TOKEN") or None
    return get_token()


def publish(out_dir: str | Path, space_id: str, project: str = TRACKIO_PROJECT) -> None:
    """Sync an exported project to a Hugging Face Space with Trackio's own `sync` (an explicit,
    optional step: nothing publishes otherwise). Without a token it fails before any network."""
    if not hub_token():
        raise ReportError(
            f"publishing to the Space {space_id} needs a Hugging Face token (set HF_TOKEN or log in "
            f"with `hf auth login`); the local project in {out_dir} is written and unchanged"
        )
    env = {**os.environ, "TRACKIO_DIR": str(out_dir)}
    command = [sys.executable, "-m", "trackio.cli", "sync", "--project", project, "--space-id", space_id]
    result = subprocess.run([*command, "--force"], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise ReportError(f"publishing to the Space {space_id} failed: {result.stderr.strip()[-2000:]}")


def write_plan(path: str | Path) -> None:
    """The child process: log a plan with Trackio's bulk path into $TRACKIO_DIR."""
    from trackio import Trace
    from trackio.sqlite_storage import SQLiteStorage

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    SQLiteStorage.init_db(data["project"])  # the project exists even where no run has results yet
    for run in data["runs"]:
        SQLiteStorage.bulk_log(
            project=data["project"],
            run=run["name"],
            run_id=run["name"],
            metrics_list=run["metrics"],
            steps=run["steps"],
            timestamps=run["timestamps"],
            config=run["config"],
        )
    for run in data["traces"]:
        # each payload through trackio.Trace: the same fields and serialisation as trackio.log
        metrics = [
            {
                key: Trace(**payload)._to_dict(data["project"], run["name"], step)
                for key, payload in entry.items()
            }
            for entry, step in zip(run["metrics"], run["steps"], strict=True)
        ]
        SQLiteStorage.bulk_log(
            project=data["project"],
            run=run["name"],
            run_id=run["name"],
            metrics_list=metrics,
            steps=run["steps"],
            timestamps=run["timestamps"],
            config=run["config"],
            log_ids=run["log_ids"],
        )


def preset_views(base_url: str, project: str, runs: Mapping[str, str]) -> dict[str, str]:
    """Dashboard links that open a view: smoothing 0, a metric filter, a run selection (`runs`:
    run name -> group; one view per group)."""
    from urllib.parse import urlencode

    def link(metrics: str, selected: Sequence[str] = ()) -> str:
        query = {"project": project, "smoothing": "0", "metric_filter": metrics}
        if selected:
            query["run_ids"] = ",".join(selected)
        return f"{base_url}/?{urlencode(query)}"

    views = {
        "overview": link(r"^eval_observed/(score|success)$"),
        "per-harness": link(r"^eval_observed/(ruleset/[^/]+/)?(harness/[^/]+/)?(score|success)$"),
        "per-ruleset": link(r"^eval_observed/(ruleset/[^/]+/)?(score|success)$"),
        "difficulty": link(r"^eval_observed/tier/"),
        "scenarios": link(r"^eval_observed/scenario/"),
        "coverage": link(r"^eval_coverage/"),
        "efficiency": link(r"^eval_efficiency/"),
        "usage": link(r"^eval_usage/"),
        "training": link(r"^train_verified/"),
    }
    for group, names in sorted(_by_group(runs).items()):
        views[f"group {group}"] = link(r"^eval_observed/(score|success)$", names)
    return views


def _by_group(runs: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, group in runs.items():
        out.setdefault(group, []).append(name)
    return out


if __name__ == "__main__":
    write_plan(sys.argv[1])
