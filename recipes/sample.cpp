// sample: text from a GPT (a model.ckpt pretrain or fine_tune saved, or GPT-2
// weights in safetensors with their BPE tokenizer).
#include "framework/core/rng.hpp"
#include "framework/dist/context.hpp"
#include "framework/recipe/device_choice.hpp"
#include "framework/recipe/recipe.hpp"
#include "models/generate.hpp"
#include "models/gpt_files.hpp"

#include <fmt/format.h>

namespace {

using namespace levers;

void check(const Config& cfg) {
    const std::string path = cfg.get<std::string>("checkpoint");
    LEVERS_CHECK(!path.empty(), "sample needs --set checkpoint=PATH (a model.ckpt that pretrain or fine_tune saved, "
                                "or GPT-2 weights in a .safetensors file)");
    models::weights_format(path, "--set checkpoint=");
}

Result sample(const Config& cfg) {
    const std::string path = cfg.get<std::string>("checkpoint");
    auto model = models::load_any_gpt(path, cfg.get<int>("n_head"));
    model->to(dist::device(), compute_dtype());  // the card this rank computes on, if any
    const auto codec = models::codec_for(*model, path);
    const models::SampleOptions options{.max_new_tokens = cfg.get<int>("tokens"),
                                        .temperature = cfg.get<double>("temperature"),
                                        .top_k = cfg.get<int>("top_k")};
    Rng rng(static_cast<std::uint64_t>(cfg.get<long>("seed")));
    const std::string text = codec.decode(models::generate(*model, codec.encode(cfg.get<std::string>("prompt")),
                                                           options, rng));
    fmt::print("{}\n", text);
    return Result{{"text", text}, {"tokens", options.max_new_tokens}};
}

}  // namespace

LEVERS_RECIPE(sample) {
    return levers::recipe("sample")
        .describe("text from a GPT: a checkpoint pretrain or fine_tune saved, or GPT-2 safetensors")
        .param("checkpoint", "", "a model.ckpt from pretrain or fine_tune, or GPT-2 weights (.safetensors)")
        .param("n_head", 0, "attention heads of safetensors weights (0: from their metadata or config.json)", at_least(0))
        .param("prompt", "The ", "text to continue")
        .param("tokens", 200, "tokens to generate", at_least(0))
        .param("temperature", 0.8, "sampling temperature", at_least(0))
        .param("top_k", 40, "sample among the k likeliest tokens (0: all)", at_least(0))
        .param("seed", 1, "sampling seed")
        .check(check)
        .run(sample);
}
