"""GRPO training of a LoRA adapter with TRL, closed-loop against the environment.

`train()` resolves a run from the config, picks the stack (transformers + peft anywhere; Unsloth
or vLLM colocate generation on a GPU), builds the dataset from the run's ruleset and split, and
trains with `GRPOTrainer` and the closed-loop `rollout_func`. Checkpoints land in
`<out>/checkpoint-<step>/` (adapter, optimizer state, `manifest.json` written last), metrics in
`<out>/metrics.jsonl` as they happen and `<out>/metrics.parquet` at every save, and the run index
`<out>/run.json` (the run's identity and its complete checkpoints) at every save. A run started
again resumes from its last complete checkpoint and supersedes the metric rows logged after it.

Every stack trains with the settings the run declares (`runs.grpo_kwargs`): the GRPOConfig the
stack's trainer holds is compared with them before the first step, a difference is an error,
and the effective settings are recorded in `<out>/effective_settings.json`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from schemashift import provenance
from schemashift.lineage import (
    CHECKPOINT_MANIFEST,
    RUN_INDEX,
    WARM_START,
    chat_template_sha256,
    prompt_budget,
    read_checkpoint_manifest,
    run_index,
)
from schemashift.rollout.io import write_json
from schemashift.runs.contract import TrainRun, resolve_run
from schemashift.train import backends as stacks
from schemashift.train.arguments import (
    SettingsChanged,
    check_effective_settings,
    engine_length,
    grpo_kwargs,
    lora_kwargs,
)
from schemashift.train.checkpoints import (
    complete_checkpoints,
    latest_checkpoint,
    write_manifest,
)
from schemashift.train.metrics import MetricsLog, sampling_metrics, write_go_no_go

DONE_NAME = "train.done.json"
EFFECTIVE_SETTINGS = "effective_settings.json"


class TrainingError(RuntimeError):
    """Training cannot start or continue (clear message, nothing half-written)."""


def _device_facts() -> dict[str, Any]:
    import torch

    if torch.cuda.is_available():
        return {
            "gpu_type": torch.cuda.get_device_name(0),
            "gpu_count": torch.cuda.device_count(),
            "peak_gpu_mem_gb": torch.cuda.max_memory_allocated() / 2**30,
        }
    return {"gpu_type": None, "gpu_count": 0, "peak_gpu_mem_gb": None}


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _callback_class():
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):
        """Turns TRL's logs and our rollouts into metric rows; writes manifests on save."""

        def __init__(
            self, run: TrainRun, out: Path, rollout: Any, metrics: MetricsLog, facts: dict, live: Any = None
        ) -> None:
            self.run, self.out, self.rollout, self.metrics, self.facts = run, out, rollout, metrics, facts
            self.live = live
            self.last_time = time.perf_counter()
            self.last_step = None

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            if "reward" not in logs or state.global_step == self.last_step:
                return
            episodes = self.rollout.drain()
            now = time.perf_counter()
            rewards = [e["reward"] for e in episodes]
            row = {
                "step": state.global_step,
                "reward_mean": logs.get("reward"),
                "reward_std": logs.get("reward_std"),
                "reward_min": min(rewards) if rewards else None,
                "reward_max": max(rewards) if rewards else None,
                **{
                    key: _mean([e.get(key) for e in episodes])
                    for key in (
                        "reward_completion",
                        "reward_drift_detection",
                        "reward_adaptation",
                        "reward_efficiency",
                        "reward_success",
                        "reward_shaping",
                    )
                },
                "loss": logs.get("loss"),
                "kl": logs.get("kl"),
                "grad_norm": logs.get("grad_norm"),
                "learning_rate": logs.get("learning_rate"),
                **sampling_metrics(logs),
                "completion_tokens": _mean([e["model_tokens"] for e in episodes]),
                "tool_calls_per_episode": _mean([e.get("tool_calls") for e in episodes]),
                "seconds_per_step": (now - self.last_time)
                / max(1, state.global_step - (self.last_step or 0)),
                **_device_facts(),
            }
            self.last_time, self.last_step = now, state.global_step
            self.metrics.append(row)
            if self.live is not None:
                self.live.log(row)
            if state.global_step == self.run["go_no_go_step"]:
                write_go_no_go(self.out, self.metrics.lineage(), self.run["go_no_go_step"])

        def on_step_end(self, args, state, control, **kwargs):
            # The last step always leaves a checkpoint, even when it is not a multiple of save_steps.
            if state.global_step == state.max_steps:
                control.should_save = True
            return control

        def on_save(self, args, state, control, **kwargs):
            step = state.global_step
            write_manifest(self.out / f"checkpoint-{step}", step, **self.facts)
            self.metrics.write_parquet()
            write_run_index(self.out, self.run)

    return Recorder


def _load_model(run: TrainRun, stack: str, use_cpu: bool):
    """Model and tokenizer of the base model; Unsloth loads its own (4-bit) way."""
    if stack == "unsloth":
        from unsloth import FastLanguageModel  # must precede transformers/peft imports

        # the named model itself (not a pre-quantised unsloth/ copy an offline cache lacks), and
        # a sequence length the budget rule keeps every trained sequence within
        model, tokenizer = FastLanguageModel.from_pretrained(
            run.base_model,
            load_in_4bit=run["load_in_4bit"],
            max_seq_length=engine_length(run),
            use_exact_model_name=True,
        )
        # Unsloth initialises the adapter from its own fixed random_state (3407) unless told:
        # repeats of a run (seed + 0, 1, ...) must start from different adapters
        model = FastLanguageModel.get_peft_model(
            model,
            **{k: v for k, v in lora_kwargs(run).items() if k != "task_type"},
            random_state=run["seed"],
        )
        return model, tokenizer, None
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(run.base_model)
    kwargs: dict[str, Any] = {"dtype": torch.float32 if use_cpu else torch.bfloat16}
    if not use_cpu and run["load_in_4bit"] and stacks.installed("bitsandbytes"):
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16
        )
    model = AutoModelForCausalLM.from_pretrained(run.base_model, **kwargs)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, LoraConfig(**lora_kwargs(run))


def seeded(make: Any, seed: int) -> Any:
    """`make` with torch's generators seeded first: peft draws a new adapter's A matrices from the
    global generator, so the run's seed, not whatever ran before, decides them."""

    def call(*args: Any, **kwargs: Any) -> Any:
        from transformers import set_seed

        set_seed(seed)
        return make(*args, **kwargs)

    return call


def effective_quantization(model: Any) -> str | None:
    """How the loaded weights are quantised (None: not at all), read off the model itself: a
    run asks for 4-bit loading, the stack decides whether it happened (bitsandbytes may be absent)."""
    if getattr(model, "is_loaded_in_4bit", False):
        return "bitsandbytes-4bit"
    if getattr(model, "is_loaded_in_8bit", False):
        return "bitsandbytes-8bit"
    config = getattr(getattr(model, "config", None), "quantization_config", None)
    if config is None:
        return None
    method = config.get("quant_method") if isinstance(config, dict) else getattr(config, "quant_method", None)
    return str(getattr(method, "value", method) or "unknown")


def _warm_start(model: Any, tokenizer: Any, run: TrainRun, peft_config: Any, out: Path) -> Any:
    """The LoRA model after the run's supervised warm start on oracle trajectories.

    The warm-started adapter is saved once (`<out>/sft-adapter/`, atomically) and reloaded on a
    resume, so the adapter GRPO starts from, and TRL's reference copy of it, are the same on every
    attempt; the checkpoints then hold the adapter after SFT and GRPO, over the untouched base.
    """
    import shutil
    import tempfile

    from peft import PeftModel, get_peft_model

    from schemashift.policies.llm.turn_end import end_of_turn_ids
    from schemashift.runs.contract import training_scenarios
    from schemashift.train.dataset import training_seeds
    from schemashift.train.sft import encode_conversation, oracle_conversations, seen_tasks, train_loop

    saved = out / WARM_START
    if (saved / "adapter_config.json").is_file():
        return PeftModel.from_pretrained(model, saved, is_trainable=True)
    model = seeded(get_peft_model, run["seed"])(model, peft_config)
    seeds = training_seeds(run, run["sft_seeds"])
    conversations = oracle_conversations([run.ruleset], seeds, training_scenarios(run), run["harness"])
    stops = end_of_turn_ids(tokenizer, getattr(model, "generation_config", None))
    examples = [encode_conversation(tokenizer, messages, stops) for messages in conversations]
    result = train_loop(
        model, examples, steps=run["sft_steps"], lr=run["sft_learning_rate"], seed=run["seed"]
    )
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".sft-adapter-", dir=out))
    model.save_pretrained(staging)
    write_json(
        staging / "sft.json",
        {
            "steps": result.steps,
            "first_loss": result.first_loss,
            "last_loss": result.last_loss,
            "examples": len(examples),
            "tasks": seen_tasks([run.ruleset], seeds, training_scenarios(run)),
            "device": str(next(model.parameters()).device),
        },
    )
    shutil.rmtree(saved, ignore_errors=True)
    os.replace(staging, saved)
    return model


def mark_warm_start(out: Path, facts: dict[str, Any]) -> None:
    """Give the run's warm start (if it has one) a checkpoint manifest of step 0: it is evaluated
    as the run's step 0 (`workflow.Plan.evaluated_steps`), and its rows name the run."""
    warm_start = out / WARM_START
    if (warm_start / "adapter_config.json").is_file() and not (warm_start / CHECKPOINT_MANIFEST).is_file():
        write_manifest(warm_start, 0, **facts)


def adapted_model(run: TrainRun, stack: str, use_cpu: bool, out: Path) -> tuple[Any, Any]:
    """The base model with the run's LoRA adapter, ready for GRPO, and its tokenizer.

    The adapter is applied here on every stack (never by TRL's `peft_config`) so that its
    initialisation is the run's seed's: after the warm start where the run has one, else a
    fresh adapter drawn with the run's seed (Unsloth's from its `random_state`).
    """
    model, tokenizer, peft_config = _load_model(run, stack, use_cpu)
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions is not None and engine_length(run) > positions:
        raise TrainingError(
            f"max_prompt_tokens + max_turn_tokens = {engine_length(run)} exceeds the "
            f"{positions} positions of {run.base_model}; lower max_prompt_tokens"
        )
    if run["sft_steps"] > 0:
        if peft_config is None:
            raise TrainingError(
                f"sft_steps {run['sft_steps']}: the warm start is not implemented for the {stack} stack "
                f"(its model arrives with its adapter); set sft_steps 0 or use the transformers or vllm stack"
            )
        model = _warm_start(model, tokenizer, run, peft_config, out)
    elif peft_config is not None:
        from peft import get_peft_model

        model = seeded(get_peft_model, run["seed"])(model, peft_config)
    return model, tokenizer


def train(
    config: dict[str, Any],
    run_name: str,
    out_dir: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    resume: bool = False,
    config_hash: str | None = None,
    git_sha: str | None = None,
    env_backend: str = "inprocess",
) -> dict[str, Any]:
    """Train one run to its last step; returns the summary written to `train.done.json`."""
    run = resolve_run(config, run_name, overrides)
    stack = stacks.select_backend(run["backend"])
    out = Path(out_dir)
    previous = latest_checkpoint(out)
    if previous and not resume:
        raise TrainingError(
            f"{out} already holds checkpoints up to step {previous[0]}; pass --resume to continue "
            f"or choose another --out"
        )
    if run["push_to_hub"] and not os.environ.get("HF_TOKEN"):
        raise TrainingError("push_to_hub is on but HF_TOKEN is not set; export a Hub token or turn it off")
    if previous and previous[0] >= run["max_steps"]:
        # Trained already: the records are rewritten from the checkpoints, so that a changed
        # description (or report_step) reaches the run index without retraining.
        return _finish(out, run)

    import torch

    use_cpu = not torch.cuda.is_available()
    model, tokenizer = adapted_model(run, stack, use_cpu, out)
    memory = _memory_estimate(model, run, use_cpu)

    from datasets import Dataset
    from trl import GRPOConfig

    from schemashift.rollout.runner import SweepContext
    from schemashift.train.closed_loop import ClosedLoopRollout, reward_function
    from schemashift.train.dataset import build_rows

    context = SweepContext(
        sweep_id=f"train-{run.name}",
        policy=f"grpo:{run.name}",
        harness=run["harness"],
        train_run=run.name,
        base_model=run.base_model,
        config_hash=config_hash,
        git_sha=git_sha,
        image=provenance.image(),
    )
    budget = prompt_budget(run.settings)  # the same budgets evaluate its checkpoints
    rollout = ClosedLoopRollout(
        tokenizer,
        reward=run.reward,
        max_turn_tokens=budget["max_new_tokens"],
        max_turns=run["max_turns"],
        temperature=run["temperature"],
        backend=env_backend,
        context=context,
        generation_config=getattr(model, "generation_config", None),
        max_prompt_tokens=budget["max_prompt_tokens"],
        harness=run["harness"],
    )
    metrics = MetricsLog(out, run.name)
    if previous:
        metrics.resume_from(previous[0])
    elif metrics.path.exists():
        metrics.resume_from(0)
    facts = {
        "train_run": run.name,
        "base_model": run.base_model,
        "ruleset": run.ruleset,
        "split": run.split,
        "reward": run.reward,
        "backend": stack,
        "config_hash": config_hash,
        "git_sha": git_sha,
        "settings": run.settings,
        "quantization": effective_quantization(model),
        "chat_template_sha256": chat_template_sha256(tokenizer.chat_template),
    }
    declared = grpo_kwargs(run, str(out), use_cpu=use_cpu, use_vllm=stack == "vllm")
    args = GRPOConfig(**declared)
    mark_warm_start(out, facts)
    trainer = grpo_trainer(
        stack,
        model=model,
        reward_funcs=[reward_function(run.reward)],
        args=args,
        train_dataset=Dataset.from_list(build_rows(run)),
        processing_class=tokenizer,
        rollout_func=rollout,
        callbacks=[_callback_class()(run, out, rollout, metrics, facts, _live_logger(run, metrics))],
    )
    try:
        effective = check_effective_settings(declared, trainer.args)
    except SettingsChanged as error:
        raise TrainingError(f"{stack}: {error}") from error
    out.mkdir(parents=True, exist_ok=True)
    write_json(
        out / EFFECTIVE_SETTINGS,
        {
            "backend": stack,
            "settings": effective,
            "quantization": facts["quantization"],
            "chat_template_sha256": facts["chat_template_sha256"],
            "memory_estimate_gib": memory,
        },
    )
    trainer.train(resume_from_checkpoint=str(previous[1]) if previous else None)
    return _finish(out, run)


def _memory_estimate(model: Any, run: TrainRun, use_cpu: bool) -> dict[str, float]:
    """The run's estimated peak accelerator memory (schemashift.train.memory); a run whose
    estimate exceeds the GPU it is on is refused before its first rollout."""
    from schemashift.train.memory import run_estimate_gib

    estimate = run_estimate_gib(model, run.settings, engine_length(run))
    if not use_cpu:
        import torch

        total = torch.cuda.get_device_properties(0).total_memory / 2**30
        if estimate["peak"] > total:
            raise TrainingError(
                f"the run needs about {estimate['peak']:.1f} GiB of GPU memory at its peak and the GPU "
                f"has {total:.1f} GiB ({', '.join(f'{k} {v:.1f}' for k, v in estimate.items())}); lower "
                f"max_prompt_tokens, the episodes per step or the model size"
            )
    return estimate


def grpo_trainer(stack: str, **kwargs: Any) -> Any:
    """TRL's `GRPOTrainer(**kwargs)`; on the vllm stack its weight sync merges the adapter out of
    place, so that the base weights it trains stay those evaluation loads
    (schemashift.train.weight_sync)."""
    from trl import GRPOTrainer

    trainer = GRPOTrainer(**kwargs)
    if stack == "vllm":
        from schemashift.train.weight_sync import install_out_of_place_sync

        install_out_of_place_sync(trainer.vllm_generation)
    return trainer


def _live_logger(run: TrainRun, metrics: MetricsLog) -> Any:
    """Live Trackio logging where the run asks for it (`report_to: trackio`), resumed from the
    committed lineage (schemashift.train.live_trackio)."""
    if run["report_to"] != "trackio":
        return None
    from schemashift.train.live_trackio import LiveTrackio

    config = {"base_model": run.base_model, "ruleset": run.ruleset, "reward": run.reward, "split": run.split}
    return LiveTrackio(run.name, f"{run.ruleset}/{run.reward}", metrics.lineage(), config)


def write_run_index(out: Path, run: TrainRun) -> dict[str, Any]:
    """The run index (`schemashift.lineage.RUN_INDEX`) of the checkpoints complete so far."""
    index = run_index(
        train_run=run.name,
        base_model=run.base_model,
        ruleset=run.ruleset,
        reward=run.reward,
        split=run.split,
        description=run.description,
        max_steps=run["max_steps"],
        save_steps=run.save_steps(),
        report_step=run.reported_step(),
        go_no_go_step=run["go_no_go_step"],
        checkpoints={
            step: read_checkpoint_manifest(path)["adapter_sha256"]
            for step, path in complete_checkpoints(out).items()
        },
    )
    write_json(out / RUN_INDEX, index)
    return index


def _finish(out: Path, run: TrainRun) -> dict[str, Any]:
    metrics = MetricsLog(out, run.name)
    metrics.write_parquet()
    write_run_index(out, run)
    checkpoints = {step: str(path.name) for step, path in complete_checkpoints(out).items()}
    missing = [step for step in run.save_steps() if step not in checkpoints]
    if missing:
        raise TrainingError(f"training ended without checkpoints for steps {missing} in {out}")
    summary = {
        "train_run": run.name,
        "steps": run["max_steps"],
        "checkpoints": checkpoints,
        "lineage_steps": [row["step"] for row in metrics.lineage()],
        "run": run.as_dict(),
    }
    write_json(out / DONE_NAME, summary)
    return summary
