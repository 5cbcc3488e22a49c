// Hugging Face directories through the real binary: eval_lm scores token ids
// and text as the library does (1 and 2 ranks), sample generates with the
// model's own tokenizer, fine_tune adapts one with LoRA into a merged HF
// directory and a PEFT adapter, and bad directories are refused before
// anything starts.
#include "levers/data/files.hpp"
#include "levers/train/window_loss.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"
#include "tests/source_tree.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>

using namespace levers;
using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

fs::path reference_dir() { return testing::source_path("tests/reference/hf"); }

}  // namespace

TEST_CASE("eval_lm scores a HF directory on token ids exactly as the library does, on 1 and 2 ranks (Qwen 3, and "
          "Qwen3-MoE's mixture of experts)") {
    TempDir tmp;
    std::vector<std::int32_t> ids;
    for (int i = 0; i < 70; ++i) ids.push_back((i * 37 + 11) % 64);
    const fs::path file = tmp.write("ids.json", nlohmann::json(ids).dump());
    for (const char* type : {"qwen3", "qwen3_moe"}) {
        const fs::path dir = reference_dir() / type;
        auto model = models::load_hf_model(dir);
        const double expected = train::mean_window_loss(*model, data::TokenFile::from(ids), 4, 8, 0);
        for (const char* gpus : {"1", "2"}) {
            CAPTURE(type);
            CAPTURE(gpus);
            const Ran r = run_recipe({"run", "eval_lm", "--threads", "1", "--gpus", gpus, "--set",
                                      "model=" + dir.string(), "--set", "tokens=" + file.string(), "--set",
                                      "context=8", "--out", (tmp.path() / (std::string(type) + gpus)).string()});
            INFO(r.output);
            REQUIRE(r.code == 0);
            const auto result = nlohmann::json::parse(r.last_line());
            CHECK(result["loss"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
            CHECK(result["windows"] == (70 - 1) / 8);
        }
    }
    const fs::path dir = reference_dir() / "qwen3";
    // Ids outside the vocabulary are named.
    const fs::path bad = tmp.write("bad.json", "[1, 2, 64]");
    const Ran r = run_recipe({"run", "eval_lm", "--set", "model=" + dir.string(), "--set", "tokens=" + bad.string()});
    CHECK(r.code != 0);
    CHECK(r.output.find("item 2 is 64; token ids are whole numbers in [0, 64)") != std::string::npos);
}

TEST_CASE("a Llama 3-shaped directory with its tokenizer: eval_lm reads text, sample stops at the end token" *
          needs({Data::hf_tokenizers, Data::books})) {
    TempDir tmp;
    // Llama 3's vocabulary and tokenizer, tiny otherwise; saved as transformers would.
    models::LlamaConfig c = tiny_llama({.vocab = 128256, .hidden = 16, .intermediate = 32, .layers = 1, .heads = 2,
                                        .kv_heads = 1, .context = 256});
    c.rope_theta = 500000;
    c.eos_token_ids = {128001, 128009};
    models::Llama llama(c, 3);
    const fs::path dir = tmp.path() / "tiny-llama3";
    models::save_hf_model(dir, llama, {.tokenizer_from = data::data_dir() / "tokenizers" / "llama3"});
    CHECK(fs::exists(dir / "tokenizer.json"));
    CHECK(fs::exists(dir / "tokenizer_config.json"));

    const fs::path text = data::data_dir() / "books" / "Isaac.Newton-Opticks.txt";
    auto tokens = models::hf_codec(dir, llama.vocab_size()).encode(data::read_data_file(text));
    tokens.resize(2000);
    const double expected = train::mean_window_loss(llama, data::TokenFile::from(tokens), 4, 64, 0);
    CHECK(std::abs(expected - std::log(128256.0)) < 0.5);  // untrained: about log(vocabulary)
    const Ran eval = run_recipe({"run", "eval_lm", "--threads", "1", "--set", "model=" + dir.string(), "--set",
                                 "text=" + text.string(), "--set", "max_tokens=2000", "--set", "context=64"});
    INFO(eval.output);
    REQUIRE(eval.code == 0);
    CHECK(nlohmann::json::parse(eval.last_line())["loss"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
    CHECK(eval.output.find("tokenizer.json (byte-level BPE, 128256 tokens)") != std::string::npos);

    const Ran sampled = run_recipe({"run", "sample", "--set", "model=" + dir.string(), "--set", "tokens=12", "--set",
                                    "prompt=The light", "--set", "top_p=0.9"});
    INFO(sampled.output);
    REQUIRE(sampled.code == 0);
    const auto result = nlohmann::json::parse(sampled.last_line());
    CHECK(result["text"].get<std::string>().starts_with("The light"));
    CHECK(result["tokens"].get<int>() <= 12);

    // fine_tune on the text with LoRA, 1 and 2 ranks: a merged HF directory and a PEFT adapter that loads back onto the base.
    for (const char* gpus : {"1", "2"}) {
        CAPTURE(gpus);
        const fs::path out = tmp.path() / (std::string("ft") + gpus);
        const Ran tuned = run_recipe({"run", "fine_tune", "--threads", "1", "--gpus", gpus, "--set",
                                      "model=" + dir.string(), "--set", "steps=4", "--set", "batch_size=2", "--set",
                                      "context=32", "--set", "eval_every=4", "--set", "eval_batches=2", "--set",
                                      "lora_r=2", "--set", "lr=1e-2", "--out", out.string()});
        INFO(tuned.output);
        REQUIRE(tuned.code == 0);
        const auto r = nlohmann::json::parse(tuned.last_line());
        CHECK(r["val_loss"].get<double>() < r["val_loss_at_start"].get<double>());
        CHECK(fs::exists(out / "model" / "model.safetensors"));
        CHECK(fs::exists(out / "model" / "tokenizer.json"));
        CHECK(fs::exists(out / "adapter" / "adapter_config.json"));
        // The base with the adapter merged computes what the saved model does.
        auto merged = models::load_hf_model(out / "model");
        auto base = models::load_hf_model(dir);
        const auto settings = models::load_peft_adapter(out / "adapter", *base);
        CHECK(settings.rank == 2);
        CHECK(settings.targets.size() == 7);
        const Tensor probe = Tensor::from(std::vector<std::int32_t>{791, 3177, 315, 279}, {1, 4});
        autograd::InferenceMode inference;
        const auto want = merged->logits(probe).values(), got = base->logits(probe).values();
        double worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(want[i] - got[i]));
        CHECK(worst < 1e-4);
    }
}

TEST_CASE("bad HF directories are refused before anything starts: exit 2, one line naming the fault") {
    TempDir tmp;
    fs::create_directories(tmp.path() / "empty");
    fs::copy(reference_dir() / "llama", tmp.path() / "gemma");
    {
        auto config = nlohmann::json::parse(std::ifstream(tmp.path() / "gemma" / "config.json"));
        config["model_type"] = "gemma";
        std::ofstream(tmp.path() / "gemma" / "config.json") << config.dump();
    }
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::string ids = tmp.write("ids.json", "[1, 2, 3]").string();
    const Case cases[] = {
        {{"run", "eval_lm", "--set", "model=" + (tmp.path() / "empty").string(), "--set", "tokens=" + ids},
         "empty: no config.json; a Hugging Face model directory has one"},
        {{"run", "sample", "--set", "model=" + (tmp.path() / "gemma").string()},
         "model_type \"gemma\" is not supported; levers reads llama, mistral, qwen2, qwen3"},
        {{"run", "sample", "--set", "model=" + (reference_dir() / "llama").string()},
         "llama: no tokenizer.json; the model's text goes through its own tokenizer"},
        {{"run", "eval_lm", "--set", "model=" + (reference_dir() / "llama").string(), "--set", "text=/etc/hostname"},
         "llama: no tokenizer.json"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.message);
        const Ran r = run_recipe(c.args);
        INFO(r.output);
        CHECK(r.output.find(c.message) != std::string::npos);
        CHECK(r.code == 2);
    }
}
