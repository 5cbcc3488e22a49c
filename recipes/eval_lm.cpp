// eval_lm: the mean loss of a language model on a text (or on token ids), in
// nats per token over non-overlapping windows of its context, so the number
// compares with other implementations' (Hugging Face's perplexity with
// stride = context), or, with llama_cpp=true, as llama.cpp's llama-perplexity
// scores (so a GGUF export's figure compares with ours). The model is GPT-2's (--set weights=) or a Hugging Face
// directory of the Llama family (--set model=DIR, read with its own
// tokenizer). Works on any GPU count: each rank scores its share of the windows.
#include "levers/core/read_file.hpp"
#include "levers/distributed/context.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/window_loss.hpp"
#include "levers/models/gpt_files.hpp"
#include "levers/models/hf_dir.hpp"
#include "recipes/lm_params.hpp"
#include "recipes/quantized_base.hpp"

#include <cmath>
#include <filesystem>

namespace levers_recipe_eval_lm {

namespace {

using namespace levers;
namespace fs = std::filesystem;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory (Llama, Mistral, Qwen, SmolLM3, "
                                   "Gemma, Phi, Mixtral, Qwen3-MoE): config.json, safetensors, "
                                   "tokenizer.json"};
const Param<std::string> weights_file{"weights", "", "GPT-2 weights (.safetensors) or a model.ckpt from pretrain or "
                                      "fine_tune"};
const Param<std::string> text_file{"text", "", "the text to score"};
const Param<std::string> ids_file{"tokens", "", "token ids to score, a JSON array (instead of a text)"};
const Param<long> context{"context", 0, "window length in tokens (0: the model's context, at most 2048; a shorter "
                          "text is one window)", at_least(0)};
const Param<long> batch_size{"batch_size", 4, "windows per forward pass", at_least(1)};
const Param<long> max_tokens{"max_tokens", 0, "score only the first N tokens (0: all)", at_least(0)};
const Param<bool> llama_cpp{"llama_cpp", false, "score as llama.cpp's llama-perplexity does: windows of `context` "
                            "tokens, each opening with BOS (where the tokenizer adds one), the predictions of each "
                            "window's second half counted"};

void check(const Config& cfg) {
    const std::string weights = cfg[weights_file], dir = cfg[model_dir];
    const std::string text = cfg[text_file], ids = cfg[ids_file];
    LEVERS_CHECK(weights.empty() != dir.empty(), "eval_lm needs one model: --set model=DIR (a Hugging Face "
                 "directory of a Llama, Mistral or Qwen model) or --set weights=PATH (GPT-2 safetensors, or a "
                 "model.ckpt from pretrain or fine_tune)");
    LEVERS_CHECK(text.empty() != ids.empty(), "eval_lm needs one input: --set text=PATH (a text file) or --set "
                 "tokens=PATH (token ids as a JSON array)");
    if (!dir.empty()) {
        const auto config = models::check_hf_dir(dir);
        if (!text.empty()) models::check_hf_tokenizer(config, dir);
    }
    if (!weights.empty()) models::weights_format(weights, "--set weights=");
    LEVERS_CHECK(weights.empty() || cfg[settings::quantize].empty(), "--set quantize={} goes with --set model=DIR (a "
                 "Hugging Face model); GPT weights are scored as they are", cfg[settings::quantize]);
    recipes::check_quantize(cfg, false, dir);
    const std::string input = text.empty() ? ids : text;
    LEVERS_CHECK(fs::is_regular_file(input), "--set {}={}: no such file; give {}", text.empty() ? "tokens" : "text",
                 input, text.empty() ? "a JSON array of token ids" : "a text file to score");
}

std::unique_ptr<models::LanguageModel> load(const Config& cfg) {
    const std::string dir = cfg[model_dir];
    if (!dir.empty()) return recipes::load_hf_to_read(dir, cfg);
    auto gpt = models::load_any_gpt(cfg[weights_file], cfg[recipes::n_head]);
    gpt->to(dist::device(), cfg.run().compute);  // the GPU this rank computes on, if any
    return gpt;
}

// The ids of a JSON array, each checked against the vocabulary.
std::vector<std::int32_t> read_ids(const fs::path& path, std::int64_t vocab) {
    const auto j = nlohmann::json::parse(read_file(path), nullptr, false);
    LEVERS_CHECK(j.is_array(), "{}: not a JSON array of token ids", path.string());
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < j.size(); ++i) {
        LEVERS_CHECK(j[i].is_number_integer() && j[i].get<std::int64_t>() >= 0 && j[i].get<std::int64_t>() < vocab,
                     "{}: item {} is {}; token ids are whole numbers in [0, {})", path.string(), i, j[i].dump(), vocab);
        ids.push_back(j[i].get<std::int32_t>());
    }
    return ids;
}

Result eval_lm(const Config& cfg) {
    const std::string weights = cfg[weights_file], dir = cfg[model_dir];
    const std::string source = dir.empty() ? weights : dir;
    auto model = load(cfg);
    std::vector<std::int32_t> tokens;
    std::string how;
    if (const std::string ids = cfg[ids_file]; !ids.empty()) {
        tokens = read_ids(ids, model->vocab_size());
        how = "token ids from " + ids;
    } else {
        const std::string text = cfg[text_file];
        const auto codec = dir.empty() ? models::codec_for_vocab(static_cast<int>(model->vocab_size()), weights)
                                       : models::hf_codec(dir, model->vocab_size());
        tokens = codec.encode(read_file(text, "a text file to score"));
        how = text + " with " + codec.name;
    }
    const long limit = cfg[max_tokens];
    if (limit > 0 && static_cast<long>(tokens.size()) > limit) tokens.resize(static_cast<std::size_t>(limit));
    LEVERS_CHECK(tokens.size() >= 2, "{} holds {} token{}: scoring needs at least 2 (a token and the one after it)",
                 how, tokens.size(), tokens.size() == 1 ? "" : "s");
    // A Llama-family context can be 128K positions: windows default to at most 2048.
    const std::int64_t longest = model->context_length();
    std::int64_t window = cfg[context] > 0 ? cfg[context] : std::min<std::int64_t>(longest, 2048);
    LEVERS_CHECK(window <= longest, "context {} is longer than the model's {}", window, longest);
    const auto n = static_cast<std::int64_t>(tokens.size());
    if (n - 1 < window) {  // as Hugging Face's perplexity recipes score a text shorter than the context
        dist::print0("{} tokens are fewer than a window of {} (+1 for the last target): scored as one window of {}\n",
                     n, window, n - 1);
        window = n - 1;
    }
    std::int64_t windows = (n - 1) / window;
    std::function<double(const data::TokenBatch&)> mean_loss = [&](const data::TokenBatch& b) {
        return model->loss(b.inputs, b.targets).item();
    };
    std::int64_t scored = windows * window;
    if (cfg[llama_cpp]) {
        // llama-perplexity's chunks: every whole window of the text, BOS in its first place, and the
        // predictions of positions context/2 to context-2 (the last one's target is the next chunk's).
        windows = n / window;
        LEVERS_CHECK(windows >= 1, "llama_cpp=true needs at least one window of {} tokens; {} has {}", window, how, n);
        tokens.resize(static_cast<std::size_t>(windows * window));
        const auto prefix = dir.empty() ? std::vector<std::int32_t>{} : models::hf_codec(dir, model->vocab_size()).encode("");
        for (std::int64_t w = 0; w < windows && !prefix.empty(); ++w) tokens[static_cast<std::size_t>(w * window)] = prefix.front();
        tokens.push_back(0);  // a target for the last position, which is not scored
        mean_loss = [&](const data::TokenBatch& b) {
            Tensor targets = b.targets.to(Device::cpu()).clone();
            auto* t = targets.data<std::int32_t>();
            for (std::int64_t r = 0; r < b.batch; ++r)
                for (std::int64_t p = 0; p < b.time; ++p)
                    if (p < window / 2 || p == window - 1) t[r * b.time + p] = -100;
            return model->loss(b.inputs, targets.to(b.targets.device())).item();
        };
        scored = windows * (window - 1 - window / 2);
    }
    dist::print0("{}: {}; {} tokens ({}), {} windows of {}{}\n", source, model->summary(), tokens.size(), how, windows,
                 window, cfg[llama_cpp] ? ", scored as llama-perplexity scores" : "");
    const double loss = train::mean_window_loss(*model, data::TokenFile::from(tokens), cfg[batch_size], window, 0, mean_loss);
    dist::print0("mean loss {:.4f} nats/token, perplexity {:.2f}\n", loss, std::exp(loss));
    return {{"loss", loss},
            {"perplexity", std::exp(loss)},
            {"tokens_scored", scored},
            {"windows", windows},
            {"context", window}};
}

}  // namespace

LEVERS_RECIPE(eval_lm) {
    return levers::recipe("eval_lm")
        .describe("mean loss and perplexity of a language model (a HF directory, GPT-2 safetensors or a levers "
                  "model) on a text or token ids")
        .params(model_dir, weights_file, text_file, ids_file, recipes::n_head, context, batch_size, max_tokens, llama_cpp,
                settings::quantize, settings::double_quant)
        .check(check)
        .run(eval_lm);
}

}  // namespace levers_recipe_eval_lm
