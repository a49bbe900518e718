"""The progress bar draws on terminals only."""

from __future__ import annotations

import io

import pytest

from schemashift.cli import progress
from schemashift.cli.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress(3, label="run", stream=stream) as bar:
        for _ in range(3):
            bar.update()
    assert stream.getvalue() == ""
    assert bar.done == 3


def test_silent_on_a_captured_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress(2) as bar:
        bar.update(2)
    assert capsys.readouterr().err == ""


def test_draws_on_a_terminal_and_ends_the_line() -> None:
    stream = Terminal()
    with Progress(4, label="oracle on legacy", stream=stream) as bar:
        bar.update()
        bar.update(3)
    text = stream.getvalue()
    assert text.startswith("\r\x1b[Koracle on legacy [")
    assert "0/4" in text
    assert text.endswith(f"[{'#' * progress.BAR_WIDTH}] 4/4 0:00\n")


def test_redraws_are_throttled_but_the_last_state_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "REDRAW_INTERVAL_S", 3600.0)
    stream = Terminal()
    with Progress(100, stream=stream) as bar:
        for _ in range(50):
            bar.update()
    text = stream.getvalue()
    assert text.count("\r") == 2  # on entry and on exit
    assert " 50/100 " in text
    assert text.count("\n") == 1


def test_close_is_idempotent() -> None:
    stream = Terminal()
    bar = Progress(1, stream=stream)
    bar.update()
    bar.close()
    written = stream.getvalue()
    bar.close()
    assert stream.getvalue() == written


def test_render_shows_fraction_and_eta() -> None:
    bar = Progress(4, label="x")
    bar.done = 1
    text = bar.render()
    half = "#" * round(progress.BAR_WIDTH / 4)
    assert text.startswith(f"x [{half}.")
    assert " 1/4 " in text and " eta " in text


def test_zero_total_renders_complete() -> None:
    assert Progress(0).render().startswith("[" + "#" * progress.BAR_WIDTH + "] 0/0")


def test_negative_total_is_rejected() -> None:
    with pytest.raises(ValueError, match="total must be non-negative"):
        Progress(-1)


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (61.9, "1:01"), (3600 + 62, "1:01:02")])
def test_clock(seconds: float, text: str) -> None:
    assert progress._clock(seconds) == text
