"""Fixtures shared by every test layer: the tiny model, built once per test run (or reused from
SCHEMASHIFT_TEST_CACHE, keyed by the digest of the code that builds it), and the container
images' debootstrap base (reused where it is there)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    import torch

    from schemashift.train.tiny import cached_tiny_model

    # The tiny model's matrices are too small to gain from a second thread, and on shared CI cores
    # a thread waiting for a busy core slows every step several times over.
    torch.set_num_threads(1)

    root = os.environ.get("SCHEMASHIFT_TEST_CACHE")
    cache = Path(root) if root else tmp_path_factory.mktemp("tiny-model")
    cache.mkdir(parents=True, exist_ok=True)
    return cached_tiny_model(cache)


@pytest.fixture(scope="session")
def debootstrap_base(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The record of the images' Debian base (workflow/scripts/build_image.py --debootstrap), built
    here without a registry, or reused where scripts/container-up.sh built it. Skipped without
    podman, root or debootstrap, unless SCHEMASHIFT_REQUIRE_CONTAINER=1 (CI): then a failure."""
    if shutil.which("podman") is None:
        reason = "podman is not installed"
    elif os.geteuid() != 0 or shutil.which("debootstrap") is None:
        reason = "the debootstrap base image needs root and debootstrap"
    else:
        reason = None
    if reason:
        if os.environ.get("SCHEMASHIFT_REQUIRE_CONTAINER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("base-image") / "base.json"
    build = [sys.executable, str(REPO / "workflow/scripts/build_image.py"), "--engine", "podman"]
    build += ["--debootstrap", "--out", str(out)]
    result = subprocess.run(build, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text())
