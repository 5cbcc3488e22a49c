// The mixtures of experts through the real binary (eval_lm is
// test_hf_recipes.cpp's): sample generates from a Mixtral, fine_tune adapts
// one with LoRA; and `recipe run sft`: tiny
// Mixtral and Qwen3-MoE models over the tests' tokenizer lower their loss in
// full fine-tuning on 1 rank and on 2 with ZeRO-2 and checkpointing, log
// their routing (the load-balancing loss on the console, the tokens each
// expert took in metrics.jsonl), and with LoRA save the routers they trained
// as PEFT's modules_to_save; bad router and LoRA settings are refused before
// anything starts.
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"
#include "tests/cli/run_metrics.hpp"
#include "tests/cli/sft_runs.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace levers;
using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

fs::path tiny_moe(const TempDir& tmp, const std::string& type) {
    return save_tiny_llama(tmp.path() / type,
                           tiny_of_type(type, {.vocab = kTinyTokenizerVocab, .hidden = 32, .intermediate = 48,
                                               .layers = 2, .heads = 2, .kv_heads = 1, .context = 128}),
                           5);
}

// The validation loss before training and after, from the console.
std::pair<double, double> val_losses(const Ran& r) {
    const std::string first = "eval step     0 | val_loss ";
    const auto at = r.output.find(first);
    REQUIRE(at != std::string::npos);
    return {std::stod(r.output.substr(at + first.size())),
            nlohmann::json::parse(r.last_line())["val_loss"].get<double>()};
}

}  // namespace

TEST_CASE("recipe run sft of Mixtral and Qwen3-MoE lowers the loss on 1 rank and on 2 (ZeRO-2, checkpointing), "
          "logging the routing") {
    TempDir tmp;
    const fs::path data = examples(tmp);
    for (const std::string type : {"mixtral", "qwen3_moe"}) {
        const fs::path model = tiny_moe(tmp, type);
        for (const int gpus : {1, 2}) {
            CAPTURE(type);
            CAPTURE(gpus);
            const fs::path out = tmp.path() / (type + "_x" + std::to_string(gpus));
            auto args = sft(model, data, out, gpus);
            args.insert(args.end(), {"--set", "steps=24", "--set", "eval_every=24", "--set", "checkpoint_every=0",
                                     "--set", "lora_r=0", "--set", "lr=3e-3", "--set", "batch_size=4", "--set",
                                     "log_every=8", "--set", "router=aux:0.02,z:0.001"});
            if (gpus == 2) args.insert(args.end(), {"--set", "zero=2", "--set", "checkpointing=true"});
            const Ran r = run_recipe(args);
            INFO(r.output);
            REQUIRE(r.code == 0);
            const auto [before, after] = val_losses(r);
            CHECK(after < 0.8 * before);
            CHECK(r.output.find("experts (top 2)") != std::string::npos);
            CHECK(r.output.find("| aux_loss ") != std::string::npos);
            CHECK(r.output.find("| max_expert_load ") != std::string::npos);
            CHECK(r.output.find("experts/") == std::string::npos);  // the histogram is the metrics file's
            // Each step's histogram: per sparse layer, the shares of its tokens, summing to 1.
            std::ifstream metrics(out / "metrics.jsonl");
            int steps = 0;
            for (std::string line; std::getline(metrics, line);) {
                const auto row = nlohmann::json::parse(line);
                if (row["kind"] != "train") continue;
                ++steps;
                double shares = 0;
                for (int e = 0; e < 4; ++e) shares += row[fmt::format("experts/0/{}", e)].get<double>();
                CHECK(shares == doctest::Approx(1.0));
                CHECK(row["aux_loss"].get<double>() >= 1.0);  // E · Σ f_e P_e is 1 when balanced, more when not
            }
            CHECK(steps == 24);
            CHECK(models::load_hf_model(out / "model")->summary() == models::load_hf_model(model)->summary());
        }
    }
}

TEST_CASE("recipe run sft of a MoE with LoRA: adapters on attention and the experts, the routers trained whole and "
          "saved as modules_to_save; frozen with train_router=false") {
    TempDir tmp;
    const fs::path data = examples(tmp), model = tiny_moe(tmp, "mixtral");
    for (const bool train_router : {true, false}) {
        CAPTURE(train_router);
        const fs::path out = tmp.path() / (train_router ? "trained" : "frozen");
        auto args = sft(model, data, out, 1);
        args.insert(args.end(), {"--set", "steps=6", "--set", "lora_r=4", "--set", "lr=1e-2", "--set",
                                 train_router ? "train_router=true" : "train_router=false"});
        const Ran r = run_recipe(args);
        INFO(r.output);
        REQUIRE(r.code == 0);
        const auto config = nlohmann::json::parse(std::ifstream(out / "adapter" / "adapter_config.json"));
        CHECK(config["target_modules"] == nlohmann::json{"k_proj", "o_proj", "q_proj", "v_proj", "w1", "w2", "w3"});
        CHECK(config["modules_to_save"] == (train_router ? nlohmann::json{"gate"} : nlohmann::json(nullptr)));
        // The adapter (and the routers) onto the base compute what the merged model the run saved computes.
        auto base = models::load_hf_model(model);
        models::load_peft_adapter(out / "adapter", *base);
        const Tensor x = Tensor::from(std::vector<std::int32_t>{1, 5, 9, 200, 3, 7}, {1, 6});
        const auto adapted = base->logits(x).values(), merged = models::load_hf_model(out / "model")->logits(x).values();
        for (std::size_t i = 0; i < adapted.size(); ++i) CHECK(adapted[i] == doctest::Approx(merged[i]).epsilon(1e-4));
        const auto saved = models::load_hf_model(out / "model");
        const auto original = models::load_hf_model(model);
        const bool router_moved = saved->model.layers[0].moe->gate.weight.value().values() !=
                                  original->model.layers[0].moe->gate.weight.value().values();
        CHECK(router_moved == train_router);
    }
}

TEST_CASE("recipe run sft of a MoE refuses bad router and LoRA settings with one line, exit 2, nothing written") {
    TempDir tmp;
    const fs::path data = examples(tmp), mixtral = tiny_moe(tmp, "mixtral");
    const fs::path dense = save_tiny_llama(tmp.path() / "dense",
                                           tiny_llama({.vocab = kTinyTokenizerVocab, .hidden = 16, .intermediate = 32,
                                                       .layers = 1, .heads = 2, .kv_heads = 1, .context = 128}),
                                           5);
    const auto refused = [&](const fs::path& model, std::vector<std::string> args, const std::string& line) {
        const fs::path out = tmp.path() / "refused";
        args = concat({"run", "sft", "--out", out.string(), "--set", "model=" + model.string(), "--set",
                       "data=" + data.string()}, args);
        const Ran r = run_recipe(args);
        INFO(r.output);
        CHECK(r.code == 2);
        CHECK(r.output.find("error: " + line) != std::string::npos);
        CHECK_FALSE(fs::exists(out));
    };
    refused(mixtral, {"--set", "router=capacity:1.25"},
            "--set router=capacity:1.25: unknown router option 'capacity'; the options are aux:COEF");
    refused(mixtral, {"--set", "router=aux:much"}, "--set router=aux:much: 'aux:much' needs a weight >= 0, as aux:0.01");
    refused(dense, {"--set", "router=aux:0.01"},
            "--set router=aux:0.01: " + dense.string() + " is a dense llama model; router options go with mixtures "
            "of experts (mixtral, qwen3_moe)");
    refused(mixtral, {"--set", "lora_targets=gate_proj,up_proj"},
            "--set lora_targets=gate_proj,up_proj: LoRA target 'gate_proj' names no Linear layer of this model; its "
            "layers are gate, k_proj, o_proj, q_proj, v_proj, w1, w2, w3 (mixtral)");
}

TEST_CASE("sample generates from a Mixtral through the KV cache; fine_tune adapts one with LoRA") {
    TempDir tmp;
    const fs::path mixtral = tiny_moe(tmp, "mixtral");
    const Ran sampled = run_recipe({"run", "sample", "--set", "model=" + mixtral.string(), "--set", "tokens=8", "--set",
                                    "prompt=What is 3 plus 7?", "--set", "temperature=0"});
    INFO(sampled.output);
    REQUIRE(sampled.code == 0);
    CHECK(nlohmann::json::parse(sampled.last_line())["text"].get<std::string>().starts_with("What is 3 plus 7?"));
    const fs::path corpus = tmp.write("sums.txt", std::string(4000, 'x') + " 1 plus 2 is 3. 2 plus 5 is 7.");
    const Ran tuned = run_recipe({"run", "fine_tune", "--threads", "1", "--set", "model=" + mixtral.string(), "--set",
                                  "corpus=" + corpus.string(), "--set", "steps=4", "--set", "batch_size=2", "--set",
                                  "context=32", "--set", "eval_every=4", "--set", "eval_batches=2", "--set", "lora_r=2",
                                  "--out", (tmp.path() / "ft").string()});
    INFO(tuned.output);
    REQUIRE(tuned.code == 0);
    CHECK(fs::exists(tmp.path() / "ft" / "adapter" / "adapter_config.json"));
    CHECK(tuned.output.find("| aux_loss ") != std::string::npos);
}
