// pretrain: a byte-level GPT learns English from four Project Gutenberg books,
// then writes a sample. The framework owns the loop (checkpoints, resume,
// evaluation, the metrics files); this file says what the model, the data and
// a step are.
#include "levers/data/byte_tokenizer.hpp"
#include "levers/distributed/context.hpp"
#include "levers/data/files.hpp"
#include "levers/data/text_corpus.hpp"
#include "levers/data/token_windows.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/window_loss.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/gpt.hpp"
#include "levers/models/gpt_io.hpp"

#include <fmt/format.h>

#include <optional>


namespace {

using namespace levers;

using Gpt = models::Gpt;

// The books as one byte stream (mapped once per node), and where training is in it.
struct Books {
    data::TextCorpus corpus;
    std::optional<data::TokenWindows> windows;
    long eval_batches = 0;

    nlohmann::json save_state() const { return windows->save_state(); }
    void load_state(const nlohmann::json& j) { windows->load_state(j); }
};

std::unique_ptr<Gpt> make_gpt(const Config& cfg) {
    const models::GptConfig shape{.vocab_size = data::ByteTokenizer::kVocabSize,
                                  .block_size = cfg.get<int>("block_size"),
                                  .n_layer = cfg.get<int>("n_layer"),
                                  .n_head = cfg.get<int>("n_head"),
                                  .n_embd = cfg.get<int>("n_embd")};
    auto model = std::make_unique<Gpt>(shape, static_cast<std::uint64_t>(cfg.get<long>("seed")));
    dist::print0("GPT {} layers x {} wide, {} heads, context {}: {:.2f}M parameters\n", shape.n_layer, shape.n_embd,
                 shape.n_head, shape.block_size, shape.parameter_count() / 1e6);
    model->checkpoint_blocks(cfg.get<bool>("checkpointing"));
    return model;
}

std::unique_ptr<Books> load_books(const Config& cfg) {
    const std::string path = cfg.get<std::string>("corpus");
    auto books = std::make_unique<Books>();
    books->corpus = data::load_byte_corpus(path.empty() ? data::data_dir() / "books" : std::filesystem::path(path), 0.05);
    const std::int64_t batch = dist::per_rank_batch(cfg.get<long>("batch_size"), cfg.get<long>("global_batch"));
    const std::int64_t time = cfg.get<long>("block_size");
    books->windows.emplace(books->corpus.train, batch, time, static_cast<std::uint64_t>(cfg.get<long>("seed")) + 1,
                           dist::world_size(), dist::rank());
    books->eval_batches = cfg.get<long>("eval_batches");
    dist::print0("corpus {:.2f} MB train, {:.2f} MB validation; batch {} x {} per rank, {} per step\n",
                 books->corpus.train.size() / 1e6, books->corpus.validation.size() / 1e6, batch, time,
                 batch * time * dist::world_size() * cfg.get<long>("grad_accum"));
    return books;
}

MicroResult train_step(Gpt& model, Books& d, const StepInfo&) {
    const data::TokenBatch b = d.windows->next();
    const Tensor loss = model.loss(b.inputs, b.targets);
    loss.backward();
    return {loss.item(), static_cast<long>(b.batch * b.time)};
}

// The mean loss over validation windows as long as training's (all when max_batches <= 0).
double validation_loss(Gpt& model, const Books& d, long max_batches) {
    return train::mean_window_loss(model, d.corpus.validation, d.windows->batch(), d.windows->time(), max_batches);
}

Metrics validate(Gpt& model, Books& d) { return {{"val_loss", validation_loss(model, d, d.eval_batches)}}; }

// The whole validation split, the model saved to the run directory (fine_tune
// starts from runs/pretrain/latest/model.ckpt), and a sample.
Result finish(Gpt& model, Books& d, const LoopResult& run, const Config& cfg) {
    const double val_loss = validation_loss(model, d, 0);
    dist::print0("validation loss over the whole split: {:.4f}\n", val_loss);
    std::filesystem::path checkpoint = cfg.get<std::string>("checkpoint");
    if (checkpoint.empty() && !cfg.run().dir.empty()) checkpoint = cfg.run().dir / "model.ckpt";
    if (!checkpoint.empty() && dist::is_main()) {
        models::save_gpt(checkpoint, model, {{"recipe", "pretrain"}, {"steps", run.steps}, {"loss", run.loss}});
        dist::print0("saved {}\n", checkpoint.string());
    }
    models::SampleOptions sampling{.max_new_tokens = cfg.get<int>("sample_tokens"),
                                   .temperature = cfg.get<double>("temperature"),
                                   .top_k = cfg.get<int>("top_k")};
    std::string sample;
    if (sampling.max_new_tokens > 0 && dist::is_main()) {
        Rng sample_rng(static_cast<std::uint64_t>(cfg.get<long>("seed")) + 2);
        auto tokens = models::generate(model, data::ByteTokenizer::encode(cfg.get<std::string>("prompt")), sampling,
                                       sample_rng);
        sample = data::ByteTokenizer::decode(tokens);
        fmt::print("--- sample (temperature {}, top-k {}) ---\n{}\n---\n", sampling.temperature, sampling.top_k, sample);
    }
    return {{"val_loss", val_loss},
            {"tokens_per_second", run.items_per_second},
            {"parameters", model.config().parameter_count()},
            {"sample", sample}};
}

// AdamW's beta2 of 0.95 is GPT-2/3 practice for transformers.
void gpt_optimizer(const Config& cfg, train::LoopOptions& o) {
    o.adamw.beta2 = 0.95;
    o.unit = "tok";
    o.bucket_bytes = static_cast<std::int64_t>(cfg.get<double>("bucket_mb") * (1 << 20));
    LEVERS_CHECK(o.bucket_bytes >= 4, "bucket_mb must be positive, got {}", cfg.get<double>("bucket_mb"));
}

}  // namespace

LEVERS_RECIPE(pretrain) {
    return levers::recipe("pretrain")
        .describe("byte-level GPT on four English books; prints the loss falling and a sample")
        .training({.steps = 1000, .lr = 2e-3, .warmup = 40, .weight_decay = 0.1, .grad_clip = 1.0, .log_every = 50})
        .activation_checkpointing()
        .param("batch_size", 16, "sequences per step and rank", at_least(1))
        .param("global_batch", 0, "if > 0: sequences per micro-step over all ranks, split evenly (batch_size ignored)",
               at_least(0))
        .param("grad_accum", 1, "micro-batches per optimizer step", at_least(1))
        .param("bucket_mb", 25.0, "gradient bucket size averaged across ranks during backward (MiB)", at_least(0))
        .param("block_size", 128, "context length in bytes", at_least(1))
        .param("n_layer", 4, "transformer blocks", at_least(1))
        .param("n_head", 4, "attention heads", at_least(1))
        .param("n_embd", 128, "model width", at_least(1))
        .param("seed", 1337, "initialisation and data-order seed")
        .param("eval_every", 250, "steps between validation passes", at_least(0))
        .param("eval_batches", 16, "batches per validation pass (the final one after training uses all)", at_least(1))
        .param("corpus", "", "a .txt file or a directory of them (default: the installed books)")
        .param("checkpoint", "", "where to save the trained model (default: model.ckpt in the run directory)")
        .param("prompt", "The ", "text the sample starts from")
        .param("sample_tokens", 300, "bytes to generate after training (0: none)", at_least(0))
        .param("temperature", 0.8, "sampling temperature", at_least(0))
        .param("top_k", 40, "sample among the k likeliest bytes (0: all)", at_least(0))
        .param("checkpoint_every", 500, "steps between training checkpoints in the run directory (0: none)", at_least(0))
        .micro_batch("batch_size")
        .model(make_gpt)
        .data(load_books)
        .step(train_step)
        .adjust_loop(gpt_optimizer)
        .grad_accum("grad_accum")
        .evaluate_every("eval_every", validate)
        .checkpoint_every("checkpoint_every")
        .finish(finish);
}
