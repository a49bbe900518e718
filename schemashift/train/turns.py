"""The turn loop of one training episode: the GRPO rollout's rules without a model (no torch).

`ClosedLoopRollout` drives a `TurnLoop` per episode and keeps only the token bookkeeping, so the
rollout, the tests and the v1 farming checks share one opening, one parser and one stopping
rule: an episode runs until the environment ends it or it has taken its turn limit, which is the
scenario's own step limit (the observation's `max_steps`) unless an explicit limit is given.

Every turn takes at least one environment step (an unreadable turn is a wasted step or ends the
episode; a tools-harness turn takes one per call),
so at the scenario's limit the environment always ends the episode first. A training run refuses
an explicit limit below any of its scenarios' (`runs.contract.check_turn_limit`); a lower limit
here cuts episodes off (`ended` False), and the rewards pay such an episode nothing for success.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.harnesses import get_harness
from schemashift.rollout.backends import make_backend
from schemashift.rollout.runner import Cell, EpisodeRecorder, SweepContext
from schemashift.runs.rewards import episode_reward
from schemashift.train.dataset import parse_episode_key


class TurnLoop:
    """One training episode, turn by turn: the dataset key opens it, `take` applies the text of
    one model turn, `running` is the stopping rule and `finish` gives the record and reward.

    `conversation` holds what the model sees next (the environment's answer is added after every
    turn that leaves the episode running). `max_turns` None: the scenario's step limit.
    `max_prompt_tokens` and `count_tokens` are evaluation's prompt budget: beyond it the oldest
    turns are summarised, as `policies.llm.format.Conversation` does for a model policy.
    """

    def __init__(
        self,
        key: str,
        context: SweepContext,
        *,
        max_turns: int | None = None,
        backend: str = "inprocess",
        max_prompt_tokens: int | None = None,
        count_tokens: Callable[[list[dict[str, str]]], int] | None = None,
        harness: str = "default",
    ) -> None:
        ruleset_name, scenario, seed = parse_episode_key(key)
        ruleset = get_ruleset(ruleset_name)
        self.key = key
        self.tools = tuple(ruleset.tool_names)
        self.drift_kinds = tuple(ruleset.drift_kinds)
        self.episode = EpisodeRecorder(make_backend(backend), Cell(ruleset_name, scenario, seed), context)
        self.observation = self.episode.start()
        budget = {"max_prompt_tokens": max_prompt_tokens}
        if count_tokens is not None:
            budget["count_tokens"] = count_tokens
        self.harness = harness
        self._harness = get_harness(harness)
        self.conversation = self._harness.conversation.for_ruleset(ruleset, self.observation, **budget)
        self.limit = int(self.observation["max_steps"]) if max_turns is None else max_turns
        self.turns = 0

    @property
    def ended(self) -> bool:
        """Whether the environment ended the episode (as opposed to the turn limit stopping it)."""
        return bool(self.observation["done"])

    @property
    def running(self) -> bool:
        """The stopping rule: the episode takes another turn until it ended or used its limit."""
        return not self.ended and self.turns < self.limit

    def take(self, text: str, usage: tuple[int, int] = (0, 0)) -> bool:
        """Apply one model turn (`usage`: its prompt and generated tokens); whether it runs on.
        A turn takes the steps its harness's `read_turn` reads from it (in the tools harness, one per
        call, until the episode ends), as evaluation plays it."""
        if not self.running:
            raise RuntimeError(f"episode {self.key} is over ({self.turns} turns, ended={self.ended})")
        answers = []
        for k, (action, failed, step_text) in enumerate(
            self._harness.read_turn(text, self.tools, self.drift_kinds)
        ):
            if self.ended:
                break
            self.observation = self.episode.apply(action, usage if k == 0 else (0, 0), failed, step_text)
            answers.append(self.observation)
        self.turns += 1
        if self.running:
            self.conversation.add_turn(text, *answers)
        return self.running

    def cut_off(self) -> None:
        """Take no further turn (the next prompt does not fit the budget even summarised)."""
        self.limit = self.turns

    def finish(self, reward: str) -> tuple[dict[str, Any], bool, float]:
        """The episode's record, whether the environment ended it, and its `reward` variant."""
        record = self.episode.finish().record
        return record, self.ended, episode_reward(reward, record, done=self.ended)


def play_texts(
    key: str,
    texts: Iterable[str],
    *,
    reward: str,
    max_turns: int | None = None,
    backend: str = "inprocess",
    harness: str = "default",
) -> tuple[dict[str, Any], bool, float]:
    """Play an agent's turn texts through the trainer's turn loop: (record, ended, reward).

    Texts left when the loop stops are not played; texts that run out first leave the episode
    cut off, as the trainer's turn limit would. No tokens are charged (the texts have no prompt).
    """
    context = SweepContext(sweep_id=uuid.uuid4().hex, policy="texts", harness=harness)
    loop = TurnLoop(key, context, max_turns=max_turns, backend=backend, harness=harness)
    for text in texts:
        if not loop.running:
            break
        loop.take(text)
    return loop.finish(reward)
