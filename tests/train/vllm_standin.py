"""A stand-in for vLLM's offline engine (vLLM needs a GPU and is not installed in CI).

It has the parts of vLLM's API that TRL's colocate generation (`trl.generation.vllm_generation`)
uses: `LLM.generate(prompts, sampling_params, *, use_tqdm)` with token prompts, returning
`RequestOutput`s whose `CompletionOutput`s carry the sampled ids and, with `logprobs=0`, one
`{token_id: Logprob(logprob, rank, decoded_token)}` per token (processed log-probabilities: after
the temperature, as TRL starts vLLM with `logprobs_mode="processed_logprobs"`); `SamplingParams`;
`llm_engine.model_config.max_model_len`, with vLLM's refusal of a longer prompt;
`llm_engine.model_executor.driver_worker.model_runner.model.load_weights` for TRL's weight sync;
`reset_prefix_cache`. It samples from its own copy of the base model, so the log-probabilities
it reports are those of the weights TRL last synced into it. `RecordingEngine` has the weight
loading alone, and records what each sync sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from trl.generation.vllm_generation import VLLMGeneration


@dataclass
class SamplingParams:
    """vLLM's sampling parameters (the fields TRL sets). Filters other than the temperature are
    refused unless neutral: the stand-in implements only what the trainer uses."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    max_tokens: int | None = 16
    logprobs: int | None = None
    seed: int | None = None
    stop_token_ids: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        neutral = (self.top_p, self.top_k in (0, -1), self.min_p, self.repetition_penalty)
        if neutral != (1.0, True, 0.0, 1.0) or self.n != 1:
            raise NotImplementedError(f"the stand-in engine samples with the temperature only, got {self}")


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: Any
    outputs: list[CompletionOutput]
    finished: bool = True


class _Weights:
    """`model_runner.model`: vLLM's model, loading (name, tensor) pairs by their HF names."""

    def __init__(self, network: Any) -> None:
        self.network = network

    def load_weights(self, weights) -> set[str]:
        params = dict(self.network.named_parameters())
        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor.to(params[name].dtype))
                loaded.add(name)
        return loaded


class LLM:
    """vLLM's `LLM`, over a transformers copy of the model (float32, CPU)."""

    def __init__(self, model: str, *, max_model_len: int | None = None, seed: int = 0, **_: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.network = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        positions = self.network.config.max_position_embeddings
        self.max_model_len = max_model_len or positions
        eos = self.network.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos])
        self.generator = torch.Generator().manual_seed(seed)
        runner = SimpleNamespace(model=_Weights(self.network))
        self.llm_engine = SimpleNamespace(
            model_config=SimpleNamespace(max_model_len=self.max_model_len),
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)),
        )
        self.prompts_seen: list[int] = []

    def reset_prefix_cache(self) -> bool:
        return True

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None, priority=None):
        params = sampling_params or SamplingParams()
        return [self._one(str(i), prompt["prompt_token_ids"], params) for i, prompt in enumerate(prompts)]

    def _one(self, request_id: str, prompt: list[int], params: SamplingParams) -> RequestOutput:
        if len(prompt) > self.max_model_len:
            raise ValueError(
                f"The decoder prompt (length {len(prompt)}) is longer than the maximum model length "
                f"of {self.max_model_len}."
            )
        self.prompts_seen.append(len(prompt))
        room = self.max_model_len - len(prompt)
        limit = min(params.max_tokens or room, room)
        tokens, logprobs, total, finish = [], [], 0.0, "length"
        with torch.no_grad():
            out = self.network(input_ids=torch.tensor([prompt]), use_cache=True)
            for _ in range(limit):
                logits = out.logits[0, -1].float()
                if params.temperature > 0:
                    processed = torch.log_softmax(logits / params.temperature, dim=-1)
                    token = int(torch.multinomial(processed.exp(), 1, generator=self.generator))
                else:
                    processed = torch.log_softmax(logits, dim=-1)
                    token = int(processed.argmax())
                value = float(processed[token])
                rank = int((processed > processed[token]).sum()) + 1
                tokens.append(token)
                total += value
                if params.logprobs is not None:
                    logprobs.append({token: Logprob(value, rank, self.tokenizer.decode([token]))})
                if token in self.eos:
                    finish = "stop"
                    break
                out = self.network(
                    input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True
                )
        completion = CompletionOutput(
            index=0,
            text=self.tokenizer.decode(tokens),
            token_ids=tokens,
            cumulative_logprob=total if params.logprobs is not None else None,
            logprobs=logprobs if params.logprobs is not None else None,
            finish_reason=finish,
        )
        return RequestOutput(request_id, None, list(prompt), None, [completion])


class RecordingEngine:
    """vLLM's weight-loading API alone (`llm_engine...model_runner.model.load_weights`,
    `reset_prefix_cache`): keeps a copy of the last tensor received under each name, as vLLM
    copies it into its own weights, and counts the prefix-cache resets."""

    def __init__(self) -> None:
        self.received: dict[str, torch.Tensor] = {}
        self.prefix_cache_resets = 0
        runner = SimpleNamespace(model=SimpleNamespace(load_weights=self.load_weights))
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
        )

    def load_weights(self, weights) -> set[str]:
        loaded = set()
        for name, tensor in weights:
            self.received[name] = tensor.detach().clone()
            loaded.add(name)
        return loaded

    def reset_prefix_cache(self) -> bool:
        self.prefix_cache_resets += 1
        return True


def recording_generation(model: Any) -> VLLMGeneration:
    """TRL's own `VLLMGeneration` over `model` on one CPU process, colocated with a
    `RecordingEngine`: `sync_weights` is TRL's code."""
    from accelerate import Accelerator

    class RecordingGeneration(VLLMGeneration):
        def _init_vllm(self):
            self.llm = RecordingEngine()
            self._llm_weights_sleeping = False

    return RecordingGeneration(model=model, accelerator=Accelerator(cpu=True), processing_class=None)


def colocated_generation(model_path: str):
    """TRL's own `VLLMGeneration`, starting the stand-in engine where it would start vLLM's (with
    the colocate arguments TRL passes); generation and weight sync are TRL's code."""

    class StandInGeneration(VLLMGeneration):
        def _init_vllm(self):
            if self.mode != "colocate":
                raise ValueError(f"the stand-in engine runs colocated only, not {self.mode!r}")
            self.llm = LLM(
                model_path,
                max_model_len=self.max_model_length,
                seed=self.accelerator.process_index // self.tensor_parallel_size,
            )
            self._llm_weights_sleeping = False

    return StandInGeneration
