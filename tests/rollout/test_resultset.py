"""A result directory's files appear together or not at all: staged writes, result-set ids that
readers verify, kills at random points of `run` and in each gap of the write, and a full disk."""

from __future__ import annotations

import gzip
import os
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from schemashift.report import ReportError, aggregate
from schemashift.rollout import io, records, resultset

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--policy", "oracle", "--scenarios", "all", "--seeds", "0-199"]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "schemashift.cli", *args]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


def run_to_completion(out: Path, sweep_id: str) -> None:
    subprocess.run(
        cli("run", *RUN, "--out", str(out), "--sweep-id", sweep_id),
        env=child_env(),
        check=True,
        capture_output=True,
    )


def temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def run_ids(directory: Path) -> set[str]:
    """The run ids the rows of all three files carry, read from the rows themselves."""
    found = {row["sweep_id"] for row in io.read_parquet_rows(directory / "episodes.parquet")}
    found |= {row["sweep_id"] for row in io.read_parquet_rows(directory / "drifts.parquet")}
    found |= {t["sweep_id"] for t in io.read_jsonl(directory / "trajectories.jsonl.gz")}
    return found


def assert_one_set(directory: Path) -> str:
    """`directory` holds no episodes file, or one complete set of one run: never a mix."""
    if not (directory / "episodes.parquet").exists():
        return "absent"
    resultset.check(directory)
    (sweep_id,) = run_ids(directory)
    merged = aggregate.merge([directory])
    assert set(merged.episodes.column("sweep_id").to_pylist()) == {sweep_id}
    return sweep_id


# -- the writer -------------------------------------------------------------------------------------


def test_the_trajectories_header_carries_the_set_id_and_stays_plain_gzip(tmp_path: Path) -> None:
    table = records.to_table([], records.EPISODE_COLUMNS)
    resultset.write(tmp_path, table, records.to_table([], records.DRIFT_COLUMNS), [{"a": 1}, {"b": "ü"}])
    path = tmp_path / "trajectories.jsonl.gz"
    set_id = resultset.check(tmp_path)
    assert len(set_id) == 32 and resultset.set_id(path) == set_id
    assert gzip.decompress(path.read_bytes()) == b'{"a":1}\n{"b":"\xc3\xbc"}\n'
    assert list(io.read_jsonl(path)) == [{"a": 1}, {"b": "ü"}]
    subprocess.run(["gzip", "-t", str(path)], check=True)


def test_each_write_is_a_new_set_and_removes_a_killed_writes_leftovers(tmp_path: Path) -> None:
    episodes = records.to_table([], records.EPISODE_COLUMNS)
    drifts = records.to_table([], records.DRIFT_COLUMNS)
    resultset.write(tmp_path, episodes, drifts, [])
    first = resultset.check(tmp_path)
    stale = [".episodes.parquet.0123abcd.tmp", ".trajectories.jsonl.gz.deadbeef.tmp"]
    kept = [".notes.txt.0123abcd.tmp", "episodes.parquet.tmp", "own.tmp"]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"partial")
    resultset.write(tmp_path, episodes, drifts, [])
    assert resultset.check(tmp_path) != first
    assert temps(tmp_path) == sorted(kept)


def test_a_failing_writer_changes_nothing(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    io.write_set({a: io.json_writer(1), b: io.json_writer(2)}, commit=b)

    def fail(f) -> None:
        f.write(b"half")
        raise OSError(28, "No space left on device")

    for broken in (a, b):
        writers = {a: io.json_writer(10), b: io.json_writer(20), broken: fail}
        with pytest.raises(OSError, match="No space"):
            io.write_set(writers, commit=b)
        assert (a.read_text(), b.read_text()) == ("1\n", "2\n")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]


KILL_AT = """
import os, signal, sys
from pathlib import Path
from schemashift.rollout import records, resultset

target, call = sys.argv[1], int(sys.argv[2])
calls = [0]
for name in ("replace", "unlink", "fsync"):
    real = getattr(os, name) if name != "unlink" else Path.unlink

    def hooked(*args, _real=real, **kwargs):
        calls[0] += 1
        if calls[0] == call:
            os.kill(os.getpid(), signal.SIGKILL)
        return _real(*args, **kwargs)

    if name == "unlink":
        Path.unlink = hooked
    else:
        setattr(os, name, hooked)
rows = [{"sweep_id": sys.argv[3], "ruleset": "legacy", "policy": "p", "scenario": "s", "seed": 0,
         "sample_index": 0, "status": "graded"}]
drifts = [{**{k: rows[0][k] for k in ("sweep_id", "ruleset", "policy", "scenario", "seed", "sample_index")},
           "drift_index": 0}]
resultset.write(target, records.to_table(rows, records.EPISODE_COLUMNS),
                records.to_table(drifts, records.DRIFT_COLUMNS), [{"sweep_id": sys.argv[3]}])
"""


def test_a_kill_in_every_gap_of_a_write_never_leaves_a_mixed_set(tmp_path: Path) -> None:
    """SIGKILL at the n-th fsync, unlink or rename of a write over a complete set, for every n
    until the write completes: each gap between staging, removing the old episodes file, the
    renames and the final directory syncs."""
    out = tmp_path / "cell"

    def write(sweep_id: str, kill_at: int) -> int:
        done = subprocess.run(
            [sys.executable, "-c", KILL_AT, str(out), str(kill_at), sweep_id],
            env=child_env(),
            capture_output=True,
        )
        assert done.returncode in (0, -signal.SIGKILL), done.stderr.decode()
        return done.returncode

    states = []
    for call in range(1, 40):
        assert write("base", 0) == 0
        killed = write(f"write-{call}", call) != 0
        state = assert_one_set(out)
        if not killed:
            assert state == f"write-{call}" and temps(out) == []
            break
        assert state in ("base", "absent", f"write-{call}")
        states.append(state.partition("-")[0])
    print(f"{len(states)} kills in a write: {dict(Counter(states))}")
    # the old set (killed while staging), none (between its removal and the commit), the new one
    assert set(states) == {"base", "absent", "write"}, states
    assert len(states) >= 8, states


# -- `run` killed at random points ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_run_killed_at_random_points_never_leaves_a_mixed_set(tmp_path: Path) -> None:
    """At least 30 kills spread over a run (timed), and kills the moment the write phase shows
    (staged files, the old episodes file gone). After each kill the directory holds one set or
    none; the next run leaves one complete set and no temporary file; aggregate accepts it."""
    out = tmp_path / "cell"
    started = time.monotonic()
    run_to_completion(out, "base")
    duration = time.monotonic() - started
    assert assert_one_set(out) == "base"

    timed = [duration * 1.1 * (i + 0.5) / 32 for i in range(32)]
    watched = ["staged"] * 8 + ["uncommitted"] * 6
    outcomes: Counter[str] = Counter()
    left_temps = 0
    for number, when in enumerate([*timed, *watched]):
        sweep_id = f"kill-{number}"
        before = assert_one_set(out)
        proc = subprocess.Popen(
            cli("run", *RUN, "--out", str(out), "--sweep-id", sweep_id),
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        killed = _kill_when(proc, out, when)
        proc.wait(timeout=120)
        after = assert_one_set(out)
        if not killed:
            outcome = "finished"
            assert after == sweep_id
        elif after == before:
            outcome = "old set"
        elif after == "absent":
            outcome = "no set (killed while writing)"
        else:
            assert after == sweep_id
            outcome = "new set"
        outcomes[f"{when if isinstance(when, str) else 'timed'}: {outcome}"] += 1
        if temps(out):
            left_temps += 1
        if temps(out) or after == "absent" or number % 8 == 0:
            run_to_completion(out, f"next-{number}")
            assert temps(out) == []
            assert assert_one_set(out) == f"next-{number}"
    print(
        f"{len(timed) + len(watched)} kills over a {duration:.2f} s run: {dict(outcomes)}; "
        f"{left_temps} left temporary files, all removed by the next run"
    )
    assert sum(n for key, n in outcomes.items() if key.startswith("timed")) >= 30
    assert sum(n for key, n in outcomes.items() if "killed while writing" in key) + left_temps > 0, outcomes


def _kill_when(proc: subprocess.Popen, out: Path, when: float | str) -> bool:
    """SIGKILL `proc` after `when` seconds, or as soon as the write phase shows; False when it
    finished first."""
    if not isinstance(when, str):
        try:
            proc.wait(timeout=when)
            return False
        except subprocess.TimeoutExpired:
            proc.kill()
            return True
    had_episodes = (out / "episodes.parquet").exists()
    while proc.poll() is None:
        try:
            names = os.listdir(out)
        except FileNotFoundError:
            continue
        staged = any(name.endswith(".tmp") for name in names)
        gone = had_episodes and "episodes.parquet" not in names
        if (when == "staged" and staged) or (when == "uncommitted" and gone):
            proc.kill()
            return True
    return False


# -- a full disk ----------------------------------------------------------------------------------


def _limit_file_size(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_keeps_the_old_set_and_reports_an_error(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes writes past a size fail as a full disk does, at each file of the set:
    `run` reports the error, the old set stays intact and no temporary file is left."""
    out = tmp_path / "cell"
    run_to_completion(out, "old")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    sizes = sorted(len(data) for data in before.values())
    for limit in (0, 100, *(size // 2 for size in sizes)):
        done = subprocess.run(
            cli("run", *RUN, "--out", str(out), "--sweep-id", f"full-{limit}"),
            env=child_env(),
            capture_output=True,
            text=True,
            preexec_fn=_limit_file_size(limit),
        )
        assert done.returncode == 2, done.stderr
        assert (
            done.stderr.strip()
            .splitlines()[-1]
            .startswith(f"schemashift run: error: cannot write results to {out}: [Errno 27] File too large")
        ), done.stderr
        assert "Traceback" not in done.stderr
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    run_to_completion(out, "after")
    assert temps(out) == [] and assert_one_set(out) == "after"


def test_merge_refuses_what_a_kill_between_renames_would_have_left(tmp_path: Path) -> None:
    """Without the staged protocol a kill between renames leaves new trajectories beside old
    tables; readers refuse exactly that mix."""
    old, new = tmp_path / "old", tmp_path / "new"
    run_to_completion(old, "old")
    run_to_completion(new, "new")
    (old / "trajectories.jsonl.gz").write_bytes((new / "trajectories.jsonl.gz").read_bytes())
    with pytest.raises(ReportError, match="mixed result set"):
        aggregate.merge([old])
