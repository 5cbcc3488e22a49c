// `recipe run dpo` through the real binary, on the tests' tiny Llama and
// tokenizer: log 2 at the first step (LoRA's reference is the policy
// itself there), TRL's metrics in metrics.jsonl, 2 ranks equal to 1 with the
// same global batch, exact resume, the reference precomputed or a frozen
// copy giving the same numbers, a preference learned, and bad input refused
// with one line before anything starts.
#include "tests/cli/run_metrics.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace levers;
using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

fs::path tiny_dpo_model(const TempDir& tmp, const std::string& name = "model", std::uint64_t seed = 5) {
    return save_tiny_chat_llama(tmp.path() / name, 128, seed);
}

// Sums asked as conversations and as text: the right answer chosen, a wrong one rejected.
fs::path pairs(const TempDir& tmp) {
    std::string lines;
    for (int i = 0; i < 20; ++i) {
        const std::string a = std::to_string(i), b = std::to_string(i + 3), right = std::to_string(2 * i + 3),
                          wrong = std::to_string(2 * i + 7);
        if (i % 2 == 0)
            lines += R"({"prompt": [{"role": "user", "content": "What is )" + a + " plus " + b +
                     R"(?"}], "chosen": [{"role": "assistant", "content": "It is )" + right +
                     R"(, surely."}], "rejected": [{"role": "assistant", "content": "Maybe )" + wrong + R"(."}]})" "\n";
        else
            lines += R"({"prompt": ")" + a + " plus " + b + R"( is", "chosen": " )" + right +
                     R"(, surely.", "rejected": " maybe )" + wrong + R"(."})" "\n";
    }
    return tmp.write("pairs.jsonl", lines);
}

std::vector<std::string> dpo(const fs::path& model, const fs::path& data, const fs::path& out, int gpus) {
    return {"run", "dpo", "--gpus", std::to_string(gpus), "--threads", "1", "--out", out.string(), "--set",
            "model=" + model.string(), "--set", "data=" + data.string(), "--set", "context=64", "--set",
            "packing=false", "--set", "global_batch=4", "--set", "steps=6", "--set", "checkpoint_every=3", "--set",
            "eval_every=3", "--set", "log_every=1", "--set", "val_fraction=0.2", "--set", "lr=1e-2"};
}

}  // namespace

TEST_CASE("recipe run dpo: log 2 at the first step, TRL's metrics, 2 ranks equal to 1, exact resume") {
    TempDir tmp;
    const fs::path model = tiny_dpo_model(tmp), data = pairs(tmp);
    std::vector<std::vector<nlohmann::json>> curves;
    for (const int gpus : {1, 2}) {
        CAPTURE(gpus);
        const fs::path full = tmp.path() / ("full" + std::to_string(gpus));
        const Ran a = ran_ok(dpo(model, data, full, gpus));
        CHECK(a.output.find("10 conversation pairs, 10 text pairs; 4 held out") != std::string::npos);
        CHECK(a.output.find("reference: the base, its LoRA adapters switched off") != std::string::npos);
        const auto rows = train_rows(full);
        REQUIRE(rows.size() == 6);
        CHECK(rows[0]["loss"].get<double>() == doctest::Approx(std::log(2.0)).epsilon(1e-6));
        CHECK(rows[0]["rewards/margins"].get<double>() == doctest::Approx(0.0).scale(1e-6));
        for (const char* name : {"rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
                                 "logps/chosen", "logps/rejected"})
            CHECK(rows.back().contains(name));
        CHECK(rows.back()["loss"].get<double>() < std::log(2.0));
        CHECK(fs::exists(full / "model" / "model.safetensors"));
        CHECK(fs::exists(full / "adapter" / "adapter_model.safetensors"));
        curves.push_back(rows);
        // From step 3's checkpoint, the same end, bit for bit.
        const fs::path resumed = tmp.path() / ("resumed" + std::to_string(gpus));
        auto args = dpo(model, data, resumed, gpus);
        args.insert(args.end(), {"--resume", (full / "checkpoints" / "step-00000003.ckpt").string()});
        ran_ok(args);
        same_checkpoints(full / "checkpoints" / "step-00000006.ckpt", resumed / "checkpoints" / "step-00000006.ckpt");
    }
    // Two ranks of two pairs each step what one rank of four does (to the order of the gradients' sums).
    for (std::size_t s = 0; s < curves[0].size(); ++s) {
        CAPTURE(s);
        CHECK(curves[1][s]["loss"].get<double>() == doctest::Approx(curves[0][s]["loss"].get<double>()).epsilon(1e-4));
        CHECK(curves[1][s]["rewards/margins"].get<double>() ==
              doctest::Approx(curves[0][s]["rewards/margins"].get<double>()).epsilon(1e-3).scale(1e-4));
    }
}

TEST_CASE("recipe run dpo: the reference precomputed, a frozen copy or another directory, and a preference learned") {
    TempDir tmp;
    const fs::path model = tiny_dpo_model(tmp), data = pairs(tmp);
    auto with = [&](const std::string& name, std::vector<std::string> more) {
        auto args = dpo(model, data, tmp.path() / name, 1);
        args.insert(args.end(), more.begin(), more.end());
        return args;
    };
    // Every weight trained: a frozen copy of the base, or its numbers scored once; the same curve.
    const Ran copy = ran_ok(with("copy", {"--set", "lora_r=0", "--set", "lr=1e-3"}));
    CHECK(copy.output.find("reference: a frozen " + model.string()) != std::string::npos);
    const Ran once = ran_ok(with("once", {"--set", "lora_r=0", "--set", "lr=1e-3", "--set", "precompute_ref=true"}));
    CHECK(once.output.find("scored once before training") != std::string::npos);
    const auto a = train_rows(tmp.path() / "copy"), b = train_rows(tmp.path() / "once");
    REQUIRE(a.size() == b.size());
    CHECK(a[0]["loss"].get<double>() == doctest::Approx(std::log(2.0)).epsilon(1e-6));
    for (std::size_t s = 0; s < a.size(); ++s)
        CHECK(b[s]["loss"].get<double>() == doctest::Approx(a[s]["loss"].get<double>()).epsilon(1e-5));
    // Another model as the reference: no longer log 2 at the first step.
    const fs::path other = tiny_dpo_model(tmp, "other", 9);
    ran_ok(with("against_other", {"--set", "ref_model=" + other.string(), "--set", "steps=1"}));
    CHECK(std::abs(train_rows(tmp.path() / "against_other")[0]["loss"].get<double>() - std::log(2.0)) > 1e-3);
    // Thirty steps: the held-out pairs' right answers preferred (margins grow slowly at beta 0.1).
    const Ran learned = ran_ok(with("learned", {"--set", "steps=30", "--set", "eval_every=30", "--set",
                                                "checkpoint_every=0", "--set", "lr=3e-2"}));
    const auto result = nlohmann::json::parse(learned.last_line());
    CHECK(result["val_rewards/accuracies"].get<double>() >= 0.75);
    INFO(learned.output);
    CHECK(result["val_rewards/margins"].get<double>() > 0.2);
    CHECK(result["val_loss"].get<double>() < 0.8 * std::log(2.0));
    // QLoRA: the base held in 4 bits, the reference that base with its adapters off; log 2 at the first step.
    const Ran qlora = ran_ok(with("qlora", {"--set", "quantize=nf4", "--set", "steps=30", "--set", "eval_every=30",
                                            "--set", "checkpoint_every=0", "--set", "lr=3e-2"}));
    CHECK(qlora.output.find("base held in 4 bits: ") != std::string::npos);
    CHECK(train_rows(tmp.path() / "qlora")[0]["loss"].get<double>() == doctest::Approx(std::log(2.0)).epsilon(1e-6));
    CHECK(nlohmann::json::parse(qlora.last_line())["val_rewards/accuracies"].get<double>() >= 0.75);
    // IPO and SimPO run the same way; gguf= writes the tuned model for llama.cpp too.
    for (const std::string loss : {"ipo", "simpo"}) {
        CAPTURE(loss);
        const Ran r = ran_ok(with(loss, {"--set", "loss=" + loss, "--set", "steps=2", "--set", "eval_every=0",
                                         "--set", "checkpoint_every=0", "--set", "gguf=f16"}));
        const auto result = nlohmann::json::parse(r.last_line());
        CHECK(std::isfinite(result["val_loss"].get<double>()));
        CHECK(fs::exists(tmp.path() / loss / "model-f16.gguf"));
        CHECK(result["gguf"] == (tmp.path() / loss / "model-f16.gguf").string());
    }
}

TEST_CASE("recipe run dpo refuses bad pairs and settings with one line, exit 2, nothing written") {
    TempDir tmp;
    const fs::path model = tiny_dpo_model(tmp), data = pairs(tmp);
    const auto refused = [&](std::vector<std::string> args, const std::string& line) {
        const fs::path out = tmp.path() / "refused";
        args = concat({"run", "dpo", "--out", out.string(), "--set", "model=" + model.string()}, args);
        const Ran r = run_recipe(args);
        INFO(r.output);
        CHECK(r.code == 2);
        CHECK(r.output.find("error: " + line) != std::string::npos);
        CHECK_FALSE(fs::exists(out));
    };
    const std::string ok = R"({"prompt": "1 plus 1 is", "chosen": " 2.", "rejected": " 3."})" "\n";
    const auto file = [&](const std::string& lines) { return "data=" + tmp.write("bad.jsonl", ok + lines).string(); };
    const std::string bad = (tmp.path() / "bad.jsonl").string();
    refused({}, "dpo needs --set data=FILE.jsonl");
    refused({"--set", file(R"({"prompt": "x", "chosen": "y"})")}, bad + " line 2: a preference pair needs \"rejected\"");
    refused({"--set", file(R"({"prompt": "x", "chosen": "y", "rejected": "y"})")},
            bad + " line 2: \"chosen\" and \"rejected\" are the same answer");
    refused({"--set", file(R"({"prompt": ")" + std::string(300, 'x') + R"(", "chosen": "y", "rejected": "z"})"),
             "--set", "context=16"},
            bad + " line 2: the prompt is");
    refused({"--set", "data=" + data.string(), "--set", "loss=kto"}, "--set loss=kto: a preference loss is sigmoid");
    refused({"--set", "data=" + data.string(), "--set", "beta=0"}, "--set beta=0 must be positive");
    refused({"--set", "data=" + data.string(), "--set", "label_smoothing=0.5"}, "--set label_smoothing=0.5 must be");
    const fs::path gemma = save_tiny_llama(tmp.path() / "gemma", tiny_of_type("gemma2", {.vocab = kTinyTokenizerVocab,
                                                                                         .context = 128}), 5);
    refused({"--set", "data=" + data.string(), "--set", "ref_model=" + gemma.string()},
            "--set ref_model=" + gemma.string() + ": a gemma2 of 517 tokens cannot be the reference of a llama");
    refused({"--set", "data=" + data.string(), "--set", "loss=simpo", "--set", "precompute_ref=true"},
            "--set precompute_ref=true: simpo has no reference to score");
}
