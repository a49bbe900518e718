"""Fair service (issue 34): a client that floods the server with messages is closed or slowed
down, and the other sessions' steps go on in milliseconds."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import textwrap
import time

from server_support import Session, running_server
from websockets.sync.client import connect

from schemashift.server.limits import BACKLOG_CLOSE_CODE, MAX_BACKLOG

STATE = json.dumps({"type": "state"})
INSPECT = {"type": "inspect_schema", "inspect": {"tool": "mail"}}
#: the bystander's p99 step under a flood; a loaded 2-CPU CI machine gets ample room (the flood
#: took it to seconds before issue 34; here it is 10 to 35 ms, see benchmarks/server_flood.py)
BYSTANDER_P99_S = 0.25

#: flooding clients in a process of their own: each pipelines state messages without waiting
#: and opens a new connection whenever the server closes one, until the time is up
FLOODER = textwrap.dedent(
    """
    import json, logging, sys, threading, time
    from websockets.sync.client import connect
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    url, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    stop, closes = time.monotonic() + seconds, []
    def one():
        while time.monotonic() < stop:
            try:
                with connect(url, max_size=None, proxy=None, open_timeout=10) as ws:
                    for _ in range(20000):
                        ws.send('{"type": "state"}')
                    while True:
                        ws.recv(timeout=5)
            except Exception:
                pass
            closes.append(ws.close_code)
    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(json.dumps(closes))
    """
)


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


def test_a_client_that_pipelines_past_the_backlog_is_closed_and_others_go_on():
    # a raw socket: the whole flood goes out in one write, and every byte back is read
    with running_server() as url:
        port = int(url.rsplit(":", 1)[1])
        key = base64.b64encode(os.urandom(16)).decode()
        payload = STATE.encode()
        frame = bytes([0x81, 0x80 | len(payload)]) + b"\0\0\0\0" + payload  # masked, zero mask
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(
                f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            assert b" 101 " in sock.recv(4096)  # the flood starts once the session is open
            sock.sendall(frame * (20 * MAX_BACKLOG))
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert b"BACKLOG_EXCEEDED" in received
        reason = f"inbound backlog over {MAX_BACKLOG} messages".encode()
        assert BACKLOG_CLOSE_CODE.to_bytes(2, "big") + reason in received  # the close frame
        assert received.count(b'"type":"state"') <= MAX_BACKLOG + 1  # the backlog was dropped
        with Session(url) as other:
            assert other.send("reset", {"seed": 1})["type"] == "observation"
            assert other.send("state")["data"]["seed"] == 1


def test_a_client_within_the_backlog_is_answered_in_full():
    with running_server() as url, connect(ws_url(url), max_size=None, proxy=None) as ws:
        for _ in range(MAX_BACKLOG // 2):
            ws.send(STATE)
        replies = [json.loads(ws.recv(timeout=10)) for _ in range(MAX_BACKLOG // 2)]
        assert {reply["type"] for reply in replies} == {"state"}


def test_a_session_over_its_message_budget_is_slowed_not_refused():
    rate, burst, sent = 200.0, 20, 60
    with running_server(message_rate=rate, message_burst=burst) as url, Session(url) as session:
        started = time.perf_counter()
        replies = [session.send("state") for _ in range(sent)]
        elapsed = time.perf_counter() - started
    assert {reply["type"] for reply in replies} == {"state"}
    assert elapsed >= (sent - burst) / rate * 0.9, elapsed  # reads count against the budget


def test_a_bystander_steps_in_milliseconds_while_three_clients_flood():
    with running_server() as url, Session(url) as bystander:
        bystander.send("reset", {"seed": 0})
        flood = subprocess.Popen(
            [sys.executable, "-c", FLOODER, ws_url(url), "3", "3.0"], stdout=subprocess.PIPE, text=True
        )
        time.sleep(0.5)
        latencies, stop = [], time.monotonic() + 2.0
        while time.monotonic() < stop:
            started = time.perf_counter()
            reply = bystander.send("step", INSPECT)
            latencies.append(time.perf_counter() - started)
            if reply["type"] != "observation" or reply["data"]["done"]:
                bystander.send("reset", {"seed": 0})
        out, _ = flood.communicate(timeout=60)
    closes = json.loads(out)
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
    print(
        f"\nbystander under 3 flooding clients: {len(latencies)} steps, p50 {p50 * 1e3:.2f} ms, "
        f"p99 {p99 * 1e3:.2f} ms, max {latencies[-1] * 1e3:.2f} ms; flooders closed "
        f"{closes.count(BACKLOG_CLOSE_CODE)} times"
    )
    assert closes.count(BACKLOG_CLOSE_CODE) >= 3, closes
    assert p99 < BYSTANDER_P99_S, (p50, p99)


def test_a_session_cannot_grow_past_its_step_budget():
    """Steps over MAX_STEP_BYTES are refused and not applied; an episode of the largest allowed
    steps keeps its replies and the server's memory within a few times max_steps x the budget."""
    import resource

    from schemashift.server.limits import MAX_STEP_BYTES

    def step(session: Session, size: int) -> tuple[dict, int]:
        def action(text: str) -> str:
            report = {"tool": "mail", "drift_kind": "tool_removal", "description": text}
            return json.dumps({"type": "step", "data": {"type": "report_drift", "report": report}})

        frame = action("x" * size)
        frame = action("x" * (size - (len(frame) - size)))
        assert len(frame) == size
        session.ws.send(frame)
        reply = session.ws.recv(timeout=30)
        return json.loads(reply), len(reply)

    with running_server() as url, Session(url) as session:
        session.send("reset", {"seed": 0})
        refused, _ = step(session, MAX_STEP_BYTES + 1)
        assert refused["data"]["code"] == "MESSAGE_TOO_LARGE", refused
        assert "per step" in refused["data"]["message"]
        assert session.send("state")["data"]["step_count"] == 0  # not applied
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        largest, steps = 0, 0
        while True:
            reply, size = step(session, MAX_STEP_BYTES)
            assert reply["type"] == "observation", reply
            largest, steps = max(largest, size), steps + 1
            if reply["data"]["done"]:
                break
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    print(
        f"\n{steps} steps of {MAX_STEP_BYTES} bytes: largest reply {largest / 1024:.0f} KiB, "
        f"peak RSS (server and client) grew {grown_kib / 1024:.1f} MiB"
    )
    assert largest < 16 * MAX_STEP_BYTES
    assert grown_kib * 1024 < 64 * steps * MAX_STEP_BYTES
