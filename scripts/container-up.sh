#!/usr/bin/env bash
# Prepare a Debian or Ubuntu machine, as root, to run the workflow's jobs in the project's images
# (and the container tests): podman with runc and the ulimits this kind of host accepts, the
# images' Debian base made with debootstrap from this machine's own apt mirror (no registry
# needed), the images' wheelhouses, and the runtime image every CPU job runs in. The workflow's
# image rules then find the images built and reuse them. Idempotent: what is there is kept.
#
# --if-possible (scripts/main.sh): where this cannot be done (not root, no apt-get), do nothing
# and succeed; the workflow then runs its jobs on the host and says why in one line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ "${1:-}" == "--if-possible" ]]; then
    if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
        exit 0
    fi
fi
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
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
bash scripts/bootstrap.sh
records=.venv/images
mkdir -p "$records"
build=(.venv/bin/python workflow/scripts/build_image.py --engine podman)
"${build[@]}" --debootstrap --out "$records/base.image.json" > "$records/base.log" 2>&1 \
    || { tail -n 20 "$records/base.log"; exit 1; }
.venv/bin/python containers/wheelhouse.py > "$records/wheelhouse.log" 2>&1 \
    || { tail -n 20 "$records/wheelhouse.log"; exit 1; }
"${build[@]}" --image runtime --dockerfile containers/runtime.Dockerfile \
    --base-image "$records/base.image.json" --out "$records/runtime.image.json" > "$records/runtime.log" 2>&1 \
    || { tail -n 20 "$records/runtime.log"; exit 1; }
