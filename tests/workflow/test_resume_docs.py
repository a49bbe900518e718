"""docs/workflow.md says how to resume after Snakemake itself was killed: SIGKILL leaves its
lock on the working directory, which `snakemake --unlock` releases; and what it says of
`rerun-incomplete` is what the default profile sets."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def running_it() -> str:
    text = (REPO / "docs" / "workflow.md").read_text()
    start = text.index("## Running it")
    return text[start : text.index("\n## ", start + 1)]


def test_resuming_after_a_sigkill_names_the_unlock_command():
    section = running_it()
    resuming = section[section.index("Resuming:") :]
    assert "SIGKILL" in resuming and "Directory\ncannot be locked" in resuming
    assert "snakemake --unlock" in resuming


def test_the_default_profile_reruns_incomplete_jobs_as_documented():
    assert "`rerun-incomplete`, set in\n`profiles/default/config.yaml`" in running_it()
    profile = (REPO / "profiles" / "default" / "config.yaml").read_text()
    assert "rerun-incomplete: true" in profile.splitlines()
