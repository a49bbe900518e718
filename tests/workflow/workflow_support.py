"""Helpers of the workflow tests: a temporary copy of the repository, and the real `snakemake`
run in it as a subprocess (conftest.py makes one copy per test session).

The copy holds what a fresh checkout would (tracked files plus untracked ones git does not
ignore), so the workflow under test is the working tree's and nothing under results/ leaks in.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The environment running the tests is the one the jobs run in: its bin goes first on PATH.
BIN = Path(sys.executable).parent
TEST_CONFIG = "tests/workflow/config.yaml"
CORES = "2"
IGNORED = (
    ".git",
    ".venv",
    "results",
    ".snakemake",
    "__pycache__",
    "*.pyc",
    "*.egg-info",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "build",
    "dist",
)


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    # The jobs must find the package through the copy (common.smk's CLI), not through these.
    # API key variables of the shipped model baselines would enable their jobs: a test sets them itself.
    for name in (
        "PYTHONPATH",
        "SCHEMASHIFT_GIT_SHA",
        "SNAKEMAKE_PROFILE",
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "OLLAMA_API_KEY",
        "OLLAMA_BASE_URL",
    ):
        env.pop(name, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # `containers.engine: auto` (the embedded default) decides as if no engine answered, so that
    # job counts do not depend on the machine; tests of the images name their engine.
    env["SCHEMASHIFT_CONTAINER_ENGINE"] = "host:the workflow tests run auto's jobs on the host"
    env.update(extra or {})
    return env


def tool(name: str) -> str | None:
    return shutil.which(name, path=subprocess_env()["PATH"])


def _listed_files(repo: Path) -> list[str] | None:
    """Tracked and untracked-but-not-ignored files, or None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted({name for name in out.decode().split("\0") if name})


def copy_repo(dest: Path, repo: Path = REPO) -> Path:
    """A copy of the repository's source tree at `dest` (results, caches and venvs left out)."""
    files = _listed_files(repo)
    if files is None:
        shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(*IGNORED), symlinks=True)
    else:
        dest.mkdir(parents=True)
        for name in files:
            source = repo / name
            # A file deleted in the working tree, or a temporary file gone since the listing.
            if not source.is_file() or source.name.endswith(".tmp"):
                continue
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for leftover in ("results/.snakemake", ".snakemake"):
        shutil.rmtree(dest / leftover, ignore_errors=True)
    return dest


def snakemake(
    copy: Path,
    *args: str,
    configfile: str | os.PathLike[str] | None = TEST_CONFIG,
    check: bool = True,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`snakemake --cores 2 [--configfile ...] ARGS` in `copy`, with `env` added to the environment;
    stdout and stderr together in .stdout."""
    exe = tool("snakemake")
    if exe is None:
        pytest.skip("snakemake is not installed (pip install -e '.[workflow]')")
    cmd = [exe, "--cores", CORES]
    if configfile is not None:
        cmd.append(f"--configfile={configfile}")
    cmd += list(args)
    proc = subprocess.run(
        cmd,
        cwd=copy,
        env=subprocess_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd[1:])} failed with status {proc.returncode}:\n{proc.stdout[-6000:]}"
            f"{failed_logs(copy)}"
        )
    return proc


def failed_logs(copy: Path, limit: int = 3000) -> str:
    """The tails of the job logs under results/logs, for failure messages."""
    logs = sorted((copy / "results" / "logs").rglob("*.log")) if (copy / "results" / "logs").is_dir() else []
    parts = []
    for log in logs:
        text = log.read_text(errors="replace")
        if "Error" in text or "error" in text:
            parts.append(f"\n--- {log.relative_to(copy)} ---\n{text[-limit:]}")
    return "".join(parts)


NOTHING_TO_DO = "Nothing to be done"
_STAT_ROW = re.compile(r"^(\S+)\s+(\d+)$")
_RULE_HEADER = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
_OUTPUT_LINE = re.compile(r"^\s+output: (.*)$")


def job_counts(output: str) -> dict[str, int]:
    """Rule -> number of jobs from a (dry-)run's "Job stats" table; {} when nothing is to be done."""
    if NOTHING_TO_DO in output and "Job stats:" not in output:
        return {}
    lines = output.splitlines()
    try:
        start = lines.index("Job stats:")
    except ValueError:
        raise AssertionError(f"no 'Job stats:' table in snakemake's output:\n{output[-4000:]}") from None
    counts: dict[str, int] = {}
    for line in lines[start + 1 :]:
        match = _STAT_ROW.match(line.strip())
        if line.strip().startswith(("job", "---")):
            continue
        if match is None:
            break
        if match[1] == "total":
            break
        counts[match[1]] = int(match[2])
    return counts


def planned_outputs(output: str) -> list[tuple[str, list[str]]]:
    """(rule, outputs) of every job block a dry-run prints, in the order printed."""
    jobs: list[tuple[str, list[str]]] = []
    current = None
    for line in output.splitlines():
        header = _RULE_HEADER.match(line.strip())
        if header:
            current = header[1]
            jobs.append((current, []))
            continue
        out = _OUTPUT_LINE.match(line)
        if out and current is not None:
            jobs[-1] = (current, [part.strip() for part in out[1].split(",")])
            current = None
    return jobs


#: columns that differ between two runs of one cell by design, and the image, compared apart
VOLATILE = {"sweep_id", "wall_s", "image"}


def episode_rows(path: Path) -> list[dict]:
    """The rows of an episodes (or drifts) table less VOLATILE, in cell order: what a run in an
    image must reproduce from a host run."""
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    return sorted(
        ({k: v for k, v in row.items() if k not in VOLATILE} for row in rows),
        key=lambda row: (row["policy"], row["scenario"], row["seed"]),
    )
