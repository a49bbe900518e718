#!/usr/bin/env bash
# Stop the cluster scripts/slurm-up.sh started: its daemons by PID file (slurmd, slurmctld, munged),
# the /etc/slurm/slurm.conf link and the /etc/hosts line it added. Leaves the packages installed and
# the scratch folder (logs) in place. Safe to run when nothing is up.
#
# Environment: SLURM_ROOT as given to slurm-up.sh; by default the folder /etc/slurm/slurm.conf
# links to, else slurm-up.sh's default.
set -uo pipefail

CONF=/etc/slurm/slurm.conf
HOSTS_MARK="# added by schemashift scripts/slurm-up.sh"

say() { echo "slurm-down: $*"; }

if [[ -n ${SLURM_ROOT:-} ]]; then
    ROOT=$SLURM_ROOT
elif [[ -L $CONF ]]; then
    ROOT=$(dirname "$(dirname "$(readlink "$CONF")")")
else
    ROOT=${TMPDIR:-/tmp}/schemashift-slurm
fi

for name in slurmd slurmctld munged; do
    pidfile="$ROOT/run/$name.pid"
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile")
    if kill "$pid" 2>/dev/null; then
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            say "$name ($pid) did not stop in 10 s; killing it"
            kill -9 "$pid" 2>/dev/null
        fi
        say "stopped $name ($pid)"
    fi
    rm -f "$pidfile"
done

if [[ -L $CONF && $(readlink "$CONF") == "$ROOT/etc/slurm.conf" ]]; then
    rm -f "$CONF"
fi

if grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null; then
    tmp=$(mktemp)
    grep -vF "$HOSTS_MARK" /etc/hosts > "$tmp"
    cat "$tmp" > /etc/hosts     # in place, as slurm-up.sh wrote it
    rm -f "$tmp"
    say "removed the /etc/hosts line slurm-up.sh added"
fi
say "done (logs stay in $ROOT/log)"
exit 0
