"""Device check of GRPO training on the machine that is lent: one part per process, figures
printed, a non-zero exit on any failure. `scripts/device-check.sh run` runs every part in turn,
with what `.device/` carries installed (docs/training.md, "Device check").

    python benchmarks/train_gpu_smoke.py environment [--cpu]
    python benchmarks/train_gpu_smoke.py stack --stack transformers [--steps 3] [--model DIR] [--cpu]
    python benchmarks/train_gpu_smoke.py real-shape [--model DIR] [--cpu]
    python benchmarks/train_gpu_smoke.py weight-sync [--cpu]

- `environment`: the versions that will train, the GPU and its driver; fails on a driver older
  than torch's CUDA build needs (`train.backends.driver_problem`).
- `stack`: the tiny model trains on its own curriculum (v1 `customer_lookup` at its training
  seeds), so the rewards of a group differ and loss and gradient are not zero. A two-step
  supervised warm start, which must run on the training device, precedes GRPO (not on Unsloth,
  whose model arrives with its adapter: `sft_steps` 0 there). The run stops after `steps - 1`
  steps (a checkpoint per step), that checkpoint is evaluated (one episode through evaluation's
  `hf:` policy on the training device), then the run resumes to `steps`.
- `real-shape`: one GRPO step of a random-weight model of Qwen2.5-1.5B's shape (151,936-token
  logits, head dim 128, 28 layers, bf16; on a CPU `CPU_SHAPE`, the same mechanics at a width
  two cores train) with the tiny model's tokenizer; its seconds and peak memory against
  `train.memory`'s estimate for the longest sequence it trained.
- `weight-sync`: the vLLM stack's weight sync (`train.weight_sync`) on the device's kernels: a
  bf16 LoRA model of Qwen2.5-1.5B's projection shapes, 100 syncs with the adapter moving; TRL's
  in-place merge drifts the base, the out-of-place one must not, and must send base + s·BA.
Exit status: 0 passed, 1 a check failed, 2 the stack is absent or no CUDA (without --cpu).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

TURN_TOKENS = 128
EPISODES_PER_STEP = 4
SFT_STEPS = 2
#: Qwen2.5-1.5B-Instruct's shape (its config.json), the model of config.gpu.yaml's runs
QWEN25_15B = {
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
#: the CPU mode's stand-in: Qwen2.5-1.5B's head dim (128) and grouped attention at a width and
#: vocabulary two cores train in seconds; the mechanics are the same, the figures are not
CPU_SHAPE = {
    "hidden_size": 256,
    "intermediate_size": 1024,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 8192,
}
#: weight syncs of the merge check, and how far each LoRA element moves between two (an Adam
#: step at the runs' learning rates); bf16 keeps 8 significant bits
SYNCS = 100
ADAPTER_STEP = 1e-3
BF16_RTOL = 2**-8
#: the measured peak may exceed the estimate by this factor before the check fails
MEMORY_TOLERANCE = 1.5
#: tokens per turn of the real-shape step (a random model writes every turn to the limit)
REAL_SHAPE_TURN_TOKENS = 64
#: the stack check's sampling temperature. The warm-started tiny model replays its training tasks
#: almost deterministically (about 0.01 nats per token), so at 0.85 every episode of a group was
#: the same one with the same reward (v1 version 4's customer_lookup training seeds, solved at
#: 0.95-0.97). Measured on CPU with the check's own build (a warm start at its full rate): 1.0
#: gave reward spread 0.96, 0.97, 0.96 in its 3 steps; 1.3 and 1.6 none (samples leave the
#: format, every episode fails). A tuned value: a change to the warm start or the tasks moves it.
SAMPLING_TEMPERATURE = 1.0


def _config(model: Path, steps: int, stack: str) -> dict:
    from schemashift.train.tiny import CURRICULUM, training_seeds

    overrides = {
        "backend": stack,
        "max_steps": steps,
        "save_steps": 1,
        "num_generations": EPISODES_PER_STEP,
        "gradient_accumulation_steps": EPISODES_PER_STEP,
        "max_turn_tokens": TURN_TOKENS,
        "max_prompt_tokens": 4096 - TURN_TOKENS,
        "temperature": SAMPLING_TEMPERATURE,
        "scenarios": list(CURRICULUM["v1"]),
        "seeds": training_seeds(["v1"])["v1"],
        "dataset_size": 8,
        "learning_rate": 1e-3,
        "warmup_steps": 0,
        "load_in_4bit": False,
        "go_no_go_step": 1,
        # a short supervised warm start, which must run on the training device (Unsloth's model
        # arrives with its adapter, and the trainer refuses a warm start there)
        "sft_steps": 0 if stack == "unsloth" else SFT_STEPS,
        "sft_seeds": 1,
    }
    spec = {
        "base_model": str(model),
        "ruleset": "v1",
        "split": "train",
        "reward": "v1",
        "overrides": overrides,
    }
    return {"train": {"runs": {"check": spec}}}


def _lora_b(checkpoint: Path) -> dict:
    from safetensors.torch import load_file

    return {k: v for k, v in load_file(checkpoint / "adapter_model.safetensors").items() if "lora_B" in k}


def _evaluate(model: Path, checkpoint: Path, device: str) -> dict:
    """One episode of the checkpoint through evaluation's own policy, on the training device."""
    from schemashift.policies import make_policy
    from schemashift.rollout.backends import make_backend
    from schemashift.rollout.runner import Cell, SweepContext, play_episode
    from schemashift.train.tiny import CURRICULUM, training_seeds

    # the prompt and turn budgets come from the checkpoint's manifest: the run's own
    policy = make_policy(f"hf:{model}@{checkpoint}", "v1", device=device)
    cell = Cell("v1", CURRICULUM["v1"][0], training_seeds(["v1"])["v1"][0])
    result = play_episode(
        make_backend("inprocess"), policy, cell, SweepContext(sweep_id="device-check", policy="hf")
    )
    return result.record


def check(stack: str, model: Path, workdir: Path, steps: int, device: str) -> list[str]:
    """Run the check; returns the failures (empty: passed). Prints the figures."""
    from schemashift.train.trainer import EFFECTIVE_SETTINGS, train

    out = workdir / f"run-{stack}"
    failures = []
    started = time.perf_counter()
    train(_config(model, steps - 1, stack), "check", out)
    first = out / f"checkpoint-{steps - 1}"
    record = _evaluate(model, first, device)
    print(f"evaluated checkpoint-{steps - 1}: status {record['status']}, success {record.get('success')}")
    if record["status"] != "graded":
        failures.append(f"the evaluation of checkpoint-{steps - 1} ended {record['status']}")
    train(_config(model, steps, stack), "check", out, resume=True)
    total = time.perf_counter() - started

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    live = [row for row in rows if not row["superseded"]]
    if [row["step"] for row in live] != list(range(1, steps + 1)):
        failures.append(f"steps logged {[row['step'] for row in live]}, expected 1..{steps}")
    seconds = sorted(row["seconds_per_step"] for row in live)
    tokens = [row["completion_tokens"] * EPISODES_PER_STEP / row["seconds_per_step"] for row in live]
    peak = max((row["peak_gpu_mem_gb"] or 0) for row in live)
    spread = [round(row["reward_max"] - row["reward_min"], 3) for row in live]
    print(
        f"{stack}: median {seconds[len(seconds) // 2]:.2f} s/step, {sorted(tokens)[len(tokens) // 2]:.0f} "
        f"model tokens/s, peak GPU memory {peak:.2f} GiB, reward spread per step {spread}, "
        f"losses {[row['loss'] for row in live]}, grad norms {[row['grad_norm'] for row in live]}, "
        f"total {total:.0f} s"
    )
    if not any(spread):
        failures.append("no step had any reward spread (the check would train nothing)")
    if not any(row["loss"] for row in live) or not any(row["grad_norm"] for row in live):
        failures.append("loss or gradient norm was zero at every step")
    adapter = _lora_b(out / f"checkpoint-{steps}")
    if not any(float(t.abs().max()) > 0 for t in adapter.values()):
        failures.append("the adapter did not move")
    if not (out / "train.done.json").exists():
        failures.append("no train.done.json after the resumed run")
    if stack != "unsloth":
        warm = json.loads((out / "sft-adapter" / "sft.json").read_text())
        print(f"warm start: {warm['steps']} steps on {warm['device']}")
        if warm["device"].split(":")[0] != device:
            failures.append(f"the warm start ran on {warm['device']}, not {device}")
    settings = json.loads((out / EFFECTIVE_SETTINGS).read_text())
    estimate = settings["memory_estimate_gib"]["peak"]
    print(
        f"effective settings recorded for {settings['backend']}: optim {settings['settings']['optim']}, "
        f"quantization {settings['quantization']}, estimated peak {estimate:.2f} GiB"
    )
    return failures


def environment(cpu: bool) -> list[str]:
    """Print what will train here; the failures (a driver older than torch's CUDA build needs)."""
    import importlib.metadata
    import importlib.util
    import platform

    import torch

    from schemashift.train.backends import driver_problem, driver_version

    versions = []
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "pyarrow"):
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    print(f"python {platform.python_version()}; " + ", ".join(versions))
    for name in ("trl", "peft", "datasets"):
        spec = importlib.util.find_spec(name)
        print(f"{name} from {spec.origin if spec else 'nowhere'}")
    driver = driver_version()
    driver_text = ".".join(map(str, driver)) if driver else "none"
    print(f"torch CUDA build {torch.version.cuda}, NVIDIA driver {driver_text}")
    problem = driver_problem(torch.version.cuda, driver)
    if problem:
        return [problem]
    if not torch.cuda.is_available():
        return [] if cpu else ["no CUDA device visible to torch"]
    props = torch.cuda.get_device_properties(0)
    print(f"GPU {props.name}, {props.total_memory / 2**30:.1f} GiB, capability {props.major}.{props.minor}")
    return []


def _real_shape_model(tokenizer_dir: Path, out: Path, device: str) -> Path:
    """A random-weight model of Qwen2.5-1.5B's shape (`CPU_SHAPE`'s on a CPU) with the tiny
    model's tokenizer and template; built on the training device, in the dtype training loads."""
    import shutil

    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    shape = QWEN25_15B if device == "cuda" else {**QWEN25_15B, **CPU_SHAPE}
    config = Qwen2Config(
        **shape,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(dtype)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        if (tokenizer_dir / name).is_file():
            shutil.copy(tokenizer_dir / name, out / name)
    print(f"real-shape model: {sum(p.numel() for p in model.parameters()) / 1e9:.3f} B parameters, {dtype}")
    del model
    return out


def real_shape(tokenizer_dir: Path, workdir: Path, device: str) -> list[str]:
    """One GRPO step of the real-shape model; seconds and peak memory against the estimate."""
    from transformers import AutoTokenizer

    from schemashift.runs.contract import resolve_run
    from schemashift.train.memory import ModelShape, estimate_gib
    from schemashift.train.trainer import EFFECTIVE_SETTINGS, train

    model = _real_shape_model(tokenizer_dir, workdir / "real-shape-model", device)
    config = _config(model, 1, "transformers")
    overrides = config["train"]["runs"]["check"]["overrides"]
    overrides.update(sft_steps=0, max_turn_tokens=REAL_SHAPE_TURN_TOKENS)
    overrides["max_prompt_tokens"] = 8192 - REAL_SHAPE_TURN_TOKENS
    out = workdir / "run-real-shape"
    started = time.perf_counter()
    train(config, "check", out)
    seconds = time.perf_counter() - started
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    history = json.loads((out / "checkpoint-1" / "trainer_state.json").read_text())["log_history"]
    logged = next(entry for entry in history if "completions/max_length" in entry)
    run = resolve_run(config, "check")
    tokenizer = AutoTokenizer.from_pretrained(model)
    from schemashift.train.dataset import build_rows

    rendered = [
        tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        for row in build_rows(run)[:EPISODES_PER_STEP]
    ]
    prompt = max(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in rendered)
    longest = prompt + int(logged["completions/max_length"])
    settings = json.loads((out / EFFECTIVE_SETTINGS).read_text())
    estimate = estimate_gib(
        ModelShape.of(json.loads((model / "config.json").read_text())),
        weight_bytes=int(settings["memory_estimate_gib"]["weights"] * 2**30),
        dtype="bfloat16" if device == "cuda" else "float32",
        sequence_tokens=longest,
        rollout_episodes=EPISODES_PER_STEP,
        lora_rank=run["lora_r"],
        lora_targets=list(run["lora_target_modules"]),
        reference_adapter=run["beta"] != 0,
    )
    peak = row["peak_gpu_mem_gb"]
    print(
        f"real shape: 1 step in {row['seconds_per_step']:.1f} s ({seconds:.0f} s with loading), longest "
        f"sequence {longest} tokens, loss {row['loss']}, grad norm {row['grad_norm']}, model tokens "
        f"{row['completion_tokens']}"
    )
    print(
        "memory estimate (GiB): "
        + ", ".join(f"{key} {value:.2f}" for key, value in estimate.items())
        + (f"; measured peak {peak:.2f} GiB, {peak / estimate['peak']:.2f}x the estimate" if peak else "")
    )
    failures = []
    if row["step"] != 1:
        failures.append(f"the real-shape step logged step {row['step']}")
    if row["loss"] is None or row["loss"] != row["loss"]:
        failures.append(f"the real-shape step's loss is {row['loss']}")
    if peak is not None and peak > MEMORY_TOLERANCE * estimate["peak"]:
        failures.append(
            f"peak memory {peak:.2f} GiB exceeds {MEMORY_TOLERANCE}x the estimate {estimate['peak']:.2f} GiB"
        )
    return failures


def weight_sync(device: str, syncs: int = SYNCS) -> list[str]:
    """The vLLM weight sync's merge on the device's own kernels: a bf16 LoRA model of
    Qwen2.5-1.5B's projection shapes (r 16, alpha 32) whose adapter moves like training's between
    syncs. TRL's in-place merge and unmerge (peft's `merge_adapter`/`unmerge_adapter`) drifts the
    base; `weight_sync.merged_named_weights` must leave it bit-identical and hand the engine
    `base + scale * B A` within bf16 rounding."""
    import torch
    from peft import LoraConfig, get_peft_model

    from schemashift.train.weight_sync import merged_named_weights

    hidden, inner = QWEN25_15B["hidden_size"], QWEN25_15B["intermediate_size"]
    if device != "cuda":
        hidden, inner = CPU_SHAPE["hidden_size"], CPU_SHAPE["intermediate_size"]

    def model():
        torch.manual_seed(0)
        layers = torch.nn.ModuleDict(
            {
                "q_proj": torch.nn.Linear(hidden, hidden),
                "gate_proj": torch.nn.Linear(hidden, inner, bias=False),
                "down_proj": torch.nn.Linear(inner, hidden, bias=False),
            }
        )
        for layer in layers.values():
            torch.nn.init.normal_(layer.weight, std=0.02)
        config = LoraConfig(r=16, lora_alpha=32, target_modules=list(layers))
        return get_peft_model(layers.to(device=device, dtype=torch.bfloat16), config)

    def move(peft_model, generator):
        with torch.no_grad():
            for name, param in peft_model.named_parameters():
                if "lora_" in name:
                    step = torch.randn(param.shape, generator=generator, device="cpu").to(param.device)
                    param.add_(ADAPTER_STEP * step)

    def bases(peft_model):
        return {n: p.detach().clone() for n, p in peft_model.named_parameters() if "lora_" not in n}

    def drift(before, after):
        changed = sum(int((before[n] != after[n]).sum()) for n in before)
        return changed / sum(t.numel() for t in before.values())

    figures, failures = {}, []
    for path in ("trl-in-place", "out-of-place"):
        peft_model, generator = model(), torch.Generator().manual_seed(1)
        pristine = bases(peft_model)
        started = time.perf_counter()
        worst = 0.0
        for _ in range(syncs):
            move(peft_model, generator)
            if path == "trl-in-place":
                peft_model.merge_adapter()
                sent = {
                    n.removeprefix("base_model.model.").replace(".base_layer", ""): p.detach().clone()
                    for n, p in peft_model.named_parameters()
                    if "lora_" not in n
                }
                peft_model.unmerge_adapter()
            else:
                sent = dict(merged_named_weights(peft_model))
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        with torch.no_grad():
            for name, layer in peft_model.base_model.model.items():
                base = pristine[f"base_model.model.{name}.base_layer.weight"].float()
                delta = layer.lora_B["default"].weight.float() @ layer.lora_A["default"].weight.float()
                wanted = base + layer.scaling["default"] * delta
                got = sent[f"{name}.weight"].float()
                bound = BF16_RTOL * wanted.abs() + 1e-30
                worst = max(worst, float(((got - wanted).abs() / bound).max()))
        figures[path] = {"changed": drift(pristine, bases(peft_model)), "worst": worst, "seconds": seconds}
        print(
            f"weight sync {path}: {syncs} syncs in {seconds:.2f} s, {figures[path]['changed']:.2%} of base "
            f"elements changed, worst sent weight {worst:.2f}x the bf16 rounding bound"
        )
    ours = figures["out-of-place"]
    if ours["changed"] != 0:
        failures.append(f"the out-of-place sync changed {ours['changed']:.2%} of the base weights")
    if ours["worst"] > 1 + 1e-3:
        failures.append(f"the out-of-place sync sent weights {ours['worst']:.2f}x the bf16 bound off")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    env = parts.add_parser("environment", help="versions, GPU and driver")
    stack = parts.add_parser("stack", help="train, save, evaluate and resume the tiny model on one stack")
    stack.add_argument("--stack", required=True, choices=("transformers", "unsloth", "vllm"))
    stack.add_argument("--steps", type=int, default=3)
    shape = parts.add_parser("real-shape", help="one GRPO step at Qwen2.5-1.5B's shape")
    sync = parts.add_parser("weight-sync", help="the vLLM weight sync's merge on the device's kernels")
    for part in (env, stack, shape, sync):
        part.add_argument("--cpu", action="store_true", help="run on the CPU (transformers only)")
    for part in (stack, shape):
        part.add_argument("--model", default=None, help="a tiny model built already (default: built here)")
        part.add_argument("--workdir", default=None, help="keep models and runs here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.part == "stack" and args.steps < 2:
        parser.error("--steps must be at least 2 (one step before the resume, one after)")

    from schemashift.train.backends import BackendUnavailable, cuda_available, select_backend

    if args.part == "environment":
        return _verdict("environment", environment(args.cpu))
    if args.part == "weight-sync":
        import torch

        if not torch.cuda.is_available() and not args.cpu:
            print("no CUDA here: the weight sync not checked (--cpu checks it on the CPU)")
            return 2
        return _verdict("weight-sync", weight_sync("cuda" if torch.cuda.is_available() else "cpu"))
    wanted = args.stack if args.part == "stack" else "transformers"
    if not cuda_available() and not (args.cpu and wanted == "transformers"):
        print(f"no CUDA here: {wanted} not checked (--cpu checks the transformers stack on the CPU)")
        return 2
    try:
        select_backend(wanted)
    except BackendUnavailable as exc:
        print(f"{wanted} absent: {exc}")
        return 2
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(
        f"device: {torch.cuda.get_device_name(0) if device == 'cuda' else 'CPU'}, torch {torch.__version__}"
    )

    from schemashift.train.tiny import cached_tiny_model

    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(args.workdir) if args.workdir else Path(scratch)
        model = Path(args.model) if args.model else cached_tiny_model(workdir)
        try:
            if args.part == "stack":
                failures = check(args.stack, model, workdir, args.steps, device)
            else:
                failures = real_shape(model, workdir, device)
        except Exception as exc:  # noqa: BLE001 - any failure is the check's result
            failures = [f"{type(exc).__name__}: {exc}"]
    return _verdict(wanted if args.part == "stack" else args.part, failures)


def _verdict(name: str, failures: list[str]) -> int:
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"{name}: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
