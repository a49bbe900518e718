"""GRPO through TRL's vLLM-colocate code path, on CPU: TRL's real trainer, its real
`VLLMGeneration` (generation, weight sync, with the out-of-place merge `train.trainer` installs)
and importance-sampling correction, with a stand-in engine that has vLLM's API (`vllm_standin`)
where vLLM itself would start."""

from __future__ import annotations

import pytest

from schemashift.runs.contract import resolve_run
from schemashift.train.arguments import engine_length, grpo_kwargs, lora_kwargs

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(900)]


def _run(tiny_model, **overrides):
    """A run on the tiny model's own curriculum (so rewards vary within a group)."""
    from schemashift.train.tiny import CURRICULUM, training_seeds

    spec = {
        "base_model": str(tiny_model),
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": {
            "max_steps": 2,
            "save_steps": 2,
            "num_generations": 4,
            "per_device_train_batch_size": 4,
            "gradient_accumulation_steps": 1,
            "learning_rate": 5e-3,
            "warmup_steps": 0,
            "max_turn_tokens": 128,
            "scenarios": list(CURRICULUM["v1"]),
            "seeds": training_seeds(["v1"])["v1"],
            "dataset_size": 4,
            "lora_target_modules": ["q_proj", "v_proj"],
            "backend": "vllm",
            **overrides,
        },
    }
    return resolve_run({"train": {"runs": {"r": spec}}}, "r")


def _train_through_vllm(run, tmp_path, monkeypatch, tiny_model, without_logprobs=False, dtype=None):
    """Train `run` as `train.trainer.train` builds it, on the colocated stand-in engine; returns
    the trainer, the rollout, TRL's logs and the rollout outputs. `without_logprobs`: the rollout
    hands TRL no log-probabilities, as it did before it returned the engine's. `dtype`: the
    trained model's (the engine's stays float32)."""
    import trl.generation.vllm_generation as vllm_generation
    import trl.trainer.grpo_trainer as trl_grpo_trainer
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig
    from vllm_standin import SamplingParams, colocated_generation

    from schemashift.train.closed_loop import ClosedLoopRollout, reward_function
    from schemashift.train.dataset import build_rows
    from schemashift.train.trainer import grpo_trainer

    monkeypatch.setattr(vllm_generation, "SamplingParams", SamplingParams, raising=False)
    monkeypatch.setattr(trl_grpo_trainer, "VLLMGeneration", colocated_generation(str(tiny_model)))

    class Rollout(ClosedLoopRollout):
        outputs: list = []

        def play(self, model, prompts):
            out = super().play(model, prompts)
            if without_logprobs:
                out["logprobs"] = None
            self.outputs.append(out)
            return out

    class Logs(TrainerCallback):
        rows: list = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.rows.append(dict(logs or {}))

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=dtype)
    rollout = Rollout(
        tokenizer,
        reward=run.reward,
        max_turn_tokens=run["max_turn_tokens"],
        max_turns=run["max_turns"],
        temperature=run["temperature"],
        generation_config=model.generation_config,
        max_prompt_tokens=run["max_prompt_tokens"],
    )
    args = GRPOConfig(**grpo_kwargs(run, str(tmp_path / "out"), use_cpu=True, use_vllm=True))
    trainer = grpo_trainer(
        "vllm",
        model=model,
        reward_funcs=[reward_function(run.reward)],
        args=args,
        train_dataset=Dataset.from_list(build_rows(run)),
        processing_class=tokenizer,
        peft_config=LoraConfig(**lora_kwargs(run)),
        rollout_func=rollout,
        callbacks=[Logs()],
    )
    trainer.train()
    return trainer, Logs.rows, Rollout.outputs


def test_grpo_trains_through_vllm_colocate_with_importance_ratios_near_one(tiny_model, tmp_path, monkeypatch):
    """Before the rollout returned the engine's log-probabilities this crashed in TRL's
    correction (`Tensor - NoneType`). The stand-in samples from the weights TRL synced into
    it, so every ratio of trainer to engine probability is 1 up to float error, also at the
    second step, after the adapter moved and was merged into the engine."""
    import torch

    run = _run(tiny_model)
    trainer, logs, outputs = _train_through_vllm(run, tmp_path, monkeypatch, tiny_model)

    assert trainer.vllm_importance_sampling_mode == "token_truncate"
    steps = [row for row in logs if "sampling/importance_sampling_ratio/mean" in row]
    assert len(steps) == 2
    for row in steps:
        assert abs(row["sampling/importance_sampling_ratio/mean"] - 1) < 1e-3, row
        assert row["sampling/importance_sampling_ratio/min"] > 0.99, row
        assert row["sampling/importance_sampling_ratio/max"] < 1.01, row
    moved = [p for name, p in trainer.model.named_parameters() if "lora_B" in name]
    assert moved and any(p.abs().max() > 0 for p in moved), "the adapter moved, so step 2 synced new weights"
    for out in outputs:
        for ids, mask, logprobs in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
            assert len(logprobs) == len(ids) == len(mask)
            assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
            model_logprobs = torch.tensor([lp for lp, m in zip(logprobs, mask, strict=True) if m == 1])
            assert (model_logprobs <= 0).all() and (model_logprobs < 0).any()


def test_training_a_bf16_model_keeps_its_base_and_syncs_base_plus_scaled_update(
    tiny_model, tmp_path, monkeypatch
):
    """Two GRPO steps on the bf16 model through TRL's trainer and weight sync: the trained
    model's base weights stay bit-identical to the loaded ones (TRL's own merge and unmerge
    change them, TRL issue 6688), and a sync of the trained adapter through TRL's
    `sync_weights` gives the engine `base + alpha / r · B @ A` up to bf16 rounding."""
    import torch
    from transformers import AutoModelForCausalLM

    run = _run(tiny_model)
    trainer, _, _ = _train_through_vllm(run, tmp_path, monkeypatch, tiny_model, dtype=torch.bfloat16)
    loaded = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.bfloat16).state_dict()

    params = dict(trainer.model.named_parameters())
    for name, param in params.items():
        if "lora_" not in name:
            assert torch.equal(
                param, loaded[name.removeprefix("base_model.model.").replace(".base_layer", "")]
            ), name
    trainer.vllm_generation.sync_weights()
    engine = dict(trainer.vllm_generation.llm.network.named_parameters())
    scale = run["lora_alpha"] / run["lora_r"]
    merged = [name for name in params if name.endswith(".base_layer.weight")]
    assert merged, "LoRA wraps the targeted projections"
    for name in merged:
        lora_a = params[name.replace("base_layer", "lora_A.default")]
        lora_b = params[name.replace("base_layer", "lora_B.default")]
        assert lora_b.abs().max() > 0, f"{name}: the adapter moved"
        vllm_name = name.removeprefix("base_model.model.").replace(".base_layer", "")
        expected = loaded[vllm_name].float() + scale * (lora_b.detach().float() @ lora_a.detach().float())
        torch.testing.assert_close(engine[vllm_name], expected, rtol=2**-8 * (1 + 1e-3), atol=0)


def test_without_the_engines_logprobs_trls_correction_crashes(tiny_model, tmp_path, monkeypatch):
    """The crash the rollout's log-probabilities fix, reproduced through the same trainer path:
    TRL's importance-sampling correction subtracts the rollout's log-probabilities from its own."""
    run = _run(tiny_model, max_steps=1, save_steps=1)
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for -: 'Tensor' and 'NoneType'"):
        _train_through_vllm(run, tmp_path, monkeypatch, tiny_model, without_logprobs=True)


def test_a_long_episode_keeps_within_the_engine_length_by_evaluations_budget_rule(
    tiny_model, tmp_path, monkeypatch
):
    """The engine holds `max_prompt_tokens + max_turn_tokens` tokens (vLLM refuses a longer
    prompt); the rollout summarises the oldest turns beyond the budget, as evaluation does, and
    the trained sequence ends where the summary begins while the episode plays on."""
    from transformers import AutoTokenizer

    from schemashift.train.dataset import build_rows

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    probe = _run(tiny_model)
    rendered = [
        tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        for row in build_rows(probe)
    ]
    opening = max(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in rendered)
    run = _run(tiny_model, max_steps=1, save_steps=1, max_prompt_tokens=opening + 600)
    trainer, logs, outputs = _train_through_vllm(run, tmp_path, monkeypatch, tiny_model)

    llm = trainer.vllm_generation.llm
    assert llm.max_model_len == engine_length(run)
    assert max(llm.prompts_seen) <= run["max_prompt_tokens"] + run["max_turn_tokens"]
    assert max(llm.prompts_seen) > opening + 600 - run["max_turn_tokens"], "the budget was reached"
    played = [row["model_tokens"] for row in trainer.rollout_func.drain()]
    trained = [sum(mask) for out in outputs for mask in out["env_mask"]]
    assert len(played) == len(trained)
    assert any(p > t for p, t in zip(played, trained, strict=True)), "an episode played past its sequence"
