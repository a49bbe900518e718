"""One writer per results folder (`rollout/lock.py`, held by `cli.main` for every verb's
`writes(args)`): a second writer is refused at once naming the holder, a killed writer's lock is
taken over, and two real `run`s into one `--out` never mix or lose results."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemashift.cli import discover_verbs, main
from schemashift.rollout import lock, resultset
from schemashift.rollout.io import read_parquet_rows

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SEEDS = 150
FAMILIES = 6  # v1's scenarios under --scenarios all
TRIALS = 10


def _run(out: Path, sweep_id: str, seeds: int = SEEDS) -> subprocess.Popen:
    command = [sys.executable, "-m", "schemashift.cli", "run", "--ruleset", "v1", "--policy", "scripted"]
    command += ["--seeds", f"0-{seeds - 1}", "--out", str(out), "--sweep-id", sweep_id]
    return subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _sweep_ids(out: Path) -> set[str]:
    resultset.check(out)  # one complete set, all three files of one write
    rows = read_parquet_rows(out / resultset.EPISODES_FILE)
    assert len(rows) == SEEDS * FAMILIES
    assert len({(r["scenario"], r["seed"]) for r in rows}) == SEEDS * FAMILIES
    return {r["sweep_id"] for r in rows}


def test_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    with lock.hold(tmp_path / "out", "run"):
        with pytest.raises(lock.FolderBusy) as caught, lock.hold(tmp_path / "out", "eval"):
            pass
    holder = caught.value.holder
    assert holder["pid"] == os.getpid() and holder["verb"] == "run" and holder["since"].endswith("UTC")
    assert f"pid {os.getpid()}" in str(caught.value)
    # released: the lock file is gone, the folder (created by the lock, empty) too
    assert not (tmp_path / "out").exists()
    with lock.hold(tmp_path / "out", "eval"):
        pass


def test_a_refused_writer_leaves_the_holders_folder_alone(tmp_path, capsys):
    out = tmp_path / "out"
    with lock.hold(out, "run"):
        assert main(["run", "--policy", "oracle", "--seeds", "0", "--out", str(out)]) == 2
        assert not (out / resultset.EPISODES_FILE).exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"schemashift run: error: --out {out} is being written by schemashift run (pid ")
    assert "since " in err


def test_every_verb_with_an_out_folder_locks_it():
    for name, module in discover_verbs().items():
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        flags = {flag for action in parser._actions for flag in action.option_strings}
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for sub in subparsers:
            for part in sub.choices.values():
                flags |= {flag for action in part._actions for flag in action.option_strings}
        if any(flag == "--out" or flag.startswith("--out-") for flag in flags):
            assert hasattr(module, "writes"), f"verb {name} writes a folder but defines no writes(args)"


def test_a_killed_writers_lock_does_not_block_the_next_run(tmp_path):
    out = tmp_path / "out"
    first = _run(out, "killed", seeds=400)
    deadline = time.monotonic() + 60
    while not (out / lock.LOCK_FILE).exists() or str(first.pid) not in (out / lock.LOCK_FILE).read_text():
        assert time.monotonic() < deadline and first.poll() is None, "the first run never took the lock"
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert (out / lock.LOCK_FILE).exists()  # left behind by the killed holder
    second = _run(out, "next")
    stdout, stderr = second.communicate(timeout=300)
    assert second.returncode == 0, stderr
    assert f"taking over the lock on {out} of schemashift run (pid {first.pid}" in stderr
    assert _sweep_ids(out) == {"next"}
    assert not (out / lock.LOCK_FILE).exists()


@pytest.mark.slow
def test_two_concurrent_runs_into_one_folder(tmp_path):
    """10 trials of two real `run`s started together into one --out: exactly one is refused at
    once with the message, the other's results are complete and its own."""
    figures = []
    for trial in range(TRIALS):
        out = tmp_path / f"trial-{trial}"
        started = time.monotonic()
        procs = {name: _run(out, name) for name in ("a", "b")}
        done = {name: (*p.communicate(timeout=300), p.returncode) for name, p in procs.items()}
        refused = [name for name, (_, _, code) in done.items() if code != 0]
        assert len(refused) == 1, {name: (code, err[-500:]) for name, (_, err, code) in done.items()}
        loser = refused[0]
        (winner,) = set(done) - {loser}
        _, err, code = done[loser]
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert f"--out {out} is being written by schemashift run (pid {procs[winner].pid}" in err
        assert done[winner][2] == 0
        assert _sweep_ids(out) == {winner}
        figures.append((trial, winner, round(time.monotonic() - started, 2)))
    print(f"\nconcurrent runs into one --out: {TRIALS} trials, {SEEDS * FAMILIES} cells each")
    for trial, winner, seconds in figures:
        print(f"  trial {trial}: run {winner} wrote all cells, the other refused (exit 2); {seconds} s")
    intact = len(figures)
    print(f"  refused exactly once: {intact}/{TRIALS}; winner's results intact: {intact}/{TRIALS}")
