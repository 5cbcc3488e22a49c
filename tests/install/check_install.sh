#!/bin/bash
# Installs levers into a scratch root, compiles every installed (public)
# header alone against `pkg-config --cflags levers`, builds the README's
# example project against it through pkg-config (levers and levers-recipes,
# as a user would), and runs its recipes.
#   check_install.sh BUILD_DIR EXAMPLE_DIR INTERNAL_HEADER...
set -euo pipefail
build=$1 example=$2
shift 2
internal=("$@")  # headers meson.build declares internal, relative to the source root
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --no-rebuild --quiet >/dev/null
pc=$(dirname "$(find "$root" -name levers.pc | head -1)")
[ -n "$pc" ] || { echo "levers.pc was not installed"; exit 1; }
# Every header of the library is installed (public) or declared internal,
# never both: a new header missing from meson.build's lists fails here.
src=$(cd "$example/../.." && pwd)
inc=$root/usr/local/include
for header in $(cd "$src" && find levers -name '*.hpp'); do
    is_internal=0
    for h in "${internal[@]}"; do [ "$src/$header" -ef "$h" ] && is_internal=1; done
    if [ $is_internal = 1 ]; then
        [ ! -f "$inc/$header" ] || { echo "internal header $header is installed"; exit 1; }
    else
        [ -f "$inc/$header" ] || { echo "header $header is neither installed nor declared internal"; exit 1; }
    fi
done
export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR=$root
# Each public header alone, with only what levers.pc declares: a header that
# includes a package levers.pc does not require fails here.
cflags=$(pkg-config --cflags levers)
(cd "$inc" && find . -name '*.hpp' | sed 's|^\./||') |
    xargs -P "$(nproc)" -I{} sh -c 'echo "#include \"{}\"" | c++ -std=c++20 -fsyntax-only '"$cflags"' -x c++ - 2>&1 |
        sed "s|^|{}: |"; exit 0' >"$root/headers.log"
if [ -s "$root/headers.log" ]; then head -n 40 "$root/headers.log"; echo "public headers that do not compile alone"; exit 1; fi
echo "$(cd "$inc" && find . -name '*.hpp' | wc -l) public headers compile alone against pkg-config --cflags levers"
meson setup "$root/build" "$example" >"$root/setup.log" 2>&1 || { cat "$root/setup.log"; exit 1; }
ninja -C "$root/build" >"$root/ninja.log" 2>&1 || { cat "$root/ninja.log"; exit 1; }
cd "$root"
LD_LIBRARY_PATH=$(dirname "$pc")
export LD_LIBRARY_PATH LEVERS_LEDGER_DIR=$root/ledger
out=$("$root/build/my_recipes" run line --gpus 2 --threads 1 --set steps=100)
echo "$out" | tail -2
echo "$out" | tail -1 | grep -q '"ranks":2' || { echo "the example's run did not report 2 ranks"; exit 1; }
# Its own recipes, and the shipped ones through levers-recipes.pc (grep reads the whole list: no SIGPIPE).
listed=$("$root/build/my_recipes" list)
grep '^line ' <<<"$listed" >/dev/null || { echo "the example's recipe is not listed"; exit 1; }
grep '^grpo ' <<<"$listed" >/dev/null || { echo "the shipped recipes are not in the example's binary"; exit 1; }
# The user's own model (a residual MLP with layernorm, written as modules) on
# 1 rank and on 2 ranks of half the batch: the same training, and it learns.
source "$src/tests/needs_data.sh"
needs_data fashion_mnist
one=$("$root/build/my_recipes" run fashion --set steps=200 --set eval_every=200 | tail -1)
two=$("$root/build/my_recipes" run fashion --gpus 2 --threads 1 --set steps=200 --set eval_every=200 --set batch_size=64 | tail -1)
python3 - "$one" "$two" <<'PY'
import json, sys
one, two = (json.loads(a) for a in sys.argv[1:3])
print(f"fashion: 1 rank loss {one['loss']:.6f} accuracy {one['test_accuracy']:.4f}; "
      f"2 ranks loss {two['loss']:.6f} accuracy {two['test_accuracy']:.4f}")
assert two["ranks"] == 2, two
assert abs(one["loss"] - two["loss"]) <= 1e-6 * abs(one["loss"]), "2 ranks of half the batch train differently"
assert one["test_accuracy"] > 0.8, "the residual MLP did not learn Fashion-MNIST"
PY
