#!/bin/bash
# Installs levers into a scratch root and checks its headers: every header of
# the library is installed (public) or declared internal, never both, and
# each public header compiles alone against `pkg-config --cflags levers`.
# Compiling only, it runs beside the other suites that compute
# (check_install.sh, which launches ranks, runs alone).
#   check_headers.sh BUILD_DIR SOURCE_DIR INTERNAL_HEADER...
set -euo pipefail
build=$1 src=$2
shift 2
internal=("$@")  # headers meson.build declares internal, relative to the source root
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --no-rebuild --quiet >/dev/null
pc=$(dirname "$(find "$root" -name levers.pc | head -1)")
[ -n "$pc" ] || { echo "levers.pc was not installed"; exit 1; }
# A new header missing from meson.build's lists fails here.
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
