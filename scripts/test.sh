#!/usr/bin/env bash
# The test command: bootstrap .venv, then run pytest. Extra arguments go to pytest.
# Exits with pytest's status, except that "no tests collected" (5) counts as a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh

status=0
.venv/bin/python -m pytest -q --durations=15 "$@" || status=$?
if [[ $status -eq 5 ]]; then
    echo "scripts/test.sh: pytest collected no tests; treating that as a failure" >&2
    exit 1
fi
exit "$status"
