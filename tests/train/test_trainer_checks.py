"""What `schemashift train` refuses before it loads anything: a Hub push without a token, a GPU
stack without a GPU, an output folder with someone else's checkpoints."""

from __future__ import annotations

import pytest

from schemashift.train.backends import BackendUnavailable, cuda_available
from schemashift.train.checkpoints import write_manifest
from schemashift.train.trainer import TrainingError, train


def _config(**overrides):
    return {
        "train": {
            "runs": {
                "r": {
                    "base_model": "no/such-model",
                    "ruleset": "legacy",
                    "reward": "binary",
                    "overrides": overrides,
                }
            }
        }
    }


def test_a_hub_push_without_a_token_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    config = _config(push_to_hub=True, hub_model_id="org/schemashift-r", backend="transformers")
    with pytest.raises(TrainingError, match="HF_TOKEN is not set"):
        train(config, "r", tmp_path / "out")


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour on a machine without CUDA")
def test_a_gpu_stack_without_a_gpu_fails_before_loading_anything(tmp_path):
    with pytest.raises(BackendUnavailable, match="needs a CUDA GPU"):
        train(_config(backend="vllm"), "r", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_existing_checkpoints_need_resume(tmp_path):
    folder = tmp_path / "out" / "checkpoint-25"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    write_manifest(folder, 25)
    with pytest.raises(TrainingError, match="pass --resume"):
        train(_config(backend="transformers"), "r", tmp_path / "out")


def test_the_train_command_reports_config_errors_clearly(tmp_path, capsys):
    from schemashift.cli import main

    config = tmp_path / "config.yaml"
    config.write_text("train:\n  runs: {}\n")
    assert main(["train", "--config", str(config), "--run", "nope", "--out", str(tmp_path / "o")]) != 0
    assert "no training run 'nope'" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.timeout(300)
def test_an_engine_longer_than_the_models_positions_is_refused(tiny_model, tmp_path):
    """Unsloth would stretch RoPE to fit it (the trained model is then not the evaluated one)."""
    spec = _config(backend="transformers", max_prompt_tokens=4096, max_turn_tokens=128)
    spec["train"]["runs"]["r"]["base_model"] = str(tiny_model)
    with pytest.raises(TrainingError, match="exceeds the 4096 positions"):
        train(spec, "r", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_train_command_reads_a_json_run_config_as_json(tmp_path, monkeypatch):
    """The workflow's run-config.json writes a rate below 1e-4 as 5e-05, a string to YAML 1.1."""
    import json

    from schemashift.cli import main
    from schemashift.train import trainer

    seen = {}

    def capture(config, run_name, out, **kwargs):
        seen.update(config["train"]["runs"][run_name]["overrides"])
        raise TrainingError("stop here")

    monkeypatch.setattr(trainer, "train", capture)
    config = tmp_path / "run-config.json"
    config.write_text(json.dumps(_config(learning_rate=5e-05)))
    assert "5e-05" in config.read_text()
    main(["train", "--config", str(config), "--run", "r", "--out", str(tmp_path / "o")])
    assert seen["learning_rate"] == 5e-05
