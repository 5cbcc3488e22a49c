// sample: text from a GPT checkpoint (one `pretrain --set checkpoint=PATH` saved).
#include "framework/core/rng.hpp"
#include "framework/data/bpe_tokenizer.hpp"
#include "framework/data/byte_tokenizer.hpp"
#include "framework/recipe/recipe.hpp"
#include "models/generate.hpp"
#include "models/gpt_io.hpp"

#include <fmt/format.h>

namespace {

using namespace levers;

Result sample(const Config& cfg) {
    const std::string path = cfg.get<std::string>("checkpoint");
    LEVERS_CHECK(!path.empty(), "sample needs --set checkpoint=PATH (a file `recipe run pretrain --set "
                                "checkpoint=PATH` wrote)");
    auto model = models::load_gpt(path);
    const int vocab = model->config().vocab_size;
    const models::SampleOptions options{.max_new_tokens = cfg.get<int>("tokens"),
                                        .temperature = cfg.get<double>("temperature"),
                                        .top_k = cfg.get<int>("top_k")};
    Rng rng(static_cast<std::uint64_t>(cfg.get<long>("seed")));
    std::string text;
    const std::string prompt = cfg.get<std::string>("prompt");
    if (vocab == data::ByteTokenizer::kVocabSize) {
        text = data::ByteTokenizer::decode(models::generate(*model, data::ByteTokenizer::encode(prompt), options, rng));
    } else {
        const auto bpe = data::BpeTokenizer::gpt2_default();
        LEVERS_CHECK(vocab == bpe.vocab_size(), "{}: a vocabulary of {} matches neither bytes (256) nor GPT-2 BPE ({})",
                     path, vocab, bpe.vocab_size());
        text = bpe.decode(models::generate(*model, bpe.encode(prompt), options, rng));
    }
    fmt::print("{}\n", text);
    return Result{{"text", text}, {"tokens", options.max_new_tokens}};
}

}  // namespace

LEVERS_RECIPE(sample) {
    return levers::recipe("sample")
        .describe("text from a GPT checkpoint saved by pretrain")
        .param("checkpoint", "", "the checkpoint file")
        .param("prompt", "The ", "text to continue")
        .param("tokens", 200, "tokens to generate")
        .param("temperature", 0.8, "sampling temperature")
        .param("top_k", 40, "sample among the k likeliest tokens (0: all)")
        .param("seed", 1, "sampling seed")
        .run(sample);
}
