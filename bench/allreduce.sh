#!/usr/bin/env bash
# All-reduce throughput, 2 ranks on this node, 1 KiB to 256 MiB of floats:
# levers' shared-memory backend against a single-process memcpy of the same
# bytes and against Open MPI's MPI_Allreduce, measured in one run.
#
#   bash bench/allreduce.sh
#
# Installs Debian's Open MPI if missing (the peer only; levers does not use it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/bench/install_peers.sh"
install_peers libopenmpi-dev openmpi-bin
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O3 -march=native -o "$out/allreduce_mpi" "$root/bench/allreduce_mpi.c"
"$build/bench/bench_allreduce" --ranks 2 >"$out/levers.json"
mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader "$out/allreduce_mpi" >"$out/mpi.json"
python3 - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
lv = {r["bytes"]: r for r in json.loads((out / "levers.json").read_text())["rows"]}
mp = {r["bytes"]: r for r in json.loads((out / "mpi.json").read_text())["rows"]}
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print("| bytes | levers ms | levers GB/s | memcpy ms | Open MPI ms | levers / memcpy bandwidth | levers / Open MPI speed |")
print("|---|---|---|---|---|---|---|")
for b in sorted(lv):
    l, m, c = lv[b]["levers_s"], mp[b]["mpi_s"], lv[b]["memcpy_s"]
    print(f"| {size(b)} | {l*1e3:.3f} | {b/l/1e9:.2f} | {c*1e3:.3f} | {m*1e3:.3f} | {c/l:.2f}x | {m/l:.2f}x |")
PY
