"""`schemashift serve` runs the server; `schemashift run --backend ws://...` writes the same records."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from server_support import comparable, free_port

from schemashift.env.rulesets import available_rulesets, get_ruleset

REPO = Path(__file__).resolve().parents[2]


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 30.0) -> float:
    import httpx

    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {process.stdout.read() if process.stdout else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError("server did not become healthy")


@contextlib.contextmanager
def serving(*args: str, env: dict[str, str] | None = None):
    """`schemashift serve` on a free port with `args`, healthy, stopped afterwards: the port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "schemashift.cli", "serve", "--port", str(port), *args],
        env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "schemashift.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        **kwargs,
    )


@pytest.fixture(scope="module")
def served():
    with serving("--max-sessions", "4") as port:
        yield port


def read_records(out: Path) -> dict:
    import gzip

    episodes = comparable(pq.read_table(out / "episodes.parquet").to_pylist())
    drifts = comparable(pq.read_table(out / "drifts.parquet").to_pylist())
    with gzip.open(out / "trajectories.jsonl.gz", "rt") as handle:
        trajectories = comparable([json.loads(line) for line in handle])
    return {"episodes": episodes, "drifts": drifts, "trajectories": trajectories}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ruleset", available_rulesets())
def test_run_against_serve_writes_the_in_process_records(served, tmp_path, ruleset):
    outs = {}
    for backend in ("inprocess", f"ws://127.0.0.1:{served}"):
        out = outs[backend] = tmp_path / backend.replace(":", "_").replace("/", "_")
        result = cli(
            "run", "--ruleset", ruleset, "--policy", "policy_aware_heuristic", "--seeds", "0-2",
            "--out", str(out), "--backend", backend, "--config-hash", "fixed", timeout=240,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    local, remote = (read_records(out) for out in outs.values())
    assert len(local["episodes"]) == len(get_ruleset(ruleset).scenario_ids()) * 3
    assert remote == local


def listening_addresses(port: int) -> list[str]:
    """Local addresses of the TCP sockets listening on `port`, from the kernel's table."""
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, port_hex = local.rpartition(":")
            if state == "0A" and int(port_hex, 16) == port:
                addresses.append(address)
    return addresses


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_serve_binds_loopback_only_by_default(served):
    # 0100007F is 127.0.0.1 in the kernel's byte order; 0.0.0.0 would be 00000000.
    assert listening_addresses(served) == ["0100007F"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-sessions", "0"], "--max-sessions must be at least 1"),
        (["--port", "70000"], "--port must be between"),
        (["--session-timeout", "-1"], "--session-timeout must not be negative"),
        (["--read-timeout", "0"], "--read-timeout must be a positive, finite number of seconds"),
    ],
)
def test_serve_refuses_bad_settings(args, message):
    result = cli("serve", *args, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(f"schemashift serve: error: {message}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("given_by", ["option", "environment"])
def test_serve_applies_the_read_timeout(given_by):
    import socket

    args = ["--read-timeout", "1"] if given_by == "option" else []
    from_environment = "600" if given_by == "option" else "1"  # the option wins over the environment
    with serving(*args, env={"SCHEMASHIFT_READ_TIMEOUT_S": from_environment}) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # half the headers, then nothing
            started = time.monotonic()
            reply = sock.recv(65536)
            waited = time.monotonic() - started
        assert reply.startswith(b"HTTP/1.1 408") and b"within 1 s" in reply
        assert waited < 5


def test_run_with_an_unknown_backend_is_a_usage_error(tmp_path):
    result = cli(
        "run", "--policy", "oracle", "--out", str(tmp_path / "o"), "--backend", "carrier-pigeon", timeout=60
    )
    assert result.returncode == 2
    assert "Unknown backend 'carrier-pigeon'" in result.stderr


def _status_for_host(port: int, host: str) -> int:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/health", headers={"Host": host})
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("given_by", ["option", "environment"])
def test_serve_applies_the_host_allow_list(given_by):
    """`--allow-host` (or SCHEMASHIFT_ALLOWED_HOSTS; the option wins) adds names to the loopback
    ones; any other Host, as a rebinding page sends it, is refused."""
    args = ["--allow-host", "env.example"] if given_by == "option" else []
    from_environment = "other.example" if given_by == "option" else "env.example"
    with serving(*args, env={"SCHEMASHIFT_ALLOWED_HOSTS": from_environment}) as port:
        assert _status_for_host(port, f"127.0.0.1:{port}") == 200
        assert _status_for_host(port, "env.example") == 200
        assert _status_for_host(port, "evil.example") == 421
        assert _status_for_host(port, "other.example") == 421
