"""A dependency-free progress bar on stderr, drawn only for a person watching a terminal.

When stderr is not a TTY (CI logs, pipes, workflow managers) it writes nothing, so logs hold
results rather than carriage-return noise.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

BAR_WIDTH = 30
REDRAW_INTERVAL_S = 0.1


class Progress:
    """`with Progress(total, label="...") as bar: ... bar.update()`; the final state is drawn on exit."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None) -> None:
        if total < 0:
            raise ValueError(f"total must be non-negative, got {total}")
        self.total = total
        self.label = label
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self._started = time.monotonic()
        self._last_draw = float("-inf")

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self._draw()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.done += n
        if time.monotonic() - self._last_draw >= REDRAW_INTERVAL_S or self.done >= self.total:
            self._draw()

    def close(self) -> None:
        self._draw()
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def render(self) -> str:
        """The bar as text, e.g. `label [#########.....] 3/5 0:04 eta 0:02`."""
        elapsed = time.monotonic() - self._started
        fraction = min(self.done / self.total, 1.0) if self.total else 1.0
        filled = round(BAR_WIDTH * fraction)
        text = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total} {_clock(elapsed)}"
        if 0 < self.done < self.total:
            text += f" eta {_clock(elapsed / self.done * (self.total - self.done))}"
        return f"{self.label} {text}" if self.label else text

    def _draw(self) -> None:
        if not self.enabled:
            return
        self._last_draw = time.monotonic()
        self.stream.write("\r\x1b[K" + self.render())
        self.stream.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def report_outcome(verb: str, records: list[dict], out: str, note: str = "") -> int:
    """Print a sweep's infra errors (stderr) and its one-line summary; 1 if any cell failed."""
    failed = [r for r in records if r["status"] != "graded"]
    for record in failed:
        sample = f" sample {record['sample_index']}" if record.get("sample_index") else ""
        print(
            f"schemashift {verb}: infra_error in {record['scenario']} seed {record['seed']}{sample}: "
            f"{record['error']}",
            file=sys.stderr,
        )
    graded = [r for r in records if r["status"] == "graded"]
    if graded:
        successes = sum(1 for r in graded if r["success"])
        mean_score = sum(r["score"] for r in graded) / len(graded)
        print(
            f"{len(graded)} episodes graded ({len(failed)} infra errors{note}): "
            f"success {successes}/{len(graded)}, mean score {mean_score:.6f} -> {out}"
        )
    return 1 if failed else 0
