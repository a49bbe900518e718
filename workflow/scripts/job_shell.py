"""Run one Snakemake job's shell command in a container image: the workflow's local job shell.

Snakemake runs a rule's command as `<shell_exec> -c COMMAND` where the rule's `shell_exec`
resource names an executable (container.smk sets it on every rule that declares an image). That
executable is the script build_image.py writes beside the image record; it calls this file with
the record, and this runs

    <engine> run --rm --pull never --no-healthcheck --init --network host --user <uid:gid> \
        -v <repository>:<repository> -v <workdir>:<workdir> -w <workdir> -e NAME... \
        --entrypoint bash <image id> -c 'set -euo pipefail; COMMAND'

The image is run by its id, which no one can point at another image (a tag can be); the checkout
and the working directory are mounted at their own paths, so paths in the command, PYTHONPATH
(common.smk) and the files the job writes are the host's. The host's environment reaches the job,
except the variables that describe the host's own installation (HOST_VARIABLES); the image sets
SCHEMASHIFT_IMAGE, which the records stamp, and this sets the commit the records stamp from the
host's checkout (the image has no git).

Stopping: SIGINT, SIGTERM or SIGHUP here remove the container at once. A watchdog process, in its
own session so that signals aimed at the job's group pass it by, removes the container when this
process or the Snakemake that started it disappears without this process finishing (Snakemake
SIGKILLs its job shells on Ctrl-C; a SIGKILLed Snakemake takes no one down with it). When the job
ends, this process tells the watchdog through a pipe and waits for it rather than killing it: the
watchdog may be removing the container at that moment (it kills the engine client first, which is
what ends the job), and a watchdog killed before its `rm` left the container running.
"""

import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from schemashift.provenance import GIT_SHA_ENV, IMAGE_ENV, git_sha  # noqa: E402

#: host variables that describe the host's installation or session, not the job
HOST_VARIABLES = frozenset(
    {
        "PATH", "HOME", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP", "LD_LIBRARY_PATH", "LD_PRELOAD",
        "TMPDIR", "TMP", "TEMP", "TEMPDIR", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "SHELL", "MAIL",
        "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "CONTAINER_HOST", "DOCKER_HOST", IMAGE_ENV,
    }
)  # fmt: skip
HOST_PREFIXES = ("CONDA_", "PIP_", "SSH_", "PYENV", "XDG_", "BASH_FUNC_")
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: the label every job container carries (tests and clean-up find them by it)
JOB_LABEL = "schemashift.job"
#: the name every job container starts with
NAME_PREFIX = "schemashift-job-"


def passed_variables(environ: dict[str, str]) -> list[str]:
    return sorted(
        name
        for name in environ
        if VARIABLE_NAME.fullmatch(name) and name not in HOST_VARIABLES and not name.startswith(HOST_PREFIXES)
    )


def run_command(record: dict, name: str, command: str, workdir: str) -> list[str]:
    """The `<engine> run` command line of one job."""
    engine = record["engine"]
    if engine == "podman" and os.geteuid() != 0:
        # rootless podman maps the user to root inside; keep-id maps it to itself instead
        user = ["--userns=keep-id"]
    else:
        user = ["--user", f"{os.getuid()}:{os.getgid()}"]
    mounts = []
    for path in dict.fromkeys([str(REPO), workdir]):
        mounts += ["-v", f"{path}:{path}"]
    env = [arg for variable in passed_variables(dict(os.environ)) for arg in ("-e", variable)]
    # the training image: every GPU the host shows (CDI under podman)
    gpus = []
    if record.get("gpu"):
        gpus = ["--device", "nvidia.com/gpu=all"] if engine == "podman" else ["--gpus", "all"]
    return [
        *[engine, "run", "--rm", "--name", name, "--label", f"{JOB_LABEL}={os.getppid()}"],
        *["--pull", "never", "--no-healthcheck", "--init", "--network", "host", *user, *gpus],
        *mounts,
        *["-w", workdir, "-e", "HOME=/tmp", *env, "--entrypoint", "bash", record["id"]],
        *["-c", f"set -euo pipefail; {command}"],
    ]


def remove(engine: str, name: str, patience_s: float = 60) -> None:
    """Kill and remove the container, trying again while the engine is busy (or still creating it)."""
    force = [engine, "rm", "--force", *(["--time", "0"] if engine == "podman" else []), name]
    deadline = time.monotonic() + patience_s
    while True:
        subprocess.run(force, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        listed = subprocess.run(
            [engine, "ps", "--all", "--quiet", "--filter", f"name=^{name}$"], capture_output=True, text=True
        )
        if (listed.returncode == 0 and not listed.stdout.strip()) or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def watchdog(engine: str, name: str, pids: list[int], client: int, job_ended: int) -> None:
    """In a forked child: wait until one of `pids` is gone, then stop the container; exit quietly
    when `job_ended` (a pipe's read end) brings a byte, the job's own end. A bare end of file is
    no such word: a killed job shell's pipe closes before its exit shows. Never returns."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        fds = [os.pidfd_open(pid) for pid in pids]
        readable, _, _ = select.select([*fds, job_ended], [], [])
        if readable == [job_ended] and os.read(job_ended, 1):
            os._exit(0)
    except ProcessLookupError:
        pass  # already gone
    try:
        os.kill(client, signal.SIGKILL)
    except ProcessLookupError:
        pass
    remove(engine, name)
    os._exit(0)


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[2] != "-c":
        print("usage: job_shell.py IMAGE_RECORD -c COMMAND (Snakemake's shell_exec)", file=sys.stderr)
        return 2
    record_path, command = Path(argv[1]), argv[3]
    record = json.loads(record_path.read_text())
    engine = record["engine"]
    name = f"{NAME_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    sha = git_sha()
    if sha:
        os.environ[GIT_SHA_ENV] = sha
    snakemake = os.getppid()
    client = subprocess.Popen(run_command(record, name, command, os.getcwd()))
    job_ended, tell_job_ended = os.pipe()
    guard = os.fork()
    if guard == 0:
        os.close(tell_job_ended)
        watchdog(engine, name, [os.getppid(), snakemake], client.pid, job_ended)
    os.close(job_ended)

    def stop(signum, frame):
        # No waiting here: the main thread may be inside client.wait(), whose lock it holds.
        client.kill()
        remove(engine, name)
        os.kill(guard, signal.SIGKILL)
        os._exit(128 + signum)

    def finish(status: int):
        os.write(tell_job_ended, b"\n")
        os.waitpid(guard, 0)
        sys.exit(status)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    status = client.wait()
    if status == 125:
        print(
            f"job_shell: {engine} could not start {record['tag']} (id {record['id'][:12]}, from "
            f"{record_path}); if the image is gone, build it again: snakemake --forcerun <its image rule>",
            file=sys.stderr,
        )
    finish(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
