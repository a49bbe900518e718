"""The workflow through SLURM with profiles/slurm, on the one-node cluster of scripts/slurm-up.sh.

Tests that need the cluster skip when no `sinfo` answers, unless SCHEMASHIFT_REQUIRE_SLURM=1 (CI sets
it after starting the cluster): then a missing cluster, or a missing snakemake, is a failure. The
containerized variant (`--sdm apptainer`) also needs podman and the runtime image (the `runtime`
fixture; SCHEMASHIFT_REQUIRE_CONTAINER=1 makes their absence a failure) and runs apptainer's calls
through tests/workflow/apptainer_shim.py: real apptainer is not exercised here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from apptainer_shim import write_reference
from workflow_support import episode_rows

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
SNAKEFILE = REPO / "Snakefile"
PROFILE = REPO / "profiles" / "slurm"
TEST_CONFIG = REPO / "tests" / "workflow" / "config.yaml"
REQUIRE_SLURM = os.environ.get("SCHEMASHIFT_REQUIRE_SLURM") == "1"

# The test config over two blocks of its shard_seeds=2: seeds 0-3 are 2 policies x 2 scenarios x 2
# blocks = 8 shards of 2 cells each; each shard, not each cell, is one SLURM job.
SEEDS = "0-3"
POLICIES = ("naive_heuristic", "oracle")
SCENARIOS = ("E1_onboard_new_hire", "M2_weekly_report")
SHARDS = [(policy, scenario, first) for policy in POLICIES for scenario in SCENARIOS for first in (0, 2)]
N_CELLS = 16
# Columns that differ between two runs of the same cell by design.
VOLATILE = {"sweep_id", "wall_s", "git_sha"}
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+)")


def _unavailable(reason: str) -> None:
    if REQUIRE_SLURM:
        pytest.fail(f"{reason} (SCHEMASHIFT_REQUIRE_SLURM=1, so the SLURM tests must run)")
    pytest.skip(reason)


def _need_snakemake() -> None:
    needed = (("snakemake", "snakemake"), ("snakemake_executor_plugin_slurm", "the SLURM plugin"))
    for module, extra in needed:
        if importlib.util.find_spec(module) is None:
            _unavailable(f"{extra} is not installed (pip install -e '.[workflow]')")


def _cluster_answers() -> None:
    if shutil.which("sinfo") is None:
        _unavailable("no SLURM cluster: `sinfo` is not installed; start one with `sudo scripts/slurm-up.sh`")
    try:
        probe = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        _unavailable(
            "no SLURM cluster: `sinfo` did not answer within 15 s; start one with `sudo scripts/slurm-up.sh`"
        )
    states = probe.stdout.split()
    if probe.returncode != 0 or not states:
        said = (probe.stderr or probe.stdout).strip().splitlines() or ["no output"]
        _unavailable(
            f"no SLURM cluster answers `sinfo` (exit {probe.returncode}: {said[0]}); "
            "start one with `sudo scripts/slurm-up.sh`"
        )
    if not any(state.rstrip("*~#!%$@^-") in {"idle", "mixed", "allocated", "completing"} for state in states):
        _unavailable(f"the SLURM cluster has no usable node (sinfo says {states})")


# Session-scoped as `runtime` is, so that a test needing both checks the cluster first.
@pytest.fixture(scope="session")
def cluster() -> None:
    _need_snakemake()
    _cluster_answers()


def _env(first_on_path: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # Jobs run `python -m schemashift.cli`: the interpreter running the tests comes first on PATH,
    # and sbatch passes this environment on to the jobs (--export=ALL).
    first = [str(first_on_path)] if first_on_path else []
    env["PATH"] = os.pathsep.join([*first, str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("SNAKEMAKE_PROFILE", None)
    return env


def _snakemake(
    workdir: Path,
    *args: str,
    snakefile: Path = SNAKEFILE,
    timeout: float = 120,
    first_on_path: Path | None = None,
):
    """Run snakemake from `workdir` with results landing there (and `first_on_path` first on the
    PATH of snakemake and its jobs); returns the completed process."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "snakemake", "-s", str(snakefile), "--directory", str(workdir), *args]
    try:
        return subprocess.run(
            command, cwd=workdir, env=_env(first_on_path), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        _cancel_jobs_in(workdir)
        tail = exc.stderr or b""
        tail = (tail.decode(errors="replace") if isinstance(tail, bytes) else tail)[-4000:]
        pytest.fail(f"snakemake did not finish within {timeout} s: {command}\n{tail}")


def _cancel_jobs_in(workdir: Path) -> None:
    """Cancel the SLURM jobs a killed snakemake left behind (those running in `workdir`)."""
    if shutil.which("squeue") is None:
        return
    listed = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True, timeout=15)
    jobids = [
        line.split()[0]
        for line in listed.stdout.splitlines()
        if len(line.split()) == 2 and line.split()[1] == str(workdir)
    ]
    if jobids:
        subprocess.run(["scancel", *jobids], capture_output=True, timeout=15)


def _check(done, what: str) -> str:
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{output[-6000:]}"
    return output


def _shard_targets() -> list[str]:
    return [
        f"results/cells/legacy/{policy}/{scenario}/seeds-{first}-{first + 1}/episodes.parquet"
        for policy, scenario, first in SHARDS
    ]


def _grid_config(tmp_path: Path, containers: dict | None = None) -> Path:
    """The test config over SEEDS, with `containers` settings added."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load(TEST_CONFIG.read_text())
    assert config["shard_seeds"] == 2 and tuple(config["baselines"]) == POLICIES
    assert tuple(config["evaluation"]["legacy"]["scenarios"]) == SCENARIOS
    config["evaluation"]["legacy"]["seeds"] = SEEDS
    config["containers"].update(containers or {})
    path = tmp_path / ("grid-containers.yaml" if containers else "grid.yaml")
    path.write_text(yaml.safe_dump(config))
    return path


def _stable_rows(path: Path) -> list[dict]:
    table = pq.read_table(path)
    return table.drop_columns([c for c in table.column_names if c in VOLATILE]).to_pylist()


def _scontrol_job(jobid: str) -> str | None:
    done = subprocess.run(["scontrol", "show", "job", jobid], capture_output=True, text=True, timeout=15)
    return done.stdout if done.returncode == 0 else None


def _jobcomp_entries() -> dict[str, str]:
    """JobId -> line of the cluster's job-completion file (jobcomp/filetxt), if it has one."""
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=15).stdout
    match = re.search(r"^JobCompLoc\s*=\s*(\S+)", config, re.MULTILINE)
    path = Path(match.group(1)) if match else None
    if path is None or not path.is_file():
        return {}
    entries = {}
    for line in path.read_text().splitlines():
        found = re.match(r"JobId=(\d+)\s", line)
        if found:
            entries[found.group(1)] = line
    return entries


def test_profile_maps_gpu_resources():
    """GPU rules get `gpu` (-> sbatch --gpus) from the profile; other jobs ask for none."""
    yaml = pytest.importorskip("yaml")
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    assert profile["slurm-status-command"] == "squeue"
    assert profile["slurm-init-seconds-before-status-checks"] == 1
    assert "slurm_partition" not in profile["default-resources"]
    assert "gpu" not in profile["default-resources"] and "gpu_model" not in profile["default-resources"]
    assert {"runtime", "mem_mb"} <= set(profile["default-resources"])
    gpu_rules = {rule: res for rule, res in profile["set-resources"].items() if "gpu" in res}
    assert set(gpu_rules) == {"train", "evaluate"}
    for rule, resources in gpu_rules.items():
        assert resources["gpu"] == 1, rule
        assert "gres" not in resources and "slurm_extra" not in resources, rule
        assert {"cpus_per_gpu", "mem_mb", "runtime"} <= set(resources), rule
    # set-resources only for the GPU rules: everything else lives on default-resources.
    assert set(profile["set-resources"]) == set(gpu_rules)
    assert "set-threads" not in profile


@pytest.mark.timeout(120)
def test_gpu_rules_get_gpu_resources_in_a_dry_run(tmp_path):
    """Stub `train`/`evaluate` rules (the real ones come with the training issue) pick up gpu=1."""
    _need_snakemake()
    stub = tmp_path / "Snakefile"
    stub.write_text(
        "rule all:\n    input: 'train.done', 'evaluate.done'\n"
        "rule train:\n    output: 'train.done'\n    shell: 'touch {output}'\n"
        "rule evaluate:\n    output: 'evaluate.done'\n    shell: 'touch {output}'\n"
        "rule cpu:\n    output: 'cpu.done'\n    shell: 'touch {output}'\n"
    )
    output = _check(
        _snakemake(tmp_path, "--profile", str(PROFILE), "-n", "all", "cpu.done", snakefile=stub), "dry-run"
    )
    blocks = {
        m.group(1): m.group(2)
        for m in re.finditer(r"rule (\w+):\n(.*?)(?=\n\[|\nrule |\nJob stats)", output, re.DOTALL)
    }
    for rule in ("train", "evaluate"):
        assert re.search(r"resources:.*\bgpu=1\b", blocks[rule]), blocks[rule]
    assert "gpu=" not in blocks["cpu"], blocks["cpu"]


@pytest.mark.timeout(120)
def test_whole_dag_dry_run_with_slurm_profile(tmp_path):
    _need_snakemake()
    output = _check(
        _snakemake(tmp_path, "--profile", str(PROFILE), f"--configfile={REPO / 'config.yaml'}", "-n"),
        "dry-run of the whole DAG with profiles/slurm",
    )
    assert "profiles/slurm" in output
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", output, re.MULTILINE))
    assert int(stats.get("baseline", 0)) > 0, output[-3000:]
    for rule in ("aggregate", "tables", "figures", "report_html"):
        assert stats.get(rule) == "1", (rule, stats)
    # The profile's default resources reach the jobs.
    assert re.search(r"resources:.*\bmem_mb=2000\b.*\bruntime=30\b", output), output[-3000:]
    assert not (tmp_path / "results").exists()


@pytest.mark.timeout(480)
def test_shards_through_slurm_match_a_local_run(cluster, tmp_path):
    targets = _shard_targets()
    config = f"--configfile={_grid_config(tmp_path)}"

    local = tmp_path / "local"
    _check(_snakemake(local, config, "--cores", "2", *targets), "local run")

    remote = tmp_path / "slurm"
    output = _check(
        _snakemake(
            remote, "--profile", str(PROFILE), config, "--slurm-keep-successful-logs", *targets, timeout=300
        ),
        "run through SLURM",
    )

    # Every shard went through sbatch: one SLURM job id per shard (not per cell), its log kept.
    jobids = [slurm for _, slurm in SUBMITTED.findall(output)]
    assert len(jobids) == len(SHARDS) == len(set(jobids)) == N_CELLS // 2, output[-4000:]
    logs = {p.stem for p in (remote / ".snakemake" / "slurm_logs" / "rule_baseline").rglob("*.log")}
    assert set(jobids) <= logs, (jobids, sorted(logs))

    # ... and the scheduler ran them to completion: `scontrol show job` while SLURM still holds
    # the finished jobs (MinJobAge), else the job-completion file.
    jobcomp = None
    for jobid in jobids:
        record = _scontrol_job(jobid)
        if record is None:
            jobcomp = _jobcomp_entries() if jobcomp is None else jobcomp
            record = jobcomp.get(jobid)
        assert record is not None, f"SLURM knows nothing of job {jobid}"
        assert "JobState=COMPLETED" in record, record
        assert "schemashift_" in record, record  # the profile's job-name prefix
        assert str(remote) in record, record  # ran in the workflow's directory

    # Same cells, same numbers: SLURM changes where a shard runs, not what it computes.
    for target in targets:
        from_slurm, from_local = _stable_rows(remote / target), _stable_rows(local / target)
        assert len(from_slurm) == 2, target
        assert from_slurm == from_local, target


@pytest.mark.timeout(180)
def test_gpu_rule_is_submitted_with_gpus(cluster, tmp_path):
    """The profile's `gpu: 1` for `train` reaches sbatch as --gpus=1 (this CPU node then refuses it)."""
    stub = tmp_path / "Snakefile"
    stub.write_text("rule train:\n    output: 'train.done'\n    shell: 'touch {output}'\n")
    done = _snakemake(tmp_path, "--profile", str(PROFILE), "--verbose", "train.done", snakefile=stub)
    output = done.stdout + done.stderr
    calls = [line for line in output.splitlines() if "sbatch --parsable" in line]
    assert calls, output[-4000:]
    assert all("--gpus=1" in call and "--cpus-per-gpu=8" in call for call in calls), calls
    if done.returncode != 0:  # no GPU here: refused at submission, not queued forever
        assert "SLURM sbatch failed" in output, output[-4000:]


def _apptainer_shim(bin_dir: Path) -> Path:
    """`bin_dir/apptainer`: tests/workflow/apptainer_shim.py under the interpreter running the tests."""
    bin_dir.mkdir(parents=True)
    shim = bin_dir / "apptainer"
    script = Path(__file__).with_name("apptainer_shim.py")
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))} "$@"\n')
    shim.chmod(0o755)
    return bin_dir


@pytest.mark.container
@pytest.mark.timeout(300)
def test_shards_in_the_runtime_image_through_slurm_and_apptainer(cluster, runtime, tmp_path):
    """The containerized variant, `--profile profiles/slurm --sdm apptainer`, with the runtime
    image as `containers.apptainer_image`: each shard is a SLURM job whose command Snakemake runs
    with `apptainer exec` (here the podman shim). The rows name the runtime image and equal a host
    run's, commit included (the image has no git: the workflow passes the checkout's)."""
    targets = [target for target in _shard_targets() if "/seeds-0-1/" in target]
    local = tmp_path / "local"
    _check(_snakemake(local, f"--configfile={_grid_config(tmp_path)}", "--cores", "2", *targets), "local run")

    reference = write_reference(tmp_path / "runtime.podman-ref", runtime["id"])
    config = _grid_config(tmp_path, {"apptainer_image": str(reference)})
    remote = tmp_path / "slurm-apptainer"
    output = _check(
        _snakemake(
            remote,
            *["--profile", str(PROFILE), "--sdm", "apptainer", f"--configfile={config}"],
            *["--slurm-keep-successful-logs", *targets],
            timeout=240,
            first_on_path=_apptainer_shim(tmp_path / "bin"),
        ),
        "run through SLURM under --sdm apptainer",
    )
    jobids = [slurm for _, slurm in SUBMITTED.findall(output)]
    assert len(jobids) == len(targets) == len(set(jobids)), output[-4000:]
    logs = "".join(
        log.read_text() for log in (remote / ".snakemake" / "slurm_logs" / "rule_baseline").rglob("*.log")
    )
    assert logs.count(f"Activating singularity image {reference}") == len(targets), logs[-4000:]

    for target in targets:
        images = set(pq.read_table(remote / target).column("image").to_pylist())
        assert images == {runtime["tag"]}, (target, images)
        from_slurm, from_local = episode_rows(remote / target), episode_rows(local / target)
        assert len(from_slurm) == 2 and from_slurm == from_local, target
