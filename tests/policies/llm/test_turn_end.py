"""One end of turn for evaluation and training, read off any chat template.

The tiny model's tokenizer is re-dressed as other model families (Gemma's `<end_of_turn>`,
Llama 3's `<|eot_id|>`, Phi-3's `<|end|>`, a template that closes turns with plain text) whose
eos is not the turn end: evaluation, the warm start and the GRPO rollout must all stop there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from schemashift.policies.llm.turn_end import end_of_turn_ids, template_turn_end

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]

#: family -> (its special tokens, its chat template, the token after an assistant message)
FAMILIES = {
    "gemma": (
        ["<start_of_turn>", "<end_of_turn>"],
        "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
        "{% endfor %}{% if add_generation_prompt %}<start_of_turn>assistant\n{% endif %}",
        "<end_of_turn>",
    ),
    "llama3": (
        ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
        "{{ m['content'] }}<|eot_id|>{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
        "<|eot_id|>",
    ),
    "phi3": (
        ["<|user|>", "<|assistant|>", "<|system|>", "<|end|>"],
        "{% for m in messages %}{{ '<|' + m['role'] + '|>' }}\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
        "<|end|>",
    ),
    # a system turn is required: the first probe exchange raises, the second renders
    "system-first": (
        ["<|sys|>", "<|stop|>"],
        "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}"
        "{% for m in messages %}<|sys|>{{ m['role'] }}: {{ m['content'] }}<|stop|>{% endfor %}"
        "{% if add_generation_prompt %}<|sys|>assistant: {% endif %}",
        "<|stop|>",
    ),
}


def dressed(tiny_model: Path, family: str):
    """The tiny tokenizer with another family's template and turn end, and an eos that is not it."""
    from transformers import AutoTokenizer

    specials, template, _ = FAMILIES[family]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.add_special_tokens({"additional_special_tokens": specials, "eos_token": "<|family-eos|>"})
    tokenizer.chat_template = template
    return tokenizer


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_templates_own_turn_end_is_found(tiny_model: Path, family: str) -> None:
    tokenizer = dressed(tiny_model, family)
    turn_end = tokenizer.convert_tokens_to_ids(FAMILIES[family][2])
    assert template_turn_end(tokenizer) == turn_end
    assert end_of_turn_ids(tokenizer) == [tokenizer.eos_token_id, turn_end]


def test_the_tiny_models_turn_end_is_its_eos(tiny_model: Path) -> None:
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert end_of_turn_ids(tokenizer, GenerationConfig.from_pretrained(tiny_model)) == [im_end]


def test_a_plain_text_turn_end_leaves_the_eos_and_the_generation_config(tiny_model: Path) -> None:
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n\n{% endfor %}"
    assert template_turn_end(tokenizer) is None
    extra = tokenizer.convert_tokens_to_ids("<|im_start|>")
    config = GenerationConfig(eos_token_id=[tokenizer.eos_token_id, extra])
    assert end_of_turn_ids(tokenizer, config) == [tokenizer.eos_token_id, extra]


@pytest.mark.slow
def test_evaluation_warm_start_and_rollout_stop_at_one_turn_end(tiny_model: Path, tmp_path: Path) -> None:
    """A Gemma-dressed model: the evaluation engine, the GRPO rollout and the warm start's labels
    all end a turn at `<end_of_turn>`, which is neither its eos nor a Qwen token."""
    from transformers import AutoModelForCausalLM

    from schemashift.env.rulesets import get_ruleset
    from schemashift.policies import make_policy
    from schemashift.train.closed_loop import ClosedLoopRollout
    from schemashift.train.sft import encode_conversation

    tokenizer = dressed(tiny_model, "gemma")
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.resize_token_embeddings(len(tokenizer))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(tmp_path / "gemma-dressed")
    tokenizer.save_pretrained(tmp_path / "gemma-dressed")
    turn_end = tokenizer.convert_tokens_to_ids("<end_of_turn>")

    engine = make_policy(f"hf:{tmp_path / 'gemma-dressed'}", get_ruleset("legacy")).engine
    assert turn_end in engine.stop_ids
    rollout = ClosedLoopRollout(
        tokenizer, reward="v1", max_turn_tokens=16, generation_config=model.generation_config
    )
    assert rollout._stop_ids == set(engine.stop_ids)

    messages = [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]
    ids, labels = encode_conversation(tokenizer, messages, engine.stop_ids)
    trained = [token for token, label in zip(ids, labels, strict=True) if label != -100]
    assert trained[-1] == turn_end, "the warm start teaches the turn to end where evaluation stops it"
    assert tokenizer.decode(trained[:-1]).strip() == "done"
