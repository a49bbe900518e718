"""The task text's vocabulary: the patterns of its addresses, days and time slots, and the dates
and ISO times they stand for."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from schemashift.policies.base import EMAIL_PATTERN

EMAIL = EMAIL_PATTERN
MONTHS = (
    "", "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip

DAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday) [A-Z][a-z]+ \d{1,2}, \d{4}"
SLOT = DAY + r" at \d{2}:\d{2} UTC"


class TaskNotUnderstood(ValueError):
    """The task text matches none of the v1 templates."""


def rx(pattern: str) -> str:
    """A pattern with the {EMAIL}, {SLOT} and {DAY} placeholders filled in."""
    return pattern.replace("{EMAIL}", EMAIL).replace("{SLOT}", SLOT).replace("{DAY}", DAY)


def need(pattern: str, text: str) -> re.Match[str]:
    """The first match of `pattern` (placeholders filled in) in `text`; none: TaskNotUnderstood."""
    match = re.search(rx(pattern), text)
    if match is None:
        raise TaskNotUnderstood(f"{pattern!r} not in {text!r}")
    return match


# -- dates ----------------------------------------------------------------------------------------
def parse_day(label: str) -> date:
    """'Monday April 27, 2026' -> date(2026, 4, 27)."""
    match = re.search(r"([A-Z][a-z]+) (\d{1,2}), (\d{4})", label)
    return date(int(match[3]), MONTHS.index(match[1]), int(match[2]))


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_slot(label: str, minutes: int) -> tuple[str, str]:
    """'Monday April 27, 2026 at 10:00 UTC', 30 -> ('2026-04-27T10:00:00Z', '2026-04-27T10:30:00Z')."""
    day = parse_day(label)
    hour, minute = re.search(r"at (\d{2}):(\d{2}) UTC", label).groups()
    start = datetime(day.year, day.month, day.day, int(hour), int(minute), tzinfo=UTC)
    return iso(start), iso(start + timedelta(minutes=minutes))


def day_range(first: date, last: date) -> tuple[str, str]:
    return f"{first.isoformat()}T00:00:00Z", f"{last.isoformat()}T23:59:59Z"
