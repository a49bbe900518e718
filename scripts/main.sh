#!/usr/bin/env bash
# The main job: the Snakemake workflow on its embedded default (config.yaml): every baseline on
# the evaluation cells, then the aggregated tables, figures and report under results/.
# Extra arguments go to snakemake (a target, --configfile=..., -n, ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh

export PATH="$PWD/.venv/bin:$PATH"
exec snakemake --cores all "$@"
