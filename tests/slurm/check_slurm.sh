#!/bin/bash
# A real Slurm on this host (local_slurm.sh: Debian's slurmctld, slurmd and
# munge), started and stopped here:
#   - the SLURM_* variables levers maps are the ones srun really sets, and
#     levers reads each rank's place from them as Slurm means it;
#   - `srun -n 2 recipe run pretrain` and an sbatch job end bitwise as
#     `recipe run pretrain --gpus 2`;
#   - `recipe submit` (and `recipe status` listing it): result.json equal to
#     a local run's; with --restarts 1 and a rank killed mid-run, the job
#     starts again from its newest checkpoint and still ends bitwise;
#   - on two nodes (the network namespaces of tests/nodes/two_nodes.sh, a
#     slurmd in each), `srun -N 2 -n 4 recipe run pretrain` ends within 1e-6
#     of four ranks on one node, Gloo between the nodes, and `recipe submit
#     --nodes 2` as srun does.
#
#   check_slurm.sh RECIPE_BIN TEST_RECIPES_BIN
set -euo pipefail
recipe=$(realpath "$1") test_recipes=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../needs_data.sh"
source "$here/local_slurm.sh"
source "$here/../nodes/two_nodes.sh"
missing=$(slurm_missing)
[ -z "$missing" ] || { echo "skipped: needs Slurm and munge (Debian's slurm-wlm and munge): $missing is missing"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skipped: the local Slurm runs its daemons as root"; exit 77; }
needs_data books

work=$(mktemp -d)
trap 'stop_slurm; remove_two_nodes; rm -rf "$work"' EXIT
start_slurm "$work/slurm"
export MASTER_PORT=$((30000 + $$ % 10000))  # srun's ranks meet there (srun passes the environment on)
cd "$work"

tiny=(--threads 1 --set n_layer=1 --set n_embd=16 --set n_head=2 --set block_size=16 --set batch_size=2
      --set eval_batches=2 --set sample_tokens=0 --set warmup=2 --set log_every=10 --set eval_every=20)

# The same training, to the last bit: the results but for their clocks, and every logged step.
same_training() {
    python3 - "$@" <<'PY'
import json, sys
a, b = sys.argv[1:3]
def result(d):
    r = json.load(open(d + "/result.json"))
    # Clocks, and memory peaks: a restarted process also held the checkpoint it read.
    for clock in ("seconds", "items_per_second", "tokens_per_second", "time_split", "peak_rss_mb", "peak_memory_mb",
                  "resumed_from"):
        r.pop(clock, None)
    return r
def curve(d):
    return [",".join(line.split(",")[:4]) for line in open(d + "/metrics.csv")]
if result(a) != result(b):
    sys.exit(f"{b} ended otherwise than {a}:\n{result(a)}\n{result(b)}")
if curve(a) != curve(b):
    sys.exit(f"{b} logged other steps than {a}")
print(f"{b}: the same training as {a} (loss {result(a)['loss']!r})")
PY
}

# 1. The variables: what srun sets, and how levers reads them.
for layout in "-n 2" "-n 2 --ntasks-per-node=2"; do
    srun $layout bash -c 'echo "$SLURM_PROCID $SLURM_NTASKS $SLURM_LOCALID $SLURM_STEP_TASKS_PER_NODE $SLURM_NODEID ${SLURM_NTASKS_PER_NODE:-unset}"' |
        sort >vars.txt
    srun $layout "$test_recipes" run rank_env --threads 1 --out "env$RANDOM" | tail -n 1 >rank_env.json
    python3 - vars.txt rank_env.json "$layout" <<'PY'
import json, sys
lines = [l.split() for l in open(sys.argv[1])]
seen = json.loads(open(sys.argv[2]).read())["ranks"]
want = [[float(p), float(n), float(l), float(t)] for p, n, l, t, node, per in lines]
seen = [r[:4] for r in seen]  # rank, world, local rank, local world (then the threads)
print(f"srun {sys.argv[3]}: SLURM_PROCID, NTASKS, LOCALID, STEP_TASKS_PER_NODE, NODEID, NTASKS_PER_NODE = {lines}")
if seen != want:
    sys.exit(f"levers read the ranks as {seen}, Slurm meant {want}")
PY
done

# 2. srun and sbatch against recipe run --gpus 2.
"$recipe" run pretrain --gpus 2 "${tiny[@]}" --set steps=40 --out local >local.out 2>&1 || { cat local.out; exit 1; }
srun -n 2 "$recipe" run pretrain "${tiny[@]}" --set steps=40 --out srun >srun.out 2>&1 || { cat srun.out; exit 1; }
grep -q 'rank 0 of 2 started by slurm, joined through shared memory' srun.out || { cat srun.out; exit 1; }
same_training local srun
cat >job.sbatch <<SCRIPT
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --output=$work/sbatch.out
srun $recipe run pretrain ${tiny[*]} --set steps=40 --out $work/sbatch
SCRIPT
sbatch --wait --parsable job.sbatch >/dev/null || { cat sbatch.out; exit 1; }
same_training local sbatch

# 3. recipe submit, and recipe status while it is queued or running.
"$recipe" submit pretrain --gpus 2 "${tiny[@]}" --set steps=40 --out submitted >submit.out 2>&1 || { cat submit.out; exit 1; }
cat submit.out
job=$(sed -n 's/.*submitted to Slurm as job \([0-9]*\).*/\1/p' submit.out)
[ -n "$job" ] || { echo "recipe submit printed no job id"; exit 1; }
grep -q "run directory $work/submitted" submit.out || { echo "recipe submit printed no run directory"; exit 1; }
"$recipe" status >status.out
grep -q "^  $job levers-pretrain " status.out || { echo "recipe status does not list job $job:"; cat status.out; exit 1; }
wait_job() {  # wait_job ID [COMMAND PREFIX...]: until Slurm job ID has left the queue
    local job=$1 start=$SECONDS
    shift
    while "$@" squeue -h -j "$job" 2>/dev/null | grep -q .; do
        [ $((SECONDS - start)) -le 180 ] || { echo "Slurm job $job did not end within 180 s"; return 1; }
        sleep 0.2
    done
}
wait_job "$job"
[ -f submitted/result.json ] || { echo "the submitted job wrote no result:"; cat submitted/slurm-*.out; exit 1; }
same_training local submitted

# 4. A submitted job with --restarts 1 whose rank is killed once mid-run.
long=(--set steps=3000 --set checkpoint_every=500 --set eval_every=1000 --set log_every=100)
"$recipe" run pretrain --gpus 2 "${tiny[@]}" "${long[@]}" --out long >long.out 2>&1 || { cat long.out; exit 1; }
"$recipe" submit pretrain --gpus 2 "${tiny[@]}" "${long[@]}" --restarts 1 --out restarted >submit2.out 2>&1 ||
    { cat submit2.out; exit 1; }
job=$(sed -n 's/.*submitted to Slurm as job \([0-9]*\).*/\1/p' submit2.out)
start=$SECONDS
until [ -f restarted/checkpoints/step-00000500.ckpt ]; do
    [ $((SECONDS - start)) -le 120 ] || { echo "the job wrote no checkpoint"; cat restarted/slurm-*.out; exit 1; }
    sleep 0.01
done
victim=$(pgrep -f -- "^$recipe run pretrain .*steps=3000" | sort -n | tail -n 1)
kill -9 "$victim"
wait_job "$job"
grep -q 'restart 1 of 1, from .*step-' restarted/slurm-*.out || { echo "the job did not restart:"; cat restarted/slurm-*.out; exit 1; }
same_training long restarted
echo "Slurm: srun, sbatch and recipe submit train as recipe run does; a killed rank restarts the job from its checkpoint"

# 5. Two nodes, a slurmd in each network namespace.
stop_slurm
if ! [ -e "$(dirname "$recipe")/liblevers_gloo.so" ]; then
    echo "not run on two nodes: this build has no Gloo backend"
elif ! make_two_nodes; then
    echo "not run on two nodes (see above)"
else
    start_slurm_two_nodes "$work/slurm2"
    "$recipe" run pretrain --gpus 4 "${tiny[@]}" --set steps=40 --out one4 >one4.out 2>&1 || { cat one4.out; exit 1; }
    on_node0 env MASTER_ADDR="$node_master" srun -N 2 -n 4 "$recipe" run pretrain "${tiny[@]}" --set steps=40 \
        --out "$work/nodes" >nodes.out 2>&1 || { cat nodes.out; exit 1; }
    grep -q 'rank 0 of 4 started by slurm, joined through shared memory within 2 nodes, Gloo (TCP) between them' \
        nodes.out || { echo "the two-node Slurm job did not join through Gloo:"; cat nodes.out; exit 1; }
    python3 "$here/../nodes/within_1e6.py" one4/result.json nodes/result.json "srun -N 2 -n 4"
    # recipe submit --nodes 2: the same job through its own sbatch script.
    on_node0 "$recipe" submit pretrain --nodes 2 --gpus 2 "${tiny[@]}" --set steps=40 --out "$work/submit2" \
        >submit3.out 2>&1 || { cat submit3.out; exit 1; }
    job=$(sed -n 's/.*submitted to Slurm as job \([0-9]*\).*/\1/p' submit3.out)
    grep -q "(2 nodes x 2 ranks)" submit3.out || { cat submit3.out; exit 1; }
    wait_job "$job" on_node0
    [ -f submit2/result.json ] || { echo "the two-node submitted job wrote no result:"; cat submit2/slurm-*.out; exit 1; }
    python3 - nodes/result.json submit2/result.json <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
if (a["loss"], a["val_loss"]) != (b["loss"], b["val_loss"]):
    sys.exit(f"recipe submit --nodes 2 ended at {b['loss']!r}, srun -N 2 at {a['loss']!r}")
print(f"recipe submit --nodes 2: the same loss as srun -N 2 -n 4 ({b['loss']!r})")
PY
fi
