"""Where the workflow's jobs run: in the project's images under podman or docker, or on the host.

`job_engine` is the one decision, read by the workflow (container.smk) and by the set-up
(scripts/main.sh prints its reason when the jobs run on the host). `containers.engine` names
podman or docker (used, and an error if it cannot build or run), `none` (the host), or `auto`:
the first of podman and docker that answers `<engine> images`, provided that the base image can be
had: the debootstrap base needs root and debootstrap; a named base image is the engine's to pull.
The verdict of `auto` is kept in SCHEMASHIFT_CONTAINER_ENGINE for the processes Snakemake starts
(a cluster job parses the workflow again), so the probe runs once per invocation: about 0.1 s
(`<engine> info` took 0.4 s idle and up to 1.8 s on a loaded machine).

`python -m schemashift.workflow.containers [CONFIG]` prints the verdict in one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

ENGINES = ("podman", "docker")
#: containers.base_image value: a Debian base built here with debootstrap (no registry needed)
DEBOOTSTRAP = "debootstrap"
VERDICT_ENV = "SCHEMASHIFT_CONTAINER_ENGINE"
HOST = "host"


def _probe(settings: Mapping[str, Any]) -> tuple[str | None, str]:
    if settings["base_image"] == DEBOOTSTRAP:
        if shutil.which("debootstrap") is None:
            return None, "debootstrap, which builds the base image here, is not installed"
        if os.geteuid() != 0:
            return None, "the debootstrap base image needs root"
    found = [engine for engine in ENGINES if shutil.which(engine)]
    if not found:
        return None, "neither podman nor docker is installed"
    failures = []
    for engine in found:
        try:
            proc = subprocess.run([engine, "images", "--quiet"], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            failures.append(f"`{engine} images` did not answer in 30 s")
            continue
        if proc.returncode == 0:
            return engine, f"{engine} answers"
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        failures.append(f"`{engine} images` failed ({last[:120]})")
    return None, "; ".join(failures)


def job_engine(settings: Mapping[str, Any], environ: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(engine, why): the engine the jobs run under, None for the host, and the reason in words.

    `settings` is the config's `containers` section; `environ` (default os.environ) keeps the
    verdict of `auto` for child processes.
    """
    environ = os.environ if environ is None else environ
    wanted = settings["engine"]
    if wanted == "none":
        return None, "containers.engine is none"
    if wanted != "auto":
        return wanted, f"containers.engine is {wanted}"
    kept = environ.get(VERDICT_ENV)
    if kept:
        engine, _, why = kept.partition(":")
        return (None if engine == HOST else engine), why
    engine, why = _probe(settings)
    environ[VERDICT_ENV] = f"{engine or HOST}:{why}"
    return engine, why


def describe(settings: Mapping[str, Any]) -> str:
    """One line: where the jobs run, and why."""
    engine, why = job_engine(settings)
    if engine is None:
        return f"containers: the workflow's jobs run on the host: {why}"
    return f"containers: the workflow's jobs run in the project's images under {engine} ({why})"


def main(argv: list[str]) -> int:
    from pathlib import Path

    import yaml

    path = argv[1] if len(argv) > 1 else "config.yaml"
    config = yaml.safe_load(Path(path).read_text()) or {}
    schema = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
    defaults = yaml.safe_load(schema.read_text())["properties"]["containers"]["default"]
    print(describe({**defaults, **(config.get("containers") or {})}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
