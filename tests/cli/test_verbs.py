"""The `run`, `replay` and `scenarios` verbs, called in-process through `main` (and once as a script)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from legacy_reference import REF, SCENARIOS

from schemashift import policies
from schemashift.cli import main
from schemashift.rollout import io
from schemashift.rollout.runner import FINAL_KEYS

PHASE6 = REF["worked_examples"]["5_phase6_E1"]
#: spec 8.4 example 5: shaped_total of each step and the episode's cumulative reward
PHASE6_STEPS = [0.380625, 0.37125, 0.361875, 0.4525, 0.703125, 1.09375, 0.934375]
PHASE6_CUMULATIVE = 4.2975
RESULT_FILES = ["drifts.parquet", "episodes.parquet", "trajectories.jsonl.gz"]


def run_cli(
    out: Path, policy: str, scenarios: str = "E1_onboard_new_hire", seeds: str = "0", *extra: str
) -> int:
    """`schemashift run` of one policy over scenarios x seeds into `out`."""
    return main(
        ["run", "--policy", policy, "--scenarios", scenarios, "--seeds", seeds, "--out", str(out), *extra]
    )


class Scripted:
    """A test policy that plays a fixed action list."""

    def __init__(self, actions: list[Any]) -> None:
        self.actions = actions
        self.index = 0

    def reset(self) -> None:
        self.index = 0

    def act(self, observation: dict[str, Any]) -> Any:
        action = self.actions[self.index]
        self.index += 1
        return action


class Broken:
    def reset(self) -> None:
        pass

    def act(self, observation: dict[str, Any]) -> Any:
        raise ConnectionError("backend unreachable")


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    return path


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def episodes(out: Path) -> list[dict[str, Any]]:
    return io.read_parquet_rows(out / "episodes.parquet")


def error_of(capsys: pytest.CaptureFixture[str], verb: str) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"schemashift {verb}: error: "), captured.err
    return lines[0]


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("oracle") / "out"
    status = main(
        [
            "run",
            "--ruleset",
            "legacy",
            "--policy",
            "oracle",
            "--scenarios",
            "all",
            "--seeds",
            "0-1",
            "--out",
            str(out),
            "--sweep-id",
            "oracle-run",
        ]
    )
    assert status == 0
    return out


# -- run -------------------------------------------------------------------------------------------------


def test_run_oracle_over_all_scenarios_writes_three_files_of_successes(oracle_run: Path) -> None:
    assert sorted(p.name for p in oracle_run.iterdir()) == RESULT_FILES
    rows = episodes(oracle_run)
    assert [(r["scenario"], r["seed"]) for r in rows] == [(s, n) for s in SCENARIOS for n in (0, 1)]
    assert all(r["success"] is True and r["status"] == "graded" for r in rows)
    assert all(
        r["policy"] == "oracle" and r["ruleset"] == "legacy" and r["sweep_id"] == "oracle-run" for r in rows
    )
    assert len({r["config_hash"] for r in rows}) == 1 and rows[0]["config_hash"]
    low, high = REF["oracle"]["final_shaped_range"]
    assert all(low - 1e-9 <= r["shaped_total"] <= high + 1e-9 for r in rows)
    assert len(list(io.read_jsonl(oracle_run / "trajectories.jsonl.gz"))) == 12
    assert len(io.read_parquet_rows(oracle_run / "drifts.parquet")) == 2 * 9


def test_run_reports_a_summary_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert run_cli(out, "naive_heuristic") == 0
    captured = capsys.readouterr()
    assert "1 episodes graded (0 infra errors): success 0/1" in captured.out
    assert captured.err == ""


def test_run_with_listed_scenarios_and_seeds_plays_exactly_those_cells_in_order(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert (
        run_cli(
            out,
            "policy_aware_heuristic",
            "E1_onboard_new_hire,M2_weekly_report",
            "0,3",
            "--config-hash",
            "fixed",
        )
        == 0
    )
    expected = [
        ("E1_onboard_new_hire", 0),
        ("E1_onboard_new_hire", 3),
        ("M2_weekly_report", 0),
        ("M2_weekly_report", 3),
    ]
    rows = episodes(out)
    assert [(r["scenario"], r["seed"]) for r in rows] == expected
    assert all(r["config_hash"] == "fixed" for r in rows)
    assert [(t["scenario"], t["seed"]) for t in io.read_jsonl(out / "trajectories.jsonl.gz")] == expected
    drift_cells = [(d["scenario"], d["seed"]) for d in io.read_parquet_rows(out / "drifts.parquet")]
    assert drift_cells == [expected[0], expected[1], expected[2], expected[2], expected[3], expected[3]]


def test_run_with_samples_writes_a_row_per_sample(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_cli(out, "oracle", "E2_meeting_invite_blast", "4", "--samples", "3") == 0
    assert [(r["seed"], r["sample_index"]) for r in episodes(out)] == [(4, 0), (4, 1), (4, 2)]


def test_run_with_an_infra_error_writes_the_rows_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(policies.BUILTIN, "broken_test_policy", lambda ruleset: Broken())
    out = tmp_path / "out"
    assert run_cli(out, "broken_test_policy", "E3_customer_lookup", "0-1") == 1
    err = capsys.readouterr().err
    assert "infra_error in E3_customer_lookup seed 0: ConnectionError: backend unreachable" in err
    assert "infra_error in E3_customer_lookup seed 1" in err
    rows = episodes(out)
    assert [r["status"] for r in rows] == ["infra_error", "infra_error"]
    assert all(r["completion"] is None and r["success"] is None for r in rows)


BAD_RUN_ARGS = {
    "unknown-policy": (["--policy", "nope"], ["Unknown policy 'nope'", "oracle"]),
    "unknown-ruleset": (["--policy", "oracle", "--ruleset", "nope"], ["Unknown ruleset 'nope'", "legacy"]),
    "unknown-scenario": (
        ["--policy", "oracle", "--scenarios", "E9_nothing"],
        ["unknown scenario 'E9_nothing'", "E1_onboard_new_hire"],
    ),
    "reversed-seeds": (["--policy", "oracle", "--seeds", "4-1"], ["--seeds", "4-1", "reversed"]),
    "non-numeric-seeds": (["--policy", "oracle", "--seeds", "x"], ["--seeds", "'x'"]),
    "zero-samples": (["--policy", "oracle", "--samples", "0"], ["--samples", "at least 1"]),
    "unknown-backend": (
        ["--policy", "oracle", "--backend", "carrier-pigeon"],
        ["Unknown backend 'carrier-pigeon'", "inprocess"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_RUN_ARGS))
def test_run_rejects_bad_input_and_leaves_existing_results_alone(
    case: str, oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(oracle_run, out)
    before = snapshot(out)
    args, fragments = BAD_RUN_ARGS[case]
    capsys.readouterr()
    assert main(["run", *args, "--out", str(out)]) == 2
    message = error_of(capsys, "run")
    for fragment in fragments:
        assert fragment in message
    assert snapshot(out) == before


def test_run_rejects_bad_input_without_creating_the_output_directory(tmp_path: Path) -> None:
    out = tmp_path / "never"
    assert main(["run", "--policy", "nope", "--out", str(out)]) == 2
    assert not out.exists()


# -- replay ----------------------------------------------------------------------------------------------


def replay_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["replay", *args]) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1, "replay prints exactly one JSON object"
    return json.loads(lines[0])


def test_replay_scores_the_phase6_episode_step_by_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    actions = write_lines(tmp_path / "phase6.jsonl", PHASE6["actions"])
    result = replay_json(
        capsys,
        [
            "--ruleset",
            "legacy",
            "--scenario",
            "E1_onboard_new_hire",
            "--seed",
            "0",
            "--actions",
            str(actions),
        ],
    )
    assert set(result) == {"steps", "final", "ignored"}
    assert [s["step"] for s in result["steps"]] == list(range(1, 8))
    assert [s["reward"]["shaped_total"] for s in result["steps"]] == pytest.approx(PHASE6_STEPS, abs=1e-9)
    assert result["steps"][2]["response"]["status"] == PHASE6["step3_status"]
    assert result["steps"][2]["response"]["error"] == PHASE6["step3_error"]
    final = result["final"]
    assert set(final) == {*FINAL_KEYS, "done"}
    assert final["cumulative_reward"] == pytest.approx(PHASE6_CUMULATIVE, abs=1e-9)
    for key in ("completion", "drift_detection", "adaptation", "efficiency"):
        assert final[key] == pytest.approx(PHASE6["final"][key], abs=1e-9)
    assert final["shaped_total"] == pytest.approx(PHASE6["final"]["shaped"], abs=1e-9)
    assert final["score"] == final["shaped_total"]
    assert final["binary"] == 1.0 and final["success"] is True
    assert final["steps"] == 7 and final["done"] is True
    assert result["ignored"] == []


def test_the_runner_playing_the_phase6_actions_gives_the_same_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(policies.BUILTIN, "scripted_phase6", lambda ruleset: Scripted(PHASE6["actions"]))
    out = tmp_path / "out"
    assert run_cli(out, "scripted_phase6") == 0
    (row,) = episodes(out)
    assert row["policy"] == "scripted_phase6"
    assert row["shaped_total"] == pytest.approx(PHASE6_STEPS[-1], abs=1e-9)
    assert row["cumulative_reward"] == pytest.approx(PHASE6_CUMULATIVE, abs=1e-9)
    assert (row["completion"], row["drift_detection"], row["adaptation"]) == (1.0, 1.0, 1.0)
    assert row["efficiency"] == pytest.approx(0.5625, abs=1e-9)
    assert row["binary"] == 1.0 and row["success"] is True and row["steps"] == 7
    (trajectory,) = io.read_jsonl(out / "trajectories.jsonl.gz")
    assert [s["reward"]["shaped_total"] for s in trajectory["steps"]] == pytest.approx(PHASE6_STEPS, abs=1e-9)
    # and replay of the same actions agrees exactly with the runner
    actions = write_lines(tmp_path / "phase6.jsonl", PHASE6["actions"])
    result = replay_json(capsys, ["--scenario", "E1_onboard_new_hire", "--actions", str(actions)])
    assert [s["reward"] for s in result["steps"]] == [s["reward"] for s in trajectory["steps"]]
    for key in FINAL_KEYS:
        assert result["final"][key] == row[key], key


def test_replay_lists_actions_after_the_end_as_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = [{"type": "inspect_schema", "inspect": {"tool": "mail"}}, {"type": "dance"}]
    actions = write_lines(tmp_path / "long.jsonl", [*PHASE6["actions"], "", *extra])
    result = replay_json(capsys, ["--scenario", "E1_onboard_new_hire", "--actions", str(actions)])
    assert len(result["steps"]) == 7
    assert [item["action"] for item in result["ignored"]] == extra
    assert result["final"]["cumulative_reward"] == pytest.approx(PHASE6_CUMULATIVE, abs=1e-9)


def test_replay_reads_actions_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io as stdio

    monkeypatch.setattr(sys, "stdin", stdio.StringIO(json.dumps(PHASE6["actions"][-1]) + "\n"))
    result = replay_json(capsys, ["--scenario", "E1_onboard_new_hire", "--actions", "-"])
    assert len(result["steps"]) == 1 and result["final"]["done"] is True


@pytest.mark.parametrize("scenario", ["M1_customer_escalation", "E2_meeting_invite_blast"])
@pytest.mark.parametrize("seed", [0, 1])
def test_replay_rescores_a_stored_trajectory(
    oracle_run: Path, scenario: str, seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    path = oracle_run / "trajectories.jsonl.gz"
    result = replay_json(capsys, ["--trajectory", str(path), "--scenario", scenario, "--seed", str(seed)])
    (row,) = [r for r in episodes(oracle_run) if (r["scenario"], r["seed"]) == (scenario, seed)]
    for key in FINAL_KEYS:
        assert result["final"][key] == row[key], key
    (trajectory,) = [t for t in io.read_jsonl(path) if (t["scenario"], t["seed"]) == (scenario, seed)]
    assert [s["reward"] for s in result["steps"]] == [s["reward"] for s in trajectory["steps"]]
    assert result["ignored"] == []


@pytest.mark.parametrize(
    ("selection", "fragments"),
    [
        ([], ["12 trajectories", "match (no filter)", "--scenario"]),
        (["--scenario", "M3_event_cleanup"], ["2 trajectories", "scenario=M3_event_cleanup"]),
        (
            ["--scenario", "M3_event_cleanup", "--seed", "9"],
            ["no trajectory", "scenario=M3_event_cleanup, seed=9"],
        ),
        (["--scenario", "nothing_like_it"], ["no trajectory", "scenario=nothing_like_it"]),
        (["--scenario", "M3_event_cleanup", "--seed", "0", "--sample-index", "1"], ["no trajectory"]),
    ],
    ids=["no-filter", "two-seeds", "no-seed-match", "no-scenario-match", "no-sample-match"],
)
def test_replay_trajectory_selection_must_be_unique(
    oracle_run: Path, selection: list[str], fragments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["replay", "--trajectory", str(oracle_run / "trajectories.jsonl.gz"), *selection]) == 2
    message = error_of(capsys, "replay")
    for fragment in fragments:
        assert fragment in message


def test_replay_refuses_a_trajectory_under_another_ruleset(
    oracle_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert (
        main(
            [
                "replay",
                "--trajectory",
                str(oracle_run / "trajectories.jsonl.gz"),
                "--scenario",
                "E1_onboard_new_hire",
                "--seed",
                "0",
                "--ruleset",
                "other",
            ]
        )
        == 2
    )
    assert "'legacy'" in error_of(capsys, "replay")


CALL = {
    "type": "call_tool",
    "tool_call": {"tool": "mail", "endpoint": "list_messages", "params": {"folder": "inbox"}},
}
BAD_ACTION_FILES = {
    "malformed-json": ([CALL, CALL, '{"type": "complete_task", "complete": '], ["line 3", "malformed JSON"]),
    "unknown-type": (
        [CALL, {"type": "teleport", "teleport": {}}],
        ["action 2", "unknown action type 'teleport'"],
    ),
    "unknown-tool": (
        [{"type": "call_tool", "tool_call": {"tool": "slack", "endpoint": "post", "params": {}}}],
        ["action 1", "unknown tool 'slack'"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_ACTION_FILES))
def test_replay_rejects_bad_action_files(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, fragments = BAD_ACTION_FILES[case]
    path = write_lines(tmp_path / "actions.jsonl", lines)
    capsys.readouterr()
    assert main(["replay", "--scenario", "E1_onboard_new_hire", "--actions", str(path)]) == 2
    message = error_of(capsys, "replay")
    for fragment in fragments:
        assert fragment in message


def test_replay_rejects_an_unknown_scenario_listing_the_available_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "actions.jsonl", [CALL])
    capsys.readouterr()
    assert main(["replay", "--scenario", "Z9_unknown", "--actions", str(path)]) == 2
    message = error_of(capsys, "replay")
    assert "Z9_unknown" in message
    for scenario in SCENARIOS:
        assert scenario in message


def test_replay_with_actions_needs_a_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(tmp_path / "actions.jsonl", [CALL])
    capsys.readouterr()
    assert main(["replay", "--actions", str(path)]) == 2
    assert "--scenario is required with --actions" in error_of(capsys, "replay")


@pytest.mark.parametrize("source", ["--actions", "--trajectory"])
def test_replay_reports_a_missing_file(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl.gz"
    capsys.readouterr()
    assert main(["replay", "--scenario", "E1_onboard_new_hire", source, str(missing)]) == 2
    message = error_of(capsys, "replay")
    assert "cannot read" in message and "missing.jsonl.gz" in message


def test_replay_needs_exactly_one_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--scenario", "E1_onboard_new_hire"]) == 2
    assert main(["replay", "--actions", "a", "--trajectory", "b"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


# -- scenarios -------------------------------------------------------------------------------------------


def test_scenarios_json_lists_the_six_legacy_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["scenarios", "--ruleset", "legacy", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["ruleset"] == "legacy"
    assert "legacy" in listing["available_rulesets"]
    rows = [(s["id"], s["tier"], s["max_steps"]) for s in listing["scenarios"]]
    assert rows == [
        ("E1_onboard_new_hire", "easy", 8),
        ("E2_meeting_invite_blast", "easy", 6),
        ("E3_customer_lookup", "easy", 8),
        ("M1_customer_escalation", "medium", 12),
        ("M2_weekly_report", "medium", 10),
        ("M3_event_cleanup", "medium", 12),
    ]
    reference = {e["id"]: (e["tier"], e["max_steps"]) for k, e in REF["scenarios"].items() if k[0] != "_"}
    assert {sid: (tier, steps) for sid, tier, steps in rows} == reference


def test_scenarios_table_mentions_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    assert "legacy" in out
    for scenario in SCENARIOS:
        (line,) = [line for line in out.splitlines() if line.startswith(scenario + " ")]
        assert ("easy" if scenario[0] == "E" else "medium") in line


def test_scenarios_rejects_an_unknown_ruleset(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["scenarios", "--ruleset", "nope"]) == 2
    message = error_of(capsys, "scenarios")
    assert "nope" in message and "legacy" in message


# -- help ------------------------------------------------------------------------------------------------

VERB_FLAGS = {
    "run": [
        "--ruleset",
        "--policy",
        "--scenarios",
        "--seeds",
        "--samples",
        "--out",
        "--backend",
        "--sweep-id",
        "--config-hash",
    ],
    "replay": ["--ruleset", "--scenario", "--seed", "--sample-index", "--actions", "--trajectory"],
    "scenarios": ["--ruleset", "--json"],
}


@pytest.mark.parametrize("verb", sorted(VERB_FLAGS))
def test_verb_help_mentions_every_flag(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: schemashift {verb}")
    for flag in VERB_FLAGS[verb]:
        assert flag in out, flag


# -- the installed console script ------------------------------------------------------------------------


def test_console_script_exits_2_on_an_unknown_policy(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "schemashift"
    assert script.is_file(), "the schemashift console script is installed next to the interpreter"
    out = tmp_path / "out"
    completed = subprocess.run(
        [str(script), "run", "--ruleset", "legacy", "--policy", "nope", "--seeds", "0", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.startswith("schemashift run: error: Unknown policy 'nope'")
    assert not out.exists()


def test_run_with_out_naming_a_file_is_a_usage_error(tmp_path: Path, capsys) -> None:
    target = tmp_path / "a-file"
    target.write_text("keep")
    code = run_cli(target, "oracle")
    assert code == 2
    assert "a-file" in capsys.readouterr().err
    assert target.read_text() == "keep"


def test_replay_reads_a_plain_jsonl_trajectory_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert run_cli(out, "oracle") == 0
    plain = tmp_path / "trajectories.jsonl"
    plain.write_bytes(gzip.decompress((out / "trajectories.jsonl.gz").read_bytes()))
    capsys.readouterr()
    assert main(["replay", "--trajectory", str(plain)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["final"]["success"] is True
