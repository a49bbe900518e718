#!/usr/bin/env bash
# The GPU device check (docs/training.md, "Device check"), in two halves:
#
#   bash scripts/device-check.sh prepare [PYTHON_VERSION]   here, with network: fills .device/
#   bash scripts/device-check.sh run [--cpu]                on the lent machine: installs only what
#                                                           .device/ carries, then checks
#
# DEVICE_DIR names another folder than .device (CI prepares one for its own Python).
# prepare downloads the wheels the lent machine lacks (it has its own torch and transformers and
# no network) for PYTHON_VERSION (default 3.12, the lent machine's) into .device/wheels and builds
# the tiny model into .device/tiny (a few MB; the carry limit is 64 MiB). run installs those
# wheels with --no-index --no-deps into a scratch --target, puts it and this checkout on
# PYTHONPATH (no editable install, no build backend), and runs each part of
# benchmarks/train_gpu_smoke.py in its own process under its own time limit; the whole run stays
# under 9 minutes. It exits non-zero when any part failed. --cpu runs the same parts on the CPU
# (what CI does), the real-shape step at a reduced shape.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
carry="${DEVICE_DIR:-.device}"
# The lent machine's image holds torch, transformers, accelerate, pyarrow, pandas, xxhash, fsspec and
# huggingface-hub; these are what training needs beyond them, pinned as in pyproject's train extra.
wheels=(trl==1.16.0 peft==0.21.2 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19)

prepare() {
    local version="${1:-3.12}"
    rm -rf "$carry/wheels"
    mkdir -p "$carry/wheels"
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version "$version" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$carry/wheels" "${wheels[@]}"
    if [[ ! -f "$carry/tiny/config.json" ]]; then
        rm -rf "$carry/tiny"
        "$python" -m schemashift.cli tiny-model --out "$carry/tiny"
    fi
    du -sh "$carry"
}

run() {
    # On the lent machine the parts' limits add up to under 9 minutes; two shared CPU cores get
    # four times as long.
    local cpu=() scale=1
    if [[ "${1:-}" == "--cpu" ]]; then cpu=(--cpu) scale=4; fi
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    "$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile \
        --no-cache-dir --target "$scratch/site" "$carry"/wheels/*.whl
    export PYTHONPATH="$scratch/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    local failed=0 started=$SECONDS
    part() {
        local limit=$(($1 * scale))
        shift
        echo "== device check: $* (at most ${limit} s)"
        local begun=$SECONDS status=0
        timeout "$limit" "$python" benchmarks/train_gpu_smoke.py "$@" "${cpu[@]}" || status=$?
        echo "== $1: exit $status after $((SECONDS - begun)) s"
        if [[ $status -ne 0 ]]; then failed=1; fi
    }
    part 30 environment
    part 240 stack --stack transformers --steps 3 --model "$carry/tiny" --workdir "$scratch/stack"
    part 180 real-shape --model "$carry/tiny" --workdir "$scratch/shape"
    part 30 weight-sync
    echo "== device check: $([[ $failed -eq 0 ]] && echo passed || echo FAILED) in $((SECONDS - started)) s"
    return "$failed"
}

case "${1:-}" in
    prepare) shift; prepare "$@" ;;
    run) shift; run "$@" ;;
    *) echo "usage: $0 prepare [PYTHON_VERSION] | run [--cpu]" >&2; exit 2 ;;
esac
