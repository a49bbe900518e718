"""Fair service under a flood: a bystander's step latency while other clients pipeline `state`
messages as fast as they can (issue 34).

The server (`python -m schemashift.server.app`, `serve`'s transport) runs in its own process on
127.0.0.1; the flooders run in another process, one thread pair per flooding connection: one
thread sends `--messages` `state` messages without waiting for replies, the other reads the
replies; a connection the server closes is opened again at once, so the flood never stops. The
bystander (this process) replays policy_aware_heuristic episodes through our OpenEnv client and
times each step, for `--seconds` with 0, then each `--flooders` count of flooding clients.

    python benchmarks/server_flood.py [--flooders 1 3 6] [--seconds 4] [--messages 100000]

`--server-root DIR` serves the code of another checkout (a worktree of an older commit), so
before and after are measured by the same driver on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from server_latency import SchemaShiftDriver, free_port, recorded_episodes, start  # noqa: E402

STATE = json.dumps({"type": "state"})


# -- the flooding process -------------------------------------------------------------------------------
def flood(url: str, connections: int, messages: int, seconds: float) -> None:
    """`connections` clients pipelining `messages` state messages each, reconnecting when closed,
    for `seconds`; prints what happened to them as one JSON line."""
    import logging

    from websockets.exceptions import ConnectionClosed, InvalidHandshake
    from websockets.sync.client import connect

    logging.getLogger("websockets").setLevel(logging.CRITICAL)  # the closes are expected

    stop = time.monotonic() + seconds
    totals = {"sent": 0, "answered": 0, "errors": 0, "closes": {}, "connections": 0}
    lock = threading.Lock()

    def one() -> None:
        while time.monotonic() < stop:
            try:
                ws = connect(url, max_size=None, proxy=None, open_timeout=10).__enter__()
            except (OSError, TimeoutError, InvalidHandshake):
                time.sleep(0.05)
                continue
            answered = errors = 0

            def reader(ws=ws) -> None:
                nonlocal answered, errors
                try:
                    while True:
                        reply = ws.recv()
                        answered += 1
                        if '"type":"error"' in reply.replace(" ", ""):
                            errors += 1
                except (ConnectionClosed, OSError, TimeoutError):
                    pass

            thread = threading.Thread(target=reader, daemon=True)
            thread.start()
            sent = 0
            try:
                while sent < messages and time.monotonic() < stop:
                    ws.send(STATE)
                    sent += 1
            except (ConnectionClosed, OSError):
                pass
            # wait for the replies (or the close), then start over
            while thread.is_alive() and answered < sent and time.monotonic() < stop:
                thread.join(0.05)
            ws.close()
            thread.join(5)
            key = f"{ws.close_code} {ws.close_reason or ''}".strip()
            with lock:
                totals["sent"] += sent
                totals["answered"] += answered
                totals["errors"] += errors
                totals["connections"] += 1
                totals["closes"][key] = totals["closes"].get(key, 0) + 1

    threads = [threading.Thread(target=one, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps(totals), flush=True)


# -- the driver -----------------------------------------------------------------------------------------
def start_server(port: int, root: Path) -> subprocess.Popen:
    """The app of the checkout `root` (the base commit's, to measure before) on `port`."""
    command = [sys.executable, "-m", "schemashift.server.app"]
    return start(command, port, root, {"HOST": "127.0.0.1", "PORT": str(port)})


def bystander(url: str, seconds: float) -> list[float]:
    driver = SchemaShiftDriver(url)
    samples: list[float] = []
    stop = time.monotonic() + seconds
    try:
        while time.monotonic() < stop:
            samples.append(driver.step())
    finally:
        driver.close()
    return samples


def figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"median {statistics.median(ordered) * 1e3:8.2f} ms  p99 {p99 * 1e3:8.2f} ms  "
        f"max {ordered[-1] * 1e3:8.2f} ms  ({len(ordered)} steps)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--flooders", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--seconds", type=float, default=4.0, help="per flooder count (default: %(default)s)")
    parser.add_argument(
        "--messages", type=int, default=100_000, help="state messages per flooding connection"
    )
    parser.add_argument("--server-root", type=Path, default=REPO, help="checkout whose server runs")
    parser.add_argument("--flood", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood:
        url, connections, messages, seconds = args.flood
        flood(url, int(connections), int(messages), float(seconds))
        return 0

    SchemaShiftDriver.episodes = recorded_episodes()
    port = free_port()
    server = start_server(port, args.server_root.resolve())
    url = f"http://127.0.0.1:{port}"
    try:
        bystander(url, 0.5)  # warm-up
        print(f"bystander's step latency, {args.seconds:g} s each ({os.cpu_count()} CPUs):")
        print(f"  no flooder   {figures(bystander(url, args.seconds))}")
        for count in args.flooders:
            flooders = subprocess.Popen(
                [sys.executable, __file__, "--flood", url.replace("http", "ws") + "/ws", str(count),
                 str(args.messages), str(args.seconds + 1.0)],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            time.sleep(0.5)  # the flood is under way
            samples = bystander(url, args.seconds)
            out, _ = flooders.communicate(timeout=120)
            print(f"  {count} flooder{'s' if count > 1 else ' '}  {figures(samples)}")
            print(f"               flood: {out.strip()}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"load average: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
