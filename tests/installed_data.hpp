// The data the set-up installs (scripts/setup.sh: the book corpus, the GPT-2
// tokenizer files and Hugging Face tokenizers; Debian's dataset-fashion-mnist). A test that reads it
// is marked
//   TEST_CASE("..." * testing::needs({testing::Data::books}))
// and is skipped where the data is missing, saying once on stderr what is
// missing, where it was looked for and how to install it; the rest still run.
#pragma once

#include "levers/data/files.hpp"
#include "levers/data/idx.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <initializer_list>

namespace levers::testing {

enum class Data { books, gpt2_tokenizer, fashion_mnist, hf_tokenizers };

// The file whose presence says the data is installed.
inline std::filesystem::path marker(Data d) {
    switch (d) {
        case Data::books: return data::data_dir() / "books" / ".complete";
        case Data::gpt2_tokenizer: return data::data_dir() / "gpt2" / ".complete";
        case Data::fashion_mnist: return data::fashion_mnist_dir() / "t10k-images-idx3-ubyte.gz";
        case Data::hf_tokenizers: return data::data_dir() / "tokenizers" / ".complete-4";  // the four of the set-up
    }
    return {};
}

inline const char* name_of(Data d) {
    switch (d) {
        case Data::books: return "the book corpus";
        case Data::gpt2_tokenizer: return "the GPT-2 tokenizer files";
        case Data::fashion_mnist: return "Fashion-MNIST";
        case Data::hf_tokenizers: return "the Llama 3, Qwen 3, Llama 2 and Gemma 3 tokenizer files";
    }
    return "";
}

inline bool missing(Data d) {
    static bool said[4] = {};
    const bool gone = !std::filesystem::exists(marker(d));
    auto& once = said[static_cast<int>(d)];
    if (gone && !once) {
        once = true;
        std::fprintf(stderr, "skipping the tests that need %s: %s is missing (install it with: bash scripts/setup.sh "
                     "test, or point LEVERS_DATA / LEVERS_FASHION_MNIST at it)\n", name_of(d), marker(d).c_str());
    }
    return gone;
}

inline doctest::skip needs(std::initializer_list<Data> all) {
    bool gone = false;
    for (Data d : all) gone |= missing(d);
    return doctest::skip(gone);
}

}  // namespace levers::testing
