"""Sessions last as long as their clients and no longer (issue 17, items 2, 3, 6 and 9).

Every class of abuse is followed by a healthy episode on a fresh session. Real servers on
127.0.0.1 only, bounded loops, a timeout on every test.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest
from server_support import Session, running_server, serving
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from schemashift.env.rulesets import get_ruleset
from schemashift.rollout.backends import CapacityReached, RemoteBackend
from schemashift.server.app import MCP_MOUNT, build_app

pytest.importorskip("fastmcp")
from fastmcp import Client  # noqa: E402

SCENARIO = get_ruleset("legacy").scenario_ids()[0]
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def healthy_episode(url: str) -> None:
    """A fresh WebSocket session plays an episode to its end."""
    with Session(url) as session:
        assert session.send("reset", {"scenario": SCENARIO, "seed": 1})["type"] == "observation"
        reply = session.send("step", {"type": "complete_task", "complete": {"summary": "done"}})
        assert reply["type"] == "observation" and reply["data"]["done"] is True


async def mcp_episode(url: str, seed: int) -> dict:
    """An MCP client opens a session, plays an episode and leaves (DELETE)."""
    async with Client(f"{url}/agent/mcp") as client:
        await client.call_tool("reset", {"scenario": SCENARIO, "seed": seed})
        await client.call_tool("inspect_schema", {"tool": "mail"})
        done = await client.call_tool("complete_task", {"summary": "done"})
        return done.structured_content


#: the session timeout of the MCP tests: a fresh MCP client's handshake (initialize, its GET
#: stream) comes before its first reset, which is what starts its clock of play; under a loaded
#: CI run that handshake has taken over a second, and a 1 s timeout reaped the new client
MCP_TIMEOUT_S = 2.0

MCP_OPENING = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def open_mcp_session(http: httpx.Client, url: str) -> dict[str, str]:
    """Open an MCP session by hand (initialize, then the initialized notification); returns the
    headers its later requests carry."""
    opened = http.post(f"{url}/agent/mcp", json=MCP_OPENING, headers=MCP_HEADERS)
    assert opened.status_code == 200, opened.text
    headers = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(f"{url}/agent/mcp", json=initialized, headers=headers).status_code == 202
    return headers


# -- item 3: session ids ----------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_openenv_session_methods_over_http_are_refused_and_hold_no_slot():
    with running_server(max_sessions=1) as url:
        for body in (
            {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "openenv/session/close", "params": {"session_id": "x"}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"session_id": "x"}},
            {"jsonrpc": "2.0", "id": 4, "method": "\\u006fpenenv/session/create", "params": {}},
        ):
            text = json.dumps(body).replace("\\\\u006f", "\\u006f")
            reply = httpx.post(f"{url}/mcp", content=text, headers={"content-type": "application/json"})
            assert reply.status_code == 403, (body, reply.text)
            assert "turned off" in reply.json()["detail"]
        # With one slot and four creation attempts, the slot is still free.
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_attaching_to_a_session_by_id_is_refused():
    with running_server(max_sessions=2) as url:
        for query in ("session_id=anything", "session_id=", "a=1&session_id=x"):
            ws_url = url.replace("http://", "ws://") + f"/ws?{query}"
            with connect(ws_url, proxy=None, open_timeout=10) as attacher:
                frame = json.loads(attacher.recv(timeout=10))
                assert frame["data"]["code"] == "SESSION_ERROR"
                assert "turned off" in frame["data"]["message"]
                with pytest.raises(ConnectionClosed):
                    attacher.recv(timeout=10)
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_a_connection_cannot_close_or_name_another_session():
    with running_server(max_sessions=2) as url, Session(url) as victim, Session(url) as attacker:
        assert victim.send("reset", {"scenario": SCENARIO})["type"] == "observation"
        for rpc in (
            {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "openenv/session/close", "params": {"session_id": "v"}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"session_id": "v", "name": "x"}},
        ):
            reply = attacker.send("mcp", rpc)
            assert reply["type"] == "error" and reply["data"]["code"] == "SESSION_ERROR"
        # The same, spelled with JSON escapes, so that the text never says "session".
        for text in (
            '{"type": "mcp", "data": {"jsonrpc": "2.0", "id": 4, "method": "openenv/\\u0073ession/create"}}',
            '{"type": "mcp", "data": {"jsonrpc": "2.0", "id": 5, "method": "tools/list", '
            '"params": {"\\u0073ession_id": "v"}}}',
        ):
            reply = attacker.send_raw(text)
            assert reply["type"] == "error" and reply["data"]["code"] == "SESSION_ERROR", text
        # Both sessions go on: the refusals were error frames, not closed connections.
        assert attacker.send("reset", {"scenario": SCENARIO})["type"] == "observation"
        reply = victim.send("step", {"type": "complete_task", "complete": {"summary": "x"}})
        assert reply["data"]["done"] is True
    with running_server() as url:
        healthy_episode(url)


# -- item 9: idle and slow clients ------------------------------------------------------------------
def held_open(url: str, payload: bytes, wait_s: float) -> tuple[bytes, float]:
    """Send part of a request, then wait: what the server answers, and after how long."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        sock.sendall(payload)
        started, received = time.monotonic(), b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            received += chunk
        return received, time.monotonic() - started


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n",
        b"POST /step HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: 100\r\n\r\n{",
        b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\nGET /hea",  # a kept connection's next request
    ],
    ids=["silent", "half-headers", "half-body", "half-next-request"],
)
def test_half_sent_requests_are_closed_after_the_read_timeout(payload):
    with running_server(read_timeout_s=1.0) as url:
        received, waited = held_open(url, payload, wait_s=10)
        assert waited < 5, "the server held a half-sent request open"
        if payload:
            assert b"408 Request Timeout" in received
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_many_half_sent_requests_do_not_hold_the_server():
    with running_server(read_timeout_s=1.0) as url:
        host, port = url.removeprefix("http://").split(":")
        socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(100)]
        try:
            for sock in socks:
                sock.sendall(b"POST /step HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 50\r\n\r\n{")
            healthy_episode(url)  # served while they are held
            time.sleep(2)
            closed = sum(1 for sock in socks if sock.recv(65536).startswith(b"HTTP/1.1 408"))
            assert closed == len(socks)
        finally:
            for sock in socks:
                sock.close()
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_idle_websockets_cannot_lock_the_server_for_longer_than_the_timeout():
    with running_server(max_sessions=4, session_timeout_s=1.0) as url:
        idlers = [Session(url) for _ in range(4)]
        try:
            with Session(url) as refused:
                assert refused.send("reset", {"scenario": SCENARIO})["data"]["code"] == "CAPACITY_REACHED"
            time.sleep(2.5)
            for idler in idlers:
                assert json.loads(idler.ws.recv(timeout=5))["data"]["code"] == "SESSION_TIMEOUT"
        finally:
            for idler in idlers:
                idler.close()
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_a_websocket_that_only_reads_is_closed_after_the_session_timeout():
    """Only an applied reset or step counts as playing: state reads, refused and unknown messages
    and OpenEnv's JSON-RPC do not keep a slot."""
    polls = [
        json.dumps({"type": "state"}),
        json.dumps({"type": "step", "data": {}}),  # VALIDATION_ERROR
        json.dumps({"type": "step", "data": {"type": "no_such_action"}}),  # EXECUTION_ERROR
        json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}),
        json.dumps({"type": "nope"}),
        "[" * 100,
    ]
    with running_server(max_sessions=1, session_timeout_s=1.0) as url, Session(url) as poller:
        started = time.monotonic()
        assert poller.send("reset", {"scenario": SCENARIO})["type"] == "observation"
        assert poller.send("step", {"type": "complete_task", "complete": {"summary": "x"}})["data"]["done"]
        frame: dict = {}
        for poll in polls * 10:  # a poll every 0.1 s, for at most 6 s
            try:
                frame = poller.send_raw(poll)
            except ConnectionClosed:
                break
            if frame["data"].get("code") == "SESSION_TIMEOUT":
                break
            time.sleep(0.1)
        assert frame["data"].get("code") == "SESSION_TIMEOUT", "polling held the session"
        assert time.monotonic() - started < 3
        healthy_episode(url)


#: messages that play nothing: each is refused or only reads (a search draws sequences of them)
NOT_PLAYING = (
    json.dumps({"type": "state"}),
    json.dumps({"type": "step", "data": {}}),
    json.dumps({"type": "step", "data": {"type": "no_such_action"}}),
    json.dumps({"type": "step", "data": {"type": "complete_task", "complete": {"summary": "again"}}}),
    json.dumps({"type": "reset", "data": {"scenario": "no_such_scenario"}}),
    json.dumps({"type": "reset", "data": {"scenario": SCENARIO, "seed": 1 << 70}}),
    json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}),
    json.dumps({"type": "close", "data": {"session_id": "someone-else"}}),
    json.dumps({"type": "nope"}),
    "[" * 100,
    "not json",
    b"\xff\xfe",
)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_sequence_of_messages_that_play_nothing_holds_a_slot(seed):
    """A random search over orders, mixes and paces of non-playing messages, sent after a
    finished episode (so a step on it is refused too): every sequence ends in SESSION_TIMEOUT
    within the timeout and its slack, and the slot serves a fresh episode."""
    import random

    draw = random.Random(seed)
    with running_server(max_sessions=1, session_timeout_s=1.0) as url:
        with Session(url) as poller:
            assert poller.send("reset", {"scenario": SCENARIO})["type"] == "observation"
            played = time.monotonic()
            finish = {"type": "complete_task", "complete": {"summary": "x"}}
            assert poller.send("step", finish)["data"]["done"]
            frame: dict = {}
            while time.monotonic() - played < 4:
                try:
                    if draw.random() < 0.1:
                        poller.ws.ping()
                        frame = {"data": {}}
                    else:
                        frame = poller.send_raw(draw.choice(NOT_PLAYING))
                except (ConnectionClosed, TimeoutError):
                    break
                if frame["data"].get("code") == "SESSION_TIMEOUT":
                    break
                time.sleep(draw.uniform(0.0, 0.3))
            assert frame["data"].get("code") == "SESSION_TIMEOUT", f"seed {seed}: polling held the session"
            assert time.monotonic() - played < 2.5
        healthy_episode(url)


# -- item 2: MCP sessions end with their clients ----------------------------------------------------
@pytest.mark.timeout(60)
def test_mcp_sessions_are_released_when_their_clients_leave():
    with running_server(max_sessions=2) as url:
        for seed in range(6):  # three times the capacity, one after another
            assert asyncio.run(mcp_episode(url, seed))["done"] is True
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_an_mcp_client_that_vanishes_is_released_after_the_session_timeout():
    with running_server(max_sessions=1, session_timeout_s=MCP_TIMEOUT_S) as url, httpx.Client() as http:
        first = http.post(f"{url}/agent/mcp", json=MCP_OPENING, headers=MCP_HEADERS)
        assert first.status_code == 200 and first.headers["mcp-session-id"]
        second = http.post(f"{url}/agent/mcp", json=MCP_OPENING, headers=MCP_HEADERS)
        assert second.status_code == 503  # the one session is taken; no DELETE ever comes
        time.sleep(2 * MCP_TIMEOUT_S + 0.5)
        assert asyncio.run(mcp_episode(url, 0))["done"] is True
        gone = http.post(
            f"{url}/agent/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**MCP_HEADERS, "mcp-session-id": first.headers["mcp-session-id"]},
        )
        assert gone.status_code == 404
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_an_mcp_client_holding_its_get_stream_open_is_released_after_the_session_timeout():
    """The stream of server notifications (GET) is a request in flight for as long as it is
    open; it must not keep a session that plays nothing. The reaped session's episode is dropped."""
    app = build_app(max_sessions=1, session_timeout_s=MCP_TIMEOUT_S)
    face = next(route.app for route in app.app.routes if getattr(route, "path", None) == MCP_MOUNT)
    with serving(app) as url, httpx.Client(timeout=10) as http:
        headers = open_mcp_session(http, url)
        assert len(face.sessions) == 1
        stream_headers = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
        started = time.monotonic()
        with http.stream("GET", f"{url}/agent/mcp", headers=stream_headers) as stream:
            assert stream.status_code == 200
            refused = http.post(f"{url}/agent/mcp", json=MCP_OPENING, headers=MCP_HEADERS)
            assert refused.status_code == 503  # the one session is held by the open stream
            for _ in stream.iter_bytes():  # until the server ends the stream (or the read times out)
                pass
        assert time.monotonic() - started < 2 * MCP_TIMEOUT_S + 3, "the open stream held the session"
        assert len(face.sessions) == 0
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert http.post(f"{url}/agent/mcp", json=listing, headers=headers).status_code == 404
        assert asyncio.run(mcp_episode(url, 0))["done"] is True
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_an_mcp_client_that_only_polls_is_released_after_the_session_timeout():
    """Requests that play nothing (ping, tools/list, a tool call refused before reset) do not
    count: only a reset or a step does."""
    with (
        running_server(max_sessions=1, session_timeout_s=MCP_TIMEOUT_S) as url,
        httpx.Client(timeout=10) as http,
    ):
        headers = open_mcp_session(http, url)
        refused_call = {"name": "inspect_schema", "arguments": {"tool": "mail"}}
        polls = [
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": refused_call},
        ]
        started = time.monotonic()
        for poll in polls * 30:  # a poll every 0.2 s, for at most 18 s
            if http.post(f"{url}/agent/mcp", json=poll, headers=headers).status_code != 200:
                break
            time.sleep(0.2)
        assert time.monotonic() - started < MCP_TIMEOUT_S + 2, "polling held the session"
        assert http.post(f"{url}/agent/mcp", json=polls[0], headers=headers).status_code == 404
        assert asyncio.run(mcp_episode(url, 0))["done"] is True


@pytest.mark.timeout(60)
def test_an_mcp_client_that_keeps_playing_keeps_its_session():
    async def play_slowly(url: str) -> list[bool]:
        async with Client(f"{url}/agent/mcp") as client:  # holds its GET stream open throughout
            await client.call_tool("reset", {"scenario": SCENARIO, "seed": 0})
            errors = []
            for _ in range(8):  # 6.4 s of play, over three times the session timeout
                await asyncio.sleep(0.8)
                result = await client.call_tool("inspect_schema", {"tool": "mail"}, raise_on_error=False)
                errors.append(result.is_error)
            return errors

    with running_server(max_sessions=1, session_timeout_s=MCP_TIMEOUT_S) as url:
        assert asyncio.run(play_slowly(url)) == [False] * 8


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_200_sequential_and_64_concurrent_mcp_clients_are_all_served():
    with running_server(max_sessions=64) as url:
        started = time.monotonic()

        async def concurrent() -> list[dict]:
            return await asyncio.gather(*(mcp_episode(url, seed) for seed in range(64)))

        async def sequential() -> list[dict]:
            return [await mcp_episode(url, seed) for seed in range(200)]

        assert all(grade["done"] for grade in asyncio.run(concurrent()))
        middle = time.monotonic()
        # Had any of the 64 kept its session, the server would be full and refuse these.
        assert all(grade["done"] for grade in asyncio.run(sequential()))
        print(
            f"64 concurrent MCP clients in {middle - started:.1f} s, "
            f"200 sequential in {time.monotonic() - middle:.1f} s"
        )
        healthy_episode(url)


# -- item 6: the remote client at a full server -----------------------------------------------------
@pytest.mark.timeout(60)
def test_the_remote_backend_reports_capacity_after_bounded_retries():
    with running_server(max_sessions=1) as url, Session(url) as holder:
        assert holder.send("reset", {"scenario": SCENARIO})["type"] == "observation"
        for _ in range(20):  # the refusal is read every time, never "lost the session"
            backend = RemoteBackend(url, capacity_wait_s=0)
            with pytest.raises(CapacityReached, match="CAPACITY_REACHED"):
                backend.reset("legacy", SCENARIO, 0)
            backend.close()
        backend = RemoteBackend(url, capacity_wait_s=1.5)
        started = time.monotonic()
        with pytest.raises(CapacityReached, match=r"gave up after \d+ tries"):
            backend.reset("legacy", SCENARIO, 0)
        assert 1.4 < time.monotonic() - started < 4
        backend.close()


@pytest.mark.timeout(60)
def test_the_remote_backend_gets_a_slot_freed_while_it_waits():
    import threading

    with running_server(max_sessions=1) as url:
        holder = Session(url)
        assert holder.send("reset", {"scenario": SCENARIO})["type"] == "observation"
        threading.Timer(1.0, holder.close).start()
        backend = RemoteBackend(url, capacity_wait_s=20)
        try:
            view = backend.reset("legacy", SCENARIO, 0)
            assert view["task_id"] == SCENARIO
        finally:
            backend.close()
        healthy_episode(url)


@pytest.mark.timeout(60)
def test_the_remote_backend_replaces_a_session_the_server_closed_for_idling():
    with running_server(session_timeout_s=1.0) as url:
        backend = RemoteBackend(url)
        try:
            backend.reset("legacy", SCENARIO, 0)
            time.sleep(2)
            assert backend.reset("legacy", SCENARIO, 1)["task_id"] == SCENARIO
        finally:
            backend.close()
