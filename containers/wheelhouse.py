"""What each image installs, and its wheelhouse: containers/wheels/<image>/, for builds without a registry.

The one list of the images' Python contents. An image installs from its wheelhouse only
(`pip install --no-index`), so its build needs no network and installs exactly what is listed
here, the way scripts/bootstrap.sh installs the host's environment:

- `server` (env.Dockerfile): the `server` extra, resolved with its dependencies;
- `runtime` (runtime.Dockerfile, every CPU job of the workflow): torch's CPU build first, pinned,
  then the package's own dependencies and the `workflow`, `train` and `server` extras under a
  constraint that holds torch at its pin, less what runs only on the host (HOST_ONLY: Snakemake
  schedules the jobs, it never runs inside one).

Both add openenv without its declared dependencies (they include gradio, which nothing here
uses). Run on the host, where `pip download` reaches the package index; a second run with the
same requirements does nothing. Importable: workflow/scripts/build_image.py reads `requirements`.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEELS = REPO / "containers" / "wheels"
#: installed with --no-deps: its declared dependencies include gradio, which the images never use
OPENENV = "openenv==0.10.0"
#: installed before everything else and held by a constraint, as scripts/bootstrap.sh does: an
#: unpinned request could pull a multi-GB CUDA build where the CPU one fits
TORCH = "torch==2.13.0"
#: extras of pyproject.toml each image installs (with the package's own dependencies)
EXTRAS = {"server": ("server",), "runtime": ("workflow", "train", "server")}
#: what runs on the host and never inside a job: Snakemake, its plugins and its formatter
HOST_ONLY = ("snakemake", "snakefmt", "snakemake-executor-plugin-slurm")
#: an image's requirement files, in the order its Dockerfile installs them
FILES = ("requirements-first.txt", "requirements.txt", "requirements-nodeps.txt")


def requirements(image: str) -> dict[str, str]:
    """File name -> text of the requirement files of `image` (see FILES)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    if image not in EXTRAS:
        raise SystemExit(f"wheelhouse: unknown image {image!r}; known: {', '.join(EXTRAS)}")
    wanted = [] if image == "server" else list(project["dependencies"])
    for extra in EXTRAS[image]:
        wanted += [line for line in extras[extra] if line not in wanted and _name(line) not in HOST_ONLY]
    first = [TORCH] if any(_name(line) == "torch" for line in wanted) else []
    return {
        "requirements-first.txt": "".join(f"{line}\n" for line in first),
        "requirements.txt": "".join(f"{line}\n" for line in wanted if line not in first),
        "requirements-nodeps.txt": f"{OPENENV}\n",
    }


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def fill(image: str, python: str = sys.executable) -> Path:
    """Download the wheels of `image` into containers/wheels/<image>/ unless they are there."""
    dest = WHEELS / image
    dest.mkdir(parents=True, exist_ok=True)
    files = requirements(image)
    stamp = hashlib.sha256("".join(f"{name}\n{text}" for name, text in files.items()).encode()).hexdigest()
    stamp_file = dest / ".stamp"
    if stamp_file.exists() and stamp_file.read_text().strip() == stamp:
        print(f"wheelhouse {dest} is up to date")
        return dest
    for name, text in files.items():
        (dest / name).write_text(text)
    # The pins of the first file hold during the others (an empty file constrains nothing).
    (dest / "constraints.txt").write_text(files["requirements-first.txt"])
    # Wheels for the image's Python (3.11 on both supported bases), whatever Python runs pip.
    pip = [
        *[python, "-m", "pip", "download", "--disable-pip-version-check"],
        *["--only-binary=:all:", "--python-version", "3.11", "-d", str(dest)],
    ]
    if files["requirements-first.txt"]:
        subprocess.run([*pip, "-r", str(dest / "requirements-first.txt")], check=True)
    constrained = ["-c", str(dest / "constraints.txt"), "-r", str(dest / "requirements.txt")]
    subprocess.run([*pip, *constrained], check=True)
    subprocess.run([*pip, "--no-deps", "-r", str(dest / "requirements-nodeps.txt")], check=True)
    stamp_file.write_text(stamp + "\n")
    print(f"wheelhouse {dest}: {len(list(dest.glob('*.whl')))} wheels")
    return dest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--image", action="append", choices=sorted(EXTRAS), help="default: every image")
    parser.add_argument("--python", default=sys.executable, help="the Python whose pip downloads")
    args = parser.parse_args()
    for image in args.image or sorted(EXTRAS):
        fill(image, args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
