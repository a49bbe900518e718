"""ResponseCache: keys, persistence, concurrent writers (threads and processes), bad files."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading

import pytest

from schemashift.policies.llm.cache import ResponseCache
from schemashift.policies.llm.completion import Completion

MODEL = {"api": "openai-chat", "model": "m", "base_url": "http://127.0.0.1:8000/v1"}
MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
GENERATION = {"max_tokens": 64, "temperature": 0.7, "top_p": 1.0, "seed": 3}


def key(**changes) -> str:
    args = {"model_identity": MODEL, "messages": MESSAGES, "generation": GENERATION, "sample_index": 0}
    args.update(changes)
    return ResponseCache.key(**args)


def test_key_is_stable_hex_sha256():
    assert key() == key()
    assert len(key()) == 64 and int(key(), 16) >= 0
    # dict order does not matter, 0.0 and 0 are the same number
    assert key(generation=dict(reversed(list(GENERATION.items())))) == key()
    assert key(generation={**GENERATION, "top_p": 1}) == key()
    assert key(model_identity={"base_url": MODEL["base_url"], "model": "m", "api": "openai-chat"}) == key()


@pytest.mark.parametrize(
    "changes",
    [
        {"model_identity": {**MODEL, "model": "other"}},
        {"model_identity": {**MODEL, "adapter": "sha256:abc"}},
        {"messages": [*MESSAGES, {"role": "assistant", "content": "a"}]},
        {"messages": [MESSAGES[0], {"role": "user", "content": "u "}]},
        {"generation": {**GENERATION, "temperature": 0.8}},
        {"generation": {**GENERATION, "seed": None}},
        {"sample_index": 1},
    ],
)
def test_everything_a_completion_depends_on_changes_the_key(changes):
    assert key(**changes) != key()


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"sample_index": -1}, ValueError),
        ({"sample_index": True}, ValueError),
        ({"generation": {"temperature": float("nan")}}, ValueError),
        ({"generation": {"stop": {"a", "b"}}}, TypeError),
        ({"model_identity": {}}, TypeError),
        ({"messages": "hello"}, TypeError),
    ],
)
def test_bad_key_parts_are_clear_errors(changes, error):
    with pytest.raises(error, match="cache key"):
        key(**changes)


def test_put_get_and_persistence(tmp_path):
    path = tmp_path / "sub" / "responses.sqlite"
    with ResponseCache(path) as cache:
        assert cache.get(key()) is None
        cache.put(key(), Completion("hello", 12, 3))
        assert cache.get(key()) == Completion("hello", 12, 3, cached=True)
        assert len(cache) == 1
    with ResponseCache(path) as cache:
        assert cache.get(key()) == Completion("hello", 12, 3, cached=True)
        assert cache.get(key(sample_index=1)) is None


def test_the_first_completion_stored_under_a_key_wins(tmp_path):
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        cache.put(key(), Completion("first", 1, 1))
        cache.put(key(), Completion("second", 2, 2))
        assert cache.get(key()).text == "first"
        assert len(cache) == 1


def test_get_or_compute_computes_only_the_misses_once(tmp_path):
    calls = []

    def compute(missing):
        calls.append(list(missing))
        return [Completion(f"made {i}", i, i) for i in missing]

    keys = [key(sample_index=i) for i in (0, 1, 2)] + [key(sample_index=1)]
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        cache.put(keys[0], Completion("old", 0, 0))
        got = cache.get_or_compute(keys, compute)
        assert calls == [[1, 2]], "hits and a repeated key are not computed"
        assert [c.text for c in got] == ["old", "made 1", "made 2", "made 1"]
        assert [c.cached for c in got] == [True, False, False, False]
        again = cache.get_or_compute(keys, compute)
        assert calls == [[1, 2]]
        assert [c.text for c in again] == ["old", "made 1", "made 2", "made 1"]
        assert all(c.cached for c in again)
        with pytest.raises(ValueError, match="returned 0 completions for 1"):
            cache.get_or_compute([key(sample_index=9)], lambda missing: [])


def test_a_failed_request_is_returned_and_asked_again(tmp_path):
    """An engine's failure (an API error, say) comes back in its position and is never stored."""
    failure = ConnectionError("down")
    keys = [key(sample_index=i) for i in (0, 1)]
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        got = cache.get_or_compute(keys, lambda missing: [Completion("made", 1, 1), failure])
        assert got[0].text == "made" and got[1] is failure
        assert len(cache) == 1
        asked = []
        again = cache.get_or_compute(keys, lambda missing: asked.append(missing) or [Completion("now", 2, 2)])
        assert asked == [[1]] and [c.text for c in again] == ["made", "now"]


def test_threads_share_one_cache(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    errors = []

    def write(worker):
        try:
            for i in range(50):
                cache.put(key(sample_index=worker * 1000 + i), Completion(f"{worker}-{i}", i, i))
                assert cache.get(key(sample_index=worker * 1000 + i)).text == f"{worker}-{i}"
        except Exception as exc:  # reported below: a thread's exception would be lost
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) == 400
    cache.close()
    with pytest.raises(ValueError, match="closed"):
        cache.get(key())


SHARED = 999_999


def _process_writer(path: str, worker: int, count: int) -> None:
    with ResponseCache(path) as cache:
        for i in range(count):
            cache.put(key(sample_index=worker * 1000 + i), Completion(f"{worker}-{i}", worker, i))
            # everybody also writes one shared key: exactly one of them must win
            cache.put(key(sample_index=SHARED), Completion(f"shared by {worker}", 0, 0))


@pytest.mark.timeout(120)
def test_processes_write_one_file_concurrently(tmp_path):
    path = str(tmp_path / "c.sqlite")
    ResponseCache(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_process_writer, args=(path, w, 100)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=100)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    with ResponseCache(path) as cache:
        assert len(cache) == 4 * 100 + 1
        for w in range(4):
            assert cache.get(key(sample_index=w * 1000 + 99)) == Completion(f"{w}-99", w, 99, cached=True)
        assert cache.get(key(sample_index=SHARED)).text.startswith("shared by ")
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_that_is_not_a_cache_is_a_clear_error(tmp_path):
    bogus = tmp_path / "c.sqlite"
    bogus.write_text("not a database, " * 100)
    with pytest.raises(ValueError, match="not a usable SQLite database"):
        ResponseCache(bogus)
    assert bogus.read_text().startswith("not a database"), "a bad file is left as it was"
    with pytest.raises(ValueError, match="not a file"):
        ResponseCache(tmp_path)


def test_a_cache_of_another_schema_version_is_refused(tmp_path):
    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(ValueError, match="schema version 99"):
        ResponseCache(path)


def test_put_takes_only_completions(tmp_path):
    with ResponseCache(tmp_path / "c.sqlite") as cache, pytest.raises(TypeError, match="Completion"):
        cache.put(key(), "text")


def test_the_arm_is_in_the_key_only_where_it_is_not_drift():
    """A control cell's first prompt can equal its drift twin's: the key keeps them apart, and a
    drift key is the one written before arms existed (caches of then stay valid)."""
    assert key(arm="drift") == key()
    assert key(arm="control") != key()
    assert key(arm="control", sample_index=1) != key(arm="control")
    with pytest.raises(ValueError, match="cache key: unknown arm 'both'"):
        key(arm="both")


def test_a_local_models_row_seed_keeps_the_arms_apart_and_drift_as_it_was():
    from schemashift.policies.llm.local import row_seed

    assert row_seed(3, MESSAGES, 0, "drift") == row_seed(3, MESSAGES, 0)
    assert row_seed(3, MESSAGES, 0, "control") != row_seed(3, MESSAGES, 0)
    with pytest.raises(ValueError, match="unknown arm"):
        row_seed(3, MESSAGES, 0, "both")
