// GPT-2 safetensors through the real binary: eval_lm, convert, sample and fine_tune.
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/files.hpp"
#include "levers/models/gpt2_weights.hpp"
#include "levers/train/window_loss.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/installed_data.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <fstream>

using namespace levers;
using namespace levers::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {


}  // namespace

TEST_CASE("GPT-2 safetensors: eval_lm scores a text exactly as the library does, on 1 and 2 ranks; convert and "
          "sample read them; fine_tune adapts them with GPT-2's tokenizer" * needs({Data::books, Data::gpt2_tokenizer})) {
    TempDir tmp;
    // A GPT-2-shaped model (GPT-2's vocabulary, tiny otherwise), as Hugging Face would store it.
    models::Gpt gpt({.vocab_size = 50257, .block_size = 32, .n_layer = 1, .n_head = 2, .n_embd = 16}, 5);
    const fs::path weights = tmp.path() / "gpt2.safetensors";
    models::save_gpt2_safetensors(weights, gpt);
    const fs::path text = data::data_dir() / "books" / "Isaac.Newton-Opticks.txt";

    // The expected number, computed here: the first 3,000 BPE tokens in windows of 32.
    auto tokens = data::BpeTokenizer::gpt2_default().encode(data::read_data_file(text));
    tokens.resize(3000);
    const double expected = train::mean_window_loss(gpt, data::TokenFile::from(tokens), 4, 32, 0);
    CHECK(std::abs(expected - std::log(50257.0)) < 0.5);  // an untrained model: about log(vocabulary)

    const std::vector<std::string> eval = {"run", "eval_lm", "--threads", "1", "--set", "weights=" + weights.string(),
                                           "--set", "text=" + text.string(), "--set", "max_tokens=3000",
                                           "--set", "context=32"};
    for (const char* gpus : {"1", "2"}) {
        CAPTURE(gpus);
        auto args = eval;
        args.insert(args.end(), {"--gpus", gpus, "--out", (tmp.path() / (std::string("eval") + gpus)).string()});
        auto [code, out] = run_recipe(args);
        INFO(out);
        REQUIRE(code == 0);
        auto r = nlohmann::json::parse(last_line(out));
        CHECK(r["loss"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
        CHECK(r["windows"] == (3000 - 1) / 32);
        CHECK(r["tokens_scored"] == (3000 - 1) / 32 * 32);
    }

    // Through a levers checkpoint and back: the same numbers.
    const fs::path ckpt = tmp.path() / "gpt2.ckpt", again = tmp.path() / "again.safetensors";
    REQUIRE(run_recipe({"run", "convert", "--set", "from=" + weights.string(), "--set", "to=" + ckpt.string()}).code == 0);
    REQUIRE(run_recipe({"run", "convert", "--set", "from=" + ckpt.string(), "--set", "to=" + again.string()}).code == 0);
    auto args = eval;
    args[5] = "weights=" + again.string();
    auto [code, out] = run_recipe(args);
    REQUIRE(code == 0);
    CHECK(nlohmann::json::parse(last_line(out))["loss"].get<double>() == doctest::Approx(expected).epsilon(1e-6));

    auto sampled = run_recipe({"run", "sample", "--set", "checkpoint=" + weights.string(), "--set", "tokens=5",
                           "--set", "prompt=The light"});
    REQUIRE(sampled.code == 0);
    CHECK(nlohmann::json::parse(last_line(sampled.output))["text"].get<std::string>().starts_with("The light"));

    auto tuned = run_recipe({"run", "fine_tune", "--threads", "1", "--set", "base=" + weights.string(), "--set",
                         "steps=3", "--set", "batch_size=2", "--set", "eval_every=3", "--set", "eval_batches=2",
                         "--set", "lora_r=2", "--out", (tmp.path() / "ft").string()});
    INFO(tuned.output);
    REQUIRE(tuned.code == 0);
    auto r = nlohmann::json::parse(last_line(tuned.output));
    CHECK(std::abs(r["val_loss_at_start"].get<double>() - std::log(50257.0)) < 0.5);  // BPE tokens, not bytes
    CHECK(fs::exists(tmp.path() / "ft" / "model.safetensors"));

    auto missing = run_recipe({"run", "eval_lm", "--set", "weights=" + (tmp.path() / "none.safetensors").string(),
                           "--set", "text=" + text.string()});
    CHECK(missing.code == 2);  // refused before the run starts
    CHECK(missing.output.find("none.safetensors: no such file") != std::string::npos);
}
