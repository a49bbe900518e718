"""Headless Chromium for the screenshot tests: skipped where no browser is installed, unless
SCHEMASHIFT_REQUIRE_BROWSER=1 (CI), where a missing browser fails them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schemashift.report.screenshots import find_browser


def require_browser() -> str:
    browser = find_browser()
    if browser is None:
        if os.environ.get("SCHEMASHIFT_REQUIRE_BROWSER") == "1":
            pytest.fail("no headless browser (apt-get install chromium-headless-shell)")
        pytest.skip("no headless browser installed")
    return browser


def distinct_colours(png: Path) -> int:
    """How many colours the screenshot holds: a blank page has one or two."""
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(png)
    flat = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    return len(np.unique(flat, axis=0))
