"""Wall time of the Snakemake workflow on the embedded default (config.yaml), on N cores.

Copies the repository's source tree to a temporary directory (tracked files plus untracked ones
git does not ignore, so no results come along) and times, with `snakemake --cores N` there:

0. `snakemake -n` in the fresh copy (the parse and DAG of every job; the median of three);
1. the full run of the embedded default (every baseline on every evaluation cell, the
   aggregation, tables, figures and report), as seconds in all and per cell;
2. a no-op rerun (must say "Nothing to be done"; the median of three);
3. one cell's episodes.parquet deleted: whether a plain rerun notices, the time of that cell
   plus the aggregation (`snakemake CELL results/manifest.json`), and, for information, of a
   cell plus the aggregation, tables, figures and report (`snakemake CELL all`).

Targets (issue: workflow): per cell at most 0.4 s (goal 0.2 s) on 2 cores, no-op rerun at most
2 s, one changed cell plus the aggregation at most 5 s. Absolute figures depend on the machine and
its load. Run from an environment with the `workflow` extra installed:

    python benchmarks/workflow_speed.py [--cores 2] [--keep] [--repo CHECKOUT]

`--repo` times another checkout (say a `git worktree add /tmp/wf-base main`) with this script,
so that two versions are compared side by side.

Exit status: 0 when every run succeeded and did the expected jobs, 1 otherwise (the time figures
are reported, not enforced; `--strict` makes exceeding a limit fail too).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the workflow tests' copy of a checkout (what a fresh clone holds) and their job-table reader
sys.path.insert(0, str(REPO / "tests" / "workflow"))
import workflow_support  # noqa: E402
from workflow_support import copy_repo  # noqa: E402

PER_CELL_LIMIT, PER_CELL_GOAL = 0.4, 0.2
NOOP_LIMIT = 2.0
ONE_CELL_LIMIT = 5.0


def job_counts(output: str) -> dict[str, int]:
    """Rule -> jobs of a run's "Job stats" table; {} where it printed none (a failed run)."""
    try:
        return workflow_support.job_counts(output)
    except AssertionError:
        return {}


def run(copy: Path, snakemake: str, cores: int, env: dict[str, str], *args: str) -> tuple[float, str, int]:
    started = time.perf_counter()
    proc = subprocess.run(
        [snakemake, "--cores", str(cores), *args],
        cwd=copy,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return time.perf_counter() - started, proc.stdout, proc.returncode


def verdict(value: float, limit: float, goal: float | None = None) -> str:
    if value > limit:
        return f"OVER the limit {limit:g} s"
    if goal is not None and value > goal:
        return f"within the limit {limit:g} s, above the goal {goal:g} s"
    return f"within the limit {limit:g} s" + (f" and the goal {goal:g} s" if goal is not None else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and print its path")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a figure exceeds its limit")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout to time (default: this one)")
    args = parser.parse_args(argv)

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for name in ("PYTHONPATH", "SNAKEMAKE_PROFILE"):
        env.pop(name, None)
    snakemake = shutil.which("snakemake", path=env["PATH"])
    if snakemake is None:
        print("snakemake is not installed (pip install -e '.[workflow]')", file=sys.stderr)
        return 1

    tmp = Path(tempfile.mkdtemp(prefix="schemashift-workflow-speed-"))
    copy = tmp / "repo"
    ok, over = True, False
    try:
        copy_repo(copy, args.repo.resolve())
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"workflow speed: snakemake --cores {args.cores} on the embedded default (config.yaml) of "
            f"{args.repo}; {os.cpu_count()} CPUs here, load average {load}"
        )

        runs = [run(copy, snakemake, args.cores, env, "--dry-run") for _ in range(3)]
        planned = all(status == 0 and job_counts(out).get("baseline") for _, out, status in runs)
        ok &= planned
        print(
            f"snakemake -n:             {statistics.median(r[0] for r in runs):6.2f} s  (median of 3, "
            f"min {min(r[0] for r in runs):.2f} s)"
            + ("" if planned else f"  UNEXPECTED: {runs[0][1][-2000:]}")
        )

        seconds, output, status = run(copy, snakemake, args.cores, env)
        counts = job_counts(output)
        cells = counts.get("baseline", 0)
        if status != 0 or cells == 0:
            print(f"full run failed (status {status}):\n{output[-4000:]}", file=sys.stderr)
            return 1
        per_cell = seconds / cells
        over |= per_cell > PER_CELL_LIMIT
        print(f"full run:                 {seconds:6.2f} s for {sum(counts.values())} jobs, {cells} cells")
        print(
            f"  per cell:               {per_cell:6.3f} s  "
            f"({verdict(per_cell, PER_CELL_LIMIT, PER_CELL_GOAL)})"
        )

        # snakemake's own start-up dominates a no-op and varies from run to run: median of 3
        runs = [run(copy, snakemake, args.cores, env) for _ in range(3)]
        seconds = statistics.median(r[0] for r in runs)
        noop = all(
            status == 0 and "Nothing to be done" in out and not job_counts(out) for _, out, status in runs
        )
        ok &= noop
        over |= seconds > NOOP_LIMIT
        print(
            f"no-op rerun:              {seconds:6.2f} s  ({verdict(seconds, NOOP_LIMIT)}; median of 3, "
            f"min {min(r[0] for r in runs):.2f} s)"
            + ("" if noop else f"  UNEXPECTED: jobs {[job_counts(r[1]) for r in runs]}")
        )

        cells_found = sorted((copy / "results" / "cells").rglob("episodes.parquet"))
        first, second = (str(path.relative_to(copy)) for path in cells_found[:2])

        # Does a plain rerun notice a deleted cell file? (Only if the cells are default targets.)
        (copy / first).unlink()
        _, output, _ = run(copy, snakemake, args.cores, env, "--dry-run")
        noticed = job_counts(output).get("baseline") == 1
        ok &= noticed
        if not noticed:
            print(
                "  WORKFLOW: after deleting a cell's episodes.parquet a plain `snakemake` has nothing to do "
                "(the cells are not default targets); the runs below name the cell explicitly"
            )

        seconds, output, status = run(copy, snakemake, args.cores, env, first, "results/manifest.json")
        counts = job_counts(output)
        good = status == 0 and counts == {"baseline": 1, "aggregate": 1}
        ok &= good
        over |= seconds > ONE_CELL_LIMIT
        print(
            f"one cell + aggregation:   {seconds:6.2f} s  ({verdict(seconds, ONE_CELL_LIMIT)}), "
            f"{Path(first).parent}" + ("" if good else f"  UNEXPECTED: status {status}, jobs {counts}")
        )
        # bring the report up to date, then the same with the whole default target
        _, _, status = run(copy, snakemake, args.cores, env)
        ok &= status == 0
        (copy / second).unlink()
        seconds, output, status = run(copy, snakemake, args.cores, env, second, "all")
        counts = job_counts(output)
        expected = {"baseline": 1, "aggregate": 1, "tables": 1, "figures": 1, "report_html": 1, "all": 1}
        good = status == 0 and counts == expected
        ok &= good
        print(
            f"  + tables, figures, report: {seconds:5.2f} s in all (for information)"
            + ("" if good else f"  UNEXPECTED: status {status}, jobs {counts}")
        )
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if not ok:
        return 1
    return 1 if args.strict and over else 0


if __name__ == "__main__":
    sys.exit(main())
