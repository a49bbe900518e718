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
        "overrides": {"temperature": 1.5, "backend": "transformers"},  # the tiny model is sharp
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
    """The rollout's turn is what sampling softmax(logits / temperature) token by token from the
    whole sequence gives with the same generator: none of the model's own settings (penalties,
    top-k, top-p) applies, and the cached decoding computes what the full forward does."""
    import torch

    from schemashift.train.dataset import opening_messages

    run = _run(tiny_model)
    model, tokenizer, rollout = _rollout(tiny_model, run)
    text = tokenizer.apply_chat_template(
        opening_messages("v1", "customer_lookup", 10_000), add_generation_prompt=True, tokenize=False
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    decoder = rollout.decoder(model)
    turns = []
    for seed in range(3):
        generator = torch.Generator().manual_seed(seed)
        (turn,) = decoder.decode([ids], [generator])
        reference, sequence = [], list(ids)
        generator = torch.Generator().manual_seed(seed)
        with torch.inference_mode():
            while len(reference) < rollout.max_turn_tokens:
                logits = model(input_ids=torch.tensor([sequence])).logits[0, -1]
                probs = torch.softmax(logits / run["temperature"], -1)
                token = int(torch.multinomial(probs / probs.sum(), 1, generator=generator))
                reference.append(token)
                sequence.append(token)
                if token in decoder.stop_ids:
                    break
        assert turn == reference
        turns.append(turn)
    assert len({tuple(turn) for turn in turns}) > 1, "three seeds sampled one turn: not sampling"


def test_rollout_trl_and_evaluation_use_the_same_sampling_settings(tiny_model, tmp_path):
    from trl import GRPOConfig

    from schemashift.policies.llm.local import LocalModel

    run = _run(tiny_model)
    model, _, rollout = _rollout(tiny_model, run)
    sampling = sampling_kwargs(run)
    # the rollout's decoder applies the temperature and top-p; every other filter is off
    decoder = rollout.decoder(model)
    assert (decoder.temperature, decoder.top_p) == (sampling["temperature"], sampling["top_p"])
    assert (sampling["top_k"], sampling["min_p"], sampling["repetition_penalty"]) == (0, 0.0, 1.0)
    trl_args = GRPOConfig(**grpo_kwargs(run, str(tmp_path), use_cpu=True, use_vllm=True))
    assert {key: getattr(trl_args, key) for key in sampling} == sampling
    # evaluation's engine samples from softmax(logits / temperature) with top-p and nothing else
    evaluation = LocalModel(str(tiny_model), temperature=run["temperature"]).generation()
    assert (evaluation["temperature"], evaluation["top_p"]) == (sampling["temperature"], sampling["top_p"])
