"""What the workflow runs for a config: its cells, model evaluations, training runs, targets and
expected cells. The rule files (workflow/rules/*.smk) only call this; everything here is plain
Python that tests call directly.

Parse time stays cheap: nothing here starts a process (no nvidia-smi, no container engine), and
API keys are only ever looked up by name, so a key's value never reaches a command or a log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from schemashift.rollout.subject import Subject, check_harness, harness_folder, split_harness
from schemashift.workflow.machine import gpu_visible

CELL_FILES = ("episodes.parquet", "drifts.parquet", "trajectories.jsonl.gz")
_URL = re.compile(r"https?://[^/@\s]+(/\S*)?")


class ConfigError(ValueError):
    """A configuration the workflow cannot run; Snakemake prints the message."""

    def __init__(self, message: str) -> None:
        super().__init__(f"config: {message}")


def _arm(arm: str) -> dict[str, str]:
    """An expected cell's arm: nothing for the drift arm (what a cell without one played)."""
    from schemashift.env.arms import DEFAULT_ARM

    return {} if arm == DEFAULT_ARM else {"arm": arm}


def model_slug(model: str) -> str:
    """A base model id or path as one folder name: Qwen/Qwen2.5-1.5B -> Qwen--Qwen2.5-1.5B."""
    return re.sub(r"[^A-Za-z0-9._-]+", "--", model).strip("-.") or "model"


@dataclass(frozen=True)
class Evaluation:
    """A model evaluation the workflow runs: its results folder under results/eval, the subject
    it measures (whose record columns its expected cells carry), the policy spec `eval` gets (a
    checkpoint's identity comes from its adapter folder's manifest.json), what it waits on (its
    run's completion record, or the built model a step-0 evaluation plays), and for a base model
    or checkpoint the prompt and turn budgets of its training runs (`lineage.prompt_budget`),
    which its `eval` plays with."""

    folder: str
    policy: str
    subject: Subject
    waits_on: tuple[str, ...] = ()
    max_prompt_tokens: int | None = None
    max_new_tokens: int | None = None

    def record_columns(self) -> dict[str, Any]:
        """What its rows say they measured: the policy and the subject's columns."""
        return {"policy": self.policy, **self.subject.columns}

    def budget_args(self) -> str:
        """`--max-prompt-tokens N --max-new-tokens M` of its `eval` (nothing for an API model)."""
        if self.max_prompt_tokens is None:
            return ""
        return f"--max-prompt-tokens {self.max_prompt_tokens} --max-new-tokens {self.max_new_tokens}"


class Plan:
    """The workflow's plan for one validated `config`, with API keys looked up in `environ`."""

    def __init__(self, config: Mapping[str, Any], environ: Mapping[str, str] = os.environ, results="results"):
        self.results = results
        self.config = self._with_built_models(config)
        self.environ = environ
        # a parse asks for the same cells and runs many times; the config does not change meanwhile
        self._cells: dict[str, list[tuple[str, int]]] = {}
        self._shards: dict[str, dict[tuple[str, int], list[int]]] = {}
        self._census: list[dict] | None = None
        self._runs: dict[str, Any] = {}

    # --- cells ----------------------------------------------------------------------------------

    def _ruleset(self, name: str):
        from schemashift.env.rulesets import available_rulesets, get_ruleset

        if name not in available_rulesets():
            raise ConfigError(f"unknown ruleset {name!r}; available: {available_rulesets()}")
        if name not in self.config["evaluation"]:
            raise ConfigError(f"ruleset {name!r} has no entry under 'evaluation'")
        return get_ruleset(name)

    def selection(self, ruleset: str, baselines: bool = False) -> dict[str, Any]:
        """A ruleset's `evaluation` entry as cell options; `split` only where the ruleset has splits.

        Models and checkpoints play `seeds`; the rule baselines play `baseline_seeds` (default:
        `seeds`), which costs milliseconds a cell, so they can afford the seeds that make their
        intervals narrow.
        """
        cells = self.config["evaluation"][ruleset]
        split = cells.get("split") if self._ruleset(ruleset).splits() else None
        return {
            "scenarios": cells["scenarios"],
            "seeds": cells.get("baseline_seeds", cells["seeds"]) if baselines else cells["seeds"],
            "split": split,
            "compositions": bool(cells.get("compositions")),
        }

    def cells(self, ruleset: str, baselines: bool = False) -> list[tuple[str, int]]:
        """(scenario, seed) of a ruleset's evaluation cells, as `run` and `eval` select them: the
        models' (`seeds`), or with `baselines` the rule baselines' (`baseline_seeds`), which must
        hold the models' so that every model cell has baselines to be paired with."""
        from schemashift.rollout.selection import CellSelectionError, select_cells

        key = f"{ruleset}/baselines" if baselines else ruleset
        if key not in self._cells:
            # the key that holds the seeds: baseline_seeds only where the config sets it
            seeds_key = (
                "baseline_seeds"
                if baselines and "baseline_seeds" in self.config["evaluation"].get(ruleset, {})
                else "seeds"
            )
            try:
                scenarios, seeds = select_cells(self._ruleset(ruleset), **self.selection(ruleset, baselines))
            except CellSelectionError as exc:  # the message `run` and `eval` give, said of the config
                raise ConfigError(self._said_of_config(ruleset, seeds_key, str(exc))) from None
            if baselines:
                unplayed = sorted({seed for _, seed in self.cells(ruleset)} - set(seeds))
                if unplayed:
                    raise ConfigError(
                        f"evaluation.{ruleset}.baseline_seeds must hold the models' seeds; it lacks "
                        f"{unplayed[:5]} (models are compared with the baselines on the cells both play)"
                    )
            self._cells[key] = [(scenario, seed) for scenario in scenarios for seed in seeds]
        return self._cells[key]

    @staticmethod
    def _said_of_config(ruleset: str, seeds_key: str, message: str) -> str:
        """A cell selection's message (`--seeds: ...`) said of the config key that holds the bad
        value (`evaluation.<ruleset>.seeds: ...`, or `.baseline_seeds` where that holds it)."""
        flags = {"--seeds": seeds_key, "--scenarios": "scenarios", "--split": "split"}
        flag, sep, rest = message.partition(": ")
        if sep and flag in flags:
            return f"evaluation.{ruleset}.{flags[flag]}: {rest}"
        return f"evaluation.{ruleset}: {message}"

    def arms(self, ruleset: str) -> list[str]:
        """The config's `arms` that the ruleset plays (`Ruleset.arms`: legacy only drift), in order;
        every baseline and model plays them all, so each drift cell has its control twin."""
        from schemashift.env.arms import ARMS
        from schemashift.rollout.selection import CellSelectionError, parse_arms

        played = self._ruleset(ruleset).arms
        # the schema's default is every arm (tests/workflow/test_plan.py holds them equal)
        configured = self.config.get("arms", ARMS)
        try:
            return parse_arms([arm for arm in configured if arm in played], self._ruleset(ruleset))
        except CellSelectionError as exc:
            raise ConfigError(f"arms: {exc} ({ruleset} plays {', '.join(played)})") from None

    def play_args(self, ruleset: str) -> str:
        """`--arms a,b --salt-id <id|none>` of `run` and `eval` jobs: the held-out salt is the one
        this process sees (`SALT_ENV`); a job that sees another refuses to run."""
        salt = self._ruleset(ruleset).salt_id() or "none"
        return f"--arms {','.join(self.arms(ruleset))} --salt-id {salt}"

    def cells_args(self, ruleset: str) -> str:
        """The cell options of a model's `eval` over a ruleset's evaluation cells (what `cells`
        selects without `baselines`)."""
        self.cells(ruleset)
        chosen = self.selection(ruleset)
        scenarios, seeds = chosen["scenarios"], chosen["seeds"]
        args = [
            f"--scenarios {scenarios if isinstance(scenarios, str) else ','.join(scenarios)}",
            f"--seeds {seeds if isinstance(seeds, str) else ','.join(map(str, seeds))}",
        ]
        if chosen["split"] is not None:
            args.append(f"--split {chosen['split']}")
        if chosen["compositions"]:
            args.append("--compositions")
        args.append(f"--samples {self.config['samples']}")
        args.append(self.play_args(ruleset))
        return " ".join(args)

    def baselines(self, ruleset: str) -> list[str]:
        """The baseline policies of a ruleset: its `evaluation` entry's own list, else `baselines`."""
        from schemashift.policies import BUILTIN

        policies = self.config["evaluation"].get(ruleset, {}).get("baselines", self.config["baselines"])
        unknown = [policy for policy in policies if policy not in BUILTIN]
        if unknown:
            raise ConfigError(f"unknown baseline policies {unknown}; available: {sorted(BUILTIN)}")
        return list(policies)

    # --- baseline shards: one job plays one policy on one scenario over a block of seeds ---------

    def shards(self, ruleset: str) -> dict[tuple[str, int], list[int]]:
        """(scenario, first seed of the block) -> the block's baseline seeds, ascending.

        A block is `shard_seeds` consecutive seed values, aligned on multiples of it (block
        [first, first + shard_seeds - 1]), so adding seeds plays only the blocks that gain some,
        and which block a cell is in never depends on the other cells.
        """
        if ruleset not in self._shards:
            size = self.config["shard_seeds"]
            blocks: dict[tuple[str, int], list[int]] = {}
            for scenario, seed in self.cells(ruleset, baselines=True):
                blocks.setdefault((scenario, seed - seed % size), []).append(seed)
            self._shards[ruleset] = {key: sorted(seeds) for key, seeds in blocks.items()}
        return self._shards[ruleset]

    def shard_dir(self, ruleset: str, policy: str, scenario: str, first: int) -> str:
        last = first + self.config["shard_seeds"] - 1
        return f"{self.results}/cells/{ruleset}/{policy}/{scenario}/seeds-{first}-{last}"

    def shard_seeds(self, ruleset: str, scenario: str, first: int | str, last: int | str) -> str:
        """The `--seeds` of the shard [first, last] of a ruleset's scenario; a folder that is no
        shard of this configuration is a clear error (a target typed by hand, say)."""
        first, last = int(first), int(last)
        size = self.config["shard_seeds"]
        seeds = self.shards(ruleset).get((scenario, first))
        if first % size or last != first + size - 1 or seeds is None:
            known = [f"seeds-{b}-{b + size - 1}" for s, b in self.shards(ruleset) if s == scenario]
            raise ValueError(
                f"{ruleset}/{scenario}/seeds-{first}-{last} is no shard of this configuration: shards "
                f"are blocks of shard_seeds={size} seed values holding evaluation cells, here "
                f"{', '.join(known) or 'none'}"
            )
        from schemashift.rollout.selection import format_seeds

        return format_seeds(seeds)

    def baseline_shards(self) -> list[tuple[str, str, str, int]]:
        """(ruleset, policy, scenario, first seed of the block) of every baseline shard."""
        return [
            (ruleset, policy, scenario, first)
            for ruleset in self.config["rulesets"]
            for policy in self.baselines(ruleset)
            for scenario, first in self.shards(ruleset)
        ]

    def baseline_cells(self) -> list[tuple[str, str, str, int, str]]:
        """(ruleset, policy, scenario, seed, arm) of every baseline cell."""
        return [
            (ruleset, policy, scenario, seed, arm)
            for ruleset in self.config["rulesets"]
            for policy in self.baselines(ruleset)
            for scenario, seed in self.cells(ruleset, baselines=True)
            for arm in self.arms(ruleset)
        ]

    def baseline_files(self) -> list[str]:
        return [f"{self.shard_dir(*shard)}/{name}" for shard in self.baseline_shards() for name in CELL_FILES]

    # --- models the workflow builds itself ------------------------------------------------------

    def _with_built_models(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """The config with each built model's policy filled in (`hf:` its folder under
        results/models), so that training runs, step-0 evaluations and the report name it as
        they name any local model."""
        models = config.get("models") or {}
        built = {name: entry for name, entry in models.items() if entry.get("build")}
        if not built:
            return config
        for name, entry in built.items():
            if "policy" in entry:
                raise ConfigError(
                    f"models.{name}: a built model's policy is its folder ({self.built_model_dir(name)}); "
                    "give `build` or `policy`, not both"
                )
        filled = {
            name: {**entry, "policy": f"hf:{self.built_model_dir(name)}"} if name in built else entry
            for name, entry in models.items()
        }
        return {**config, "models": filled}

    def report_config(self) -> dict[str, Any]:
        """What the report reads of the config (results/report_config.json): a built model is
        named by its folder (`hf:`), where the report finds its warm start's tasks (`sft.json`)."""
        kept = {key: self.config[key] for key in ("rulesets", "models", "train", "report")}
        return {**kept, "trains_here": self.train_enabled()}

    def built_model_dir(self, name: str) -> str:
        """Where the workflow builds model `name` of the config (`build: tiny`)."""
        return f"{self.results}/models/{name}"

    def built_models(self) -> dict[str, str]:
        """Name -> recipe of every model the workflow builds (`models.<name>.build`)."""
        return {name: m["build"] for name, m in (self.config.get("models") or {}).items() if m.get("build")}

    def built_model_pattern(self, *recipes: str) -> str:
        """A wildcard pattern matching the names of the models built by `recipes` (none: nothing)."""
        names = [re.escape(name) for name, made in self.built_models().items() if made in recipes]
        return "|".join(names) or "(?!)"

    def built_model_name(self, base_model: str) -> str | None:
        """The config name of the built model at `base_model`'s path, if it is one."""
        return next((n for n in self.built_models() if base_model == self.built_model_dir(n)), None)

    # --- API models -----------------------------------------------------------------------------

    def _set(self, name: str | None) -> bool:
        return bool(name) and bool(self.environ.get(name, "").strip())

    @cached_property
    def api_models(self) -> dict[str, dict]:
        """The enabled API models by name (see `models` in the config schema)."""
        enabled = {}
        for name, model in self.config["models"].items():
            if not model["policy"].startswith("openai:"):
                continue  # a local model: evaluated as the step 0 of the runs that train it
            switch = model.get("enabled", "auto")
            key, url = model.get("key_env"), model.get("base_url_env")
            if switch == "auto":
                on = self._set(key) or self._set(url) or (key is None and url is None)
            else:
                on = switch is True
                if on and key and not self._set(key) and not self._set(url):
                    raise ConfigError(f"models.{name} is enabled but its key variable {key} is not set")
            if on:
                self.api_base_url(name)  # a bad endpoint fails here, before any job
                enabled[name] = model
        return enabled

    def api_harnesses(self, name: str) -> list[str]:
        """The harnesses API model `name` is evaluated through (`models.<name>.harnesses`)."""
        from schemashift.policies.llm.harnesses import model_harnesses

        return list(self.config["models"][name].get("harnesses", model_harnesses()))

    def api_subjects(self) -> list[str]:
        """Every enabled API model through each of its harnesses (see `harness_folder`)."""
        return [
            harness_folder(f"api/{name}", h) for name in self.api_models for h in self.api_harnesses(name)
        ]

    def api_key_variables(self) -> list[str]:
        """Names of the key and salt variables remote executors must hand to the jobs."""
        from schemashift.env.rulesets.base import SALT_ENV

        keys = {m["key_env"] for m in self.api_models.values() if self._set(m.get("key_env"))}
        return sorted(keys | ({SALT_ENV} if self._set(SALT_ENV) else set()))

    def api_base_url(self, name: str) -> str:
        """The configured endpoint, or the one its base_url_env names; never one with credentials
        in it, which would show in the job's command line."""
        model = self.config["models"][name]
        override = model.get("base_url_env")
        if not self._set(override):
            return model["base_url"]
        url = self.environ[override].strip()
        if not _URL.fullmatch(url):
            raise ConfigError(
                f"models.{name}: {override} must be an http(s) URL without credentials "
                "(keys go in the key variable)"
            )
        return url

    def api_options(self, name: str) -> str:
        """--base-url, --api-key-env (the variable's name, never its value: only when it is set, a
        keyless local server otherwise), --max-concurrency, and --request-timeout, --max-retries
        and --stream where the model's entry gives them, of an API model's evaluation."""
        model = self.config["models"][name]
        options = [f"--base-url {shlex.quote(self.api_base_url(name))}"]
        if self._set(model.get("key_env")):
            options.append(f"--api-key-env {model['key_env']}")
        options.append(f"--max-concurrency {model.get('max_concurrency', 4)}")
        if "request_timeout_s" in model:
            options.append(f"--request-timeout {model['request_timeout_s']:g}")
        if "max_retries" in model:
            options.append(f"--max-retries {model['max_retries']}")
        if model.get("stream"):
            options.append("--stream")
        return " ".join(options)

    def api_keyless_prefix(self, name: str) -> str:
        """A keyless endpoint must not get OpenAI's key, which the openai: policy sends by default."""
        return "" if self._set(self.config["models"][name].get("key_env")) else "env -u OPENAI_API_KEY "

    # --- training runs, base models and checkpoints ----------------------------------------------

    def train_enabled(self) -> bool:
        """true, false, or auto: where a GPU is visible (without starting a process)."""
        switch = self.config["train"]["enabled"]
        return gpu_visible(self.environ) if switch == "auto" else switch is True

    def train_run(self, run: str):
        """The resolved training run (schemashift.runs.contract: defaults < train.defaults < run)."""
        from schemashift.runs.contract import RunConfigError, resolve_run

        if run not in self._runs:
            try:
                self._runs[run] = resolve_run(self.config, run)
            except RunConfigError as exc:
                raise ConfigError(str(exc)) from None
        return self._runs[run]

    def train_runs(self) -> list[str]:
        """Names of the enabled training runs (`enabled: false` keeps an optional run out)."""
        from schemashift.runs.contract import enabled_runs

        return enabled_runs(self.config)

    def run_config(self, run: str) -> dict:
        """The config a train job reads: the shared defaults and this run alone."""
        configured = self.train_run(run).configured
        spec = self.config["train"]["runs"][configured]
        base = spec["base_model"]
        models = {base: self.config["models"][base]} if base in self.config["models"] else {}
        return {
            "models": models,
            "train": {"defaults": self.config["train"]["defaults"], "runs": {configured: spec}},
        }

    def run_inputs(self, run: str) -> list[str]:
        """What a train job starts from besides its config: the built model it fine-tunes, if any."""
        base = self.train_run(run).base_model
        return [base] if self.built_model_name(base) else []

    def checkpoint_steps(self, run: str) -> list[int]:
        """The steps a run saves a checkpoint at: every `save_steps`, and `max_steps`."""
        return self.train_run(run).save_steps()

    def base_models(self) -> dict[str, str]:
        """Slug -> base model of every training run (one step-0 evaluation each)."""
        bases: dict[str, str] = {}
        for run in self.train_runs():
            model = self.train_run(run).base_model
            slug = self.built_model_name(model) or model_slug(model)
            other = bases.setdefault(slug, model)
            if other != model:
                raise ConfigError(f"base models {other!r} and {model!r} share the folder {slug!r}")
        return bases

    def run_budget(self, run: str) -> dict[str, int]:
        """The prompt and turn budgets a run's rollout plays with, as `eval` options."""
        from schemashift.lineage import prompt_budget

        return prompt_budget(self.train_run(run).settings)

    def base_budget(self, model: str) -> dict[str, int]:
        """The budgets of the one step-0 evaluation of base model `model`: those of every run that
        starts from it, which must agree (step 0 is compared with each of them)."""
        runs = [run for run in self.train_runs() if self.train_run(run).base_model == model]
        budgets = {run: self.run_budget(run) for run in runs}
        if len({tuple(budget.items()) for budget in budgets.values()}) > 1:
            said = "; ".join(
                f"{run}: max_prompt_tokens {budget['max_prompt_tokens']}, "
                f"max_turn_tokens {budget['max_new_tokens']}"
                for run, budget in budgets.items()
            )
            raise ConfigError(
                f"the training runs of base model {model!r} differ in their prompt budgets ({said}); "
                "its one step-0 evaluation must play the budgets of every run it is compared with: "
                "give them the same max_prompt_tokens and max_turn_tokens"
            )
        return budgets[runs[0]] if runs else {}

    def evaluated_steps(self, run: str) -> list[int]:
        """A run's evaluated steps: 0 if it warm-starts (`lineage.WARM_START`), its checkpoints."""
        return [0] * (self.train_run(run)["sft_steps"] > 0) + self.checkpoint_steps(run)

    def step_adapter(self, run: str, step: int) -> str:
        """The adapter of an evaluated step: the warm start at step 0, else the checkpoint."""
        from schemashift.lineage import WARM_START

        return f"{self.results}/train/{run}/{f'checkpoint-{step}' if step else WARM_START}"

    def train_done(self, run: str) -> str:
        """The train rule's completion record; checkpoints are not outputs, so a rerun resumes."""
        return f"{self.results}/train/{run}/train.done.json"

    def evaluation(self, folder: str) -> Evaluation:
        """A model evaluation by its folder: api/<model>, base/<slug> (step 0 of every run that
        starts from it) or <run>/step-<n>, which waits on its run's completion record; a harness
        other than the default one marks the folder (`harness_folder`)."""
        name, harness = split_harness(folder)
        try:
            check_harness(harness)
        except ValueError as exc:
            raise ValueError(f"{folder}: {exc}") from None
        evaluation = self._evaluation(name)
        return replace(evaluation, folder=folder, subject=evaluation.subject.through(harness))

    def _evaluation(self, name: str) -> Evaluation:
        head, tail = name.split("/")
        if head == "api":
            policy = self.api_models[tail]["policy"]
            return Evaluation(name, policy, Subject("model", policy))
        if head == "base":
            bases = self.base_models()
            if tail not in bases:
                raise ValueError(
                    f"no training run has the base model folder {tail!r}; known: {sorted(bases)}"
                )
            built = () if self.built_model_name(bases[tail]) is None else (bases[tail],)
            budget = self.base_budget(bases[tail])
            policy = f"hf:{bases[tail]}"
            return Evaluation(name, policy, Subject("base", policy, 0), waits_on=built, **budget)
        step = int(tail.removeprefix("step-"))
        if step not in (steps := self.evaluated_steps(head)):
            warm = " (step 0 is a run's warm start: it has none, sft_steps 0)" if step == 0 else ""
            raise ValueError(f"train run {head!r} saves no checkpoint {step}{warm}; its checkpoints: {steps}")
        policy = f"hf:{self.train_run(head).base_model}@{self.step_adapter(head, step)}"
        subject = Subject("checkpoint", head, step)
        return Evaluation(name, policy, subject, (self.train_done(head),), **self.run_budget(head))

    def run_harnesses(self, run: str) -> list[str]:
        """The harnesses a run's checkpoints are evaluated through: the one it trained on
        (`train.runs.<run>.overrides.harness`) and the other one, or those its base model's
        `models` entry lists (`harnesses`: a model whose chat template has no tool support plays
        the default harness only), which must hold the one it trained on."""
        from schemashift.policies.llm.harnesses import model_harnesses

        name = self.config["train"]["runs"][self.train_run(run).configured]["base_model"]
        entry = (self.config.get("models") or {}).get(name) or {}
        chosen = list(entry.get("harnesses", model_harnesses()))
        trained_on = self.train_run(run)["harness"]
        if trained_on not in chosen:
            raise ConfigError(
                f"train.runs.{run} trains through the {trained_on} harness, which models.{name}.harnesses "
                f"{chosen} leaves out"
            )
        return [trained_on, *(h for h in chosen if h != trained_on)]

    def model_subjects(self) -> list[str]:
        """The base models and every evaluated step of the enabled training runs, each through its
        run's harnesses (`run_harnesses`; a base model through those of every run it starts)."""
        subjects = []
        for slug, model in self.base_models().items():
            self.base_budget(model)  # a clear error where its runs' budgets differ
            harnesses = [
                h
                for run in self.train_runs()
                if self.train_run(run).base_model == model
                for h in self.run_harnesses(run)
            ]
            subjects += [harness_folder(f"base/{slug}", h) for h in dict.fromkeys(harnesses)]
        for run in self.train_runs():
            subjects += [
                harness_folder(f"{run}/step-{step}", h)
                for step in self.evaluated_steps(run)
                for h in self.run_harnesses(run)
            ]
        return subjects

    def eval_dir(self, subject: str, ruleset: str) -> str:
        return f"{self.results}/eval/{subject}/{ruleset}"

    def _eval_files(self, subjects: list[str]) -> list[str]:
        return [
            f"{self.eval_dir(subject, ruleset)}/{name}"
            for subject in subjects
            for ruleset in self.config["rulesets"]
            for name in CELL_FILES
        ]

    def evaluation_targets(self) -> list[str]:
        """The API baselines always; the base models and checkpoints where training is enabled."""
        subjects = self.api_subjects()
        return self._eval_files(subjects + (self.model_subjects() if self.train_enabled() else []))

    # --- what the aggregation expects and reads --------------------------------------------------

    def model_cells(self) -> list[tuple[str, Evaluation, str, int, str]]:
        """(ruleset, subject, scenario, seed, arm) of the model evaluations the manifest expects: every
        enabled API baseline, and, unless training is disabled, each run's untrained base model
        (step 0) and its checkpoints, on the cells their `eval` plays. A configured run that has
        not trained here (auto without a GPU) thus shows as missing, never as absent or 0."""
        names = self.api_subjects()
        if self.config["train"]["enabled"] is not False:
            names += self.model_subjects()
        return [
            (ruleset, subject, scenario, seed, arm)
            for subject in map(self.evaluation, names)
            for ruleset in self.config["rulesets"]
            for scenario, seed in self.cells(ruleset)
            for arm in self.arms(ruleset)
        ]

    def expected_cells_digest(self) -> str:
        """A digest of `expected_cells`: the census rule's param, so that Snakemake stores and
        compares 16 bytes per parse, not the whole census (millions of characters at scale)."""
        text = json.dumps(self.expected_cells(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def expected_cells(self) -> list[dict]:
        """Every cell the manifest expects, each sample and arm apart (results/expected_cells.json).
        A cell of the drift arm carries no `arm` (a missing arm is drift, `records.read_arm`), so
        the census of a drift-only configuration is the one it was before arms existed."""
        if self._census is None:
            self._census = self._expected_cells()
        return self._census

    def _expected_cells(self) -> list[dict]:
        samples = range(self.config["samples"])
        cells = [
            {"ruleset": r, "policy": p, "scenario": s, "seed": seed, "sample_index": i, **_arm(arm)}
            for r, p, s, seed, arm in self.baseline_cells()
            for i in samples
        ]
        seen = set()
        for ruleset, evaluation, scenario, seed, arm in self.model_cells():
            measured = evaluation.record_columns()
            key = (ruleset, *measured.values(), scenario, seed, arm)
            if key in seen:
                continue
            seen.add(key)
            cells += [
                {
                    "ruleset": ruleset,
                    **measured,
                    "scenario": scenario,
                    "seed": seed,
                    "sample_index": i,
                    **_arm(arm),
                }
                for i in samples
            ]
        return cells

    def evaluation_inputs(self) -> list[str]:
        """Model evaluation results the aggregation reads: those this config makes, and any others
        already under results/eval (from an earlier config or run)."""
        made = [target for target in self.evaluation_targets() if target.endswith("episodes.parquet")]
        found = [str(path) for path in Path(self.results, "eval").glob("**/episodes.parquet")]
        return sorted(set(made) | set(found))

    def training_inputs(self) -> list[str]:
        """Training metrics the aggregation reads: the enabled runs' where training is on, and any
        that exist."""
        made = (
            [f"{self.results}/train/{run}/metrics.parquet" for run in self.train_runs()]
            if self.train_enabled()
            else []
        )
        found = [str(path) for path in Path(self.results, "train").glob("*/metrics.parquet")]
        return sorted(set(made) | set(found))

    # --- the container image and the default targets ---------------------------------------------

    @cached_property
    def job_engine(self) -> tuple[str | None, str]:
        """(engine, why): podman or docker where the jobs run in the project's images, None where
        they run on the host (schemashift.workflow.containers; auto's verdict is kept in environ)."""
        from collections.abc import MutableMapping

        from schemashift.workflow.containers import job_engine

        keep = self.environ if isinstance(self.environ, MutableMapping) else dict(self.environ)
        return job_engine(self.config["containers"], keep)

    def image_engine(self) -> str | None:
        """The engine the images are built with: the jobs' engine, or where the jobs run on the
        host the first of podman and docker on PATH, for an image asked for by name (`snakemake
        env_image`); None for `none`."""
        from schemashift.workflow.containers import ENGINES

        if self.config["containers"]["engine"] == "none":
            return None
        return self.job_engine[0] or next((name for name in ENGINES if shutil.which(name)), None)

    def image_is_default(self) -> bool:
        """The server image joins the default targets wherever the jobs run in images."""
        return self.job_engine[0] is not None

    def trackio_db(self) -> str:
        """The dashboard's Trackio project, exported from results/ (`report trackio`)."""
        from schemashift.runs.tracking import TRACKIO_PROJECT

        return f"{self.results}/trackio/{TRACKIO_PROJECT}.db"

    def screenshot_targets(self) -> list[str]:
        """The report's and the dashboard's screenshots, where a headless browser is on PATH."""
        from schemashift.report.screenshots import DASHBOARD_FILE, REPORT_FILE, find_browser

        if find_browser() is None:
            return []
        return [f"{self.results}/screenshots/{name}" for name in (REPORT_FILE, DASHBOARD_FILE)]

    def default_targets(self) -> list[str]:
        """The aggregated tables, the report and its figures, and the cells (so that a deleted
        cell file is made again), and the image where its engine is named."""
        from schemashift.report.figures import stems

        names = ("episodes.parquet", "drifts.parquet", "manifest.json", "summary.md", "report.html")
        targets = [*(f"{self.results}/{name}" for name in names), self.trackio_db()]
        targets += self.screenshot_targets()
        targets += [f"{self.results}/figures/{stem}.png" for stem in stems(self.config["rulesets"])]
        targets += self.baseline_files()
        if self.image_is_default():
            targets.append(f"{self.results}/containers/env.image.json")
        return targets
