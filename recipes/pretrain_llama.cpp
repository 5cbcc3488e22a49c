// pretrain_llama: a small Llama-shaped model learns English from the four
// books, read with a Hugging Face tokenizer (Llama 3's by default), and is
// saved as a Hugging Face directory with that tokenizer and its chat
// template beside it: what `sft`, `chat` and transformers read. The model is
// Llama 3's architecture (grouped-query attention, SwiGLU, RMSNorm, rotary
// positions) at a size two cores train in minutes; the vocabulary is the
// tokenizer's, so the output projection (tied to the embeddings) is most of
// a step's work.
#include "levers/data/files.hpp"
#include "levers/data/text_corpus.hpp"
#include "levers/data/token_windows.hpp"
#include "levers/distributed/context.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/window_loss.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/hf_dir.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <mutex>
#include <optional>

namespace {

using namespace levers;
namespace fs = std::filesystem;

fs::path tokenizer_dir(const Config& cfg) {
    const std::string dir = cfg.get<std::string>("tokenizer");
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
models::LlamaConfig shape(const Config& cfg, const data::BpeTokenizer& tokenizer) {
    models::LlamaConfig c;
    c.vocab_size = tokenizer.vocab_size();
    c.hidden_size = cfg.get<long>("hidden");
    c.intermediate_size = cfg.get<long>("intermediate");
    c.num_hidden_layers = cfg.get<long>("layers");
    c.num_attention_heads = cfg.get<long>("heads");
    c.num_key_value_heads = cfg.get<long>("kv_heads");
    c.max_position_embeddings = cfg.get<long>("context");
    c.rope_theta = 500000;
    c.tie_word_embeddings = true;
    for (const char* bos : {"<|begin_of_text|>", "<s>", "<|endoftext|>"})
        if (const auto id = tokenizer.token_id(bos)) { c.bos_token_id = *id; break; }
    for (const char* eos : {"<|end_of_text|>", "<|eot_id|>", "</s>", "<|endoftext|>", "<|im_end|>"})
        if (const auto id = tokenizer.token_id(eos)) c.eos_token_ids.push_back(*id);
    c.validate();
    return c;
}

void check(const Config& cfg) {
    shape(cfg, *read_tokenizer(tokenizer_dir(cfg)));
    const std::string corpus = cfg.get<std::string>("corpus");
    const fs::path text = corpus.empty() ? data::data_dir() / "books" : fs::path(corpus);
    LEVERS_CHECK(fs::exists(text), "--set corpus={}: not found (a .txt file or a directory of them; the set-up "
                 "fetches the books into {})", text.string(), (data::data_dir() / "books").string());
}

std::unique_ptr<models::Llama> make_model(const Config& cfg) {
    const models::LlamaConfig c = shape(cfg, *read_tokenizer(tokenizer_dir(cfg)));
    auto model = std::make_unique<models::Llama>(c, static_cast<std::uint64_t>(cfg.get<long>("seed")));
    dist::print0("Llama {} layers x {} wide, {} heads over {} key-value heads, vocabulary {}, context {}: {:.2f}M "
                 "parameters ({:.2f}M in the tied embeddings)\n",
                 c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.vocab_size,
                 c.max_position_embeddings, c.parameter_count() / 1e6, c.vocab_size * c.hidden_size / 1e6);
    model->checkpoint_blocks(cfg.get<bool>("checkpointing"));
    return model;
}

// The books as tokens, and where training is in them.
struct Books {
    data::TextCorpus corpus;
    std::optional<data::TokenWindows> windows;
    long eval_batches = 0;
    fs::path tokenizer_dir;                          // copied beside the saved model
    std::shared_ptr<data::BpeTokenizer> tokenizer;  // read once: the corpus's and the sample's

    nlohmann::json save_state() const { return windows->save_state(); }
    void load_state(const nlohmann::json& j) { windows->load_state(j); }
};

std::unique_ptr<Books> load_books(const Config& cfg) {
    auto books = std::make_unique<Books>();
    books->tokenizer_dir = tokenizer_dir(cfg);
    books->tokenizer = read_tokenizer(books->tokenizer_dir);
    const auto tokenizer = books->tokenizer;
    const std::string corpus = cfg.get<std::string>("corpus");
    books->corpus = data::load_text_corpus(
        corpus.empty() ? data::data_dir() / "books" : fs::path(corpus), 0.05,
        [tokenizer](const std::string& t) { return tokenizer->encode(t, true); }, tokenizer->name());
    const std::int64_t batch = dist::per_rank_batch(cfg.get<long>("batch_size"), 0);
    const std::int64_t context = cfg.get<long>("context");
    books->windows.emplace(books->corpus.train, batch, context, static_cast<std::uint64_t>(cfg.get<long>("seed")) + 1,
                           dist::world_size(), dist::rank());
    books->eval_batches = cfg.get<long>("eval_batches");
    dist::print0("corpus {} tokens train, {} validation; batch {} x {} per rank\n", books->corpus.train.size(),
                 books->corpus.validation.size(), batch, context);
    return books;
}

MicroResult train_step(models::Llama& model, Books& d, const StepInfo&) {
    const data::TokenBatch b = d.windows->next();
    const Tensor loss = model.loss(b.inputs, b.targets);
    loss.backward();
    return {loss.item(), static_cast<long>(b.batch * b.time)};
}

Metrics validate(models::Llama& model, Books& d) {
    return {{"val_loss", train::mean_window_loss(model, d.corpus.validation, d.windows->batch(), d.windows->time(),
                                                 d.eval_batches)}};
}

// The whole validation split, the model saved as a HF directory (run directory's model/), and a sample.
Result finish(models::Llama& model, Books& d, const LoopResult& run, const Config& cfg) {
    const double val_loss =
        train::mean_window_loss(model, d.corpus.validation, d.windows->batch(), d.windows->time(), 0);
    dist::print0("validation loss over the whole split: {:.4f}\n", val_loss);
    Result out = {{"val_loss", val_loss},
                  {"tokens_per_second", run.items_per_second},
                  {"parameters", model.config().parameter_count()}};
    if (!dist::is_main()) return out;
    if (!cfg.run().dir.empty()) {
        const fs::path dir = cfg.run().dir / "model";
        models::save_hf_model(dir, model, {.dtype = "float32", .tokenizer_from = d.tokenizer_dir});
        fmt::print("saved {} (a Hugging Face directory with the tokenizer and its chat template)\n", dir.string());
        out["model"] = dir.string();
    }
    const int tokens = cfg.get<int>("sample_tokens");
    if (tokens > 0) {
        const auto& tokenizer = d.tokenizer;
        Rng rng(static_cast<std::uint64_t>(cfg.get<long>("seed")) + 2);
        const auto ids = models::generate(model, tokenizer->encode(cfg.get<std::string>("prompt"), true),
                                          {.max_new_tokens = tokens, .temperature = 0.8, .top_k = 40}, rng);
        const std::string sample = tokenizer->decode(ids);
        fmt::print("--- sample (temperature 0.8, top-k 40) ---\n{}\n---\n", sample);
        out["sample"] = sample;
    }
    return out;
}

}  // namespace

LEVERS_RECIPE(pretrain_llama) {
    return levers::recipe("pretrain_llama")
        .describe("a small Llama (GQA, SwiGLU, RoPE) on the four books with Llama 3's tokenizer; saves a HF "
                  "directory that sft and chat read")
        .training({.steps = 200, .lr = 3e-3, .warmup = 20, .weight_decay = 0.1, .grad_clip = 1.0, .log_every = 25})
        .activation_checkpointing()
        .param("tokenizer", "", "a directory with tokenizer.json (default: the installed Llama 3 tokenizer)")
        .param("corpus", "", "a .txt file or a directory of them (default: the installed books)")
        .param("hidden", 128, "model width", at_least(1))
        .param("intermediate", 384, "SwiGLU width", at_least(1))
        .param("layers", 4, "decoder layers", at_least(1))
        .param("heads", 4, "query heads", at_least(1))
        .param("kv_heads", 2, "key-value heads (grouped-query attention)", at_least(1))
        .param("context", 256, "window length in tokens", at_least(2))
        .param("batch_size", 4, "windows per step and rank", at_least(1))
        .param("seed", 1337, "initialisation and data-order seed")
        .param("eval_every", 100, "steps between validation passes", at_least(0))
        .param("eval_batches", 8, "batches per validation pass (the final one after training uses all)", at_least(1))
        .param("checkpoint_every", 100, "steps between training checkpoints in the run directory (0: none)", at_least(0))
        .param("prompt", "The", "text the sample starts from")
        .param("sample_tokens", 40, "tokens to generate after training (0: none)", at_least(0))
        .check(check)
        .micro_batch("batch_size")
        .model(make_model)
        .data(load_books)
        .step(train_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) {
            o.adamw.beta2 = 0.95;
            o.unit = "tok";
        })
        .evaluate_every("eval_every", validate)
        .checkpoint_every("checkpoint_every")
        .finish(finish);
}
