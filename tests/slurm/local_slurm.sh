# A Slurm cluster for the tests, from Debian's slurm-wlm and munge: munged,
# slurmctld and slurmd with their state, sockets, logs and pid files under a
# temporary folder (proctrack/linuxproc, task/none, no accounting), started by
# start_slurm (this host as one node) or start_slurm_two_nodes (the two
# network namespaces of tests/nodes/two_nodes.sh as two nodes) and stopped by
# pid by stop_slurm. Sourced; sets SLURM_CONF for the clients (srun, sbatch,
# squeue, scontrol).
#
#   source tests/slurm/local_slurm.sh; start_slurm DIR; ...; stop_slurm

slurm_missing() {  # what is not installed, if anything
    local p
    for p in munged slurmctld slurmd srun sbatch squeue scontrol; do
        command -v "$p" >/dev/null || { echo "$p"; return; }
    done
}

# slurm_conf DIR CONTROLLER NODE_LINES...: the cluster's slurm.conf, state and logs under DIR.
slurm_conf() {
    local dir=$1 controller=$2
    shift 2
    local base=$((20000 + $$ % 9000))  # 20000-29000: below the 30000+ the tests give their jobs' stores
    cat >"$dir/slurm.conf" <<CONF
ClusterName=levers-test
SlurmctldHost=$controller
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
$(printf '%s\n' "$@")
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
    export SLURM_CONF=$dir/slurm.conf
}

start_munge() {
    local dir=$1
    mkdir -p "$dir"/{munge,state,spool,log}
    chmod 700 "$dir/munge"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
    munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
}

# wait_idle NODES [COMMAND PREFIX...]: until sinfo shows NODES idle nodes.
wait_idle() {
    local want=$1 i
    shift
    for i in $(seq 100); do
        [ "$("$@" sinfo -h -N -o %t 2>/dev/null | grep -c '^idle')" -ge "$want" ] && return 0  # a line per node
        sleep 0.2
    done
    echo "the local Slurm did not come up; its logs:"
    tail -n 20 "$slurm_dir"/log/*.log
    return 1
}

start_slurm() {
    slurm_dir=$1
    local host; host=$(hostname -s)
    start_munge "$slurm_dir"
    mkdir -p "$slurm_dir/spool/$host"
    slurm_conf "$slurm_dir" "$host" "NodeName=$host CPUs=$(nproc) State=UNKNOWN"
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    wait_idle 1
}

# The same on the two nodes of tests/nodes/two_nodes.sh (after make_two_nodes):
# slurmctld on node 0, a slurmd in each node's network namespace, with that
# node's private /dev/shm (nsenter keeps the host's /sys, where the cgroups
# slurmd reads are mounted). The clients run on node 0: `on_node0 srun ...`.
start_slurm_two_nodes() {
    slurm_dir=$1
    start_munge "$slurm_dir"
    mkdir -p "$slurm_dir/spool/nodea" "$slurm_dir/spool/nodeb"
    slurm_conf "$slurm_dir" "$(hostname -s)($node_master)" \
        "NodeName=nodea NodeAddr=$node_master CPUs=$(nproc) State=UNKNOWN" \
        "NodeName=nodeb NodeAddr=${node_master%.1}.2 CPUs=$(nproc) State=UNKNOWN"
    on_node0 slurmctld -f "$SLURM_CONF"
    local n ns
    for n in a b; do
        ns=$([ $n = a ] && echo "$node_a" || echo "$node_b")
        nsenter --net="/run/netns/$ns" unshare --mount --propagation private \
            bash -c "mount -t tmpfs tmpfs /dev/shm; exec slurmd -f '$SLURM_CONF' -N node$n"
    done
    wait_idle 2 on_node0
}

on_node0() { ip netns exec "$node_a" "$@"; }

stop_slurm() {
    [ -n "${slurm_dir:-}" ] || return 0
    local f pid
    for f in "$slurm_dir"/slurmd.*.pid "$slurm_dir/slurmctld.pid" "$slurm_dir/munge/munged.pid"; do
        pid=$(cat "$f" 2>/dev/null) || continue
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
}
