"""The shell entry points (.ci/run, scripts/*.sh), run against a fake Python that logs its calls.

The fake stands in for `python3`, `.venv/bin/python` and `.venv/bin/schemashift`: it records
every invocation, creates a fake venv on `-m venv`, runs `-c` snippets with the real interpreter
and exits with $FAKE_PYTEST_STATUS for `-m pytest`. No package is installed and nothing is
downloaded.
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
SCRIPTS = [".ci/run", "scripts/bootstrap.sh", "scripts/test.sh", "scripts/main.sh", "scripts/container-up.sh"]
INSTALLS = [
    "python -m pip install --quiet --disable-pip-version-check torch==2.13.0",
    "python -m pip install --quiet --disable-pip-version-check -e .[dev,workflow,server,train]",
    "python -m pip install --quiet --disable-pip-version-check --no-deps openenv==0.10.0",
]

FAKE = r"""#!/usr/bin/env bash
printf '%s %s\n' "$(basename "$0")" "$*" >> "$FAKE_LOG"
if [[ "${1:-}" == "-m" && "${2:-}" == "venv" ]]; then
    mkdir -p "$3/bin"
    cp "$0" "$3/bin/python"
    cp "$0" "$3/bin/schemashift"
    exit 0
fi
if [[ "${1:-}" == "-m" && "${2:-}" == "pytest" && "${3:-}" != "--version" ]]; then
    exit "${FAKE_PYTEST_STATUS:-0}"
fi
if [[ "${1:-}" == "-c" ]]; then
    exec "$REAL_PYTHON" "$@"
fi
exit 0
"""


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the scripts and pyproject.toml, and an environment whose PATH has the fakes."""
    repo = tmp_path / "repo"
    for name in [*SCRIPTS, "pyproject.toml"]:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, repo / name)
    # The real cluster and container scripts need root and apt; CI runs them for real. Here they only log.
    for name in ("scripts/slurm-up.sh", "scripts/slurm-down.sh", "scripts/container-up.sh"):
        (repo / name).write_text(f'#!/usr/bin/env bash\necho "{name}" >> "$FAKE_LOG"\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "apt-get"):
        (bin_dir / name).write_text(FAKE)
        (bin_dir / name).chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHON", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", FAKE_LOG=str(tmp_path / "log"), REAL_PYTHON=sys.executable
    )
    return repo, env


def _run(
    repo: Path, env: dict[str, str], script: str, *args: str, status: int = 0
) -> subprocess.CompletedProcess:
    env = {**env, "FAKE_PYTEST_STATUS": str(status)}
    # Run from elsewhere: the scripts must find the repository themselves.
    return subprocess.run(
        ["bash", str(repo / script), *args],
        cwd=repo.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _log(env: dict[str, str]) -> list[str]:
    path = Path(env["FAKE_LOG"])
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_are_strict_executable_bash(script: str) -> None:
    path = REPO / script
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert os.access(path, os.X_OK)
    subprocess.run(["bash", "-n", str(path)], check=True)


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_name_no_machine_paths_or_hosts(script: str) -> None:
    text = (REPO / script).read_text()
    assert not re.search(r"(?<![\w.])/(home|tmp|work|root|opt|Users|mnt)/", text)
    assert not re.search(r"https?://|index-url|trusted-host", text)


def test_bootstrap_creates_the_venv_and_installs_only_when_needed(
    sandbox: tuple[Path, dict[str, str]],
) -> None:
    repo, env = sandbox
    assert _run(repo, env, "scripts/bootstrap.sh").returncode == 0
    installs = [line for line in _log(env) if "-m pip install" in line]
    assert _log(env)[0] == "python3 -m venv .venv"
    assert installs == INSTALLS

    assert _run(repo, env, "scripts/bootstrap.sh").returncode == 0
    assert len([line for line in _log(env) if "-m pip install" in line]) == len(INSTALLS), (
        "nothing changed: no reinstall"
    )
    assert sum("-m venv" in line for line in _log(env)) == 1

    (repo / "pyproject.toml").write_text((repo / "pyproject.toml").read_text() + "\n# changed\n")
    assert _run(repo, env, "scripts/bootstrap.sh").returncode == 0
    assert len([line for line in _log(env) if "-m pip install" in line]) == 2 * len(INSTALLS)


@pytest.mark.parametrize(("pytest_status", "expected"), [(0, 0), (1, 1), (2, 2), (5, 1)])
def test_test_sh_returns_pytest_status_and_fails_on_no_tests(
    sandbox: tuple[Path, dict[str, str]], pytest_status: int, expected: int
) -> None:
    repo, env = sandbox
    result = _run(repo, env, "scripts/test.sh", "-k", "records", status=pytest_status)
    assert result.returncode == expected
    assert "python -m pytest -q --durations=15 -k records" in _log(env)
    assert ("no tests" in result.stderr) == (pytest_status == 5)


@pytest.mark.parametrize(("pytest_status", "failed"), [(0, False), (1, True), (5, True)])
def test_ci_run_builds_the_venv_and_fails_when_tests_fail(
    sandbox: tuple[Path, dict[str, str]], pytest_status: int, failed: bool
) -> None:
    repo, env = sandbox
    result = _run(repo, env, ".ci/run", status=pytest_status)
    assert (result.returncode != 0) == failed, result.stderr
    log = _log(env)
    assert log.index("python3 -m venv .venv") < log.index("python -m pip install --upgrade pip")
    positions = [log.index(install) for install in INSTALLS]
    assert log.index("python -m pip install --upgrade pip") < positions[0]
    assert positions == sorted(positions), "torch first, then the extras, then openenv"
    assert log.index("scripts/slurm-up.sh") < log.index("python -m pytest -q --durations=15")
    assert log.index("scripts/container-up.sh") < log.index("python -m pytest -q --durations=15")
    assert log[-1] == "scripts/slurm-down.sh", "the cluster is stopped however the tests end"
    assert "apt-get" not in " ".join(log), "the fake interpreter has ensurepip"


def _fake_snakemake(repo: Path, status: int) -> None:
    fake = repo / ".venv/bin/snakemake"
    fake.write_text(f'#!/usr/bin/env bash\necho "snakemake $*" >> "$FAKE_LOG"\nexit {status}\n')
    fake.chmod(0o755)


def test_main_sh_runs_the_workflow_on_its_embedded_default(sandbox: tuple[Path, dict[str, str]]) -> None:
    repo, env = sandbox
    assert _run(repo, env, "scripts/bootstrap.sh").returncode == 0
    _fake_snakemake(repo, 0)
    assert _run(repo, env, "scripts/main.sh", "-n").returncode == 0
    assert [line for line in _log(env) if line.startswith("snakemake")] == ["snakemake --cores all -n"]
    log = _log(env)
    # the engine and images where the machine allows, then one line on where the jobs run
    where = log.index("python -m schemashift.workflow.containers config.yaml")
    assert log.index("scripts/container-up.sh") < where < log.index("snakemake --cores all -n")


def test_main_sh_returns_the_workflow_status(sandbox: tuple[Path, dict[str, str]]) -> None:
    repo, env = sandbox
    assert _run(repo, env, "scripts/bootstrap.sh").returncode == 0
    _fake_snakemake(repo, 3)
    assert _run(repo, env, "scripts/main.sh").returncode == 3
