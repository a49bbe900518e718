"""Build a container image and record its id, for the workflow's env_image and base_image rules.

With --debootstrap it builds a minimal Debian base image with python3 (for podman machines that
cannot pull from a registry); the Debian mirror is the one this machine's apt sources name.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"


def apt_mirror() -> str:
    """The first Debian mirror URL in this machine's apt sources."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    for path in sources:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1:
                return words[1]
            if words[:1] == ["deb"]:
                return next(w for w in words[1:] if "://" in w)
    sys.exit("build_image: no Debian mirror found in the apt sources")


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, check=True, text=True, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", required=True, choices=["docker", "podman"])
    parser.add_argument("--tag", required=True)
    parser.add_argument("--out", required=True, help="JSON file recording the built image")
    parser.add_argument("--dockerfile")
    parser.add_argument("--context", default=".")
    parser.add_argument("--base-image", default="python:3.11-slim")
    parser.add_argument(
        "--wheelhouse",
        action="store_true",
        help="fill the context's containers/wheels with containers/wheelhouse.py first",
    )
    parser.add_argument("--debootstrap", action="store_true", help="build a Debian base image instead")
    args = parser.parse_args()
    if args.debootstrap:
        with tempfile.TemporaryDirectory() as root:
            run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={BASE_PACKAGES}",
                    DEBIAN_SUITE,
                    root,
                    apt_mirror(),
                ]
            )
            tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
            run([args.engine, "import", "-", args.tag], stdin=tar.stdout)
            tar.wait()
        base = None
    else:
        if not args.dockerfile:
            parser.error("--dockerfile is required unless --debootstrap")
        base = args.base_image
        if args.wheelhouse:
            run([sys.executable, str(Path(args.context) / "containers" / "wheelhouse.py")])
        # podman's default OCI format drops HEALTHCHECK; the docker format keeps it.
        image_format = ["--format", "docker"] if args.engine == "podman" else []
        run(
            [
                args.engine,
                "build",
                *image_format,
                "-f",
                args.dockerfile,
                "--build-arg",
                f"BASE_IMAGE={base}",
                "-t",
                args.tag,
                args.context,
            ]
        )
    image_id = run(
        [args.engine, "image", "inspect", "--format", "{{.Id}}", args.tag], capture_output=True
    ).stdout.strip()
    record = {"engine": args.engine, "tag": args.tag, "id": image_id, "base_image": base}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(out)


if __name__ == "__main__":
    main()
