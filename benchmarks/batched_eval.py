"""Lockstep batched evaluation versus one episode at a time, with a local model.

Plays the same cells (legacy scenarios x seeds) twice with the same `hf:` policy: batched, all
episodes in lockstep with one generation call per round (`run_sweep_batched`), and sequential,
one episode and one generation at a time (`run_sweep`). Prints episodes/min and generated
tokens/s of each, their ratio (target: batched >= 4x with the tiny model on CPU), and how many
steps chose the same action on both paths. No response cache: every turn is generated.

On CPU it uses the offline tiny model (built here unless --model is given). Where CUDA is
present it also builds, on the spot, a randomly initialised model of Qwen2.5-0.5B's shape (or
1.5B's with --gpu-shape 1.5b) with the tiny tokenizer and plays the same comparison in bf16;
untrained, it emits no valid action, so its episodes end after one turn of --max-new-tokens
tokens and the figures measure generation throughput.

    python benchmarks/batched_eval.py [--model DIR] [--episodes 32] [--max-new-tokens 128]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.runner import Cell, SweepContext, run_sweep, run_sweep_batched

_SHAPE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
)
#: Qwen2.5-0.5B's and Qwen2.5-1.5B's transformer shapes
GPU_SHAPES = {
    "0.5b": dict(zip(_SHAPE_KEYS, (896, 4864, 24, 14, 2), strict=True)),
    "1.5b": dict(zip(_SHAPE_KEYS, (1536, 8960, 28, 12, 2), strict=True)),
}


def episode_cells(count: int) -> list[Cell]:
    scenarios = get_ruleset("legacy").scenario_ids()
    return [Cell("legacy", scenarios[i % len(scenarios)], i // len(scenarios)) for i in range(count)]


def measure(label: str, model: str, episodes: int, max_new_tokens: int, **options) -> None:
    ruleset = get_ruleset("legacy")
    policy = make_policy(f"hf:{model}", ruleset, max_new_tokens=max_new_tokens, **options)
    context = SweepContext("bench", policy.name, generation_config=policy.generation_config())
    cell_list = episode_cells(episodes)
    run_sweep_batched(InProcessBackend, policy, cell_list[:2], context, batch_size=2)  # warm-up
    figures = {}
    plays = {}
    for mode in ("batched", "sequential"):
        started = time.perf_counter()
        if mode == "batched":
            results = run_sweep_batched(InProcessBackend, policy, cell_list, context, batch_size=episodes)
        else:
            results = run_sweep(InProcessBackend(), policy, cell_list, context)
        seconds = time.perf_counter() - started
        failed = [r.record["error"] for r in results if r.record["status"] != "graded"]
        if failed:
            raise SystemExit(f"{label} {mode}: infra errors: {failed[:3]}")
        tokens_out = sum(r.record["tokens_out"] for r in results)
        steps = sum(r.record["steps"] for r in results)
        figures[mode] = seconds
        plays[mode] = [[s.get("text") for s in r.trajectory["steps"]] for r in results]
        print(
            f"{label} {mode:>10}: {episodes} episodes, {steps} steps in {seconds:.2f} s = "
            f"{episodes / seconds * 60:.1f} episodes/min, {tokens_out / seconds:.1f} generated tokens/s"
        )
    pairs = [(a, b) for one, other in zip(plays["batched"], plays["sequential"], strict=True)
             for a, b in zip(one, other, strict=False)]  # fmt: skip
    same = sum(1 for a, b in pairs if a == b)
    ratio = figures["sequential"] / figures["batched"]
    print(f"{label} batched speed-up: {ratio:.2f}x (target >= 4x: {'ok' if ratio >= 4 else 'MISSED'})")
    print(f"{label} same model output on {same}/{len(pairs)} steps compared ({100 * same / len(pairs):.1f}%)")


def build_gpu_model(directory: Path, tiny: Path, shape: str) -> Path:
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        **GPU_SHAPES[shape],
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    print(f"gpu model: {shape} shape, {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M parameters")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: build the tiny model)")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--gpu-shape", choices=sorted(GPU_SHAPES), default="0.5b")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model
        if model is None:
            from schemashift.train.tiny import build_tiny_model

            model = str(Path(scratch) / "tiny")
            manifest = build_tiny_model(model)
            print(f"tiny model built: {manifest['steps']} steps in {manifest['seconds']:.0f} s")
        print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
        measure("cpu tiny", model, args.episodes, args.max_new_tokens, device="cpu")
        if torch.cuda.is_available():
            gpu_model = build_gpu_model(Path(scratch) / "gpu", Path(model), args.gpu_shape)
            label = f"cuda {args.gpu_shape} ({torch.cuda.get_device_name()})"
            measure(label, str(gpu_model), args.episodes, args.max_new_tokens, device="cuda")


if __name__ == "__main__":
    main()
