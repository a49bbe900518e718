"""No module of the package outgrows 700 lines: past that a file holds more than one concern
(the scripted policy and the v1 ruleset were split into packages when they did)."""

from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "schemashift"
LIMIT = 700

pytestmark = pytest.mark.timeout(30)


def test_no_module_exceeds_the_limit() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert sizes, "no modules found"
    assert {name: lines for name, lines in sizes.items() if lines > LIMIT} == {}
