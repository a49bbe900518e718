#!/usr/bin/env bash
# Start a throwaway single-node SLURM cluster on this machine, bound to loopback only, for the
# workflow's SLURM test (tests/workflow/test_slurm.py) and for trying `--profile profiles/slurm`.
#
#   sudo scripts/slurm-up.sh            # start (installs slurmctld, slurmd, slurm-client, munge if missing)
#   sudo scripts/slurm-down.sh          # stop and clean up
#
# Needs root and Debian (apt). One node with all CPUs, one default partition, no accounting
# database: job status comes from `squeue` (profiles/slurm sets `slurm-status-command: squeue`) and
# finished jobs stay visible to `squeue`/`scontrol show job` for MinJobAge seconds and in the
# job-completion file (`scontrol show config | grep JobCompLoc`).
#
# Environment:
#   SLURM_ROOT       scratch folder for config, keys, state and logs
#                    (default: ${TMPDIR:-/tmp}/schemashift-slurm); slurm-down.sh finds it by itself.
#   SLURM_FIX_HOSTS  the daemons bind the address the hostname resolves to, which must be 127.x.
#                    If it is not, the script stops, unless SLURM_FIX_HOSTS=1 (CI sets it): then it
#                    puts "127.0.0.1 <hostname>" first in /etc/hosts (slurm-down.sh takes it out again).
#
# The cluster's config must live at /etc/slurm/slurm.conf (job steps drop SLURM_CONF from their
# environment), so this script links it there and refuses to replace a config it did not write.
set -euo pipefail

started=$SECONDS
ROOT=${SLURM_ROOT:-${TMPDIR:-/tmp}/schemashift-slurm}
CONF=/etc/slurm/slurm.conf
HOSTS_MARK="# added by schemashift scripts/slurm-up.sh"
PKGS=(slurmctld slurmd slurm-client munge)

say() { echo "slurm-up: $*"; }
die() { echo "slurm-up: error: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (it installs packages and starts slurmctld, slurmd and munged)"
mkdir -p "$ROOT"
ROOT=$(cd "$ROOT" && pwd -P)

# Already up (ours, answering): nothing to do.
if [[ -L $CONF && $(readlink "$CONF") == "$ROOT/etc/slurm.conf" ]] \
    && timeout 10 sinfo -h -o %T 2>/dev/null | grep -qx idle; then
    say "cluster already up (config $ROOT/etc/slurm.conf)"
    exit 0
fi
if [[ -e $CONF || -L $CONF ]] && [[ $(readlink "$CONF" 2>/dev/null) != "$ROOT/etc/slurm.conf" ]]; then
    die "$CONF exists and was not written by this script; not touching a real cluster's config"
fi
for f in "$ROOT"/run/*.pid; do
    [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null \
        && die "a daemon from an earlier start still runs ($f); run scripts/slurm-down.sh first"
done

# Packages. policy-rc.d keeps apt from starting the distribution's own munge/slurm services.
if ! dpkg -s "${PKGS[@]}" >/dev/null 2>&1; then
    say "installing ${PKGS[*]}"
    t=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    policy=/usr/sbin/policy-rc.d
    added_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && added_policy=1
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
    [[ $added_policy -eq 1 ]] && rm -f "$policy"
    say "installed in $((SECONDS - t)) s"
fi

# The hostname must resolve to loopback: slurmd binds (NoInAddrAny) the address its name resolves to.
HOST=$(hostname -s)
resolve() { getent ahostsv4 "$HOST" | awk 'NR==1{print $1}'; }
ADDR=$(resolve || true)
if [[ $ADDR != 127.* ]]; then
    if [[ ${SLURM_FIX_HOSTS:-0} != 1 ]]; then
        die "hostname $HOST resolves to '${ADDR:-nothing}', not 127.x; the cluster would listen there.
  Add '127.0.0.1 $HOST' as the first line of /etc/hosts, or rerun with SLURM_FIX_HOSTS=1 to let this script do it."
    fi
    say "hostname $HOST resolves to '${ADDR:-nothing}'; putting '127.0.0.1 $HOST' first in /etc/hosts (SLURM_FIX_HOSTS=1)"
    tmp=$(mktemp)
    { printf '127.0.0.1 %s %s\n' "$HOST" "$HOSTS_MARK"; cat /etc/hosts; } > "$tmp"
    cat "$tmp" > /etc/hosts     # in place: /etc/hosts is often a bind mount that cannot be renamed over
    rm -f "$tmp"
    ADDR=$(resolve || true)
    [[ $ADDR == 127.* ]] || die "hostname $HOST still resolves to '${ADDR:-nothing}' after editing /etc/hosts"
fi

# A fresh state every start: no jobs or node state survive from an earlier cluster.
rm -rf "$ROOT/state" "$ROOT/spool" "$ROOT/log" "$ROOT/run"
mkdir -p "$ROOT"/{etc,munge,state,spool,log,run}
chmod 755 "$ROOT/munge"     # munged wants o+x on its socket folder
if [[ ! -f $ROOT/munge/munge.key ]]; then
    dd if=/dev/urandom of="$ROOT/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$ROOT/munge/munge.key"
fi
SOCK="$ROOT/munge/munge.socket.2"
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) - 1024 ))

cat > "$ROOT/etc/slurm.conf" <<EOF
# Written by scripts/slurm-up.sh: a single-node test cluster on loopback. Do not use for real work.
ClusterName=schemashift
SlurmctldHost=$HOST($ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool/slurmd-%n
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
ReturnToService=2
MpiDefault=none
# Finished jobs stay in squeue / scontrol for 10 minutes: the status checks read them there.
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc=$ROOT/log/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$HOST NodeAddr=$ADDR CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
mkdir -p /etc/slurm
ln -sfn "$ROOT/etc/slurm.conf" "$CONF"

munged --socket="$SOCK" --key-file="$ROOT/munge/munge.key" --pid-file="$ROOT/run/munged.pid" \
    --log-file="$ROOT/log/munged.log" --seed-file="$ROOT/munge/munged.seed"
slurmctld
slurmd

for _ in $(seq 120); do
    [[ $(timeout 10 sinfo -h -o %T 2>/dev/null) == idle ]] && break
    sleep 0.5
done
if [[ $(timeout 10 sinfo -h -o %T 2>/dev/null) != idle ]]; then
    echo "slurm-up: error: the node did not become idle within 60 s; log tails follow" >&2
    for log in munged slurmctld slurmd; do
        echo "--- $ROOT/log/$log.log" >&2
        tail -n 20 "$ROOT/log/$log.log" >&2 2>/dev/null || true
    done
    exit 1
fi
sinfo
say "cluster up in $((SECONDS - started)) s (node $HOST at $ADDR, $CPUS CPUs, ${MEM} MB; state in $ROOT)"
