#!/usr/bin/env bash
# `recipe run pretrain` on the emulated card against the CPU, same settings
# and seed: in f32 the card must end at the CPU's loss and validation loss
# (1e-5 relative) and sample the same text; in bf16 (the fused attention:
# head size 64) within 2% of them. Whole runs: data, training loop, AdamW
# and clipping on the card, evaluation, checkpoint, sampling.
#
#   check_recipe_on_card.sh CPU_RECIPE CARD_RECIPE CORPUS
set -euo pipefail
cpu=$1 card=$2 corpus=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export LEVERS_LEDGER_DIR=$work/ledger XDG_CONFIG_HOME=$work/config

args=(run pretrain --set steps=4 --set lr=0.01 --set warmup=1 --set n_layer=1 --set n_embd=64 --set n_head=1 --set block_size=32
      --set batch_size=2 --set eval_every=2 --set eval_batches=1 --set sample_tokens=8 --set corpus="$corpus")
"$cpu" "${args[@]}" >cpu.log 2>&1 || { cat cpu.log; exit 1; }
"$card" "${args[@]}" --device cuda >f32.log 2>&1 || { cat f32.log; exit 1; }
"$card" "${args[@]}" --device cuda --precision bf16 >bf16.log 2>&1 || { cat bf16.log; exit 1; }
for run in f32 bf16; do
    grep -q 'on card 0 (levers emulated card' "$run.log" || { echo "the $run run did not use the emulated card:"; cat "$run.log"; exit 1; }
done

python3 - <<'PY'
import json, sys
def result(name):
    return json.loads(open(name + '.log', 'rb').read().strip().splitlines()[-1])  # the log's sample is raw bytes
cpu, f32, bf16 = result('cpu'), result('f32'), result('bf16')
failed = False
for run, got, tolerance in (('f32', f32, 1e-5), ('bf16', bf16, 0.02)):
    for key in ('loss', 'val_loss'):
        error = abs(got[key] - cpu[key]) / abs(cpu[key])
        ok = error <= tolerance
        failed |= not ok
        print(f"{run} {key}: card {got[key]:.7f}, CPU {cpu[key]:.7f}, relative error {error:.1e} "
              f"({'ok' if ok else 'over'} {tolerance:g})")
if f32['sample'] != cpu['sample']:
    print(f"f32 sample differs: card {f32['sample']!r}, CPU {cpu['sample']!r}")
    failed = True
sys.exit(1 if failed else 0)
PY
