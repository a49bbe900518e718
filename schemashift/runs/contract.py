"""The training-run contract: `train.defaults` and `train.runs.<name>` of config.yaml resolved
into one setting set, a run's repeats, and the scenarios it trains on.

Every knob a run may change is declared here with its default (Run 1's settings in the original
training log, docs/original-training-log.md), so that a misspelt override is an error instead of
a silently ignored key, and the trainer, the workflow and the report all read the same resolved
values. It sits below all three (the report and the workflow read runs without importing the
training stack).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemashift.env.rulesets import get_ruleset
from schemashift.runs.rewards import RewardError, reward_variant
from schemashift.runs.stacks import GPU_STACKS

#: a run's `backend`: the stack installed here (auto), transformers alone, or a GPU stack by name
BACKENDS = ("auto", "transformers", *GPU_STACKS)
#: Keys of one `train.runs.<name>` entry; `report_step` names the checkpoint the report calls
#: "trained" (default: the last one), `enabled: false` keeps an optional run out of the workflow,
#: `description` is shown beside the run in the report.
RUN_KEYS = (
    "base_model",
    "ruleset",
    "split",
    "reward",
    "overrides",
    "report_step",
    "enabled",
    "description",
    "repeats",
)
#: A run with `repeats: N` trains N times, each time with another training seed (the `seed`
#: setting plus 0, 1, ...): the first keeps the run's name, the others are <run>.rep2, <run>.rep3,
#: ... (`repeat_name`), so that the report can tell training variance from evaluation variance.
REPEAT_MARK = ".rep"

#: Setting -> default. LoRA and GRPO values follow Run 1 of the original training log
#: (docs/original-training-log.md), with its adopted DAPO loss, cosine schedule, warmup 2, beta
#: 0.01 and grad-norm clip 1.0.
DEFAULTS: dict[str, Any] = {
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "learning_rate": 5e-6,
    "lr_scheduler_type": "cosine",
    "warmup_steps": 2,
    "num_generations": 4,
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 4,
    "max_steps": 100,
    "save_steps": 25,
    "loss_type": "dapo",
    "beta": 0.01,
    "max_grad_norm": 1.0,
    "temperature": 1.0,
    # The optimizer and the clipping range, declared so that no stack picks its own (Unsloth's
    # GRPOConfig would swap in adamw_8bit, a weight decay and DAPO's epsilon_high 0.28).
    "optim": "adamw_torch",
    "weight_decay": 0.0,
    "epsilon": 0.2,
    "epsilon_high": 0.2,
    "mask_truncated_completions": False,
    "logging_steps": 1,
    "seed": 0,
    # Tokens the model may generate in one turn, and turns per rollout episode: null is each
    # scenario's own step limit; an explicit number must be at least every trained scenario's.
    "max_turn_tokens": 256,
    "max_turns": None,
    # Prompt budget of the interaction format (oldest turns are summarised beyond it).
    "max_prompt_tokens": 3072,
    # How the model acts in rollouts and the warm start: default (JSON actions in its text) or
    # tools (native tool calling through its chat template); checkpoints are evaluated on both.
    "harness": "default",
    "load_in_4bit": True,
    "backend": "auto",
    "vllm_gpu_memory_utilization": 0.3,
    # vLLM's importance-sampling correction of the trainer/engine mismatch: per token, truncated
    # at the cap (a per-episode ratio is a product over every model token of a long multi-turn
    # episode and leaves any clip range, masking out exactly the long episodes).
    "vllm_importance_sampling_mode": "token_truncate",
    "vllm_importance_sampling_clip_max": 3.0,
    # Supervised warm start of the LoRA adapter on oracle trajectories of the run's ruleset and
    # split before GRPO (0 = none): steps, learning rate, and how many seeds per scenario.
    "sft_steps": 0,
    "sft_learning_rate": 1e-4,
    "sft_seeds": 8,
    # Which tasks the dataset draws: scenarios (or families) and whether generated compositions join.
    "scenarios": "all",
    "compositions": False,
    # Explicit training seeds (each must lie in the run's split); null: drawn from the split.
    "seeds": None,
    "dataset_size": 512,
    # The go/no-go check of the original training log (docs/original-training-log.md) happens at
    # this step.
    "go_no_go_step": 20,
    "push_to_hub": False,
    "hub_model_id": None,
    "hub_strategy": "every_save",
    "report_to": "none",
}


class RunConfigError(ValueError):
    """A training run in the config is missing, misspelt or inconsistent."""


@dataclass(frozen=True)
class TrainRun:
    """One resolved training run: what it trains, on what, with which reward and settings."""

    name: str
    base_model: str
    ruleset: str
    split: str | None
    reward: str
    settings: dict[str, Any] = field(default_factory=dict)
    report_step: int | None = None
    description: str | None = None
    #: the configured run this is a repeat of (itself for the first), and which repeat (1-based)
    configured: str = ""
    repeat: int = 1

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]

    def save_steps(self) -> list[int]:
        return _save_steps(self.settings)

    def reported_step(self) -> int:
        """The checkpoint the report shows as "trained": the configured one, else the last."""
        return self.report_step if self.report_step is not None else self.save_steps()[-1]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base_model": self.base_model,
            "ruleset": self.ruleset,
            "split": self.split,
            "reward": self.reward,
            "report_step": self.report_step,
            "description": self.description,
            "configured": self.configured or self.name,
            "repeat": self.repeat,
            "settings": dict(self.settings),
        }


def _save_steps(settings: dict[str, Any]) -> list[int]:
    """The optimizer steps that leave a checkpoint: every `save_steps`, and the last step."""
    every, last = settings["save_steps"], settings["max_steps"]
    steps = list(range(every, last + 1, every))
    return steps if steps and steps[-1] == last else [*steps, last]


def _check_settings(where: str, values: dict[str, Any]) -> None:
    unknown = sorted(set(values) - set(DEFAULTS))
    if unknown:
        raise RunConfigError(f"{where}: unknown training settings {unknown}; known: {sorted(DEFAULTS)}")


def repeat_name(run: str, repeat: int) -> str:
    """The name of repeat `repeat` (1-based) of `run`: the first is the run itself."""
    return run if repeat == 1 else f"{run}{REPEAT_MARK}{repeat}"


def split_repeat(name: str) -> tuple[str, int]:
    """(configured run, repeat) of a run name: `run1.rep3` -> ("run1", 3), `run1` -> ("run1", 1)."""
    run, mark, number = name.rpartition(REPEAT_MARK)
    if mark and run and number.isdigit() and int(number) >= 2 and str(int(number)) == number:
        return run, int(number)
    return name, 1


def enabled_runs(config: Mapping[str, Any]) -> list[str]:
    """The training runs of a config that train (`enabled: false` keeps an optional run out), each
    repeat apart, in config order: the runs the workflow plans and the report expects."""
    runs = (config.get("train") or {}).get("runs") or {}
    return [
        repeat_name(name, repeat)
        for name, spec in runs.items()
        if spec.get("enabled", True)
        for repeat in range(1, int(spec.get("repeats", 1)) + 1)
    ]


def resolve_run(config: dict[str, Any], name: str, overrides: dict[str, Any] | None = None) -> TrainRun:
    """Resolve run `name` of a (validated) config: DEFAULTS < train.defaults < run overrides < `overrides`."""
    train = config.get("train") or {}
    runs = train.get("runs") or {}
    configured, repeat = (name, 1) if name in runs else split_repeat(name)
    if configured not in runs:
        raise RunConfigError(f"no training run {name!r} in config; runs: {sorted(runs)}")
    spec = dict(runs[configured])
    unknown = sorted(set(spec) - set(RUN_KEYS))
    if unknown:
        raise RunConfigError(
            f"train.runs.{configured}: unknown keys {unknown}; a run has {list(RUN_KEYS)} "
            f"and puts training settings under 'overrides'"
        )
    repeats = spec.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise RunConfigError(f"train.runs.{configured}: repeats must be a positive integer, got {repeats!r}")
    if repeat > repeats:
        raise RunConfigError(
            f"no training run {name!r} in config: train.runs.{configured} repeats {repeats} time(s)"
        )
    identity = {key: spec.get(key) for key in ("base_model", "ruleset", "split", "reward")}
    run_overrides = spec.get("overrides") or {}
    defaults = train.get("defaults") or {}
    _check_settings("train.defaults", defaults)
    _check_settings(f"train.runs.{name}.overrides", run_overrides)
    _check_settings("command-line overrides", overrides or {})
    settings = {**DEFAULTS, **defaults, **run_overrides, **(overrides or {})}
    settings["seed"] = settings["seed"] + repeat - 1

    # A base model may be named by its `models` entry (a local "hf:" model with its size).
    entry = (config.get("models") or {}).get(identity["base_model"]) or {}
    if str(entry.get("policy", "")).startswith("hf:"):
        identity["base_model"] = entry["policy"].removeprefix("hf:")
    missing = [key for key in ("base_model", "ruleset", "reward") if not identity[key]]
    if missing:
        raise RunConfigError(f"train.runs.{name}: missing {missing}")
    try:
        refused = reward_variant(identity["reward"]).check_ruleset(identity["ruleset"])
    except RewardError as error:
        raise RunConfigError(f"train.runs.{name}: {error}") from None
    if refused:
        raise RunConfigError(f"train.runs.{name}: {refused}")
    from schemashift.policies.llm.harnesses import trainable_harnesses

    trainable = list(trainable_harnesses())
    if settings["harness"] not in trainable:
        raise RunConfigError(
            f"train.runs.{name}: harness must be one of {trainable}, got {settings['harness']!r}"
        )
    if settings["backend"] not in BACKENDS:
        raise RunConfigError(f"train.runs.{name}: backend must be one of {list(BACKENDS)}")
    positive = ("max_steps", "save_steps", "num_generations", "max_turn_tokens", "max_prompt_tokens")
    for key in (*positive, "dataset_size"):
        if not isinstance(settings[key], int) or settings[key] < 1:
            raise RunConfigError(
                f"train.runs.{name}: {key} must be a positive integer, got {settings[key]!r}"
            )
    turns = settings["max_turns"]
    if turns is not None and (not isinstance(turns, int) or turns < 1):
        raise RunConfigError(
            f"train.runs.{name}: max_turns must be null (each scenario's step limit) or a positive "
            f"integer, got {turns!r}"
        )
    if settings["num_generations"] < 2:
        raise RunConfigError(f"train.runs.{name}: GRPO needs num_generations >= 2 to compare completions")
    saved = _save_steps(settings)
    if spec.get("report_step") is not None and spec["report_step"] not in saved:
        raise RunConfigError(
            f"train.runs.{name}: report_step {spec['report_step']} is not a saved step {saved}"
        )
    if settings["push_to_hub"] and not settings["hub_model_id"]:
        raise RunConfigError(f"train.runs.{name}: push_to_hub needs a hub_model_id")
    run = TrainRun(
        name=name,
        base_model=identity["base_model"],
        ruleset=identity["ruleset"],
        split=identity["split"],
        reward=identity["reward"],
        settings=settings,
        report_step=spec.get("report_step"),
        description=spec.get("description"),
        configured=configured,
        repeat=repeat,
    )
    # the scenarios it trains on exist (and compositions, where asked for), and fit its turn limit
    check_turn_limit(run, training_scenarios(run))
    return run


def training_scenarios(run: TrainRun) -> list[str]:
    """The scenarios (families) a run trains on: `scenarios` of its settings, 'all' or a list,
    followed by the ruleset's generated compositions when `compositions` is on."""
    ruleset = get_ruleset(run.ruleset)
    available = ruleset.scenario_ids()
    wanted = run["scenarios"]
    if wanted == "all":
        chosen = available
    else:
        unknown = sorted(set(wanted) - set(available))
        if unknown:
            raise RunConfigError(
                f"train.runs.{run.name}: unknown scenarios {unknown} for ruleset {run.ruleset!r}"
            )
        chosen = list(wanted)
    if not run["compositions"]:
        return chosen
    composed = [info.id for info in ruleset.compositions()]
    if not composed:
        raise RunConfigError(
            f"train.runs.{run.name}: compositions is on but ruleset {run.ruleset!r} has none"
        )
    return [*chosen, *composed]


def check_turn_limit(run: TrainRun, scenarios: list[str]) -> None:
    """An explicit `max_turns` must let every trained scenario run to its own step limit: a
    rollout cut off before the environment ends it would be trained on silently truncated play."""
    limit = run["max_turns"]
    if limit is None:
        return
    ruleset = get_ruleset(run.ruleset)
    longer = {
        scenario: steps
        for scenario in scenarios
        if (steps := ruleset.scenario_info(scenario).max_steps) > limit
    }
    if longer:
        raise RunConfigError(
            f"train.runs.{run.name}: max_turns {limit} is below the step limit of scenarios {longer}; "
            f"set it to null (each scenario's own limit) or to at least {max(longer.values())}"
        )
