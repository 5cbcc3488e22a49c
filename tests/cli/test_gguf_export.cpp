// GGUF export through the real binary: `recipe run export` of a directory, of
// a run's model and of a run's checkpoints, fine_tune's --set gguf= writing
// one beside model/ with its Modelfile, `recipe gguf-info` reading the file
// back, and bad input refused before anything is written: exit 2, one line
// naming the fault.
#include "levers/core/checkpoint.hpp"
#include "levers/data/gguf.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace levers;
using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

models::LlamaConfig tiny() {
    return tiny_llama({.vocab = kTinyTokenizerVocab, .hidden = 256, .intermediate = 256, .layers = 2, .heads = 4,
                       .kv_heads = 2, .context = 64, .tied = false});
}

}  // namespace

TEST_CASE("export writes a GGUF llama.cpp's names and types describe, and gguf-info reads it back") {
    TempDir tmp;
    const fs::path dir = save_tiny_llama(tmp.path() / "tiny", tiny(), 11);
    const fs::path out = tmp.path() / "gguf" / "tiny.gguf";
    const Ran r = run_recipe({"run", "export", "--set", "model=" + dir.string(), "--set", "to=" + out.string(), "--set",
                              "type=q4_k_m", "--out", (tmp.path() / "run").string()});
    INFO(r.output);
    REQUIRE(r.code == 0);
    const auto result = nlohmann::json::parse(r.last_line());
    CHECK(result["tensors"]["q6_K"].get<int>() == 3);  // the last layer's attn_v and ffn_down, and the output
    CHECK(result["tensors"]["f32"].get<int>() == 5);
    CHECK(result["bytes"].get<std::uint64_t>() == fs::file_size(out));
    CHECK(r.output.find("wrote " + out.string() + " (llama") != std::string::npos);
    CHECK(fs::exists(tmp.path() / "gguf" / "Modelfile"));

    const Ran info = run_recipe({"gguf-info", out.string()});
    INFO(info.output);
    REQUIRE(info.code == 0);
    CHECK(info.output.find("GGUF version 3") != std::string::npos);
    CHECK(info.output.find("general.architecture") != std::string::npos);
    CHECK(info.output.find("tokenizer.ggml.tokens") != std::string::npos);
    CHECK(info.output.find("(517 string)") != std::string::npos);
    CHECK(info.output.find("blk.1.ffn_down.weight") != std::string::npos);
    CHECK(info.output.find("    3 tensors of q6_K") != std::string::npos);
}

TEST_CASE("fine_tune --set gguf= writes the tuned model as GGUF beside model/, and export takes the run" *
          needs({Data::books})) {
    TempDir tmp;
    const fs::path dir = save_tiny_llama(tmp.path() / "tiny", tiny(), 12);
    const fs::path run = tmp.path() / "ft";
    const Ran tuned = run_recipe({"run", "fine_tune", "--threads", "1", "--set", "model=" + dir.string(), "--set",
                                  "steps=2", "--set", "batch_size=2", "--set", "context=32", "--set", "eval_every=0",
                                  "--set", "checkpoint_every=1", "--set", "lora_r=2", "--set", "gguf=q8_0", "--out",
                                  run.string()});
    INFO(tuned.output);
    REQUIRE(tuned.code == 0);
    CHECK(nlohmann::json::parse(tuned.last_line())["gguf"].get<std::string>() == (run / "model-q8_0.gguf").string());
    const auto f = data::GgufFile::open(run / "model-q8_0.gguf");
    CHECK(f.tensor("blk.0.attn_q.weight")->type == data::GgmlType::q8_0);
    std::ifstream modelfile(run / "Modelfile");
    std::string first, from;
    std::getline(modelfile, first), std::getline(modelfile, first), std::getline(modelfile, from);
    CHECK(from == "FROM ./model-q8_0.gguf");

    const Ran exported = run_recipe({"run", "export", "--set", "from=" + run.string(), "--set",
                                     "to=" + (tmp.path() / "e" / "f16.gguf").string(), "--out",
                                     (tmp.path() / "run").string()});
    INFO(exported.output);
    REQUIRE(exported.code == 0);
    const auto finished = data::GgufFile::open(tmp.path() / "e" / "f16.gguf");
    CHECK(finished.tensor("blk.0.attn_q.weight")->type == data::GgmlType::f16);

    // The last step's checkpoint, merged again from the base and the adapters' values, gives the same file's
    // tensors; the first step's differs; a run directory with no model/ exports its newest checkpoint.
    auto export_from = [&](const fs::path& from, const std::string& name) {
        const fs::path out = tmp.path() / name / (name + ".gguf");  // a folder each: each has its Modelfile
        const Ran r = run_recipe({"run", "export", "--set", "from=" + from.string(), "--set", "to=" + out.string(),
                                  "--out", (tmp.path() / ("run-" + name)).string()});
        INFO(r.output);
        REQUIRE(r.code == 0);
        CHECK(nlohmann::json::parse(r.last_line())["checkpoint"].get<std::string>().ends_with(".ckpt"));
        CHECK(!fs::exists(out.string() + ".merging"));  // the merged directory is gone
        return data::GgufFile::open(out);
    };
    auto same_tensors = [](const data::GgufFile& a, const data::GgufFile& b) {
        for (const char* name : {"blk.0.attn_q.weight", "blk.1.ffn_down.weight", "output.weight"})
            if (a.read_f32(*a.tensor(name)) != b.read_f32(*b.tensor(name))) return false;
        return true;
    };
    const auto last = export_from(run / "checkpoints" / "step-00000002.ckpt", "step2");
    CHECK(same_tensors(last, finished));
    CHECK(last.at("general.name").as_string("general.name") == "tiny-step2");
    CHECK_FALSE(same_tensors(export_from(run / "checkpoints" / "step-00000001.ckpt", "step1"), finished));
    const fs::path unfinished = tmp.path() / "unfinished";
    fs::create_directories(unfinished);
    fs::copy(run / "checkpoints", unfinished / "checkpoints", fs::copy_options::recursive);
    CHECK(same_tensors(export_from(unfinished, "newest"), finished));
}

TEST_CASE("bad export input: exit 2 and one line naming the fault, nothing written") {
    TempDir tmp;
    const fs::path dir = save_tiny_llama(tmp.path() / "tiny", tiny(), 13);
    const fs::path gemma = save_tiny_llama(tmp.path() / "gemma", tiny_of_type("gemma2", {.vocab = kTinyTokenizerVocab}), 14);
    fs::create_directories(tmp.path() / "bare");
    fs::copy(dir / "config.json", tmp.path() / "bare");
    fs::copy(dir / "model.safetensors", tmp.path() / "bare");
    const fs::path out = tmp.path() / "o" / "m.gguf";
    const fs::path taken = tmp.write("taken.gguf", "not ours");
    const fs::path pretrained = tmp.path() / "pretrain.ckpt", moved = tmp.path() / "moved.ckpt";
    write_checkpoint(pretrained, {{"recipe", "pretrain"}}, {});
    write_checkpoint(moved, {{"recipe", "fine_tune"}, {"loop", {{"step", 3}}},
                             {"config", {{"model", (tmp.path() / "gone").string()}, {"lora_r", 2}, {"lora_alpha", 4.0},
                                         {"lora_targets", "all-linear"}, {"seed", 1}}}}, {});
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::string model = "model=" + dir.string(), to = "to=" + out.string();
    const Case cases[] = {
        {{"run", "export", "--set", model, "--set", to, "--set", "type=q3_k_m"},
         "type=q3_k_m is not a GGUF file type levers writes (f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k)"},
        {{"run", "export", "--set", "model=" + gemma.string(), "--set", to},
         "query_pre_attn_scalar 16, and llama.cpp's gemma2 architecture scales queries by"},
        {{"run", "export", "--set", "model=" + (tmp.path() / "bare").string(), "--set", to}, "tokenizer.json"},
        {{"run", "export", "--set", model, "--set", "to=" + taken.string()},
         taken.string() + " exists; --set overwrite=true replaces it"},
        {{"run", "export", "--set", model}, "export needs --set to=FILE.gguf"},
        {{"run", "export", "--set", to}, "export needs one model: --set model=DIR"},
        {{"run", "export", "--set", "from=" + tmp.path().string(), "--set", to}, "no model/ there"},
        {{"run", "export", "--set", "from=" + taken.string(), "--set", to}, "not a levers checkpoint"},
        {{"run", "export", "--set", "from=" + pretrained.string(), "--set", to},
         "a checkpoint of recipe 'pretrain'; export reads fine_tune, sft, dpo and grpo checkpoints"},
        {{"run", "export", "--set", "from=" + moved.string(), "--set", to},
         "its run read the base model from " + (tmp.path() / "gone").string() + ", which is not there from here"},
        {{"run", "fine_tune", "--set", model, "--set", "gguf=q2_k"}, "type=q2_k is not a GGUF file type"},
        {{"gguf-info", taken.string()}, "is not a GGUF file"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.message);
        const Ran r = run_recipe(c.args);
        INFO(r.output);
        CHECK(r.output.find(c.message) != std::string::npos);
        CHECK(r.code == 2);
    }
    CHECK(!fs::exists(tmp.path() / "o"));
    CHECK(fs::file_size(taken) == 8);
}
