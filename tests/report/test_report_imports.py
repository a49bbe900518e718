"""The report modules import pandas, numpy, seaborn and matplotlib only where they are used, and
the figures read their numbers from the analysis, never from a table module."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import schemashift.report.figures

HEAVY = ("pandas", "numpy", "pyarrow", "seaborn", "matplotlib")


def test_report_modules_import_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "import schemashift.report, schemashift.report.load, schemashift.report.aggregate\n"
        "import schemashift.report.stats, schemashift.report.tables, schemashift.report.figures\n"
        "import schemashift.report.tables.format, schemashift.report.tables.benchmark\n"
        "import schemashift.report.tables.training, schemashift.report.tables.seed_document\n"
        "import schemashift.report.html, schemashift.cli.verbs.aggregate, schemashift.cli.verbs.report\n"
        "import schemashift.report.analysis, schemashift.report.published\n"
        f"print(json.dumps(sorted(name for name in {HEAVY!r} if name in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []


def test_figures_import_no_table_module() -> None:
    """A figure and a table show one number because both take it from `analysis`; a figure that
    imported a table module would compute it through the table's formatting instead."""
    tree = ast.parse(Path(schemashift.report.figures.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
    assert not {name for name in imported if name and name.startswith("schemashift.report.tables")}
