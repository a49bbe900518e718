"""The report modules import pandas, numpy, seaborn and matplotlib only where they are used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pandas", "numpy", "pyarrow", "seaborn", "matplotlib")


def test_report_modules_import_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "import schemashift.report, schemashift.report.load, schemashift.report.aggregate\n"
        "import schemashift.report.stats, schemashift.report.tables, schemashift.report.figures\n"
        "import schemashift.report.html, schemashift.cli.verbs.aggregate, schemashift.cli.verbs.report\n"
        "import schemashift.report.analysis, schemashift.report.published\n"
        f"print(json.dumps(sorted(name for name in {HEAVY!r} if name in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []
