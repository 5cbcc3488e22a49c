// sample: text from a language model: a Hugging Face directory of the Llama
// family (--set model=DIR, with its tokenizer, a KV cache and its end tokens)
// or a GPT (a model.ckpt pretrain or fine_tune saved, or GPT-2 weights in
// safetensors with their BPE tokenizer).
#include "levers/core/rng.hpp"
#include "levers/distributed/context.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/gpt_files.hpp"
#include "levers/models/hf_dir.hpp"
#include "recipes/lm_params.hpp"
#include "recipes/quantized_base.hpp"

#include <fmt/format.h>

namespace levers_recipe_sample {

namespace {

using namespace levers;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory: config.json, safetensors, "
                                   "tokenizer.json"};
const Param<std::string> checkpoint{"checkpoint", "", "a model.ckpt from pretrain or fine_tune, or GPT-2 weights "
                                    "(.safetensors)"};
const Param<int> tokens{"tokens", 200, "most tokens to generate (fewer when the model's end token comes)", at_least(0)};

void check(const Config& cfg) {
    const std::string path = cfg[checkpoint], dir = cfg[model_dir];
    LEVERS_CHECK(path.empty() != dir.empty(), "sample needs one model: --set model=DIR (a Hugging Face directory) or "
                 "--set checkpoint=PATH (a model.ckpt that pretrain or fine_tune saved, or GPT-2 weights in a "
                 ".safetensors file)");
    if (!dir.empty()) models::check_hf_tokenizer(models::check_hf_dir(dir), dir);
    if (!path.empty()) models::weights_format(path, "--set checkpoint=");
    LEVERS_CHECK(path.empty() || cfg[settings::quantize].empty(), "--set quantize={} goes with --set model=DIR (a "
                 "Hugging Face model); a checkpoint samples as it is", cfg[settings::quantize]);
    recipes::check_quantize(cfg, false, dir);
}

Result sample(const Config& cfg) {
    const std::string path = cfg[checkpoint], dir = cfg[model_dir];
    std::unique_ptr<models::LanguageModel> model;
    models::TextCodec codec;
    std::vector<std::int32_t> stop;
    if (!dir.empty()) {
        auto llama = recipes::load_hf_to_read(dir, cfg);
        stop.assign(llama->config().eos_token_ids.begin(), llama->config().eos_token_ids.end());
        codec = models::hf_codec(dir, llama->vocab_size());
        model = std::move(llama);
    } else {
        auto gpt = models::load_any_gpt(path, cfg[recipes::n_head]);
        gpt->to(dist::device(), cfg.run().compute);  // the GPU this rank computes on, if any
        codec = models::codec_for(*gpt, path);
        model = std::move(gpt);
    }
    const models::SampleOptions options{.max_new_tokens = cfg[tokens],
                                        .temperature = cfg[recipes::temperature],
                                        .top_k = cfg[recipes::top_k],
                                        .top_p = cfg[recipes::top_p],
                                        .stop = stop};
    Rng rng(cfg[settings::seed]);
    const auto prompt = codec.encode(cfg[recipes::prompt]);
    const auto ids = models::generate(*model, prompt, options, rng);
    const std::string text = codec.decode(ids);
    fmt::print("{}\n", text);
    return Result{{"text", text}, {"tokens", ids.size() - prompt.size()}};
}

}  // namespace

LEVERS_RECIPE(sample) {
    return levers::recipe("sample")
        .describe("text from a language model: a Hugging Face directory (Llama, Mistral, Qwen, SmolLM3, Gemma, "
                  "Phi, Mixtral, Qwen3-MoE), a checkpoint pretrain or fine_tune saved, or GPT-2 safetensors")
        .params(model_dir, checkpoint, recipes::n_head, recipes::prompt.with_default("The "), tokens,
                recipes::temperature, recipes::top_k, recipes::top_p,
                settings::seed.with_default(1), settings::quantize, settings::double_quant)
        .check(check)
        .run(sample);
}

}  // namespace levers_recipe_sample
