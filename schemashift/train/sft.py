"""Supervised warm-start on oracle trajectories rendered in the interaction format.

The oracle plays each (ruleset, scenario, seed); its episode becomes one multi-turn chat exactly
as a model policy would see it (`policies.llm.format.Conversation`), and the loss falls on the
assistant turns only (the action JSON and its end-of-turn token). A plain PyTorch loop trains
either the full model or a LoRA adapter; the result is saved with `save_pretrained`, so
`hf:OUT` (full) or `hf:BASE@OUT` (adapter) loads it. `schemashift sft` is the command.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.format import FORMAT_VERSION, template_request
from schemashift.policies.llm.harnesses import get_harness
from schemashift.policies.llm.turn_end import end_of_turn_ids
from schemashift.policies.oracle import Oracle
from schemashift.rollout.runner import Cell

Message = dict[str, Any]
#: the share of a supervised run spent warming up the learning rate: proportional, so that a short
#: warm start leaves its warmup (a fixed 10 steps held a 2-step run at a fifth of its rate); a
#: sixtieth keeps the tiny model's 600 steps at the 10 warmup steps it was measured with
WARMUP_RATIO = 1 / 60
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def oracle_conversation(ruleset: str, scenario: str, seed: int, harness: str = "default") -> list[Message]:
    """The oracle's episode as chat messages in `harness` (the tools harness: one call per turn),
    ending with its last action."""
    rs = get_ruleset(ruleset)
    env, oracle = Environment(rs), Oracle(rs)
    oracle.start_episode(Cell(ruleset, scenario, seed, 0))
    observation = env.reset(scenario, seed)
    entry = get_harness(harness)
    conversation = entry.conversation.for_ruleset(rs, observation)
    while not observation["done"]:
        action = oracle.act(observation)
        observation, _ = env.step(action)
        conversation.add_turn(entry.write_action(action), observation)
    return conversation.messages()[:-1]  # the answer to the final action is never trained on


def oracle_conversations(
    rulesets: Sequence[str],
    seeds: Iterable[int] | Mapping[str, Iterable[int]],
    scenarios: Sequence[str] | Mapping[str, Sequence[str] | None] | None = None,
    harness: str = "default",
) -> list[list[Message]]:
    """Distinct oracle conversations over rulesets x scenarios x seeds (duplicates dropped);
    `seeds` and `scenarios` may name each ruleset's own (seeds from its train split, say; no
    scenarios: all of them)."""
    shared = None if isinstance(seeds, Mapping) else list(seeds)
    seen, out = set(), []
    for name in rulesets:
        rs = get_ruleset(name)
        chosen = scenarios.get(name) if isinstance(scenarios, Mapping) else scenarios
        for scenario in chosen or rs.scenario_ids():
            for seed in shared if shared is not None else list(seeds[name]):
                messages = oracle_conversation(name, scenario, seed, harness)
                key = json.dumps(messages)
                if key not in seen:
                    seen.add(key)
                    out.append(messages)
    return out


def seen_tasks(
    rulesets: Sequence[str],
    seeds: Iterable[int] | Mapping[str, Iterable[int]],
    scenarios: Sequence[str] | Mapping[str, Sequence[str] | None] | None = None,
) -> list[dict[str, Any]]:
    """The tasks `oracle_conversations` learns from, as {ruleset, scenario, seed}: the report marks
    a subject evaluated on them. seed is None where the ruleset's seeds do not vary the task (every
    seed of such a scenario is the task it saw)."""
    shared = None if isinstance(seeds, Mapping) else list(seeds)
    tasks = []
    for name in rulesets:
        rs = get_ruleset(name)
        chosen = scenarios.get(name) if isinstance(scenarios, Mapping) else scenarios
        for scenario in chosen or rs.scenario_ids():
            drawn = shared if shared is not None else list(seeds[name])
            tasks += [
                {"ruleset": name, "scenario": scenario, "seed": seed if rs.seeds_vary_task else None}
                for seed in (drawn if rs.seeds_vary_task else drawn[:1])
            ]
    return tasks


def render_ids(tokenizer: Any, messages: Sequence[Message], generation_prompt: bool) -> list[int]:
    plain, tools = template_request(messages)
    encoded = tokenizer.apply_chat_template(
        plain, tools=tools, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False
    )
    if isinstance(encoded, dict) or hasattr(encoded, "input_ids"):
        encoded = encoded["input_ids"]
    return list(encoded)


def encode_conversation(
    tokenizer: Any, messages: Sequence[Message], stop_ids: Sequence[int]
) -> tuple[list, list]:
    """Token ids of the whole chat and labels that keep only the assistant turns (-100 elsewhere).

    An assistant turn's tokens are those between the prompt that asks for it (with the
    generation prompt) and its end-of-turn token, inclusive: what the model must generate.
    """
    ids = render_ids(tokenizer, messages, False)
    labels = [-100] * len(ids)
    for k, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        start = len(render_ids(tokenizer, messages[:k], True))
        end = len(render_ids(tokenizer, messages[: k + 1], False))
        if ids[:start] != render_ids(tokenizer, messages[:k], True):
            raise ValueError("the chat template does not render a conversation as a prefix of its extension")
        span = ids[start:end]
        stops = [i for i, token in enumerate(span) if token in stop_ids]
        if stops:
            end = start + stops[0] + 1
        labels[start:end] = ids[start:end]
    return ids, labels


@dataclass
class SftResult:
    steps: int
    first_loss: float
    last_loss: float
    seconds: float
    examples: int
    tokens: int


def to_training_device(model: Any, device: str | None = None) -> Any:
    """Move `model` to `device` (default: the GPU where there is one) and return that device; a
    quantised model stays where loading placed it (it cannot be moved)."""
    import torch

    if getattr(model, "is_quantized", False) or getattr(model, "is_loaded_in_4bit", False):
        return next(model.parameters()).device
    target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model.to(target)
    return target


def lr_factor(step: int, steps: int, warmup_ratio: float = WARMUP_RATIO) -> float:
    """The learning rate's multiplier at `step` of `steps`: linear warmup over `warmup_ratio` of
    the run (at least one step), then cosine decay to a tenth."""
    warmup = max(1, round(warmup_ratio * steps))
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def train_loop(
    model: Any,
    examples: Sequence[tuple[list[int], list[int]]],
    *,
    steps: int,
    lr: float,
    seed: int = 0,
    max_seconds: float | None = None,
    warmup_ratio: float = WARMUP_RATIO,
    log: Callable[[str], None] | None = None,
    device: str | None = None,
) -> SftResult:
    """Plain AdamW over single conversations (linear warmup over `warmup_ratio` of the steps,
    cosine decay, clipping at 1.0), on `device` (default: the GPU where there is one), wherever
    the model was loaded."""
    import torch

    if steps < 1 or not examples:
        raise ValueError("sft needs at least one step and one example")
    torch.manual_seed(seed)
    order = random.Random(seed)
    device = to_training_device(model, device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, steps, warmup_ratio))
    model.train()
    started = time.perf_counter()
    losses: list[float] = []
    tokens = 0
    indices: list[int] = []
    done = 0
    for step in range(steps):
        if not indices:
            indices = list(range(len(examples)))
            order.shuffle(indices)
        ids, labels = examples[indices.pop()]
        input_ids = torch.tensor([ids], device=device)
        target = torch.tensor([labels], device=device)
        loss = model(input_ids=input_ids, labels=target).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        loss = loss.detach()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        tokens += len(ids)
        done = step + 1
        if log is not None and (step % 25 == 0 or step == steps - 1):
            log(f"sft step {step + 1}/{steps} loss {losses[-1]:.4f}")
        if max_seconds is not None and time.perf_counter() - started > max_seconds:
            if log is not None:
                log(f"sft stopped at step {done}: time cap {max_seconds:.0f} s")
            break
    model.eval()
    tail = losses[-10:]
    return SftResult(
        steps=done,
        first_loss=losses[0],
        last_loss=sum(tail) / len(tail),
        seconds=time.perf_counter() - started,
        examples=len(examples),
        tokens=tokens,
    )


def sft(
    model_name: str,
    out: str | Path,
    *,
    rulesets: Sequence[str] = ("legacy",),
    seeds: Iterable[int] = range(5),
    scenarios: Sequence[str] | None = None,
    steps: int = 200,
    lr: float | None = None,
    lora: bool = False,
    lora_r: int = 16,
    seed: int = 0,
    max_seconds: float | None = None,
    device: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Warm-start `model_name` on oracle conversations and save it (or its LoRA adapter) to `out`.

    The directory appears complete or not at all (written next to it, then renamed)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    if tokenizer.chat_template is None:
        raise ValueError(f"model {model_name!r} has no chat template")
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_name, dtype=dtype).to(dev)
    return sft_model(
        model,
        tokenizer,
        out,
        base_model=model_name,
        rulesets=rulesets,
        seeds=seeds,
        scenarios=scenarios,
        steps=steps,
        lr=lr if lr is not None else (2e-4 if lora else 2e-5),
        lora=lora,
        lora_r=lora_r,
        seed=seed,
        max_seconds=max_seconds,
        log=log,
        device=str(dev),
    )


def _scenarios_manifest(scenarios: Sequence[str] | Mapping[str, Sequence[str] | None] | None) -> Any:
    if isinstance(scenarios, Mapping):
        return {name: list(chosen) if chosen else None for name, chosen in scenarios.items()}
    return list(scenarios) if scenarios else None


def sft_model(
    model: Any,
    tokenizer: Any,
    out: Path,
    *,
    base_model: str,
    rulesets: Sequence[str],
    seeds: Iterable[int] | Mapping[str, Iterable[int]],
    scenarios: Sequence[str] | Mapping[str, Sequence[str] | None] | None,
    steps: int,
    lr: float,
    lora: bool,
    lora_r: int = 16,
    seed: int = 0,
    max_seconds: float | None = None,
    log: Callable[[str], None] | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    seeds = (
        {name: list(values) for name, values in seeds.items()} if isinstance(seeds, Mapping) else list(seeds)
    )
    if lora:
        from peft import LoraConfig, get_peft_model

        names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        targets = [t for t in LORA_TARGETS if t in names]
        config = LoraConfig(r=lora_r, lora_alpha=2 * lora_r, lora_dropout=0.0, target_modules=targets)
        model = get_peft_model(model, config)
    conversations = oracle_conversations(rulesets, seeds, scenarios)
    stops = end_of_turn_ids(tokenizer, getattr(model, "generation_config", None))
    examples = [encode_conversation(tokenizer, messages, stops) for messages in conversations]
    result = train_loop(
        model, examples, steps=steps, lr=lr, seed=seed, max_seconds=max_seconds, log=log, device=device
    )
    manifest = {
        "kind": "lora" if lora else "full",
        "base_model": base_model,
        "format_version": FORMAT_VERSION,
        "rulesets": list(rulesets),
        "seeds": seeds,
        "scenarios": _scenarios_manifest(scenarios),
        "tasks": seen_tasks(rulesets, seeds, scenarios),
        "lr": lr,
        "lora_r": lora_r if lora else None,
        **result.__dict__,
    }
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    if partial.exists():
        shutil.rmtree(partial)
    model.save_pretrained(partial)
    if not lora:
        tokenizer.save_pretrained(partial)
    (partial / "sft.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if out.exists():
        out.rmdir()
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(partial, out)
    return manifest
