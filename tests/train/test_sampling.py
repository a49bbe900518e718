"""Sampling is the same in the rollout, in TRL's scoring and in evaluation: the run's
temperature and nothing else, whatever the model's own generation config ships."""

from __future__ import annotations

import pytest

from schemashift.runs.contract import resolve_run
from schemashift.train.arguments import grpo_kwargs, sampling_kwargs

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]


def _run(tiny_model):
    spec = {
        "base_model": str(tiny_model),
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": {"temperature": 0.8, "backend": "transformers"},
    }
    return resolve_run({"train": {"runs": {"r": spec}}}, "r")


def _rollout(tiny_model, run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from schemashift.train.closed_loop import ClosedLoopRollout

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    # what a released model may ship (Qwen2.5-Instruct: a repetition penalty, top-k, top-p)
    model.generation_config.update(
        do_sample=True,
        temperature=0.3,
        repetition_penalty=1.5,
        top_k=3,
        top_p=0.5,
        min_p=0.2,
        no_repeat_ngram_size=2,
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    rollout = ClosedLoopRollout(
        tokenizer,
        reward=run.reward,
        max_turn_tokens=24,
        temperature=run["temperature"],
        generation_config=model.generation_config,
    )
    return model, tokenizer, rollout


def test_the_rollout_samples_from_the_temperature_scaled_model_alone(tiny_model):
    """transformers fills every generation setting the rollout leaves unset from the model's
    generation config; the rollout's processed scores must be the logits over the temperature."""
    import torch

    from schemashift.train.dataset import opening_messages

    run = _run(tiny_model)
    model, tokenizer, rollout = _rollout(tiny_model, run)
    text = tokenizer.apply_chat_template(
        opening_messages("v1", "customer_lookup", 10_000), add_generation_prompt=True, tokenize=False
    )
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    torch.manual_seed(0)
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        generation_config=rollout.generation_config(),
        output_scores=True,
        output_logits=True,
        return_dict_in_generate=True,
    )
    assert len(out.scores) > 1
    for scores, logits in zip(out.scores, out.logits, strict=True):
        torch.testing.assert_close(
            torch.log_softmax(scores, -1), torch.log_softmax(logits / run["temperature"], -1)
        )


def test_rollout_trl_and_evaluation_use_the_same_sampling_settings(tiny_model, tmp_path):
    from trl import GRPOConfig

    from schemashift.policies.llm.local import LocalModel

    run = _run(tiny_model)
    _, _, rollout = _rollout(tiny_model, run)
    sampling = sampling_kwargs(run)
    config = rollout.generation_config()
    assert {key: getattr(config, key) for key in sampling} == sampling
    trl_args = GRPOConfig(**grpo_kwargs(run, str(tmp_path), use_cpu=True, use_vllm=True))
    assert {key: getattr(trl_args, key) for key in sampling} == sampling
    # evaluation's engine samples from softmax(logits / temperature) with top-p and nothing else
    evaluation = LocalModel(str(tiny_model), temperature=run["temperature"]).generation()
    assert (evaluation["temperature"], evaluation["top_p"]) == (sampling["temperature"], sampling["top_p"])
