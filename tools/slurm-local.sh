#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, to try profiles/slurm without a cluster.
#
#   tools/slurm-local.sh start    install (as root, with apt) and start munge, MariaDB, slurmdbd,
#                                 slurmctld and slurmd; idempotent: starts only what is not running
#   tools/slurm-local.sh status   one line per daemon, the partitions and jobs; exit 0 when all run
#   tools/slurm-local.sh stop     cancel every job, stop every daemon; nothing of it keeps running
#   tools/slurm-local.sh env      the line to eval for sbatch, sacct, snakemake --profile profiles/slurm:
#                                 eval "$(tools/slurm-local.sh env)"
#
# One node (this machine's CPUs and memory, as `slurmd -C` reports them), partition `cpu` (the
# default) and, when nvidia-smi lists GPUs, partition `gpu` with gres gpu:N.  Accounting through
# slurmdbd and MariaDB (the executor plugin asks `sacct` for job states).  Every daemon listens on
# 127.0.0.1 only (munge on a unix socket); every file (configs, munge key, database, spool, logs,
# pid files) lies under $RAGMI_SLURM_DIR (default ${TMPDIR:-/tmp}/ragmi-slurm); the ports are
# $RAGMI_SLURM_PORT .. +3 (default 16817: slurmctld, slurmd, slurmdbd, MariaDB).
#
# Process tracking is proctrack/linuxproc (no cgroups needed): SLURM signals a job's process tree,
# so a process that a job detaches and leaves behind stays visible (tests/test_slurm_e2e.py looks).
# Exit status: 0 done, 1 failure, 2 cannot start here (not root, or SLURM missing and no apt-get).
set -euo pipefail

STATE="${RAGMI_SLURM_DIR:-${TMPDIR:-/tmp}/ragmi-slurm}"
BASE_PORT="${RAGMI_SLURM_PORT:-16817}"
CTLD_PORT=$BASE_PORT
SLURMD_PORT=$((BASE_PORT + 1))
DBD_PORT=$((BASE_PORT + 2))
DB_PORT=$((BASE_PORT + 3))
CLUSTER=ragmi
ACCOUNT=ragmi
NODE="$(hostname -s)"
ME="$(id -un)"
MUNGE_SOCK="$STATE/munge/munge.socket"
DB_SOCK="$STATE/run/mariadb.sock"
export SLURM_CONF="$STATE/etc/slurm.conf"
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)

say() { echo "slurm-local: $*"; }
die() {
    echo "slurm-local: $*" >&2
    exit 1
}

# ---- processes: a daemon is running when its pid file names a live process of that program ----
pid_of() { # name -> pid or nothing
    local f="$STATE/run/$1.pid" pid
    [ -s "$f" ] || return 0
    pid="$(tr -dc 0-9 <"$f")"
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 0
    case "$(cat "/proc/$pid/comm")" in "$1" | "$1"*) echo "$pid" ;; esac
}
running() { [ -n "$(pid_of "$1")" ]; }

wait_for() { # seconds description command... : poll until the command succeeds
    local t=$1 what=$2
    shift 2
    for ((i = 0; i < t * 4; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.25
    done
    die "$what did not come up within ${t}s; see $STATE/log/"
}

stop_pid() { # name: SIGTERM, then SIGKILL after 30 s
    local pid
    pid="$(pid_of "$1")"
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 120; i++)); do
        [ -d "/proc/$pid" ] || break
        sleep 0.25
    done
    if [ -d "/proc/$pid" ]; then
        say "$1 (pid $pid) ignored SIGTERM for 30 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$STATE/run/$1.pid"
}

# ---- installation ----
have_slurm() {
    command -v slurmctld && command -v slurmd && command -v slurmdbd && command -v sbatch &&
        command -v munged && command -v mariadbd
} >/dev/null 2>&1

install() {
    have_slurm && return 0
    command -v apt-get >/dev/null || {
        echo "slurm-local: SLURM is not installed and there is no apt-get to install it" >&2
        exit 2
    }
    say "installing ${PACKAGES[*]} (apt-get)"
    # the packages' own services stay down: this script runs its own daemons under $STATE
    local policy=/usr/sbin/policy-rc.d added=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added=1
    fi
    local rc=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" ||
            { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"; }
    } >"${TMPDIR:-/tmp}/slurm-local-apt.log" 2>&1 || rc=$?
    [ $added = 1 ] && rm -f "$policy"
    [ $rc = 0 ] || die "apt-get install failed (exit $rc); see ${TMPDIR:-/tmp}/slurm-local-apt.log"
    have_slurm || die "installed, but slurmctld/slurmd/slurmdbd/sbatch/munged/mariadbd are still missing"
}

# ---- configuration (rewritten by every start that finds slurmctld down; keys and database kept) ----
write_configs() {
    mkdir -p "$STATE"/{etc,run,log,munge,ctld,slurmd,mysql}
    # others may submit jobs: slurm.conf and the munge socket are theirs to use, the keys are not
    chmod 755 "$STATE" "$STATE/etc" "$STATE/run"
    chmod 711 "$STATE/munge"
    if [ ! -s "$STATE/munge/munge.key" ]; then
        head -c 1024 /dev/urandom >"$STATE/munge/munge.key"
        chmod 400 "$STATE/munge/munge.key"
    fi
    if [ ! -s "$STATE/etc/db.pass" ]; then
        head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9 >"$STATE/etc/db.pass"
        chmod 600 "$STATE/etc/db.pass"
    fi
    running slurmctld && [ -s "$SLURM_CONF" ] && return 0
    local hw cpus mem gpus=0 gres_line="" gpu_part=""
    hw="$(slurmd -C | head -1)"
    cpus="$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")"
    mem="$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")"
    [ -n "$cpus" ] && [ -n "$mem" ] || die "cannot read CPUs and RealMemory from 'slurmd -C': $hw"
    if command -v nvidia-smi >/dev/null && gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" && [ "$gpus" -gt 0 ]; then
        gres_line="Gres=gpu:$gpus"
        gpu_part="PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP"
    else
        gpus=0
    fi
    rm -f "$STATE/etc/gres.conf"
    cat >"$SLURM_CONF" <<EOF
# written by tools/slurm-local.sh: one node, every daemon on 127.0.0.1, all state under $STATE
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
CredType=cred/munge
SlurmUser=$ME
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
ReturnToService=2
KillWait=10
MinJobAge=300
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=10
# sacct shows the executor plugin's --comment (rule_<rule>_wildcards_<values>)
AccountingStoreFlags=job_comment
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# the munge socket for slurmdbd connections (AuthInfo covers the others)
AccountingStoragePass=$MUNGE_SOCK
$([ "$gpus" -gt 0 ] && echo "GresTypes=gpu" && echo "AccountingStorageTRES=gres/gpu")
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$cpus RealMemory=$mem $gres_line State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
$gpu_part
EOF
    cat >"$STATE/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=$NODE
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
CommunicationParameters=NoInAddrAny
SlurmUser=$ME
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$STATE/etc/db.pass")
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$STATE/etc/slurmdbd.conf"
    chmod 644 "$SLURM_CONF"
    if [ "$gpus" -gt 0 ]; then echo "Name=gpu File=/dev/nvidia[0-$((gpus - 1))]" >"$STATE/etc/gres.conf"; fi
    say "configured node $NODE: $cpus CPUs, $mem MB, $gpus GPUs (under $STATE)"
}

# ---- daemons ----
start_munge() {
    running munged && return 0
    munged --force --key-file="$STATE/munge/munge.key" --socket="$MUNGE_SOCK" \
        --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" \
        --seed-file="$STATE/munge/munge.seed"
    wait_for 20 munged munge --socket="$MUNGE_SOCK" -n
}

sql() { mariadb --no-defaults --socket="$DB_SOCK" -uroot -e "$1"; }

start_mariadb() {
    running mariadbd && return 0
    if [ ! -d "$STATE/mysql/mysql" ]; then
        mariadb-install-db --no-defaults --datadir="$STATE/mysql" --user="$ME" \
            --auth-root-authentication-method=socket --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed; see $STATE/log/mariadb-install.log"
    fi
    setsid mariadbd --no-defaults --datadir="$STATE/mysql" --socket="$DB_SOCK" --bind-address=127.0.0.1 \
        --port="$DB_PORT" --pid-file="$STATE/run/mariadbd.pid" --log-error="$STATE/log/mariadb.log" \
        --user="$ME" --skip-name-resolve --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &
    wait_for 60 MariaDB mariadb-admin --no-defaults --socket="$DB_SOCK" -uroot ping
    wait_for 10 "MariaDB's pid file" running mariadbd
    sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
         CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$STATE/etc/db.pass")';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
}

start_slurmdbd() {
    running slurmdbd || slurmdbd
    wait_for 60 slurmdbd sacctmgr -n list cluster
    if [ -z "$(sacctmgr -n -P list cluster format=cluster where cluster=$CLUSTER)" ]; then
        sacctmgr -i add cluster $CLUSTER >/dev/null
    fi
    if [ -z "$(sacctmgr -n -P list account format=account where name=$ACCOUNT)" ]; then
        sacctmgr -i add account $ACCOUNT Cluster=$CLUSTER Description="ragmi local" Organization=ragmi >/dev/null
    fi
    if [ -z "$(sacctmgr -n -P list user format=user where name="$ME")" ]; then
        sacctmgr -i add user "$ME" DefaultAccount=$ACCOUNT Cluster=$CLUSTER >/dev/null
    fi
}

node_up() { sinfo -h -n "$NODE" -o %t | grep -Eq '^(idle|mix|alloc)'; }

start_slurm() {
    running slurmctld || slurmctld -f "$SLURM_CONF"
    wait_for 60 slurmctld scontrol ping
    running slurmd || slurmd -f "$SLURM_CONF"
    wait_for 10 "slurmd's pid file" running slurmd
    for ((i = 0; i < 240; i++)); do
        node_up && return 0
        # a node left down or drained by an earlier start comes back
        if ((i % 20 == 19)); then scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true; fi
        sleep 0.25
    done
    die "node $NODE is not up: $(sinfo -h -n "$NODE" -o '%t %E'); see $STATE/log/slurmd.log"
}

cmd_start() {
    local t0=$SECONDS
    if [ "$(id -u)" != 0 ]; then
        echo "slurm-local: starting SLURM needs root (slurmd runs every job as its user; apt-get installs it)" >&2
        exit 2
    fi
    install
    write_configs
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurm
    say "up in $((SECONDS - t0)) s: $(sinfo -h -o '%P %D %c %m %G' | tr '\n' ';' | sed 's/;$//')"
    say "use it with: eval \"\$($0 env)\""
}

cmd_stop() {
    if running slurmctld; then
        local jobs
        jobs="$(squeue -h -o %i 2>/dev/null || true)"
        if [ -n "$jobs" ]; then
            say "cancelling jobs: $(echo "$jobs" | tr '\n' ' ')"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for ((i = 0; i < 160; i++)); do
                [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
                sleep 0.25
            done
        fi
    fi
    stop_pid slurmd
    stop_pid slurmctld
    stop_pid slurmdbd
    stop_pid mariadbd
    stop_pid munged
    local left=""
    for d in slurmd slurmctld slurmdbd mariadbd munged; do running $d && left="$left $d"; done
    [ -z "$left" ] || die "still running:$left"
    say "stopped (state kept in $STATE; delete it to start afresh)"
}

cmd_status() {
    local n=0 d pid
    for d in munged mariadbd slurmdbd slurmctld slurmd; do
        pid="$(pid_of $d)"
        if [ -n "$pid" ]; then
            echo "$d: running (pid $pid)"
            n=$((n + 1))
        else
            echo "$d: stopped"
        fi
    done
    if [ $n = 5 ]; then
        sinfo 2>&1 || true
        squeue 2>&1 || true
        return 0
    fi
    [ $n = 0 ] && return 3
    return 1
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) echo "export SLURM_CONF=$SLURM_CONF" ;;
*)
    echo "usage: $0 start|stop|status|env" >&2
    exit 64
    ;;
esac
