# Sourced by the language-model benchmarks, to feed both sides the same real
# tokens: the first 60,000 bytes of Moby-Dick, as a JSON array of ids.
#   book_ids BUILD FILE        through Llama 2's tokenizer.json (`recipe tokenize`)
#   book_gpt2_ids BUILD FILE   through GPT-2's byte-level BPE (its encoder.json and vocab.bpe)
#   book_bytes FILE            its bytes (a byte vocabulary's ids)
levers_data() { echo "${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}"; }
book_ids() {
    head -c 60000 "$(levers_data)/books/mobydick.txt" | "$1/recipe" tokenize --tokenizer "$(levers_data)/tokenizers/llama2" >"$2"
}
book_gpt2_ids() {
    local files
    files=$(mktemp -d)
    # GPT-2's files under the names `recipe tokenize` reads.
    ln -s "$(levers_data)/gpt2/encoder.json" "$files/vocab.json"
    ln -s "$(levers_data)/gpt2/vocab.bpe" "$files/merges.txt"
    head -c 60000 "$(levers_data)/books/mobydick.txt" | "$1/recipe" tokenize --tokenizer "$files" >"$2"
    rm -rf "$files"
}
book_bytes() {
    head -c 60000 "$(levers_data)/books/mobydick.txt" | /usr/bin/python3 -c 'import json, sys; print(json.dumps(list(sys.stdin.buffer.read())))' >"$1"
}
