"""Build a container image and record it, for the workflow's image rules (container.smk).

Three kinds:
- `--debootstrap`: a minimal Debian base with python3 (and gcc with the Python headers, which
  triton's JIT compiles with in the train image), for podman machines that cannot pull from a
  registry (the Debian mirror is the one this machine's apt sources name);
- `--image NAME` (runtime, train-vllm, train-unsloth): an image whose build context is its
  wheelhouse (containers/wheelhouse.py), tagged `localhost/schemashift-<NAME>:<digest>`, the
  digest being of its Dockerfile, its requirement files, the wheels, the base image's id and
  its build arguments (a train image's STACK);
- otherwise a Dockerfile with the repository as context under the `--tag` given (the server image).

The podman and docker image stores are machine-wide: someone else may remove our image or put
our tag on theirs. So the digest tags are unique to their content and carry it as a label
(`schemashift.digest`); an existing image under our tag is reused only when its label matches,
and anything else there is reported and replaced. The record holds the image id, which the job
shell runs (an id cannot be moved to another image). With `--job-shell PATH`, PATH becomes the
executable that Snakemake's `shell_exec` resource runs the image's jobs through.
"""

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates,gcc,libc6-dev,python3-dev"
#: left out of the base: debootstrap leaves the packages it installed in apt's cache (100 MB)
BASE_EXCLUDED = "./var/cache/apt/archives/*.deb"
DIGEST_LABEL = "schemashift.digest"


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
    print("+", shlex.join(command), flush=True)
    return subprocess.run(command, check=True, text=True, **kwargs)


def inspect(engine: str, image: str) -> dict | None:
    """`engine image inspect` of `image` (id and labels), or None where there is no such image."""
    proc = subprocess.run([engine, "image", "inspect", image], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)[0]
    labels = (data.get("Config") or {}).get("Labels") or data.get("Labels") or {}
    return {"id": data["Id"], "labels": labels}


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def reusable(engine: str, tag: str, want: str) -> str | None:
    """The id of the image under `tag` if it is ours with content digest `want`."""
    found = inspect(engine, tag)
    if found is None:
        return None
    if found["labels"].get(DIGEST_LABEL) == want:
        print(f"build_image: {tag} is present with digest {want[:16]}: reused", flush=True)
        return found["id"]
    print(
        f"build_image: {tag} names another image ({found['id'][:12]}, label "
        f"{found['labels'].get(DIGEST_LABEL)!r}): not ours, building ours under the tag",
        flush=True,
    )
    return None


def build_base(engine: str) -> tuple[str, str, str]:
    """(tag, id, digest) of the debootstrap base, built unless ours is present."""
    want = digest(DEBIAN_SUITE.encode(), BASE_PACKAGES.encode(), BASE_EXCLUDED.encode())
    tag = f"localhost/schemashift-base:{DEBIAN_SUITE}-{want[:16]}"
    image_id = reusable(engine, tag, want)
    if image_id is None:
        with tempfile.TemporaryDirectory() as root:
            debootstrap = ["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}"]
            run([*debootstrap, DEBIAN_SUITE, root, apt_mirror()])
            tar = subprocess.Popen(
                ["tar", "-C", root, f"--exclude={BASE_EXCLUDED}", "-c", "."], stdout=subprocess.PIPE
            )
            run([engine, "import", "--change", f"LABEL {DIGEST_LABEL}={want}", "-", tag], stdin=tar.stdout)
            tar.wait()
        image_id = inspect(engine, tag)["id"]
    return tag, image_id, want


def base_id(engine: str, base: str) -> str:
    """The id of the base image `base` (a base record file, or an image name, pulled if missing)."""
    if base.endswith(".json"):
        record = json.loads(Path(base).read_text())
        if inspect(engine, record["id"]) is None:
            sys.exit(f"build_image: the base image {record['tag']} ({record['id'][:12]}) of {base} is gone: "
                     "rebuild it (snakemake --forcerun base_image)")  # fmt: skip
        return record["id"]
    if inspect(engine, base) is None:
        run([engine, "pull", base])
    return inspect(engine, base)["id"]


def build_from_wheelhouse(engine: str, name: str, dockerfile: str, parent: str) -> dict:
    """The record fields (tag, id, digest, wheels; gpu for a train image) of image `name` on the
    base image of id `parent`, built from its wheelhouse unless ours is present."""
    sys.path.insert(0, str(REPO / "containers"))
    import wheelhouse

    context = wheelhouse.fill(name)
    files = wheelhouse.requirements(name)
    wheels = sorted(path.name for path in context.glob("*.whl"))
    stack = wheelhouse.stack(name)
    build_args = {"STACK": stack} if stack else {}
    want = digest(
        Path(dockerfile).read_bytes(),
        *(f"{file}\n{text}".encode() for file, text in sorted(files.items())),
        "\n".join(wheels).encode(),
        parent.encode(),
        *(f"{arg}={value}".encode() for arg, value in sorted(build_args.items())),
    )
    tag = f"localhost/schemashift-{name}:{want[:16]}"
    image_id = reusable(engine, tag, want)
    if image_id is None:
        run(
            [
                *[engine, "build", *(["--format", "docker"] if engine == "podman" else [])],
                *["--pull=never", "-f", dockerfile, "--label", f"{DIGEST_LABEL}={want}"],
                *["--build-arg", f"BASE_IMAGE={parent}", "--build-arg", f"IMAGE_TAG={tag}"],
                *[arg for name_value in build_args.items() for arg in ("--build-arg", "=".join(name_value))],
                *["-t", tag, str(context)],
            ]
        )
        found = inspect(engine, tag)
        if found is None or found["labels"].get(DIGEST_LABEL) != want:
            sys.exit(f"build_image: {tag} changed under us while it was built (another user?); build again")
        image_id = found["id"]
    # a train image's jobs get the host's GPUs from the job shell
    return dict(tag=tag, id=image_id, digest=want, wheels=wheels, **({"gpu": True} if stack else {}))


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)


def job_shell_script(record: Path) -> str:
    """The executable behind Snakemake's `shell_exec` resource for this image's jobs."""
    script = REPO / "workflow" / "scripts" / "job_shell.py"
    return (
        "#!/bin/sh\n# Written by workflow/scripts/build_image.py: runs a job's command in the image of\n"
        f"# {record.name} (see job_shell.py).\n"
        f'exec {shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(record))} "$@"\n'
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--engine", required=True, choices=["docker", "podman"])
    parser.add_argument("--out", required=True, help="JSON file recording the built image")
    parser.add_argument("--debootstrap", action="store_true", help="build the Debian base image")
    parser.add_argument("--image", help="an image of containers/wheelhouse.py, built from its wheelhouse")
    parser.add_argument("--dockerfile")
    parser.add_argument("--tag", help="tag of a Dockerfile built with the repository as context")
    parser.add_argument("--context", default=".")
    parser.add_argument(
        "--base-image", default="python:3.11-slim", help="an image name, or the record of a built base"
    )
    parser.add_argument("--wheelhouse", action="store_true", help="fill the server's wheelhouse first")
    parser.add_argument("--job-shell", help="write the job shell of the image here")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    record = {"engine": args.engine}
    if args.debootstrap:
        tag, image_id, want = build_base(args.engine)
        record.update(tag=tag, id=image_id, digest=want, base_image=None)
    elif args.image:
        if not args.dockerfile:
            parser.error("--image needs --dockerfile")
        parent = base_id(args.engine, args.base_image)
        record.update(
            build_from_wheelhouse(args.engine, args.image, args.dockerfile, parent), base_image=parent
        )
    else:
        if not (args.dockerfile and args.tag):
            parser.error("--dockerfile and --tag are required unless --debootstrap or --image")
        if args.wheelhouse:
            run([sys.executable, str(REPO / "containers" / "wheelhouse.py"), "--image", "server"])
        parent = base_id(args.engine, args.base_image)
        # podman's default OCI format drops HEALTHCHECK; the docker format keeps it.
        image_format = ["--format", "docker"] if args.engine == "podman" else []
        run(
            [
                *[args.engine, "build", *image_format, "-f", args.dockerfile],
                *["--build-arg", f"BASE_IMAGE={parent}", "-t", args.tag, args.context],
            ]
        )
        record.update(tag=args.tag, id=inspect(args.engine, args.tag)["id"], base_image=parent)
    write_atomic(out, json.dumps(record, indent=2) + "\n")
    if args.job_shell:
        write_atomic(Path(args.job_shell), job_shell_script(out), mode=0o755)
    print(f"build_image: {record['tag']} = {record['id'][:12]}", flush=True)


if __name__ == "__main__":
    main()
