#!/usr/bin/env bash
# Prepare a Debian machine, as root, for the container tests (tests/server/test_container.py):
# podman with runc and the ulimits this kind of host accepts, a Debian base image made with
# debootstrap from this machine's own apt mirror (no registry needed), and the wheelhouse the
# server image installs from. Idempotent: what is already there is kept.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

base=localhost/debian-python:bookworm
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y podman runc debootstrap
fi
if [[ ! -f /etc/containers/containers.conf ]]; then
    mkdir -p /etc/containers
    cat > /etc/containers/containers.conf <<'CONF'
[engine]
runtime = "runc"

[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
CONF
fi
if ! podman image exists "$base"; then
    # build_image.py reads the Debian mirror from this machine's apt sources.
    python3 workflow/scripts/build_image.py --engine podman --debootstrap --tag "$base" \
        --out .venv/base.image.json
fi
bash scripts/bootstrap.sh
.venv/bin/python containers/wheelhouse.py
