"""Fill containers/wheels/ with the wheels the server image installs, for builds without a registry.

The image installs from this wheelhouse only (`pip install --no-index`), so the build itself
needs no network and installs exactly the server's dependencies: the `server` extra of
pyproject.toml (resolved with their dependencies) and openenv, whose own dependencies are left
out. Run on the host, where `pip download` reaches the package index; a second run with the same
requirements does nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: installed with --no-deps: its declared dependencies include gradio, which the server never uses
OPENENV = "openenv==0.10.0"


def server_requirements() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["server"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--dest", default=str(REPO / "containers" / "wheels"), help="wheelhouse directory")
    parser.add_argument("--python", default=sys.executable, help="the Python whose pip downloads")
    args = parser.parse_args()
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    requirements = "\n".join(server_requirements()) + "\n"
    stamp = hashlib.sha256((requirements + OPENENV).encode()).hexdigest()
    stamp_file = dest / ".stamp"
    if stamp_file.exists() and stamp_file.read_text().strip() == stamp:
        print(f"wheelhouse {dest} is up to date")
        return 0
    (dest / "requirements.txt").write_text(requirements)
    (dest / "requirements-nodeps.txt").write_text(OPENENV + "\n")
    # Wheels for the image's Python (3.11 on both supported bases), whatever Python runs pip.
    pip = [
        *[args.python, "-m", "pip", "download", "--disable-pip-version-check"],
        *["--only-binary=:all:", "--python-version", "3.11", "-d", str(dest)],
    ]
    subprocess.run([*pip, "-r", str(dest / "requirements.txt")], check=True)
    subprocess.run([*pip, "--no-deps", OPENENV], check=True)
    stamp_file.write_text(stamp + "\n")
    print(f"wheelhouse {dest}: {len(list(dest.glob('*.whl')))} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
