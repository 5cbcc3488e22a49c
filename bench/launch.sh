#!/usr/bin/env bash
# Launch latency: wall time from starting the command to every rank being past
# its first barrier, for 1, 2, 4 and 8 ranks: `bench_launch run ready --gpus N`
# (levers' launcher; N = 1 runs in place) against torchrun starting N gloo
# workers (Debian's python3-torch; --redirects/--tee set as Debian's torch 1.13
# needs, --monitor_interval left at its default). Median of 3 rounds. Then
# what a process holds that holds no tensors: `recipe list` and each CPU rank
# of the 8 (on a CUDA build, the GPU backend must not be mapped).
#
#   bash bench/launch.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/bench/install_peers.sh"
install_peers python3-torch
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
/usr/bin/python3 - "$build/bench/bench_launch" "$root/bench/launch_worker.py" <<'PY'
import json, statistics, subprocess, sys, time
levers, worker = sys.argv[1], sys.argv[2]

def levers_once(n):
    start = time.time_ns()
    out = subprocess.run([levers, "run", "ready", "--gpus", str(n), "--threads", "1"], capture_output=True, text=True, check=True)
    return (json.loads(out.stdout.strip().splitlines()[-1])["ready_unix_ns"] - start) / 1e6

def torchrun_once(n, port):
    start = time.time_ns()
    out = subprocess.run(["/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node", str(n),
                          "--master_port", str(port), "--redirects", "1", "--tee", "1", worker],
                         capture_output=True, text=True, check=True)
    ready = [int(l.split()[-1]) for l in out.stdout.splitlines() if "ready_unix_ns" in l]
    assert len(ready) == n, out.stdout
    return (max(ready) - start) / 1e6

print("| ranks | levers ms | torchrun ms | torchrun / levers |")
print("|---|---|---|---|")
port = 29600
for n in (1, 2, 4, 8):
    lv, tr = [], []
    for _ in range(3):
        lv.append(levers_once(n))
        port += 1
        tr.append(torchrun_once(n, port))
    l, t = statistics.median(lv), statistics.median(tr)
    print(f"| {n} | {l:.0f} | {t:.0f} | {t / l:.1f}x |", flush=True)
out = subprocess.run([levers, "run", "ready", "--gpus", "8", "--threads", "1"], capture_output=True, text=True, check=True)
ranks = json.loads(out.stdout.strip().splitlines()[-1])["rank_peak_rss_mb"]
print(f"\nresident memory of each of 8 CPU ranks: {min(ranks):.1f} to {max(ranks):.1f} MB")
PY
/usr/bin/python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print("resident memory of `recipe list`: %.1f MB" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))' \
    "$build/recipe" list
