// sft: supervised fine-tuning of a Hugging Face model (Llama, Mistral, Qwen, SmolLM3, Gemma, Phi-3, and the
// mixtures of experts Mixtral and Qwen3-MoE, whose routing each step logs)
// on examples in a JSON-lines file: conversations rendered through the
// model's chat template, instructions, or plain text (levers/data/sft_data.hpp).
// The loss counts the assistant's tokens only; examples are packed into rows
// of the context, each attending within itself with positions restarting
// (packing=false: one per row). A share of the examples is held out for the
// validation loss. LoRA on the projections by default (lora_r=0: every
// weight); the result goes to the run directory as a merged HF directory
// (model/) and the PEFT adapter (adapter/). The framework owns the loop:
// `--gpus 8`, resume and --restarts need nothing here.
#include "levers/data/sft_rows.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/sample_means.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/hf_tuning.hpp"
#include "recipes/text_windows.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

namespace levers_recipe_sft {

namespace {

using namespace levers;
namespace fs = std::filesystem;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory (Llama, Mistral, Qwen, SmolLM3, "
                                   "Gemma, Phi, Mixtral, Qwen3-MoE) with its tokenizer"};
const Param<std::string> data_file{"data", "", "the examples: FILE.jsonl, one {\"messages\": [...]}, {\"instruction\", "
                                   "\"input\", \"output\"} or {\"text\"} per line"};
const Param<long> context{"context", 1024, "row length in tokens (at most the model's max_position_embeddings)",
                          at_least(2)};
const Param<bool> packing{"packing", true, "several examples per row, each attending within itself (false: one per "
                          "row)"};
const Param<std::string> too_long_rule{"too_long", "drop", "examples longer than the context: drop or truncate"};
const Param<double> val_fraction{"val_fraction", 0.05, "share of the examples held out for the validation loss (at "
                                 "least one)"};

struct Examples {
    data::SftRows train, validation;
    std::int64_t batch = 0;
    std::uint64_t seed = 0;
    long eval_batches = 0;
    bool packing = true;
    std::int64_t conversations = 0, instructions = 0, texts = 0, held_out = 0;  // what the file held
    std::string model_dir;
    models::LoraSettings lora;
    recipes::Position<data::SftBatches> position;  // made at the first step

    data::SftBatches& batches() {
        return position.get([&] { return data::SftBatches(train, batch, seed, dist::world_size(), dist::rank()); });
    }
    nlohmann::json save_state() const { return position.save_state(); }
    void load_state(const nlohmann::json& j) { position.load_state(j); }
};

data::TooLong too_long(const Config& cfg) {
    const std::string v = cfg[too_long_rule];
    LEVERS_CHECK(v == "drop" || v == "truncate", "--set too_long={}: examples longer than the context are either "
                 "dropped (drop) or cut (truncate)", v);
    return v == "drop" ? data::TooLong::drop : data::TooLong::truncate;
}

std::unique_ptr<Examples> prepare(const Config& cfg);

fs::path model_path(const Config& cfg) {
    const fs::path dir = cfg[model_dir];
    LEVERS_CHECK(!dir.empty(), "sft needs --set model=DIR: a Hugging Face model directory (Llama, Mistral, Qwen, "
                 "SmolLM3, Gemma, Phi, Mixtral, Qwen3-MoE)");
    return dir;
}

void check(const Config& cfg) {
    const fs::path dir = model_path(cfg);
    models::check_hf_tokenizer(models::check_hf_dir(dir), dir);
    LEVERS_CHECK(!cfg[data_file].empty(),
                 "sft needs --set data=FILE.jsonl: one example per line, {{\"messages\": [...]}}, "
                 "{{\"instruction\", \"input\", \"output\"}} or {{\"text\"}}");
    const double held = cfg[val_fraction];
    LEVERS_CHECK(held >= 0 && held < 1, "--set val_fraction={} must be in [0, 1)", held);
    too_long(cfg);
    recipes::check_lora(cfg, dir);
    recipes::check_gguf(cfg, dir);
    // The data read, rendered and laid out once here too, so a bad line stops the job before anything starts.
    prepare(cfg);
}

std::unique_ptr<models::LanguageModel> load_model(const Config& cfg) {
    return recipes::load_hf_for_tuning(cfg, model_path(cfg).string());
}

std::unique_ptr<Examples> prepare(const Config& cfg) {
    const fs::path dir = cfg[model_dir];
    const models::LlamaConfig config = models::read_llama_config(dir / "config.json");
    const auto tokenizer = models::hf_tokenizer(dir, config.vocab_size);
    const std::optional<data::ChatTemplate> chat = recipes::chat_template_of(dir);
    const data::SftFile file = data::read_sft_file(cfg[data_file], *tokenizer, chat ? &*chat : nullptr);
    const auto [train, held_out] =
        recipes::split_held_out(file.examples, cfg[val_fraction], cfg[settings::seed] + 7, "example(s)");

    auto d = std::make_unique<Examples>();
    const std::int64_t row = std::min<std::int64_t>(cfg[context], config.max_position_embeddings);
    d->packing = cfg[packing];
    d->train = data::make_rows(train, row, d->packing, too_long(cfg));
    d->validation = data::make_rows(held_out, row, d->packing, too_long(cfg));
    d->batch = rank_batch(cfg);
    d->seed = cfg[settings::seed] + 1;
    d->eval_batches = cfg[recipes::eval_batches];
    d->model_dir = dir.string();
    d->lora = recipes::lora_settings(cfg);
    d->conversations = file.conversations;
    d->instructions = file.instructions;
    d->texts = file.texts;
    d->held_out = static_cast<std::int64_t>(held_out.size());
    LEVERS_CHECK(d->train.rows() > 0, "{}: no example fits the context of {} (--set too_long=truncate cuts them)",
                 cfg[data_file], row);
    return d;
}

std::unique_ptr<Examples> load_examples(const Config& cfg) {
    auto d = prepare(cfg);
    const std::int64_t dropped = d->train.dropped + d->validation.dropped;
    const std::int64_t truncated = d->train.truncated + d->validation.truncated;
    dist::print0("data {}: {} conversations, {} instructions, {} texts; {} held out; {} rows of {} ({}), {} tokens "
                 "learned{}{}\n",
                 cfg[data_file], d->conversations, d->instructions, d->texts, d->held_out,
                 d->train.rows(), d->train.context, d->packing ? "packed" : "one example each", d->train.learned(),
                 dropped ? fmt::format("; {} dropped (longer than the context, or nothing to learn)", dropped) : "",
                 truncated ? fmt::format("; {} cut to the context", truncated) : "");
    if (const std::string note = data::repeated_rows_note(d->train, d->batch, dist::world_size()); !note.empty())
        dist::print0("note: {}\n", note);
    return d;
}

Tensor loss_of(models::LanguageModel& model, const data::SftBatch& b, bool packing) {
    auto& llama = dynamic_cast<models::Llama&>(model);
    return packing ? llama.loss(b.tokens, b.targets, b.documents) : llama.loss(b.tokens, b.targets);
}

MicroResult train_step(models::LanguageModel& model, Examples& d, const StepInfo&) {
    const data::SftBatch b = d.batches().next();
    const Tensor loss = loss_of(model, b, d.packing);
    loss.backward();
    return {loss.item(), static_cast<long>(b.real_tokens), recipes::router_metrics(model)};
}

// The mean loss per learned token over the held-out rows (all, or eval_batches x batch), shared by the ranks.
Metrics validate(models::LanguageModel& model, Examples& d) {
    if (d.validation.rows() == 0) return {};
    const std::int64_t rows = std::min<std::int64_t>(d.validation.rows(), d.eval_batches * d.batch);
    const auto [lo, hi] = dist::Backend::chunk(rows, dist::world_size(), dist::rank());
    dist::SampleMeans loss({"loss"});
    autograd::InferenceMode inference;
    const bool was_training = model.training();
    model.eval();
    for (std::int64_t first = lo; first < hi; first += d.batch) {
        std::vector<std::int64_t> which;
        for (std::int64_t r = first; r < std::min(hi, first + d.batch); ++r) which.push_back(r);
        const data::SftBatch b = data::rows_at(d.validation, which);
        std::int64_t learned = 0;
        for (std::int64_t i = 0; i < b.targets.numel(); ++i) learned += b.targets.data<std::int32_t>()[i] != data::kIgnoredTarget;
        if (learned > 0) loss.add("loss", loss_of(model, b, d.packing).item() * static_cast<double>(learned),
                                  static_cast<double>(learned));
    }
    model.train(was_training);
    return {{"val_loss", loss.means().at("loss")}};
}

Result save(models::LanguageModel& model, Examples& d, const LoopResult&, const Config& cfg) {
    return recipes::save_hf_tuned(model, d.model_dir, d.lora, cfg.run().dir, cfg[recipes::gguf],
                                  recipes::save_quantized_spec(cfg));
}

}  // namespace

LEVERS_RECIPE(sft) {
    return levers::recipe("sft")
        .describe("supervised fine-tuning of a HF model on conversations, instructions or text (JSON lines): the "
                  "loss on the assistant's tokens, examples packed; saves a HF directory and the PEFT adapter")
        .training({.steps = 200, .lr = 1e-3, .warmup = 10, .log_every = 10, .checkpoint_every = 100,
                   .batch_size = 8, .seed = 1337, .eval_every = 50})
        .lora({})
        .activation_checkpointing()
        .params(model_dir, data_file, context, packing, too_long_rule, val_fraction,
                recipes::eval_batches.with_default(8), recipes::gguf)
        .check(check)
        .model(load_model)
        .data(load_examples)
        .step(train_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) { o.unit = "tok"; })
        .evaluate(validate)
        .evaluate_at_start()
        .finish(save);
}

}  // namespace levers_recipe_sft
