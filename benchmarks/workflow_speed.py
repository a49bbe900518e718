"""Wall time of the Snakemake workflow: the embedded default (config.yaml), and evaluation grids.

Copies the repository's source tree to a temporary directory (tracked files plus untracked ones
git does not ignore, so no results come along) and times, with `snakemake --cores N` there:

The embedded default
0. `snakemake -n` in the fresh copy (the parse and DAG of every job; the median of three);
1. the full run (every baseline shard, the aggregation, tables, figures and report), as seconds
   in all and per cell;
2. a no-op rerun (must say "Nothing to be done"; the median of three);
3. "add 5 baseline seeds" per scenario (from the next multiple of 5) as a dry-run: the baseline
   jobs it plans, with the default shard_seeds (the shards that gain the cells rerun) and with
   shard_seeds 5 (only new shards);
4. one shard's episodes.parquet deleted: whether a plain rerun notices, the time of that shard
   plus the aggregation (`snakemake SHARD results/manifest.json`), and, for information, of a
   shard plus the aggregation, tables, figures and report (`snakemake SHARD all`).

An evaluation grid (skipped with --no-grid)
5. both rulesets x naive/policy-aware/oracle x their 6 scenarios x seeds 0-199 (7,200 cells):
   `schemashift run` over the same cells (one process per ruleset and policy, one after the
   other) beside `snakemake results/manifest.json` (every shard and the aggregation), their
   records compared column for column apart from sweep_id and wall_s, and `snakemake -n` of the
   grid (the median of three);
6. a 100,008-cell grid (seeds 0-2777): `snakemake -n` only.

Jobs in containers (with --containers; needs podman and the images of scripts/container-up.sh)
7. the legacy ruleset's baseline shards of the embedded default, rerun (`--forcerun baseline
   --until baseline`, `--cores 1`) on the host (containers.engine none) and in the runtime image
   (podman), alternating, three rounds each: the per-job container overhead is the difference of
   the medians over the number of jobs.

The embedded default runs where main.sh would run it: in the images where podman or docker
answers (the copy shares this checkout's runtime wheelhouse), else on the host.

Targets: per cell at most 0.4 s (goal 0.2 s) on 2 cores, no-op rerun at most 2 s, one changed
shard plus the aggregation at most 5 s; the grid's Snakemake run at most 3x the time of `run`
plus 20 s and its planning at most 5 s; the 100,000-cell grid plans in at most 10 s. Absolute
figures depend on the machine and its load. Run from an environment with the `workflow` extra:

    python benchmarks/workflow_speed.py [--cores 2] [--keep] [--repo CHECKOUT] [--no-grid] [--containers]

`--repo` times another checkout (say a `git worktree add /tmp/wf-base main`) with this script,
so that two versions are compared side by side.

Exit status: 0 when every run succeeded, did the expected jobs and gave equal records, 1
otherwise (the time figures are reported, not enforced; `--strict` makes exceeding a limit fail).
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

import yaml

REPO = Path(__file__).resolve().parents[1]
# the workflow tests' copy of a checkout (what a fresh clone holds) and their job-table reader
sys.path.insert(0, str(REPO / "tests" / "workflow"))
import workflow_support  # noqa: E402
from workflow_support import copy_repo  # noqa: E402

PER_CELL_LIMIT, PER_CELL_GOAL = 0.4, 0.2
NOOP_LIMIT = 2.0
ONE_SHARD_LIMIT = 5.0
GRID_FACTOR, GRID_SLACK = 3.0, 20.0
GRID_PLAN_LIMIT = 5.0
BIG_GRID_PLAN_LIMIT = 10.0
GRID_POLICIES = ("naive_heuristic", "policy_aware_heuristic", "oracle")
VOLATILE = {"sweep_id", "wall_s"}


def job_counts(output: str) -> dict[str, int]:
    """Rule -> jobs of a run's "Job stats" table; {} where it printed none (a failed run)."""
    try:
        return workflow_support.job_counts(output)
    except AssertionError:
        return {}


class Bench:
    """One copy of a checkout and the snakemake that times it."""

    def __init__(self, copy: Path, cores: int) -> None:
        self.copy, self.cores = copy, cores
        self.env = dict(os.environ)
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        for name in ("PYTHONPATH", "SNAKEMAKE_PROFILE"):
            self.env.pop(name, None)
        self.snakemake = shutil.which("snakemake", path=self.env["PATH"])
        self.ok, self.over = True, False

    def run(self, *args: str) -> tuple[float, str, int]:
        return self.command([self.snakemake, "--cores", str(self.cores), *args])

    def command(self, command: list[str], env: dict[str, str] | None = None) -> tuple[float, str, int]:
        started = time.perf_counter()
        proc = subprocess.run(
            command,
            cwd=self.copy,
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        return time.perf_counter() - started, proc.stdout, proc.returncode

    def median_dry_run(self, *args: str) -> tuple[float, float, bool, str]:
        runs = [self.run("--dry-run", *args) for _ in range(3)]
        planned = all(status == 0 and job_counts(out).get("baseline") for _, out, status in runs)
        return statistics.median(r[0] for r in runs), min(r[0] for r in runs), planned, runs[0][1]

    def check(self, good: bool) -> str:
        self.ok &= good
        return ""

    def limit(self, value: float, limit: float, goal: float | None = None) -> str:
        self.over |= value > limit
        if value > limit:
            return f"OVER the limit {limit:g} s"
        if goal is not None and value > goal:
            return f"within the limit {limit:g} s, above the goal {goal:g} s"
        return f"within the limit {limit:g} s" + (f" and the goal {goal:g} s" if goal is not None else "")

    def config(self, name: str, change) -> Path:
        """config.yaml of the copy with `change(config)` applied, written beside it."""
        config = yaml.safe_load((self.copy / "config.yaml").read_text())
        change(config)
        path = self.copy / name
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path


def configfile(path: Path) -> str:
    """One --configfile option: snakemake reads every word after a bare one as another file."""
    return f"--configfile={path}"


def cells_of(config: Path) -> int:
    sys.path.insert(0, str(REPO))
    from schemashift.workflow import Plan

    plan_config = yaml.safe_load(config.read_text())
    for cells in plan_config["evaluation"].values():
        cells.setdefault("split", "test")
        cells.setdefault("compositions", False)
    return len(Plan(plan_config, environ={}).baseline_cells())


def embedded_default(bench: Bench) -> None:
    median, fastest, planned, output = bench.median_dry_run()
    bench.check(planned)
    print(
        f"snakemake -n:               {median:6.2f} s  (median of 3, min {fastest:.2f} s)"
        + ("" if planned else f"  UNEXPECTED: {output[-2000:]}")
    )

    seconds, output, status = bench.run()
    counts = job_counts(output)
    shards = counts.get("baseline", 0)
    cells = cells_of(bench.copy / "config.yaml")
    if status != 0 or shards == 0:
        bench.ok = False
        print(f"full run failed (status {status}):\n{output[-4000:]}", file=sys.stderr)
        return
    per_cell = seconds / cells
    print(
        f"full run:                   {seconds:6.2f} s for {sum(counts.values())} jobs: "
        f"{cells} cells in {shards} shards"
    )
    print(
        f"  per cell:                 {per_cell:6.3f} s  "
        f"({bench.limit(per_cell, PER_CELL_LIMIT, PER_CELL_GOAL)})"
    )

    # snakemake's own start-up dominates a no-op and varies from run to run: median of 3
    runs = [bench.run() for _ in range(3)]
    seconds = statistics.median(r[0] for r in runs)
    noop = all(status == 0 and "Nothing to be done" in out and not job_counts(out) for _, out, status in runs)
    bench.check(noop)
    print(
        f"no-op rerun:                {seconds:6.2f} s  ({bench.limit(seconds, NOOP_LIMIT)}; median of 3, "
        f"min {min(r[0] for r in runs):.2f} s)"
        + ("" if noop else f"  UNEXPECTED: jobs {[job_counts(r[1]) for r in runs]}")
    )

    def more_seeds(config: dict) -> None:
        """Five more baseline seeds per scenario, from the next multiple of 5 on."""
        from schemashift.rollout.selection import parse_seeds

        for cells in config["evaluation"].values():
            spec = cells.get("baseline_seeds", cells["seeds"])
            start = (max(parse_seeds(spec)) // 5 + 1) * 5
            cells["baseline_seeds"] = f"{spec},{start}-{start + 4}"

    _, output, status = bench.run("--dry-run", configfile(bench.config("more-seeds.yaml", more_seeds)))
    grown = job_counts(output).get("baseline", 0)
    bench.check(status == 0 and grown == shards)
    print(
        f"add 5 baseline seeds:       {grown} baseline jobs planned, the {shards} shards that gain "
        "the new cells "
        f"(shard_seeds {yaml.safe_load((bench.copy / 'config.yaml').read_text())['shard_seeds']})"
    )
    # the same with blocks of 5: the cells exist, only the new blocks' shards are planned
    small = bench.config("blocks-of-5.yaml", lambda config: config.update(shard_seeds=5))
    _, output, status = bench.run("--dry-run", configfile(small))
    bench.check(status == 0)
    existing = {outs[0] for rule, outs in workflow_support.planned_outputs(output) if rule == "baseline"}
    _, _, status = bench.run(configfile(small), "results/manifest.json")
    bench.check(status == 0)

    def small_more(config: dict) -> None:
        more_seeds(config)
        config["shard_seeds"] = 5

    _, output, status = bench.run("--dry-run", configfile(bench.config("blocks-of-5-more.yaml", small_more)))
    planned = [outs[0] for rule, outs in workflow_support.planned_outputs(output) if rule == "baseline"]
    only_new = status == 0 and len(planned) == shards and not existing & set(planned)
    bench.check(only_new)
    print(
        f"  with shard_seeds 5:       {len(planned)} baseline jobs planned, "
        + ("all of them new shards, none of the existing ones" if only_new else f"UNEXPECTED: {planned[:5]}")
    )

    shards_found = sorted((bench.copy / "results" / "cells").rglob("seeds-0-99/episodes.parquet"))
    first_shard, second_shard = (str(path.relative_to(bench.copy)) for path in shards_found[:2])
    (bench.copy / first_shard).unlink()
    _, output, _ = bench.run("--dry-run")
    noticed = job_counts(output).get("baseline") == 1
    bench.check(noticed)
    if not noticed:
        print("  WORKFLOW: after deleting a shard's episodes.parquet a plain `snakemake` has nothing to do")
    seconds, output, status = bench.run(first_shard, "results/manifest.json")
    counts = job_counts(output)
    good = status == 0 and counts == {"baseline": 1, "aggregate": 1}
    bench.check(good)
    print(
        f"one shard + aggregation:    {seconds:6.2f} s  ({bench.limit(seconds, ONE_SHARD_LIMIT)}), "
        f"{Path(first_shard).parent}" + ("" if good else f"  UNEXPECTED: status {status}, jobs {counts}")
    )
    _, _, status = bench.run()
    bench.check(status == 0)
    (bench.copy / second_shard).unlink()
    seconds, output, status = bench.run(second_shard, "all")
    counts = job_counts(output)
    expected = {"baseline": 1, "aggregate": 1, "tables": 1, "figures": 1, "report_html": 1, "all": 1}
    good = status == 0 and counts == expected
    bench.check(good)
    print(
        f"  + tables, figures, report: {seconds:5.2f} s in all (for information)"
        + ("" if good else f"  UNEXPECTED: status {status}, jobs {counts}")
    )


def grid_config(bench: Bench, name: str, seeds: str) -> Path:
    def change(config: dict) -> None:
        config["rulesets"] = ["legacy", "v1"]
        config["baselines"] = list(GRID_POLICIES)
        config["evaluation"] = {
            ruleset: {"scenarios": "all", "seeds": seeds} for ruleset in config["rulesets"]
        }

    return bench.config(name, change)


def stable_rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    rows = [{k: v for k, v in row.items() if k not in VOLATILE} for row in pq.read_table(path).to_pylist()]
    return sorted(
        rows, key=lambda r: (r["ruleset"], r["policy"], r["scenario"], r["seed"], r["sample_index"])
    )


def grid(bench: Bench) -> None:
    config = grid_config(bench, "grid.yaml", "0-199")
    cells = cells_of(config)
    direct = bench.copy / "direct"
    env = {**bench.env, "PYTHONPATH": str(bench.copy)}
    started = time.perf_counter()
    for ruleset in ("legacy", "v1"):
        for policy in GRID_POLICIES:
            command = [
                sys.executable,
                "-m",
                "schemashift.cli",
                "run",
                "--ruleset",
                ruleset,
                "--policy",
                policy,
            ]
            command += ["--scenarios", "all", "--seeds", "0-199", "--out", str(direct / ruleset / policy)]
            _, output, status = bench.command(command, env)
            bench.check(status == 0)
            if status != 0:
                print(f"  `schemashift run` failed: {output[-2000:]}", file=sys.stderr)
    direct_seconds = time.perf_counter() - started

    planning, fastest, planned, output = bench.median_dry_run(configfile(config), "results/manifest.json")
    bench.check(planned)
    shards = job_counts(output).get("baseline", 0)
    seconds, output, status = bench.run(configfile(config), "results/manifest.json")
    bench.check(status == 0 and job_counts(output).get("baseline") == shards)
    bound = GRID_FACTOR * direct_seconds + GRID_SLACK
    print(
        f"grid of {cells} cells (2 rulesets x {len(GRID_POLICIES)} baselines x 6 scenarios x seeds "
        f"0-199), {shards} shards:"
    )
    print(f"  schemashift run:          {direct_seconds:6.2f} s  (6 processes, one after the other)")
    print(
        f"  snakemake (shards + aggregate): {seconds:6.2f} s  = {seconds / direct_seconds:.1f}x run "
        f"({bench.limit(seconds, bound)}: 3x run + 20 s)"
    )
    print(
        f"  snakemake -n:             {planning:6.2f} s  ({bench.limit(planning, GRID_PLAN_LIMIT)}; "
        f"median of 3, min {fastest:.2f} s)"
    )

    import pyarrow as pa
    import pyarrow.parquet as pq

    played = sorted(direct.rglob("episodes.parquet"))
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in played]), bench.copy / "direct.parquet")
    same = stable_rows(bench.copy / "direct.parquet") == stable_rows(
        bench.copy / "results" / "episodes.parquet"
    )
    bench.check(same)
    print(
        f"  records:                  {'equal' if same else 'DIFFERENT'} ({cells} rows of the sharded run vs "
        "`run`, column for column apart from sweep_id and wall_s)"
    )

    big = grid_config(bench, "big-grid.yaml", "0-2777")
    planning, fastest, planned, output = bench.median_dry_run(configfile(big), "results/manifest.json")
    bench.check(planned)
    print(
        f"grid of {cells_of(big)} cells, dry run: {planning:6.2f} s for "
        f"{job_counts(output).get('baseline', 0)} shards "
        f"({bench.limit(planning, BIG_GRID_PLAN_LIMIT)}; median of 3, min {fastest:.2f} s)"
    )


ENGINES = ("none", "podman")
RERUN_BASELINES = ("--forcerun", "baseline", "--until", "baseline")


def container_overhead(bench: Bench, rounds: int = 3) -> None:
    """Per-job cost of running the baseline jobs in the runtime image instead of on the host."""

    def legacy_under(engine: str):
        def change(config) -> None:
            config["rulesets"] = ["legacy"]
            config["evaluation"] = {"legacy": config["evaluation"]["legacy"]}
            config["containers"]["engine"] = engine

        return change

    configs = {
        engine: bench.config(f"containers-{engine}.yaml", legacy_under(engine))
        for engine in ("none", "podman")
    }
    # the images' rules first (reused where container-up.sh built them), untimed
    seconds, output, status = bench.run(configfile(configs["podman"]), "--until", "baseline")
    if status != 0:
        bench.ok = False
        print(f"containers: the first run in the images failed:\n{output[-3000:]}")
        return
    print(f"containers: images ready and a first run in them: {seconds:.1f} s")
    times: dict[str, list[float]] = {"none": [], "podman": []}
    jobs = 0
    for _ in range(rounds):
        for engine in ENGINES:
            args = [
                "--cores",
                "1",
                configfile(configs[engine]),
                "--forcerun",
                "baseline",
                "--until",
                "baseline",
            ]
            seconds, output, status = bench.command([bench.snakemake, *args])
            counts = job_counts(output)
            bench.check(status == 0 and counts.get("baseline", 0) > 0)
            jobs = counts.get("baseline", 0)
            times[engine].append(seconds)
    host, boxed = statistics.median(times["none"]), statistics.median(times["podman"])
    per_job = (boxed - host) / jobs if jobs else float("nan")
    print(
        f"containers: {jobs} baseline jobs, --cores 1, median of {rounds}: host {host:.1f} s, "
        f"runtime image {boxed:.1f} s ({boxed / host:.2f}x): +{per_job:.2f} s per job"
    )
    print(f"            host runs {', '.join(f'{t:.1f}' for t in times['none'])} s; "
          f"image runs {', '.join(f'{t:.1f}' for t in times['podman'])} s")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and print its path")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a figure exceeds its limit")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout to time (default: this one)")
    parser.add_argument("--no-grid", action="store_true", help="time the embedded default only")
    parser.add_argument(
        "--containers", action="store_true", help="also the per-job overhead of the jobs in containers"
    )
    parser.add_argument("--containers-only", action="store_true", help="only the container overhead")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="schemashift-workflow-speed-"))
    bench = Bench(tmp / "repo", args.cores)
    if bench.snakemake is None:
        print("snakemake is not installed (pip install -e '.[workflow]')", file=sys.stderr)
        return 1
    try:
        copy_repo(bench.copy, args.repo.resolve())
        # The runtime image's wheelhouse is its whole build context: shared, it is not downloaded
        # again (the server image's context is the repository, which a link cannot leave).
        wheels = args.repo.resolve() / "containers" / "wheels" / "runtime"
        if wheels.is_dir():
            (bench.copy / "containers" / "wheels").mkdir(parents=True, exist_ok=True)
            (bench.copy / "containers" / "wheels" / "runtime").symlink_to(wheels)
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"workflow speed: snakemake --cores {args.cores} on {args.repo}; {os.cpu_count()} CPUs here, "
            f"load average {load}"
        )
        if args.containers_only:
            container_overhead(bench)
            return 0 if bench.ok else 1
        embedded_default(bench)
        if args.containers:
            container_overhead(bench)
        if not args.no_grid:
            shutil.rmtree(bench.copy / "results", ignore_errors=True)
            grid(bench)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if not bench.ok:
        return 1
    return 1 if args.strict and bench.over else 0


if __name__ == "__main__":
    sys.exit(main())
