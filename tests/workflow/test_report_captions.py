"""`snakemake --report` explains what it shows: every reported output of the rules names a caption
file that exists (workflow/report/), and the Snakefile names the workflow's description."""

from __future__ import annotations

import re

import pytest
from workflow_support import REPO

from schemashift.report.analysis import METRICS
from schemashift.report.figures import STEMS

RULES = REPO / "workflow" / "rules"
CAPTIONS = REPO / "workflow" / "report"


def report_calls() -> list[tuple[str, str]]:
    """(rule file, text of each `report(` call) of the rule files."""
    calls = []
    for smk in sorted(RULES.glob("*.smk")):
        text = smk.read_text()
        for match in re.finditer(r"\breport\(", text):
            depth, end = 0, match.end() - 1
            for end in range(match.end() - 1, len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            calls.append((smk.name, text[match.start() : end + 1]))
    return calls


def test_every_reported_output_has_a_caption_and_a_category():
    calls = report_calls()
    assert len(calls) >= 3
    for name, call in calls:
        assert "caption=" in call and "category=" in call, (name, call)


def test_the_caption_files_exist():
    text = (RULES / "report.smk").read_text()
    named = re.findall(r'caption=f"\{CAPTIONS\}/([^"]+)"', text)
    assert named, "report.smk names no caption file"
    for name in named:
        assert (CAPTIONS / name).is_file(), name
    # figure_caption(): one per figure stem, the per-ruleset overviews one per metric
    for stem in [*METRICS, *STEMS]:
        assert (CAPTIONS / "figures" / f"{stem}.rst").is_file(), stem
    assert {path.stem for path in (CAPTIONS / "figures").glob("*.rst")} == {*METRICS, *STEMS}


@pytest.mark.parametrize("path", sorted(CAPTIONS.rglob("*.rst")), ids=lambda p: p.name)
def test_each_caption_says_what_how_and_how_to_read(path):
    text = path.read_text()
    if path.name == "workflow.rst":
        assert "Statistics" in text
        return
    assert "How it was computed" in text and "How to read it" in text, path.name


def test_the_snakefile_names_the_workflow_description():
    match = re.search(r'^report: "([^"]+)"', (REPO / "Snakefile").read_text(), re.M)
    assert match and (REPO / match[1]).is_file()
