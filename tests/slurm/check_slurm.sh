#!/bin/bash
# A real Slurm on this host (local_slurm.sh: Debian's slurmctld, slurmd and
# munge), started and stopped here:
#   - the SLURM_* variables levers maps are the ones srun really sets, and
#     levers reads each rank's place from them as Slurm means it;
#   - `srun -n 2 recipe run pretrain` and an sbatch job end bitwise as
#     `recipe run pretrain --gpus 2`;
#   - `recipe submit` (and `recipe status` listing it): result.json equal to
#     a local run's; with --restarts 1 and a rank killed mid-run, the job
#     starts again from its newest checkpoint and still ends bitwise.
#
#   check_slurm.sh RECIPE_BIN TEST_RECIPES_BIN
set -euo pipefail
recipe=$(realpath "$1") test_recipes=$(realpath "$2")
here=$(dirname "$0")
source "$here/../needs_data.sh"
source "$here/local_slurm.sh"
missing=$(slurm_missing)
[ -z "$missing" ] || { echo "skipped: needs Slurm and munge (Debian's slurm-wlm and munge): $missing is missing"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skipped: the local Slurm runs its daemons as root"; exit 77; }
needs_data books

work=$(mktemp -d)
trap 'stop_slurm; rm -rf "$work"' EXIT
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
    for clock in ("seconds", "items_per_second", "tokens_per_second", "time_split", "peak_rss_mb", "resumed_from"):
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
wait_job() {
    local start=$SECONDS
    while squeue -h -j "$1" 2>/dev/null | grep -q .; do
        [ $((SECONDS - start)) -le 180 ] || { echo "Slurm job $1 did not end within 180 s"; return 1; }
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
