// The `recipe` command line, through the real binary.
#include "levers/core/environment.hpp"
#include "levers/core/gpu.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/installed_data.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace {

using levers::testing::Ran;
namespace testing = levers::testing;

Ran recipe_line(const std::string& args) { return levers::testing::run_recipe(levers::testing::words(args)); }

// The tests' tiny GPT, as command-line text, trained 3 steps on one thread.
const std::string kTinyGptFlags = [] {
    std::string text = "--threads 1 --set steps=3 --set sample_tokens=10 --set log_every=1";
    for (const auto& w : levers::testing::kTinyGpt) text += " " + w;
    return text;
}();

}  // namespace

TEST_CASE("recipe --help, --version, list and show") {
    auto help = recipe_line("--help");
    CHECK(help.code == 0);
    CHECK(help.output.find("Examples:") != std::string::npos);
    CHECK(recipe_line("--version").output.find("levers 0.1.0") != std::string::npos);
    auto list = recipe_line("list");
    CHECK(list.code == 0);
    CHECK(list.output.find("pretrain") != std::string::npos);
    CHECK(list.output.find("classify") != std::string::npos);
    auto show = recipe_line("show pretrain");
    CHECK(show.code == 0);
    CHECK(show.output.find("n_embd") != std::string::npos);
    CHECK(show.output.find("model width") != std::string::npos);
    // The model the defaults build, by the names its checkpoints use.
    CHECK(show.output.find("model parameters (52 tensors, 842496 values, 842496 of them trained)") != std::string::npos);
    CHECK(show.output.find("h.3.attn.c_attn.weight") != std::string::npos);
    CHECK(show.output.find("ln_f.bias                                [128]            trained") != std::string::npos);
}

TEST_CASE("recipe help env prints every environment variable levers reads") {
    auto r = recipe_line("help env");
    CHECK(r.code == 0);
    for (const auto& section : levers::env::kSections) {
        CHECK(r.output.find(std::string(section.title)) != std::string::npos);
        for (const auto& v : section.variables) {
            CAPTURE(v.name);
            CHECK(r.output.find("  " + std::string(v.name) + " ") != std::string::npos);
        }
    }
    CHECK(r.output.find("LEVERS_RESUME") != std::string::npos);
    CHECK(recipe_line("help").output.find("Examples:") != std::string::npos);
}

TEST_CASE("bad command lines exit 2 with one clear line, before anything runs") {
    struct Case {
        const char *args, *message;
    };
    const Case cases[] = {
        {"run pretian", "unknown recipe 'pretian'; did you mean 'pretrain'?"},
        {"run pretrain --set stepz=3", "unknown parameter 'stepz'; valid parameters: steps,"},
        {"run pretrain --set steps=abc", "parameter 'steps': 'abc' is not an integer"},
        {"run pretrain --set steps", "--set expects name=value, got 'steps'"},
        {"run classify --set hidden=16,x", "parameter 'hidden': '16,x' is not a comma-separated list"},
        {"run pretrain --threads -1", "--threads must be >= 0"},
        {"frobnicate", "unknown command 'frobnicate'; valid commands: list, show, run, plan, submit, sweep, plot, bench, "
                       "status, workspace, tokenize, gguf-info, help"},
        {"help frobs", "topic: frobs not in {env}"},
        {"run pretrain --gpus 0", "--gpus must be >= 1, got 0"},
        {"run pretrain --gpus -2", "--gpus must be >= 1, got -2"},
        {"run classify --gpus -1", "--gpus must be >= 1, got -1"},  // not taken for "unset"
        {"run classify --set steps=-5", "parameter 'steps': -5 is out of range; it must be >= 1 (optimizer steps)"},
        {"run classify --set batch_size=0", "parameter 'batch_size': 0 is out of range; it must be >= 1"},
        {"run classify --set lr=0", "lr must be a positive number, got 0"},
        {"run pretrain --set grad_accum=0", "parameter 'grad_accum': 0 is out of range; it must be >= 1"},
        {"run eval_lm --set weights=/etc/passwd --set text=/etc/passwd",
         "--set weights=/etc/passwd: neither a levers checkpoint nor safetensors; give a levers checkpoint (model.ckpt "
         "from pretrain or fine_tune) or GPT-2 weights in safetensors"},
        {"run eval_lm --set weights=/nonexistent.safetensors --set text=/etc/passwd",
         "--set weights=/nonexistent.safetensors: no such file"},
        {"run eval_lm", "eval_lm needs one model: --set model=DIR (a Hugging Face directory of a Llama, Mistral or Qwen model) or --set weights=PATH"},
        {"run eval_lm --set model=/nonexistent --set tokens=/etc/passwd", "/nonexistent: no such directory; give a Hugging Face model directory"},
        {"run sample", "sample needs one model: --set model=DIR (a Hugging Face directory) or --set checkpoint=PATH"},
        {"run convert --set from=/etc/passwd --set to=x.safetensors", "--set from=/etc/passwd: neither a levers"},
        {"run fine_tune --set base=/nonexistent.ckpt", "base checkpoint /nonexistent.ckpt not found"},
        {"sweep classify --grid steps=10,-1", "cell 1: parameter 'steps': -1 is out of range"},
        {"sweep classify --grid lr=", "--grid lr=: no values (give lr=v1,v2,...)"},
        {"sweep classify --grid lr=1e-3,,2e-3", "--grid lr=1e-3,,2e-3: an empty value"},
        {"sweep classify --grid lr", "--grid expects name=v1,v2,..., got 'lr'"},
        {"sweep classify --grid stepz=1,2", "cell 0: unknown parameter 'stepz'; valid parameters: steps,"},
        {"sweep classify --grid steps=10,x", "cell 1: parameter 'steps': 'x' is not an integer"},
        {"sweep classify", "recipe sweep needs --grid name=v1,v2,... or --cells FILE"},
        {"sweep clasify --grid lr=1", "unknown recipe 'clasify'; did you mean 'classify'?"},
        {"sweep classify --grid lr=1 --gpus-per-cell 0", "--gpus-per-cell must be >= 1, got 0"},
        {"sweep classify --grid lr=1 --cells /nonexistent.json", "/nonexistent.json"},
        {"run pretrain --restarts -1", "--restarts must be >= 0"},
        {"submit pretrain --nodes 0", "--nodes must be >= 1, got 0"},
        {"submit pretrain --restarts -2", "--restarts must be >= 0"},
        {"submit pretrian", "unknown recipe 'pretrian'; did you mean 'pretrain'?"},
        {"submit classify --set steps=0", "parameter 'steps': 0 is out of range"},
        {"workspace frobs on", "unknown workspace setting 'frobs'; valid settings: multi-gpu, max-gpus"},
        {"workspace multi-gpu maybe", "multi-gpu: 'maybe' is not on or off"},
        {"", "A subcommand is required"},
    };
    for (const auto& c : cases) {
        std::string args = c.args;
        CAPTURE(args);
        auto r = recipe_line(args);
        CHECK(r.code == 2);
        CHECK(r.output.find(c.message) != std::string::npos);
        CHECK(r.output.find(".cpp:") == std::string::npos);  // no source location in a line for users
        CHECK(r.output.find("run directory") == std::string::npos);  // nothing started
        CHECK(r.output.find("| loss ") == std::string::npos);  // no training started
        CHECK(r.output.find("sweep directory") == std::string::npos);  // no sweep either
    }
    // A machine without Slurm: recipe submit says what is missing, and submits nothing.
    auto r = levers::testing::run_recipe({"submit", "classify"}, {"PATH=/nonexistent"});
    CHECK(r.code == 2);
    CHECK(r.output.find("recipe submit hands the job to Slurm, and sbatch is not on this machine's PATH") !=
          std::string::npos);
    CHECK(r.output.find("run directory") == std::string::npos);
}

TEST_CASE("--device: auto falls back to the CPU without a GPU; cuda without one is refused, naming why" *
          testing::needs({testing::Data::fashion_mnist})) {
    if (levers::gpu_count() > 0) return;  // a GPU is visible: the refusal cannot be provoked here
    auto r = recipe_line(std::string("run classify --device cuda --set steps=2"));
    CHECK(r.code == 2);
    const bool named = r.output.find("--device cuda: no CUDA GPU is visible") != std::string::npos ||
                       r.output.find("--device cuda: this build of levers has no CUDA backend") != std::string::npos;
    CHECK_MESSAGE(named, r.output);
    CHECK(r.output.find("run directory") == std::string::npos);  // refused before anything was made
    auto bad = recipe_line("run classify --device tpu");
    CHECK(bad.code == 2);
    CHECK(bad.output.find("--device") != std::string::npos);
    auto fallback = recipe_line("run classify --device auto --threads 1 --set steps=2 --set eval_every=0");
    CHECK(fallback.code == 0);
    CHECK(fallback.output.find("CPU process") != std::string::npos);
}

TEST_CASE("--precision bf16 is refused on the CPU, naming the device and what would run") {
    auto r = recipe_line(std::string("run classify --device cpu --precision bf16 --set steps=2"));
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find("--precision bf16 computes on GPUs only, and this run's device is cpu") !=
                      std::string::npos,
                  r.output);
    CHECK(r.output.find("run directory") == std::string::npos);  // refused before anything was made
    auto bad = recipe_line("run classify --precision fp8");
    CHECK(bad.code == 2);
    CHECK(bad.output.find("--precision") != std::string::npos);
    // A sweep refuses it once, before any cell starts.
    auto sweep = recipe_line("sweep classify --grid lr=0.01,0.02 --device cpu --precision bf16");
    CHECK(sweep.code == 2);
    CHECK_MESSAGE(sweep.output.find("--precision bf16 computes on GPUs only") != std::string::npos, sweep.output);
    CHECK(sweep.output.find("cell 00 started") == std::string::npos);
    auto bench = recipe_line("bench scaling classify --gpus 1 --precision bf16");
    CHECK(bench.code == 2);
    CHECK_MESSAGE(bench.output.find("--precision bf16 computes on GPUs only") != std::string::npos, bench.output);
}

TEST_CASE("recipe run pretrain: progress lines, a sample, and the result as JSON on the last line" *
          testing::needs({testing::Data::books})) {
    auto r = recipe_line("run pretrain " + kTinyGptFlags);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("step     3/3") != std::string::npos);
    auto result = nlohmann::json::parse(r.last_line());
    CHECK(result["steps"] == 3);
    CHECK(result["loss"].get<double>() > 0);
    CHECK(result["val_loss"].get<double>() > 0);
    CHECK(result["sample"].get<std::string>().starts_with("The "));  // the prompt, then generated bytes
    CHECK(r.output.find("--- sample") != std::string::npos);
}

TEST_CASE("recipe run classify returns a test accuracy" * testing::needs({testing::Data::fashion_mnist})) {
    auto r = recipe_line(
        "run classify --threads 1 --set steps=30 --set warmup=3 --set hidden=16 --set log_every=10 --set eval_every=0");
    REQUIRE(r.code == 0);
    auto result = nlohmann::json::parse(r.last_line());
    CHECK(result["steps"] == 30);
    // 30 steps of 128 images already beat chance (10%) by far.
    CHECK(result["test_accuracy"].get<double>() > 0.4);
}

TEST_CASE("pretrain and classify train on 8 CPU ranks as on one rank of the same global batch" *
          testing::needs({testing::Data::books, testing::Data::fashion_mnist})) {
    const std::string classify = "run classify --output rank0 --threads 1 --set steps=12 --set warmup=2 --set hidden=16 "
                                 "--set log_every=6 --set eval_every=12 --set global_batch=64 --set checkpoint_every=0";
    const std::string pretrain = std::string("run pretrain --output rank0 ") + kTinyGptFlags + " --set global_batch=8";
    for (const std::string& run : {classify, pretrain}) {
        CAPTURE(run);
        auto one = recipe_line(run + " --gpus 1"), eight = recipe_line(run + " --gpus 8");
        INFO(one.output << eight.output);
        REQUIRE(one.code == 0);
        REQUIRE(eight.code == 0);
        const auto a = nlohmann::json::parse(one.last_line()), b = nlohmann::json::parse(eight.last_line());
        CHECK(b["ranks"] == 8);
        CHECK(b["loss"].get<double>() == doctest::Approx(a["loss"].get<double>()).epsilon(1e-6));
        CHECK(b["val_loss"].get<double>() == doctest::Approx(a["val_loss"].get<double>()).epsilon(1e-6));
    }
}

TEST_CASE("a recipe that fails while running exits 1 naming the cause") {
    auto r = recipe_line("run pretrain " + kTinyGptFlags + " --set corpus=/nonexistent/books.txt");
    CHECK(r.code == 1);
    CHECK(r.output.find("/nonexistent/books.txt: no such file") != std::string::npos);
    auto bad_heads = recipe_line("run pretrain " + kTinyGptFlags + " --set n_head=3");
    CHECK(bad_heads.code == 1);
    CHECK(bad_heads.output.find("n_embd (16) must be a positive multiple of n_head (3)") != std::string::npos);
    // Where in levers the error was raised is in the rank's log, not on the console.
    CHECK(bad_heads.output.find(".cpp:") == std::string::npos);
    const std::string dir = bad_heads.output.substr(bad_heads.output.find("run directory ") + 14);
    std::ifstream in(dir.substr(0, dir.find('\n')) + "/rank0.log");
    const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(log.find("(raised at levers/models/") != std::string::npos);
}

TEST_CASE("--gpus beyond the node: oversubscribed CPU ranks are said once; beyond the limits, what would do" *
          testing::needs({testing::Data::fashion_mnist})) {
    ::setenv("LEVERS_CPU_SLOTS", "2", 1);
    auto three = recipe_line("run classify --gpus 3 --threads 1 --set steps=2 --set eval_every=0 --set log_every=1");
    auto huge = recipe_line("run classify --gpus 100000");
    auto over = recipe_line("run classify --gpus 9");
    ::setenv("LEVERS_CPU_SLOTS", "16", 1);
    auto raise = recipe_line("run classify --gpus 9");
    ::unsetenv("LEVERS_CPU_SLOTS");
    INFO(three.output);
    CHECK(three.code == 0);
    const std::string said = "recipe: 3 ranks on 2 CPU slots: ranks share cores (oversubscribed)";
    REQUIRE(three.output.find(said) != std::string::npos);
    CHECK(three.output.find(said) == three.output.rfind(said));
    CHECK(huge.code == 2);
    CHECK(huge.output.find("--gpus 100000: a job runs at most 64 ranks on one node, and this node has 2 CPU slots; use "
                           "--gpus 2 or fewer") != std::string::npos);
    CHECK(huge.output.find("raise it") == std::string::npos);
    CHECK(over.code == 2);
    CHECK(over.output.find("raise it with: recipe workspace max-gpus 9, though this node has 2 CPU slots: ranks beyond "
                           "them share them, or use --gpus 2 or fewer") != std::string::npos);
    CHECK(raise.code == 2);
    CHECK(raise.output.find("--gpus 9: this workspace allows at most 8 GPUs (set by default); raise it with: recipe "
                            "workspace max-gpus 9") != std::string::npos);
}

TEST_CASE("pretrain saves a checkpoint that sample continues from; bad checkpoints are refused" *
          testing::needs({testing::Data::books})) {
    const auto dir = std::filesystem::temp_directory_path() / ("levers-cli-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::string ck = (dir / "gpt.levers").string();
    auto trained = recipe_line("run pretrain " + kTinyGptFlags + " --set checkpoint=" + ck);
    REQUIRE(trained.code == 0);
    CHECK(trained.output.find("saved " + ck) != std::string::npos);
    auto sampled = recipe_line("run sample --threads 1 --set tokens=15 --set prompt=Holmes --set checkpoint=" + ck);
    REQUIRE(sampled.code == 0);
    CHECK(nlohmann::json::parse(sampled.last_line())["text"].get<std::string>().starts_with("Holmes"));

    auto missing = recipe_line("run sample --set checkpoint=" + (dir / "none.levers").string());
    CHECK(missing.code == 2);  // refused before the run starts
    CHECK(missing.output.find("none.levers: no such file") != std::string::npos);
    {
        std::fstream f(ck, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-64 * 3, std::ios::end);  // inside the last tensors' data
        f.write("\x55\x55\x55\x55", 4);
    }
    auto corrupted = recipe_line("run sample --set checkpoint=" + ck);
    CHECK(corrupted.code == 1);
    CHECK(corrupted.output.find("corrupted") != std::string::npos);
    auto unset = recipe_line("run sample");
    CHECK(unset.code == 2);
    CHECK(unset.output.find("sample needs one model: --set model=DIR") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("fine_tune adapts a pretrained model on 1 and 2 ranks; lora_sweep maps it over a grid" *
          testing::needs({testing::Data::books})) {
    levers::testing::TempDir tmp;
    const std::string base = (tmp.path() / "base" / "model.ckpt").string();
    auto trained = recipe_line("run pretrain " + kTinyGptFlags + " --set sample_tokens=0 --out " +
                          (tmp.path() / "base").string());
    REQUIRE(trained.code == 0);
    REQUIRE(std::filesystem::exists(base));

    const std::string tiny = " --threads 1 --set steps=4 --set batch_size=2 --set eval_every=4 --set eval_batches=4"
                             " --set base=" + base;
    for (const char* gpus : {"1", "2", "8"}) {  // 8: the issue's `--gpus 8`, as 8 CPU ranks here
        CAPTURE(gpus);
        auto tuned = recipe_line(std::string("run fine_tune --output rank0 --gpus ") + gpus + tiny + " --out " +
                            (tmp.path() / (std::string("ft") + gpus)).string());
        INFO(tuned.output);
        REQUIRE(tuned.code == 0);
        auto r = nlohmann::json::parse(tuned.last_line());
        CHECK(r["steps"] == 4);
        CHECK(r["ranks"] == std::stoi(gpus));
        CHECK(std::isfinite(r["val_loss"].get<double>()));
        CHECK(std::isfinite(r["val_loss_at_start"].get<double>()));
        // One layer, width 16, rank 8: A and B of c_attn (16 -> 48) and of c_proj (16 -> 16).
        CHECK(r["trainable_parameters"] == 8 * 16 + 48 * 8 + 8 * 16 + 16 * 8);
        CHECK(std::filesystem::exists(r["model"].get<std::string>()));
    }
    auto full = recipe_line("run fine_tune --set lora_r=0" + tiny + " --out " + (tmp.path() / "full").string());
    REQUIRE(full.code == 0);
    CHECK(nlohmann::json::parse(full.last_line())["trainable_parameters"] == 7664);  // every weight

    auto missing = recipe_line("run fine_tune --set base=" + (tmp.path() / "nothing.ckpt").string());
    CHECK(missing.code == 2);  // refused before the run starts
    CHECK(missing.output.find("nothing.ckpt not found; run `recipe run pretrain` first, or give one with --set "
                              "base=PATH") != std::string::npos);

    auto swept = recipe_line("run lora_sweep --set lora_r=2 --set lr=1e-3,3e-3 --set steps=3 --set batch_size=2 --set base=" +
                        base + " --out " + (tmp.path() / "sweep").string());
    INFO(swept.output);
    REQUIRE(swept.code == 0);
    auto r = nlohmann::json::parse(swept.last_line());
    REQUIRE(r["cells"].size() == 2);
    CHECK(r["cells"][0]["status"] == "ok");
    CHECK(r["cells"][1]["lr"] == 3e-3);
    CHECK(std::filesystem::exists(tmp.path() / "sweep" / "map-fine_tune" / "sweep.csv"));
}
