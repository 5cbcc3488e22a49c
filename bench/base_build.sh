# Sourced by the benchmarks that set levers against its own past: base_build
# COMMIT DIR builds bench_gpt_step of COMMIT (its sources from git, CPU only)
# in DIR and prints the program's path. By default the commit before models
# were made of modules: the hand-written GPT, the bar the module GPT must keep.
LEVERS_BASE_COMMIT=${LEVERS_BASE_COMMIT:-b543de7}
base_build() {
    local commit=$1 dir=$2 root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [ ! -x "$dir/build/bench/bench_gpt_step" ]; then
        echo "[bench] building bench_gpt_step of $commit in $dir" >&2
        rm -rf "$dir" && mkdir -p "$dir/src"
        git -C "$root" archive "$commit" | tar -x -C "$dir/src"
        meson setup "$dir/build" "$dir/src" --buildtype=release -Dcuda=disabled >"$dir/setup.log" 2>&1 ||
            { cat "$dir/setup.log" >&2; return 1; }
        ninja -C "$dir/build" bench/bench_gpt_step >"$dir/ninja.log" 2>&1 || { tail -n 30 "$dir/ninja.log" >&2; return 1; }
    fi
    echo "$dir/build/bench/bench_gpt_step"
}
