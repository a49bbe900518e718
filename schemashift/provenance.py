"""Provenance stamped on every result row: git commit of the code, digest of the config, the
container image the row was made in."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

GIT_SHA_ENV = "SCHEMASHIFT_GIT_SHA"
#: set by the project's images (containers/*.Dockerfile) to the tag they were built under
IMAGE_ENV = "SCHEMASHIFT_IMAGE"
#: the image of a row made outside the project's images
HOST = "host"


def config_hash(config: Any) -> str:
    """A short, stable digest of a JSON-serialisable configuration."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@cache
def git_sha() -> str | None:
    """The commit of the checkout this package runs from (`-dirty` when modified), if any.

    `SCHEMASHIFT_GIT_SHA` overrides it, for runs from an installed copy or a container.
    """
    override = os.environ.get(GIT_SHA_ENV)
    if override:
        return override
    source = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


def image() -> str:
    """The project image this process runs in (the tag the image sets in SCHEMASHIFT_IMAGE), or
    "host" outside them."""
    return os.environ.get(IMAGE_ENV) or HOST
