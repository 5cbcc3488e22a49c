// The chat demonstration (`bash scripts/setup.sh chat`) at a size a test
// affords: the books' conversations made by scripts/books_chat.py, a Llama
// pretrained on the books with Llama 3's tokenizer (pretrain_llama) and saved
// as a HF directory with the template, sft on the conversations from it, dpo
// on the preference pairs and grpo on the prompts from sft's model, chat
// answering the held-out questions, and the answers scored.
#include "levers/data/files.hpp"
#include "levers/models/hf_dir.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"
#include "tests/source_tree.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace levers;
using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

long lines_in(const fs::path& path) {
    std::ifstream in(path);
    long n = 0;
    for (std::string line; std::getline(in, line);) n += !line.empty();
    return n;
}

}  // namespace

TEST_CASE("the chat demonstration runs end to end: books' questions, pretrain_llama, sft, chat, the score" *
          needs({Data::books, Data::hf_tokenizers})) {
    TempDir tmp;
    const fs::path script = source_path("scripts/books_chat.py");
    Ran r = run_program("/usr/bin/python3", {script.string(), "make", (data::data_dir() / "books").string(),
                                             (tmp.path() / "chat").string()});
    INFO(r.output);
    REQUIRE(r.code == 0);
    const fs::path train = tmp.path() / "chat" / "books_chat.jsonl", test = tmp.path() / "chat" / "books_chat_test.jsonl";
    CHECK(lines_in(train) == 1440);
    CHECK(lines_in(test) == 160);
    const fs::path pairs = tmp.path() / "chat" / "books_pairs.jsonl";
    CHECK(lines_in(pairs) == 1440);
    const fs::path prompts = tmp.path() / "chat" / "books_prompts.jsonl";
    CHECK(lines_in(prompts) == 1440);

    const fs::path pretrained = tmp.path() / "pretrain";
    r = run_recipe({"run", "pretrain_llama", "--threads", "2", "--out", pretrained.string(), "--set", "hidden=16",
                    "--set", "intermediate=32", "--set", "layers=1", "--set", "heads=2", "--set", "kv_heads=1",
                    "--set", "context=256", "--set", "batch_size=1", "--set", "steps=2", "--set", "eval_batches=1",
                    "--set", "sample_tokens=4"});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("vocabulary 128256") != std::string::npos);
    const fs::path model = pretrained / "model";
    const models::LlamaConfig config = models::read_llama_config(model / "config.json");
    CHECK(config.vocab_size == 128256);
    CHECK(config.tie_word_embeddings);
    CHECK(config.bos_token_id == 128000);
    CHECK(fs::exists(model / "tokenizer_config.json"));  // the chat template goes with the model

    const fs::path tuned = tmp.path() / "sft";
    r = run_recipe({"run", "sft", "--threads", "2", "--out", tuned.string(), "--set", "model=" + model.string(), "--set",
                    "data=" + train.string(), "--set", "lora_r=0", "--set", "context=256", "--set", "batch_size=2",
                    "--set", "steps=2", "--set", "eval_every=0", "--set", "eval_batches=1"});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("1440 conversations, 0 instructions, 0 texts; 72 held out") != std::string::npos);

    const fs::path preferred = tmp.path() / "dpo";
    r = run_recipe({"run", "dpo", "--threads", "2", "--out", preferred.string(), "--set",
                    "model=" + (tuned / "model").string(), "--set", "data=" + pairs.string(), "--set", "context=256",
                    "--set", "batch_size=2", "--set", "steps=2", "--set", "eval_every=0", "--set", "eval_batches=1"});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("1440 conversation pairs, 0 text pairs; 72 held out") != std::string::npos);
    CHECK(fs::exists(preferred / "model" / "model.safetensors"));

    // grpo from sft's model, rewarded for naming the passage's book and author.
    const fs::path rewarded = tmp.path() / "grpo";
    r = run_recipe({"run", "grpo", "--threads", "2", "--out", rewarded.string(), "--set",
                    "model=" + (tuned / "model").string(), "--set", "prompts=" + prompts.string(), "--set",
                    "rewards=contains", "--set", "answer_field=book,author", "--set", "num_generations=2", "--set",
                    "batch_size=1", "--set", "max_completion_length=4", "--set", "steps=2", "--set",
                    "checkpoint_every=0"});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("1440 conversations, 0 texts") != std::string::npos);
    CHECK(fs::exists(rewarded / "model" / "model.safetensors"));

    // The first questions of the held-out file, answered greedily, then scored.
    const fs::path few = tmp.path() / "few.jsonl";
    {
        std::ifstream in(test);
        std::ofstream out(few);
        std::string line;
        for (int i = 0; i < 6 && std::getline(in, line); ++i) out << line << "\n";
    }
    r = run_recipe({"run", "chat", "--threads", "2", "--out", (tmp.path() / "chat_run").string(), "--set",
                    "model=" + (tuned / "model").string(), "--set", "questions=" + few.string(), "--set", "top_k=1",
                    "--set", "tokens=4"});
    INFO(r.output);
    REQUIRE(r.code == 0);
    const fs::path answers = tmp.write("answers.jsonl", r.output);
    r = run_program("/usr/bin/python3", {script.string(), "score", few.string(), answers.string()});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("book: ") != std::string::npos);
    CHECK(r.output.find("/2 right") != std::string::npos);  // the held-out questions alternate: 2 of the 6 ask the book
    CHECK(r.output.find("author: ") != std::string::npos);
    CHECK(r.output.find("/4 right") != std::string::npos);
}
