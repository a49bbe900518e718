"""Server step latency and throughput: our server against a trivial OpenEnv echo environment.

Both servers run as separate processes on 127.0.0.1 with the same OpenEnv stack (create_app,
uvicorn with the same options); both are driven through OpenEnv's sync WebSocket client
(`EnvClient.sync()`). The echo environment does nothing but echo its action, so its figures are
the transport's floor.

- Step latency: policy_aware_heuristic episodes over the legacy scenarios, recorded in-process
  and replayed (the client decides nothing, like the echo client); each `step()` call is timed.
  Rounds of the two servers alternate, so both see the same machine conditions. Target (issue
  17): our mean within 1.2x of the echo environment's. On a machine shared with other jobs the
  ratio of the medians (p50) and the paired rounds' median are the steadier figures.
- Throughput: `--sessions` (8) concurrent sessions, one client thread each, for `--seconds`
  each server; steps per second, the resets between episodes counted in the time but not as steps
  (the echo driver resets as often: the recorded episodes' lengths). Target: ours at least 0.7x
  the echo environment's steps per second.
- The in-process figure: the same episodes on `schemashift.env.Environment` directly.
- CPU per step (server process + client process, Linux /proc) during the latency rounds: the
  figure least disturbed by other load on the machine; on a saturated machine throughput
  follows it.

    python benchmarks/server_latency.py [--steps 3000] [--rounds 5] [--sessions 8] [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LATENCY_TARGET = 1.2
THROUGHPUT_TARGET = 0.7


# -- the echo environment (served by this script run with --serve-echo PORT) -----------------------------
def serve_echo(port: int, sessions: int) -> None:
    import uvicorn
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class EchoAction(Action):
        message: str

    class EchoObservation(Observation):
        echoed: str = ""

    class EchoEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State()

        def reset(self, seed=None, episode_id=None, **kwargs) -> EchoObservation:
            self._state = State(episode_id=episode_id, step_count=0)
            return EchoObservation(echoed="")

        def step(self, action: EchoAction, timeout_s=None, **kwargs) -> EchoObservation:
            self._state.step_count += 1
            return EchoObservation(echoed=action.message, reward=0.0)

        @property
        def state(self) -> State:
            return self._state

    from schemashift.server.app import uvicorn_options

    app = create_app(EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=sessions)
    # The same uvicorn settings as `schemashift serve`, so the echo server is the floor of our transport.
    uvicorn.run(app, host="127.0.0.1", port=port, **uvicorn_options())


def echo_client(url: str) -> Any:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient

    class EchoClient(EnvClient):
        def _step_payload(self, action: dict) -> dict:
            return action

        def _parse_result(self, payload: dict) -> StepResult:
            return StepResult(observation=payload.get("observation"), reward=payload.get("reward"),
                              done=payload.get("done", False))  # fmt: skip

        def _parse_state(self, payload: dict) -> dict:
            return payload

    return EchoClient(base_url=url).sync()


# -- drivers --------------------------------------------------------------------------------------------
def recorded_episodes(count: int = 60) -> list[tuple[str, int, list[Any]]]:
    """policy_aware_heuristic episodes played in-process, as (scenario, seed, actions): drivers
    replay them, so the client spends no time deciding (the echo client does not decide either)."""
    from schemashift.env import Environment, get_ruleset
    from schemashift.policies import make_policy
    from schemashift.server.models import SchemaShiftAction

    ruleset = get_ruleset("legacy")
    env, policy, scenarios = (
        Environment(ruleset),
        make_policy("policy_aware_heuristic", ruleset),
        ruleset.scenario_ids(),
    )
    episodes = []
    for i in range(count):
        policy.reset()
        view, actions = env.reset(scenarios[i % len(scenarios)], i), []
        while not view["done"]:
            action = policy.act(view)
            actions.append(SchemaShiftAction.model_validate(action))
            view, _ = env.step(action)
        episodes.append((scenarios[i % len(scenarios)], i, actions))
    return episodes


class SchemaShiftDriver:
    """Replays recorded episodes through our OpenEnv client; `step()` times one server step
    (and plays the reset that starts the next episode first, untimed)."""

    episodes: list[tuple[str, int, list[Any]]] = []

    def __init__(self, url: str, offset: int = 0) -> None:
        from schemashift.server.client import SchemaShiftEnv

        self.client = SchemaShiftEnv(base_url=url).sync()
        self.client.connect()
        self.episode = offset
        self.actions: list[Any] = []

    def step(self) -> float:
        if not self.actions:
            scenario, seed, actions = self.episodes[self.episode % len(self.episodes)]
            self.client.reset(scenario=scenario, seed=seed)
            self.actions = list(actions)
            self.episode += 1
        action = self.actions.pop(0)
        started = time.perf_counter()
        result = self.client.step(action)
        elapsed = time.perf_counter() - started
        assert result.done == (not self.actions), "the replayed episode diverged"
        return elapsed

    def close(self) -> None:
        self.client.close()


class EchoDriver:
    """The same protocol sequence on the echo environment: a reset, then as many steps as the
    recorded episode has, so both servers do the same number of resets per step."""

    def __init__(self, url: str, offset: int = 0) -> None:
        self.client = echo_client(url)
        self.client.connect()
        self.episode = offset
        self.left = 0

    def step(self) -> float:
        if not self.left:
            self.client.reset()
            self.left = len(SchemaShiftDriver.episodes[self.episode % len(SchemaShiftDriver.episodes)][2])
            self.episode += 1
        self.left -= 1
        started = time.perf_counter()
        self.client.step({"message": "ping"})
        return time.perf_counter() - started

    def close(self) -> None:
        self.client.close()


def in_process_step_us(steps: int) -> float:
    """The same recorded episodes on the core Environment: mean step time."""
    from schemashift.env import Environment

    env = Environment("legacy")
    episodes = [(s, seed, [a.payload() for a in actions]) for s, seed, actions in SchemaShiftDriver.episodes]
    total, done, episode = 0.0, 0, 0
    while done < steps:
        scenario, seed, actions = episodes[episode % len(episodes)]
        env.reset(scenario, seed)
        episode += 1
        for action in actions[: steps - done]:
            started = time.perf_counter()
            env.step(action)
            total += time.perf_counter() - started
            done += 1
    return total / steps * 1e6


def throughput(driver_cls: type, url: str, sessions: int, seconds: float, pid: int) -> tuple[float, float]:
    """(steps per second, CPU seconds per step of server and client) of `sessions` concurrent sessions."""
    drivers = [driver_cls(url, offset=1000 * i) for i in range(sessions)]
    counts = [0] * sessions
    stop = threading.Event()
    barrier = threading.Barrier(sessions + 1)

    def work(i: int) -> None:
        barrier.wait()
        while not stop.is_set():
            drivers[i].step()
            counts[i] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started, cpu_before = time.perf_counter(), process_cpu_s(pid) + own_cpu_s()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed, cpu = time.perf_counter() - started, process_cpu_s(pid) + own_cpu_s() - cpu_before
    for driver in drivers:
        driver.close()
    return sum(counts) / elapsed, cpu / max(1, sum(counts))


# -- servers --------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(
    command: list[str], port: int, root: Path = REPO, settings: dict[str, str] | None = None
) -> subprocess.Popen:
    """`command` run from the checkout `root` (with `settings` in its environment), once it
    listens on `port`."""
    env = {
        **os.environ,
        **(settings or {}),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    process = subprocess.Popen(command, env=env, cwd=root)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"server exited early: {' '.join(command)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit(f"server did not start: {' '.join(command)}")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "mean": statistics.fmean(samples) * 1e3,
        "p50": ordered[len(ordered) // 2] * 1e3,
        "p95": ordered[int(len(ordered) * 0.95)] * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument(
        "--steps", type=int, default=3000, help="timed steps per server (default: %(default)s)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default: %(default)s)")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent sessions (default: %(default)s)")
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="throughput time per server (default: %(default)s)"
    )
    parser.add_argument(
        "--alternations",
        type=int,
        default=4,
        help="throughput runs per server, alternating (default: %(default)s)",
    )
    parser.add_argument("--serve-echo", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_echo:
        serve_echo(args.serve_echo, max(64, args.sessions))
        return 0

    SchemaShiftDriver.episodes = recorded_episodes()
    ours_port, echo_port = free_port(), free_port()
    servers = [
        start([sys.executable, "-m", "schemashift.cli", "serve", "--port", str(ours_port)], ours_port),
        start([sys.executable, __file__, "--serve-echo", str(echo_port)], echo_port),
    ]
    try:
        ours_url, echo_url = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{echo_port}"
        pids = {"schemashift": servers[0].pid, "echo": servers[1].pid}
        drivers = {"schemashift": SchemaShiftDriver(ours_url), "echo": EchoDriver(echo_url)}
        for driver in drivers.values():  # warm-up: connections, imports, caches
            for _ in range(200):
                driver.step()
        samples: dict[str, list[float]] = {name: [] for name in drivers}
        cpu = {name: [0.0, 0.0] for name in drivers}  # server, client seconds
        round_ratios = []
        per_round = max(1, args.steps // args.rounds)
        for _ in range(args.rounds):
            means = {}
            for name, driver in drivers.items():
                server_before, client_before = process_cpu_s(pids[name]), own_cpu_s()
                batch = [driver.step() for _ in range(per_round)]
                cpu[name][0] += process_cpu_s(pids[name]) - server_before
                cpu[name][1] += own_cpu_s() - client_before
                samples[name] += batch
                means[name] = statistics.fmean(batch)
            round_ratios.append(means["schemashift"] / means["echo"])
        for driver in drivers.values():
            driver.close()
        rates: dict[str, list[tuple[float, float]]] = {"schemashift": [], "echo": []}
        for _ in range(args.alternations):
            for name, cls, url in (
                ("schemashift", SchemaShiftDriver, ours_url),
                ("echo", EchoDriver, echo_url),
            ):
                rates[name].append(
                    throughput(cls, url, args.sessions, args.seconds / args.alternations, pids[name])
                )
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)

    inprocess = in_process_step_us(args.steps)
    ours, echo = summary(samples["schemashift"]), summary(samples["echo"])
    print(
        f"step latency over OpenEnv's sync WebSocket client ({len(samples['echo'])} steps each, 127.0.0.1):"
    )
    for name, figures in (("schemashift", ours), ("echo env", echo)):
        print(
            f"  {name:12s} mean {figures['mean']:.3f} ms  p50 {figures['p50']:.3f} ms  "
            f"p95 {figures['p95']:.3f} ms"
        )
    ratio = ours["mean"] / echo["mean"]
    verdict = "ok" if ratio <= LATENCY_TARGET else "MISSED"
    print(f"  ratio schemashift/echo (mean) {ratio:.2f}x (target <= {LATENCY_TARGET}x: {verdict})")
    print(f"  median of the {args.rounds} paired rounds' ratios {statistics.median(round_ratios):.2f}x")
    print(f"  ratio of the medians (p50) {ours['p50'] / echo['p50']:.2f}x")
    print(f"  in-process step (same episodes, no transport) {inprocess:.1f} us")
    steps = {name: len(values) for name, values in samples.items()}
    for name, (server_s, client_s) in cpu.items():
        print(
            f"  CPU per step {name:12s} server {server_s / steps[name] * 1e6:.0f} us + client "
            f"{client_s / steps[name] * 1e6:.0f} us (resets included)"
        )
    ours_cpu, echo_cpu = (sum(cpu[name]) / steps[name] for name in ("schemashift", "echo"))
    print(f"  CPU ratio schemashift/echo {ours_cpu / echo_cpu:.2f}x")
    ours_rate = statistics.fmean(rate for rate, _ in rates["schemashift"])
    echo_rate = statistics.fmean(rate for rate, _ in rates["echo"])
    share = ours_rate / echo_rate
    paired = statistics.median(a[0] / b[0] for a, b in zip(rates["schemashift"], rates["echo"], strict=True))
    cpu_ratio = statistics.fmean(c for _, c in rates["schemashift"]) / statistics.fmean(
        c for _, c in rates["echo"]
    )
    verdict = "ok" if share >= THROUGHPUT_TARGET else "MISSED"
    print(
        f"throughput with {args.sessions} concurrent sessions "
        f"({args.seconds:.0f} s each, in {args.alternations} alternating runs):"
    )
    print(f"  schemashift {ours_rate:.0f} steps/s, echo env {echo_rate:.0f} steps/s")
    print(f"  ratio schemashift/echo {share:.2f}x (target >= {THROUGHPUT_TARGET}x: {verdict})")
    print(
        f"  median of the paired runs' ratios {paired:.2f}x; "
        f"CPU per step ratio schemashift/echo {cpu_ratio:.2f}x"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
