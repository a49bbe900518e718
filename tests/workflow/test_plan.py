"""schemashift.workflow called directly (no Snakemake): cell selection shared with `run` and
`eval`, subjects, API models, expected cells, GPU detection and code digests from real imports."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from workflow_support import REPO, TEST_CONFIG

from schemashift.cli import build_parser, discover_verbs
from schemashift.cli.options import cells_of
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import BUILTIN
from schemashift.rollout.subject import Subject
from schemashift.workflow import ConfigError, Plan, gpu_visible
from schemashift.workflow.digests import ImportGraph, closure, code_digests, jobs

pytestmark = pytest.mark.timeout(60)


def load(name: str) -> dict:
    with open(REPO / name) as f:
        return yaml.safe_load(f)


def with_defaults(config: dict) -> dict:
    """What Snakemake's schema validation fills in (the cell defaults a test config leaves out)."""
    for cells in config["evaluation"].values():
        cells.setdefault("split", "test")
        cells.setdefault("compositions", False)
    return config


def composed_config() -> dict:
    """The GPU-scale matrix of the original training log (config.gpu.yaml,
    docs/original-training-log.md), with compositions and an API model."""
    config = with_defaults(load("config.gpu.yaml"))
    config["evaluation"]["v1"]["compositions"] = True
    config["train"]["enabled"] = True
    config["models"]["gpt-4o-mini"]["enabled"] = True
    return config


PARSER = build_parser(discover_verbs())


def played(verb: str, command: str) -> set[tuple[str, str, int]]:
    """(ruleset, scenario, seed) of the cells the verb plays for a command line the plan wrote."""
    words = shlex.split(command)
    args = PARSER.parse_args([verb, *words, "--out", "unused"])
    scenarios, seeds = cells_of(args, get_ruleset(args.ruleset))
    return {(args.ruleset, scenario, seed) for scenario in scenarios for seed in seeds}


def test_with_compositions_the_expected_model_cells_are_the_cells_eval_plays():
    plan = Plan(composed_config(), environ={"OPENAI_API_KEY": "sk-x"})
    expected: dict[str, set] = {}
    for ruleset, evaluation, scenario, seed, _arm in plan.model_cells():
        expected.setdefault(evaluation.folder, set()).add((ruleset, scenario, seed))
    assert "api/gpt-4o-mini" in expected and "run1/step-25" in expected
    composed = {s for s in expected["run1/step-25"] if s[1].startswith("composed_")}
    assert composed, "v1 with compositions: the checkpoints are expected on the compositions"
    for name, cells in expected.items():
        eval_plays = set()
        for ruleset in plan.config["rulesets"]:
            command = (
                f"--policy '{plan.evaluation(name).policy}' --ruleset {ruleset} {plan.cells_args(ruleset)}"
            )
            eval_plays |= played("eval", command)
        assert eval_plays == cells, name
    census = {(c["ruleset"], c["scenario"], c["seed"]) for c in plan.expected_cells() if c.get("train_run")}
    assert census == expected["run1/step-25"]


@pytest.mark.parametrize("shard_seeds", [1, 2, 3, 7, 100, 10_000])
@pytest.mark.parametrize("seeds", ["0-4", "3,9-12,40", "9995-10000"])
def test_the_baseline_shards_play_the_baseline_cells_each_once(shard_seeds, seeds):
    """Whatever the block size and seeds: the shards' `run` commands together play exactly the
    cells `run` plays over the whole selection, each cell in one shard (the block of its seed)."""
    config = composed_config()
    config["shard_seeds"] = shard_seeds
    config["rulesets"] = ["legacy"]
    config["evaluation"]["legacy"]["seeds"] = seeds.split(",")[0]
    config["evaluation"]["legacy"]["baseline_seeds"] = seeds
    plan = Plan(config, environ={})
    cells = {(r, s, seed) for r, p, s, seed, _arm in plan.baseline_cells() if p == "oracle"}
    played_by: dict[tuple[str, str, int], str] = {}
    for ruleset, policy, scenario, first in plan.baseline_shards():
        folder = plan.shard_dir(ruleset, policy, scenario, first)
        first_seed, last_seed = map(int, folder.rsplit("seeds-", 1)[1].split("-"))
        arg = plan.shard_seeds(ruleset, scenario, first_seed, last_seed)
        for cell in played(
            "run", f"--policy {policy} --ruleset {ruleset} --scenarios {scenario} --seeds {arg}"
        ):
            assert first_seed <= cell[2] <= last_seed and first_seed % shard_seeds == 0
            assert played_by.setdefault((*cell, policy), folder) == folder, "a cell in two shards"
    assert {(r, s, seed) for (r, s, seed, p) in played_by if p == "oracle"} == cells
    assert played("run", f"--policy oracle --ruleset legacy --seeds {seeds}") == cells


def test_baselines_play_baseline_seeds_and_models_play_seeds():
    """v1's baselines: 10 seeds in two shards of 5, in the census too; every model evaluation
    (API model, base model, checkpoint) plays the 5 model seeds, in its command and in the census."""
    config = composed_config()
    config["shard_seeds"] = 5
    config["evaluation"]["v1"].update(seeds="0-4", baseline_seeds="0-9")
    plan = Plan(config, environ={"OPENAI_API_KEY": "sk-x"})
    scenarios = {scenario for scenario, _ in plan.cells("v1")}
    assert {seed for _, seed in plan.cells("v1", baselines=True)} == set(range(10))
    assert set(plan.shards("v1")) == {(scenario, first) for scenario in scenarios for first in (0, 5)}
    assert plan.shard_seeds("v1", sorted(scenarios)[0], 5, 9) == "5-9"
    census: dict[tuple[str, bool], set[int]] = {}
    for cell in plan.expected_cells():
        census.setdefault((cell["ruleset"], "train_run" in cell), set()).add(cell["seed"])
    assert census[("v1", False)] == set(range(10)) and census[("v1", True)] == set(range(5))
    assert census[("legacy", False)] == census[("legacy", True)] == set(range(5))
    assert "--seeds 0-4 " in plan.cells_args("v1")
    models = {("v1", scenario, seed) for scenario, seed in plan.cells("v1")}
    assert played("eval", f"--policy 'openai:gpt-4o-mini' --ruleset v1 {plan.cells_args('v1')}") == models
    assert {seed for ruleset, _, _, seed, _ in plan.model_cells() if ruleset == "v1"} == set(range(5))


def test_every_cell_is_expected_and_played_in_each_arm_its_ruleset_plays():
    """config `arms` (default: both) on v1, drift alone on legacy: the baseline shards' and the
    evaluations' commands play exactly the arms the census expects, and a drift-only
    configuration keeps the census it had before arms existed (drift cells carry no arm)."""
    config = composed_config()
    plan = Plan(config, environ={"OPENAI_API_KEY": "sk-x"})
    assert plan.arms("v1") == ["drift", "control"] and plan.arms("legacy") == ["drift"]
    for ruleset in ("v1", "legacy"):
        args = PARSER.parse_args(
            ["eval", *shlex.split(plan.cells_args(ruleset)), "--policy", "x", "--out", "u"]
        )
        assert args.arms.split(",") == plan.arms(ruleset)
    census = plan.expected_cells()
    by_arm: dict[str, set] = {}
    for cell in census:
        key = tuple((k, v) for k, v in sorted(cell.items()) if k != "arm")
        by_arm.setdefault(cell.get("arm", "drift"), set()).add(key)
    assert by_arm["control"] and all(dict(key)["ruleset"] == "v1" for key in by_arm["control"])
    assert by_arm["control"] == {key for key in by_arm["drift"] if dict(key)["ruleset"] == "v1"}
    assert len(census) == len(by_arm["drift"]) + len(by_arm["control"])
    drift_only = Plan({**config, "arms": ["drift"]}, environ={"OPENAI_API_KEY": "sk-x"})
    assert "arm" not in {key for cell in drift_only.expected_cells() for key in cell}
    assert [c for c in census if "arm" not in c] == drift_only.expected_cells()
    assert drift_only.expected_cells_digest() != plan.expected_cells_digest()
    assert "--arms drift" in drift_only.cells_args("v1")
    with pytest.raises(ConfigError, match="arms: --arms: no arm given .legacy plays drift"):
        Plan({**config, "arms": ["control"]}, environ={}).cells_args("legacy")
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    from schemashift.env.arms import ARMS

    assert (
        schema["properties"]["arms"]["default"] == list(ARMS) == schema["properties"]["arms"]["items"]["enum"]
    )


def test_baseline_seeds_hold_the_models_seeds_and_keep_to_the_split():
    config = composed_config()
    config["evaluation"]["v1"]["baseline_seeds"] = "3-9"
    lacks = r"evaluation.v1.baseline_seeds must hold the models' seeds; it lacks \[0, 1, 2\]"
    with pytest.raises(ConfigError, match=lacks):
        Plan(config, environ={}).baseline_cells()
    config["evaluation"]["v1"]["baseline_seeds"] = "0-4,10000"
    outside = r"evaluation.v1.baseline_seeds: \[10000\] are not in split"
    with pytest.raises(ConfigError, match=outside):
        Plan(config, environ={}).baseline_shards()


def test_a_folder_that_is_no_shard_names_the_shards():
    config = composed_config()
    config["shard_seeds"] = 10
    plan = Plan(config, environ={})
    assert plan.shard_seeds("legacy", "E1_onboard_new_hire", 0, 9) == "0-4"
    for first, last in ((0, 4), (5, 14), (10, 19)):
        with pytest.raises(ValueError, match="is no shard of this configuration.*here seeds-0-9"):
            plan.shard_seeds("legacy", "E1_onboard_new_hire", first, last)


def test_cells_follow_the_split_and_refuse_seeds_outside_it():
    config = composed_config()
    plan = Plan(config, environ={})
    assert "--split test" in plan.cells_args("v1") and "--split" not in plan.cells_args("legacy")
    config["evaluation"]["v1"]["seeds"] = "10000"
    with pytest.raises(ConfigError, match=r"evaluation.v1.seeds: \[10000\] are not in split 'test'"):
        Plan(config, environ={}).cells("v1")


@pytest.mark.parametrize("baseline_seeds", [None, "0-9"])
@pytest.mark.parametrize("baselines", [False, True])
def test_bad_seeds_are_blamed_on_the_key_that_holds_them(baselines, baseline_seeds):
    """`seeds: "5-2"` is an error of `seeds`, whoever reads it: the baselines read `seeds` where
    `baseline_seeds` is not set."""
    config = composed_config()
    cells = config["evaluation"]["legacy"]
    cells.pop("baseline_seeds", None)
    if baseline_seeds is not None:
        cells["baseline_seeds"] = baseline_seeds
    cells["seeds"] = "5-2"
    key = "baseline_seeds" if baselines and baseline_seeds else "seeds"
    if key == "baseline_seeds":
        cells["seeds"], cells["baseline_seeds"] = "0-4", "5-2"
    with pytest.raises(ConfigError) as caught:
        Plan(config, environ={}).cells("legacy", baselines=baselines)
    assert str(caught.value) == f"config: evaluation.legacy.{key}: range '5-2' is reversed; write 2-5"
    config["evaluation"]["legacy"]["scenarios"] = "X9_nope"
    with pytest.raises(ConfigError, match=r"^config: evaluation.legacy.scenarios: "):
        Plan(config, environ={}).cells("legacy", baselines=baselines)


def test_compositions_on_a_ruleset_without_them_is_a_config_error():
    config = composed_config()
    config["evaluation"]["legacy"]["compositions"] = True
    with pytest.raises(ConfigError, match="has no generated compositions"):
        Plan(config, environ={}).cells("legacy")


def test_subjects_pass_only_the_policy_spec():
    config = composed_config()
    plan = Plan(config, environ={})
    step = plan.evaluation("run1/step-50")
    assert step.policy == "hf:Qwen/Qwen2.5-1.5B-Instruct@results/train/run1/checkpoint-50"
    assert step.waits_on == ("results/train/run1/train.done.json",)
    assert step.subject == Subject("checkpoint", "run1", 50, "default")
    assert step.record_columns() == {
        "policy": step.policy,
        "train_run": "run1",
        "checkpoint_step": 50,
        "harness": "default",
    }
    assert Subject.of_record(step.record_columns()) == step.subject
    base = plan.evaluation("base/Qwen--Qwen2.5-1.5B-Instruct")
    assert (base.policy, base.waits_on, base.subject.kind, base.subject.step) == (
        "hf:Qwen/Qwen2.5-1.5B-Instruct",
        (),
        "base",
        0,
    )
    with pytest.raises(ValueError, match=r"saves no checkpoint 70; its checkpoints: \[25, 50, 75, 100\]"):
        plan.evaluation("run1/step-70")


def test_api_models_read_keys_by_name_only():
    config = with_defaults(load("config.yaml"))
    plan = Plan(config, environ={"HF_TOKEN": "hf-secret", "OLLAMA_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert set(plan.api_models) == {"qwen2.5-7b-instruct", "llama-3.1-8b-instruct", "gpt-oss-120b"}
    assert plan.api_key_variables() == ["HF_TOKEN"]
    options = plan.api_options("qwen2.5-7b-instruct")
    assert "--api-key-env HF_TOKEN" in options and "hf-secret" not in options
    assert plan.api_options("gpt-oss-120b") == "--base-url http://127.0.0.1:11434/v1 --max-concurrency 4"
    assert plan.api_keyless_prefix("gpt-oss-120b") == "env -u OPENAI_API_KEY "
    slow = {**config["models"]["gpt-oss-120b"], "request_timeout_s": 1200, "max_retries": 1, "stream": True}
    slow_plan = Plan(
        {**config, "models": {"gpt-oss-120b": slow}}, environ={"OLLAMA_BASE_URL": "http://127.0.0.1:11434/v1"}
    )
    assert slow_plan.api_options("gpt-oss-120b").endswith(
        "--max-concurrency 4 --request-timeout 1200 --max-retries 1 --stream"
    )
    leaky = Plan(config, environ={"OLLAMA_BASE_URL": "http://u:hunter2@h/v1"})
    with pytest.raises(ConfigError) as caught:
        leaky.api_key_variables()
    assert "hunter2" not in str(caught.value)


def test_gpu_visibility_starts_no_process(tmp_path):
    assert gpu_visible({"CUDA_VISIBLE_DEVICES": "0"}, tmp_path / "none")
    assert not gpu_visible({"CUDA_VISIBLE_DEVICES": ""}, tmp_path)
    assert not gpu_visible({}, tmp_path / "none")
    (tmp_path / "0000:01:00.0").mkdir()
    assert gpu_visible({}, tmp_path)


def test_training_auto_follows_the_gpu_and_the_census_expects_runs_unless_disabled(monkeypatch, tmp_path):
    config = with_defaults(load("config.gpu.yaml"))
    config["train"]["enabled"] = "auto"
    monkeypatch.setattr("schemashift.workflow.machine.NVIDIA_GPUS", tmp_path)
    plan = Plan(config, environ={})
    assert not plan.train_enabled() and plan.evaluation_targets() == []
    assert {evaluation.folder for _, evaluation, _, _, _ in plan.model_cells()} == set(plan.model_subjects())
    config["train"]["enabled"] = False
    assert Plan(config, environ={}).model_cells() == []


def test_the_server_image_is_a_default_target_wherever_the_jobs_run_in_images():
    from schemashift.workflow.containers import VERDICT_ENV

    config = with_defaults(load(TEST_CONFIG))
    # auto's verdict as the probe would have kept it (tests/workflow/test_container_engine.py)
    for engine, verdict, default in (
        ("none", None, False),
        ("podman", None, True),
        ("auto", "host:neither podman nor docker is installed", False),
        ("auto", "podman:podman answers", True),
    ):
        config["containers"]["engine"] = engine
        environ = {VERDICT_ENV: verdict} if verdict else {}
        targets = Plan(config, environ=environ).default_targets()
        assert ("results/containers/env.image.json" in targets) is default, (engine, verdict)


def test_importing_the_workflow_module_is_light():
    code = "import sys, schemashift.workflow, schemashift.workflow.digests; " + (
        "print([m for m in ('torch', 'transformers', 'pandas', 'pyarrow') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


# --- code digests from real imports ---------------------------------------------------------------


@pytest.fixture
def package(tmp_path) -> Path:
    shutil.copytree(
        REPO / "schemashift", tmp_path / "schemashift", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def digests_after(root: Path, relpath: str) -> tuple[dict, dict]:
    before = code_digests(ImportGraph(root))
    with open(root / relpath, "a") as f:
        f.write("\n# edited\n")
    return before, code_digests(ImportGraph(root))


def test_report_digests_follow_the_environment_the_report_imports(package):
    # report/load.py imports schemashift.env.rulesets inside a function
    before, after = digests_after(package, "schemashift/env/rulesets/v1/catalogue.py")
    for rule in ("tables", "figures", "html", "cells/oracle", "cells/scripted", "eval"):
        assert before[rule] != after[rule], rule


def test_an_unrelated_module_changes_no_report_digest(package):
    before, after = digests_after(package, "schemashift/server/app.py")
    assert {rule: after[rule] for rule in ("aggregate", "tables", "figures", "html")} == {
        rule: before[rule] for rule in ("aggregate", "tables", "figures", "html")
    }


def test_each_report_part_takes_only_its_own_modules(package):
    graph = ImportGraph(package)
    closures = {rule: set(closure(graph, job)) for rule, job in jobs().items()}
    assert "schemashift.report.figures" not in closures["tables"]
    assert "schemashift.report.html" not in closures["figures"]
    assert {"schemashift.report.tables", "schemashift.report.figures"} <= closures["html"]
    assert "schemashift.report.dashboard" not in closures["html"] | closures["tables"] | closures["figures"]
    assert "schemashift.report.dashboard" in closures["trackio"]
    assert "schemashift.report.tables" not in closures["trackio"]
    assert not any(name.startswith("schemashift.report") for name in closures["cells/oracle"])
    # the registries: rulesets listed by pkgutil, model policies named by "module:function" strings
    assert "schemashift.env.rulesets.v1.ruleset" in closures["cells/oracle"]
    assert "schemashift.policies.llm.local" in closures["eval"]


def test_the_import_scan_cache_gives_the_same_graph(package, tmp_path):
    cache = tmp_path / "cache" / "imports.json"
    first = code_digests(ImportGraph(package, cache))
    assert json.loads(cache.read_text())
    assert code_digests(ImportGraph(package, cache)) == first == code_digests(ImportGraph(package))


def test_type_checking_imports_are_not_followed(package):
    module = package / "schemashift" / "rollout" / "io.py"
    text = module.read_text()
    assert "if TYPE_CHECKING:" in text
    before = ImportGraph(package).closure(("schemashift.rollout.io",))
    module.write_text(
        text.replace("if TYPE_CHECKING:\n", "if TYPE_CHECKING:\n    import schemashift.server.app\n", 1)
    )
    assert ImportGraph(package).closure(("schemashift.rollout.io",)) == before


def test_a_policy_edit_changes_only_its_own_cells_digest(package):
    """The registry names every policy's module: only the edited one's cells rerun, and a policy
    that imports it (scripted plays policy_aware's fallback on legacy) reruns with it, as does
    scripted_oblivious, the same module configured without drift handling."""
    before, after = digests_after(package, "schemashift/policies/policy_aware.py")
    changed = {
        rule.removeprefix("cells/")
        for rule in before
        if rule.startswith("cells/") and before[rule] != after[rule]
    }
    assert changed == {"policy_aware_heuristic", "scripted", "scripted_oblivious"}
    others = [rule for rule in before if not rule.startswith("cells/")]
    assert {rule: after[rule] for rule in others} == {rule: before[rule] for rule in others}, "no other rule"
    before, after = digests_after(package, "schemashift/policies/base.py")
    assert all(before[f"cells/{name}"] != after[f"cells/{name}"] for name in BUILTIN), "shared code: all"


def test_the_default_builds_its_base_model_and_every_run_and_step_0_wait_on_it():
    """config.yaml trains the tiny model the workflow builds: its folder is the runs' base model,
    the input of each train job and of the step-0 evaluation, whose folder is its config name."""
    plan = Plan(with_defaults(load("config.yaml")), environ={})
    assert plan.built_models() == {"tiny-qwen2": "tiny"}
    folder = plan.built_model_dir("tiny-qwen2")
    assert folder == "results/models/tiny-qwen2"
    assert plan.train_enabled() and plan.train_runs() == ["run1", "run2_binary", "run4_legacy"]
    assert all(plan.run_inputs(run) == [folder] for run in plan.train_runs())
    assert plan.base_models() == {"tiny-qwen2": folder}
    base = plan.evaluation("base/tiny-qwen2")
    assert (base.policy, base.waits_on, base.subject.step) == (f"hf:{folder}", (folder,), 0)
    assert plan.run_config("run1")["models"]["tiny-qwen2"]["policy"] == f"hf:{folder}"
    assert set(plan.model_subjects()) == {"base/tiny-qwen2"} | {
        f"{run}/step-{step}" for run in plan.train_runs() for step in (2, 4, 6)
    }


def test_a_warm_started_runs_step_0_is_its_warm_start_beside_the_base():
    """config.real.yaml warm-starts: its run's step 0 is the warm-started adapter (what GRPO starts
    from, a subject of the run waiting on the train job) and the untrained base is evaluated too;
    a run without a warm start has no step 0 of its own."""
    plan = Plan(with_defaults(load("config.real.yaml")), environ={})
    folder = plan.built_model_dir("smollm2-135m")
    assert set(plan.model_subjects()) == {
        "base/smollm2-135m",
        "real_legacy/step-0",
        "real_legacy/step-1",
        "real_legacy/step-2",
    }
    warm = plan.evaluation("real_legacy/step-0")
    assert warm.policy == f"hf:{folder}@results/train/real_legacy/sft-adapter"
    assert (warm.subject, warm.waits_on) == (
        Subject("checkpoint", "real_legacy", 0, "default"),
        (plan.train_done("real_legacy"),),
    )
    assert Subject.of_record(warm.record_columns()) == warm.subject
    assert (
        plan.evaluation("real_legacy/step-2").policy == f"hf:{folder}@results/train/real_legacy/checkpoint-2"
    )
    default = Plan(with_defaults(load("config.yaml")), environ={})
    with pytest.raises(ValueError, match="warm start: it has none"):
        default.evaluation("run1/step-0")


def test_the_report_config_names_a_built_model_by_its_folder():
    """The report finds a built model's warm-start tasks (`sft.json`) through its `hf:` folder, so
    a base model warm-started on the tasks it is evaluated on is labelled so (legacy replays)."""
    config = with_defaults(load("config.yaml"))
    plan = Plan(config, environ={})
    report = plan.report_config()
    assert report["models"]["tiny-qwen2"]["policy"] == f"hf:{plan.built_model_dir('tiny-qwen2')}"
    assert report["models"]["gpt-4o-mini"] == config["models"]["gpt-4o-mini"]
    assert set(report) == {"rulesets", "models", "train", "report", "trains_here"}
    assert report["trains_here"] is plan.train_enabled()


def test_a_built_model_with_a_policy_of_its_own_is_refused():
    config = with_defaults(load("config.yaml"))
    config["models"]["tiny-qwen2"]["policy"] = "hf:elsewhere"
    with pytest.raises(ConfigError, match="give `build` or `policy`, not both"):
        Plan(config, environ={})


def test_each_repeat_of_a_run_trains_and_is_evaluated_apart_from_one_config_slice():
    config = with_defaults(load("config.yaml"))
    config["train"]["runs"]["run1"]["repeats"] = 2
    plan = Plan(config, environ={})
    assert plan.train_runs() == ["run1", "run1.rep2", "run2_binary", "run4_legacy"]
    assert plan.run_config("run1.rep2") == plan.run_config("run1")
    assert "run1.rep2/step-6" in plan.model_subjects()
    assert plan.evaluation("run1.rep2/step-2").waits_on == ("results/train/run1.rep2/train.done.json",)
    with pytest.raises(ConfigError, match="no training run 'run1.rep3'"):
        plan.train_run("run1.rep3")


def test_the_harness_is_part_of_every_model_subjects_identity():
    """API models play `models.<m>.harnesses` (both model harnesses when absent), base models and
    checkpoints both; each harness is its own folder, job and set of expected cells."""
    config, keys = composed_config(), {"OPENAI_API_KEY": "sk-x"}
    plan = Plan(config, environ=keys)
    assert plan.api_subjects() == ["api/gpt-4o-mini", "api/gpt-4o-mini+tools"]
    tools = plan.evaluation("api/gpt-4o-mini+tools")
    assert (tools.policy, tools.subject.harness) == ("openai:gpt-4o-mini", "tools")
    assert plan.evaluation("api/gpt-4o-mini").subject.harness == "default"
    assert {s.rpartition("+")[2] for s in plan.model_subjects() if "+" in s} == {"tools"}
    assert len(plan.model_subjects()) == 2 * len([s for s in plan.model_subjects() if "+" not in s])
    census = plan.expected_cells()
    model_cells = [c for c in census if "harness" in c]
    assert {c["harness"] for c in model_cells} == {"default", "tools"}
    by_harness = {
        h: [{**c, "harness": None} for c in model_cells if c["harness"] == h] for h in ("default", "tools")
    }
    assert by_harness["default"] == by_harness["tools"]  # the same cells through each harness
    targets = plan.evaluation_targets()
    assert "results/eval/api/gpt-4o-mini+tools/v1/episodes.parquet" in targets
    config["models"]["gpt-4o-mini"]["harnesses"] = ["tools"]
    assert Plan(config, environ=keys).api_subjects() == ["api/gpt-4o-mini+tools"]
    with pytest.raises(ValueError, match="unknown harness 'native'"):
        plan.evaluation("api/gpt-4o-mini+native")


def test_a_runs_checkpoints_play_its_base_models_harnesses_and_the_one_it_trained_on_first():
    config = composed_config()
    config["models"]["small"] = {
        "policy": "hf:Qwen/Qwen2.5-0.5B-Instruct",
        "params_b": 0.5,
        "harnesses": ["default"],
    }
    run = config["train"]["runs"]["run1"]
    run["base_model"] = "small"
    plan = Plan(config, environ={})
    assert plan.run_harnesses("run1") == ["default"]
    run1 = [s for s in plan.model_subjects() if s.startswith("run1/")]
    assert run1 and not any("+" in s for s in run1)
    assert "base/Qwen--Qwen2.5-0.5B-Instruct" in plan.model_subjects()
    assert "base/Qwen--Qwen2.5-0.5B-Instruct+tools" not in plan.model_subjects()
    run["overrides"] = {**(run.get("overrides") or {}), "harness": "tools"}
    with pytest.raises(ConfigError, match="trains through the tools harness"):
        Plan(config, environ={}).model_subjects()
    config["models"]["small"]["harnesses"] = ["default", "tools"]
    assert Plan(config, environ={}).run_harnesses("run1") == ["tools", "default"]


def eval_budget(subject) -> tuple[int | None, int | None]:
    """(max_prompt_tokens, max_new_tokens) the eval verb reads from a subject's budget options."""
    words = ["--policy", subject.policy, *shlex.split(subject.budget_args()), "--out", "unused"]
    args = PARSER.parse_args(["eval", *words])
    return args.max_prompt_tokens, args.max_new_tokens


def test_step_0_and_every_checkpoint_play_their_runs_prompt_and_turn_budgets():
    """The rollout's budgets (the run's max_prompt_tokens and max_turn_tokens) reach the eval of
    its checkpoints and of its base model; API models keep their own."""
    plan = Plan(with_defaults(load("config.yaml")), environ={})
    subjects = ["base/tiny-qwen2", "base/tiny-qwen2+tools", "run1/step-2", "run4_legacy/step-6+tools"]
    assert {eval_budget(plan.evaluation(name)) for name in subjects} == {(3968, 128)}
    gpu = Plan(composed_config(), environ={"OPENAI_API_KEY": "sk-x"})
    assert eval_budget(gpu.evaluation("run1/step-50")) == (3072, 256), "runs.DEFAULTS where nothing overrides"
    assert gpu.evaluation("api/gpt-4o-mini").budget_args() == ""


def test_runs_sharing_a_base_model_with_different_budgets_are_a_config_error():
    config = with_defaults(load("config.yaml"))
    config["train"]["runs"]["run2_binary"]["overrides"]["max_prompt_tokens"] = 2048
    plan = Plan(config, environ={})
    assert eval_budget(plan.evaluation("run2_binary/step-2")) == (2048, 128)
    message = (
        r"run1: max_prompt_tokens 3968, max_turn_tokens 128; "
        r"run2_binary: max_prompt_tokens 2048, max_turn_tokens 128; "
        r"run4_legacy: max_prompt_tokens 3968, max_turn_tokens 128"
    )
    with pytest.raises(ConfigError, match=message):
        plan.model_subjects()
    with pytest.raises(ConfigError, match="differ in their prompt budgets"):
        plan.evaluation("base/tiny-qwen2")


@settings(max_examples=40, deadline=None)
@given(
    bases=st.lists(st.sampled_from(["org/A-1B", "org/B-1B", "org/C-7B"]), min_size=1, max_size=5),
    budgets=st.lists(st.tuples(st.sampled_from([1024, 2048, 3968]), st.sampled_from([64, 128])), min_size=5),
)
@pytest.mark.timeout(120)
def test_any_mix_of_bases_and_budgets_evaluates_each_subject_with_its_runs_budgets(bases, budgets):
    """Runs on any bases with any budgets: every checkpoint plays its own run's budgets, every
    base model those of its runs, and a base whose runs disagree is a ConfigError naming it."""
    config = with_defaults(load("config.yaml"))
    template = config["train"]["runs"]["run1"]
    config["train"]["runs"] = {
        f"r{i}": {
            **template,
            "base_model": base,
            "overrides": {
                **template.get("overrides", {}),
                "max_prompt_tokens": budgets[i][0],
                "max_turn_tokens": budgets[i][1],
            },
        }
        for i, base in enumerate(bases)
    }
    plan = Plan(config, environ={})
    for i in range(len(bases)):
        assert eval_budget(plan.evaluation(f"r{i}/step-2")) == budgets[i]
    for base in set(bases):
        wanted = {budgets[i] for i, b in enumerate(bases) if b == base}
        folder = f"base/{base.replace('/', '--')}"
        if len(wanted) == 1:
            assert eval_budget(plan.evaluation(folder)) == wanted.pop()
        else:
            with pytest.raises(ConfigError, match=f"base model '{base}' differ in their prompt budgets"):
                plan.evaluation(folder)
