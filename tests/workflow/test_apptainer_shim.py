"""The test-only apptainer shim (apptainer_shim.py) takes exactly the calls Snakemake composes and
refuses the rest: the SLURM apptainer test (test_slurm.py) is only as good as this match."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from apptainer_shim import VERSION, Refused, exec_command, write_reference

IMAGE_ID = "ab" * 32
#: the variables the image of IMAGE_ID stands for sets, as the runtime image does
IMAGE_SETS = {"PATH", "VIRTUAL_ENV", "SCHEMASHIFT_IMAGE"}
SHIM = Path(__file__).with_name("apptainer_shim.py")


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    return write_reference(tmp_path / "runtime.podman-ref", IMAGE_ID)


def snakemake_call(reference: Path, bind: list[Path], args: str = "") -> list[str]:
    """The argv after `apptainer` of the command line Snakemake runs a job's shell command with."""
    singularity = pytest.importorskip("snakemake.deployment.singularity")
    line = singularity.shellcmd(
        str(reference), "echo 'it works'", bind=bind, args=args, quiet=True, shell_executable="/bin/bash"
    )
    argv = shlex.split(line)
    assert argv[0] in ("apptainer", "singularity"), line
    return argv[1:]


@pytest.mark.timeout(30)
def test_snakemake_accepts_the_version(tmp_path: Path) -> None:
    singularity = pytest.importorskip("snakemake.deployment.singularity")
    from packaging.version import Version

    assert VERSION.startswith("apptainer")
    assert singularity.Singularity().parseversion(VERSION) >= Version("1.0.0")
    done = subprocess.run(
        [sys.executable, str(SHIM), "--version"], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0 and done.stdout.strip() == VERSION


@pytest.mark.timeout(30)
def test_snakemakes_exec_becomes_podman_run(tmp_path: Path, reference: Path, monkeypatch) -> None:
    checkout, workdir = tmp_path / "checkout", tmp_path / "work"
    checkout.mkdir()
    workdir.mkdir()
    monkeypatch.chdir(workdir)  # Snakemake's --home
    argv = snakemake_call(reference, bind=[checkout], args=f" --bind {tmp_path}/data:/data:ro")
    environ = {
        **{"PATH": "/host/bin", "HOME": "/root", "LD_LIBRARY_PATH": "/host/lib", "PYTHONPATH": str(checkout)},
        **{"VIRTUAL_ENV": "/host/venv", "SCHEMASHIFT_IMAGE": "host", "APPTAINERENV_FOO": "bar"},
    }
    command = exec_command(argv, environ, str(workdir), image_sets=lambda image_id: IMAGE_SETS)
    assert command[:3] == ["podman", "run", "--rm"]
    assert command[-5:] == ["--entrypoint", "bash", IMAGE_ID, "-c", "echo 'it works'"]
    mounts = [command[i + 1] for i, arg in enumerate(command) if arg == "-v"]
    # --home is Snakemake's working directory here, mounted once; the binds as given
    assert mounts == [f"{workdir}:{workdir}", f"{tmp_path}/data:/data:ro", f"{checkout}:{checkout}"]
    assert command[command.index("-w") + 1] == str(workdir)
    passed = [command[i + 1] for i, arg in enumerate(command) if arg == "-e"]
    # the host's variables, except those the image sets (its own win, as under apptainer)
    assert set(passed) == {f"HOME={workdir}", "PYTHONPATH", "FOO=bar"}


@pytest.mark.timeout(30)
def test_the_checkout_bound_through_the_environment(tmp_path: Path, reference: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = snakemake_call(reference, bind=[])
    environ = {"APPTAINER_BIND": "/repo,/data:/in"}
    command = exec_command(argv, environ, str(tmp_path), image_sets=lambda image_id: IMAGE_SETS)
    mounts = [command[i + 1] for i, arg in enumerate(command) if arg == "-v"]
    assert mounts == [f"{tmp_path}:{tmp_path}", "/repo:/repo", "/data:/in"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("argv", "environ", "said"),
    [
        (["pull", "--name", "x.simg", "docker://python"], {}, "only `--version` and `exec`"),
        (["build", "x.sif", "oci-archive:///x.tar"], {}, "only `--version` and `exec`"),
        (["exec", "--nv", "REF", "bash"], {}, "'--nv' is not implemented"),
        (["exec", "--bind", "relative:/x", "REF", "bash"], {}, "only absolute"),
        (["exec", "REF", "bash"], {"APPTAINER_CACHEDIR": "/x"}, "APPTAINER_CACHEDIR is not implemented"),
    ],
)
def test_anything_else_is_refused(tmp_path: Path, reference: Path, argv, environ, said) -> None:
    argv = [str(reference) if arg == "REF" else arg for arg in argv]
    with pytest.raises(Refused, match=said):
        exec_command(argv, environ, str(tmp_path))


@pytest.mark.timeout(30)
def test_a_real_sif_is_refused_loudly(tmp_path: Path) -> None:
    sif = tmp_path / "runtime.sif"
    sif.write_bytes(b"#!/usr/bin/env run-singularity\n" + bytes(range(256)))
    done = subprocess.run(
        [sys.executable, str(SHIM), "exec", "--home", str(tmp_path), str(sif), "bash", "-c", "true"],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=tmp_path,
    )
    assert done.returncode == 255
    assert "refused" in done.stderr and "a real SIF file needs real apptainer" in done.stderr
    with pytest.raises(ValueError, match="not a full podman image id"):
        write_reference(tmp_path / "ref", "localhost/schemashift-runtime:latest")
