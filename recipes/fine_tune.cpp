// fine_tune: a pretrained GPT (a pretrain run's, or GPT-2 weights in
// safetensors with their BPE tokenizer) adapts to a second text with LoRA
// adapters on its attention projections (or every weight, with lora_r=0).
// The framework owns the loop, so `recipe run fine_tune --gpus 8` needs no
// change here. The adapted model, adapters merged, goes to the run directory
// as model.ckpt and model.safetensors.
#include "framework/data/files.hpp"
#include "framework/data/text_corpus.hpp"
#include "framework/data/token_windows.hpp"
#include "framework/dist/context.hpp"
#include "framework/recipe/recipe.hpp"
#include "framework/recipe/run_dir.hpp"
#include "framework/train/window_loss.hpp"
#include "models/gpt2_weights.hpp"
#include "models/gpt_files.hpp"
#include "models/gpt_io.hpp"

#include <filesystem>
#include <optional>

namespace {

using namespace levers;
namespace fs = std::filesystem;

using Gpt = models::Gpt;

// The text, and where training is in it: windows of the model's context,
// made at the first step (the data is built without the model).
struct Text {
    data::TextCorpus corpus;
    std::int64_t batch = 0;
    std::uint64_t seed = 0;
    long eval_batches = 0;
    std::optional<data::TokenWindows> windows;
    nlohmann::json resumed;  // a saved position, for the windows when they are made

    data::TokenWindows& windows_of(const Gpt& model) {
        if (!windows) {
            windows.emplace(corpus.train, batch, model.config().block_size, seed, dist::world_size(), dist::rank());
            if (!resumed.is_null()) windows->load_state(resumed);
        }
        return *windows;
    }
    nlohmann::json save_state() const { return windows ? windows->save_state() : resumed; }
    void load_state(const nlohmann::json& j) {
        resumed = j;
        if (windows) windows->load_state(j);
    }
};

// GPT-2 weights (.safetensors) read GPT-2's BPE tokens; levers' byte-level models, bytes.
int vocabulary(const Config& cfg) {
    return models::weights_format(cfg.get<std::string>("base"), "--set base=") == models::WeightsFormat::safetensors
               ? 50257
               : 256;
}

void check(const Config& cfg) {
    const fs::path base = cfg.get<std::string>("base");
    LEVERS_CHECK(fs::exists(base), "fine_tune: base checkpoint {} not found; run `recipe run pretrain` first, or give "
                 "one with --set base=PATH", base.string());
    vocabulary(cfg);  // the format, named if it is neither
}

// The pretrained model; with lora_r > 0 only its adapters are trainable (params()).
std::unique_ptr<Gpt> load_base(const Config& cfg) {
    const fs::path base = cfg.get<std::string>("base");
    auto gpt = models::load_any_gpt(base, cfg.get<int>("n_head"));
    LEVERS_CHECK(gpt->config().vocab_size == vocabulary(cfg), "fine_tune: {} has a vocabulary of {}; levers "
                 "reads GPT-2's BPE (50257) from .safetensors files and bytes (256) from model.ckpt files",
                 base.string(), gpt->config().vocab_size);
    const long r = cfg.get<long>("lora_r");
    LEVERS_CHECK(r >= 0, "lora_r must be >= 0 (0: full fine-tuning), got {}", r);
    const std::int64_t all = gpt->params().size();
    if (r > 0)
        gpt->enable_lora(static_cast<int>(r), cfg.get<double>("lora_alpha"),
                         static_cast<std::uint64_t>(cfg.get<long>("seed")));
    const auto& c = gpt->config();
    dist::print0("base {}: GPT {} layers x {} wide, context {}; training {} of its {} parameters ({})\n",
                 base.string(), c.n_layer, c.n_embd, c.block_size, gpt->params().size(), all,
                 r > 0 ? fmt::format("LoRA rank {}", r) : std::string("every weight"));
    return gpt;
}

std::unique_ptr<Text> load_text(const Config& cfg) {
    const std::string path = cfg.get<std::string>("corpus");
    const auto codec = models::codec_for_vocab(vocabulary(cfg), cfg.get<std::string>("base"));
    auto text = std::make_unique<Text>();
    text->corpus = data::load_text_corpus(
        path.empty() ? data::data_dir() / "books" / "Isaac.Newton-Opticks.txt" : fs::path(path), 0.1, codec.encode,
        codec.name);
    text->batch = dist::per_rank_batch(cfg.get<long>("batch_size"), 0);
    text->seed = static_cast<std::uint64_t>(cfg.get<long>("seed")) + 1;
    text->eval_batches = cfg.get<long>("eval_batches");
    dist::print0("corpus {:.2f} MB train, {:.2f} MB validation; batch {} per rank\n", text->corpus.train.size() / 1e6,
                 text->corpus.validation.size() / 1e6, text->batch);
    return text;
}

MicroResult train_step(Gpt& model, Text& d, const StepInfo&) {
    const data::TokenBatch b = d.windows_of(model).next();
    const Tensor loss = model.loss(b.inputs, b.targets);
    loss.backward();
    return {loss.item(), static_cast<long>(b.batch * b.time)};
}

Metrics validate(Gpt& model, Text& d) {
    return {{"val_loss",
             train::mean_window_loss(model, d.corpus.validation, d.batch, model.config().block_size, d.eval_batches)}};
}

Result save_merged(Gpt& model, Text&, const LoopResult& run) {
    Result out = {{"trainable_parameters", model.params().size()}};
    if (model.has_lora()) model.merge_lora();
    if (dist::is_main() && !run_dir().empty()) {
        models::save_gpt(run_dir() / "model.ckpt", model, {{"recipe", "fine_tune"}, {"steps", run.steps}});
        models::save_gpt2_safetensors(run_dir() / "model.safetensors", model);
        out["model"] = (run_dir() / "model.ckpt").string();
    }
    return out;
}

}  // namespace

LEVERS_RECIPE(fine_tune) {
    return levers::recipe("fine_tune")
        .describe("adapts a pretrained GPT to another text with LoRA; reports validation loss before and after")
        .training({.steps = 300, .lr = 2e-3, .warmup = 20, .log_every = 25})
        .param("base", "runs/pretrain/latest/model.ckpt",
               "the pretrained model: a pretrain run's model.ckpt, or GPT-2 weights (.safetensors)")
        .param("n_head", 0, "attention heads of safetensors weights (0: from their metadata or config.json)", at_least(0))
        .param("corpus", "", "the text to adapt to: a .txt file or directory (default: Newton's Opticks)")
        .param("lora_r", 8, "adapter rank (0: fine-tune every weight)", at_least(0))
        .param("lora_alpha", 16.0, "adapter scale numerator: updates are scaled by lora_alpha / lora_r", at_least(0))
        .param("batch_size", 16, "sequences per step and rank", at_least(1))
        .param("seed", 1337, "adapter initialisation and data-order seed")
        .param("eval_every", 100, "steps between validation passes", at_least(0))
        .param("eval_batches", 16, "batches per validation pass", at_least(1))
        .param("checkpoint_every", 100, "steps between training checkpoints in the run directory (0: none)", at_least(0))
        .check(check)
        .model(load_base)
        .data(load_text)
        .step(train_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) { o.unit = "tok"; })
        .evaluate_every("eval_every", validate)
        .evaluate_at_start()
        .checkpoint_every("checkpoint_every")
        .finish(save_merged);
}
