# Sourced by the test scripts that read the data the set-up installs (the
# book corpus, the GPT-2 tokenizer files, the HF tokenizers, Debian's Fashion-MNIST), as
# tests/installed_data.hpp is by the C++ tests: `needs_data books` exits 77
# (Meson's "skipped") where it is missing, saying what and how to install it.
needs_data() {
    local data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers} what marker
    for what in "$@"; do
        case $what in
            books) marker=$data/books/.complete ;;
            gpt2_tokenizer) marker=$data/gpt2/.complete ;;
            hf_tokenizers) marker=$data/tokenizers/.complete-4 ;;
            fashion_mnist) marker=${LEVERS_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}/t10k-images-idx3-ubyte.gz ;;
            *) echo "needs_data: unknown data '$what'" >&2; exit 1 ;;
        esac
        if [ ! -e "$marker" ]; then
            echo "skipped: needs $what, and $marker is missing (install it with: bash scripts/setup.sh test," \
                 "or point LEVERS_DATA / LEVERS_FASHION_MNIST at it)"
            exit 77
        fi
    done
}
