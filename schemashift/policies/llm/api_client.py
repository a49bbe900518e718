"""Client of OpenAI-compatible chat completion APIs (vLLM's server, Ollama, the HF router, OpenAI).

Standard library only (urllib), so the API policy needs no extra package. What an evaluation
against a shared, rate-limited endpoint needs:

- a concurrency cap shared by every call on one client (`complete_many` runs its requests
  concurrently under it);
- a timeout per attempt, and retries with exponential backoff and jitter on 408, 429, 5xx,
  connection errors and timeouts, honouring `Retry-After` (seconds or an HTTP date) and
  `retry-after-ms` up to `max_backoff_s`;
- requests that are given up are cancelled the only way HTTP allows, by closing their
  connection: an attempt past its timeout, and every request in flight when `close()` is called
  or `complete_many` is interrupted (Ctrl-C), so no abandoned request keeps a server busy on our
  account where the server stops work for a client that left (with `stream=True` the answer is
  read as server-sent events: `transformers serve` stops generating only for a streamed request
  whose client left);
- `ApiError` with the status and the server's own message on any other 4xx and after the last
  retry;
- the key read from the environment variable named by `api_key_env` and sent only as a Bearer
  header: it never appears in exceptions, logs, `repr` or `identity()`, which keys the response
  cache. Messages taken from a server's answer have the key blanked out, in case it is echoed.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from schemashift.policies.llm.completion import Completion
from schemashift.policies.llm.functions import call_text

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_REDACTED = "***"
# Keyword arguments of `complete`, which are also the keys of a `complete_many` request.
_REQUEST_KEYS = frozenset({"messages", "max_tokens", "temperature", "top_p", "seed", "stop", "tools"})


class ApiError(RuntimeError):
    """A request that failed for good: `status` is the HTTP status (None for a connection error
    or timeout) and `attempts` how many times it was sent."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class _Retryable(Exception):
    """One failed attempt that may succeed when repeated."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def _endpoint(base_url: str) -> tuple[str, str]:
    """(request URL of /chat/completions, the base URL as identity shows it: no query)."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ValueError("base_url must be a non-empty URL such as http://127.0.0.1:8000/v1")
    parts = urllib.parse.urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "base_url must be an http:// or https:// URL with a host, such as http://127.0.0.1:8000/v1"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "base_url must not carry credentials; put the key in an environment variable named by api_key_env"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):
        path = path[: -len("/chat/completions")]
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc.lower(), path, "", ""))
    url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, f"{path}/chat/completions", parts.query, ""))
    return url, base


def _retry_after(headers) -> float | None:
    """Seconds the server asks us to wait, from retry-after-ms or Retry-After (seconds or date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_message(body: bytes) -> str:
    """The server's own words from an error body: OpenAI's {"error": {"message"}}, vLLM's
    {"message"}, Ollama's {"error": "..."}, or the raw text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500] or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if isinstance(error, str) and error:
            return error[:500]
        if data.get("message"):
            return str(data["message"])[:500]
        if data.get("detail"):
            return str(data["detail"])[:500]
    return text[:500]


def _text_of(message: dict) -> str:
    """The assistant's text; tool calls (from a server that answers with them) become
    <tool_call> tags, which the action parser reads like any other model output."""
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls") or []
    tags = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        tags.append(call_text(function.get("name"), arguments))
    return "\n".join(filter(None, [text, *tags]))


def _check_messages(messages) -> list[dict]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
    for i, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("role"), str)
            or "content" not in message
        ):
            raise ValueError(f"messages[{i}] must be a dict with a string 'role' and a 'content'")
    return list(messages)


class _TrackedHTTP(urllib.request.HTTPHandler):
    """urllib's HTTP handler, with connections the client can close under a waiting thread."""

    def __init__(self, client: ChatClient):
        super().__init__()
        self._client = client

    def http_open(self, req):
        return self.do_open(self._client._connection(http.client.HTTPConnection), req)


class _TrackedHTTPS(urllib.request.HTTPSHandler):
    """urllib's HTTPS handler, with connections the client can close under a waiting thread."""

    def __init__(self, client: ChatClient):
        super().__init__()
        self._client = client

    def https_open(self, req):
        return self.do_open(self._client._connection(http.client.HTTPSConnection), req, context=self._context)


class ChatClient:
    """Chat completions from one model behind one OpenAI-compatible endpoint; thread-safe."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        max_concurrency: int = 4,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        stream: bool = False,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ):
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-empty model id")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be at least 0, got {max_retries}")
        if backoff_s < 0 or max_backoff_s < 0:
            raise ValueError("backoff_s and max_backoff_s must not be negative")
        self.model = model
        self.url, self.base_url = _endpoint(base_url)
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.stream = bool(stream)
        self._key = None
        if api_key_env is not None:
            key = os.environ.get(api_key_env, "").strip()
            if not key:
                raise ValueError(f"the API key variable {api_key_env} is not set (or is empty)")
            self._key = key
        self._slots = threading.BoundedSemaphore(max_concurrency)
        # the connections of requests in flight, so that close() can cancel them
        self._open: set[http.client.HTTPConnection] = set()
        self._open_lock = threading.Lock()
        self._mine = threading.local()
        self._closed = threading.Event()
        self._opener = urllib.request.build_opener(_TrackedHTTP(self), _TrackedHTTPS(self))

    def __repr__(self) -> str:
        key = f", api_key_env={self.api_key_env!r}" if self.api_key_env else ""
        return f"ChatClient({self.base_url!r}, {self.model!r}{key}, max_concurrency={self.max_concurrency})"

    def identity(self) -> dict:
        """What the responses depend on, for cache keys: the API flavour, model id and base URL
        (no credentials, no query)."""
        return {"api": "openai-chat", "model": self.model, "base_url": self.base_url}

    def settings(self) -> dict:
        """The request settings this client applies, as a run records them."""
        return {
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "max_concurrency": self.max_concurrency,
            "stream": self.stream,
        }

    def close(self) -> None:
        """Cancel every request in flight by closing its connection (its `complete` raises
        ApiError at once, without retrying) and refuse new ones."""
        with self._open_lock:
            self._closed.set()
            connections = list(self._open)
        for connection in connections:
            sock = connection.sock
            if sock is not None:
                try:  # wakes the thread blocked reading it; that thread closes the connection
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _connection(self, cls: type[http.client.HTTPConnection]):
        """A factory of `cls` connections that are registered for `close()` while in use."""

        def connect(host: str, **kwargs) -> http.client.HTTPConnection:
            connection = cls(host, **kwargs)
            with self._open_lock:
                if self._closed.is_set():
                    raise ConnectionAbortedError("the client is closed")
                self._open.add(connection)
            self._mine.connections.append(connection)
            return connection

        return connect

    def _cancelled(self) -> ApiError:
        return ApiError(f"{self.model} at {self.base_url}: cancelled (the client was closed)")

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, _REDACTED) if self._key else text

    def complete(
        self,
        messages: list[dict],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: list[str] | str | None = None,
        tools: list[dict] | None = None,
    ) -> Completion:
        """One chat completion, retried as the module docstring says; raises ApiError. `tools`:
        function definitions the model may call (OpenAI's `tools`); its calls come back as
        `<tool_call>` blocks of the text."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
        body = {
            "model": self.model,
            "messages": _check_messages(messages),
            "max_tokens": max_tokens,
            "temperature": float(temperature),
            "top_p": float(top_p),
            "stream": self.stream,
        }
        if self.stream:  # OpenAI sends usage in a stream only when asked
            body["stream_options"] = {"include_usage": True}
        if seed is not None:
            body["seed"] = int(seed)
        if stop:
            body["stop"] = [stop] if isinstance(stop, str) else list(stop)
        if tools:
            body["tools"] = list(tools)
        payload = json.dumps(body).encode("utf-8")
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            if self._closed.is_set():
                raise self._cancelled()
            try:
                return self._attempt(payload)
            except _Retryable as failure:
                if self._closed.is_set():
                    raise self._cancelled() from None
                if attempt == attempts:
                    raise ApiError(
                        f"{self.model} at {self.base_url}: {failure} (gave up after {attempts} attempts)",
                        status=failure.status,
                        attempts=attempts,
                    ) from None
                delay = self._delay(attempt, failure.retry_after)
                log.warning(
                    "%s at %s: %s; retry %d/%d in %.2f s",
                    self.model,
                    self.base_url,
                    failure,
                    attempt,
                    self.max_retries,
                    delay,
                )
                if self._closed.wait(delay):
                    raise self._cancelled() from None
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Retry-After when the server sent one, else exponential backoff with full jitter."""
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)

    def _attempt(self, payload: bytes) -> Completion:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        with self._slots:
            self._mine.connections = []
            deadline = time.monotonic() + self.timeout_s
            try:
                with self._opener.open(request, timeout=self.timeout_s) as response:
                    if self.stream:
                        return self._read_stream(response, deadline)
                    status, raw = response.status, response.read()
            except urllib.error.HTTPError as error:
                with error:
                    status, raw, headers = error.code, error.read(), error.headers
                message = self._scrub(_error_message(raw))
                if status in RETRY_STATUSES or status >= 500:
                    raise _Retryable(f"HTTP {status}: {message}", status, _retry_after(headers)) from None
                raise ApiError(
                    f"{self.model} at {self.base_url}: HTTP {status}: {message}", status=status
                ) from None
            except TimeoutError:
                raise _Retryable(f"no answer within {self.timeout_s:g} s") from None
            except urllib.error.URLError as error:
                reason = error.reason
                if isinstance(reason, TimeoutError):
                    raise _Retryable(f"no answer within {self.timeout_s:g} s") from None
                raise _Retryable(f"connection failed: {self._scrub(str(reason))}") from None
            except (http.client.HTTPException, OSError) as error:
                raise _Retryable(
                    f"connection failed: {self._scrub(type(error).__name__ + ': ' + str(error))}"
                ) from None
            finally:
                with self._open_lock:
                    self._open.difference_update(self._mine.connections)
        return self._parse(status, raw)

    def _read_stream(self, response, deadline: float) -> Completion:
        """A streamed answer: content deltas joined, tool call deltas joined by index, usage from
        the chunk that carries it; the whole stream must arrive within the timeout."""
        text, calls, usage, finished = [], {}, {}, False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            connection = self._mine.connections[-1]
            if connection.sock is not None:
                connection.sock.settimeout(left)
            line = response.readline()
            if not line:
                break
            data = line.decode("utf-8", errors="replace").strip()
            if not data.startswith("data:"):
                continue
            data = data[len("data:") :].strip()
            if data == "[DONE]":
                finished = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                snippet = self._scrub(data[:200])
                raise ApiError(
                    f"{self.model} at {self.base_url}: a streamed chunk is not JSON: {snippet!r}"
                ) from None
            if chunk.get("error"):
                raise _Retryable(f"stream error: {self._scrub(_error_message(data.encode()))}")
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                finished = finished or bool(choice.get("finish_reason"))
                delta = choice.get("delta") or {}
                if isinstance(delta.get("content"), str):
                    text.append(delta["content"])
                for call in delta.get("tool_calls") or []:
                    slot = calls.setdefault(call.get("index", len(calls)), {"name": "", "arguments": ""})
                    function = call.get("function") or {}
                    slot["name"] = slot["name"] or function.get("name") or ""
                    arguments = function.get("arguments")
                    if arguments is not None:
                        slot["arguments"] += (
                            arguments if isinstance(arguments, str) else json.dumps(arguments)
                        )
        if not finished:
            raise _Retryable("the stream ended before the answer did")
        message = {"content": "".join(text), "tool_calls": [{"function": calls[k]} for k in sorted(calls)]}
        return Completion(
            text=_text_of(message),
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
        )

    def _parse(self, status: int, raw: bytes) -> Completion:
        try:
            data = json.loads(raw)
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            snippet = self._scrub(raw[:200].decode("utf-8", errors="replace"))
            raise ApiError(
                f"{self.model} at {self.base_url}: the HTTP {status} answer is not a chat completion: "
                f"{snippet!r}",
                status=status,
            ) from None
        usage = data.get("usage") or {}
        return Completion(
            text=_text_of(message),
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
        )

    def complete_many(self, requests: list[dict], *, return_errors: bool = False) -> list[Completion]:
        """`complete(**request)` for every request, run concurrently under the cap, in order.
        Every request finishes before the first failure is raised; with `return_errors` the
        failed entries are their ApiError instead. Interrupted (Ctrl-C), it closes the client,
        which cancels the requests in flight, and re-raises."""
        for i, request in enumerate(requests):
            if not isinstance(request, dict):
                raise TypeError(f"requests[{i}] must be a dict of complete() arguments")
            unknown = set(request) - _REQUEST_KEYS
            if unknown:
                raise ValueError(
                    f"requests[{i}] has unknown keys {sorted(unknown)}; allowed: {sorted(_REQUEST_KEYS)}"
                )
            missing = {"messages", "max_tokens"} - set(request)
            if missing:
                raise ValueError(f"requests[{i}] lacks {sorted(missing)}")
        if not requests:
            return []
        pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests)))
        try:
            futures = [pool.submit(lambda r: self.complete(**r), request) for request in requests]
            outcomes = []
            for future in futures:
                try:
                    outcomes.append(future.result())
                except ApiError as error:
                    outcomes.append(error)
        except (KeyboardInterrupt, SystemExit):  # interrupted: cancel, rather than wait for, the rest
            self.close()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if not return_errors:
            for outcome in outcomes:
                if isinstance(outcome, ApiError):
                    raise outcome
        return outcomes
