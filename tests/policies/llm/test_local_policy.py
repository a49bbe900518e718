"""The hf: policy with the tiny model: valid actions, batched = sequential, adapters, token counts,
seeded sampling and the response cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.policies.llm.format import Conversation, action_text
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.runner import SweepContext, cells, run_sweep, run_sweep_batched

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(600)]

LEGACY = get_ruleset("legacy")
#: the per-turn token limit the tests play with
MAX_NEW_TOKENS = 128
ALL_CELLS = cells(["legacy"], LEGACY.scenario_ids(), [0])


def policy(model: Path | str, **options):
    options.setdefault("max_new_tokens", MAX_NEW_TOKENS)
    return make_policy(f"hf:{model}", LEGACY, **options)


def context(p) -> SweepContext:
    return SweepContext(
        "test", p.name, harness=p.harness, base_model=p.base_model, generation_config=p.generation_config()
    )


def without_timing(result) -> tuple:
    record = {k: v for k, v in result.record.items() if k != "wall_s"}
    return record, result.drifts, result.trajectory


def test_the_longest_oracle_action_fits_the_turn_limit(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    lengths = [
        len(tokenizer(action_text(action)).input_ids) + 1  # + the end-of-turn token
        for scenario in LEGACY.scenario_ids()
        for seed in (0, 1)
        for action in LEGACY.solution(LEGACY.build_task(scenario, seed))
    ]
    assert max(lengths) <= MAX_NEW_TOKENS


def test_the_tiny_model_mostly_emits_schema_valid_actions(tiny_model: Path) -> None:
    p = policy(tiny_model)
    results = run_sweep_batched(InProcessBackend, p, ALL_CELLS, context(p), batch_size=len(ALL_CELLS))
    steps = [step for r in results for step in r.trajectory["steps"]]
    assert all(r.record["status"] == "graded" for r in results)
    valid = [s for s in steps if "invalid" not in s and s["action"].get("type") != "invalid"]
    assert len(valid) / len(steps) >= 0.5, [s.get("text") for s in steps]
    # every step keeps the raw model text; failures keep it as `raw` too
    assert all(isinstance(s["text"], str) for s in steps)
    assert all(s["raw"] == s["text"] for s in steps if "raw" in s)
    assert sum(r.record["parse_failures"] for r in results) == len(steps) - len(valid)


def test_batched_and_sequential_play_agree_exactly_in_float64(tiny_model: Path) -> None:
    p = policy(tiny_model, dtype="float64")
    some = ALL_CELLS[::2]
    batched = run_sweep_batched(InProcessBackend, p, some, context(p), batch_size=len(some))
    sequential = run_sweep(InProcessBackend(), p, some, context(p))
    for one, other in zip(batched, sequential, strict=True):
        assert without_timing(one) == without_timing(other)


def template_ids(engine, messages) -> list[int]:
    """The prompt's token ids straight through the chat template (no cached pieces)."""
    return engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)[
        "input_ids"
    ]


def greedy_reference(network, engine, ids: list[int]):
    """transformers' own greedy decode of one prompt, with the engine's stop and pad ids."""
    import torch

    return network.generate(
        input_ids=torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=MAX_NEW_TOKENS,
        do_sample=False,
        eos_token_id=engine.stop_ids,
        pad_token_id=engine.pad_id,
    )[0, len(ids) :]


def test_token_counts_match_the_tokenizer_and_transformers_generate(tiny_model: Path) -> None:

    p = policy(tiny_model)
    engine = p.engine
    env = Environment(LEGACY)
    prompts = []
    for scenario in ("E1_onboard_new_hire", "M2_weekly_report"):
        prompts.append(Conversation.for_ruleset(LEGACY, env.reset(scenario, 0)).messages())
    completions = engine.generate(prompts, [0, 0])
    for messages, completion in zip(prompts, completions, strict=True):
        ids = template_ids(engine, messages)
        assert completion.tokens_in == len(ids)
        reference = greedy_reference(engine.network, engine, ids)
        assert completion.tokens_out == len(reference)
        assert completion.text == engine.tokenizer.decode(reference, skip_special_tokens=True)


def test_episode_token_columns_sum_the_turns(tiny_model: Path) -> None:
    p = policy(tiny_model)
    (result,) = run_sweep(InProcessBackend(), p, ALL_CELLS[:1], context(p))
    assert result.record["tokens_in"] > 0 and result.record["tokens_out"] > 0
    # legacy does not charge tokens, so the per-step charge is zero while the columns count them
    assert all(step["tokens_used"] == 0 for step in result.trajectory["steps"])
    generation = json.loads(result.record["generation_config"])
    assert generation["max_new_tokens"] == MAX_NEW_TOKENS and generation["do_sample"] is False
    assert generation["harness"] == "default" and result.record["base_model"] == str(tiny_model)


def test_a_peft_adapter_is_loaded_and_changes_the_outputs(tiny_model: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    config = LoraConfig(
        r=8, lora_alpha=64, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False
    )
    get_peft_model(base, config).save_pretrained(tmp_path / "adapter")
    plain, adapted = policy(tiny_model), policy(f"{tiny_model}@{tmp_path / 'adapter'}")
    assert adapted.adapter_sha256 is not None and plain.adapter_sha256 is None
    assert adapted.engine.identity() != plain.engine.identity()
    env = Environment(LEGACY)
    prompts = [Conversation.for_ruleset(LEGACY, env.reset(s, 0)).messages() for s in LEGACY.scenario_ids()]
    texts = [c.text for c in plain.engine.generate(prompts, [0] * len(prompts))]
    adapted_texts = [c.text for c in adapted.engine.generate(prompts, [0] * len(prompts))]
    assert texts != adapted_texts
    # in float32 the engine merges the adapter into the weights: it must decode what the
    # unmerged adapter decodes
    from peft import PeftModel

    base_again = AutoModelForCausalLM.from_pretrained(tiny_model)
    unmerged = PeftModel.from_pretrained(base_again, tmp_path / "adapter")
    engine = adapted.engine
    assert not isinstance(engine.network, PeftModel)
    for messages, text in zip(prompts, adapted_texts, strict=True):
        reference = greedy_reference(unmerged.eval(), engine, template_ids(engine, messages))
        assert text == engine.tokenizer.decode(reference, skip_special_tokens=True)


def test_sampling_is_seeded_by_prompt_and_sample_index(tiny_model: Path) -> None:
    # hot enough that the warm-started model's confident openings still vary between samples
    p = policy(tiny_model, temperature=2.0, seed=7, max_new_tokens=24)
    env = Environment(LEGACY)
    prompts = [
        Conversation.for_ruleset(LEGACY, env.reset(s, 0)).messages() for s in LEGACY.scenario_ids()[:3]
    ]
    first = [c.text for c in p.engine.generate(prompts, [0, 0, 0])]
    again = [c.text for c in p.engine.generate(prompts[::-1], [0, 0, 0])][::-1]  # other batch order
    other = [c.text for c in p.engine.generate(prompts, [1, 1, 1])]
    assert first == again
    assert first != other
    assert json.loads(p.generation_config())["do_sample"] is True


def test_a_rerun_replays_from_the_cache(tiny_model: Path, tmp_path: Path) -> None:
    from schemashift.policies.llm.cache import ResponseCache

    cache = tmp_path / "responses.sqlite"
    first = policy(tiny_model, cache=str(cache))
    played = run_sweep_batched(InProcessBackend, first, ALL_CELLS[:3], context(first), batch_size=3)
    first.close()
    stored = len(ResponseCache(cache))
    assert stored == sum(r.record["steps"] for r in played)
    second = policy(tiny_model, cache=str(cache))
    calls = []
    real_generate = second.engine.generate
    second.engine.generate = lambda prompts, *rest: (
        calls.append(len(prompts)) or real_generate(prompts, *rest)
    )
    replayed = run_sweep_batched(InProcessBackend, second, ALL_CELLS[:3], context(second), batch_size=2)
    second.close()
    assert calls == [] and len(ResponseCache(cache)) == stored
    for one, other in zip(played, replayed, strict=True):
        assert without_timing(one) == without_timing(other)


def _saved_adapter(tiny_model: Path, folder: Path) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(2)
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    config = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(folder)
    return folder


def test_a_checkpoint_names_its_run_and_step_from_its_manifest(tiny_model: Path, tmp_path: Path) -> None:
    """The adapter hash of a policy is the manifest's (one hash), and the run and step its rows
    carry are what the trainer's manifest says; an adapter changed after its manifest is refused."""
    from schemashift import lineage
    from schemashift.train.checkpoints import write_manifest

    checkpoint = _saved_adapter(tiny_model, tmp_path / "run_x" / "checkpoint-7")
    unindexed = policy(f"{tiny_model}@{checkpoint}")
    assert (unindexed.train_run, unindexed.checkpoint_step) == (None, None), "no manifest: unknown"
    manifest = write_manifest(checkpoint, 7, train_run="run_x", base_model=str(tiny_model))
    indexed = policy(f"{tiny_model}@{checkpoint}")
    assert indexed.adapter_sha256 == manifest["adapter_sha256"] == lineage.adapter_sha256(checkpoint)
    assert (indexed.train_run, indexed.checkpoint_step) == ("run_x", 7)
    plain = policy(tiny_model)
    assert (plain.train_run, plain.checkpoint_step, plain.adapter_sha256) == (None, 0, None)

    weights = checkpoint / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    with pytest.raises(ValueError, match="changed after it was saved"):
        policy(f"{tiny_model}@{checkpoint}")
