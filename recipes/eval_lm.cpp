// eval_lm: the mean loss of a GPT on a text, in nats per token over
// non-overlapping windows of its context, so the number compares with other
// implementations' (Hugging Face's perplexity with stride = context). Works
// on any card count: each rank scores its share of the windows.
#include "framework/core/read_file.hpp"
#include "framework/dist/context.hpp"
#include "framework/recipe/device_choice.hpp"
#include "framework/recipe/recipe.hpp"
#include "models/gpt_files.hpp"
#include "framework/train/window_loss.hpp"

#include <cmath>
#include <filesystem>

namespace {

using namespace levers;

void check(const Config& cfg) {
    const std::string weights = cfg.get<std::string>("weights"), text_path = cfg.get<std::string>("text");
    LEVERS_CHECK(!weights.empty() && !text_path.empty(), "eval_lm needs --set weights=PATH (GPT-2 weights in "
                 "safetensors, or a model.ckpt from pretrain or fine_tune) and --set text=PATH (a text file)");
    models::weights_format(weights, "--set weights=");
    LEVERS_CHECK(std::filesystem::is_regular_file(text_path), "--set text={}: no such file; give a text file to score",
                 text_path);
}

Result eval_lm(const Config& cfg) {
    const std::string weights = cfg.get<std::string>("weights"), text_path = cfg.get<std::string>("text");
    auto model = models::load_any_gpt(weights, cfg.get<int>("n_head"));
    model->to(dist::device(), compute_dtype());  // the card this rank computes on, if any
    const auto codec = models::codec_for(*model, weights);
    auto tokens = codec.encode(read_file(text_path, "a text file to score"));
    const long limit = cfg.get<long>("max_tokens");
    if (limit > 0 && static_cast<long>(tokens.size()) > limit) tokens.resize(static_cast<std::size_t>(limit));
    const std::int64_t context = cfg.get<long>("context") > 0 ? cfg.get<long>("context") : model->config().block_size;
    LEVERS_CHECK(context <= model->config().block_size, "context {} is longer than the model's {}", context,
                 model->config().block_size);
    const std::int64_t windows = (static_cast<std::int64_t>(tokens.size()) - 1) / context;
    dist::print0("{}: {} layers x {}, vocabulary {}; {}: {} tokens with {}, {} windows of {}\n", weights,
                 model->config().n_layer, model->config().n_embd, model->config().vocab_size, text_path, tokens.size(),
                 codec.name, windows, context);
    const double loss =
        train::mean_window_loss(*model, data::TokenFile::from(tokens), cfg.get<long>("batch_size"), context, 0);
    dist::print0("mean loss {:.4f} nats/token, perplexity {:.2f}\n", loss, std::exp(loss));
    return {{"loss", loss},
            {"perplexity", std::exp(loss)},
            {"tokens_scored", windows * context},
            {"windows", windows},
            {"context", context}};
}

}  // namespace

LEVERS_RECIPE(eval_lm) {
    return levers::recipe("eval_lm")
        .describe("mean loss and perplexity of a GPT (GPT-2 safetensors or a levers model) on a text")
        .param("weights", "", "GPT-2 weights (.safetensors) or a model.ckpt from pretrain or fine_tune")
        .param("text", "", "the text to score")
        .param("n_head", 0, "attention heads of safetensors weights (0: from their metadata or config.json)", at_least(0))
        .param("context", 0, "window length in tokens (0: the model's context)", at_least(0))
        .param("batch_size", 4, "windows per forward pass", at_least(1))
        .param("max_tokens", 0, "score only the first N tokens (0: all)", at_least(0))
        .check(check)
        .run(eval_lm);
}
