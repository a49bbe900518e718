"""The README's layout and docs/architecture.md's package list name every top-level package and
module of `schemashift`, so that neither falls behind the tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def top_level() -> list[str]:
    """`schemashift/<package>/` and `schemashift/<module>.py`, without the package's own face."""
    package = ROOT / "schemashift"
    names = [f"schemashift/{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    names += [f"schemashift/{p.name}" for p in package.glob("*.py") if not p.name.startswith("_")]
    return sorted(names)


def first_block(text: str, after: str) -> str:
    """The first fenced block after the line `after`."""
    rest = text[text.index(after) :]
    start = rest.index("```\n") + 4
    return rest[start : rest.index("```", start)]


@pytest.mark.parametrize(
    ("doc", "heading"), [("README.md", "## Layout"), ("docs/architecture.md", "# Architecture")]
)
def test_the_layout_names_every_top_level_package_and_module(doc: str, heading: str) -> None:
    block = first_block((ROOT / doc).read_text(encoding="utf-8"), heading)
    entries = set()
    for line in block.splitlines():
        if line.startswith("schemashift/"):
            # the name column ends at two spaces; `schemashift/report/ train/ server/` names three
            names = re.split(r"\s{2,}", line)[0].split()
            entries |= {n if n.startswith("schemashift/") else f"schemashift/{n}" for n in names}
    assert len(top_level()) >= 10
    missing = [name for name in top_level() if name not in entries]
    assert not missing, f"{doc} does not list {', '.join(missing)}"
