"""`serve --record DIR`: the episodes served clients play, written as the records `run` writes.

Each episode is its own result set (`rollout.resultset`: episodes, drifts, trajectories, the
episodes file renamed into place last) in `DIR/<ruleset>/<policy>/<scenario>/seed-<n>/sample-<k>/`
(a `/` in the policy name is written `%2F`; the control arm's episodes in `seed-<n>/control/`),
written when the episode ends, so a killed server loses at most the episodes in flight and leaves
no torn set. `k` is the first sample folder not yet made (claimed by `mkdir`, so two sessions,
or two servers, never share one). `schemashift aggregate --cells DIR` and the report read the
folder as they read `run`'s shards.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from schemashift import provenance
from schemashift.env import DEFAULT_ARM, Environment
from schemashift.rollout.backends import outcome_of
from schemashift.rollout.runner import Cell, SweepContext, episode_result, write_results

#: what a client may declare as its policy or harness (model ids such as `hf:org/model` included)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+@/-]{0,99}")
LOG = logging.getLogger(__name__)
#: the policy recorded when a client declares none
DEFAULT_POLICY = "external"


def check_name(what: str, value: Any) -> str:
    """A client's declared policy or harness name, or a ValueError saying what is allowed."""
    if not isinstance(value, str) or NAME_PATTERN.fullmatch(value) is None:
        raise ValueError(
            f"{what} must be 1 to 100 letters, digits or _.:+@/- (starting with a letter or digit), "
            f"got {value!r:.120}"
        )
    return value


class EpisodeStore:
    """Where a recording server writes its episodes; one sweep id per declared (policy, harness)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.git_sha = provenance.git_sha()
        self.image = provenance.image()
        self._sweeps: dict[tuple[str, str | None], str] = {}

    def begin(self, env: Environment, policy: str, harness: str | None) -> ServedEpisode:
        """The bookkeeping of the episode `env` was just reset to."""
        sweep_id = self._sweeps.setdefault((policy, harness), uuid.uuid4().hex)
        context = SweepContext(
            sweep_id=sweep_id, policy=policy, harness=harness, git_sha=self.git_sha, image=self.image
        )
        return ServedEpisode(self, env, context)

    def claim(self, cell: Cell, policy: str) -> tuple[Path, int]:
        """A fresh sample folder of the cell and its sample index (the first folder not yet made
        in the cell's arm)."""
        # one folder per policy, however many slashes its name has
        folder = urllib.parse.quote(policy, safe=":+@")
        cell_dir = self.directory / cell.ruleset / folder / cell.scenario / f"seed-{cell.seed}"
        if cell.arm != DEFAULT_ARM:  # numbered apart, so that sample k of both arms is a pair
            cell_dir /= cell.arm
        cell_dir.mkdir(parents=True, exist_ok=True)
        sample = 0
        while True:
            try:
                (cell_dir / f"sample-{sample}").mkdir()
                return cell_dir / f"sample-{sample}", sample
            except FileExistsError:
                sample += 1


class ServedEpisode:
    """One episode a client plays: the steps applied, written once, when it ends or is left."""

    def __init__(self, store: EpisodeStore, env: Environment, context: SweepContext) -> None:
        # the episode itself, not the environment: a reset replaces it before it is written
        self.store, self.ruleset, self.episode, self.context = store, env.ruleset, env.episode, context
        task = self.episode.task
        self.cell = Cell(self.ruleset.name, task.scenario, task.seed, arm=task.arm)
        self.started = time.perf_counter()
        self.per_step: list[dict[str, Any]] = []
        self.written = False

    def stepped(self, tokens_used: int = 0) -> None:
        """Count a step the environment applied; the episode is written once it is done."""
        self.per_step.append({"tokens_used": tokens_used})
        if self.episode.done:
            self.end()

    def end(self) -> Path | None:
        """Write the episode (a left one as it stands, if it took a step); only once. A write
        that fails (a full disk) is logged, not raised: the client's step was applied."""
        if self.written or not self.per_step:
            return None
        self.written = True
        wall_s = time.perf_counter() - self.started
        try:
            folder, sample = self.store.claim(self.cell, self.context.policy)
            cell = replace(self.cell, sample_index=sample)
            outcome = outcome_of(self.ruleset, self.episode)
            result = episode_result(
                outcome, cell, self.context, self.per_step, wall_s, tokens=(None, None), parse_failures=None
            )
            write_results(folder, [result])
        except OSError as exc:  # the client's step stands; the server's log says what was lost
            LOG.error("cannot record the episode %s in %s: %s", self.cell, self.store.directory, exc)
            return None
        return folder
