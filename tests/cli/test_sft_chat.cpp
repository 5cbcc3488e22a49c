// `recipe run sft` and `recipe run chat` through the real binary: a model
// of a few thousand weights over the tests' small tokenizer and its chat
// template (tests/fixtures/tiny_tokenizer; Qwen 3's and Llama 3's templates
// are rendered against Hugging Face's in the unit tests) trains on conversations,
// instructions and text, on 1 and 2 ranks, saves a HF directory and the PEFT
// adapter, resumes exactly, and refuses bad data with one line before
// anything starts; chat answers as the library generates, turn by turn or a
// file of questions each on its own.
#include "levers/core/checkpoint.hpp"
#include "levers/core/rng.hpp"
#include "levers/data/chat_template.hpp"
#include "levers/data/files.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"
#include "levers/nn/quantize.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"
#include "tests/cli/sft_runs.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <regex>

using namespace levers;
using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

// The tests' tiny Llama over their small tokenizer and chat template, saved as a HF directory.
fs::path tiny_sft_model(const TempDir& tmp) {
    return save_tiny_llama(tmp.path() / "model",
                           tiny_llama({.vocab = kTinyTokenizerVocab, .hidden = 16, .intermediate = 32, .layers = 1,
                                       .heads = 2, .kv_heads = 1, .context = 128}),
                           5);
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}


}  // namespace

TEST_CASE("recipe run sft trains on 1 and 2 ranks, saves a HF directory and a PEFT adapter, and resumes exactly") {
    TempDir tmp;
    const fs::path model = tiny_sft_model(tmp), data = examples(tmp);
    for (const int gpus : {1, 2}) {
        CAPTURE(gpus);
        const fs::path full = tmp.path() / ("full" + std::to_string(gpus));
        const Ran a = run_recipe(sft(model, data, full, gpus));
        INFO(a.output);
        REQUIRE(a.code == 0);
        CHECK(a.output.find("8 conversations, 8 instructions, 8 texts; 5 held out") != std::string::npos);
        const auto result = nlohmann::json::parse(a.last_line());
        CHECK(std::isfinite(result["val_loss"].get<double>()));
        CHECK(fs::exists(full / "model" / "model.safetensors"));
        CHECK(fs::exists(full / "model" / "tokenizer_config.json"));
        CHECK(fs::exists(full / "adapter" / "adapter_model.safetensors"));
        CHECK(models::load_hf_model(full / "model")->summary() == models::load_hf_model(model)->summary());
        // From step 3's checkpoint, the same end.
        const fs::path resumed = tmp.path() / ("resumed" + std::to_string(gpus));
        auto args = sft(model, data, resumed, gpus);
        args.insert(args.end(), {"--resume", (full / "checkpoints" / "step-00000003.ckpt").string()});
        const Ran b = run_recipe(args);
        INFO(b.output);
        REQUIRE(b.code == 0);
        const auto x = read_checkpoint(full / "checkpoints" / "step-00000006.ckpt");
        const auto y = read_checkpoint(resumed / "checkpoints" / "step-00000006.ckpt");
        REQUIRE(x.tensors.size() == y.tensors.size());
        for (std::size_t i = 0; i < x.tensors.size(); ++i)
            CHECK(std::memcmp(x.tensors[i].tensor.raw(), y.tensors[i].tensor.raw(), x.tensors[i].tensor.bytes()) == 0);
        CHECK(nlohmann::json::parse(b.last_line())["val_loss"] == result["val_loss"]);
    }
}

TEST_CASE("recipe run sft with quantize=nf4 (QLoRA) lowers the loss on 1 and 2 ranks (ZeRO-2, checkpointing, "
          "accumulation); its adapter loads onto the full-precision base") {
    TempDir tmp;
    const fs::path model = tiny_sft_model(tmp), data = examples(tmp);
    for (const int gpus : {1, 2}) {
        CAPTURE(gpus);
        const fs::path out = tmp.path() / ("qlora" + std::to_string(gpus));
        auto args = sft(model, data, out, gpus);
        args.insert(args.end(), {"--set", "quantize=nf4", "--set", "steps=24", "--set", "eval_every=24", "--set",
                                 "checkpoint_every=0", "--set", "lr=5e-2", "--set", "batch_size=2", "--set", "zero=2",
                                 "--set", "checkpointing=true", "--set", "grad_accum=2"});
        const Ran r = run_recipe(args);
        INFO(r.output);
        REQUIRE(r.code == 0);
        CHECK(r.output.find("base held in 4 bits: ") != std::string::npos);
        const std::string first = "eval step     0 | val_loss ";
        const auto at = r.output.find(first);
        REQUIRE(at != std::string::npos);
        const double before = std::stod(r.output.substr(at + first.size()));
        const double after = nlohmann::json::parse(r.last_line())["val_loss"].get<double>();
        CHECK(after < before - 0.08);  // 6.29 to 6.16: adapters on a frozen random model move its head little
        // The adapter onto the f32 base computes what the merged model the run saved computes, but for what
        // the 4 bits changed in the base.
        const Tensor x = Tensor::from(std::vector<std::int32_t>{1, 5, 9, 200, 3, 7}, {1, 6});
        auto logits = [&](models::Llama& m) { return m.logits(x).values(); };
        auto base = models::load_hf_model(model);
        const auto plain = logits(*base);
        CHECK(models::load_peft_adapter(out / "adapter", *base).rank == 8);
        auto quantized = models::load_hf_model(model, Device::cpu(), DType::f32,
                                               [](models::Llama& m) { nn::hold_linears_in_4bit(m, {}); });
        const double adapted = max_difference(logits(*base), plain);
        const double quantization = max_difference(logits(*quantized), plain);
        CHECK(adapted > 0);
        CHECK(max_difference(logits(*base), logits(*models::load_hf_model(out / "model"))) < 2 * quantization + 1e-6);
    }
    // The plan counts the 4-bit weights as a run holds them: one step's measured peak within 10%, on a model
    // whose projections outweigh its embeddings.
    const fs::path wide = save_tiny_llama(tmp.path() / "wide",
                                          tiny_llama({.vocab = kTinyTokenizerVocab, .hidden = 128, .intermediate = 384,
                                                      .layers = 2, .heads = 4, .kv_heads = 2, .context = 128}),
                                          5);
    for (const int gpus : {1, 2}) {
        CAPTURE(gpus);
        const std::vector<std::string> sets = {"--set", "model=" + wide.string(), "--set", "data=" + data.string(),
                                               "--set", "context=64", "--set", "batch_size=4", "--set", "steps=1",
                                               "--set", "val_fraction=0", "--set", "quantize=nf4", "--set", "zero=2"};
        const Ran planned = run_recipe(concat({"plan", "sft", "--gpus", std::to_string(gpus)}, sets));
        INFO(planned.output);
        REQUIRE(planned.code == 0);
        std::smatch m;
        REQUIRE(std::regex_search(planned.output, m, std::regex(R"(peak ([0-9.]+) MiB per rank)")));
        const fs::path out = tmp.path() / ("planned" + std::to_string(gpus));
        const Ran r = run_recipe(concat({"run", "sft", "--gpus", std::to_string(gpus), "--threads", "1", "--out",
                                         out.string()}, sets));
        INFO(r.output);
        REQUIRE(r.code == 0);
        for (const double measured : nlohmann::json::parse(r.last_line())["peak_memory_mb"].get<std::vector<double>>())
            CHECK(std::abs(std::stod(m[1]) - measured) <= 0.1 * measured);
    }
    const auto refused = [&](std::vector<std::string> extra, const std::string& line) {
        const fs::path out = tmp.path() / "refused";
        const Ran r = run_recipe(concat(sft(model, data, out, 1), extra));
        INFO(r.output);
        CHECK(r.code == 2);
        CHECK(r.output.find("error: " + line) != std::string::npos);
        CHECK_FALSE(fs::exists(out));
    };
    // A base stored in 4 bits as bitsandbytes saves one trains as it is, and the merged model goes back in 4 bits.
    const fs::path stored = tmp.path() / "stored";
    {
        auto m = models::load_hf_model(model);
        models::save_hf_model(stored, *m, {.tokenizer_from = tiny_tokenizer_dir(), .quantize = ops::Quant4Spec{}});
    }
    const fs::path requantized = tmp.path() / "requantized";
    const Ran q = run_recipe(concat(sft(stored, data, requantized, 1), {"--set", "save_quantized=true"}));
    INFO(q.output);
    REQUIRE(q.code == 0);
    CHECK(q.output.find("base held in 4 bits: ") != std::string::npos);
    CHECK(nlohmann::json::parse(std::ifstream(requantized / "model" / "config.json"))["quantization_config"]["quant_method"] ==
          "bitsandbytes");
    CHECK(nn::held_in_4bit(*models::load_hf_model(requantized / "model")).values > 0);
    // Its adapter loads onto the 4-bit base it trained on, and changes what it computes.
    auto four = models::load_hf_model(stored);
    CHECK(models::load_peft_adapter(requantized / "adapter", *four).rank == 8);
    CHECK(nn::has_4bit_weights(*four));
    const Tensor ids = Tensor::from(std::vector<std::int32_t>{1, 5, 9, 200, 3, 7}, {1, 6});
    const auto adapted = four->logits(ids).values();
    auto base4 = models::load_hf_model(stored);
    CHECK(max_difference(adapted, base4->logits(ids).values()) > 0);
    refused({"--set", "quantize=int4"}, "--set quantize: unknown 4-bit type 'int4'; valid are nf4 and fp4");
    const Ran twice = run_recipe(concat(sft(stored, data, tmp.path() / "twice", 1), {"--set", "quantize=nf4"}));
    CHECK(twice.code == 2);
    CHECK(twice.output.find("error: --set quantize=nf4: " + stored.string() + " is stored in 4 bits already") !=
          std::string::npos);
    refused({"--set", "quantize=nf4", "--set", "save_quantized=true", "--set", "gguf=q8_0"},
            "--set save_quantized=true saves the merged model in 4 bits, and --set gguf=q8_0 exports it");
    refused({"--set", "quantize=nf4", "--set", "lora_r=0"},
            "--set quantize=nf4 holds the base frozen in 4 bits, and with lora_r=0 nothing would train");
}

TEST_CASE("recipe run sft lowers the loss of each family's tiny model (SmolLM3, Gemma 2, Gemma 3, Phi-3) and saves it "
          "back") {
    TempDir tmp;
    const fs::path data = examples(tmp);
    for (const std::string type : {"smollm3", "gemma2", "gemma3_text", "phi3"}) {
        CAPTURE(type);
        const fs::path model = save_tiny_llama(
            tmp.path() / type,
            tiny_of_type(type, {.vocab = kTinyTokenizerVocab, .hidden = 32, .intermediate = 48, .layers = 2,
                                .heads = 2, .kv_heads = 1, .context = 128}),
            5);
        const fs::path out = tmp.path() / (type + "_run");
        auto args = sft(model, data, out, 1);
        args.insert(args.end(), {"--set", "steps=24", "--set", "eval_every=24", "--set", "checkpoint_every=0",
                                 "--set", "lora_r=0", "--set", "lr=3e-3", "--set", "batch_size=4"});
        const Ran r = run_recipe(args);
        INFO(r.output);
        REQUIRE(r.code == 0);
        const std::string first = "eval step     0 | val_loss ";
        const auto at = r.output.find(first);
        REQUIRE(at != std::string::npos);
        const double before = std::stod(r.output.substr(at + first.size()));
        const double after = nlohmann::json::parse(r.last_line())["val_loss"].get<double>();
        CHECK(after < 0.8 * before);
        CHECK(models::load_hf_model(out / "model")->summary() == models::load_hf_model(model)->summary());
    }
}

TEST_CASE("recipe plan sft takes a model directory of config.json alone (a model not downloaded yet): the plan its "
          "weights would give; a run refuses it") {
    TempDir tmp;
    const fs::path data = examples(tmp);
    const fs::path whole = save_tiny_llama(
        tmp.path() / "whole", tiny_of_type("gemma3_text", {.vocab = kTinyTokenizerVocab, .context = 128}), 5);
    const fs::path shape = tmp.path() / "shape";
    fs::create_directories(shape);
    for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json"}) fs::copy(whole / file, shape / file);
    auto plan = [&](const fs::path& model) {
        const Ran r = run_recipe({"plan", "sft", "--gpus", "2", "--memory", "1GB", "--set", "model=" + model.string(),
                                  "--set", "data=" + data.string(), "--set", "context=64", "--set", "zero=2"});
        INFO(r.output);
        CHECK(r.code == 0);
        return r.output;
    };
    const std::string planned = plan(whole);
    CHECK(planned.find("largest micro-batch that fits") != std::string::npos);
    CHECK(plan(shape) == planned);
    const Ran run = run_recipe(sft(shape, data, tmp.path() / "run", 1));
    CHECK(run.code == 2);
    CHECK(run.output.find("no model.safetensors and no model.safetensors.index.json") != std::string::npos);
    CHECK(!fs::exists(tmp.path() / "run"));
}

TEST_CASE("recipe run sft refuses bad data and settings with one line, exit 2, nothing written") {
    TempDir tmp;
    const fs::path model = tiny_sft_model(tmp), data = examples(tmp);
    const auto refused = [&](std::vector<std::string> args, const std::string& line) {
        const fs::path out = tmp.path() / "refused";
        args = concat({"run", "sft", "--out", out.string(), "--set", "model=" + model.string()}, args);
        const Ran r = run_recipe(args);
        INFO(r.output);
        CHECK(r.code == 2);
        CHECK(r.output.find("error: " + line) != std::string::npos);
        CHECK_FALSE(fs::exists(out));
    };
    refused({}, "sft needs --set data=FILE.jsonl");
    refused({"--set", "data=" + tmp.write("bad.jsonl", "{\"text\": \"ok\"}\n[1, 2]\n").string()},
            (tmp.path() / "bad.jsonl").string() + " line 2: an example is");
    refused({"--set", "data=" + tmp.write("empty.jsonl", "\n").string()},
            (tmp.path() / "empty.jsonl").string() + " has no examples");
    refused({"--set", "data=" + data.string(), "--set", "too_long=wrap"}, "--set too_long=wrap: examples longer");
    refused({"--set", "data=" + data.string(), "--set", "val_fraction=1.5"}, "--set val_fraction=1.5 must be in [0, 1)");
    refused({"--set", "data=" + data.string(), "--set", "context=4", "--set", "too_long=drop"},
            data.string() + ": no example fits the context of 4");
}

TEST_CASE("recipe run chat answers through the chat template as the library generates, a prompt or turns from stdin") {
    TempDir tmp;
    const fs::path model = tiny_sft_model(tmp);
    // What the library makes, greedily, for the first turn: the rendered conversation's continuation.
    auto llama = models::load_hf_model(model);
    const auto tokenizer = models::hf_tokenizer(model, llama->vocab_size());
    const auto chat = data::ChatTemplate::from_dir(model);
    const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "What is 2 plus 3?"}}};
    const auto ids = tokenizer->encode(chat.render(messages, true));
    models::SampleOptions greedy{.max_new_tokens = 6, .top_k = 1};
    greedy.stop = {*tokenizer->token_id("<|eot_id|>")};
    Rng rng(1);
    const auto out = models::generate(*llama, ids, greedy, rng);
    const std::string want = tokenizer->decode({out.begin() + static_cast<long>(ids.size()), out.end()}, true);

    const std::vector<std::string> args = {"run", "chat", "--threads", "1", "--set", "model=" + model.string(),
                                           "--set", "tokens=6", "--set", "top_k=1"};
    Ran r = run_recipe(concat(args, {"--set", "prompt=What is 2 plus 3?", "--out", (tmp.path() / "one").string()}));
    INFO(r.output);
    REQUIRE(r.code == 0);
    auto result = nlohmann::json::parse(r.last_line());
    CHECK(result["answer"] == want);
    CHECK(result["turns"] == 1);
    // Two turns from a pipe: the first answer as before, the second after it in the conversation.
    std::string line = std::string(std::getenv("LEVERS_RECIPE_BIN"));
    for (const std::string& a : concat(args, {"--out", (tmp.path() / "two").string()})) line += " '" + a + "'";
    r = run_program("/bin/sh", {"-c", "printf 'What is 2 plus 3?\\nAnd 4 plus 4?\\n' | " + line});
    INFO(r.output);
    REQUIRE(r.code == 0);
    result = nlohmann::json::parse(r.last_line());
    CHECK(result["turns"] == 2);
    CHECK(r.output.find(want + "\n") != std::string::npos);
    // A questions file: each conversation answered on its own (a reference answer left out), one JSON line each.
    const fs::path questions = tmp.write("questions.jsonl",
        R"({"messages": [{"role": "user", "content": "What is 2 plus 3?"}, {"role": "assistant", "content": "5."}]})"
        "\n\n" R"({"messages": [{"role": "user", "content": "What is 2 plus 3?"}]})" "\n");
    r = run_recipe(concat(args, {"--set", "questions=" + questions.string(), "--out", (tmp.path() / "q").string()}));
    INFO(r.output);
    REQUIRE(r.code == 0);
    const std::string answer_line = nlohmann::json{{"answer", want}}.dump() + "\n";
    const auto first = r.output.find(answer_line);
    REQUIRE(first != std::string::npos);
    CHECK(r.output.find(answer_line, first + 1) != std::string::npos);
    CHECK(nlohmann::json::parse(r.last_line())["answered"] == 2);
    for (const auto& [lines, error] : std::vector<std::pair<std::string, std::string>>{
             {"{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\nnot json\n", "bad.jsonl line 2: not JSON"},
             {R"({"messages": [{"role": "assistant", "content": "Hi"}]})", "bad.jsonl line 1: the conversation must end "
                                                                           "with a user turn"},
             {R"({"messages": [{"role": "pirate", "content": "Hi"}]})", "bad.jsonl line 1: "},
             {"\n", "no conversations in it"}}) {
        CAPTURE(lines);
        tmp.write("bad.jsonl", lines);
        r = run_recipe(concat(args, {"--set", "questions=" + (tmp.path() / "bad.jsonl").string(), "--out",
                                     (tmp.path() / "bad").string()}));
        CHECK(r.code == 2);
        CHECK(r.output.find("error: ") != std::string::npos);
        CHECK(r.output.find(error) != std::string::npos);
        CHECK_FALSE(fs::exists(tmp.path() / "bad"));
    }
    // A base model's tokenizer has no template: refused before anything starts.
    const fs::path base = tmp.path() / "base";
    fs::create_directories(base);
    for (const auto& f : fs::directory_iterator(model))
        if (f.path().filename() != "tokenizer_config.json") fs::copy(f.path(), base / f.path().filename());
    r = run_recipe({"run", "chat", "--set", "model=" + base.string(), "--set", "prompt=Hi"});
    CHECK(r.code == 2);
    CHECK(r.output.find("has no chat template") != std::string::npos);
}
