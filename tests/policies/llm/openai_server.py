"""A real OpenAI-compatible chat completion server for the tests (standard library HTTP on
127.0.0.1, a free port, one thread per connection).

It answers POST /v1/chat/completions deterministically: the reply is a function of the
request (`reply` callable; by default a JSON action echoing the last user message's length): a
text, or a dict that is the assistant message's fields (`tool_calls` for a native call), and
the usage counts are whitespace tokens of the prompt and the reply. Behaviour is scripted per
request with a queue of `Step`s (status, Retry-After, delay, body) consumed in arrival order;
when the queue is empty every request succeeds. It records every request (path, headers, JSON
body, arrival time), the maximum number of requests in flight at once, and when a client closed
the connection of a request it was still waiting for (`left`: a delayed request is then never
answered, as a server that cancels abandoned work would do).

Run as a script it serves until interrupted and prints its base URL, for trying a client by hand:
`python tests/policies/llm/openai_server.py`.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Step:
    """How the server answers one request: after `delay_s`, `status` with `body` (None: a chat
    completion when status is 200, an OpenAI-style error otherwise) and optional headers."""

    status: int = 200
    delay_s: float = 0.0
    retry_after: str | None = None
    body: dict | str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict | None
    at: float


def default_reply(body: dict) -> str:
    users = [m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"]
    last = users[-1] if users else ""
    return json.dumps({"type": "complete_task", "complete": {"summary": f"{body.get('model')} {len(last)}"}})


class OpenAIServer:
    """Context manager: `with OpenAIServer() as server: server.base_url ...`."""

    def __init__(
        self,
        reply: Callable[[dict], str | dict] = default_reply,
        *,
        api_key: str | None = None,
        usage: bool = True,
    ):
        self.reply = reply
        self.usage = usage  # False: answers carry no usage counts, as some servers do
        self.api_key = api_key  # when set, requests without this Bearer key get 401
        self.requests: list[Recorded] = []
        self.max_in_flight = 0
        self.left: list[float] = []  # when clients closed connections of unanswered requests
        self._in_flight = 0
        self._script: deque[Step] = deque()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-server",
            daemon=True,
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *steps: Step) -> None:
        """Answer the next requests with `steps`, in arrival order."""
        with self._lock:
            self._script.extend(steps)

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if urlsplit(r.path).path == "/v1/chat/completions"]

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
                pass

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "any", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append(
                        Recorded(self.path, dict(self.headers.items()), body, time.monotonic())
                    )
                    step = server._script.popleft() if server._script else Step()
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                self._counted = True
                try:
                    if step.delay_s and self._client_leaves_within(step.delay_s):
                        with server._lock:
                            server.left.append(time.monotonic())
                        return
                    self._answer(step, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)
                finally:
                    self._leave()

            def _leave(self) -> None:
                """The request is no longer in flight: counted off before its answer is written,
                since a client may send its next request as soon as it has read the answer."""
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server._in_flight -= 1

            def _client_leaves_within(self, seconds: float) -> bool:
                """Wait `seconds`, or less if the client closes the connection (True then)."""
                deadline = time.monotonic() + seconds
                while (left := deadline - time.monotonic()) > 0:
                    readable, _, _ = select.select([self.connection], [], [], left)
                    if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                return False

            def _answer(self, step: Step, body: dict | None) -> None:
                headers = dict(step.headers)
                if step.retry_after is not None:
                    headers["Retry-After"] = step.retry_after
                if urlsplit(self.path).path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}}, headers)
                if (
                    server.api_key is not None
                    and self.headers.get("Authorization") != f"Bearer {server.api_key}"
                ):
                    given = self.headers.get("Authorization", "")
                    # Like some real servers, echo what was sent: the client must scrub it.
                    return self._send(401, {"error": {"message": f"Incorrect API key provided: {given}"}})
                if step.status != 200:
                    payload = step.body or {
                        "error": {"message": f"scripted status {step.status}", "code": step.status}
                    }
                    return self._send(step.status, payload, headers)
                if body is None or not isinstance(body.get("messages"), list):
                    return self._send(400, {"error": {"message": "body must be JSON with a messages list"}})
                if step.body is not None:
                    return self._send(200, step.body, headers)
                reply = server.reply(body)
                message = {"role": "assistant", **reply} if isinstance(reply, dict) else None
                text = json.dumps(reply) if message else reply
                prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
                usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
                if body.get("stream"):
                    wanted = (body.get("stream_options") or {}).get("include_usage")
                    return self._stream(
                        message or {"content": text}, usage if server.usage and wanted else None
                    )
                return self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": message or {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": len(prompt.split()),
                            "completion_tokens": len(text.split()),
                            "total_tokens": len(prompt.split()) + len(text.split()),
                        }
                        if server.usage
                        else None,
                    },
                    headers,
                )

            def _stream(self, message: dict, usage: dict | None) -> None:
                """The answer as OpenAI streams it: server-sent events of deltas (the content in
                two pieces, each call's name first and its arguments in two pieces), then a chunk
                with the finish reason, one with the usage when asked for, and [DONE]."""
                content = message.get("content") or ""
                deltas = [{"role": "assistant"}, {"content": content[:5]}, {"content": content[5:]}]
                for index, call in enumerate(message.get("tool_calls") or []):
                    arguments = call["function"]["arguments"]
                    deltas.append(
                        {"tool_calls": [{"index": index, "function": {"name": call["function"]["name"]}}]}
                    )
                    for piece in (arguments[:3], arguments[3:]):
                        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                if usage is not None:
                    chunks.append({"choices": [], "usage": usage})
                self._leave()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
                self.wfile.write("".join(events).encode())
                self.close_connection = True

            def _send(self, status: int, payload: dict | str, headers: dict[str, str] | None = None) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self._leave()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


if __name__ == "__main__":
    with OpenAIServer() as running:
        print(running.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
