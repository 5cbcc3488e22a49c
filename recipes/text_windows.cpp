#include "recipes/text_windows.hpp"

#include "recipes/moe_tuning.hpp"

#include "levers/core/rng.hpp"
#include "levers/distributed/context.hpp"
#include "levers/models/generate.hpp"
#include "levers/train/window_loss.hpp"

#include <fmt/format.h>

namespace levers::recipes {

data::TokenWindows& TextWindows::windows(const models::LanguageModel& model) {
    if (context == 0) context = model.context_length();
    return position.get([&] { return data::TokenWindows(corpus.train, batch, context, seed, dist::world_size(), dist::rank()); });
}

void init_text_windows(TextWindows& text, data::TextCorpus corpus, const Config& cfg, std::int64_t context) {
    text.corpus = std::move(corpus);
    text.batch = rank_batch(cfg);
    text.context = context;
    text.seed = cfg[settings::seed] + 1;
    text.eval_batches = cfg[eval_batches];
    const std::int64_t windows = text.batch * dist::world_size() * cfg[settings::grad_accum];
    dist::print0("corpus {} tokens train, {} validation; batch {}{} per rank, {} per step\n",
                 text.corpus.train.size(), text.corpus.validation.size(), text.batch,
                 context > 0 ? fmt::format(" x {}", context) : std::string(),
                 context > 0 ? fmt::format("{} tokens", windows * context) : fmt::format("{} windows", windows));
}

MicroResult window_step(models::LanguageModel& model, TextWindows& text, const StepInfo&) {
    const data::TokenBatch b = text.windows(model).next();
    const Tensor loss = model.loss(b.inputs, b.targets);
    loss.backward();
    return {loss.item(), static_cast<long>(b.batch * b.time), recipes::router_metrics(model)};
}

double validation_loss(models::LanguageModel& model, TextWindows& text, long max_batches) {
    if (text.context == 0) text.context = model.context_length();
    return train::mean_window_loss(model, text.corpus.validation, text.batch, text.context, max_batches);
}

Metrics window_validation(models::LanguageModel& model, TextWindows& text) {
    return {{"val_loss", validation_loss(model, text, text.eval_batches)}};
}

Result finish_pretraining(models::LanguageModel& model, TextWindows& text, const LoopResult& run, const Config& cfg,
                          const models::TextCodec& codec, std::int64_t parameters) {
    const double val_loss = validation_loss(model, text, 0);
    dist::print0("validation loss over the whole split: {:.4f}\n", val_loss);
    Result out = {{"val_loss", val_loss}, {"tokens_per_second", run.items_per_second}, {"parameters", parameters},
                  {"sample", ""}};
    const int tokens = cfg[sample_tokens];
    if (tokens > 0 && dist::is_main()) {
        const models::SampleOptions sampling{.max_new_tokens = tokens, .temperature = cfg[temperature],
                                             .top_k = cfg[top_k]};
        Rng rng(cfg[settings::seed] + 2);
        const std::string sample = codec.decode(models::generate(model, codec.encode(cfg[prompt]), sampling, rng));
        fmt::print("--- sample (temperature {}, top-k {}) ---\n{}\n---\n", sampling.temperature, sampling.top_k, sample);
        out["sample"] = sample;
    }
    return out;
}

}  // namespace levers::recipes
