"""Result cells for the report tests: legacy, three baseline policies, two scenarios x two seeds.

The cells are played in-process through `schemashift run`; one more cell holds an infra_error row
written directly. The aggregate, tables and figures built from them are shared by the tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import (
    BOOTSTRAP,
    CONFIG_HASH,
    POLICIES,
    expected_cells,
    infra_row,
    report_args,
    run_cell,
    write_cell,
)

from schemashift.cli import main


@pytest.fixture(scope="session")
def cells_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results/cells-like tree: legacy/<policy>/ for each policy, plus legacy/oracle-infra/."""
    root = tmp_path_factory.mktemp("cells")
    for policy in POLICIES:
        run_cell(root / "legacy" / policy, policy)
    write_cell(root / "legacy" / "oracle-infra", [infra_row()])
    return root


@pytest.fixture(scope="session")
def aggregated(cells_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("results")
    expected = out / "expected.json"
    expected.write_text(json.dumps(expected_cells()), encoding="utf-8")
    paths = {
        "dir": out,
        "episodes": out / "episodes.parquet",
        "drifts": out / "drifts.parquet",
        "manifest": out / "manifest.json",
        "expected": expected,
    }
    status = main(
        [
            "aggregate",
            "--cells",
            str(cells_root),
            "--out-episodes",
            str(paths["episodes"]),
            "--out-drifts",
            str(paths["drifts"]),
            "--manifest",
            str(paths["manifest"]),
            "--expected",
            str(expected),
            "--config-hash",
            CONFIG_HASH,
        ]
    )
    assert status == 0
    return paths


@pytest.fixture(scope="session")
def tables_dir(aggregated: dict[str, Path]) -> Path:
    out = aggregated["dir"] / "tables"
    assert main(report_args("tables", aggregated, out, "--bootstrap-samples", BOOTSTRAP)) == 0
    return out


@pytest.fixture(scope="session")
def figures_dir(aggregated: dict[str, Path]) -> Path:
    out = aggregated["dir"] / "figures"
    assert main(report_args("figures", aggregated, out, "--bootstrap-samples", BOOTSTRAP)) == 0
    return out
