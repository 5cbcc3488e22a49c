# A Slurm cluster of this one host for the tests, from Debian's slurm-wlm and
# munge: munged, slurmctld and slurmd with their state, sockets, logs and pid
# files under a temporary folder (proctrack/linuxproc, task/none, no
# accounting), started by start_slurm and stopped by pid by stop_slurm.
# Sourced; sets SLURM_CONF for the clients (srun, sbatch, squeue, scontrol).
#
#   source tests/slurm/local_slurm.sh; start_slurm DIR; ...; stop_slurm

slurm_missing() {  # what is not installed, if anything
    local p
    for p in munged slurmctld slurmd srun sbatch squeue scontrol; do
        command -v "$p" >/dev/null || { echo "$p"; return; }
    done
}

start_slurm() {
    slurm_dir=$1
    local host; host=$(hostname -s)
    local cpus; cpus=$(nproc)
    mkdir -p "$slurm_dir"/{munge,state,spool,log}
    chmod 700 "$slurm_dir/munge"
    dd if=/dev/urandom of="$slurm_dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$slurm_dir/munge/munge.key"
    munged --force --key-file="$slurm_dir/munge/munge.key" --socket="$slurm_dir/munge/socket" \
        --pid-file="$slurm_dir/munge/munged.pid" --log-file="$slurm_dir/log/munged.log" \
        --seed-file="$slurm_dir/munge/seed"
    local base=$((20000 + $$ % 9000))  # 20000-29000: below the 30000+ the tests give their jobs' stores
    cat >"$slurm_dir/slurm.conf" <<CONF
ClusterName=levers-test
SlurmctldHost=$host
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/log/slurmctld.log
SlurmdLogFile=$slurm_dir/log/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
    export SLURM_CONF=$slurm_dir/slurm.conf
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    local i
    for i in $(seq 100); do
        sinfo -h -o %t 2>/dev/null | grep -q '^idle' && return 0
        sleep 0.2
    done
    echo "the local Slurm did not come up; its logs:"
    tail -n 20 "$slurm_dir"/log/*.log
    return 1
}

stop_slurm() {
    [ -n "${slurm_dir:-}" ] || return 0
    local f pid
    for f in slurmd.pid slurmctld.pid munge/munged.pid; do
        pid=$(cat "$slurm_dir/$f" 2>/dev/null) || continue
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
}
