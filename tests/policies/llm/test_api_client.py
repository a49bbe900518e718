"""ChatClient against a real OpenAI-compatible HTTP server on 127.0.0.1 (openai_server.py)."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from openai_server import OpenAIServer, Step

from schemashift.policies.llm.api_client import ApiError, ChatClient
from schemashift.policies.llm.cache import ResponseCache
from schemashift.policies.llm.completion import Completion

KEY_ENV = "SCHEMASHIFT_TEST_API_KEY"
KEY = "sk-test-7f3a9c0e55d24b1b"
MESSAGES = [
    {"role": "system", "content": "You act with JSON actions."},
    {"role": "user", "content": "Schedule the onboarding meeting."},
]


@pytest.fixture
def server():
    with OpenAIServer() as running:
        yield running


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with OpenAIServer(api_key=KEY) as running:
        yield running


def client(server: OpenAIServer, **kwargs) -> ChatClient:
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("max_backoff_s", 2.0)
    return ChatClient(server.base_url, "test-model", **kwargs)


# --- requests and responses -------------------------------------------------------------------


def test_request_path_body_and_auth_header(keyed):
    completion = client(keyed, api_key_env=KEY_ENV).complete(
        MESSAGES, max_tokens=64, temperature=0.7, top_p=0.9, seed=3, stop=["\n\n"]
    )
    (request,) = keyed.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Content-Type"] == "application/json"
    assert request.body == {
        "model": "test-model",
        "messages": MESSAGES,
        "max_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 3,
        "stop": ["\n\n"],
        "stream": False,
    }
    assert json.loads(completion.text)["type"] == "complete_task"
    # usage counts come from the server's `usage`: whitespace tokens in openai_server.py
    prompt_words = sum(len(m["content"].split()) for m in MESSAGES)
    assert (completion.tokens_in, completion.tokens_out) == (prompt_words, len(completion.text.split()))
    assert completion.cached is False


def test_optional_fields_are_left_out_and_no_key_means_no_auth_header(server):
    client(server).complete(MESSAGES, max_tokens=8)
    (request,) = server.requests
    assert "Authorization" not in request.headers
    assert "seed" not in request.body and "stop" not in request.body
    assert request.body["temperature"] == 0.0 and request.body["top_p"] == 1.0


def test_base_url_forms_reach_the_same_endpoint(server):
    for base in (server.base_url, server.base_url + "/", server.base_url + "/chat/completions"):
        c = ChatClient(base, "m")
        c.complete(MESSAGES, max_tokens=4)
        assert c.identity()["base_url"] == server.base_url
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 3


def test_query_is_sent_but_left_out_of_identity(server):
    c = ChatClient(server.base_url + "?api-version=2024-06-01", "m")
    c.complete(MESSAGES, max_tokens=4)
    assert server.requests[0].path == "/v1/chat/completions?api-version=2024-06-01"
    assert c.identity() == {"api": "openai-chat", "model": "m", "base_url": server.base_url}


@pytest.mark.parametrize(
    "reply",
    [
        lambda body: "a plain answer of several words",
        lambda body: {
            "content": "Calling now.",
            "tool_calls": [
                {"type": "function", "function": {"name": "mail__list", "arguments": '{"folder": "inbox"}'}},
                {"type": "function", "function": {"name": "complete_task", "arguments": '{"summary": "ok"}'}},
            ],
        },
    ],
    ids=["text", "tool calls"],
)
def test_a_streamed_answer_is_the_answer(reply):
    with OpenAIServer(reply) as running:
        plain = client(running).complete(MESSAGES, max_tokens=16)
        streamed = client(running, stream=True).complete(MESSAGES, max_tokens=16)
        sent = running.chat_requests()[-1].body
    assert streamed == plain and plain.tokens_in > 0
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_tool_calls_become_tool_call_tags(server):
    server.script(
        Step(
            body={
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "type": "function",
                                    "function": {
                                        "name": "mail",
                                        "arguments": '{"endpoint": "list_messages"}',
                                    },
                                }
                            ],
                        }
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            }
        )
    )
    completion = client(server).complete(MESSAGES, max_tokens=16)
    assert (
        completion.text
        == '<tool_call>\n{"name": "mail", "arguments": {"endpoint": "list_messages"}}\n</tool_call>'
    )
    assert (completion.tokens_in, completion.tokens_out) == (10, 5)


def test_a_body_that_is_not_a_completion_is_an_api_error(server):
    server.script(Step(body={"object": "list", "data": []}))
    with pytest.raises(ApiError, match="not a chat completion") as caught:
        client(server).complete(MESSAGES, max_tokens=4)
    assert caught.value.status == 200


# --- errors and retries ---------------------------------------------------------------------


def test_4xx_is_an_api_error_with_the_servers_message_and_no_retry(server):
    server.script(Step(status=400, body={"error": {"message": "max_tokens is too large: 99999"}}))
    with pytest.raises(ApiError) as caught:
        client(server).complete(MESSAGES, max_tokens=99999)
    assert caught.value.status == 400
    assert "max_tokens is too large: 99999" in str(caught.value)
    assert "HTTP 400" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.timeout(30)
def test_429_is_retried_after_retry_after_seconds(server):
    server.script(Step(status=429, retry_after="1"), Step(status=429, retry_after="0"))
    completion = client(server).complete(MESSAGES, max_tokens=4)
    assert completion.text
    first, second, third = (r.at for r in server.requests)
    assert second - first >= 0.95, "the client must wait the Retry-After seconds"
    assert third - second < 0.9
    assert len(server.requests) == 3


@pytest.mark.timeout(30)
def test_retry_after_as_an_http_date(server):
    when = datetime.now(UTC) + timedelta(seconds=2)
    server.script(Step(status=429, retry_after=format_datetime(when, usegmt=True)))
    client(server).complete(MESSAGES, max_tokens=4)
    first, second = (r.at for r in server.requests)
    # an HTTP date has whole seconds: the wait is between 1 and 2 s
    assert 0.95 <= second - first <= 2.5


@pytest.mark.timeout(30)
def test_retry_after_ms_is_honoured(server):
    server.script(Step(status=429, headers={"retry-after-ms": "600"}))
    client(server).complete(MESSAGES, max_tokens=4)
    first, second = (r.at for r in server.requests)
    assert 0.55 <= second - first < 1.5


def test_a_completion_without_usage_counts_zero_tokens(server):
    server.script(Step(body={"choices": [{"message": {"role": "assistant", "content": "hi"}}]}))
    assert client(server).complete(MESSAGES, max_tokens=4) == Completion("hi", 0, 0)


@pytest.mark.timeout(30)
def test_retry_after_is_capped_by_max_backoff(server):
    server.script(Step(status=429, retry_after="60"))
    started = time.monotonic()
    client(server, max_backoff_s=0.3).complete(MESSAGES, max_tokens=4)
    assert time.monotonic() - started < 5
    assert len(server.requests) == 2


@pytest.mark.timeout(30)
def test_503_and_500_are_retried_with_backoff(server):
    server.script(Step(status=503), Step(status=500), Step(status=502))
    completion = client(server, backoff_s=0.2, max_backoff_s=1.0).complete(MESSAGES, max_tokens=4)
    assert completion.text
    times = [r.at for r in server.requests]
    assert len(times) == 4
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # full jitter in [ceiling/2, ceiling] with ceilings 0.2, 0.4, 0.8
    assert gaps[0] >= 0.09 and gaps[1] >= 0.19 and gaps[2] >= 0.39


@pytest.mark.timeout(30)
def test_gives_up_after_max_retries_with_the_last_status(server):
    server.script(*[Step(status=503, body={"error": {"message": "overloaded"}})] * 3)
    with pytest.raises(ApiError, match="overloaded") as caught:
        client(server, max_retries=2).complete(MESSAGES, max_tokens=4)
    assert caught.value.status == 503
    assert caught.value.attempts == 3
    assert "gave up after 3 attempts" in str(caught.value)
    assert len(server.requests) == 3


@pytest.mark.timeout(30)
def test_a_slow_answer_times_out_and_is_retried(server):
    server.script(Step(delay_s=1.5))
    started = time.monotonic()
    completion = client(server, timeout_s=0.3).complete(MESSAGES, max_tokens=4)
    assert completion.text
    assert time.monotonic() - started < 1.4, "the second attempt must not wait for the slow first one"
    assert len(server.requests) == 2


@pytest.mark.timeout(30)
def test_timeouts_until_the_last_retry_are_an_api_error(server):
    server.script(Step(delay_s=1.0), Step(delay_s=1.0))
    with pytest.raises(ApiError, match=r"no answer within 0.2 s") as caught:
        client(server, timeout_s=0.2, max_retries=1).complete(MESSAGES, max_tokens=4)
    assert caught.value.status is None and caught.value.attempts == 2


def wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("stream", [False, True])
def test_a_request_past_its_timeout_has_its_connection_closed(server, stream):
    server.script(Step(delay_s=10.0))
    started = time.monotonic()
    with pytest.raises(ApiError, match="no answer within 0.3 s"):
        client(server, timeout_s=0.3, max_retries=0, stream=stream).complete(MESSAGES, max_tokens=4)
    # the server sees the client leave while it still works on the answer, not 10 s later
    assert wait_for(lambda: len(server.left) == 1, 2.0)
    assert server.left[0] - started < 2.0


@pytest.mark.timeout(30)
def test_close_cancels_the_requests_in_flight_without_retrying(server):
    server.script(Step(delay_s=10.0), Step(delay_s=10.0))
    c = client(server, max_concurrency=2, timeout_s=30, max_retries=3)
    outcomes: list = []
    worker = threading.Thread(
        target=lambda: outcomes.extend(
            c.complete_many([{"messages": MESSAGES, "max_tokens": 4}] * 2, return_errors=True)
        )
    )
    worker.start()
    assert wait_for(lambda: server.max_in_flight == 2)
    started = time.monotonic()
    c.close()
    worker.join(timeout=5)
    assert not worker.is_alive() and time.monotonic() - started < 2.0
    assert all(isinstance(o, ApiError) and "cancelled" in str(o) for o in outcomes) and len(outcomes) == 2
    assert wait_for(lambda: len(server.left) == 2, 2.0)
    with pytest.raises(ApiError, match="cancelled"):
        c.complete(MESSAGES, max_tokens=4)
    assert len(server.chat_requests()) == 2, "a closed client neither retries nor sends"


@pytest.mark.timeout(30)
def test_an_interrupted_complete_many_cancels_its_requests(server):
    """Ctrl-C while requests run: they are cancelled at once, not waited for (10 s each)."""
    server.script(Step(delay_s=10.0), Step(delay_s=10.0))
    c = client(server, max_concurrency=2, timeout_s=30)
    main_thread = threading.main_thread().ident

    def interrupt() -> None:
        if wait_for(lambda: server.max_in_flight == 2):
            signal.pthread_kill(main_thread, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        c.complete_many([{"messages": MESSAGES, "max_tokens": 4}] * 2)
    assert time.monotonic() - started < 5.0
    assert wait_for(lambda: len(server.left) == 2, 2.0)


def test_settings_are_what_the_client_applies(server):
    settings = client(server, timeout_s=7.5, max_retries=1, max_concurrency=2).settings()
    assert settings == {"timeout_s": 7.5, "max_retries": 1, "max_concurrency": 2, "stream": False}


@pytest.mark.timeout(30)
def test_connection_refused_is_retried_then_an_api_error():
    with OpenAIServer() as gone:
        base = gone.base_url
    with pytest.raises(ApiError, match="connection failed") as caught:
        ChatClient(base, "m", max_retries=2, backoff_s=0.01).complete(MESSAGES, max_tokens=4)
    assert caught.value.attempts == 3


# --- concurrency ----------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_complete_many_runs_concurrently_under_the_cap(server):
    server.script(*[Step(delay_s=0.3)] * 12)
    requests = [
        {"messages": [{"role": "user", "content": "x" * i}], "max_tokens": 8, "seed": i} for i in range(12)
    ]
    started = time.monotonic()
    completions = client(server, max_concurrency=3).complete_many(requests)
    elapsed = time.monotonic() - started
    assert server.max_in_flight == 3
    assert elapsed >= 4 * 0.3 - 0.05, "12 requests of 0.3 s, 3 at a time, take at least 1.2 s"
    assert elapsed < 12 * 0.3, "they must overlap"
    # results come back in request order
    assert [json.loads(c.text)["complete"]["summary"] for c in completions] == [
        f"test-model {i}" for i in range(12)
    ]


@pytest.mark.timeout(60)
def test_the_cap_holds_across_threads_sharing_a_client(server):
    server.script(*[Step(delay_s=0.2)] * 8)
    shared = client(server, max_concurrency=2)
    threads = [
        threading.Thread(target=shared.complete_many, args=([{"messages": MESSAGES, "max_tokens": 4}] * 2,))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(server.requests) == 8
    assert server.max_in_flight == 2


@pytest.mark.timeout(30)
def test_complete_many_finishes_every_request_before_raising(server):
    server.script(Step(status=400, body={"error": {"message": "bad request 0"}}), Step(delay_s=0.3))
    requests = [{"messages": MESSAGES, "max_tokens": 4}] * 2
    c = client(server, max_concurrency=1)
    with pytest.raises(ApiError, match="bad request 0"):
        c.complete_many(requests)
    assert len(server.requests) == 2 and server.max_in_flight == 1
    server.script(Step(status=404, body={"error": {"message": "no such model"}}))
    outcomes = c.complete_many(requests, return_errors=True)
    assert isinstance(outcomes[0], ApiError) and outcomes[0].status == 404
    assert isinstance(outcomes[1], Completion)


def test_complete_many_rejects_unknown_or_missing_request_keys(server):
    with pytest.raises(ValueError, match="unknown keys"):
        client(server).complete_many([{"messages": MESSAGES, "max_tokens": 4, "temprature": 1.0}])
    with pytest.raises(ValueError, match=r"requests\[1\] lacks \['max_tokens'\]"):
        client(server).complete_many([{"messages": MESSAGES, "max_tokens": 4}, {"messages": MESSAGES}])
    assert server.requests == []


# --- the key ---------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_the_key_never_leaks(keyed, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    c = client(keyed, api_key_env=KEY_ENV, max_retries=1)
    assert KEY not in repr(c) and KEY not in json.dumps(c.identity()) and KEY not in str(vars(c).keys())
    keyed.script(Step(status=503, body={"error": {"message": f"upstream rejected Bearer {KEY}"}}))
    c.complete(MESSAGES, max_tokens=4)
    keyed.script(*[Step(status=500, body=f"internal error for key {KEY}")] * 2)
    with pytest.raises(ApiError) as caught:
        c.complete(MESSAGES, max_tokens=4)
    assert KEY not in str(caught.value) and "***" in str(caught.value)
    # a wrong key: the server echoes the header it got, the client blanks the key out
    monkeypatch.setenv(KEY_ENV, KEY + "x")
    with pytest.raises(ApiError) as wrong:
        client(keyed, api_key_env=KEY_ENV).complete(MESSAGES, max_tokens=4)
    assert wrong.value.status == 401
    assert KEY not in str(wrong.value) and "Incorrect API key provided" in str(wrong.value)
    assert KEY not in caplog.text and "retry 1/1" in caplog.text


def test_a_missing_key_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ValueError, match=f"the API key variable {KEY_ENV} is not set"):
        ChatClient("http://127.0.0.1:9/v1", "m", api_key_env=KEY_ENV)


@pytest.mark.parametrize(
    ("base_url", "message"),
    [
        ("", "non-empty"),
        ("ftp://example.invalid/v1", "http"),
        ("http://user:secret@127.0.0.1:8000/v1", "must not carry credentials"),
    ],
)
def test_bad_base_urls_are_rejected(base_url, message):
    with pytest.raises(ValueError, match=message) as caught:
        ChatClient(base_url, "m")
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    "kwargs", [{"max_concurrency": 0}, {"timeout_s": 0}, {"max_retries": -1}, {"backoff_s": -1.0}]
)
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(ValueError):
        ChatClient("http://127.0.0.1:9/v1", "m", **kwargs)


@pytest.mark.parametrize("max_tokens", [0, -1, 1.5, True])
def test_bad_max_tokens_is_rejected_before_any_request(server, max_tokens):
    with pytest.raises(ValueError, match="max_tokens"):
        client(server).complete(MESSAGES, max_tokens=max_tokens)
    assert server.requests == []


# --- with the response cache ------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_rerun_replays_from_the_cache_without_any_request(server, tmp_path):
    """What an evaluation does: key each request, answer misses with one concurrent round."""
    c = client(server, max_concurrency=4)
    requests = [
        {
            "messages": [{"role": "user", "content": f"task {i % 3}"}],
            "max_tokens": 16,
            "temperature": 0.8,
            "seed": 7,
        }
        for i in range(6)
    ]
    samples = [i // 3 for i in range(6)]  # the same prompts, sample indices 0 and 1

    def play(cache: ResponseCache) -> list[Completion]:
        keys = [
            ResponseCache.key(c.identity(), r["messages"], {k: v for k, v in r.items() if k != "messages"}, s)
            for r, s in zip(requests, samples, strict=True)
        ]
        return cache.get_or_compute(keys, lambda missing: c.complete_many([requests[i] for i in missing]))

    with ResponseCache(tmp_path / "responses.sqlite") as cache:
        first = play(cache)
    assert len(server.requests) == 6 and not any(x.cached for x in first)
    with ResponseCache(tmp_path / "responses.sqlite") as cache:
        second = play(cache)
    assert len(server.requests) == 6, "the rerun made HTTP requests"
    assert all(x.cached for x in second)
    assert [(x.text, x.tokens_in, x.tokens_out) for x in second] == [
        (x.text, x.tokens_in, x.tokens_out) for x in first
    ]
