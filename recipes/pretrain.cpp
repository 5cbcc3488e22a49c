// pretrain: a byte-level GPT learns English from four Project Gutenberg books,
// then writes a sample. The framework owns the loop (checkpoints, resume,
// evaluation, the metrics files); this file says what the model, the data and
// a step are.
#include "levers/data/byte_tokenizer.hpp"
#include "levers/data/files.hpp"
#include "levers/distributed/context.hpp"
#include "levers/models/gpt.hpp"
#include "levers/models/gpt_files.hpp"
#include "levers/models/gpt_io.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/text_windows.hpp"

namespace levers_recipe_pretrain {

namespace {

using namespace levers;
using recipes::TextWindows;

const Param<double> bucket_mb{"bucket_mb", 25.0, "gradient bucket size averaged across ranks during backward (MiB)",
                              at_least(0)};
const Param<int> block_size{"block_size", 128, "context length in bytes", at_least(1)};
const Param<int> n_layer{"n_layer", 4, "transformer blocks", at_least(1)};
const Param<int> n_head{"n_head", 4, "attention heads", at_least(1)};
const Param<int> n_embd{"n_embd", 128, "model width", at_least(1)};
const Param<std::string> corpus{"corpus", "", "a .txt file or a directory of them (default: the installed books)"};
const Param<std::string> checkpoint{"checkpoint", "",
                                    "where to save the trained model (default: model.ckpt in the run directory)"};

std::unique_ptr<models::Gpt> make_gpt(const Config& cfg) {
    const models::GptConfig shape{.vocab_size = data::ByteTokenizer::kVocabSize,
                                  .block_size = cfg[block_size],
                                  .n_layer = cfg[n_layer],
                                  .n_head = cfg[n_head],
                                  .n_embd = cfg[n_embd]};
    auto model = std::make_unique<models::Gpt>(shape, cfg[settings::seed]);
    dist::print0("GPT {} layers x {} wide, {} heads, context {}: {:.2f}M parameters\n", shape.n_layer, shape.n_embd,
                 shape.n_head, shape.block_size, shape.parameter_count() / 1e6);
    model->checkpoint_blocks(cfg[settings::checkpointing]);
    return model;
}

// The books as one byte stream (mapped once per node), in windows of the context.
std::unique_ptr<TextWindows> load_books(const Config& cfg) {
    const std::string path = cfg[corpus];
    auto books = std::make_unique<TextWindows>();
    recipes::init_text_windows(
        *books, data::load_byte_corpus(path.empty() ? data::data_dir() / "books" : std::filesystem::path(path), 0.05),
        cfg, cfg[block_size]);
    return books;
}

// The whole validation split and a sample; the model saved to the run
// directory (fine_tune starts from runs/pretrain/latest/model.ckpt).
Result finish(models::Gpt& model, TextWindows& books, const LoopResult& run, const Config& cfg) {
    std::filesystem::path file = cfg[checkpoint];
    if (file.empty() && !cfg.run().dir.empty()) file = cfg.run().dir / "model.ckpt";
    if (!file.empty() && dist::is_main()) {
        models::save_gpt(file, model, {{"recipe", "pretrain"}, {"steps", run.steps}, {"loss", run.loss}});
        dist::print0("saved {}\n", file.string());
    }
    return recipes::finish_pretraining(model, books, run, cfg, models::codec_for_vocab(data::ByteTokenizer::kVocabSize, {}),
                                       model.config().parameter_count());
}

// AdamW's beta2 of 0.95 is GPT-2/3 practice for transformers.
void gpt_optimizer(const Config& cfg, train::LoopOptions& o) {
    o.adamw.beta2 = 0.95;
    o.unit = "tok";
    o.bucket_bytes = static_cast<std::int64_t>(cfg[bucket_mb] * (1 << 20));
    LEVERS_CHECK(o.bucket_bytes >= 4, "bucket_mb must be positive, got {}", cfg[bucket_mb]);
}

}  // namespace

LEVERS_RECIPE(pretrain) {
    return levers::recipe("pretrain")
        .describe("byte-level GPT on four English books; prints the loss falling and a sample")
        .training({.steps = 1000, .lr = 2e-3, .warmup = 40, .weight_decay = 0.1, .grad_clip = 1.0, .log_every = 50,
                   .checkpoint_every = 500, .batch_size = 16, .seed = 1337, .eval_every = 250})
        .activation_checkpointing()
        .params(bucket_mb, block_size, n_layer, n_head, n_embd, recipes::eval_batches, corpus, checkpoint,
                recipes::prompt.with_default("The "), recipes::sample_tokens.with_default(300), recipes::temperature,
                recipes::top_k)
        .model(make_gpt)
        .data(load_books)
        .step(recipes::window_step)
        .adjust_loop(gpt_optimizer)
        .evaluate(recipes::window_validation)
        .finish(finish);
}

}  // namespace levers_recipe_pretrain
