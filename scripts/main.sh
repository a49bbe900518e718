#!/usr/bin/env bash
# The main job: the Snakemake workflow on its embedded default (config.yaml): the images, every
# baseline on the evaluation cells, the tiny model built and trained with GRPO, step 0 and every
# checkpoint evaluated, then the aggregated tables, figures and report under results/.
# Set-up first: the Python environment (bootstrap.sh), then, where the machine allows it (root
# on Debian or Ubuntu), the container engine and the images the jobs run in (container-up.sh);
# one line says where the jobs run and why.
# Extra arguments go to snakemake (a target, --configfile=..., -n, ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh
bash scripts/container-up.sh --if-possible
.venv/bin/python -m schemashift.workflow.containers config.yaml

export PATH="$PWD/.venv/bin:$PATH"
exec snakemake --cores all "$@"
