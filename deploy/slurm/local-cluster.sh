#!/usr/bin/env bash
# A Slurm cluster of this one machine, for trying the recipes here: munged, slurmctld
# and slurmd from Debian's packages (installed when missing), all state in one folder.
#   deploy/slurm/local-cluster.sh start    # as root; prints the SLURM_CONF to export
#   deploy/slurm/local-cluster.sh status   # exit 0 when the node answers
#   deploy/slurm/local-cluster.sh stop     # cancels the jobs, stops the daemons, cleans up
# SPARCML_SLURM_DIR: the folder (default /tmp/sparcml-slurm). Ports 6817 and 6818.
set -euo pipefail
DIR="${SPARCML_SLURM_DIR:-/tmp/sparcml-slurm}"
export SLURM_CONF="$DIR/slurm.conf"
PACKAGES=(slurmctld slurmd slurm-client munge)

say() { echo "local-cluster: $*" >&2; }
fail() { say "$*"; exit 1; }

running() {
    [ -f "$SLURM_CONF" ] \
        && timeout 10 sinfo -h -N -o %T 2> /dev/null | grep -qxE 'idle|mixed|allocated|completing'
}

install_packages() {
    command -v slurmctld > /dev/null && command -v slurmd > /dev/null \
        && command -v sbatch > /dev/null && command -v munged > /dev/null && return
    say "installing ${PACKAGES[*]}"
    local apt=(apt-get -q -y --no-install-recommends -o DPkg::Lock::Timeout=60 install)
    export DEBIAN_FRONTEND=noninteractive
    "${apt[@]}" "${PACKAGES[@]}" > "$DIR/apt.log" 2>&1 \
        || { apt-get -q -o DPkg::Lock::Timeout=60 update >> "$DIR/apt.log" 2>&1 \
            && "${apt[@]}" "${PACKAGES[@]}" >> "$DIR/apt.log" 2>&1; } \
        || fail "cannot install ${PACKAGES[*]}: $(tail -n 1 "$DIR/apt.log")"
}

configure() {
    local node
    node="$(slurmd -C | head -n 1)"  # NodeName=HOST CPUs=... RealMemory=...
    cat > "$SLURM_CONF" << EOF
ClusterName=sparcml
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job may start again cred_expire seconds after it stopped (Slurm's default: 120)
AuthInfo=socket=$DIR/run/munge.socket,cred_expire=5
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/slurmctld
SlurmdSpoolDir=$DIR/slurmd
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# no cgroups needed: processes are tracked by their parent, tasks not bound to cores
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# look at pending jobs every few seconds, so that a requeued job starts soon
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobRequeue=1
KillWait=10
ReturnToService=2
MailProg=/bin/true
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    [ "$(id -u)" -eq 0 ] || fail "must run as root (the daemons run as root)"
    if running; then
        say "already running"
        echo "export SLURM_CONF=$SLURM_CONF"
        return
    fi
    stop_daemons
    for port in 6817 6818; do
        if (: > "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then
            fail "port $port is taken (another Slurm daemon?): stop that first"
        fi
    done
    rm -rf "$DIR"
    mkdir -p "$DIR"/{munge,run,log,slurmctld,slurmd}
    # munged: its key and logs private, its socket folder open to every user
    chmod 700 "$DIR/munge"
    chmod 755 "$DIR" "$DIR/run"
    install_packages
    head -c 1024 /dev/urandom > "$DIR/munge/munge.key"
    chmod 600 "$DIR/munge/munge.key"
    munged --key-file="$DIR/munge/munge.key" --socket="$DIR/run/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --seed-file="$DIR/munge/munged.seed" \
        --log-file="$DIR/log/munged.log" \
        || fail "munged did not start: $(tail -n 1 "$DIR/log/munged.log")"
    configure
    slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start: $(tail -n 3 "$DIR/log/slurmctld.log")"
    slurmd -f "$SLURM_CONF" || fail "slurmd did not start: $(tail -n 3 "$DIR/log/slurmd.log")"
    for _ in $(seq 60); do
        if running; then
            say "node $(hostname -s) idle"
            echo "export SLURM_CONF=$SLURM_CONF"
            return
        fi
        sleep 0.5
    done
    fail "the node did not become idle in 30 s: $(sinfo -N -h -o '%T %E' 2>&1 || true);" \
        "$(grep -h -E 'error|fatal' "$DIR"/log/slurm*.log | grep -v pmix | tail -n 3)"
}

# Stop the daemons named by pid files in $DIR/run, politely, then not.
stop_daemons() {
    local pids=() pid alive
    for name in slurmd slurmctld munged; do
        pid="$(cat "$DIR/run/$name.pid" 2> /dev/null || true)"
        if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2> /dev/null)" = "$name" ]; then
            pids+=("$pid")
        fi
    done
    [ "${#pids[@]}" -gt 0 ] || return 0
    kill "${pids[@]}" 2> /dev/null || true
    for _ in $(seq 100); do
        alive=0
        for pid in "${pids[@]}"; do
            ! kill -0 "$pid" 2> /dev/null || alive=1
        done
        [ "$alive" -eq 1 ] || return 0
        sleep 0.1
    done
    kill -9 "${pids[@]}" 2> /dev/null || true
}

stop() {
    if running; then
        scancel --full --quiet --partition=local 2> /dev/null || true
        for _ in $(seq 60); do
            [ -z "$(squeue -h -o %i 2> /dev/null)" ] && break
            sleep 0.5
        done
    fi
    stop_daemons
    rm -rf "$DIR"
    say "stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status)
        if running; then
            sinfo -N
        else
            say "not running"
            exit 3
        fi
        ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
