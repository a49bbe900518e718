#!/usr/bin/env bash
# Create the repository's .venv if it is missing and install schemashift with the extras that the
# tests and the workflow need (dev, workflow, server, train: the CPU build of torch), plus openenv
# without its dependencies.
# Idempotent and quiet: the install runs again only when pyproject.toml changed since the last
# successful one, so scripts can call this on every invocation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
stamp=.venv/.bootstrap-stamp

if [[ ! -x .venv/bin/python ]]; then
    "$python" -m venv .venv
fi

wanted="$(.venv/bin/python -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
    # torch first, pinned: an unpinned request would pull a multi-GB CUDA build where the CPU one fits.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev,workflow,server,train]"
    # openenv's own dependencies would pull in gradio; the server extra lists what it needs.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "openenv==0.10.0"
    printf '%s\n' "$wanted" > "$stamp"
fi
