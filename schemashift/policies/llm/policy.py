"""Model-backed policies: a model engine behind the interaction format, the parser and the cache.

`ModelPolicy` plays any number of episodes in lockstep (`start_slot` / `act_batch`, used by
`rollout.runner.run_sweep_batched`) and also one at a time through the ordinary Policy protocol
(`reset` / `act`). Each decision renders the slot's conversation, asks the engine for all
pending prompts at once (the response cache answers what it already holds), and parses each
output. An output with no action is handed on as its raw text, so the environment records it as
invalid (v1 consumes the step; legacy ends the episode as the original harness did), and the
decision says `parse_failed`. In the tools harness one output may hold several calls: each is a
decision of its own, taken in order at the slot's next rounds without asking the model again
(its harness's `read_turn`).

Engines: `LocalModel` (`hf:<model>[@<adapter>]`, batched generation) and `ApiModel`
(`openai:<model>`, concurrent requests to an OpenAI-compatible endpoint).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from schemashift.env.arms import DEFAULT_ARM
from schemashift.env.rulesets.base import Ruleset
from schemashift.policies.llm.completion import Completion
from schemashift.policies.llm.format import (
    FORMAT_VERSION,
    api_request,
    estimate_tokens,
    template_calls_tools,
)
from schemashift.policies.llm.harnesses import DEFAULT_HARNESS, get_harness

Message = dict[str, Any]


class Engine(Protocol):
    def identity(self) -> dict[str, Any]: ...

    def generation(self) -> dict[str, Any]: ...

    def count_tokens(self, messages: Sequence[Message]) -> int: ...

    def generate(
        self,
        prompts: Sequence[Sequence[Message]],
        sample_indices: Sequence[int],
        sessions: Sequence[Any] | None = None,
        arms: Sequence[str] | None = None,
    ) -> list[Completion | BaseException]: ...

    def forget(self, session: Any) -> None: ...


@dataclass
class Decision:
    """One episode's next action: the parsed action, or the raw text when nothing parsed."""

    action: Any
    usage: tuple[int, int] = (0, 0)
    parse_failed: bool = False
    text: str | None = None
    cached: bool = False
    error: BaseException | None = None


@dataclass
class _Slot:
    sample_index: int = 0
    #: the arm of the cell it plays (`env.arms`): part of the cache key and a local model's row seed
    arm: str = DEFAULT_ARM
    conversation: Any = None
    last_text: str | None = None
    #: the decisions of the latest turn not yet taken (the tools harness: its further calls)
    queued: list[Decision] = field(default_factory=list)
    #: the observations after each decision of the latest turn
    answers: list[dict[str, Any]] = field(default_factory=list)


class ModelPolicy:
    def __init__(
        self,
        name: str,
        engine: Engine,
        ruleset: Ruleset,
        *,
        harness: str = DEFAULT_HARNESS,
        cache: Any = None,
        max_prompt_tokens: int | None = None,
        base_model: str | None = None,
        adapter_sha256: str | None = None,
        train_run: str | None = None,
        checkpoint_step: int | None = None,
    ) -> None:
        self.name = name
        self.engine = engine
        self.ruleset = ruleset
        self.harness = harness
        self._harness = get_harness(harness)
        self.conversation_type = self._harness.conversation
        self.cache = cache
        self.max_prompt_tokens = max_prompt_tokens
        self.base_model = base_model
        self.adapter_sha256 = adapter_sha256
        #: what the weights are, as `schemashift.lineage.evaluated_identity` names them
        self.train_run, self.checkpoint_step = train_run, checkpoint_step
        self._tools, self._kinds = tuple(ruleset.tool_names), tuple(ruleset.drift_kinds)
        self._identity = engine.identity()
        self._generation = engine.generation()
        self._slots: dict[int, _Slot] = {}
        # the sequential Policy protocol's view of slot 0
        self.last_usage: tuple[int, int] | None = None
        self.last_parse_failed = False
        self.last_text: str | None = None

    def row_identity(self) -> dict[str, Any]:
        """What its rows say about the model (`rollout.runner.SweepContext` fields): the harness,
        the weights (base model, adapter hash, the training run and step its manifest records)
        and the decoding (`generation_config`)."""
        return {
            "harness": self.harness,
            "train_run": self.train_run,
            "base_model": self.base_model,
            "adapter_sha256": self.adapter_sha256,
            "checkpoint_step": self.checkpoint_step,
            "generation_config": self.generation_config(),
        }

    def generation_config(self) -> str:
        """The `generation_config` column: everything about decoding and prompting, as JSON."""
        config = {
            **self._generation,
            "harness": self.harness,
            "format_version": FORMAT_VERSION,
            "max_prompt_tokens": self.max_prompt_tokens,
        }
        return json.dumps(config, sort_keys=True)

    # -- lockstep ---------------------------------------------------------------------------------------
    def start_slot(self, slot: int, cell: Any = None) -> None:
        self._slots[slot] = _Slot(
            sample_index=getattr(cell, "sample_index", 0) if cell is not None else 0,
            arm=getattr(cell, "arm", DEFAULT_ARM) if cell is not None else DEFAULT_ARM,
        )
        self.engine.forget(slot)

    def act_batch(self, entries: Sequence[tuple[int, Any, dict[str, Any]]]) -> list[Decision]:
        """Decide for every (slot, cell, observation) at once. A slot whose latest turn still
        holds decisions (further calls of one tools-harness turn) takes the next one without
        asking the model; the turn joins the conversation once all of them ran."""
        ready: dict[int, Decision] = {}
        prompts, samples, arms, slots = [], [], [], []
        for slot, _cell, observation in entries:
            state = self._slots.setdefault(slot, _Slot())
            if state.conversation is None:
                state.conversation = self.conversation_type.for_ruleset(
                    self.ruleset,
                    observation,
                    max_prompt_tokens=self.max_prompt_tokens,
                    count_tokens=self.engine.count_tokens,
                )
            else:
                state.answers.append(observation)
                if state.queued:
                    ready[slot] = state.queued.pop(0)
                    continue
                state.conversation.add_turn(state.last_text or "", *state.answers)
                state.answers = []
            prompts.append(state.conversation.messages())
            samples.append(state.sample_index)
            arms.append(state.arm)
            slots.append(slot)
        completions = iter(self._complete(prompts, samples, slots, arms) if prompts else [])
        decisions = []
        for slot, _cell, _obs in entries:
            if slot in ready:
                decisions.append(ready[slot])
                continue
            completion = next(completions)
            if isinstance(completion, BaseException):
                decisions.append(Decision(None, error=completion))
                continue
            state = self._slots[slot]
            state.last_text = completion.text
            first, *state.queued = self._decide(completion)
            decisions.append(first)
        return decisions

    def _decide(self, completion: Completion) -> list[Decision]:
        """The turn's decisions (the harness's `read_turn`): one, or in the tools harness one per call,
        the first carrying the turn's usage."""
        usage = (completion.tokens_in, completion.tokens_out)
        steps = self._harness.read_turn(completion.text, self._tools, self._kinds)
        return [
            Decision(action, usage if k == 0 else (0, 0), unreadable, text, completion.cached)
            for k, (action, unreadable, text) in enumerate(steps)
        ]

    def _complete(
        self, prompts: list[list[Message]], samples: list[int], slots: list[int], arms: list[str]
    ) -> list[Completion | BaseException]:
        """Completions for the prompts: cache hits first, the rest from the engine in one call;
        `slots` let a local engine keep each episode's keys and values between turns; `arms` (of
        each prompt's cell) keep the arms' completions apart in the cache and the row seeds."""

        def generate(positions: list[int]) -> list[Completion | BaseException]:
            chosen = [arms[i] for i in positions]
            # engines are asked with arms only where one is not the drift arm
            extra = {"arms": chosen} if any(arm != DEFAULT_ARM for arm in chosen) else {}
            return list(
                self.engine.generate(
                    [prompts[i] for i in positions],
                    [samples[i] for i in positions],
                    [slots[i] for i in positions],
                    **extra,
                )
            )

        if self.cache is None:
            return generate(list(range(len(prompts))))
        from schemashift.policies.llm.cache import ResponseCache

        keys = [
            ResponseCache.key(self._identity, p, self._generation, s, a)
            for p, s, a in zip(prompts, samples, arms, strict=True)
        ]
        return self.cache.get_or_compute(keys, generate)

    # -- one episode at a time (the Policy protocol) ------------------------------------------------------
    def reset(self) -> None:
        self.start_slot(0)

    def start_episode(self, cell: Any) -> None:
        self.start_slot(0, cell)

    def act(self, observation: dict[str, Any]) -> Any:
        (decision,) = self.act_batch([(0, None, observation)])
        if decision.error is not None:
            raise decision.error
        self.last_usage = decision.usage
        self.last_parse_failed = decision.parse_failed
        self.last_text = decision.text
        return decision.action

    def request_settings(self) -> dict[str, Any]:
        """How the engine's requests are sent (an API model's timeout, retries, requests in
        flight; nothing for a local model): what a run records as applied, beside the decoding."""
        settings = getattr(self.engine, "settings", None)
        return settings() if settings is not None else {}

    def close(self) -> None:
        for slot in self._slots:
            self.engine.forget(slot)
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()
        if self.cache is not None:
            self.cache.close()


class ApiModel:
    """An OpenAI-compatible chat endpoint as an engine; requests of a round run concurrently."""

    def __init__(
        self,
        client: Any,
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        self.client = client
        self.max_tokens, self.temperature, self.top_p, self.seed = max_tokens, temperature, top_p, seed

    def identity(self) -> dict[str, Any]:
        return self.client.identity()

    def generation(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return estimate_tokens(messages)

    def forget(self, session: Any) -> None:
        """Nothing is kept between requests."""

    def settings(self) -> dict[str, Any]:
        return self.client.settings()

    def close(self) -> None:
        """Cancels the requests still in flight (their connections are closed)."""
        self.client.close()

    def generate(
        self,
        prompts: Sequence[Sequence[Message]],
        sample_indices: Sequence[int],
        sessions: Sequence[Any] | None = None,
        arms: Sequence[str] | None = None,
    ) -> list[Completion | BaseException]:
        """`arms` do not change a request: the API's seed is `seed + sample_index` in both arms
        (the response cache keeps their completions apart)."""
        requests = []
        for prompt, sample in zip(prompts, sample_indices, strict=True):
            messages, tools = api_request(prompt)
            request: dict[str, Any] = {
                "messages": messages,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "top_p": self.top_p,
            }
            if self.seed is not None:
                request["seed"] = self.seed + sample
            if tools is not None:
                request["tools"] = tools
            requests.append(request)
        return self.client.complete_many(requests, return_errors=True)


# -- factories for the policy registry ---------------------------------------------------------------

_HF_OPTIONS = {"device", "dtype", "max_new_tokens", "temperature", "top_p", "seed"}
_CLIENT_OPTIONS = ("max_concurrency", "timeout_s", "max_retries", "stream")
_API_OPTIONS = {"base_url", "api_key_env", *_CLIENT_OPTIONS, "max_tokens", "temperature", "top_p", "seed"}
_COMMON = {"harness", "cache", "max_prompt_tokens"}


def _split(options: dict[str, Any], allowed: set[str], kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    unknown = set(options) - allowed - _COMMON
    if unknown:
        raise ValueError(f"{kind} policies take no option(s) {sorted(unknown)}")
    engine = {k: v for k, v in options.items() if k in allowed and v is not None}
    common = {k: v for k, v in options.items() if k in _COMMON}
    return engine, common


def _open_cache(common: dict[str, Any]) -> None:
    cache = common.get("cache")
    if isinstance(cache, (str, os.PathLike)):
        from schemashift.policies.llm.cache import ResponseCache

        common["cache"] = ResponseCache(cache)


def make_hf_policy(spec: str, ruleset: Ruleset, **options: Any) -> ModelPolicy:
    """`hf:<model id or directory>[@<adapter directory>]`.

    A checkpoint of a training run plays with the run's prompt budget and tokens per turn (its
    manifest's settings, `lineage.checkpoint_budget`), so that it is evaluated on the prompts it
    was trained on; an option given here wins, and `generation_config()` records what ran. Any
    other model gets the model's context less one turn as its prompt budget.
    """
    from schemashift.lineage import check_chat_template, checkpoint_budget, evaluated_identity
    from schemashift.policies.llm.local import LocalModel

    model, _, adapter = spec.partition("@")
    if not model:
        raise ValueError("hf: policy needs a model id or directory, as hf:<model>[@<adapter>]")
    # before loading: a checkpoint whose adapter no longer matches its manifest is refused
    identity = evaluated_identity(adapter or None)
    trained = (checkpoint_budget(adapter) if adapter else None) or {}
    options = {**options, **{k: v for k, v in trained.items() if options.get(k) is None}}
    engine_options, common = _split(options, _HF_OPTIONS, "hf:")
    engine = LocalModel(model, adapter or None, **engine_options)
    check_chat_template(adapter or None, engine.tokenizer.chat_template)
    harness = get_harness(common.get("harness", DEFAULT_HARNESS))
    if harness.function_calls and not template_calls_tools(engine.tokenizer.chat_template):
        raise ValueError(
            f"the chat template of {model!r} has no tool support, which the {harness.name} harness needs"
        )
    if common.get("max_prompt_tokens") is None:
        common["max_prompt_tokens"] = engine.context_length - engine.max_new_tokens
    elif common["max_prompt_tokens"] + engine.max_new_tokens > engine.context_length:
        raise ValueError(
            f"max_prompt_tokens + max_new_tokens = {common['max_prompt_tokens']} + {engine.max_new_tokens} "
            f"exceeds the {engine.context_length} positions of {model}; lower max_prompt_tokens"
        )
    _open_cache(common)
    return ModelPolicy(
        f"hf:{spec}",
        engine,
        ruleset,
        base_model=model,
        adapter_sha256=engine.adapter_sha256,
        **identity,
        **common,
    )


DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def make_openai_policy(spec: str, ruleset: Ruleset, **options: Any) -> ModelPolicy:
    """`openai:<model>` against an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, HF router).

    The base URL comes from the `base_url` option, else OPENAI_BASE_URL, else OpenAI's. The key
    is read from the variable `api_key_env` names and is never stored. Without `api_key_env`,
    OpenAI's own endpoint gets OPENAI_API_KEY (when set) and any other endpoint gets no key: a
    local server needs none, and OpenAI's key must not travel to someone else's server.
    """
    from schemashift.policies.llm.api_client import ChatClient

    if not spec:
        raise ValueError("openai: policy needs a model name, as openai:<model>")
    engine_options, common = _split(options, _API_OPTIONS, "openai:")
    base_url = engine_options.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key_env = engine_options.pop("api_key_env", None)
    if key_env is None and base_url.rstrip("/") == DEFAULT_BASE_URL and os.environ.get(DEFAULT_KEY_ENV):
        key_env = DEFAULT_KEY_ENV
    client_options = {k: engine_options.pop(k) for k in _CLIENT_OPTIONS if k in engine_options}
    max_tokens = get_harness(common.get("harness", DEFAULT_HARNESS)).api_max_tokens
    if max_tokens is not None:
        engine_options.setdefault("max_tokens", max_tokens)
    client = ChatClient(base_url, spec, api_key_env=key_env, **client_options)
    _open_cache(common)
    return ModelPolicy(
        f"openai:{spec}", ApiModel(client, **engine_options), ruleset, base_model=spec, **common
    )
