"""Import time of `schemashift` and `schemashift.env`: the median wall time of fresh interpreters.

Every `schemashift` command and every environment worker pays this on start, so it is kept
small (target: under 0.3 s, interpreter start-up included). Usage:

    python benchmarks/import_time.py [--runs 15]

Prints one line per statement and exits 1 when a median is over the target.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.3
IMPORTS = ("import schemashift", "import schemashift.env")
REPO = Path(__file__).resolve().parent.parent


def wall_time(statement: str) -> float:
    """Seconds a fresh interpreter takes to run `statement` from the repository root."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True, cwd=REPO)
    return time.perf_counter() - started


def median_wall_time(statement: str, runs: int) -> float:
    return statistics.median(wall_time(statement) for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="interpreters per statement (default: 15)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    baseline = median_wall_time("pass", args.runs)
    print(f"{'python -c pass':<36} median {baseline:.3f} s (interpreter start-up)")
    over = False
    for statement in IMPORTS:
        median = median_wall_time(statement, args.runs)
        over |= median >= TARGET_S
        verdict = "ok" if median < TARGET_S else "OVER TARGET"
        print(
            f"{'python -c ' + repr(statement):<36} median {median:.3f} s "
            f"(import {median - baseline:+.3f} s; target < {TARGET_S} s: {verdict})"
        )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
