#!/usr/bin/env bash
# The headline sweep: every heuristic policy on the legacy ruleset, all scenarios, seeds 0-4.
# Results land in results/cells/legacy/<policy>/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh

for policy in naive_heuristic policy_aware_heuristic oracle; do
    .venv/bin/schemashift run --ruleset legacy --policy "$policy" --scenarios all --seeds 0-4 \
        --out "results/cells/legacy/$policy"
done
