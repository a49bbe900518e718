"""The Host allow-list (issue 34): a page that rebinds its own DNS name to the server's address
sends that name as Host, and gets 421 on every route, HTTP and WebSocket alike."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket

import pytest
from server_support import running_server

from schemashift.server.limits import host_name

GET_ROUTES = ("/health", "/metadata", "/schema", "/state", "/docs", "/openapi.json")


def request(url: str, path: str, host: str | None, method: str = "GET", body: bytes | None = None):
    port = int(url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=host is not None)
        if host is not None:
            connection.putheader("Host", host)
        if body is not None:
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def handshake_status(url: str, host: str) -> int:
    """The status of a WebSocket handshake on /ws sent with this Host (a raw socket: clients set
    the Host themselves)."""
    port = int(url.rsplit(":", 1)[1])
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        return int(sock.recv(4096).split(b" ", 2)[1])


@pytest.fixture(scope="module")
def url():
    with running_server(allowed_hosts=["env.example"]) as base:
        yield base


@pytest.mark.parametrize("path", GET_ROUTES)
def test_a_rebinding_host_gets_421_on_every_get_route(url, path):
    port = url.rsplit(":", 1)[1]
    status, body = request(url, path, f"evil.example:{port}")
    assert status == 421, (path, status)
    assert "Host" in json.loads(body)["detail"]
    assert request(url, path, f"127.0.0.1:{port}")[0] != 421


def test_a_rebinding_host_cannot_post_nor_open_a_websocket(url):
    port = url.rsplit(":", 1)[1]
    assert request(url, "/reset", f"evil.example:{port}", "POST", b"{}")[0] == 421
    assert handshake_status(url, f"evil.example:{port}") == 421
    assert handshake_status(url, f"localhost:{port}") == 101


@pytest.mark.parametrize(
    "host",
    ["localhost", "127.0.0.1", "[::1]", "localhost:1", "127.0.0.1:8000", "ENV.example", "env.example:9"],
)
def test_loopback_names_and_listed_names_are_served(url, host):
    assert request(url, "/health", host)[0] == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "env.example.evil"]
)
def test_other_names_are_refused(url, host):
    assert request(url, "/health", host)[0] == 421


def test_any_host_when_told():
    with running_server(allowed_hosts=["*"]) as base:
        assert request(base, "/health", "evil.example")[0] == 200


def test_host_names_lose_their_port_and_brackets():
    assert host_name(b"Example.COM:80") == "example.com"
    assert host_name(b"[::1]:8000") == "::1"
    assert host_name(b"::1") == "::1"
    assert host_name(b"127.0.0.1") == "127.0.0.1"


def test_allowed_hosts_come_from_the_environment(monkeypatch):
    from schemashift.server.app import settings_from_environment

    monkeypatch.setenv("SCHEMASHIFT_ALLOWED_HOSTS", "a.example, b.example")
    assert settings_from_environment()["allowed_hosts"] == ["a.example", "b.example"]
