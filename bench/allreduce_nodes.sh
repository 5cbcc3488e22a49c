#!/usr/bin/env bash
# All-reduce between two nodes on this machine (two network namespaces joined
# by a veth pair, tests/nodes/two_nodes.sh), 1 KiB to 64 MiB of floats, in one
# run: levers' Gloo group against Open MPI's MPI_Allreduce over the same link
# (one rank per node), and levers' hierarchical all-reduce (shared memory
# within a node, Gloo between the nodes' leaders) against flat Gloo among
# every rank, for 2 nodes x 2 ranks.
#
#   sudo bash bench/allreduce_nodes.sh
#
# Needs root (namespaces). Installs Debian's Open MPI if missing (the peer only).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/bench/install_peers.sh"
install_peers libopenmpi-dev openmpi-bin
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
source "$root/tests/nodes/two_nodes.sh"
trap remove_two_nodes EXIT
make_two_nodes
out=$nodes_work
mpicc -O3 -march=native -o "$out/allreduce_mpi" "$root/bench/allreduce_mpi.c"

levers() {  # levers NAME MODE PER_NODE: rank 0's JSON into out/NAME.json
    LEVERS_NODE_ALLREDUCE=$2 on_both_nodes "$out/$1" "$3" "$build/bench/bench_allreduce_nodes"
    wait_nodes "$out/$1" 600 || { cat "$out/$1"/rank*.out; exit 1; }
    cp "$out/$1/rank0.out" "$out/$1.json"
}
levers gloo flat 1
levers hierarchical hierarchical 2
levers flat flat 2

# Open MPI's ranks reach the other namespace through a remote shell of our own
# (mpirun's plm_rsh_agent), over the same link (TCP only), not bound to a core
# (the two "nodes" share this machine's cores).
cat >"$out/rsh" <<RSH
#!/bin/bash
while [[ \$1 == -* ]]; do shift; done
host=\$1; shift
case \$host in $node_master) ns=$node_a ;; *) ns=$node_b ;; esac
exec ip netns exec \$ns /bin/sh -c "\$*"
RSH
chmod +x "$out/rsh"
ip netns exec "$node_a" mpirun --allow-run-as-root -np 2 --host "$node_master,${node_master%.1}.2" --bind-to none \
    --mca plm_rsh_agent "$out/rsh" --mca btl self,tcp --mca btl_tcp_if_include "$node_subnet" \
    --mca oob_tcp_if_include "$node_subnet" "$out/allreduce_mpi" $((64 << 20)) >"$out/mpi.json"

python3 - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def rows(name, key="seconds"):
    j = json.loads((out / f"{name}.json").read_text())
    return {r["bytes"]: r[key] for r in j["rows"]}
gloo, mpi = rows("gloo"), rows("mpi", "mpi_s")
hier, flat = rows("hierarchical"), rows("flat")
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print("2 nodes x 1 rank, over the veth pair:")
print("| bytes | levers Gloo ms | Open MPI ms | levers GB/s | levers / Open MPI speed |")
print("|---|---|---|---|---|")
for b in sorted(gloo):
    print(f"| {size(b)} | {gloo[b]*1e3:.3f} | {mpi[b]*1e3:.3f} | {b/gloo[b]/1e9:.2f} | {mpi[b]/gloo[b]:.2f}x |")
print()
print("2 nodes x 2 ranks:")
print("| bytes | hierarchical ms | flat Gloo ms | hierarchical / flat speed |")
print("|---|---|---|---|")
for b in sorted(hier):
    print(f"| {size(b)} | {hier[b]*1e3:.3f} | {flat[b]*1e3:.3f} | {flat[b]/hier[b]:.2f}x |")
PY
