"""Hostile and careless input (issue 17, items 1, 4 and 5): every bad message gets an error
frame or a 4xx and leaves its session in a known state; the guards run in linear time, off the
event loop for large messages; browser pages of foreign origins are refused. Each case is
followed by a healthy episode on a fresh session."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import httpx
import pytest
from server_support import Session, running_server
from websockets.exceptions import InvalidStatus

from schemashift.env.pipeline import SEED_MAX, SEED_MIN
from schemashift.env.rulesets import get_ruleset
from schemashift.server.limits import MAX_MESSAGE_BYTES, too_deep

SCENARIO = get_ruleset("legacy").scenario_ids()[0]
COMPLETE = {"type": "complete_task", "complete": {"summary": "done"}}
INSPECT = {"type": "inspect_schema", "inspect": {"tool": "mail"}}
SEED_WORDS = "seed must be between"


def quadratic_payload(size: int) -> str:
    """The frame that froze the old depth guard: more than 64 brackets, none deeper than one
    level, then an unterminated string of escaped quotes up to `size` bytes."""
    head = '{"type": "step", "data": [' + "[]," * 40
    return head + '"' + '\\"' * ((size - len(head) - 1) // 2)


def step(data) -> str:
    return json.dumps({"type": "step", "data": data})


def reset(data) -> str:
    return json.dumps({"type": "reset", "data": data})


def summary(text_json: str) -> str:
    """A step whose summary is the JSON string literal `text_json` (escapes kept as written)."""
    return '{"type": "step", "data": {"type": "complete_task", "complete": {"summary": ' + text_json + "}}}"


def healthy_episode(url: str) -> None:
    with Session(url) as session:
        first = session.send("reset", {"scenario": SCENARIO, "seed": 7})
        assert first["type"] == "observation", first
        assert session.send("step", INSPECT)["data"]["done"] is False
        last = session.send("step", COMPLETE)
        assert last["data"]["done"] is True, last


def step_count(session: Session) -> int:
    reply = session.send("state")
    assert reply["type"] == "state", reply
    return reply["data"]["step_count"]


# (name, the frame, expected code, words the message must hold)
WS_CASES = [
    ("empty step", json.dumps({"type": "step"}), "VALIDATION_ERROR", "Invalid message"),
    ("step of an empty action", step({}), "VALIDATION_ERROR", "exactly one of 'type'"),
    ("both type and raw", step({**COMPLETE, "raw": "x"}), "VALIDATION_ERROR", "exactly one of 'type'"),
    ("raw null with a type", step({**COMPLETE, "raw": None}), "VALIDATION_ERROR", "exactly one of 'type'"),
    ("seed of 5,000 digits", '{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}", "INVALID_JSON",
     "4300 digits"),
    ("tokens of 5,000 digits", '{"type": "step", "data": {"type": "complete_task", "tokens_used": '
     + "1" * 5000 + "}}", "INVALID_JSON", "4300 digits"),
    ("seed above int64", reset({"scenario": SCENARIO, "seed": SEED_MAX + 1}), "EXECUTION_ERROR", SEED_WORDS),
    ("seed below int64", reset({"scenario": SCENARIO, "seed": SEED_MIN - 1}), "EXECUTION_ERROR", SEED_WORDS),
    ("lone high surrogate", summary('"\\ud800"'), "INVALID_JSON", "lone UTF-16 surrogate"),
    ("lone low surrogate", summary('"a\\udfffb"'), "INVALID_JSON", "lone UTF-16 surrogate"),
    ("reversed pair", summary('"\\ude00\\ud83d"'), "INVALID_JSON", "lone UTF-16 surrogate"),
    ("lone surrogate in a key", step({"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "x",
     "params": {"\ud800": 1}}}), "INVALID_JSON", "lone UTF-16 surrogate"),
    ("lone surrogate in reset", '{"type": "reset", "data": {"scenario": "\\ud800"}}', "INVALID_JSON",
     "lone UTF-16 surrogate"),
    ("lone surrogate in raw text", step({"raw": json.dumps({**COMPLETE, "complete": {"summary": "\ud800"}})}),
     "EXECUTION_ERROR", "InvalidAction: malformed action JSON: a string holds a lone UTF-16 surrogate"),
    ("5,000 digits in raw text", step({"raw": '{"type": "complete_task", "x": ' + "7" * 5000 + "}"}),
     "EXECUTION_ERROR", "InvalidAction: malformed action JSON"),
    ("the old guard's quadratic frame", quadratic_payload(64 * 1024), "INVALID_JSON", "Invalid JSON"),
    ("1 MiB quadratic frame", quadratic_payload(MAX_MESSAGE_BYTES), "INVALID_JSON", "Invalid JSON"),
    ("deep after a string", '{"type": "step", "data": {"s": "a\\\\", "x": ' + "[" * 65 + "]" * 65 + "}}",
     "INVALID_JSON", "nested more than 64"),
    ("unclosed brackets", '{"type": "step", "data": ' + "[" * 100, "INVALID_JSON", "nested more than 64"),
    ("not JSON after a valid prefix", '{"type": "state"} x', "INVALID_JSON", "Invalid JSON"),
    ("an infinite seed", '{"type": "reset", "data": {"seed": 1e999999}}', "EXECUTION_ERROR",
     "seed must be an integer"),
    ("just over the limit", json.dumps({"type": "step", "data": {"raw": "x" * MAX_MESSAGE_BYTES}}),
     "MESSAGE_TOO_LARGE", "exceeds the server's limit"),
]  # fmt: skip


@pytest.fixture(scope="module")
def url():
    with running_server() as base:
        yield base


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name, frame, code, words", WS_CASES, ids=[c[0] for c in WS_CASES])
def test_bad_frames_leave_the_session_in_a_known_state(url, name, frame, code, words):
    with Session(url) as session:
        assert session.send("reset", {"scenario": SCENARIO, "seed": 3})["type"] == "observation"
        assert session.send("step", INSPECT)["type"] == "observation"
        reply = session.send_raw(frame)
        assert reply["type"] == "error", reply
        assert reply["data"]["code"] == code, reply
        assert words in json.dumps(reply["data"]), reply  # the message, or pydantic's errors
        # Nothing was applied: the episode is where it was, and goes on.
        assert step_count(session) == 1
        assert session.send("step", COMPLETE)["data"]["done"] is True
    healthy_episode(url)


# Frames that look suspicious to a fast scan but are valid: they must be served.
WS_VALID = [
    ("escaped surrogate pair", summary('"\\ud83d\\ude00"'), "\U0001f600"),
    ("escaped backslash before u-d800", summary('"\\\\ud800"'), "\\ud800"),
    ("brackets inside strings", summary(json.dumps("[" * 500 + "{" * 500)), "[" * 500 + "{" * 500),
    ("escaped quotes inside strings", summary(json.dumps('\\"[' * 100)), '\\"[' * 100),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name, frame, text", WS_VALID, ids=[c[0] for c in WS_VALID])
def test_valid_frames_near_the_guards_are_served(url, name, frame, text):
    with Session(url) as session:
        assert session.send("reset", {"scenario": SCENARIO, "seed": 3})["type"] == "observation"
        reply = session.send_raw(frame)
        assert reply["type"] == "observation", reply
        assert reply["data"]["done"] is True
        history = reply["data"]["observation"]["view"]["history"]
        assert history[-1]["action"]["complete"]["summary"] == text
    healthy_episode(url)


def seed_refusals(url: str, seed: int) -> list[str]:
    """The refusal of `seed` on each route: WebSocket, HTTP and MCP."""
    from fastmcp import Client

    with Session(url) as session:
        ws = session.send("reset", {"scenario": SCENARIO, "seed": seed})["data"]["message"]
    http = httpx.post(f"{url}/reset", json={"scenario": SCENARIO, "seed": seed}, timeout=30).json()["detail"]

    async def mcp() -> str:
        async with Client(f"{url}/agent/mcp") as client:
            arguments = {"scenario": SCENARIO, "seed": seed}
            result = await client.call_tool("reset", arguments, raise_on_error=False)
            assert result.is_error
            return result.content[0].text

    return [ws, http, asyncio.run(mcp())]


@pytest.mark.timeout(90)
def test_seeds_the_records_cannot_hold_are_refused_alike_on_every_route(url):
    from schemashift.env import Environment

    for seed in (SEED_MAX + 1, 10**300):
        refusals = seed_refusals(url, seed)
        with pytest.raises(ValueError) as in_process:
            Environment(get_ruleset("legacy")).reset(SCENARIO, seed)
        refusals.append(f"ValueError: {in_process.value}")
        assert all(refusal.startswith(f"ValueError: {SEED_WORDS}") for refusal in refusals), refusals
        assert len(set(refusals)) == 1, refusals
    with Session(url) as session:
        reply = session.send("reset", {"scenario": SCENARIO, "seed": SEED_MAX})
        assert reply["data"]["observation"]["view"]["seed"] == SEED_MAX
    healthy_episode(url)


HTTP_CASES = [
    ("seed of 5,000 digits", "/reset", b'{"seed": ' + b"9" * 5000 + b"}", 422, "4300 digits"),
    ("lone surrogate in an action", "/step", b'{"action": {"type": "complete_task", "complete": '
     b'{"summary": "\\udc00"}}}', 422, "lone UTF-16 surrogate"),
    ("surrogate as UTF-8 bytes", "/reset", b'{"scenario": "\xed\xa0\x80"}', 422, "lone UTF-16 surrogate"),
    ("quadratic body", "/step", quadratic_payload(MAX_MESSAGE_BYTES - 64).encode(), 422, "Invalid JSON"),
    ("deep MCP body", "/agent/mcp", b'{"jsonrpc": "2.0", "params": ' + b"[" * 70 + b"]" * 70 + b"}", 400,
     "nested more than 64"),
    ("both type and raw", "/step", json.dumps({"action": {**COMPLETE, "raw": 1}}).encode(), 422,
     "exactly one"),
]  # fmt: skip


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name, path, body, status, words", HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
def test_bad_bodies_get_a_4xx(url, name, path, body, status, words):
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    response = httpx.post(url + path, content=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text
    assert words in json.dumps(response.json()["detail"])
    healthy_episode(url)


# -- item 1: linear-time guards, off the event loop -------------------------------------------------


def depth_reference(data: bytes, limit: int) -> bool:
    """A plain scanner (one token at a time) for balanced JSON text, to check `too_deep` against."""
    depth, in_string, escaped = 0, False, False
    for char in data.decode():
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


@pytest.mark.timeout(60)
def test_the_depth_guard_is_exact_on_json():
    import random

    rnd = random.Random(17)

    def value(levels: int):
        if levels == 0:
            return rnd.choice([1, "a[", '\\"{', "\\", None])
        children = [value(levels - 1 - (rnd.random() < 0.3)) if levels > 1 else value(0) for _ in range(3)]
        return children if rnd.random() < 0.5 else {str(i): child for i, child in enumerate(children)}

    for _ in range(200):
        text = json.dumps(value(rnd.randint(1, 7))).encode()
        for limit in range(0, 9):
            assert too_deep(text, limit) == depth_reference(text, limit), (text, limit)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_depth_guard_is_linear_on_adversarial_input():
    """Inputs built to make each stage slow (many strings, escapes, pair-removal passes, mountains)
    take about as long per byte at 1 MiB as at 64 KiB: linear, far from the old hour."""
    size = MAX_MESSAGE_BYTES

    def shapes(n: int) -> dict[str, bytes]:
        built = {
            "escaped quotes": quadratic_payload(n).encode(),
            "strings": b"[" + b'"a\\"[[", ' * (n // 9),
            "escaped backslashes": b"[" + b'"\\\\", ' * (n // 7),
            "flat": b"[" + b"[]," * (n // 3),
        }
        for k in (2, 9, 17, 33, 64):
            built[f"mountains of {k}"] = (b"[" * k + b"]" * k) * (n // (2 * k))
            built[f"saw of {k}"] = b"[" * 60 + (b"[" * k + b"]" * (k - 1)) * (n // (2 * k))
        return built

    def best(data: bytes) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            too_deep(data)
            times.append(time.perf_counter() - started)
        return min(times)

    small, large = shapes(size // 16), shapes(size)
    for name in large:
        small_s, large_s = best(small[name]), best(large[name])
        print(f"{name}: {large_s * 1000:.1f} ms at 1 MiB")
        assert large_s < 0.5, name
        assert large_s / len(large[name]) < 4 * small_s / len(small[name]) + 20e-9, name


# (name, a 1 MiB payload, the longest median reply allowed): the item's payload must be answered
# within 50 ms; the guard's slowest shape (many mountains 17 deep) is only timed.
GUARD_PAYLOADS = [
    ("escaped quotes", quadratic_payload(MAX_MESSAGE_BYTES), 0.05),
    ("mountains of 17", ",".join(["[" * 17 + "]" * 17] * (MAX_MESSAGE_BYTES // 35)), 1.0),
]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape, payload, within", GUARD_PAYLOADS, ids=[c[0] for c in GUARD_PAYLOADS])
def test_a_1_mib_guard_payload_is_answered_fast_while_another_session_steps(url, shape, payload, within):
    assert len(payload) <= MAX_MESSAGE_BYTES
    latencies: list[float] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def bystander() -> None:
        try:
            with Session(url) as session:
                while not stop.is_set() and len(latencies) < 100_000:
                    assert session.send("reset", {"scenario": SCENARIO, "seed": 1})["type"] == "observation"
                    for _ in range(5):
                        started = time.perf_counter()
                        reply = session.send("step", INSPECT)
                        latencies.append(time.perf_counter() - started)
                        assert reply["type"] == "observation", reply
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    worker = threading.Thread(target=bystander, daemon=True)
    worker.start()
    replies = []
    try:
        with Session(url) as attacker:
            time.sleep(0.3)
            for _ in range(20):
                started = time.perf_counter()
                reply = attacker.send_raw(payload)
                replies.append(time.perf_counter() - started)
                assert reply["type"] == "error", reply
            time.sleep(0.3)
    finally:
        stop.set()
        worker.join(timeout=30)
    assert not failures, failures
    assert len(latencies) > 50
    p99 = statistics.quantiles(latencies, n=100)[98]
    print(
        f"\n1 MiB depth-guard payload ({shape}): reply median {statistics.median(replies) * 1000:.1f} ms, "
        f"max {max(replies) * 1000:.1f} ms over {len(replies)}; bystander {len(latencies)} steps, "
        f"p50 {statistics.median(latencies) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, "
        f"max {max(latencies) * 1000:.1f} ms"
    )
    assert statistics.median(replies) < within, replies
    assert max(latencies) < 1.0
    healthy_episode(url)


# -- item 4: origins ---------------------------------------------------------------------------------


def origin_cases(port: int) -> list[tuple[str | None, bool]]:
    return [
        (None, True),
        (f"http://127.0.0.1:{port}", True),
        (f"http://localhost:{port}", True),
        (f"http://[::1]:{port}", True),
        ("https://app.example", True),  # listed
        ("HTTPS://APP.EXAMPLE/", True),  # the same origin, written differently
        ("https://evil.example", False),
        (f"http://127.0.0.1:{port + 1}", False),  # another local service
        (f"http://evil.example:{port}", False),  # a DNS-rebinding page
        ("http://127.0.0.1", False),
        ("null", False),
        ("file://", False),
    ]


@pytest.mark.timeout(90)
def test_foreign_origins_are_refused_on_every_route():
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    with running_server(allowed_origins=["https://app.example"]) as base:
        port = int(base.rsplit(":", 1)[1])
        for origin, allowed in origin_cases(port):
            headers = {} if origin is None else {"origin": origin}
            if allowed:
                with Session(base, origin=origin) as session:
                    assert session.send("reset", {"scenario": SCENARIO})["type"] == "observation"
            else:
                with pytest.raises(InvalidStatus) as refused:
                    Session(base, origin=origin)
                assert refused.value.response.status_code == 403
                assert b"--allow-origin" in refused.value.response.body
            for method, path in (("POST", "/agent/mcp"), ("POST", "/reset"), ("GET", "/health")):
                response = httpx.request(method, base + path, headers=headers, json={}, timeout=30)
                assert (response.status_code == 403) == (not allowed), (origin, path, response.text)

        async def mcp_episode(origin: str) -> bool:
            transport = StreamableHttpTransport(f"{base}/agent/mcp", headers={"origin": origin})
            async with Client(transport) as client:
                first = await client.call_tool("reset", {"scenario": SCENARIO})
                return first.structured_content["task_id"] == SCENARIO

        assert asyncio.run(mcp_episode(f"http://localhost:{port}"))
        with pytest.raises(Exception, match="403"):
            asyncio.run(mcp_episode("https://evil.example"))
        healthy_episode(base)


@pytest.mark.timeout(60)
def test_any_origin_when_told(url):
    with running_server(allowed_origins=["*"]) as base:
        with Session(base, origin="https://anywhere.example") as session:
            assert session.send("reset", {"scenario": SCENARIO})["type"] == "observation"
    with pytest.raises(InvalidStatus):
        Session(url, origin="https://anywhere.example")  # the default server refuses it
    healthy_episode(url)


def test_allowed_origins_come_from_the_environment(monkeypatch):
    from schemashift.server.app import settings_from_environment

    monkeypatch.setenv("SCHEMASHIFT_ALLOWED_ORIGINS", "https://a.example, https://b.example:8443,")
    assert settings_from_environment()["allowed_origins"] == ["https://a.example", "https://b.example:8443"]
    monkeypatch.delenv("SCHEMASHIFT_ALLOWED_ORIGINS")
    assert settings_from_environment()["allowed_origins"] == []


@pytest.mark.parametrize(
    "variable, value",
    [
        ("SCHEMASHIFT_MAX_SESSIONS", "many"),
        ("SCHEMASHIFT_MAX_SESSIONS", "0"),
        ("SCHEMASHIFT_SESSION_TIMEOUT_S", "-1"),
        ("SCHEMASHIFT_SESSION_TIMEOUT_S", "inf"),
        ("SCHEMASHIFT_READ_TIMEOUT_S", "0"),
        ("SCHEMASHIFT_READ_TIMEOUT_S", "nan"),
    ],
)
def test_the_servers_own_entry_point_refuses_bad_settings_in_one_line(variable, value):
    """`python -m schemashift.server.app` (the OpenEnv layout's `server` script) reads the same
    variables as `schemashift serve`, through the same check: a usage error, not a traceback."""
    env = {**os.environ, variable: value, "PORT": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "schemashift.server.app"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert f"${variable} is {value!r}" in done.stderr and "Traceback" not in done.stderr


# -- item 5: messages over the limit, however large, get MESSAGE_TOO_LARGE ---------------------------


def fragments(total: int, piece: int = 1 << 20):
    """A text message of `total` bytes sent as fragments, so the client never holds all of it."""
    yield '{"type": "step", "data": {"raw": "'
    sent = 0
    while sent < total:
        yield "x" * min(piece, total - sent)
        sent += piece
    yield '"}}'


OVERSIZED = [
    ("one byte over", '{"type": "step", "data": {"raw": "' + "x" * (MAX_MESSAGE_BYTES - 36) + '"}}'),
    ("over the old 4 MiB transport cap", json.dumps({"type": "step", "data": {"raw": "x" * (5 << 20)}})),
    ("over uvicorn's 16 MiB default", "y" * (20 << 20)),
    ("binary", b"\xff" * (6 << 20)),
    ("64 MiB in fragments", fragments(64 << 20)),
    ("fragments one byte over", fragments(MAX_MESSAGE_BYTES - 36, 1 << 18)),
]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, frame", OVERSIZED, ids=[c[0] for c in OVERSIZED])
def test_messages_over_the_limit_get_an_error_frame_and_the_session_goes_on(url, name, frame):
    with Session(url) as session:
        assert session.send("reset", {"scenario": SCENARIO, "seed": 3})["type"] == "observation"
        assert session.send("step", INSPECT)["type"] == "observation"
        reply = session.send_raw(frame)
        assert reply["data"]["code"] == "MESSAGE_TOO_LARGE", reply
        assert str(MAX_MESSAGE_BYTES) in reply["data"]["message"]
        assert step_count(session) == 1
        assert session.send("step", COMPLETE)["data"]["done"] is True
    healthy_episode(url)


@pytest.mark.timeout(60)
def test_a_message_of_exactly_the_limit_is_served(url):
    with Session(url) as session:
        assert session.send("reset", {"scenario": SCENARIO, "seed": 3})["type"] == "observation"
        frame = '{"type": "step", "data": {"raw": "' + "x" * (MAX_MESSAGE_BYTES - 37) + '"}}'
        assert len(frame) == MAX_MESSAGE_BYTES
        in_fragments = fragments(MAX_MESSAGE_BYTES - 37, 1 << 18)
        for message in (frame, in_fragments):
            reply = session.send_raw(message)
            # read in full and parsed: refused by the per-step budget (64 KiB), not by the 1 MiB limit
            assert "bytes per step" in reply["data"]["message"], reply
        assert session.send("step", COMPLETE)["data"]["done"] is True


ORIGINS = ("https://flag.example", "https://env.example", "https://other.example")


def serve_origins(flags: list[str], env_origins: str) -> dict[str, bool]:
    """Which origins a `schemashift serve` started with `flags` and SCHEMASHIFT_ALLOWED_ORIGINS accepts."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from server_support import free_port

    repo = Path(__file__).resolve().parents[2]
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(repo), "SCHEMASHIFT_ALLOWED_ORIGINS": env_origins}
    command = [sys.executable, "-m", "schemashift.cli", "serve", "--port", str(port), *flags]
    process = subprocess.Popen(command, env=env, cwd=repo, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "the server exited"
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        accepted = {}
        for origin in ORIGINS:
            response = httpx.get(f"{base}/health", headers={"origin": origin}, timeout=10)
            accepted[origin] = response.status_code == 200
        healthy_episode(base)
        return accepted
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_serve_takes_allowed_origins_from_its_flag_else_the_environment():
    flagged = serve_origins(["--allow-origin", "https://flag.example"], "https://env.example")
    assert flagged == dict(zip(ORIGINS, (True, False, False), strict=True))
    from_env = serve_origins([], "https://env.example, https://flag.example")
    assert from_env == dict(zip(ORIGINS, (True, True, False), strict=True))
