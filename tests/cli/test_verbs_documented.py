"""The docs name every verb the `schemashift` parser defines, and every part of `report`, so that
docs/architecture.md's verb table cannot fall behind the command."""

from __future__ import annotations

import argparse
from pathlib import Path

from schemashift.cli import build_parser, discover_verbs

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Name -> parser of the subcommands `parser` defines (none: empty)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_section() -> str:
    """docs/architecture.md's `## CLI` section, up to the next `## ` heading."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## CLI")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_every_verb_and_report_part_is_in_the_docs() -> None:
    verbs = subcommands(build_parser(discover_verbs()))
    assert {"run", "report", "screenshots"} <= set(verbs)
    parts = subcommands(verbs["report"])
    assert {"tables", "trackio"} <= set(parts)
    section = cli_section()
    missing = [f"`{verb}`" for verb in verbs if f"`{verb}`" not in section and f"`{verb} " not in section]
    missing += [f"`report {part}`" for part in parts if f"`report {part}`" not in section]
    assert not missing, f"docs/architecture.md's CLI section does not name {', '.join(missing)}"
