"""Every verb answers bad input with `schemashift <verb>: error: ...` and status 2: never a
traceback, never an internal error. Each verb gets the hostile inputs that fit its options
(missing, binary, non-UTF-8, deeply nested, oversized and tampered files, bad numbers and
names, a bad environment, a missing optional dependency); a new verb must add its own."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from schemashift.cli import INTERNAL_ERROR, discover_verbs, main
from schemashift.rollout import io

ROOT = Path(__file__).resolve().parents[2]


def hostile_files(root: Path) -> dict[str, Path]:
    """Files no verb can use, by what is wrong with them."""
    files = {
        "non_utf8": b'\xff\xfe{"type": "complete_task"}\n',
        "deep_list": b"[" * 200_000 + b"\n",
        "deep_object": b'{"a":' * 200_000 + b"\n",
        "huge_int": b"1" * 5_000 + b"\n",
        "binary": bytes(range(256)) * 4,
        "empty": b"",
        "not_a_list": b'{"seed": 1}\n',
        "gz_garbage": gzip.compress(b"not json\n"),
        "gz_truncated": gzip.compress(b'{"a": 1}\n' * 1000)[:50],
        "gz_deep": gzip.compress(b"[" * 200_000 + b"\n"),
    }
    paths = {}
    for name, data in files.items():
        paths[name] = root / name
        paths[name].write_bytes(data)
    for name in ("non_utf8", "deep_list", "huge_int", "binary", "not_a_list"):
        paths[f"{name}.yaml"] = root / f"{name}.yaml"
        paths[f"{name}.yaml"].write_bytes(files[name])
    paths["dir"] = root / "a_directory"
    paths["dir"].mkdir()
    paths["missing"] = root / "missing" / "file"
    return paths


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The hostile files, and under "episodes" a good episodes file to pass beside them."""
    root = tmp_path_factory.mktemp("hostile")
    played = root / "played"
    run = ["run", "--policy", "oracle", "--scenarios", "E1_onboard_new_hire", "--seeds", "0"]
    assert main([*run, "--out", str(played)]) == 0
    return {**hostile_files(root), "episodes": played / "episodes.parquet"}


@pytest.fixture(scope="module")
def trajectory(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("played")
    args = ["run", "--ruleset", "v1", "--policy", "oracle", "--scenarios", "onboard_new_hire", "--seeds", "0"]
    assert main([*args, "--out", str(out)]) == 0
    (first,) = io.read_jsonl(out / "trajectories.jsonl.gz")
    return first


def tampered(trajectory: dict) -> dict[str, dict]:
    """Trajectories edited by hand or damaged, by what was done to them. (An action the ruleset
    rejects is not among them: v1 judges it as a step, so such a trajectory replays.)"""
    step = trajectory["steps"][0]
    return {
        "steps_not_a_list": {**trajectory, "steps": 5},
        "step_not_an_object": {**trajectory, "steps": [5]},
        "action_a_string": {**trajectory, "steps": [{**step, "action": "zzz"}]},
        "action_missing": {**trajectory, "steps": [{k: v for k, v in step.items() if k != "action"}]},
        "invalid_without_raw": {**trajectory, "steps": [{**step, "action": {"type": "invalid"}}]},
        "tokens_a_string": {**trajectory, "steps": [{**step, "tokens_used": "many"}]},
        "negative_seed": {**trajectory, "seed": -3},
        "seed_a_string": {**trajectory, "seed": "0"},
        "seed_beyond_int64": {**trajectory, "seed": 2**70},
        "no_ruleset": {k: v for k, v in trajectory.items() if k != "ruleset"},
        "unknown_ruleset": {**trajectory, "ruleset": "nope"},
        "unknown_scenario": {**trajectory, "scenario": "nope"},
    }


def assert_reported(capsys: pytest.CaptureFixture[str], verb: str, status: int) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert lines and lines[-1].startswith(f"schemashift {verb}: error: "), err
    assert status == 2 and status != INTERNAL_ERROR, (status, err)
    assert "internal error" not in lines[-1], err
    return lines[-1]


def cases(bad: dict[str, Path], tmp: Path) -> dict[str, list[list[str]]]:
    """Bad argument lists of every verb (valid options around the bad one)."""
    out = str(tmp / "out")
    a_file = str(bad["not_a_list"])
    files = [str(bad[name]) for name in bad if name != "episodes"]
    # a mapping is a valid (if empty) manifest and config
    not_mappings = [path for path in files if "not_a_list" not in path]
    yamls = [path for path in not_mappings if path.endswith(".yaml")]
    empty = str(bad["empty"])
    run = ["--policy", "oracle", "--out", out]
    return {
        "run": [
            [*run, "--seeds", "-1"],
            [*run, "--seeds", "abc"],
            [*run, "--seeds", "0-99999999999"],
            [*run, "--seeds", "9" * 5000],
            [*run, "--samples", "0"],
            [*run, "--ruleset", "nope"],
            [*run, "--scenarios", ","],
            [*run, "--split", "nope"],
            ["--policy", "nope", "--out", out],
            ["--policy", "oracle", "--out", a_file],
            [*run, "--backend", "carrier-pigeon://x"],
            [*run, "--arms", "control"],  # legacy plays only drift
            [*run, "--arms", "drift,sideways"],
            [*run, "--ruleset", "v1", "--arms", "drift,drift"],
        ],
        "eval": [
            ["--policy", "oracle", "--out", out],
            ["--policy", "openai:m", "--out", out, "--batch-size", "0"],
            ["--policy", "openai:m", "--out", a_file],
            ["--policy", "openai:m", "--out", out, "--ruleset", "nope"],
            ["--policy", "openai:m", "--out", out, "--seeds", "-4"],
            ["--policy", "openai:m", "--out", out, "--arms", "control"],
        ],
        "replay": [
            # an empty action file is a valid replay of no actions
            *(["--actions", path, "--scenario", "E1_onboard_new_hire"] for path in files if path != empty),
            *(["--trajectory", path] for path in files),
            ["--actions", os.devnull, "--scenario", "onboard_new_hire", "--ruleset", "v1", "--seed", "-1"],
            ["--actions", os.devnull, "--scenario", "E1_onboard_new_hire", "--seed", "-1"],
            ["--actions", os.devnull, "--scenario", "E1_onboard_new_hire", "--arm", "control"],
            ["--actions", os.devnull, "--scenario", "onboard_new_hire", "--ruleset", "v1", "--arm", "nope"],
            ["--actions", os.devnull, "--scenario", "E1_onboard_new_hire", "--seed", str(2**70)],
            ["--actions", os.devnull, "--scenario", "nope"],
            ["--actions", os.devnull, "--scenario", "E1_onboard_new_hire", "--ruleset", "nope"],
            ["--actions", os.devnull],
        ],
        "aggregate": [
            ["--cells", path, "--out-episodes", f"{out}/e.parquet", "--out-drifts", f"{out}/d.parquet"]
            for path in files
        ]
        + [
            ["--cells", str(tmp), "--out-episodes", "e", "--out-drifts", "d", "--expected", path]
            for path in files
        ]
        + [["--cells", str(tmp), "--out-episodes", "e", "--out-drifts", "d", "--train", str(bad["missing"])]],
        "report": [
            *(["tables", "--episodes", path, "--out", out] for path in files),
            *(
                ["tables", "--episodes", str(bad["episodes"]), "--out", out, option, path]
                for option in ("--manifest", "--examples", "--drifts", "--training-metrics")
                for path in (not_mappings if option == "--manifest" else files)
            ),
            *(
                ["tables", "--episodes", str(bad["episodes"]), "--out", out, "--config", path]
                for path in yamls
            ),
            ["tables", "--episodes", str(bad["binary"]), "--out", out, "--bootstrap-samples", "0"],
            ["tables", "--episodes", str(bad["binary"]), "--out", a_file],
        ],
        "scenarios": [["--ruleset", "nope"], ["--ruleset", ""]],
        "screenshots": [
            ["--out", out],
            ["--report", str(bad["missing"]), "--out", out],
            ["--trackio", str(bad["missing"]), "--out", out],
            ["--trackio", str(tmp), "--out", out],
        ],
        "serve": [
            ["--port", "0"],
            ["--port", "99999"],
            ["--max-sessions", "0"],
            ["--session-timeout", "-1"],
            ["--session-timeout", "nan"],
            ["--session-timeout", "inf"],
            ["--read-timeout", "0"],
            ["--read-timeout", "-1"],
            ["--read-timeout", "nan"],
            ["--read-timeout", "inf"],
            ["--record", a_file],
        ],
        "sft": [
            ["--model", "m", "--out", out, "--steps", "0"],
            ["--model", "m", "--out", out, "--ruleset", "nope"],
            ["--model", "m", "--out", out, "--seeds", "-1"],
            ["--model", "m", "--out", out, "--scenarios", "nope"],
        ],
        "tiny-model": [["--out", out, "--steps", "0"]],
        "pretrained-model": [
            ["--recipe", "nope", "--out", out],
            ["--recipe", "smollm2-135m"],
            ["--recipe", "smollm2-135m", "--out", out, "--offline", "--wheelhouse", str(tmp / "no_wheels")],
            ["--recipe", "smollm2-135m", "--fetch-only", "--offline", "--wheelhouse", str(bad["dir"])],
        ],
        "validate": [
            [a_file],
            [str(tmp / "nowhere")],
            *([folder] for folder in manifests(bad, not_mappings, tmp)),
        ],
        "train": [["--config", path, "--run", "r", "--out", out] for path in files],
    }


def manifests(bad: dict[str, Path], files: list[str], tmp: Path) -> list[str]:
    """Folders of a good result set beside each hostile file as their `manifest.json`."""
    folders = []
    for number, path in enumerate(path for path in files if Path(path).is_file()):
        folder = tmp / f"manifest-{number}"
        shutil.copytree(bad["episodes"].parent, folder)
        shutil.copyfile(path, folder / "manifest.json")
        folders.append(str(folder))
    return folders


def test_every_verb_has_bad_input_cases(bad: dict[str, Path], tmp_path: Path) -> None:
    assert set(cases(bad, tmp_path)) == set(discover_verbs())


@pytest.mark.parametrize("verb", sorted(discover_verbs()))
def test_bad_input_is_an_error_line_with_status_2(
    verb: str, bad: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in cases(bad, tmp_path)[verb]:
        status = main([verb, *args])
        assert_reported(capsys, verb, status)


@pytest.mark.parametrize("name", sorted(tampered({"steps": [{}]})))
def test_replay_refuses_a_tampered_trajectory(
    name: str, trajectory: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl.gz"
    io.write_jsonl_gz(path, [tampered(trajectory)[name]])
    line = assert_reported(capsys, "replay", main(["replay", "--trajectory", str(path)]))
    assert str(path) in line or "trajectory" in line or "action 1" in line or "nope" in line


@pytest.mark.parametrize(
    "line",
    [
        "5",
        '"text"',
        "null",
        "[]",
        '{"type": 1}',
        '{"type": "call_tool", "tool_call": 5}',
        '{"type": "call_tool", "tool_call": {"tool": 5}}',
    ],
)
def test_replay_refuses_actions_that_are_not_actions(
    line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "actions.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    status = main(["replay", "--actions", str(path), "--scenario", "E1_onboard_new_hire"])
    assert_reported(capsys, "replay", status)


def test_replay_names_the_line_of_bad_action_text(
    bad: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    expected = {
        "non_utf8": "line 1: not UTF-8 text",
        "deep_list": "line 1: JSON nested too deeply",
        "huge_int": "line 1: unreadable JSON",
        "binary": "line 1:",
    }
    for name, message in expected.items():
        status = main(["replay", "--actions", str(bad[name]), "--scenario", "E1_onboard_new_hire"])
        assert f"{bad[name]} {message}" in assert_reported(capsys, "replay", status)


@pytest.mark.parametrize(
    "variable", ["SCHEMASHIFT_MAX_SESSIONS", "SCHEMASHIFT_SESSION_TIMEOUT_S", "SCHEMASHIFT_READ_TIMEOUT_S"]
)
@pytest.mark.parametrize("value", ["abc", "", "1e999x", "9" * 5000])
def test_a_bad_environment_breaks_neither_help_nor_the_error_line(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    for argv in (["--help"], *([verb, "--help"] for verb in discover_verbs())):
        assert main(argv) == 0
        assert "Traceback" not in capsys.readouterr().err
    line = assert_reported(capsys, "serve", main(["serve", "--port", "0"]))
    assert f"${variable} is" in line


@pytest.mark.parametrize("value", ["0", "-5"])
@pytest.mark.parametrize(
    "variable, message",
    [
        ("SCHEMASHIFT_MAX_SESSIONS", "it must be at least 1"),
        ("SCHEMASHIFT_READ_TIMEOUT_S", "it must be more than 0"),
    ],
)
def test_out_of_range_environment_values_are_refused_like_options(
    variable: str,
    message: str,
    value: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    line = assert_reported(capsys, "serve", main(["serve"]))
    assert f"${variable} is {value!r}: {message}" in line


def test_report_without_the_workflow_extra_says_which_extra(
    bad: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    episodes = tmp_path / "episodes.parquet"
    main(
        [
            "run",
            "--policy",
            "oracle",
            "--scenarios",
            "E1_onboard_new_hire",
            "--seeds",
            "0",
            "--out",
            str(tmp_path),
        ]
    )
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an installation without pandas sees
    status = main(["report", "tables", "--episodes", str(episodes), "--out", str(tmp_path / "tables")])
    line = assert_reported(capsys, "report", status)
    assert (
        "'pandas' is not installed; install the 'workflow' extra: pip install 'schemashift[workflow]'" in line
    )


def test_the_extras_table_matches_pyproject() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    from schemashift.cli import EXTRAS

    distribution = {"yaml": "pyyaml", "vl_convert": "vl-convert-python"}
    for module, extra in EXTRAS.items():
        names = {req.split("=")[0].split(">")[0].split("<")[0].split("[")[0].strip() for req in extras[extra]}
        assert distribution.get(module, module) in names, (module, extra)


def test_bad_input_as_the_command_reports_it(bad: dict[str, Path]) -> None:
    """The same through `python -m schemashift.cli`, as users and the workflow run it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemashift.cli",
            "replay",
            "--actions",
            str(bad["deep_object"]),
            "--scenario",
            "x",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SCHEMASHIFT_MAX_SESSIONS": "abc"},
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"schemashift replay: error: {bad['deep_object']} line 1: JSON nested too deeply"
    )
