"""A test-only `apptainer` for machines without one: the calls Snakemake's `--sdm apptainer` makes,
run under podman.

Why: the workflow's cluster route is `--sdm apptainer` with a SIF file built from the project's
image (containers/README.md), but this machine (Debian 12) has no apptainer package and it is not
built from source here. So the SLURM test puts an executable named `apptainer` that runs this file
first on PATH, and the workflow's jobs run through Snakemake's own apptainer code path, with each
`apptainer exec` carried out by podman. Real apptainer is not exercised.

What it does, and nothing else (anything else is refused with exit status 255 and a message):
- `apptainer --version`: reports 1.0.0 (the least Snakemake accepts), marked as this shim.
- `[--quiet] [--silent] exec [--home DIR] [--bind SRC[:DST[:OPTS]]]... [--pwd DIR] IMAGE PROG ARGS...`,
  the command line of snakemake/deployment/singularity.py's `shellcmd`, as apptainer runs it:
  the caller's user, the host's network, the host's environment except PATH, LD_LIBRARY_PATH,
  HOME (DIR) and the variables the image sets (a host value never overrides the image's),
  `SINGULARITYENV_X`/`APPTAINERENV_X` as X (these do override), the binds of `--bind` and of
  `APPTAINER_BIND`/`SINGULARITY_BIND`, DIR and the working directory mounted at their own paths,
  the working directory (or `--pwd`) as the current directory. It binds nothing else: apptainer
  also binds /tmp and /var/tmp by default (podman gives the container its own), so a workflow
  that passes here relies on no default bind that a cluster may have switched off.
- IMAGE is not a SIF file: it is a reference file (`write_reference`) naming a podman image by
  id, which a real SIF never parses as. A real SIF, or any other file, is refused.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

#: the `format` of a reference file; nothing else is taken for an image
REFERENCE_FORMAT = "schemashift-apptainer-shim/1"
VERSION = "apptainer version 1.0.0+podman.shim"
ENGINE = "podman"
ENV_PREFIXES = ("APPTAINERENV_", "SINGULARITYENV_")
BIND_VARIABLES = ("APPTAINER_BIND", "SINGULARITY_BIND")
#: the apptainer variables the shim carries out; any other APPTAINER_/SINGULARITY_ one is refused
HANDLED = frozenset(BIND_VARIABLES)
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Refused(Exception):
    """A call outside the subset this shim implements."""


def write_reference(path: Path, image_id: str) -> Path:
    """Write the file the workflow's config names as its "SIF file": the podman image to run."""
    if not re.fullmatch(r"(sha256:)?[0-9a-f]{64}", image_id):
        raise ValueError(f"not a full podman image id: {image_id!r}")
    path.write_text(json.dumps({"format": REFERENCE_FORMAT, "podman_image_id": image_id}) + "\n")
    return path


def read_reference(path: str) -> str:
    try:
        reference = json.loads(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise Refused(
            f"{path} is not an image reference of this shim ({exc.__class__.__name__}); a real SIF file "
            "needs real apptainer"
        ) from None
    if not isinstance(reference, dict) or reference.get("format") != REFERENCE_FORMAT:
        raise Refused(f"{path} is not an image reference of this shim (format {REFERENCE_FORMAT})")
    return reference["podman_image_id"]


def bind_mount(spec: str) -> list[str]:
    """`SRC[:DST[:OPTS]]` (apptainer) -> podman's `-v SRC:DST[:OPTS]`; only ro and rw options."""
    parts = spec.split(":")
    if not parts[0].startswith("/") or len(parts) > 3:
        raise Refused(f"bind {spec!r}: only absolute SRC[:DST[:ro|rw]] binds are implemented")
    source = parts[0]
    target = parts[1] if len(parts) > 1 else source
    options = parts[2] if len(parts) > 2 else ""
    if options not in ("", "ro", "rw") or not target.startswith("/"):
        raise Refused(f"bind {spec!r}: only absolute SRC[:DST[:ro|rw]] binds are implemented")
    return ["-v", ":".join([source, target, *([options] if options else [])])]


def image_variables(image_id: str) -> set[str]:
    """The names of the variables the image sets (its ENV)."""
    inspected = subprocess.run(
        [ENGINE, "image", "inspect", "--format", "{{json .Config.Env}}", image_id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if inspected.returncode != 0:
        raise Refused(f"{ENGINE} has no image {image_id}: {inspected.stderr.strip()}")
    return {entry.partition("=")[0] for entry in json.loads(inspected.stdout) or []}


def container_environment(environ: dict[str, str], home: str, image_sets: set[str]) -> dict[str, str]:
    """What apptainer passes of the host's environment: the variables the image does not set, less
    PATH, LD_LIBRARY_PATH and HOME; then `<PREFIX>X` as X, over anything."""
    passed = {
        name: value
        for name, value in environ.items()
        if VARIABLE_NAME.fullmatch(name)
        and name not in ("PATH", "LD_LIBRARY_PATH", "HOME", *HANDLED, *image_sets)
        and not name.startswith(ENV_PREFIXES)
    }
    for name, value in environ.items():
        for prefix in ENV_PREFIXES:
            if name.startswith(prefix) and VARIABLE_NAME.fullmatch(name[len(prefix) :]):
                passed[name[len(prefix) :]] = value
    passed["HOME"] = home
    return passed


def exec_command(argv: list[str], environ: dict[str, str], cwd: str, image_sets=image_variables) -> list[str]:
    """The podman command line of `apptainer [--quiet] [--silent] exec ...`; `image_sets` names
    the variables an image sets."""
    args = list(argv)
    while args and args[0] in ("--quiet", "--silent"):
        args.pop(0)
    if not args or args[0] != "exec":
        raise Refused(f"only `--version` and `exec` are implemented, not {' '.join(argv[:2]) or '(nothing)'}")
    args.pop(0)
    for name in environ:
        if name.startswith(("APPTAINER_", "SINGULARITY_")) and name not in HANDLED:
            raise Refused(f"environment variable {name} is not implemented by this shim")
    home, workdir, mounts = cwd, cwd, []
    for variable in BIND_VARIABLES:
        for spec in filter(None, environ.get(variable, "").split(",")):
            mounts += bind_mount(spec)
    while args and args[0].startswith("-"):
        option = args.pop(0)
        if option not in ("--home", "--bind", "--pwd") or not args:
            raise Refused(f"exec option {option!r} is not implemented (only --home, --bind, --pwd)")
        value = args.pop(0)
        if option == "--home":
            home = value
        elif option == "--pwd":
            workdir = value
        else:
            for spec in filter(None, value.split(",")):
                mounts += bind_mount(spec)
    if len(args) < 2:
        raise Refused("exec needs an image and a program")
    image_id, program, program_args = read_reference(args[0]), args[1], args[2:]
    for path in (home, cwd):
        if not path.startswith("/"):
            raise Refused(f"{path!r}: only absolute paths are implemented")
    own = []
    for path in dict.fromkeys([home, cwd]):
        own += ["-v", f"{path}:{path}"]
    passed = container_environment(environ, home, image_sets(image_id))
    command = [
        *[ENGINE, "run", "--rm", "--pull", "never", "--no-healthcheck", "--init", "--network", "host"],
        *["--user", f"{os.getuid()}:{os.getgid()}", "--label", "schemashift.apptainer-shim=1"],
        *own,
        *mounts,
        *["-w", workdir],
        # a value podman takes from its own environment by name, unless it differs from it
        *[
            arg
            for name, value in sorted(passed.items())
            for arg in ("-e", name if environ.get(name) == value else f"{name}={value}")
        ],
        *["--entrypoint", program, image_id, *program_args],
    ]
    return command


def main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(VERSION)
        return 0
    try:
        command = exec_command(argv, dict(os.environ), os.getcwd())
    except Refused as refused:
        print(f"apptainer (schemashift test shim over podman): refused: {refused}", file=sys.stderr)
        return 255
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
