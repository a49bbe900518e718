"""What a run is, as the trainer builds and records it: the adapter drawn from the run's seed on
every stack, gradient checkpointing as the stack installed it after every rollout, the chat
template and the quantisation that actually ran recorded, and evaluation refusing a checkpoint
under another template."""

from __future__ import annotations

import json
import sys
import types

import pytest

from schemashift.runs.contract import resolve_run

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]


def _run(tiny_model, **overrides):
    spec = {
        "base_model": str(tiny_model),
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": {"lora_target_modules": ["q_proj", "v_proj"], "backend": "transformers", **overrides},
    }
    return resolve_run({"train": {"runs": {"r": spec}}}, "r")


def _lora_a(model):
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_A" in name}


def test_the_adapter_is_drawn_from_the_runs_seed_whatever_ran_before(tiny_model, tmp_path):
    import torch

    from schemashift.train.trainer import adapted_model

    first, _ = adapted_model(_run(tiny_model, seed=7), "transformers", True, tmp_path / "a")
    torch.rand(1000)  # another consumer of the global generator in between
    again, _ = adapted_model(_run(tiny_model, seed=7), "transformers", True, tmp_path / "b")
    other, _ = adapted_model(_run(tiny_model, seed=8), "transformers", True, tmp_path / "c")
    a, b, c = _lora_a(first), _lora_a(again), _lora_a(other)
    assert a and a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[name], b[name]) for name in a), "the same seed draws the same adapter"
    assert not all(torch.equal(a[name], c[name]) for name in a), "another seed draws another adapter"


def test_unsloths_adapter_gets_the_runs_seed(tiny_model, tmp_path, monkeypatch):
    """Unsloth's get_peft_model seeds from its own fixed random_state unless given one; a stand-in
    module (Unsloth needs a GPU) records what the trainer passes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from schemashift.train.trainer import adapted_model

    calls = {}

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(name, **kwargs):
            calls["load"] = kwargs
            return AutoModelForCausalLM.from_pretrained(name), AutoTokenizer.from_pretrained(name)

        @staticmethod
        def get_peft_model(model, **kwargs):
            calls["peft"] = kwargs
            return model

    monkeypatch.setitem(sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FastLanguageModel))
    adapted_model(_run(tiny_model, seed=11), "unsloth", False, tmp_path)
    assert calls["peft"]["random_state"] == 11


def test_a_rollout_leaves_the_stacks_gradient_checkpointing_in_place(tiny_model, tmp_path):
    """TRL's unwrap re-enables checkpointing with Hugging Face's function; the function a stack
    installed (here a marked one) must be the one the next training step uses. The rollout is
    called as TRL calls it, with TRL's real unwrap and accelerate's real Accelerator; the trainer
    is the namespace of the attributes the rollout reads, because a GRPOTrainer enables Hugging
    Face's checkpointing itself when training starts, before its first rollout, which leaves no
    point at which to install a marked function."""
    import functools

    import torch.utils.checkpoint
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from schemashift.train.closed_loop import ClosedLoopRollout
    from schemashift.train.dataset import build_rows

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    installed = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)
    model.gradient_checkpointing_enable()
    for module in model.modules():
        if getattr(module, "gradient_checkpointing", False):
            module._gradient_checkpointing_func = installed
    accelerator = Accelerator(cpu=True)
    trainer = types.SimpleNamespace(
        model=model,
        model_wrapped=model,
        accelerator=accelerator,
        use_vllm=False,
        args=types.SimpleNamespace(ds3_gather_for_generation=True, gradient_checkpointing_kwargs=None),
    )
    run = _run(tiny_model, max_turns=None, dataset_size=1, seeds=[10000], scenarios=["customer_lookup"])
    rollout = ClosedLoopRollout(tokenizer, reward="v1", max_turn_tokens=16, temperature=0)
    rollout([build_rows(run)[0]["prompt"]], trainer)
    switched = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False)]
    assert switched, "checkpointing is still on"
    assert all(m._gradient_checkpointing_func is installed for m in switched)


def test_the_manifest_records_the_template_and_the_quantisation_that_ran(tiny_model, tmp_path):
    from schemashift.lineage import chat_template_sha256
    from schemashift.train.tiny import CURRICULUM, training_seeds
    from schemashift.train.trainer import EFFECTIVE_SETTINGS, train

    overrides = {
        "max_steps": 1,
        "save_steps": 1,
        "num_generations": 2,
        "gradient_accumulation_steps": 2,
        "max_turn_tokens": 32,
        "scenarios": list(CURRICULUM["v1"]),
        "seeds": training_seeds(["v1"])["v1"][:1],
        "dataset_size": 2,
        "load_in_4bit": True,
    }
    config = {
        "train": {
            "runs": {
                "r": {
                    "base_model": str(tiny_model),
                    "ruleset": "v1",
                    "split": "train",
                    "reward": "v1",
                    "overrides": {"backend": "transformers", **overrides},
                }
            }
        }
    }
    train(config, "r", tmp_path)
    manifest = json.loads((tmp_path / "checkpoint-1" / "manifest.json").read_text())
    template = (tiny_model / "chat_template.jinja").read_text()
    assert manifest["settings"]["load_in_4bit"] is True, "what was asked"
    assert manifest["quantization"] is None, "what ran: no bitsandbytes on a CPU"
    assert manifest["chat_template_sha256"] == chat_template_sha256(template)
    settings = json.loads((tmp_path / EFFECTIVE_SETTINGS).read_text())
    assert settings["quantization"] is None
    assert settings["memory_estimate_gib"]["peak"] > settings["memory_estimate_gib"]["weights"] > 0


def test_evaluation_refuses_a_checkpoint_trained_under_another_template(tiny_model, tmp_path):
    from schemashift.env.rulesets import get_ruleset
    from schemashift.lineage import chat_template_sha256
    from schemashift.policies import make_policy
    from schemashift.train.checkpoints import write_manifest

    adapter = _lora_checkpoint(tiny_model, tmp_path / "checkpoint-1")
    write_manifest(adapter, 1, train_run="r", chat_template_sha256="0" * 64)
    with pytest.raises(ValueError, match="another"):
        make_policy(f"hf:{tiny_model}@{adapter}", get_ruleset("v1"), device="cpu")
    same = chat_template_sha256((tiny_model / "chat_template.jinja").read_text())
    write_manifest(adapter, 1, train_run="r", chat_template_sha256=same)
    assert make_policy(f"hf:{tiny_model}@{adapter}", get_ruleset("v1"), device="cpu").checkpoint_step == 1


def _lora_checkpoint(tiny_model, folder):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model), LoraConfig(r=2, target_modules=["q_proj"])
    )
    model.save_pretrained(folder)
    return folder


def test_the_quantisation_is_read_off_the_loaded_model(tiny_model):
    """What a quantising loader leaves on a model: bitsandbytes' flags, or a config's
    `quantization_config` (as a dict or an object with `quant_method`)."""
    import types

    from transformers import AutoModelForCausalLM

    from schemashift.train.trainer import effective_quantization

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert effective_quantization(model) is None
    model.config.quantization_config = {"quant_method": "gptq", "bits": 4}
    assert effective_quantization(model) == "gptq"
    model.config.quantization_config = types.SimpleNamespace(quant_method=types.SimpleNamespace(value="awq"))
    assert effective_quantization(model) == "awq"
    model.is_loaded_in_4bit = True
    assert effective_quantization(model) == "bitsandbytes-4bit"
