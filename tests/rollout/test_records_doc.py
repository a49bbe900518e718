"""docs/records.md is generated from the record declarations and must not go stale."""

from pathlib import Path

from schemashift.rollout.records import DOC_HEADER, EPISODE_COLUMNS, column_docs

DOC = Path(__file__).resolve().parents[2] / "docs" / "records.md"


def test_records_doc_matches_the_declarations():
    assert DOC.read_text(encoding="utf-8") == DOC_HEADER + column_docs()


def test_records_doc_lists_every_episode_column():
    text = DOC.read_text(encoding="utf-8")
    assert all(f"`{column.name}`" in text for column in EPISODE_COLUMNS)
