"""The arguments a resolved training run (`schemashift.runs.contract.TrainRun`) gives the
training stack: peft's LoraConfig, the sampling settings every turn shares, the generation
engine's length and TRL's GRPOConfig, and the check that the stack kept them."""

from __future__ import annotations

from typing import Any

from schemashift.lineage import prompt_budget
from schemashift.runs.contract import TrainRun


def lora_kwargs(run: TrainRun) -> dict[str, Any]:
    """Keyword arguments of peft's LoraConfig for the run."""
    return {
        "r": run["lora_r"],
        "lora_alpha": run["lora_alpha"],
        "lora_dropout": run["lora_dropout"],
        "target_modules": list(run["lora_target_modules"]),
        "task_type": "CAUSAL_LM",
    }


def sampling_settings(temperature: float) -> dict[str, Any]:
    """How every turn is sampled: the temperature alone, every other filter off. The rollout,
    TRL's scoring (which divides the logits by the temperature and applies nothing else) and
    vLLM all use these values, and evaluation's sampler applies the temperature only."""
    return {"temperature": temperature, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}


def sampling_kwargs(run: TrainRun) -> dict[str, Any]:
    return sampling_settings(run["temperature"])


def engine_length(run: TrainRun) -> int:
    """Tokens the generation engine must hold: the prompt budget and one turn (evaluation's rule,
    `max_prompt_tokens = context_length - max_new_tokens`, read the other way round)."""
    return sum(prompt_budget(run.settings).values())


def grpo_kwargs(run: TrainRun, output_dir: str, *, use_cpu: bool, use_vllm: bool) -> dict[str, Any]:
    """Keyword arguments of TRL's GRPOConfig for the run (checked against TRL 1.16's fields):
    the declared settings, which `check_effective_settings` holds every stack to."""
    kwargs: dict[str, Any] = {
        "output_dir": output_dir,
        "learning_rate": run["learning_rate"],
        "lr_scheduler_type": run["lr_scheduler_type"],
        "warmup_steps": run["warmup_steps"],
        "num_generations": run["num_generations"],
        "per_device_train_batch_size": run["per_device_train_batch_size"],
        "gradient_accumulation_steps": run["gradient_accumulation_steps"],
        "max_steps": run["max_steps"],
        "save_steps": run["save_steps"],
        "save_strategy": "steps",
        "loss_type": run["loss_type"],
        "beta": run["beta"],
        "max_grad_norm": run["max_grad_norm"],
        **sampling_kwargs(run),
        **{key: run[key] for key in ("optim", "weight_decay", "epsilon", "epsilon_high")},
        "mask_truncated_completions": run["mask_truncated_completions"],
        "logging_steps": run["logging_steps"],
        "seed": run["seed"],
        # Per turn: the closed-loop rollout generates one turn per call (vLLM reads this limit).
        "max_completion_length": run["max_turn_tokens"],
        # Trackio is logged by schemashift.train.live_trackio (steps kept, resumes without duplicates);
        # transformers' callback would log without steps and append on resume
        "report_to": "none" if run["report_to"] == "trackio" else run["report_to"],
        "use_cpu": use_cpu,
        "bf16": not use_cpu,
        "use_vllm": use_vllm,
        "push_to_hub": run["push_to_hub"],
        "hub_strategy": run["hub_strategy"],
    }
    if use_vllm:
        kwargs["vllm_mode"] = "colocate"
        kwargs["vllm_gpu_memory_utilization"] = run["vllm_gpu_memory_utilization"]
        kwargs["vllm_max_model_length"] = engine_length(run)
        kwargs["vllm_importance_sampling_correction"] = True
        kwargs["vllm_importance_sampling_mode"] = run["vllm_importance_sampling_mode"]
        kwargs["vllm_importance_sampling_clip_max"] = run["vllm_importance_sampling_clip_max"]
    if run["push_to_hub"]:
        kwargs["hub_model_id"] = run["hub_model_id"]
    return kwargs


class SettingsChanged(RuntimeError):
    """A training stack changed a setting the run declares."""


def _comparable(key: str, value: Any) -> Any:
    """A config value as plain data: enums by their value, `report_to` as a list."""
    value = getattr(value, "value", value)
    if key == "report_to":
        return [] if value in (None, "none", []) else [value] if isinstance(value, str) else list(value)
    return value


def check_effective_settings(declared: dict[str, Any], args: Any) -> dict[str, Any]:
    """The settings `args` (the GRPOConfig a stack trains with) holds for every declared key;
    raises `SettingsChanged` naming each one that differs from the declared value."""
    effective = {key: _comparable(key, getattr(args, key, None)) for key in declared}
    changed = {
        key: {"declared": _comparable(key, value), "effective": effective[key]}
        for key, value in declared.items()
        if _comparable(key, value) != effective[key]
    }
    if changed:
        raise SettingsChanged(
            f"the training stack changed declared settings {changed}; set them in the run (if the "
            f"stack needs them) or keep the stack from overriding them"
        )
    return effective
