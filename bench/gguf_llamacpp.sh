#!/usr/bin/env bash
# GGUF export checked by llama.cpp itself (bench/llama_cpp.sh builds its CPU
# tools from the source the npm package node-llama-cpp ships, once), on two
# small trained models, the books' Llama 3 (pretrain_llama, 256 wide) and a
# Qwen 3 of the same size with Qwen's tokenizer (random, then fine_tune on the
# books with every weight), and a random one with Llama 2's SentencePiece-
# style tokenizer (GGUF's "llama" vocabulary: its perplexity equal to ours
# means llama.cpp tokenizes the text as levers does), a random SmolLM3
# (llama.cpp's smollm3: every fourth layer without rope), and random Gemma 2,
# Gemma 3 (Gemma 3's tokenizer, a sliding window inside the context) and
# Phi-3 (Llama 2's tokenizer, partial rotation, longrope's long factors):
# bench/llama_dir.py says what each holds. For each model:
#   - every file type exports, gguf-py (llama.cpp's Python reader) reads it,
#     and llama.cpp loads it and generates;
#   - f32 and f16: llama.cpp's greedy continuation equals levers' greedy
#     `sample` (trained models: a random one's near-ties are noise), and
#     llama-perplexity equals eval_lm (llama_cpp=true, the same windows and
#     scoring) within 0.1%;
#   - q8_0, q4_k_m, q6_k: our file's perplexity against llama-quantize's of the
#     same f16 file (ours no worse by more than 1%).
# Then the time and peak memory of exporting the 17M demonstration model and
# a 1B-shaped model (Llama 3.2 1B's shape, random bf16 weights) to q4_k_m,
# against llama.cpp's converter + quantizer where they run here.
#
#   bash bench/gguf_llamacpp.sh        (about an hour on 2 cores, the first llama.cpp build included)
#   GGUF_MODELS="llama2" GGUF_SPEED=0 bash bench/gguf_llamacpp.sh     (some models, no export timing)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh" bench
. "$root/bench/install_peers.sh"
install_peers python3-numpy  # llama.cpp's gguf-py reader
build=${LEVERS_BUILD:-$root/build}
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
bin=$(bash "$root/bench/llama_cpp.sh")
src=$(dirname "$(dirname "$bin")")/src
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
recipe() { "$build/recipe" run "$@" --threads 2 2>/dev/null; }
result() { tail -n 1; }  # a recipe's last line is its result, as JSON
ctx=128
prompt="Call me Ishmael. Some years ago"
# No newline at the end: llama.cpp drops one there from a file it reads with -f.
printf '%s' "$(tail -c 40000 "$data/books/mobydick.txt")" >text.txt
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

models=${GGUF_MODELS:-llama qwen3 llama2 smollm3 gemma2 gemma3 phi3}
echo "== models: $models"
has() { [[ " $models " == *" $1 "* ]]; }
has llama && recipe pretrain_llama --set hidden=256 --set intermediate=768 --set steps=300 --set sample_tokens=0 --out llama_run |
    result >/dev/null
has qwen3 && /usr/bin/python3 "$root/bench/llama_dir.py" qwen3_init "$data/tokenizers/qwen3" --model-type qwen3 --vocab 151936 \
    --hidden 256 --layers 4 --heads 4 --kv-heads 2 --intermediate 768 --context 256
has qwen3 && recipe fine_tune --set model=qwen3_init --set lora_r=0 --set steps=100 --set context=$ctx --set lr=3e-3 \
    --out qwen3_run | result >/dev/null
if has llama2; then
    /usr/bin/python3 "$root/bench/llama_dir.py" llama2_run/model "$data/tokenizers/llama2" --vocab 32000 --hidden 256 \
        --layers 2 --heads 4 --kv-heads 4 --intermediate 768 --context 256
fi
if has smollm3; then  # 4 layers: the last one without rope
    /usr/bin/python3 "$root/bench/llama_dir.py" smollm3_run/model "$data/tokenizers/llama3" --model-type smollm3 \
        --vocab 128256 --hidden 256 --layers 4 --heads 4 --kv-heads 2 --intermediate 768 --context 256
fi
for gemma in gemma2 gemma3; do  # Gemma 3's tokenizer for both (262,145 ids, padded as Gemma 3 4B's)
    has $gemma && /usr/bin/python3 "$root/bench/llama_dir.py" ${gemma}_run/model "$data/tokenizers/gemma3" \
        --model-type $([[ $gemma == gemma2 ]] && echo gemma2 || echo gemma3_text) --vocab 262208 --hidden 256 \
        --layers 4 --heads 4 --kv-heads 2 --intermediate 768 --context 256
done
has phi3 && /usr/bin/python3 "$root/bench/llama_dir.py" phi3_run/model "$data/tokenizers/llama2" --model-type phi3 \
    --vocab 32000 --hidden 256 --layers 4 --heads 4 --kv-heads 2 --intermediate 768 --context 256

ppl() {  # llama-perplexity's final estimate
    "$bin/llama-perplexity" -m "$1" -f text.txt -c $ctx -b $ctx -t 2 2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p'
}
within() {  # within A B REL: |A/B - 1| <= REL
    python3 -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if abs(a / b - 1) <= r else 1)" "$@"
}

for model in $models; do
    dir=${model}_run/model
    echo "== $model ($dir)"
    ours_ppl=$(recipe eval_lm --set model="$dir" --set text=text.txt --set context=$ctx --set llama_cpp=true |
        result | python3 -c "import json, sys; print(json.load(sys.stdin)['perplexity'])")
    ours_text=$(recipe sample --set model="$dir" --set prompt="$prompt" --set tokens=32 --set temperature=0 |
        sed '1d;$d')  # the text, without the run's header and result lines
    printf '| type | size (MiB) | export (s) | llama.cpp loads | greedy = levers | PPL llama.cpp | PPL of llama-quantize'"'"'s |\n|---|---|---|---|---|---|---|\n'
    for type in f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m q6_k; do
        out=$model-$type.gguf
        start=$(date +%s.%N)
        recipe export --set model="$dir" --set to="$out" --set type=$type --set overwrite=true >/dev/null
        seconds=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
        PYTHONPATH="$src/gguf-py" /usr/bin/python3 -c "import gguf, sys; gguf.GGUFReader(sys.argv[1])" "$out" ||
            fail "$out: gguf-py cannot read it"
        loads=yes
        theirs_text=$("$bin/llama-simple" -m "$out" -n 32 "$prompt" 2>/dev/null) ||
            { loads=NO; fail "$out: llama.cpp cannot load it"; }
        same=n/a
        if [[ ($type == f32 || $type == f16) && ($model == llama || $model == qwen3) ]]; then  # random ones: PPL only
            if [[ "$theirs_text" == "$ours_text" ]]; then same=yes; else same=NO; fail "$out: greedy text differs"; fi
        fi
        file_ppl=$(ppl "$out")
        quantized=
        case $type in
            f32|f16) within "$file_ppl" "$ours_ppl" 0.001 || fail "$out: PPL $file_ppl, levers $ours_ppl";;
            q8_0|q4_k_m|q6_k)
                upper=$(echo $type | tr a-z A-Z)
                "$bin/llama-quantize" "$model-f16.gguf" "theirs-$type.gguf" "$upper" 2 >/dev/null 2>&1
                quantized=$(ppl "theirs-$type.gguf")
                python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 1.01 * float(sys.argv[2]) else 1)" \
                    "$file_ppl" "$quantized" || fail "$out: PPL $file_ppl, llama-quantize's $quantized";;
        esac
        echo "| $type | $(python3 -c "import os, sys; print(f'{os.path.getsize(sys.argv[1]) / 2**20:.1f}')" "$out") | $seconds | $loads | $same | $file_ppl | ${quantized:-} |"
    done
    echo "levers' eval_lm (llama_cpp=true) on the directory: PPL $ours_ppl; greedy text: $(echo "$ours_text" | head -c 80 | tr '\n' ' ')"
done

[[ ${GGUF_SPEED:-1} == 0 ]] && { [[ $failures == 0 ]] && echo "gguf_llamacpp: every check passed" && exit 0; exit 1; }
echo "== export time and peak memory to q4_k_m"
measure() {  # label, then the command: wall seconds and peak resident MiB
    local label=$1
    shift
    /usr/bin/time -f "%e %M" -o time.txt "$@" >/dev/null 2>&1 || { echo "| $label | did not run |"; return; }
    read -r wall kib <time.txt
    echo "| $label | $wall s | $((kib / 1024)) MiB |"
}
recipe pretrain_llama --set steps=1 --set eval_every=0 --set sample_tokens=0 --out demo_run | result >/dev/null
/usr/bin/python3 "$root/bench/llama_dir.py" onebee "$data/tokenizers/llama3" --dtype bf16 --vocab 128256 --hidden 2048 \
    --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --context 2048
echo "| export | wall | peak resident |"
echo "|---|---|---|"
for m in demo_run/model onebee; do
    echo "| $m: $(du -m "$m"/model.safetensors | cut -f1) MiB of safetensors | | |"
    measure "levers: recipe run export type=q4_k_m" "$build/recipe" run export --threads 2 --set model="$m" \
        --set to="$m-ours.gguf" --set type=q4_k_m --set overwrite=true
    measure "llama.cpp: convert_hf_to_gguf.py --outtype f16" /usr/bin/python3 "$src/convert_hf_to_gguf.py" "$m" \
        --outtype f16 --outfile "$m-f16.gguf"
    if [[ -f $m-f16.gguf ]]; then
        measure "llama.cpp: llama-quantize f16 -> Q4_K_M" "$bin/llama-quantize" "$m-f16.gguf" "$m-theirs.gguf" Q4_K_M 2
    else
        recipe export --set model="$m" --set to="$m-f16.gguf" --set type=f16 --set overwrite=true >/dev/null
        measure "llama.cpp: llama-quantize of levers' f16 export -> Q4_K_M" "$bin/llama-quantize" "$m-f16.gguf" \
            "$m-theirs.gguf" Q4_K_M 2
    fi
done
/usr/bin/python3 -c "import transformers" 2>/dev/null ||
    echo "(llama.cpp's converter needs Python's transformers, which Debian does not package: it did not run here)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), 2 threads"
[[ $failures == 0 ]] && echo "gguf_llamacpp: every check passed" || { echo "gguf_llamacpp: $failures checks failed"; exit 1; }
