// dpo: preference tuning of a Hugging Face model on pairs of answers (TRL's
// forms, levers/data/preference_data.hpp): DPO's sigmoid loss (with label
// smoothing for conservative DPO), IPO, or the reference-free SimPO
// (levers/train/preference_loss.hpp). Chosen and rejected answers of a pair
// go through the model in one batch, packed as sft packs; only the answers'
// tokens count. The reference: with LoRA, the base with its adapters
// switched off (no second copy of the weights); with every weight trained, a
// frozen copy; ref_model=DIR another directory; precompute_ref=true scores
// the reference once over the data and keeps only the numbers. Logs TRL's
// rewards/* and logps/* per step. Saves as sft does (model/, adapter/).
#include "levers/data/preference_data.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/sample_means.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/nn/lora.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/preference_loss.hpp"
#include "recipes/hf_tuning.hpp"
#include "recipes/text_windows.hpp"

#include <filesystem>
#include <optional>

namespace levers_recipe_dpo {

namespace {

using namespace levers;
namespace fs = std::filesystem;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory (Llama, Mistral, Qwen, SmolLM3, Gemma, "
                                   "Phi-3) with its tokenizer"};
const Param<std::string> data_file{"data", "", "the preference pairs: FILE.jsonl, one {\"prompt\", \"chosen\", "
                                   "\"rejected\"} per line (text, or a conversation and the assistant's answers)"};
const Param<long> context{"context", 1024, "row length in tokens (at most the model's max_position_embeddings)",
                          at_least(2)};
const Param<bool> packing{"packing", true, "several pairs per row, each sequence attending within itself (false: "
                          "each answer a row)"};
const Param<std::string> loss_name{"loss", "sigmoid", "sigmoid (DPO), ipo, or simpo (no reference)"};
const Param<double> beta{"beta", 0.1, "how far the policy may move from the reference (SimPO: the reward scale)"};
const Param<double> label_smoothing{"label_smoothing", 0.0, "the share of pairs taken to be mislabelled "
                                    "(conservative DPO; sigmoid and simpo), in [0, 0.5)"};
const Param<double> simpo_gamma{"gamma", 0.5, "SimPO's target reward margin"};
const Param<bool> precompute_ref{"precompute_ref", false, "score the reference once over the data before training "
                                 "and keep only the numbers"};
const Param<std::string> ref_model{"ref_model", "", "the reference: another HF directory of the same architecture "
                                   "(default: the base, its adapters switched off with LoRA)"};
const Param<double> val_fraction{"val_fraction", 0.05, "share of the pairs held out for validation (at least one)"};

// A split's pairs in rows, and the reference's numbers when precomputed.
struct Split {
    data::PreferenceRows rows;
    std::vector<float> ref_chosen, ref_rejected;  // by pair; empty until precomputed
};

struct Pairs {
    Split train, validation;
    std::int64_t batch = 0;
    std::uint64_t seed = 0;
    long eval_batches = 0;
    bool packing = true, precompute = false;
    train::PreferenceLossOptions loss;
    std::int64_t conversations = 0, texts = 0, truncated = 0, held_out = 0;
    std::string model_dir, ref_dir;  // ref_dir: the reference's directory where it is not the policy's base
    models::LoraSettings lora;
    DType compute = DType::f32;
    std::unique_ptr<models::Llama> reference;  // a frozen model, where the reference is computed as training goes
    recipes::Position<data::PreferenceBatches> position;  // made at the first step

    bool needs_reference() const { return loss.type != train::PreferenceLossType::simpo; }
    data::PreferenceBatches& batches() {
        return position.get([&] { return data::PreferenceBatches(train.rows, batch, seed, dist::world_size(), dist::rank()); });
    }
    nlohmann::json save_state() const { return position.save_state(); }
    void load_state(const nlohmann::json& j) { position.load_state(j); }
};

fs::path model_path(const Config& cfg) {
    const fs::path dir = cfg[model_dir];
    LEVERS_CHECK(!dir.empty(), "dpo needs --set model=DIR: a Hugging Face model directory (Llama, Mistral, Qwen, "
                 "SmolLM3, Gemma, Phi-3)");
    return dir;
}

std::unique_ptr<Pairs> prepare(const Config& cfg);

void check(const Config& cfg) {
    const fs::path dir = model_path(cfg);
    const models::LlamaConfig base = models::check_hf_dir(dir);
    models::check_hf_tokenizer(base, dir);
    LEVERS_CHECK(!cfg[data_file].empty(), "dpo needs --set data=FILE.jsonl: one {{\"prompt\", \"chosen\", "
                 "\"rejected\"}} per line");
    const auto type = train::preference_loss_type(cfg[loss_name]);
    LEVERS_CHECK(cfg[beta] > 0, "--set beta={} must be positive", cfg[beta]);
    const double smoothing = cfg[label_smoothing];
    LEVERS_CHECK(smoothing >= 0 && smoothing < 0.5, "--set label_smoothing={} must be in [0, 0.5)", smoothing);
    LEVERS_CHECK(smoothing == 0 || type != train::PreferenceLossType::ipo,
                 "--set label_smoothing={}: ipo has no label smoothing (sigmoid and simpo have)", smoothing);
    const double held = cfg[val_fraction];
    LEVERS_CHECK(held >= 0 && held < 1, "--set val_fraction={} must be in [0, 1)", held);
    if (const fs::path ref = cfg[ref_model]; !ref.empty()) {
        LEVERS_CHECK(type != train::PreferenceLossType::simpo, "--set ref_model={}: simpo has no reference model",
                     ref.string());
        const models::LlamaConfig other = models::check_hf_dir(ref);
        LEVERS_CHECK(other.model_type == base.model_type && other.vocab_size == base.vocab_size,
                     "--set ref_model={}: a {} of {} tokens cannot be the reference of a {} of {} tokens (the "
                     "reference scores the policy's tokens: the same architecture and vocabulary)", ref.string(),
                     other.model_type, other.vocab_size, base.model_type, base.vocab_size);
    }
    LEVERS_CHECK(!cfg[precompute_ref] || type != train::PreferenceLossType::simpo,
                 "--set precompute_ref=true: simpo has no reference to score");
    recipes::check_lora(cfg, dir);
    recipes::check_gguf(cfg, dir);
    prepare(cfg);  // the data read and laid out once here too, so a bad line stops the job before anything starts
}

std::unique_ptr<Pairs> prepare(const Config& cfg) {
    const fs::path dir = cfg[model_dir];
    const models::LlamaConfig config = models::read_llama_config(dir / "config.json");
    const auto tokenizer = models::hf_tokenizer(dir, config.vocab_size);
    const std::optional<data::ChatTemplate> chat = recipes::chat_template_of(dir);
    const std::int64_t row = std::min<std::int64_t>(cfg[context], config.max_position_embeddings);
    const data::PreferenceFile file = data::read_preference_file(cfg[data_file], *tokenizer, chat ? &*chat : nullptr, row);
    const auto [train, held_out] = recipes::split_held_out(file.pairs, cfg[val_fraction], cfg[settings::seed] + 7,
                                                           "preference pair(s)");
    auto d = std::make_unique<Pairs>();
    d->packing = cfg[packing];
    d->train.rows = data::make_preference_rows(train, row, d->packing);
    d->validation.rows = data::make_preference_rows(held_out, row, d->packing);
    d->batch = rank_batch(cfg);
    d->seed = cfg[settings::seed] + 1;
    d->eval_batches = cfg[recipes::eval_batches];
    d->precompute = cfg[precompute_ref];
    d->loss = {.type = train::preference_loss_type(cfg[loss_name]), .beta = cfg[beta],
               .label_smoothing = cfg[label_smoothing], .gamma = cfg[simpo_gamma]};
    d->conversations = file.conversations;
    d->texts = file.texts;
    d->truncated = file.truncated;
    d->held_out = static_cast<std::int64_t>(held_out.size());
    d->model_dir = dir.string();
    d->lora = recipes::lora_settings(cfg);
    d->compute = cfg.run().compute;
    // The policy's own base serves as reference only through LoRA's switch; every weight trained needs a copy.
    d->ref_dir = !cfg[ref_model].empty() ? cfg[ref_model] : (cfg[settings::lora_r] == 0 ? d->model_dir : "");
    return d;
}

std::unique_ptr<Pairs> load_pairs(const Config& cfg) {
    auto d = prepare(cfg);
    std::string reference = "none (simpo)";
    if (d->needs_reference()) {
        reference = d->ref_dir.empty() ? "the base, its LoRA adapters switched off" : "a frozen " + d->ref_dir;
        if (d->precompute) reference += ", scored once before training";
        else if (!d->ref_dir.empty()) d->reference = models::load_hf_model(d->ref_dir, dist::device(), d->compute);
    }
    dist::print0("data {}: {} conversation pairs, {} text pairs; {} held out; {} packs in {} rows of {} ({}){}\n",
                 cfg[data_file], d->conversations, d->texts, d->held_out, d->train.rows.packs(),
                 d->train.rows.rows.rows(), d->train.rows.rows.context, d->packing ? "packed" : "one answer each",
                 d->truncated ? fmt::format("; {} answers cut to the context", d->truncated) : "");
    dist::print0("loss {} (beta {}); reference: {}\n", cfg[loss_name], d->loss.beta, reference);
    return d;
}

train::PairLogps score(models::Llama& model, const data::PreferenceBatch& b, bool packing) {
    return train::pair_logps(model.token_logprobs(b.rows.tokens, b.rows.targets, packing ? &b.rows.documents : nullptr), b);
}

// The reference's numbers of a batch's pairs, precomputed, beside the policy's answer lengths.
train::PairLogps stored_reference(const Split& split, const data::PreferenceBatch& b, const train::PairLogps& policy) {
    std::vector<float> c, r;
    for (const std::int64_t p : b.pair) {
        c.push_back(split.ref_chosen[static_cast<std::size_t>(p)]);
        r.push_back(split.ref_rejected[static_cast<std::size_t>(p)]);
    }
    const auto n = static_cast<std::int64_t>(c.size());
    const Device device = policy.chosen.device();
    return {Tensor::from(c, {n}).to(device), Tensor::from(r, {n}).to(device), policy.chosen_tokens,
            policy.rejected_tokens};
}

// The reference's log-probabilities of a batch's pairs, computed now, without gradients.
train::PairLogps live_reference(models::Llama& policy, Pairs& d, const data::PreferenceBatch& b) {
    autograd::InferenceMode inference;
    if (d.reference) return score(*d.reference, b, d.packing);
    nn::AdaptersOff base(policy);
    return score(policy, b, d.packing);
}

// precompute_ref: every pair's reference numbers, each rank scoring a share of the packs, summed over ranks.
void precompute(models::Llama& policy, Pairs& d, Split& split) {
    const data::PreferenceRows& rows = split.rows;
    std::vector<double> numbers(static_cast<std::size_t>(2 * rows.pairs), 0.0);
    const auto [lo, hi] = dist::Backend::chunk(rows.packs(), dist::world_size(), dist::rank());
    std::unique_ptr<models::Llama> loaded;
    if (!d.ref_dir.empty()) loaded = models::load_hf_model(d.ref_dir, dist::device(), d.compute);
    autograd::InferenceMode inference;
    std::optional<nn::AdaptersOff> base;
    if (!loaded) base.emplace(policy);
    for (std::int64_t first = lo; first < hi; first += d.batch) {
        std::vector<std::int64_t> which;
        for (std::int64_t p = first; p < std::min(hi, first + d.batch); ++p) which.push_back(p);
        const data::PreferenceBatch b = data::packs_at(rows, which);
        const train::PairLogps s = score(loaded ? *loaded : policy, b, d.packing);
        const std::vector<double> c = s.chosen.values(), r = s.rejected.values();
        for (std::size_t k = 0; k < b.pair.size(); ++k) {
            numbers[static_cast<std::size_t>(2 * b.pair[k])] = c[k];
            numbers[static_cast<std::size_t>(2 * b.pair[k] + 1)] = r[k];
        }
    }
    if (dist::backend()) dist::all_reduce_sum(numbers);
    split.ref_chosen.resize(static_cast<std::size_t>(rows.pairs));
    split.ref_rejected.resize(static_cast<std::size_t>(rows.pairs));
    for (std::size_t p = 0; p < split.ref_chosen.size(); ++p) {
        split.ref_chosen[p] = static_cast<float>(numbers[2 * p]);
        split.ref_rejected[p] = static_cast<float>(numbers[2 * p + 1]);
    }
}

void ensure_precomputed(models::Llama& policy, Pairs& d, Split& split) {
    if (d.precompute && d.needs_reference() && split.ref_chosen.empty() && split.rows.pairs > 0)
        precompute(policy, d, split);
}

train::PreferenceLoss pair_loss(models::Llama& policy, Pairs& d, const Split& split, const data::PreferenceBatch& b) {
    if (!d.needs_reference()) return train::preference_loss(score(policy, b, d.packing), nullptr, d.loss);
    if (!split.ref_chosen.empty()) {
        const train::PairLogps mine = score(policy, b, d.packing);
        const train::PairLogps ref = stored_reference(split, b, mine);
        return train::preference_loss(mine, &ref, d.loss);
    }
    // The reference first, so its activations are gone before the policy's are kept for backward.
    const train::PairLogps ref = live_reference(policy, d, b);
    return train::preference_loss(score(policy, b, d.packing), &ref, d.loss);
}

MicroResult train_step(models::LanguageModel& model, Pairs& d, const StepInfo&) {
    auto& policy = dynamic_cast<models::Llama&>(model);
    ensure_precomputed(policy, d, d.train);
    const data::PreferenceBatch b = d.batches().next();
    const train::PreferenceLoss out = pair_loss(policy, d, d.train, b);
    out.loss.backward();
    return {out.loss.item(), static_cast<long>(b.rows.real_tokens), out.metrics};
}

// The held-out pairs (all, or eval_batches x batch packs): the mean loss, reward accuracy and margin per pair.
Metrics validate(models::LanguageModel& model, Pairs& d) {
    if (d.validation.rows.packs() == 0) return {};
    auto& policy = dynamic_cast<models::Llama&>(model);
    ensure_precomputed(policy, d, d.validation);
    const std::int64_t packs = std::min<std::int64_t>(d.validation.rows.packs(), d.eval_batches * d.batch);
    const auto [lo, hi] = dist::Backend::chunk(packs, dist::world_size(), dist::rank());
    dist::SampleMeans means({"val_loss", "val_rewards/accuracies", "val_rewards/margins"});
    autograd::InferenceMode inference;
    const bool was_training = model.training();
    model.eval();
    for (std::int64_t first = lo; first < hi; first += d.batch) {
        std::vector<std::int64_t> which;
        for (std::int64_t p = first; p < std::min(hi, first + d.batch); ++p) which.push_back(p);
        const data::PreferenceBatch b = data::packs_at(d.validation.rows, which);
        const train::PreferenceLoss out = pair_loss(policy, d, d.validation, b);
        const auto n = static_cast<double>(b.pair.size());
        means.add("val_loss", out.loss.item() * n, n);
        means.add("val_rewards/accuracies", out.metrics.at("rewards/accuracies") * n, n);
        means.add("val_rewards/margins", out.metrics.at("rewards/margins") * n, n);
    }
    model.train(was_training);
    return means.means();
}

Result save(models::LanguageModel& model, Pairs& d, const LoopResult&, const Config& cfg) {
    d.reference.reset();  // its memory back before the merged model is written
    return recipes::save_hf_tuned(model, d.model_dir, d.lora, cfg.run().dir, cfg[recipes::gguf],
                                  recipes::save_quantized_spec(cfg));
}

}  // namespace

LEVERS_RECIPE(dpo) {
    return levers::recipe("dpo")
        .describe("preference tuning of a HF model on pairs of answers (JSON lines): DPO, IPO or SimPO, the "
                  "reference the LoRA base or a frozen copy; saves a HF directory and the PEFT adapter")
        .training({.steps = 200, .lr = 5e-5, .warmup = 10, .log_every = 10, .checkpoint_every = 100,
                   .batch_size = 4, .seed = 1337, .eval_every = 50})
        .lora({})
        .activation_checkpointing()
        .params(model_dir, data_file, context, packing, loss_name, beta, label_smoothing, simpo_gamma, precompute_ref,
                ref_model, val_fraction, recipes::eval_batches.with_default(8), recipes::gguf)
        .check(check)
        .model([](const Config& cfg) { return recipes::load_hf_for_tuning(cfg, model_path(cfg).string()); })
        .data(load_pairs)
        .step(train_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) { o.unit = "tok"; })
        .evaluate(validate)
        .evaluate_at_start()
        .finish(save);
}

}  // namespace levers_recipe_dpo
