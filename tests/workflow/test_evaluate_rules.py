"""The evaluation rules (workflow/rules/evaluate.smk) through the real `snakemake`.

API baselines: which models are enabled by which variables (dry-runs), and one end to end against
the OpenAI-compatible server of tests/policies/llm/openai_server.py on 127.0.0.1: the real rule
runs `schemashift eval`, the key travels only as a Bearer header, and a rerun replays from the
response cache without a single request. Base model and checkpoint evaluations need training
outputs and a GPU, so they are checked by dry-run against checkpoint folders made here.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from workflow_support import REPO, TEST_CONFIG, copy_repo, job_counts, planned_outputs, snakemake, tool

sys.path.insert(0, str(REPO / "tests" / "policies" / "llm"))
from openai_server import OpenAIServer, Step  # noqa: E402

pytestmark = pytest.mark.skipif(tool("snakemake") is None, reason="snakemake is not installed")

KEY_ENV = "SCHEMASHIFT_EVAL_TEST_KEY"
KEY = "sk-eval-test-91c2d7e04f"
API_KEY_VARS = ("HF_TOKEN", "OPENAI_API_KEY", "OLLAMA_API_KEY", "OLLAMA_BASE_URL")
FILES = ("episodes.parquet", "drifts.parquet", "trajectories.jsonl.gz")
with open(REPO / TEST_CONFIG) as f:
    BASE_CONFIG = yaml.safe_load(f)
SCENARIOS = BASE_CONFIG["evaluation"]["legacy"]["scenarios"]
N_CELLS = len(SCENARIOS) * 2  # seeds 0-1


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("evaluate") / "repo")


def no_keys(**set_vars: str) -> dict[str, str]:
    """The environment of a snakemake call: the API key variables unset unless given here."""
    return {name: "" for name in API_KEY_VARS} | set_vars


def config_file(directory: Path, name: str = "config.yaml", **sections) -> Path:
    config = {**BASE_CONFIG, **sections}
    path = directory / name
    path.write_text(yaml.safe_dump(config))
    return path


def dry_run(copy: Path, *args: str, env=None, force=True, **kwargs) -> tuple[dict[str, int], str]:
    """Jobs a dry-run plans: everything (--forceall) or, with force=False, only what is missing."""
    forced = ("--forceall",) if force else ()
    proc = snakemake(copy, "--dry-run", *forced, "--printshellcmds", *args, env=env or no_keys(), **kwargs)
    return job_counts(proc.stdout), proc.stdout


def shell_commands(output: str) -> list[str]:
    return [
        line.split("Shell command:", 1)[-1].strip()
        for line in output.splitlines()
        if "schemashift.cli eval" in line
    ]


# --- API baselines: enabling, by dry-run ----------------------------------------------------------


def test_shipped_models_are_off_without_their_key_variables(copy):
    counts, _ = dry_run(copy, configfile=None)
    assert "evaluate_api" not in counts and counts["evaluate"] == (1 + 3 * 3) * 2  # the tiny model's


@pytest.mark.parametrize(
    ("variables", "enabled"),
    [
        ({"OPENAI_API_KEY": "sk-x"}, {"gpt-4o-mini"}),
        ({"HF_TOKEN": "hf-x"}, {"qwen2.5-7b-instruct", "llama-3.1-8b-instruct"}),
        ({"OLLAMA_API_KEY": "ol-x"}, {"gpt-oss-120b"}),
        ({"OLLAMA_BASE_URL": "http://127.0.0.1:11434/v1"}, {"gpt-oss-120b"}),
    ],
)
def test_a_key_variable_enables_its_shipped_models(copy, variables, enabled):
    counts, output = dry_run(copy, "--until", "evaluate_api", configfile=None, env=no_keys(**variables))
    jobs = [outs[0] for rule, outs in planned_outputs(output) if rule == "evaluate_api"]
    assert {Path(out).parts[3] for out in jobs} == enabled | {f"{name}+tools" for name in enabled}
    rulesets = yaml.safe_load((copy / "config.yaml").read_text())["rulesets"]
    # one job per ruleset and harness: the JSON-action prompt and native tool calling
    assert counts["evaluate_api"] == len(enabled) * len(rulesets) * 2
    for value in variables.values():
        if value.startswith("http"):
            continue
        assert value not in output, "a key's value reached snakemake's output"
    commands = shell_commands(output)
    if "OLLAMA" in "".join(variables):
        assert len(commands) == 2 * len(rulesets)
        harnesses = sorted(command.split("--harness ")[1].split()[0] for command in commands)
        assert harnesses == sorted(["default", "tools"] * len(rulesets))
    for command in commands if "OLLAMA_BASE_URL" in variables else ():
        assert "--base-url http://127.0.0.1:11434/v1 --max-concurrency 4" in command
        assert "--api-key-env" not in command and "env -u OPENAI_API_KEY python" in command
    for command in commands if "OLLAMA_API_KEY" in variables else ():
        assert "--base-url https://ollama.com/v1 --api-key-env OLLAMA_API_KEY" in command
        assert "--policy 'openai:gpt-oss:120b'" in command


def test_the_default_plays_models_on_seeds_and_v1_baselines_on_baseline_seeds(copy):
    """config.yaml: an API model's v1 job plays seeds 0-4, v1's baseline shards 0-66, and
    legacy's (no baseline_seeds) the models' 0-4."""
    _, output = dry_run(copy, configfile=None, env=no_keys(OPENAI_API_KEY="sk-x"))
    v1_evals = [command for command in shell_commands(output) if "--ruleset v1" in command]
    # the API model through each harness; the tiny model's step 0 and checkpoints through its one
    assert len(v1_evals) == 2 + 1 + 3 * 3
    assert all("--scenarios all --seeds 0-4 --split test --samples 1" in command for command in v1_evals)
    # every model and every baseline plays v1 in both arms (config `arms`), legacy in drift alone
    assert all("--samples 1 --arms drift,control " in command for command in v1_evals)
    legacy_evals = [
        command
        for command in shell_commands(output)
        if "eval --" in command and "--ruleset legacy" in command
    ]
    assert legacy_evals and all("--arms drift " in command for command in legacy_evals)
    shards = [line for line in output.splitlines() if "schemashift.cli run" in line]
    assert sum("--ruleset v1" in command for command in shards) == 6 * 6
    for command in shards:
        assert ("--seeds 0-66 " if "--ruleset v1" in command else "--seeds 0-4 ") in command, command
        assert ("--arms drift,control " if "--ruleset v1" in command else "--arms drift ") in command, command


def test_api_job_command(copy, tmp_path):
    models = {
        "local-model": {
            "policy": "openai:org/Local-1B",
            "base_url": "http://127.0.0.1:9/v1",
            "key_env": KEY_ENV,
            "params_b": 1.0,
            "max_concurrency": 3,
        }
    }
    path = config_file(tmp_path, models=models)
    target = "results/eval/api/local-model/legacy/episodes.parquet"
    counts, output = dry_run(copy, target, configfile=path, env=no_keys(**{KEY_ENV: KEY}))
    assert counts == {"evaluate_api": 1}
    (command,) = shell_commands(output)
    assert command == (
        "rm -rf results/eval/api/local-model/legacy/progress "
        "results/eval/api/local-model/legacy/eval.json && "
        "python -m schemashift.cli eval --policy 'openai:org/Local-1B' --harness default "
        "--base-url http://127.0.0.1:9/v1 "
        f"--api-key-env {KEY_ENV} --max-concurrency 3 --ruleset legacy "
        f"--scenarios {','.join(SCENARIOS)} --seeds 0-1 --samples 1 --arms drift --salt-id none "
        "--cache results/cache/eval/api/local-model/legacy.sqlite --out results/eval/api/local-model/legacy "
        "> results/logs/eval/api/local-model/legacy.log 2>&1"
    )
    assert KEY not in output
    # the tools harness: its own folder, cache and log
    tools = "results/eval/api/local-model+tools/legacy"
    counts, output = dry_run(
        copy, f"{tools}/episodes.parquet", configfile=path, env=no_keys(**{KEY_ENV: KEY})
    )
    (command,) = shell_commands(output)
    assert "--policy 'openai:org/Local-1B' --harness tools --base-url http://127.0.0.1:9/v1 " in command
    assert f"--cache results/cache/eval/api/local-model+tools/legacy.sqlite --out {tools} " in command
    # models.<name>.harnesses chooses them
    only = config_file(
        tmp_path, "only.yaml", models={"local-model": {**models["local-model"], "harnesses": ["tools"]}}
    )
    counts, output = dry_run(copy, configfile=only, env=no_keys(**{KEY_ENV: KEY}))
    assert counts["evaluate_api"] == len(BASE_CONFIG["rulesets"])
    assert all("--harness tools" in command for command in shell_commands(output))
    # without the key, the model is not in the default targets
    counts, _ = dry_run(copy, configfile=path)
    assert "evaluate_api" not in counts


def test_a_base_url_variable_with_credentials_is_refused_without_showing_them(copy):
    env = no_keys(OLLAMA_BASE_URL="http://admin:hunter2@127.0.0.1:11434/v1")
    proc = snakemake(copy, "--dry-run", configfile=None, check=False, env=env)
    assert proc.returncode != 0
    assert "OLLAMA_BASE_URL must be an http(s) URL without credentials" in proc.stdout
    assert "hunter2" not in proc.stdout


def test_enabled_true_without_its_key_is_a_clear_error(copy, tmp_path):
    models = {
        "m": {"policy": "openai:m", "base_url": "http://127.0.0.1:9/v1", "key_env": KEY_ENV, "params_b": 1.0}
    }
    models["m"]["enabled"] = True
    proc = snakemake(
        copy, "--dry-run", configfile=config_file(tmp_path, models=models), check=False, env=no_keys()
    )
    assert proc.returncode != 0
    assert f"models.m is enabled but its key variable {KEY_ENV} is not set" in proc.stdout


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"policy": "local:m", "base_url": "http://h/v1", "params_b": 1}, r"does not match"),
        ({"policy": "openai:m", "params_b": 1}, r"'base_url' is a required property"),
        ({"policy": "openai:m", "base_url": "http://user:pw@h/v1", "params_b": 1}, r"does not match"),
        ({"policy": "openai:m", "base_url": "http://h/v1"}, r"'params_b' is a required property"),
        (
            {"policy": "openai:m", "base_url": "http://h/v1", "params_b": 1, "key": "sk-1"},
            r"unknown key 'key' in models\.m \(allowed: ",
        ),
    ],
)
def test_bad_model_entries_fail_the_dry_run(copy, tmp_path, entry, message):
    proc = snakemake(copy, "--dry-run", configfile=config_file(tmp_path, models={"m": entry}), check=False)
    assert proc.returncode != 0
    assert re.search(message, proc.stdout), proc.stdout[-3000:]
    assert "sk-1" not in proc.stdout  # a key in the config is named, never shown (stderr joins stdout)


# --- base models and checkpoints, by dry-run ---------------------------------------------------------

BASE = "org/Base-0.5B"
SLUG = "org--Base-0.5B"
TRAIN = {
    "enabled": True,
    "defaults": {"max_steps": 100, "save_steps": 50, "max_prompt_tokens": 2000, "max_turn_tokens": 96},
    "runs": {
        "grpo_a": {"base_model": BASE, "ruleset": "legacy", "reward": "v1"},
        "grpo_b": {
            "base_model": BASE,
            "ruleset": "legacy",
            "reward": "binary",
            "overrides": {"max_steps": 30, "save_steps": 30},
        },
    },
}


#: the runs' prompt and turn budgets, which step 0 and every checkpoint are evaluated with
BUDGET = "--max-prompt-tokens 2000 --max-new-tokens 96"


def finished_training(copy: Path, run: str) -> Path:
    """What a finished train job leaves for the evaluations to wait on: its run config, then its
    completion record (newer)."""
    folder = copy / f"results/train/{run}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run-config.json").write_text("{}")
    (folder / "train.done.json").write_text("{}")
    return folder


@pytest.fixture
def checkpoints(copy):
    """Both training runs finished."""
    made = [finished_training(copy, run) for run in ("grpo_a", "grpo_b")]
    yield made
    for folder in made:
        shutil.rmtree(folder)


def test_checkpoints_and_one_shared_base_evaluation_are_default_targets_when_training_is_on(
    copy, tmp_path, checkpoints
):
    counts, output = dry_run(copy, configfile=config_file(tmp_path, train=TRAIN))
    assert counts["evaluate"] == 8, (
        "one base model evaluation shared by both runs, three checkpoints, 2 harnesses"
    )
    outputs = {outs[0] for rule, outs in planned_outputs(output) if rule == "evaluate"}
    assert outputs == {
        f"results/eval/{subject}{harness}/legacy/episodes.parquet"
        for subject in (f"base/{SLUG}", "grpo_a/step-50", "grpo_a/step-100", "grpo_b/step-30")
        for harness in ("", "+tools")
    }


def test_no_checkpoint_evaluation_in_the_default_targets_when_training_is_off(copy, tmp_path, checkpoints):
    counts, _ = dry_run(copy, configfile=config_file(tmp_path, train={**TRAIN, "enabled": False}))
    assert "evaluate" not in counts
    # auto on a machine without a GPU is off too
    counts, _ = dry_run(
        copy,
        configfile=config_file(tmp_path, train={**TRAIN, "enabled": "auto"}),
        env=no_keys(CUDA_VISIBLE_DEVICES=""),
    )
    assert "evaluate" not in counts


@pytest.mark.parametrize("enabled", [True, False])
def test_one_checkpoints_evaluation_is_a_target(copy, tmp_path, checkpoints, enabled):
    path = config_file(tmp_path, train={**TRAIN, "enabled": enabled})
    target = "results/eval/grpo_a/step-50/legacy/episodes.parquet"
    counts, output = dry_run(copy, target, configfile=path, force=False)
    assert counts == {"evaluate": 1}, "the run has trained: only the evaluation is left"
    (command,) = shell_commands(output)
    assert command == (
        "rm -rf results/eval/grpo_a/step-50/legacy/progress results/eval/grpo_a/step-50/legacy/eval.json && "
        f"python -m schemashift.cli eval --policy 'hf:{BASE}@results/train/grpo_a/checkpoint-50' "
        f"--harness default {BUDGET} --ruleset legacy "
        f"--scenarios {','.join(SCENARIOS)} --seeds 0-1 --samples 1 --arms drift --salt-id none "
        "--cache results/cache/eval/grpo_a/step-50/legacy.sqlite --out results/eval/grpo_a/step-50/legacy "
        "> results/logs/eval/grpo_a/step-50/legacy.log 2>&1"
    )
    assert re.search(r"resources:.*\bgpu=1\b", output)
    base = f"results/eval/base/{SLUG}/legacy/trajectories.jsonl.gz"
    counts, output = dry_run(copy, base, configfile=path, force=False)
    assert counts == {"evaluate": 1}
    (command,) = shell_commands(output)
    assert (
        f"python -m schemashift.cli eval --policy 'hf:{BASE}' --harness default {BUDGET} --ruleset legacy "
        in command
    )
    tools = f"results/eval/base/{SLUG}+tools/legacy/episodes.parquet"
    counts, output = dry_run(copy, tools, configfile=path, force=False)
    (command,) = shell_commands(output)
    assert f"--policy 'hf:{BASE}' --harness tools {BUDGET} --ruleset legacy " in command


def test_a_checkpoint_evaluation_waits_for_its_run_to_train(copy, tmp_path):
    path = config_file(tmp_path, train=TRAIN)
    counts, output = dry_run(copy, "results/eval/grpo_a/step-100/legacy/episodes.parquet", configfile=path)
    assert counts == {"train_config": 1, "train": 1, "evaluate": 1}
    assert "--run grpo_a --out results/train/grpo_a --resume" in output


def test_a_step_the_run_does_not_save_is_a_clear_error(copy, tmp_path, checkpoints):
    path = config_file(tmp_path, train=TRAIN)
    proc = snakemake(
        copy, "--dry-run", "results/eval/grpo_a/step-70/legacy/episodes.parquet", configfile=path, check=False
    )
    assert proc.returncode != 0
    assert "train run 'grpo_a' saves no checkpoint 70; its checkpoints: [50, 100]" in proc.stdout


def test_a_run_with_bad_settings_is_a_clear_error(copy, tmp_path):
    train = {
        "enabled": True,
        "defaults": {},
        "runs": {
            "r": {"base_model": BASE, "ruleset": "legacy", "reward": "v1", "overrides": {"save_steps": 0}}
        },
    }
    proc = snakemake(copy, "--dry-run", configfile=config_file(tmp_path, train=train), check=False)
    assert proc.returncode != 0
    assert "train.runs.r: save_steps must be a positive integer, got 0" in proc.stdout


# --- an API baseline end to end ------------------------------------------------------------------------


def scripted_agent(body: dict) -> str:
    """Inspect the mail schema, then complete: two steps per episode."""
    if any(m.get("role") == "assistant" for m in body["messages"]):
        return json.dumps({"type": "complete_task", "complete": {"summary": "Inspected mail; done."}})
    return json.dumps({"type": "inspect_schema", "inspect": {"tool": "mail"}})


def read_rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def texts_under(folder: Path) -> str:
    parts = []
    for file in folder.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            parts.append((gzip.decompress(data) if file.suffix == ".gz" else data).decode("utf-8", "replace"))
    return "\n".join(parts)


TIMING = {"wall_s", "sweep_id"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_api_baseline_end_to_end_and_replay_from_the_cache(copy, tmp_path):
    with OpenAIServer(scripted_agent, api_key=KEY) as server:
        models = {
            "served": {
                "policy": "openai:served-model",
                "base_url": server.base_url,
                "key_env": KEY_ENV,
                "params_b": 0.5,
                "max_concurrency": 2,
            }
        }
        path = config_file(tmp_path, models=models)
        out = copy / "results/eval/api/served/legacy"
        env = no_keys(**{KEY_ENV: KEY})
        # the first request is rate limited: the client waits and retries
        server.script(Step(status=429, retry_after="1"))
        proc = snakemake(
            copy, f"{out.relative_to(copy)}/episodes.parquet", configfile=path, env=env, timeout=540
        )
        assert job_counts(proc.stdout) == {"evaluate_api": 1}
        requests = server.chat_requests()
        assert {r.headers["Authorization"] for r in requests} == {f"Bearer {KEY}"}
        assert {r.body["model"] for r in requests} == {"served-model"}
        assert server.max_in_flight <= 2
        rows = read_rows(out / "episodes.parquet")
        assert len(rows) == N_CELLS
        assert {(r["scenario"], r["seed"]) for r in rows} == {(s, seed) for s in SCENARIOS for seed in (0, 1)}
        assert all(r["status"] == "graded" for r in rows), [r.get("error") for r in rows]
        assert {r["policy"] for r in rows} == {"openai:served-model"}
        assert {r["steps"] for r in rows} == {2} and {r["final_action"] for r in rows} == {"complete_task"}
        # the 429 was retried; after it, no prompt was sent twice (legacy seeds that render the
        # same prompt share one cached completion)
        sent = [json.dumps(r.body["messages"]) for r in requests]
        retry = sent.index(sent[0], 1)
        assert requests[retry].at - requests[0].at >= 0.95, "Retry-After: 1 was not honoured"
        prompts = list(dict.fromkeys(sent))
        assert len(prompts) == len(sent) - 1, "a prompt other than the retried one was sent twice"
        # tokens in come from the server's usage (whitespace words): each episode is one first
        # turn plus the second turn that continues it
        words = {p: len(" ".join(str(m["content"]) for m in json.loads(p)).split()) for p in prompts}
        firsts = [p for p in prompts if '"assistant"' not in p]
        seconds = [p for p in prompts if '"assistant"' in p]
        assert len(firsts) == len(seconds) == len(SCENARIOS)
        expected = {
            words[first] + words[second]
            for first in firsts
            for second in seconds
            if json.loads(second)[: len(json.loads(first))] == json.loads(first)
        }
        assert {r["tokens_in"] for r in rows} == expected
        # the key is nowhere in the results, the logs or snakemake's own records
        for folder in ("results", ".snakemake"):
            assert KEY not in texts_under(copy / folder), f"the key was written under {folder}/"
        assert KEY not in proc.stdout

        # a rerun from scratch (the whole output folder gone, so nothing resumes from it) replays
        # every completion from the cache: no request, the same records
        shutil.rmtree(out)
        before = len(server.requests)
        snakemake(copy, f"{out.relative_to(copy)}/episodes.parquet", configfile=path, env=env, timeout=540)
        assert len(server.requests) == before, "the rerun sent requests"
        again = read_rows(out / "episodes.parquet")
        strip = [{k: v for k, v in r.items() if k not in TIMING} for r in rows]
        assert [{k: v for k, v in r.items() if k not in TIMING} for r in again] == strip


# --- a checkpoint and its base model evaluated for real, with the tiny model -----------------------


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(900)
def test_a_checkpoint_and_its_base_model_are_evaluated_for_real(copy, tmp_path, tiny_model):
    """What training will leave (a peft adapter and its manifest in results/train/<run>/checkpoint-<n>/),
    played by the real `evaluate` rule on CPU: the run and step from the manifest, the manifest's
    adapter hash, step 0 for the base."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from schemashift.train.checkpoints import write_manifest

    torch.manual_seed(3)
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    lora = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    checkpoint = copy / "results/train/tiny_run/checkpoint-5"
    get_peft_model(base, lora).save_pretrained(checkpoint)
    manifest = write_manifest(checkpoint, 5, train_run="tiny_run", base_model=str(tiny_model))
    finished_training(copy, "tiny_run")
    train = {
        "enabled": True,
        "defaults": {},
        "runs": {
            "tiny_run": {
                "base_model": str(tiny_model),
                "ruleset": "legacy",
                "reward": "v1",
                "overrides": {"max_steps": 5, "save_steps": 5},
            }
        },
    }
    evaluation = {"legacy": {"scenarios": [SCENARIOS[0]], "seeds": "0"}}
    path = config_file(tmp_path, train=train, evaluation=evaluation)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "--", str(tiny_model)).strip("-.")
    step = copy / "results/eval/tiny_run/step-5/legacy"
    base_out = copy / f"results/eval/base/{slug}/legacy"
    try:
        proc = snakemake(
            copy,
            f"{step.relative_to(copy)}/episodes.parquet",
            f"{base_out.relative_to(copy)}/episodes.parquet",
            configfile=path,
            env=no_keys(),
            timeout=840,
        )
        assert job_counts(proc.stdout) == {"evaluate": 2}
        (adapted,) = read_rows(step / "episodes.parquet")
        (plain,) = read_rows(base_out / "episodes.parquet")
        assert adapted["status"] == plain["status"] == "graded", (adapted["error"], plain["error"])
        assert adapted["policy"] == f"hf:{tiny_model}@results/train/tiny_run/checkpoint-5"
        assert (adapted["train_run"], adapted["checkpoint_step"]) == ("tiny_run", 5)
        assert adapted["adapter_sha256"] == manifest["adapter_sha256"], "a row joins its adapter's manifest"
        assert adapted["base_model"] == str(tiny_model)
        assert plain["policy"] == f"hf:{tiny_model}"
        assert (plain["train_run"], plain["checkpoint_step"], plain["adapter_sha256"]) == (None, 0, None)
        assert adapted["tokens_out"] > 0 and plain["tokens_out"] > 0
        assert (copy / "results/cache/eval/tiny_run/step-5/legacy.sqlite").is_file()
    finally:
        shutil.rmtree(copy / "results/train/tiny_run", ignore_errors=True)
