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

#include <fmt/format.h>

namespace {

using namespace levers;

void check(const Config& cfg) {
    const std::string path = cfg.get<std::string>("checkpoint"), dir = cfg.get<std::string>("model");
    LEVERS_CHECK(path.empty() != dir.empty(), "sample needs one model: --set model=DIR (a Hugging Face directory) or "
                 "--set checkpoint=PATH (a model.ckpt that pretrain or fine_tune saved, or GPT-2 weights in a "
                 ".safetensors file)");
    if (!dir.empty()) models::check_hf_tokenizer(models::check_hf_dir(dir), dir);
    if (!path.empty()) models::weights_format(path, "--set checkpoint=");
}

Result sample(const Config& cfg) {
    const std::string path = cfg.get<std::string>("checkpoint"), dir = cfg.get<std::string>("model");
    std::unique_ptr<models::LanguageModel> model;
    models::TextCodec codec;
    std::vector<std::int32_t> stop;
    if (!dir.empty()) {
        auto llama = models::load_hf_model(dir, dist::device(), cfg.run().compute);
        stop.assign(llama->config().eos_token_ids.begin(), llama->config().eos_token_ids.end());
        codec = models::hf_codec(dir, llama->vocab_size());
        model = std::move(llama);
    } else {
        auto gpt = models::load_any_gpt(path, cfg.get<int>("n_head"));
        gpt->to(dist::device(), cfg.run().compute);  // the GPU this rank computes on, if any
        codec = models::codec_for(*gpt, path);
        model = std::move(gpt);
    }
    const models::SampleOptions options{.max_new_tokens = cfg.get<int>("tokens"),
                                        .temperature = cfg.get<double>("temperature"),
                                        .top_k = cfg.get<int>("top_k"),
                                        .top_p = cfg.get<double>("top_p"),
                                        .stop = stop};
    Rng rng(static_cast<std::uint64_t>(cfg.get<long>("seed")));
    const auto prompt = codec.encode(cfg.get<std::string>("prompt"));
    const auto tokens = models::generate(*model, prompt, options, rng);
    const std::string text = codec.decode(tokens);
    fmt::print("{}\n", text);
    return Result{{"text", text}, {"tokens", tokens.size() - prompt.size()}};
}

}  // namespace

LEVERS_RECIPE(sample) {
    return levers::recipe("sample")
        .describe("text from a language model: a Hugging Face directory (Llama, Mistral, Qwen), a checkpoint "
                  "pretrain or fine_tune saved, or GPT-2 safetensors")
        .param("model", "", "a Hugging Face model directory: config.json, safetensors, tokenizer.json")
        .param("checkpoint", "", "a model.ckpt from pretrain or fine_tune, or GPT-2 weights (.safetensors)")
        .param("n_head", 0, "attention heads of safetensors weights (0: from their metadata or config.json)", at_least(0))
        .param("prompt", "The ", "text to continue")
        .param("tokens", 200, "most tokens to generate (fewer when the model's end token comes)", at_least(0))
        .param("temperature", 0.8, "sampling temperature", at_least(0))
        .param("top_k", 40, "sample among the k likeliest tokens (0: all)", at_least(0))
        .param("top_p", 1.0, "sample among the likeliest tokens whose probability reaches p (1: all)", at_least(0))
        .param("seed", 1, "sampling seed")
        .check(check)
        .run(sample);
}
