"""Closed-loop multi-turn rollouts for GRPO: the model plays whole episodes, turn by turn.

TRL's `rollout_func` hook hands us the prompts of a generation batch (each already repeated
`num_generations` times). For each we replay the episode named in its first message: the model
generates one turn, the shared parser reads its action, the environment answers, the answer is
rendered by the shared interaction format and appended, and the model generates again, seeing
every observation, until the episode's turn loop (`schemashift.train.turns.TurnLoop`) stops it:
the environment ended it, or it used its turn limit (the scenario's step limit by default). All
running episodes generate in one batch per turn (left padding, per-episode stop).

What TRL trains on is one token sequence per episode: the opening prompt, then the model's turns
interleaved with the environment's messages. `env_mask` marks the model's own tokens (1) and the
environment's (0), so only the model's tokens carry loss. Environment segments are the text the
chat template adds between two assistant turns, so the sequence equals the chat template's
rendering of the evaluation conversation, and the model is trained exactly as it is evaluated.

Episodes are bookkept by the rollout runner's episode class, so each rollout yields the same
episode record as an evaluation; rewards are computed from that record (`schemashift.runs.rewards`).

Sampling is the run's temperature and nothing else (`train.arguments.sampling_settings`), in the
rollout, in TRL's scoring and in evaluation; the model's own generation config (a repetition
penalty, a top-k) is not inherited. With vLLM the rollout returns the engine's log-probability
of each model token (0.0 for the environment's, which `env_mask` keeps out of the correction),
which TRL's importance-sampling correction compares with the trained model's.

The prompt budget is evaluation's: with `max_prompt_tokens` set, a conversation beyond it has
its oldest turns summarised. From that turn on the prompt is no longer a continuation of the
sequence (nor is it in the tools harness once the function definitions change with the
documentation the agent is shown), so the sequence (what TRL trains on) ends there while the
episode plays on, exactly as evaluation would play it, to its end and its reward. A prompt
still beyond the budget with every earlier turn summarised (a long latest turn) cuts the
episode off there, as a turn limit would: the engine could not take it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from schemashift.policies.llm.decoding import CachedDecoder
from schemashift.policies.llm.format import template_request
from schemashift.policies.llm.turn_end import end_of_turn_ids
from schemashift.rollout.runner import SweepContext
from schemashift.runs.rewards import episode_reward, reward_components
from schemashift.train.arguments import sampling_settings
from schemashift.train.dataset import EPISODE_FIELD
from schemashift.train.turns import TurnLoop


class TemplateError(RuntimeError):
    """The chat template does not render a conversation as a prefix-stable sequence."""


@dataclass
class _Play:
    """One rollout episode: its turn loop and token sequence (recorded until the prompt budget
    summarises earlier turns; `summarised` then holds the prompt the next turn continues)."""

    loop: TurnLoop
    rendered: str
    prompt_ids: list[int]
    #: the opening's system message (the tools harness: with its function definitions)
    system: dict[str, Any] = field(default_factory=dict)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    model_tokens: int = 0
    summarised: list[int] | None = None

    def context(self) -> list[int]:
        """The tokens the next turn continues."""
        return self.summarised if self.summarised is not None else self.prompt_ids + self.completion_ids


class ClosedLoopRollout:
    """TRL `rollout_func`: plays each prompt's episode with the model being trained.

    `max_turns` None gives each episode its scenario's step limit (`TurnLoop`); training runs
    never set a lower one (`runs.contract.check_turn_limit`), tests do to keep episodes short.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        reward: str,
        max_turn_tokens: int,
        max_turns: int | None = None,
        temperature: float = 1.0,
        backend: str = "inprocess",
        context: SweepContext | None = None,
        generation_config: Any = None,
        max_prompt_tokens: int | None = None,
        harness: str = "default",
    ) -> None:
        self.tokenizer = tokenizer
        self.harness = harness
        self.reward = reward
        self.max_turn_tokens = max_turn_tokens
        self.max_turns = max_turns
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.backend_spec = backend
        self.context = context or SweepContext(
            sweep_id=uuid.uuid4().hex, policy="grpo-rollout", harness=harness
        )
        #: outcome rows of the episodes played since the last `drain()` (for the training metrics)
        self.finished: list[dict[str, Any]] = []
        #: the trainer's vLLM generation engine while a call uses it (colocate mode)
        self._vllm: Any = None
        #: tokens that end a turn, as evaluation ends it (`policies.llm.turn_end`)
        self._stop_ids = frozenset(end_of_turn_ids(tokenizer, generation_config))

    # -- text <-> tokens -----------------------------------------------------------------------------
    def _render(self, messages: list[dict[str, Any]]) -> str:
        plain, tools = template_request(messages)
        return self.tokenizer.apply_chat_template(
            plain, tools=tools, add_generation_prompt=True, tokenize=False
        )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _count(self, messages: list[dict[str, Any]]) -> int:
        return len(self._encode(self._render(messages)))

    # -- the episodes --------------------------------------------------------------------------------
    def _open(self, prompt: list[dict[str, Any]]) -> _Play:
        key = prompt[0].get(EPISODE_FIELD)
        if not key:
            raise ValueError(f"rollout prompt lacks its {EPISODE_FIELD!r} field; build it with train.dataset")
        loop = TurnLoop(
            key,
            self.context,
            max_turns=self.max_turns,
            backend=self.backend_spec,
            max_prompt_tokens=self.max_prompt_tokens,
            count_tokens=self._count,
            harness=self.harness,
        )
        rendered = self._render(loop.conversation.messages())
        if rendered != self._render(prompt):
            raise ValueError(f"episode {key}: the dataset prompt no longer matches the environment's opening")
        return _Play(loop, rendered, self._encode(rendered), system=loop.conversation.messages()[0])

    def _step(self, play: _Play, generated: list[int], logprobs: list[float | None] | None) -> None:
        """Apply one generated turn and append the environment's answer to the sequence."""
        tokenizer = self.tokenizer
        text = tokenizer.decode(generated, skip_special_tokens=True)
        usage = (len(play.context()), len(generated))
        if play.summarised is None:
            play.completion_ids += generated
            play.env_mask += [1] * len(generated)
            play.logprobs += logprobs if logprobs is not None else [0.0] * len(generated)
        play.model_tokens += len(generated)
        if not play.loop.take(text, usage):
            return
        conversation = play.loop.conversation
        rendered = self._render(conversation.messages())
        if self.max_prompt_tokens is not None and len(self._encode(rendered)) > self.max_prompt_tokens:
            play.loop.cut_off()
            return
        redefined = conversation.messages()[0] != play.system
        if play.summarised is not None or conversation.dropped or redefined:
            # earlier turns summarised, or (tools harness) the function definitions of the opening
            # changed with the documentation: the prompt no longer continues the sequence
            play.summarised = self._encode(rendered)
            return
        before = play.rendered + text
        if not rendered.startswith(before):
            raise TemplateError("the chat template changed earlier turns when a turn was added")
        segment = rendered[len(before) :]
        # The template's end-of-turn text starts the segment; the model may have generated it already.
        stop_text = tokenizer.decode(generated[-1:], skip_special_tokens=False) if generated else ""
        if generated and generated[-1] in self._stop_ids and segment.startswith(stop_text):
            segment = segment[len(stop_text) :]
        ids = self._encode(segment)
        play.completion_ids += ids
        play.env_mask += [0] * len(ids)
        play.logprobs += [0.0] * len(ids)
        play.rendered = rendered

    def decoder(self, model: Any) -> CachedDecoder:
        """Evaluation's decoder over `model`, sampling as `sampling_settings` says: the
        temperature alone (the model's own generation config is not read)."""
        sampling = sampling_settings(self.temperature)
        return CachedDecoder(
            model,
            stop_ids=sorted(self._stop_ids),
            max_new_tokens=self.max_turn_tokens,
            temperature=sampling["temperature"],
            top_p=sampling["top_p"],
        )

    def _generate(
        self, decoder: Any, plays: list[_Play]
    ) -> tuple[list[list[int]], list[list[float | None]] | None]:
        """One turn for every running episode, with the sampled tokens' log-probabilities where
        the engine gives them: vLLM's engine where the trainer has one (its
        `max_completion_length` is the per-turn limit), else evaluation's cached decoder over the
        trained model, which keeps each episode's keys and values from turn to turn."""
        sequences = [play.context() for play in plays]
        if self._vllm is not None:
            _, completions, logprobs, _ = self._vllm.generate(
                prompts=sequences, images=None, num_generations=1
            )
            turns = [self._cut(list(row)) for row in completions]
            # one entry per token: the sampled token's log-probability first (`logprobs=0`)
            return turns, [
                [top[0] for top in row[: len(turn)]] for row, turn in zip(logprobs, turns, strict=True)
            ]
        import torch

        generators = None
        if decoder.temperature > 0:
            # drawn from torch's global stream, which the trainer's seed fixes
            generators = []
            for _ in plays:
                generator = torch.Generator(device=decoder.device)
                generator.manual_seed(int(torch.randint(2**62, ()).item()))
                generators.append(generator)
        output = decoder.decode(sequences, generators, sessions=[id(play) for play in plays])
        return [self._cut(row) for row in output], None

    def _cut(self, row: list[int]) -> list[int]:
        """The turn up to and including its first stop token."""
        cut = next((i + 1 for i, token in enumerate(row) if token in self._stop_ids), len(row))
        return row[:cut][: self.max_turn_tokens]

    def play(self, model: Any, prompts: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Play one episode per prompt in lockstep; the rollout_func result for TRL.

        The decoder lives for this call only: its caches hold keys and values of the weights the
        call generates with, and the trainer changes them between calls."""
        plays = [self._open(prompt) for prompt in prompts]
        decoder = None if model is None else self.decoder(model)
        while True:
            running = [p for p in plays if p.loop.running]
            if not running:
                break
            generated, logprobs = self._generate(decoder, running)
            for i, (play, tokens) in enumerate(zip(running, generated, strict=True)):
                self._step(play, tokens, None if logprobs is None else logprobs[i])
        outcomes, ended = [], []
        for play in plays:
            record, done, reward = play.loop.finish(self.reward)
            outcomes.append(record)
            ended.append(done)
            self.finished.append(
                {
                    **record,
                    "ended": done,
                    "model_tokens": play.model_tokens,
                    "reward": reward,
                    **reward_components(self.reward, record, done=done),
                }
            )
        return {
            "prompt_ids": [p.prompt_ids for p in plays],
            "completion_ids": [p.completion_ids for p in plays],
            "logprobs": [p.logprobs for p in plays] if self._vllm is not None else None,
            "env_mask": [p.env_mask for p in plays],
            "outcome": outcomes,
            "ended": ended,
        }

    def __call__(self, prompts: list[list[dict[str, Any]]], trainer: Any) -> dict[str, Any]:
        if getattr(trainer, "use_vllm", False):
            # TRL has synced the current weights into the colocated engine before calling us.
            self._vllm = trainer.vllm_generation
            try:
                return self.play(None, prompts)
            finally:
                self._vllm = None
        from trl.models import unwrap_model_for_generation

        with (
            kept_gradient_checkpointing(trainer.model),
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model,
        ):
            return self.play(model, prompts)

    def drain(self) -> list[dict[str, Any]]:
        finished, self.finished = self.finished, []
        return finished


@contextmanager
def kept_gradient_checkpointing(model: Any) -> Iterator[None]:
    """Restore every module's gradient-checkpointing switch and function after generation.

    TRL's unwrap turns checkpointing off to generate and back on with Hugging Face's
    `gradient_checkpointing_enable`, which installs Hugging Face's checkpoint function: a stack
    that installed its own (Unsloth's offloading one) would train every later step with another.
    What was installed before the rollout is what the training step after it uses.
    """
    kept = [
        (module, module.gradient_checkpointing, module.__dict__.get("_gradient_checkpointing_func"))
        for module in model.modules()
        if hasattr(module, "gradient_checkpointing")
    ]
    try:
        yield
    finally:
        for module, switch, function in kept:
            module.gradient_checkpointing = switch
            if function is not None:
                module._gradient_checkpointing_func = function


def reward_function(variant: str):
    """The TRL reward function of a variant: reads each rollout's episode record."""

    def reward(prompts, completions, outcome, ended, **_: Any) -> list[float]:
        return [
            episode_reward(variant, record, done=done) for record, done in zip(outcome, ended, strict=True)
        ]

    reward.__name__ = f"schemashift_{variant}"
    return reward
