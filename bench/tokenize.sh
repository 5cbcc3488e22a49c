#!/usr/bin/env bash
# Tokenizing the books (the set-up's corpus, 4 files, ~3 MB) with Llama 3's
# tokenizer.json on one thread: levers (bench_tokenize) against
# @lenml/tokenizers 3.7.2 (JavaScript, node; npm'd into a temporary folder),
# the best of 3 encodings of each whole file; both must give the same ids
# (count and hash), or the run fails.
#
#   bash bench/tokenize.sh [TOKENIZER]     (llama3, qwen3 or llama2; default llama3)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=${1:-llama3}
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
[ -f "$data/tokenizers/.complete-4" ] || bash "$root/scripts/setup.sh" test
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent @lenml/tokenizers@3.7.2 >/dev/null && tar xzf ./*.tgz)
files=("$data"/books/*.txt)
"$build/bench/bench_tokenize" --tokenizer "$data/tokenizers/$name/tokenizer.json" --rounds 3 "${files[@]}" >"$work/levers.jsonl"
node "$root/bench/tokenize.js" "$work/package" "$data/tokenizers/$name" 3 "${files[@]}" >"$work/peer.jsonl"
python3 - "$work" "$name" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
lev = [json.loads(l) for l in (work / "levers.jsonl").read_text().splitlines()]
peer = [json.loads(l) for l in (work / "peer.jsonl").read_text().splitlines()]
print(f"tokenizing with {sys.argv[2]}'s tokenizer.json, one thread, best of 3")
print()
print("| file | MB | tokens | levers MB/s | @lenml/tokenizers MB/s | levers / peer | same ids |")
print("|---|---|---|---|---|---|---|")
same_all = True
for a, b in zip(lev, peer):
    same = a["tokens"] == b["tokens"] and a["hash"] == b["hash"]
    same_all &= same
    print(f"| {a['file']} | {a['mb']:.2f} | {a['tokens']:,} | {a['mb_per_s']:.2f} | {b['mb_per_s']:.2f} | "
          f"{a['mb_per_s'] / b['mb_per_s']:.1f}x | {'yes' if same else 'NO'} |")
mb = sum(a["mb"] for a in lev)
t_l = sum(a["mb"] / a["mb_per_s"] for a in lev); t_p = sum(b["mb"] / b["mb_per_s"] for b in peer)
print(f"| all | {mb:.2f} | {sum(a['tokens'] for a in lev):,} | {mb / t_l:.2f} | {mb / t_p:.2f} | {t_p / t_l:.1f}x | "
      f"{'yes' if same_all else 'NO'} |")
sys.exit(0 if same_all else 1)
PY
