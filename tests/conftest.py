"""Fixtures shared by every test layer: the tiny model, built once per test run (or reused from
SCHEMASHIFT_TEST_CACHE, keyed by the digest of the code that builds it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


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
