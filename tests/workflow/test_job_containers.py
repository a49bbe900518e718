"""The workflow's jobs in the project's images (workflow/rules/images.smk and container.smk, job_shell.py).

Needs podman, root and debootstrap (the `debootstrap_base` fixture: the base is built here
without a registry) and the runtime image's wheelhouse; `.ci/run` prepares them
(scripts/container-up.sh), and the images are reused, not rebuilt, when they are there. Skipped
where something is missing, unless SCHEMASHIFT_REQUIRE_CONTAINER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from workflow_support import REPO, copy_repo, episode_rows, snakemake, subprocess_env, tool

pytestmark = [pytest.mark.container, pytest.mark.slow]

BUILD = REPO / "workflow" / "scripts" / "build_image.py"
sys.path.insert(0, str(REPO / "workflow" / "scripts"))
from job_shell import JOB_LABEL  # noqa: E402

#: seconds within which a stopped Snakemake's container must be gone
PROMPT_S = 10.0


def running_jobs() -> list[str]:
    listed = subprocess.run(
        ["podman", "ps", "--filter", f"label={JOB_LABEL}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def workflow_copy(tmp_path: Path, engine: str) -> Path:
    """A copy of the repository whose test config runs its jobs under `engine`; the copy shares
    the checkout's runtime wheelhouse (the digest, and so the image, is the same)."""
    copy = copy_repo(tmp_path / f"repo-{engine}")
    (copy / "containers" / "wheels").mkdir(parents=True)
    (copy / "containers" / "wheels" / "runtime").symlink_to(REPO / "containers" / "wheels" / "runtime")
    config = yaml.safe_load((copy / "tests" / "workflow" / "config.yaml").read_text())
    config["containers"].update(engine=engine, base_image="debootstrap")
    (copy / "tests" / "workflow" / "config.yaml").write_text(yaml.safe_dump(config))
    return copy


def test_records_made_in_the_image_equal_the_hosts_and_name_the_image(runtime, tmp_path: Path) -> None:
    targets = ("results/episodes.parquet", "results/drifts.parquet")
    host = workflow_copy(tmp_path, "none")
    snakemake(host, *targets, timeout=900)
    boxed = workflow_copy(tmp_path, "podman")
    run = snakemake(boxed, *targets, timeout=1800)
    assert "runtime_image" in run.stdout and "shell_exec=" in run.stdout, run.stdout[-3000:]
    built = json.loads((boxed / "results" / "containers" / "runtime.image.json").read_text())
    assert built["id"] == runtime["id"], "the rule built another image than build_image.py did"

    host_rows = episode_rows(host / "results" / "episodes.parquet")
    boxed_rows = episode_rows(boxed / "results" / "episodes.parquet")
    assert len(host_rows) == 8 and boxed_rows == host_rows
    drift_host = episode_rows(host / "results" / "drifts.parquet")
    assert episode_rows(boxed / "results" / "drifts.parquet") == drift_host
    assert set(pq.read_table(host / "results" / "episodes.parquet").column("image").to_pylist()) == {"host"}
    images = set(pq.read_table(boxed / "results" / "episodes.parquet").column("image").to_pylist())
    assert images == {runtime["tag"]} and runtime["tag"].startswith("localhost/schemashift-runtime:")


# A workflow of one long job through the job shell, as images.smk sets it up.
SLEEPER = """
rule sleeper:
    output: "slept"
    resources: shell_exec={shell!r}
    shell: "sleep 300 && touch {{output}}"
"""


def start_sleeper(tmp_path: Path, runtime: dict) -> subprocess.Popen:
    (tmp_path / "Snakefile").write_text(SLEEPER.format(shell=runtime["job_shell"]))
    process = subprocess.Popen(
        [tool("snakemake"), "--cores", "1", "--snakefile", str(tmp_path / "Snakefile")],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Its own process group, as a terminal's foreground job, with SIGINT handled (a test runner
        # started in the background has it ignored, and its children inherit that).
        process_group=0,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not running_jobs():
        assert process.poll() is None, process.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "the job's container did not start within 60 s"
        time.sleep(0.2)
    return process


def seconds_until_no_job_runs(limit: float = 60) -> float:
    started = time.monotonic()
    while running_jobs():
        left = running_jobs()
        assert time.monotonic() - started < limit, f"job containers still run after {limit} s: {left}"
        time.sleep(0.1)
    return time.monotonic() - started


def test_ctrl_c_stops_the_job_container_promptly(runtime, tmp_path: Path) -> None:
    """Ctrl-C at a terminal sends SIGINT to the foreground process group: Snakemake and its job
    shells (Snakemake itself then waits for its local jobs to end, on the host as here)."""
    assert not running_jobs(), "job containers are left over from before"
    process = start_sleeper(tmp_path, runtime)
    os.killpg(process.pid, signal.SIGINT)
    waited = seconds_until_no_job_runs()
    output, _ = process.communicate(timeout=60)
    print(f"job container gone {waited:.2f} s after Ctrl-C")
    assert waited < PROMPT_S, f"the container ran {waited:.1f} s after SIGINT"
    assert process.returncode != 0 and not (tmp_path / "slept").exists(), output[-2000:]


def test_a_killed_snakemake_leaves_no_container_running(runtime, tmp_path: Path) -> None:
    assert not running_jobs(), "job containers are left over from before"
    process = start_sleeper(tmp_path, runtime)
    process.kill()
    process.wait(timeout=30)
    waited = seconds_until_no_job_runs()
    print(f"job container gone {waited:.2f} s after Snakemake was killed")
    assert waited < PROMPT_S, f"the container ran {waited:.1f} s after Snakemake was killed"


def test_a_foreign_image_under_our_tag_is_detected_and_does_not_run(runtime, tmp_path: Path) -> None:
    foreign = "localhost/schemashift-test-foreign:latest"
    tag = runtime["tag"]
    subprocess.run(["podman", "tag", runtime["base_image"], foreign], check=True)
    subprocess.run(["podman", "tag", foreign, tag], check=True)
    try:
        # The job shell runs the recorded id: the job still gets our image.
        job = subprocess.run(
            [runtime["job_shell"], "-c", 'echo "$SCHEMASHIFT_IMAGE"; python -c "import torch"'],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert job.returncode == 0 and job.stdout.split()[0] == tag, job.stdout + job.stderr
        # The image rule's build notices the stranger and puts the tag back on ours.
        out = tmp_path / "runtime.json"
        build = [
            *[sys.executable, str(BUILD), "--engine", "podman", "--image", "runtime"],
            *["--dockerfile", str(REPO / "containers" / "runtime.Dockerfile")],
            *["--base-image", runtime["base_image"], "--out", str(out)],
        ]
        result = subprocess.run(build, capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert "names another image" in result.stdout and "not ours" in result.stdout
        assert json.loads(out.read_text())["id"] == runtime["id"]
    finally:
        subprocess.run(["podman", "tag", runtime["id"], tag], check=True)
        subprocess.run(["podman", "untag", runtime["base_image"], foreign], capture_output=True)
    inspected = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True, check=True
    )
    assert inspected.stdout.strip() == runtime["id"]
