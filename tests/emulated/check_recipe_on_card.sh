#!/usr/bin/env bash
# `recipe run pretrain` on emulated cards against the CPU, same settings and
# seed, on one card and on two (two ranks, each a process with its own
# emulated card, gradients averaged through the emulated NCCL while backward
# runs): in f32 a card run must end at the CPU's loss and validation loss
# (1e-5 relative) and sample the same text; in bf16 (the fused attention:
# head size 64) within 2% of them. Whole runs: data, training loop, AdamW
# and clipping on the card, evaluation, checkpoint, sampling. Nothing may be
# left in /dev/shm by the emulated NCCL.
#
#   check_recipe_on_card.sh CPU_RECIPE CARD_RECIPE CORPUS
set -euo pipefail
cpu=$1 card=$2 corpus=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export LEVERS_LEDGER_DIR=$work/ledger XDG_CONFIG_HOME=$work/config
shm_before=$(ls /dev/shm | grep -c '^levers-emulated-nccl-' || true)

args=(run pretrain --set steps=4 --set lr=0.01 --set warmup=1 --set n_layer=1 --set n_embd=64 --set n_head=1 --set block_size=32
      --set batch_size=2 --set eval_every=2 --set eval_batches=1 --set sample_tokens=8 --set corpus="$corpus")
run() {  # NAME COMMAND...: its output in NAME.log
    local name=$1
    shift
    "$@" >"$name.log" 2>&1 || { echo "$name failed:"; cat "$name.log"; exit 1; }
}
run cpu "$cpu" "${args[@]}"
run f32 "$card" "${args[@]}" --device cuda
run bf16 "$card" "${args[@]}" --device cuda --precision bf16
run cpu_x2 "$cpu" "${args[@]}" --gpus 2
LEVERS_EMULATED_CARDS=2 run f32_x2 "$card" "${args[@]}" --gpus 2 --device cuda
LEVERS_EMULATED_CARDS=2 run bf16_x2 "$card" "${args[@]}" --gpus 2 --device cuda --precision bf16
for run in f32 bf16; do
    grep -q 'on card 0 (levers emulated card' "$run.log" || { echo "the $run run did not use the emulated card:"; cat "$run.log"; exit 1; }
    grep -q '2 ranks on cards 0,1 (levers emulated card' "${run}_x2.log" ||
        { echo "the ${run}_x2 run did not use two emulated cards:"; cat "${run}_x2.log"; exit 1; }
done
shm_after=$(ls /dev/shm | grep -c '^levers-emulated-nccl-' || true)
[ "$shm_after" = "$shm_before" ] || { echo "the emulated NCCL left segments in /dev/shm:"; ls /dev/shm; exit 1; }

python3 - <<'PY'
import json, sys
def result(name):
    return json.loads(open(name + '.log', 'rb').read().strip().splitlines()[-1])  # the log's sample is raw bytes
failed = False
for cpu_run, suffix in (('cpu', ''), ('cpu_x2', '_x2')):
    cpu = result(cpu_run)
    for precision, tolerance in (('f32', 1e-5), ('bf16', 0.02)):
        run = precision + suffix
        got = result(run)
        for key in ('loss', 'val_loss'):
            error = abs(got[key] - cpu[key]) / abs(cpu[key])
            ok = error <= tolerance
            failed |= not ok
            print(f"{run} {key}: card {got[key]:.7f}, CPU {cpu[key]:.7f}, relative error {error:.1e} "
                  f"({'ok' if ok else 'over'} {tolerance:g})")
        if precision == 'f32' and got['sample'] != cpu['sample']:
            print(f"{run} sample differs: card {got['sample']!r}, CPU {cpu['sample']!r}")
            failed = True
sys.exit(1 if failed else 0)
PY
