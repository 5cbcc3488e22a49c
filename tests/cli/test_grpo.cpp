// `recipe run grpo` through the real binary, on the tests' tiny Llama and
// tokenizer: a toy task whose reward rises to nearly 1 (answers that end
// with a given word), TRL's metrics and the time split in metrics.jsonl,
// 2 ranks equal to 1 with the same global batch, exact resume (between the
// updates of one generated batch too), the KL to a reference, and bad input
// refused with one line before anything starts.
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

fs::path tiny_grpo_model(const TempDir& tmp, const std::string& name = "model", std::uint64_t seed = 5) {
    return save_tiny_chat_llama(tmp.path() / name, 64, seed);
}

// Requests to end an answer with a word, as conversations and as text; the word is each record's.
fs::path prompts(const TempDir& tmp) {
    std::string lines;
    const std::vector<std::string> topics = {"the sea", "a whale", "the river", "a boy", "light", "the fence",
                                             "a ship", "colours"};
    for (std::size_t i = 0; i < topics.size(); ++i) {
        if (i % 2 == 0)
            lines += R"({"prompt": [{"role": "user", "content": "Say something about )" + topics[i] +
                     R"(, ending with the word."}], "word": "the"})" "\n";
        else
            lines += R"({"prompt": "Something about )" + topics[i] + R"(:", "word": "the"})" "\n";
    }
    return tmp.write("prompts.jsonl", lines);
}

std::vector<std::string> grpo(const fs::path& model, const fs::path& data, const fs::path& out, int gpus,
                              std::vector<std::string> more = {}) {
    return concat({"run", "grpo", "--gpus", std::to_string(gpus), "--threads", "1", "--out", out.string(), "--set",
                   "model=" + model.string(), "--set", "prompts=" + data.string(), "--set", "lora_r=0", "--set",
                   "global_batch=4", "--set", "num_generations=8", "--set", "max_completion_length=3", "--set",
                   "rewards=regex", "--set", R"(reward_regex=the\W*$)", "--set", "steps=6", "--set",
                   "checkpoint_every=3", "--set", "lr=1e-2"},
                  more);
}

}  // namespace

TEST_CASE("grpo with a project's own reward: a tiny model learns to end its answers with a word, the reward rising "
          "to nearly 1") {
    TempDir tmp;
    const fs::path model = tiny_grpo_model(tmp), data = prompts(tmp);
    constexpr std::size_t kSteps = 60;
    // The user's binary (examples/user_project) has the shipped recipes and its own reward, last_word.
    const auto user = [&](const fs::path& prompts_file, const std::string& out) {
        return run_program(std::getenv("LEVERS_USER_RECIPES_BIN"),
                           grpo(model, prompts_file, tmp.path() / out, 1,
                                {"--set", "rewards=last_word", "--set", "num_generations=16", "--set",
                                 "steps=" + std::to_string(kSteps), "--set", "checkpoint_every=0", "--set", "lr=3e-2"}));
    };
    const Ran r = user(data, "learn");
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("prompts " + data.string() + ": 4 conversations, 4 texts") != std::string::npos);
    CHECK(r.output.find("rewards: last_word x1; loss dapo (epsilon 0.2, 0.2; beta 0); reference: none (beta 0)") !=
          std::string::npos);
    const auto rows = train_rows(tmp.path() / "learn");
    REQUIRE(rows.size() == kSteps);
    for (const char* name : {"reward", "reward_std", "frac_reward_zero_std", "rewards/last_word/mean",
                             "rewards/last_word/std", "completions/mean_length", "completions/min_length", "completions/max_length",
                             "completions/clipped_ratio", "clip_ratio/region_mean", "time/generate_s",
                             "time/reference_s", "time/update_s", "time/generate_share"})
        CHECK(rows.back().contains(name));
    CHECK_FALSE(rows.back().contains("kl"));
    std::string curve;
    for (const auto& row : rows) curve += fmt::format("{:.2f} ", row["reward"].get<double>());
    INFO("reward per step: " << curve);
    const auto mean_of = [&](std::size_t from, std::size_t to) {
        double sum = 0;
        for (std::size_t s = from; s < to; ++s) sum += rows[s]["reward"].get<double>();
        return sum / static_cast<double>(to - from);
    };
    CHECK(mean_of(0, 5) < 0.3);
    CHECK(mean_of(kSteps - 10, kSteps) >= 0.9);
    CHECK(fs::exists(tmp.path() / "learn" / "model" / "model.safetensors"));
    // The reward's curve drawn; a metric the run never logged named with those it did.
    ran_ok({"plot", (tmp.path() / "learn").string(), "--metric", "reward"});
    CHECK(fs::file_size(tmp.path() / "learn" / "plot.png") > 1000);
    const Ran no_metric = run_recipe({"plot", (tmp.path() / "learn").string(), "--metric", "kl"});
    CHECK(no_metric.code == 2);
    CHECK(no_metric.output.find("--metric kl: no training step of the runs logged it (they logged: "
                                "clip_ratio/high_mean") != std::string::npos);

    // A reward that throws (a prompt without its "word") stops the run naming the reward and the prompt's line.
    const fs::path wordless = tmp.write("wordless.jsonl", R"({"prompt": "a", "word": "the"})" "\n"
                                                          R"({"prompt": "b"})" "\n");
    const Ran failed = user(wordless, "wordless");
    CHECK(failed.code != 0);
    CHECK(failed.output.find("the reward last_word failed on the prompt at " + wordless.string() +
                             " line 2: the prompt's record has no \"word\"") != std::string::npos);
}

TEST_CASE("recipe run grpo: 2 ranks equal to 1, exact resume, several updates per generated batch, the KL") {
    TempDir tmp;
    const fs::path model = tiny_grpo_model(tmp), data = prompts(tmp);
    std::vector<std::vector<nlohmann::json>> curves;
    for (const int gpus : {1, 2}) {
        CAPTURE(gpus);
        // Two updates per generated batch and a checkpoint between them (step 3): the answers are kept with it.
        // Answers with an "e" anywhere: rewards that differ within groups from the first step.
        const std::vector<std::string> more = {"--set", "num_iterations=2", "--set", "beta=0.04", "--set",
                                               "loss_type=grpo", "--set", "reward_regex=e"};
        const fs::path full = tmp.path() / ("full" + std::to_string(gpus));
        const Ran a = ran_ok(grpo(model, data, full, gpus, more));
        CHECK(a.output.find("reference: a frozen " + model.string()) != std::string::npos);
        const auto rows = train_rows(full);
        REQUIRE(rows.size() == 6);
        CHECK(rows[0]["kl"].get<double>() == doctest::Approx(0.0).scale(1e-9));
        CHECK(rows[0]["frac_reward_zero_std"].get<double>() < 1);
        CHECK(rows[1]["kl"].get<double>() > 0);  // the second update, against the first's starting point
        // The second update of a batch generated nothing.
        CHECK(rows[0]["time/generate_s"].get<double>() > 0);
        CHECK(rows[1]["time/generate_s"].get<double>() == 0);
        CHECK(rows[1]["reward"] == rows[0]["reward"]);
        curves.push_back(rows);
        const fs::path resumed = tmp.path() / ("resumed" + std::to_string(gpus));
        auto args = grpo(model, data, resumed, gpus, more);
        args.insert(args.end(), {"--resume", (full / "checkpoints" / "step-00000003.ckpt").string()});
        ran_ok(args);
        same_checkpoints(full / "checkpoints" / "step-00000006.ckpt", resumed / "checkpoints" / "step-00000006.ckpt");
    }
    // Two ranks of two prompts each step what one rank of four does: the same answers (each completion's sampler
    // is its prompt's and the round's, not the rank's), the same losses to the order of the gradients' sums.
    for (std::size_t s = 0; s < curves[0].size(); ++s) {
        CAPTURE(s);
        CHECK(curves[1][s]["reward"].get<double>() == doctest::Approx(curves[0][s]["reward"].get<double>()));
        CHECK(curves[1][s]["completions/mean_length"].get<double>() ==
              doctest::Approx(curves[0][s]["completions/mean_length"].get<double>()));
        CHECK(curves[1][s]["loss"].get<double>() ==
              doctest::Approx(curves[0][s]["loss"].get<double>()).epsilon(1e-4).scale(1e-2));
    }
}

TEST_CASE("recipe run grpo with LoRA: the reference is the base with its adapters off; the run saves the adapter") {
    TempDir tmp;
    const fs::path model = tiny_grpo_model(tmp), data = prompts(tmp);
    const Ran r = ran_ok(grpo(model, data, tmp.path() / "lora", 1,
                              {"--set", "lora_r=4", "--set", "beta=0.1", "--set", "steps=2", "--set",
                               "checkpoint_every=0", "--set", "loss_type=dr_grpo", "--set", "rewards=regex,length_penalty",
                               "--set", "reward_weights=1,0.5", "--set", "gguf=f16"}));
    CHECK(r.output.find("rewards: regex x1, length_penalty x0.5") != std::string::npos);
    CHECK(r.output.find("reference: the base, its LoRA adapters switched off") != std::string::npos);
    const auto rows = train_rows(tmp.path() / "lora");
    REQUIRE(rows.size() == 2);
    // LoRA starts as the identity: the policy is its reference at the first step.
    CHECK(rows[0]["kl"].get<double>() == doctest::Approx(0.0).scale(1e-9));
    CHECK(rows[0].contains("rewards/length_penalty/mean"));
    CHECK(fs::exists(tmp.path() / "lora" / "adapter" / "adapter_model.safetensors"));
    CHECK(fs::exists(tmp.path() / "lora" / "model-f16.gguf"));
}

TEST_CASE("recipe run grpo refuses bad prompts and settings with one line, exit 2, nothing written") {
    TempDir tmp;
    const fs::path model = tiny_grpo_model(tmp), data = prompts(tmp);
    const auto refused = [&](std::vector<std::string> args, const std::string& line) {
        const fs::path out = tmp.path() / "refused";
        args = concat({"run", "grpo", "--out", out.string(), "--set", "model=" + model.string(), "--set",
                       "max_completion_length=8"},
                      args);
        const Ran r = run_recipe(args);
        INFO(r.output);
        CHECK(r.code == 2);
        CHECK(r.output.find("error: " + line) != std::string::npos);
        CHECK_FALSE(fs::exists(out));
    };
    const std::string prompts_set = "prompts=" + data.string();
    const std::string bad = tmp.write("bad.jsonl", R"({"prompt": "a"})" "\n" R"({"question": "b"})" "\n").string();
    refused({}, "grpo needs --set prompts=FILE.jsonl");
    refused({"--set", "prompts=" + bad}, bad + " line 2: a line needs \"prompt\"");
    refused({"--set", prompts_set, "--set", "loss_type=ppo"}, "--set loss_type=ppo: a GRPO loss type is grpo");
    refused({"--set", prompts_set, "--set", "rewards=f1"}, "--set rewards=f1: no reward of that name is registered "
            "(registered: contains, exact_match, length_penalty, regex;");
    refused({"--set", prompts_set, "--set", "rewards=regex"}, "the regex reward needs --set reward_regex=PATTERN");
    refused({"--set", prompts_set, "--set", "rewards=regex", "--set", "reward_regex=(a"},
            "--set reward_regex=(a: PCRE2 refuses it");
    refused({"--set", prompts_set, "--set", "reward_weights=1,2"}, "--set reward_weights=1,2 gives 2 weights for 1 "
            "rewards");
    refused({"--set", prompts_set, "--set", "temperature=0"}, "--set temperature=0 must be positive");
    refused({"--set", prompts_set, "--set", "num_generations=1"},
            "parameter 'num_generations': 1 is out of range; it must be >= 2");
    refused({"--set", prompts_set, "--set", "max_completion_length=64"}, "--set max_completion_length=64 leaves no "
            "room for a prompt");
    const fs::path gemma = save_tiny_llama(tmp.path() / "gemma", tiny_of_type("gemma2", {.vocab = kTinyTokenizerVocab,
                                                                                         .context = 64}), 5);
    refused({"--set", prompts_set, "--set", "beta=0.1", "--set", "ref_model=" + gemma.string()},
            "--set ref_model=" + gemma.string() + ": a gemma2 of 517 tokens cannot be the reference of a llama");
    refused({"--set", prompts_set, "--set", "ref_model=" + model.string()},
            "--set ref_model=" + model.string() + ": with beta=0 no reference is used");
}
