"""Fixtures of the workflow tests: one temporary copy of the repository per test session."""

from __future__ import annotations

from pathlib import Path

import pytest
from workflow_support import copy_repo


@pytest.fixture(scope="session")
def repo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the repository per test session, shared by every workflow test."""
    return copy_repo(tmp_path_factory.mktemp("workflow") / "repo")
