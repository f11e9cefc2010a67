#!/usr/bin/env bash
# A single-node Slurm cluster on localhost, for the tests that drive the workflow through
# `snakemake --profile profiles/slurm` (snakemake-executor-plugin-slurm). Debian/Ubuntu,
# as root, no systemd needed.
#
#   bash .ci/slurm.sh install   # munge, slurmctld, slurmd, slurm-client from apt
#   bash .ci/slurm.sh up        # write /etc/slurm/*.conf, start the daemons, wait until the node is idle
#   bash .ci/slurm.sh down      # stop exactly the PIDs that `up` recorded (never pkill)
#
# Facts it relies on (observed with slurm-wlm 22.05 and plugin 2.8):
#  - slurm.conf must be at /etc/slurm/slurm.conf: the jobstep plugin strips SLURM_CONF.
#  - no slurmdbd, so no sacct: profiles/slurm sets slurm-status-command: squeue, and
#    MinJobAge stays >= 3 x slurm-init-seconds-before-status-checks.
#  - a fake GPU needs a character device in gres.conf (File=/dev/null); jobs asking for a
#    GPU then get CUDA_VISIBLE_DEVICES=0.
#  - DefMemPerCPU is set, or jobs without --mem take the whole node and run one at a time.
# Env: SLURMCI_ROOT (state, logs, pids; default /tmp/ptb-slurmci), NODE_CPUS (advertised
# CPUs, default 8, so several jobs run at once on a 2-core machine).
set -euo pipefail

ROOT=${SLURMCI_ROOT:-/tmp/ptb-slurmci}
NODE_CPUS=${NODE_CPUS:-8}
PIDS=$ROOT/pids
NODE=$(hostname -s)

log() { echo "[slurm.sh] $*" >&2; }

wait_for() { # wait_for SECONDS WHAT CMD...
    local limit=$1 what=$2 t0=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS - t0 >= limit)); then
            log "timeout waiting for $what"
            return 1
        fi
        sleep 0.2
    done
    log "$what: ready after $((SECONDS - t0)) s"
}

do_install() {
    export DEBIAN_FRONTEND=noninteractive
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client >/dev/null
    fi
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
}

write_config() {
    local real_mem
    real_mem=$(($(free -m | awk '/^Mem:/{print $2}') - 1024))
    mkdir -p /etc/slurm
    cat >/etc/slurm/slurm.conf <<EOF
ClusterName=ptbci
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${ROOT}/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=300
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldPidFile=${ROOT}/run/slurmctld.pid
SlurmdPidFile=${ROOT}/run/slurmd.pid
StateSaveLocation=${ROOT}/state/ctld
SlurmdSpoolDir=${ROOT}/state/d
SlurmctldLogFile=${ROOT}/log/slurmctld.log
SlurmdLogFile=${ROOT}/log/slurmd.log
GresTypes=gpu
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${NODE_CPUS} RealMemory=${real_mem} Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
EOF
    echo "NodeName=${NODE} Name=gpu File=/dev/null" >/etc/slurm/gres.conf
}

do_up() {
    if [ -s "$PIDS" ]; then
        local name pid alive=0
        while read -r name pid; do
            if kill -0 "$pid" 2>/dev/null; then alive=1; fi
        done <"$PIDS"
        if [ "$alive" = 1 ]; then
            log "$PIDS lists running daemons: run 'down' first"
            exit 1
        fi
        log "discarding $PIDS: none of its daemons is running (a stopped machine or session)"
        rm -f "$PIDS"
    fi
    if scontrol ping 2>/dev/null | grep -q ' is UP'; then
        log "a slurmctld already answers on this machine; not starting a second one"
        exit 1
    fi
    rm -rf "$ROOT/state" "$ROOT/run"
    mkdir -p "$ROOT/state/ctld" "$ROOT/state/d" "$ROOT/log" "$ROOT/run"
    write_config
    : >"$PIDS"
    install -d -o munge -g munge -m 0755 /run/munge
    # foreground daemons, so that $! is the daemon itself
    setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F >"$ROOT/log/munged.out" 2>&1 &
    echo "munged $!" >>"$PIDS"
    wait_for 15 munged bash -c 'munge -n | unmunge'
    /usr/sbin/slurmctld -D -i >"$ROOT/log/slurmctld.out" 2>&1 &
    echo "slurmctld $!" >>"$PIDS"
    wait_for 30 slurmctld bash -c "scontrol ping | grep -q ' is UP'"
    /usr/sbin/slurmd -D >"$ROOT/log/slurmd.out" 2>&1 &
    echo "slurmd $!" >>"$PIDS"
    if ! wait_for 60 "node ${NODE} idle" bash -c "[ \"\$(sinfo -h -N -n ${NODE} -o %T)\" = idle ]"; then
        scontrol show node "$NODE" >&2 || true
        tail -n 20 "$ROOT/log/slurmctld.log" "$ROOT/log/slurmd.log" >&2 || true
        exit 1
    fi
    srun -N1 -n1 true
    log "cluster up; pids: $(tr '\n' ' ' <"$PIDS")"
}

do_down() {
    [ -s "$PIDS" ] || {
        log "no $PIDS: nothing to stop"
        return 0
    }
    local name pid n
    tac "$PIDS" | while read -r name pid; do
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            for ((n = 0; n < 150; n++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
            log "stopped $name ($pid)"
        fi
    done
    rm -f "$PIDS"
}

case "${1:-}" in
install) do_install ;;
up) do_up ;;
down) do_down ;;
*)
    echo "usage: $0 install|up|down" >&2
    exit 2
    ;;
esac
