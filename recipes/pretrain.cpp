// pretrain: a byte-level GPT learns English from four Project Gutenberg books,
// then writes a sample. The framework owns nothing model-specific; this file
// wires the corpus, the model and the loop together.
#include "framework/data/byte_tokenizer.hpp"
#include "framework/dist/context.hpp"
#include "framework/data/files.hpp"
#include "framework/data/text_corpus.hpp"
#include "framework/recipe/loop_params.hpp"
#include "framework/recipe/recipe.hpp"
#include "framework/recipe/run_dir.hpp"
#include "framework/train/loop.hpp"
#include "models/generate.hpp"
#include "models/gpt.hpp"
#include "models/gpt_io.hpp"
#include "models/gpt_train.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace {

using namespace levers;

Result pretrain(const Config& cfg) {
    const models::GptConfig shape{.vocab_size = data::ByteTokenizer::kVocabSize,
                                  .block_size = cfg.get<int>("block_size"),
                                  .n_layer = cfg.get<int>("n_layer"),
                                  .n_head = cfg.get<int>("n_head"),
                                  .n_embd = cfg.get<int>("n_embd")};
    const std::int64_t batch = dist::per_rank_batch(cfg.get<long>("batch_size"), cfg.get<long>("global_batch"));
    const std::int64_t time = shape.block_size;
    const std::string corpus_path = cfg.get<std::string>("corpus");
    const auto corpus =
        data::load_byte_corpus(corpus_path.empty() ? data::data_dir() / "books" : std::filesystem::path(corpus_path), 0.05);
    models::Gpt<float> model(shape, static_cast<std::uint64_t>(cfg.get<long>("seed")));
    dist::print0("GPT {} layers x {} wide, {} heads, context {}: {:.2f}M parameters; corpus {:.2f} MB train, {:.2f} MB "
                 "validation; batch {} x {} per rank, {} per step\n",
                 shape.n_layer, shape.n_embd, shape.n_head, shape.block_size, shape.parameter_count() / 1e6,
                 corpus.train.size() / 1e6, corpus.validation.size() / 1e6, batch, time,
                 batch * time * dist::world_size() * cfg.get<long>("grad_accum"));

    train::LoopOptions options = loop_options(cfg);
    options.adamw.beta2 = 0.95;  // GPT-2/3 practice for transformers
    options.grad_accum = cfg.get<long>("grad_accum");
    options.bucket_bytes = static_cast<std::int64_t>(cfg.get<double>("bucket_mb") * (1 << 20));
    LEVERS_CHECK(options.bucket_bytes >= 4, "bucket_mb must be positive, got {}", cfg.get<double>("bucket_mb"));

    Rng data_rng(static_cast<std::uint64_t>(cfg.get<long>("seed")) + 1);
    auto micro_step = [&](long, long) {
        auto b = models::rank_batch(corpus.train, batch, time, data_rng);
        float loss = model.forward(b.inputs.data(), b.targets.data(), batch, time);
        model.backward();
        return train::MicroResult{loss, static_cast<long>(batch * time)};
    };
    auto evaluate = [&](long step) {
        long batches = step == options.steps ? 0 : cfg.get<long>("eval_batches");  // the last one uses all
        train::Metrics m;
        m["val_loss"] = models::mean_loss(model, corpus.validation, batch, time, batches);
        return m;
    };
    auto run = train::train_loop(model.params(), options, micro_step, evaluate);

    // The model goes to the run directory (fine_tune starts from runs/pretrain/latest/model.ckpt).
    std::filesystem::path checkpoint = cfg.get<std::string>("checkpoint");
    if (checkpoint.empty() && !run_dir().empty()) checkpoint = run_dir() / "model.ckpt";
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
    return Result{{"loss", run.loss},
                  {"steps", run.steps},
                  {"val_loss", run.last_eval.at("val_loss")},
                  {"tokens_per_second", run.items_per_second},
                  {"seconds", run.seconds},
                  {"time_split", {{"compute_s", run.compute_seconds},
                                  {"communication_s", run.communication_seconds},
                                  {"waiting_s", run.waiting_seconds},
                                  {"hidden_communication_s", run.hidden_communication_seconds}}},
                  {"ranks", dist::world_size()},
                  {"parameters", shape.parameter_count()},
                  {"sample", sample}};
}

}  // namespace

LEVERS_RECIPE(pretrain) {
    return levers::recipe("pretrain")
        .describe("byte-level GPT on four English books; prints the loss falling and a sample")
        .param("steps", 1000, "optimizer steps")
        .param("batch_size", 16, "sequences per step and rank")
        .param("global_batch", 0, "if > 0: sequences per micro-step over all ranks, split evenly (batch_size ignored)")
        .param("grad_accum", 1, "micro-batches per optimizer step")
        .param("bucket_mb", 25.0, "gradient bucket size averaged across ranks during backward (MiB)")
        .param("block_size", 128, "context length in bytes")
        .param("n_layer", 4, "transformer blocks")
        .param("n_head", 4, "attention heads")
        .param("n_embd", 128, "model width")
        .param("lr", 2e-3, "peak learning rate (warmup, then cosine to a tenth)")
        .param("warmup", 40, "warmup steps")
        .param("weight_decay", 0.1, "AdamW decoupled weight decay on matrices and embeddings")
        .param("grad_clip", 1.0, "global gradient-norm limit (0: off)")
        .param("seed", 1337, "initialisation and data-order seed")
        .param("log_every", 50, "steps per progress line")
        .param("eval_every", 250, "steps between validation passes")
        .param("eval_batches", 16, "batches per intermediate validation pass (the final pass uses all)")
        .param("corpus", "", "a .txt file or a directory of them (default: the installed books)")
        .param("checkpoint", "", "where to save the trained model (default: model.ckpt in the run directory)")
        .param("prompt", "The ", "text the sample starts from")
        .param("sample_tokens", 300, "bytes to generate after training (0: none)")
        .param("temperature", 0.8, "sampling temperature")
        .param("top_k", 40, "sample among the k likeliest bytes (0: all)")
        .run(pretrain);
}
