"""What each image installs, and its wheelhouse: containers/wheels/<image>/, for builds without a registry.

The one list of the images' Python contents. An image installs from its wheelhouse only
(`pip install --no-index`), so its build needs no network and installs exactly what is listed
here, the way scripts/bootstrap.sh installs the host's environment:

- `server` (env.Dockerfile): the `server` extra, resolved with its dependencies;
- `runtime` (runtime.Dockerfile, every CPU job of the workflow): torch's CPU build first, pinned,
  then the package's own dependencies and the `workflow`, `train` and `server` extras under a
  constraint that holds torch at its pin, less what runs only on the host (HOST_ONLY: Snakemake
  schedules the jobs, it never runs inside one);
- `train-vllm` and `train-unsloth` (train.Dockerfile, the GPU jobs): torch's CUDA build first,
  pinned, then the package's own dependencies and the stack's extra under the same constraint.
The stacks (which extra, which torch, which image) come from the one table of them,
schemashift/runs/stacks.py.
  The CUDA libraries come as torch's nvidia-* wheels, so the image needs no CUDA base.

All add openenv without its declared dependencies (they include gradio, which nothing here
uses). Run on the host, where `pip download` reaches the package index; a second run with the
same requirements does nothing. The train images' wheels are downloaded with `pip --isolated`
(no pip environment variables or user configuration): a local wheel directory or extra index
holding torch's CPU build would otherwise win over the CUDA one (`2.13.0+cpu` sorts above
`2.13.0`); the download fails if a torch with a local version label got in all the same.
Importable: workflow/scripts/build_image.py reads `requirements`.
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
sys.path.insert(0, str(REPO))
from schemashift.runs.stacks import STACKS, TORCH_VERSION  # noqa: E402

WHEELS = REPO / "containers" / "wheels"
#: installed with --no-deps: its declared dependencies include gradio, which the images never use
OPENENV = "openenv==0.10.0"
#: installed before everything else and held by a constraint, as scripts/bootstrap.sh does: the
#: CPU build in the runtime image (an unpinned request could pull the multi-GB CUDA build where
#: the CPU one fits), the index's CUDA build in the train images
TORCH = f"torch=={TORCH_VERSION}"
#: extras of pyproject.toml each image installs (with the package's own dependencies): the runtime
#: image holds the cpu stack beside the workflow and the server, a GPU image one GPU stack
EXTRAS = {
    "server": ("server",),
    "runtime": ("workflow", STACKS["cpu"].extra, "server"),
    **{stack.wheelhouse: (stack.extra,) for stack in STACKS.values() if stack.gpu},
}
#: the GPU images: torch's CUDA build, several GB of wheels, filled only when asked for by name
GPU_IMAGES = tuple(stack.wheelhouse for stack in STACKS.values() if stack.gpu)
#: what runs on the host and never inside a job: Snakemake, its plugins and its formatter
HOST_ONLY = ("snakemake", "snakefmt", "snakemake-executor-plugin-slurm")
#: an image's requirement files, in the order its Dockerfile installs them, and the constraint
#: file under which it installs the second (the pins of the first hold during the others)
FILES = ("requirements-first.txt", "requirements.txt", "requirements-nodeps.txt")
CONSTRAINTS = "constraints.txt"
#: the images the wheelhouse fills unless asked for others by name
DEFAULT_IMAGES = tuple(image for image in EXTRAS if image not in GPU_IMAGES)


def requirements(image: str) -> dict[str, str]:
    """File name -> text of the requirement files of `image` (FILES, then CONSTRAINTS)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    if image not in EXTRAS:
        raise SystemExit(f"wheelhouse: unknown image {image!r}; known: {', '.join(EXTRAS)}")
    wanted = [] if image == "server" else list(project["dependencies"])
    for extra in EXTRAS[image]:
        wanted += [line for line in extras[extra] if line not in wanted and _name(line) not in HOST_ONLY]
    # a GPU image's torch is the stack's, whether or not its extra names it (unsloth's does not)
    first = [TORCH] if image in GPU_IMAGES or any(_name(line) == "torch" for line in wanted) else []
    pinned = "".join(f"{line}\n" for line in first)
    return {
        "requirements-first.txt": pinned,
        "requirements.txt": "".join(f"{line}\n" for line in wanted if _name(line) != "torch"),
        "requirements-nodeps.txt": f"{OPENENV}\n",
        CONSTRAINTS: pinned,
    }


def stack(image: str) -> str | None:
    """The GPU stack (pyproject extra) a train image installs; None for the CPU images."""
    return EXTRAS[image][0] if image in GPU_IMAGES else None


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
    # Wheels for the image's Python (3.11 on both supported bases), whatever Python runs pip.
    pip = [
        *[python, "-m", "pip", *(["--isolated"] if image in GPU_IMAGES else []), "download"],
        *["--disable-pip-version-check", "--only-binary=:all:", "--python-version", "3.11", "-d", str(dest)],
    ]
    if files["requirements-first.txt"]:
        subprocess.run([*pip, "-r", str(dest / "requirements-first.txt")], check=True)
    constrained = ["-c", str(dest / CONSTRAINTS), "-r", str(dest / "requirements.txt")]
    subprocess.run([*pip, *constrained], check=True)
    subprocess.run([*pip, "--no-deps", "-r", str(dest / "requirements-nodeps.txt")], check=True)
    if image in GPU_IMAGES:
        _refuse_local_torch(dest)
    stamp_file.write_text(stamp + "\n")
    print(f"wheelhouse {dest}: {len(list(dest.glob('*.whl')))} wheels")
    return dest


def _refuse_local_torch(dest: Path) -> None:
    """A GPU image's torch is the index's CUDA build: a local label (`+cpu`) means a CPU wheel got in."""
    local = sorted(path.name for path in dest.glob("torch-*.whl") if "+" in path.name.split("-")[1])
    if local:
        raise SystemExit(f"wheelhouse: {dest} holds {', '.join(local)}, not torch's CUDA build; remove it")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument(
        "--image", action="append", choices=sorted(EXTRAS), help="default: every image but the GPU ones"
    )
    parser.add_argument("--python", default=sys.executable, help="the Python whose pip downloads")
    args = parser.parse_args()
    for image in args.image or DEFAULT_IMAGES:
        fill(image, args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
