// pretrain_llama: a small Llama-shaped model learns English from the four
// books, read with a Hugging Face tokenizer (Llama 3's by default), and is
// saved as a Hugging Face directory with that tokenizer and its chat
// template beside it: what `sft`, `chat` and transformers read. The model is
// Llama 3's architecture (grouped-query attention, SwiGLU, RMSNorm, rotary
// positions) at a size two cores train in minutes; the vocabulary is the
// tokenizer's, so the output projection (tied to the embeddings) is most of
// a step's work.
#include "levers/data/files.hpp"
#include "levers/distributed/context.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/text_windows.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <mutex>

namespace levers_recipe_pretrain_llama {

namespace {

using namespace levers;
namespace fs = std::filesystem;

const Param<std::string> tokenizer{"tokenizer", "",
                                   "a directory with tokenizer.json (default: the installed Llama 3 tokenizer)"};
const Param<std::string> corpus{"corpus", "", "a .txt file or a directory of them (default: the installed books)"};
const Param<long> hidden{"hidden", 128, "model width", at_least(1)};
const Param<long> intermediate{"intermediate", 384, "SwiGLU width", at_least(1)};
const Param<long> layers{"layers", 4, "decoder layers", at_least(1)};
const Param<long> heads{"heads", 4, "query heads", at_least(1)};
const Param<long> kv_heads{"kv_heads", 2, "key-value heads (grouped-query attention)", at_least(1)};
const Param<long> context{"context", 256, "window length in tokens", at_least(2)};

fs::path tokenizer_dir(const Config& cfg) {
    const std::string dir = cfg[tokenizer];
    return dir.empty() ? data::data_dir() / "tokenizers" / "llama3" : fs::path(dir);
}

// The last directory's tokenizer is kept: the check, the model and the data
// each need it, and `recipe plan` builds them many times.
std::shared_ptr<data::BpeTokenizer> read_tokenizer(const fs::path& dir) {
    LEVERS_CHECK(fs::is_regular_file(dir / "tokenizer.json"), "--set tokenizer={}: no tokenizer.json there (the "
                 "set-up installs Llama 3's, Qwen 3's and Llama 2's under {})", dir.string(),
                 (data::data_dir() / "tokenizers").string());
    static std::mutex mutex;
    static std::pair<fs::path, std::shared_ptr<data::BpeTokenizer>> last;
    std::lock_guard lock(mutex);
    if (last.first != dir || !last.second) last = {dir, models::hf_tokenizer(dir, std::numeric_limits<std::int32_t>::max())};
    return last.second;
}

// The architecture of Llama 3 at the chosen size, with the tokenizer's vocabulary and special tokens.
models::LlamaConfig shape(const Config& cfg, const data::BpeTokenizer& words) {
    models::LlamaConfig c;
    c.vocab_size = words.vocab_size();
    c.hidden_size = cfg[hidden];
    c.intermediate_size = cfg[intermediate];
    c.num_hidden_layers = cfg[layers];
    c.num_attention_heads = cfg[heads];
    c.num_key_value_heads = cfg[kv_heads];
    c.max_position_embeddings = cfg[context];
    c.rope_theta = 500000;
    c.tie_word_embeddings = true;
    for (const char* bos : {"<|begin_of_text|>", "<s>", "<|endoftext|>"})
        if (const auto id = words.token_id(bos)) { c.bos_token_id = *id; break; }
    for (const char* eos : {"<|end_of_text|>", "<|eot_id|>", "</s>", "<|endoftext|>", "<|im_end|>"})
        if (const auto id = words.token_id(eos)) c.eos_token_ids.push_back(*id);
    c.validate();
    return c;
}

void check(const Config& cfg) {
    shape(cfg, *read_tokenizer(tokenizer_dir(cfg)));
    const std::string text = cfg[corpus];
    const fs::path path = text.empty() ? data::data_dir() / "books" : fs::path(text);
    LEVERS_CHECK(fs::exists(path), "--set corpus={}: not found (a .txt file or a directory of them; the set-up "
                 "fetches the books into {})", path.string(), (data::data_dir() / "books").string());
}

std::unique_ptr<models::Llama> make_model(const Config& cfg) {
    const models::LlamaConfig c = shape(cfg, *read_tokenizer(tokenizer_dir(cfg)));
    auto model = std::make_unique<models::Llama>(c, cfg[settings::seed]);
    dist::print0("Llama {} layers x {} wide, {} heads over {} key-value heads, vocabulary {}, context {}: {:.2f}M "
                 "parameters ({:.2f}M in the tied embeddings)\n",
                 c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.vocab_size,
                 c.max_position_embeddings, c.parameter_count() / 1e6, c.vocab_size * c.hidden_size / 1e6);
    model->checkpoint_blocks(cfg[settings::checkpointing]);
    return model;
}

// The books as tokens in windows, and the tokenizer (read once: the corpus's
// and the sample's; copied beside the saved model).
struct Books : recipes::TextWindows {
    fs::path tokenizer_dir;
    std::shared_ptr<data::BpeTokenizer> tokenizer;
};

std::unique_ptr<Books> load_books(const Config& cfg) {
    auto books = std::make_unique<Books>();
    books->tokenizer_dir = tokenizer_dir(cfg);
    books->tokenizer = read_tokenizer(books->tokenizer_dir);
    const auto words = books->tokenizer;
    const std::string text = cfg[corpus];
    recipes::init_text_windows(
        *books,
        data::load_text_corpus(text.empty() ? data::data_dir() / "books" : fs::path(text), 0.05,
                               [words](const std::string& t) { return words->encode(t, true); }, words->name()),
        cfg, cfg[context]);
    return books;
}

// The model saved as a HF directory (the run directory's model/), then the
// whole validation split and a sample.
Result finish(models::Llama& model, Books& books, const LoopResult& run, const Config& cfg) {
    std::string saved;
    if (dist::is_main() && !cfg.run().dir.empty()) {
        const fs::path dir = cfg.run().dir / "model";
        models::save_hf_model(dir, model, {.dtype = "float32", .tokenizer_from = books.tokenizer_dir});
        fmt::print("saved {} (a Hugging Face directory with the tokenizer and its chat template)\n", dir.string());
        saved = dir.string();
    }
    const auto words = books.tokenizer;
    const models::TextCodec codec{[words](const std::string& t) { return words->encode(t, true); },
                                  [words](const std::vector<std::int32_t>& ids) { return words->decode(ids); },
                                  words->name()};
    Result out = recipes::finish_pretraining(model, books, run, cfg, codec, model.config().parameter_count());
    if (!saved.empty()) out["model"] = saved;
    return out;
}

}  // namespace

LEVERS_RECIPE(pretrain_llama) {
    return levers::recipe("pretrain_llama")
        .describe("a small Llama (GQA, SwiGLU, RoPE) on the four books with Llama 3's tokenizer; saves a HF "
                  "directory that sft and chat read")
        .training({.steps = 200, .lr = 3e-3, .warmup = 20, .weight_decay = 0.1, .grad_clip = 1.0, .log_every = 25,
                   .checkpoint_every = 100, .batch_size = 4, .seed = 1337, .eval_every = 100})
        .activation_checkpointing()
        .params(tokenizer, corpus, hidden, intermediate, layers, heads, kv_heads, context,
                recipes::eval_batches.with_default(8), recipes::prompt, recipes::sample_tokens, recipes::temperature,
                recipes::top_k)
        .check(check)
        .model(make_model)
        .data(load_books)
        .step(recipes::window_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) {
            o.adamw.beta2 = 0.95;
            o.unit = "tok";
        })
        .evaluate(recipes::window_validation)
        .finish(finish);
}

}  // namespace levers_recipe_pretrain_llama
