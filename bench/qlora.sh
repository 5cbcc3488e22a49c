#!/usr/bin/env bash
# QLoRA against LoRA on the CPU, in one run (bench_qlora, bench/qlora.cpp):
# the Llama shape of bench/llama_step.sh with rank-16 adapters on every
# projection, over its weights in f32 and in NF4 with double quantization,
# two sequences of 512 tokens of Moby-Dick (Llama 2's tokenizer), the two
# steps alternating; at 1 and 2 threads. Then the 4-bit base's bytes against
# its bf16 size, the dequantizing kernel's output bandwidth against memcpy's,
# and a 4096 x 4096 layer dequantized in tiles against the dense layer.
#
#   bash bench/qlora.sh [steps]     (default 5 timed steps of each)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=${1:-5}
bash "$root/scripts/setup.sh" bench
. "$root/bench/book_ids.sh"
build=${LEVERS_BUILD:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ids="$out/ids.json"
book_ids "$build" "$ids"
for threads in 1 2; do
    "$build/bench/bench_qlora" --ids "$ids" --threads "$threads" --steps "$steps" >>"$out/rows.jsonl"
done

/usr/bin/python3 - "$out/rows.jsonl" <<'PY'
import json, platform, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
print(f"machine: {cpu}, {platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
print()
print("| threads | LoRA step ms | QLoRA step ms | QLoRA / LoRA speed | dequantize GB/s | memcpy GB/s | dequantize / memcpy | 4096 x 4096 layer in tiles ms | dense ms | tiled / dense speed |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['threads']} | {r['lora_step_ms']:.0f} | {r['qlora_step_ms']:.0f} | {r['qlora_speed_vs_lora']:.2f}x | "
          f"{r['dequantize_gb_s']:.1f} | {r['memcpy_gb_s']:.1f} | {r['dequantize_vs_memcpy']:.2f}x | "
          f"{r['tiled_layer_ms']:.0f} | {r['dense_layer_ms']:.0f} | {r['tiled_layer_speed_vs_dense']:.2f}x |")
r = rows[-1]
print()
print(f"base held in 4 bits: {r['base_4bit_mb']:.1f} MB for {r['base_weights']} weights ({r['bits_per_weight']:.2f} bits each), "
      f"{r['base_4bit_vs_bf16']:.3f}x their bf16 size ({r['base_bf16_mb']:.1f} MB)")
PY
