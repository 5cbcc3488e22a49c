# Sourced by the language-model benchmarks: book_ids BUILD FILE writes the
# real tokens both sides are fed: the first 60,000 bytes of Moby-Dick through
# Llama 2's tokenizer.json, as the JSON array of ids `recipe tokenize` writes.
book_ids() {
    local data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
    head -c 60000 "$data/books/mobydick.txt" | "$1/recipe" tokenize --tokenizer "$data/tokenizers/llama2" >"$2"
}
