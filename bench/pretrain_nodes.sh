#!/usr/bin/env bash
# pretrain on 2 nodes x 1 rank against 1 node x 2 ranks, in one run,
# alternating: tokens/s and rank 0's time split (compute, communication
# backward did not hide, waiting for the other rank, and the communication
# hidden behind backward). The two nodes are network namespaces joined by a
# veth pair on this machine (tests/nodes/two_nodes.sh): Gloo between them,
# against shared memory within one node. The model is pretrain's default
# (4 layers x 128, 0.84M parameters), 1 thread per rank.
#
#   sudo bash bench/pretrain_nodes.sh [rounds]     (default 2; the median is reported)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-2}
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
source "$root/tests/nodes/two_nodes.sh"
trap remove_two_nodes EXIT
make_two_nodes
out=$nodes_work
args=(run pretrain --threads 1 --set steps=60 --set eval_every=0 --set sample_tokens=0 --set checkpoint_every=0
      --set log_every=20)
for round in $(seq "$rounds"); do
    "$build/recipe" "${args[@]}" --gpus 2 --out "$out/one$round" >"$out/one$round.out" 2>&1 ||
        { cat "$out/one$round.out"; exit 1; }
    on_both_nodes "$out/two$round" 1 "$build/recipe" "${args[@]}" --out "$out/two$round/dir"
    wait_nodes "$out/two$round" 600 || { cat "$out/two$round"/rank*.out; exit 1; }
    [ -f "$out/two$round/dir/result.json" ] || { cat "$out/two$round"/rank*.out; exit 1; }
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys, pathlib
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
def runs(kind):
    paths = [out / f"one{r}" for r in range(1, rounds + 1)] if kind == "one" else \
            [out / f"two{r}" / "dir" for r in range(1, rounds + 1)]
    return [json.loads((p / "result.json").read_text()) for p in paths]
def median(rs, f):
    return statistics.median(f(r) for r in rs)
print("| layout | tokens/s | compute s | exposed communication s | waiting s | hidden communication s | final loss |")
print("|---|---|---|---|---|---|---|")
rate = {}
for kind, name in (("one", "1 node x 2 ranks (shared memory)"), ("two", "2 nodes x 1 rank (Gloo over veth)")):
    rs = runs(kind)
    rate[kind] = median(rs, lambda r: r["tokens_per_second"])
    t = {k: median(rs, lambda r, k=k: r["time_split"][k]) for k in
         ("compute_s", "communication_s", "waiting_s", "hidden_communication_s")}
    print(f"| {name} | {rate[kind]:.0f} | {t['compute_s']:.2f} | {t['communication_s']:.2f} | {t['waiting_s']:.2f} "
          f"| {t['hidden_communication_s']:.2f} | {rs[0]['loss']:.6f} |")
print(f"\n2 nodes / 1 node throughput: {rate['two'] / rate['one']:.2f}x (median of {rounds} rounds each)")
PY
