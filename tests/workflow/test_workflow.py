"""The Snakemake workflow, through the real `snakemake` on the tiny test configuration.

One copy of the repository per session (conftest.py); the full test configuration runs once in
it and the slow tests share that run. Tests that edit the copy restore it before they return, and
the one that reruns a job for real brings every output up to date again, so the order of the
tests does not matter. Job counts come from dry-runs ("Job stats" table).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from workflow_support import (
    NOTHING_TO_DO,
    REPO,
    TEST_CONFIG,
    job_counts,
    planned_outputs,
    snakemake,
    subprocess_env,
    tool,
)

from schemashift.report.screenshots import find_browser
from schemashift.workflow import Plan

pytestmark = pytest.mark.skipif(tool("snakemake") is None, reason="snakemake is not installed")

with open(REPO / TEST_CONFIG) as f:
    CONFIG = yaml.safe_load(f)
RULESET = "legacy"
POLICIES = CONFIG["baselines"]
SCENARIOS = CONFIG["evaluation"][RULESET]["scenarios"]
SEEDS = [0, 1]
assert CONFIG["evaluation"][RULESET]["seeds"] == "0-1", "keep SEEDS in step with the test config"
BLOCK = CONFIG["shard_seeds"]
assert BLOCK == 2, "keep the shards in step with the test config: seeds 0-1 are one block"
CELLS = [(RULESET, p, s, seed) for p in POLICIES for s in SCENARIOS for seed in SEEDS]
N_CELLS = len(CELLS)  # 8
#: one shard per policy and scenario: seeds 0-1 are the block [0, 1]
SHARDS = [(RULESET, p, s) for p in POLICIES for s in SCENARIOS]
N_SHARDS = len(SHARDS)  # 4


def shard_dir(ruleset: str, policy: str, scenario: str, first: int = 0) -> str:
    return f"results/cells/{ruleset}/{policy}/{scenario}/seeds-{first}-{first + BLOCK - 1}"


SHARD = shard_dir(RULESET, "oracle", SCENARIOS[0])
OTHER_SHARD = shard_dir(RULESET, "naive_heuristic", SCENARIOS[1])
#: the screenshots join the default targets where a headless browser is on PATH
SHOTS = {"screenshots": 1} if find_browser() else {}
DOWNSTREAM = {"aggregate": 1, "tables": 1, "figures": 1, "report_html": 1, "trackio": 1, **SHOTS, "all": 1}
EVERYTHING = {"baseline": N_SHARDS, "expected_cells": 1, "report_config": 1, **DOWNSTREAM}
AGGREGATED = {"baseline": N_SHARDS, "expected_cells": 1, "aggregate": 1}


def dry_run(copy: Path, *targets: str, **kwargs) -> tuple[dict[str, int], str]:
    proc = snakemake(copy, "--dry-run", *targets, **kwargs)
    return job_counts(proc.stdout), proc.stdout


@contextmanager
def edited(copy: Path, relpath: str, old: str | None = None, new: str = "") -> Iterator[Path]:
    """`relpath` in the copy with `old` replaced by `new` (default: a comment appended), restored after."""
    path = copy / relpath
    assert path.is_file(), f"{relpath} does not exist"
    original = path.read_bytes()
    text = original.decode()
    if old is None:
        text += "\n# edited by tests/workflow/test_workflow.py\n"
    else:
        assert old in text, f"{old!r} is not in {relpath}"
        text = text.replace(old, new)
    path.write_text(text)
    try:
        yield path
    finally:
        path.write_bytes(original)


def read_rows(path: Path, columns: list[str] | None = None) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=columns).to_pylist()


def read_trajectories(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def run_ids(copy: Path) -> dict[str, str]:
    """Shard folder -> the run id its rows carry (one `run` per shard)."""
    ids = {}
    for shard in SHARDS:
        rows = read_rows(copy / shard_dir(*shard) / "episodes.parquet", ["sweep_id"])
        assert len(rows) == len(SEEDS) and len({row["sweep_id"] for row in rows}) == 1
        ids[shard_dir(*shard)] = rows[0]["sweep_id"]
    return ids


# --- static checks ---------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("configfile", [TEST_CONFIG, None, "config.gpu.yaml"], ids=["test", "default", "gpu"])
def test_lint_is_clean(repo_copy, configfile):
    """Each config the project ships (the lints depend on it: the default's debootstrap base is
    a file the image rules take as input)."""
    proc = snakemake(repo_copy, "--lint", configfile=configfile, check=False)
    lints = re.findall(r"^Lints for .*$|^\s+\* .*$", proc.stdout, re.M)
    assert not lints, "snakemake --lint reports:\n" + "\n".join(lints)
    assert proc.returncode == 0, proc.stdout[-4000:]


@pytest.mark.timeout(120)
def test_snakefmt_check_passes(repo_copy):
    snakefmt = tool("snakefmt")
    if snakefmt is None:
        pytest.skip("snakefmt is not installed (pip install -e '.[workflow]')")
    proc = subprocess.run(
        [snakefmt, "--check", "."],
        cwd=repo_copy,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=100,
    )
    if proc.returncode != 0:
        diff = subprocess.run(
            [snakefmt, "--diff", "."],
            cwd=repo_copy,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=100,
        )
        pytest.fail(f"snakefmt --check . fails:\n{proc.stderr}\n{diff.stdout[-8000:]}")


# --- the DAG (dry-runs that do not depend on the copy's state) -------------------------------


@pytest.mark.timeout(120)
def test_dry_run_lists_every_job(repo_copy):
    counts, output = dry_run(repo_copy, "--forceall")
    assert counts == EVERYTHING
    shards = {outs[0] for rule, outs in planned_outputs(output) if rule == "baseline"}
    assert shards == {f"{shard_dir(*shard)}/episodes.parquet" for shard in SHARDS}


@pytest.mark.timeout(120)
def test_embedded_default_has_4914_baseline_cells_in_54_shards(repo_copy):
    """config.yaml: legacy x 3 baselines x 6 scenarios x 5 seeds, and v1 x 6 (random, scripted
    and scripted_oblivious too) x 6 families x 67 baseline seeds x 2 arms, each policy's seeds of
    a scenario in one shard (shard_seeds 100)."""
    counts, output = dry_run(repo_copy, "--forceall", configfile=None)
    assert counts["baseline"] == 54
    assert {k: v for k, v in counts.items() if k not in ("baseline", "env_image")} == {
        "expected_cells": 1,
        "report_config": 1,
        # the tiny model built, three CPU-scale runs, step 0 and three checkpoints each on both rulesets
        "tiny_model": 1,
        "train_config": 3,
        "train": 3,
        "evaluate": (1 + 3 * 3) * 2,
        **DOWNSTREAM,
    }
    shards = [outs[0] for rule, outs in planned_outputs(output) if rule == "baseline"]
    assert len(set(shards)) == 54 and all("/seeds-0-99/" in shard for shard in shards)
    assert sum("/v1/scripted/" in shard for shard in shards) == 6
    assert sum("/v1/scripted_oblivious/" in shard for shard in shards) == 6
    assert not any("/legacy/scripted/" in shard or "/legacy/random/" in shard for shard in shards)
    with open(REPO / "config.yaml") as f:
        # v1's in both arms (config `arms`), legacy's in the drift arm alone
        assert len(Plan(yaml.safe_load(f)).baseline_cells()) == 3 * 6 * 5 + 6 * 6 * 67 * 2


@pytest.mark.timeout(120)
def test_v1_cells_include_compositions_only_when_asked(repo_copy, tmp_path):
    config = {**CONFIG, "rulesets": ["v1"], "evaluation": {"v1": {"scenarios": "all", "seeds": "0"}}}
    plain = tmp_path / "v1.yaml"
    plain.write_text(yaml.safe_dump(config))
    config["evaluation"]["v1"]["compositions"] = True
    composed = tmp_path / "v1-composed.yaml"
    composed.write_text(yaml.safe_dump(config))
    planned = {}
    for name, path in (("plain", plain), ("composed", composed)):
        _, output = dry_run(repo_copy, "--forceall", configfile=path)
        planned[name] = {
            outs[0].split("/")[4] for rule, outs in planned_outputs(output) if rule == "baseline"
        }
    assert (
        "customer_lookup" in planned["plain"] and not {"composed_pair", "composed_triple"} & planned["plain"]
    )
    assert planned["composed"] == planned["plain"] | {"composed_pair", "composed_triple"}


SINGLE_TARGETS = {
    f"{SHARD}/episodes.parquet": {"baseline": 1},
    f"{SHARD}/drifts.parquet": {"baseline": 1},
    f"{SHARD}/trajectories.jsonl.gz": {"baseline": 1},
    "results/expected_cells.json": {"expected_cells": 1},
    "results/episodes.parquet": AGGREGATED,
    "results/drifts.parquet": AGGREGATED,
    "results/manifest.json": AGGREGATED,
    "results/report_config.json": {"report_config": 1},
    "results/summary.md": {**AGGREGATED, "report_config": 1, "tables": 1},
    f"results/tables/{RULESET}_score.csv": {**AGGREGATED, "report_config": 1, "tables": 1},
    f"results/figures/{RULESET}_score.png": {**AGGREGATED, "report_config": 1, "figures": 1},
    f"results/figures/{RULESET}_success.pdf": {**AGGREGATED, "report_config": 1, "figures": 1},
    "results/figures/learning_curves.png": {**AGGREGATED, "report_config": 1, "figures": 1},
    "results/report.html": {**AGGREGATED, "report_config": 1, "tables": 1, "figures": 1, "report_html": 1},
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target", list(SINGLE_TARGETS))
def test_any_result_file_is_a_target(repo_copy, target):
    counts, _ = dry_run(repo_copy, "--forceall", target)
    assert counts == SINGLE_TARGETS[target]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("folder", ["seeds-0-3", "seeds-1-2", "seeds-4-5"])
def test_a_folder_that_is_no_shard_is_a_clear_error(repo_copy, folder):
    """Off the block grid, or a block without evaluation cells: the dry-run names the shards."""
    target = f"results/cells/{RULESET}/oracle/{SCENARIOS[0]}/{folder}/episodes.parquet"
    proc = snakemake(repo_copy, "--dry-run", target, check=False)
    assert proc.returncode != 0
    assert "is no shard of this configuration" in proc.stdout and "seeds-0-1" in proc.stdout


# --- the full run of the test configuration, and what reruns after it -----------------------


TRACE_PREFIX = "schemashift-workflow-test imported: "
# Put first on a job's PYTHONPATH, this reports (on stderr, so in the job's log) every module
# of the package the job had imported when it exited, importlib-loaded ones included.
SITECUSTOMIZE = f"""\
import atexit
import json
import sys


def _report():
    names = sorted(name for name in sys.modules if name == "schemashift" or name.startswith("schemashift."))
    print({TRACE_PREFIX!r} + json.dumps(names), file=sys.stderr)


atexit.register(_report)
"""


@pytest.fixture(scope="session")
def traced(tmp_path_factory) -> dict[str, str]:
    """Environment for real runs: a sitecustomize on PYTHONPATH makes every job's log list the
    package modules the job imported (test_digests_cover_the_code_each_job_imports reads them).
    The rules put the checkout before it, so the jobs still run the copy's code."""
    tracer = tmp_path_factory.mktemp("tracer")
    (tracer / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {"PYTHONPATH": str(tracer)}


@pytest.fixture(scope="session")
def full_run(repo_copy, traced) -> Path:
    """The test configuration run to completion in the session's copy."""
    started = time.perf_counter()
    proc = snakemake(repo_copy, timeout=540, env=traced)
    counts = job_counts(proc.stdout)
    assert counts == EVERYTHING, proc.stdout[-4000:]
    print(f"full run of the test config: {time.perf_counter() - started:.1f} s")
    return repo_copy


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_snakemake_report_gathers_the_flagged_outputs(full_run, tmp_path):
    archive = tmp_path / "report.zip"
    snakemake(full_run, "--report", str(archive))
    with zipfile.ZipFile(archive) as bundle:
        names = bundle.namelist()
    assert any(name.endswith(f"{RULESET}_score.png") for name in names)
    assert any(name.endswith("summary.md") for name in names)
    assert sum(name.endswith("report.html") for name in names) == 2, "Snakemake's page and ours"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_full_run_outputs(full_run):
    results = full_run / "results"
    rows = read_rows(results / "episodes.parquet")
    assert len(rows) == N_CELLS
    assert {(r["ruleset"], r["policy"], r["scenario"], r["seed"]) for r in rows} == set(CELLS)
    assert all(r["status"] == "graded" for r in rows)
    assert all(0.0 <= r["score"] <= 1.0 for r in rows)
    # the aggregate equals the shards it merged, each shard holding its block's cells
    for shard in SHARDS:
        shard_rows = read_rows(full_run / shard_dir(*shard) / "episodes.parquet")
        assert [(r["ruleset"], r["policy"], r["scenario"], r["seed"]) for r in shard_rows] == [
            (*shard, seed) for seed in SEEDS
        ]
        merged = [r for r in rows if (r["ruleset"], r["policy"], r["scenario"]) == shard]
        assert merged == shard_rows
        assert len(read_trajectories(full_run / shard_dir(*shard) / "trajectories.jsonl.gz")) == len(SEEDS)
    shard_drifts = sum(len(read_rows(full_run / shard_dir(*s) / "drifts.parquet")) for s in SHARDS)
    assert len(read_rows(results / "drifts.parquet")) == shard_drifts

    manifest = json.loads((results / "manifest.json").read_text())
    assert manifest["counts"] == {"graded": N_CELLS, "infra_error": 0, "missing": 0}
    assert manifest["inputs"]["episodes"] == N_CELLS
    assert manifest["inputs"]["cell_dirs"] == N_SHARDS
    assert manifest["inputs"]["not_expected"] == 0
    assert len(manifest["cells"]) == N_CELLS
    assert manifest["config_hash"]
    expected = json.loads((results / "expected_cells.json").read_text())
    assert len(expected) == N_CELLS

    summary = (results / "summary.md").read_text()
    assert summary.strip()
    csv = (results / "tables" / f"{RULESET}_score.csv").read_text()
    for policy in POLICIES:
        assert policy in summary and policy in csv
    for metric in ("score", "success"):
        png = results / "figures" / f"{RULESET}_{metric}.png"
        pdf = results / "figures" / f"{RULESET}_{metric}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert pdf.read_bytes()[:5] == b"%PDF-"
    html = (results / "report.html").read_text()
    assert len(html) > 1000 and "<html" in html.lower()
    for policy in POLICIES:
        assert policy in html


VOLATILE = {"sweep_id", "wall_s"}


def stable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_shards_records_equal_its_cells_played_one_by_one(full_run, tmp_path):
    """Shards change how cells are grouped into jobs, never a record: each cell played alone (one
    `schemashift run` per scenario and seed, as one job per cell did) gives the shard's episode
    row column for column apart from sweep_id and wall_s, and the same drift rows and trajectory."""
    env = subprocess_env({"PYTHONPATH": str(full_run)})
    for policy in POLICIES:
        shard = full_run / shard_dir(RULESET, policy, SCENARIOS[0])
        alone: dict[str, list] = {"episodes": [], "drifts": [], "trajectories": []}
        for seed in SEEDS:
            out = tmp_path / f"{policy}-{seed}"
            command = ["python", "-m", "schemashift.cli", "run", "--ruleset", RULESET, "--policy", policy]
            command += ["--scenarios", SCENARIOS[0], "--seeds", str(seed), "--out", str(out)]
            subprocess.run(command, cwd=full_run, env=env, check=True, capture_output=True, timeout=120)
            alone["episodes"] += read_rows(out / "episodes.parquet")
            alone["drifts"] += read_rows(out / "drifts.parquet")
            alone["trajectories"] += read_trajectories(out / "trajectories.jsonl.gz")
        assert stable(read_rows(shard / "episodes.parquet")) == stable(alone["episodes"])
        assert stable(read_rows(shard / "drifts.parquet")) == stable(alone["drifts"])
        assert stable(read_trajectories(shard / "trajectories.jsonl.gz")) == stable(alone["trajectories"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_nothing_changed_nothing_to_do(full_run):
    counts, output = dry_run(full_run)
    assert counts == {}
    assert NOTHING_TO_DO in output


@pytest.mark.slow
@pytest.mark.timeout(600)
def seeds_config(tmp_path: Path, seeds: str) -> Path:
    config = json.loads(json.dumps(CONFIG))
    config["evaluation"][RULESET]["seeds"] = seeds
    path = tmp_path / f"seeds-{seeds}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_adding_seeds_in_a_new_block_runs_only_the_new_shards(full_run, tmp_path):
    counts, output = dry_run(full_run, configfile=seeds_config(tmp_path, "0-3"))
    assert counts == {"baseline": N_SHARDS, "expected_cells": 1, **DOWNSTREAM}
    shards = {outs[0] for rule, outs in planned_outputs(output) if rule == "baseline"}
    assert shards == {f"{shard_dir(*shard, first=2)}/episodes.parquet" for shard in SHARDS}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_changing_a_blocks_seeds_reruns_only_that_block(full_run, tmp_path):
    """Seed 1 dropped and seed 4 added: block 0's shards rerun (their seed list changed), block 2's
    are new, and nothing else runs."""
    counts, output = dry_run(full_run, configfile=seeds_config(tmp_path, "0,4"))
    assert counts == {"baseline": 2 * N_SHARDS, "expected_cells": 1, **DOWNSTREAM}
    shards = {outs[0] for rule, outs in planned_outputs(output) if rule == "baseline"}
    assert shards == {f"{shard_dir(*shard, first=b)}/episodes.parquet" for shard in SHARDS for b in (0, 4)}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_report_settings_never_rerun_cells(full_run, tmp_path):
    config = json.loads(json.dumps(CONFIG))
    config["report"]["bootstrap_samples"] += 100
    path = tmp_path / "report.yaml"
    path.write_text(yaml.safe_dump(config))
    counts, _ = dry_run(full_run, configfile=path)
    assert "baseline" not in counts and "expected_cells" not in counts
    assert counts.get("tables") == 1 and counts.get("report_html") == 1


CODE_EDITS = {
    # figure code: the figures and the report that embeds them
    "schemashift/report/figures.py": {"figures": 1, "report_html": 1, "trackio": 1, **SHOTS, "all": 1},
    # table code: the tables and the report that embeds them (the figures import no table module)
    "schemashift/report/tables/benchmark.py": {"tables": 1, "report_html": 1, **SHOTS, "all": 1},
    # the numbers figures and tables share
    "schemashift/report/analysis.py": {
        "tables": 1,
        "figures": 1,
        "report_html": 1,
        "trackio": 1,
        **SHOTS,
        "all": 1,
    },
    "schemashift/report/html.py": {"report_html": 1, **SHOTS, "all": 1},
    "schemashift/report/dashboard.py": {"trackio": 1, **SHOTS, "all": 1},
    "schemashift/report/aggregate.py": DOWNSTREAM,
    # env core, shared policy code, runner, record schemas: every shard and everything after
    "schemashift/env/pipeline.py": {"baseline": N_SHARDS, **DOWNSTREAM},
    "schemashift/env/rulesets/legacy/ruleset.py": {"baseline": N_SHARDS, **DOWNSTREAM},
    "schemashift/policies/base.py": {"baseline": N_SHARDS, **DOWNSTREAM},
    "schemashift/rollout/runner.py": {"baseline": N_SHARDS, **DOWNSTREAM},
    "schemashift/rollout/records.py": {"baseline": N_SHARDS, **DOWNSTREAM},
    "schemashift/cli/verbs/run.py": {"baseline": N_SHARDS, **DOWNSTREAM},
    # one policy: its own shards (2 of the 4), and everything after
    "schemashift/policies/oracle.py": {"baseline": len(SCENARIOS), **DOWNSTREAM},
    "schemashift/policies/naive.py": {"baseline": len(SCENARIOS), **DOWNSTREAM},
    # a policy neither baseline plays: nothing
    "schemashift/policies/scripted/policy.py": {},
    # not code any job runs
    "README.md": {},
    "docs/workflow.md": {},
    "tests/workflow/conftest.py": {},
}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("relpath", list(CODE_EDITS))
def test_code_edit_reruns_its_layer(full_run, relpath):
    with edited(full_run, relpath):
        counts, _ = dry_run(full_run)
    assert counts == CODE_EDITS[relpath]


REPORT_CODE = sorted(str(p.relative_to(REPO)) for p in (REPO / "schemashift" / "report").rglob("*.py")) + [
    "schemashift/cli/verbs/report.py",
    "schemashift/cli/verbs/aggregate.py",
    "schemashift/cli/verbs/screenshots.py",
]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("relpath", REPORT_CODE)
def test_report_code_never_reruns_baselines(full_run, relpath):
    with edited(full_run, relpath):
        counts, _ = dry_run(full_run)
    assert "baseline" not in counts and "expected_cells" not in counts
    assert counts, f"editing {relpath} reruns nothing: it is in no rule's code digest"


LOGGED_JOBS = {
    # rule (baseline/<policy>: a shard of that policy): (one of its logs, the verb it runs)
    **{
        f"baseline/{policy}": (f"results/logs/cells/{RULESET}/{policy}/{SCENARIOS[0]}/seeds-0-1.log", "run")
        for policy in POLICIES
    },
    "aggregate": ("results/logs/aggregate.log", "aggregate"),
    "tables": ("results/logs/tables.log", "report"),
    "figures": ("results/logs/figures.log", "report"),
    "report_html": ("results/logs/report_html.log", "report"),
}


def module_file(copy: Path, module: str) -> str | None:
    base = copy / Path(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return str(candidate.relative_to(copy))
    return None


def imported_files(copy: Path, log: str, verb: str) -> set[str]:
    """Package files a job imported, less the other verbs' modules.

    `schemashift` imports every verb module to build its parser, so each job loads the other
    verbs' modules too; they import their dependencies inside run(), and keeping them out of the
    other layers' digests is what lets an edit of the report verb leave the cells alone.
    """
    lines = [line for line in (copy / log).read_text().splitlines() if line.startswith(TRACE_PREFIX)]
    assert lines, f"{log} has no import report (was the tracer on the job's PYTHONPATH?)"
    files = set()
    for module in json.loads(lines[-1].removeprefix(TRACE_PREFIX)):
        if module.startswith("schemashift.cli.verbs.") and module != f"schemashift.cli.verbs.{verb}":
            continue
        path = module_file(copy, module)
        if path is not None:
            files.add(path)
    return files


def rules_rerun(copy: Path) -> set[str]:
    """The rules a dry-run plans, a baseline shard as baseline/<its policy>."""
    counts, output = dry_run(copy)
    policies = {outs[0].split("/")[3] for rule, outs in planned_outputs(output) if rule == "baseline"}
    return set(counts) | {f"baseline/{policy}" for policy in policies}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_digests_cover_the_code_each_job_imports(full_run):
    """Every package module a job imports is in that rule's digest: editing it reruns the rule.

    First one new file per package directory finds the directories some digest covers whole
    (rglob); then every imported file outside them is edited on its own, and each time a dry-run
    must list every rule whose job imported it.
    """
    importers: dict[str, set[str]] = {}
    for rule, (log, verb) in LOGGED_JOBS.items():
        for path in imported_files(full_run, log, verb):
            importers.setdefault(path, set()).add(rule)
    assert "schemashift/env/pipeline.py" in importers and "schemashift/report/figures.py" in importers
    assert "schemashift/policies/oracle.py" not in importers.get("schemashift/policies/naive.py", set())
    assert importers["schemashift/policies/oracle.py"] == {"baseline/oracle"}
    whole: dict[str, set[str]] = {}
    for directory in sorted({str(Path(path).parent) for path in importers}):
        probe = full_run / directory / "_digest_probe.py"
        probe.write_text("# a new module: reruns the rules whose digests take this directory whole\n")
        try:
            whole[directory] = rules_rerun(full_run)
        finally:
            probe.unlink()
    uncovered = []
    for path, rules in sorted(importers.items()):
        if rules <= whole[str(Path(path).parent)]:
            continue
        with edited(full_run, path):
            missing = sorted(rules - rules_rerun(full_run))
        if missing:
            uncovered.append(
                f"{path}: imported by {', '.join(sorted(rules))}; "
                f"editing it does not rerun {', '.join(missing)}"
            )
    assert not uncovered, "code outside the digests:\n" + "\n".join(uncovered)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_deleted_shard_file_reruns_that_shard_and_the_aggregation(full_run, tmp_path):
    target = full_run / OTHER_SHARD / "drifts.parquet"
    aside = tmp_path / "drifts.parquet"
    os.replace(target, aside)
    try:
        counts, output = dry_run(full_run)
    finally:
        os.replace(aside, target)
    assert counts == {"baseline": 1, **DOWNSTREAM}
    assert [outs[0] for rule, outs in planned_outputs(output) if rule == "baseline"] == [
        f"{OTHER_SHARD}/episodes.parquet"
    ]
    assert dry_run(full_run)[0] == {}


MARKER = "(edited by the rerun test)"
FEEDBACK = ("Episode marked complete.", f"Episode marked complete {MARKER}.")


def finished_feedback(trajectory_file: Path) -> list[str]:
    return [t["steps"][-1]["feedback"] for t in read_trajectories(trajectory_file)]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_env_edit_reruns_and_shows_in_the_outputs(full_run, traced):
    """A real rerun: the jobs run the copy's code (not an installed package), the edit shows in
    the rerun cell, and the other cells stay as they were."""
    before = run_ids(full_run)
    assert not any(MARKER in f for f in finished_feedback(full_run / SHARD / "trajectories.jsonl.gz"))
    try:
        with edited(full_run, "schemashift/env/rulesets/legacy/ruleset.py", *FEEDBACK):
            assert dry_run(full_run, f"{SHARD}/episodes.parquet")[0] == {"baseline": 1}
            proc = snakemake(full_run, f"{SHARD}/episodes.parquet", env=traced)
            assert job_counts(proc.stdout) == {"baseline": 1}
        after = run_ids(full_run)
        assert after[SHARD] != before[SHARD]
        assert {k: v for k, v in after.items() if k != SHARD} == {
            k: v for k, v in before.items() if k != SHARD
        }
        feedback = finished_feedback(full_run / SHARD / "trajectories.jsonl.gz")
        assert feedback and all(MARKER in f for f in feedback), feedback
        assert not any(
            MARKER in f for f in finished_feedback(full_run / OTHER_SHARD / "trajectories.jsonl.gz")
        )

        # Code restored: that one shard (built with other code) reruns, plus the aggregation.
        counts, output = dry_run(full_run)
        assert counts == {"baseline": 1, **DOWNSTREAM}
        assert [outs[0] for rule, outs in planned_outputs(output) if rule == "baseline"] == [
            f"{SHARD}/episodes.parquet"
        ]
    finally:
        snakemake(full_run, env=traced)  # everything up to date again for the other tests
    assert not any(MARKER in f for f in finished_feedback(full_run / SHARD / "trajectories.jsonl.gz"))
    final = run_ids(full_run)
    merged = {
        shard_dir(r["ruleset"], r["policy"], r["scenario"]): r["sweep_id"]
        for r in read_rows(full_run / "results" / "episodes.parquet")
    }
    assert merged == final
    assert dry_run(full_run)[0] == {}
