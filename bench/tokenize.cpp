// Tokenizing text with a tokenizer.json on one thread (bench/tokenize.sh):
// each file encoded whole (no special tokens added), the best of --rounds;
// one JSON line per file with its megabytes per second, its token count and
// an FNV-1a hash of its ids (to compare with another implementation's).
//
//   bench_tokenize --tokenizer DIR/tokenizer.json [--rounds 3] FILE...
#include "levers/core/read_file.hpp"
#include "levers/data/bpe_tokenizer.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>

int main(int argc, char** argv) {
    CLI::App app("bench_tokenize: tokenizer.json throughput on one thread");
    std::string tokenizer_path;
    std::vector<std::string> files;
    int rounds = 3;
    app.add_option("--tokenizer", tokenizer_path, "a tokenizer.json")->required();
    app.add_option("--rounds", rounds, "encodings per file (the fastest counts)")->check(CLI::PositiveNumber);
    app.add_option("files", files, "text files")->required();
    CLI11_PARSE(app, argc, argv);
    const auto tokenizer = levers::data::BpeTokenizer::from_tokenizer_json(tokenizer_path);
    for (const std::string& file : files) {
        const std::string text = levers::read_file(file);
        double best = 1e300;
        std::vector<std::int32_t> ids;
        for (int r = 0; r < rounds; ++r) {
            const auto start = std::chrono::steady_clock::now();
            ids = tokenizer.encode(text);
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the ids' decimal text, comma-separated
        for (const std::int32_t id : ids)
            for (const char c : std::to_string(id) + ",") hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
        fmt::print("{{\"file\": \"{}\", \"mb\": {:.3f}, \"mb_per_s\": {:.3f}, \"tokens\": {}, \"hash\": \"{:016x}\"}}\n",
                   file.substr(file.find_last_of('/') + 1), text.size() / 1e6, text.size() / 1e6 / best, ids.size(), hash);
    }
}
