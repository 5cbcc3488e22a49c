// grpo: reinforcement learning with rewards a program checks (DeepSeekMath's
// GRPO, as TRL's GRPOTrainer defines it). Each step takes a batch of prompts
// (levers/data/prompt_data.hpp), samples num_generations answers to each
// together through the KV cache with the policy's own weights, scores them
// with the run's rewards (C++ functions, levers/train/rewards.hpp), gives
// each its advantage within its group and updates on the clipped objective
// (levers/train/grpo_loss.hpp), num_iterations times per generated batch.
// beta > 0 adds the KL to a reference: with LoRA the base with its adapters
// switched off, else a frozen copy or ref_model=DIR. On several ranks each
// generates and scores whole groups. Saves as sft does (model/, adapter/).
#include "levers/core/clock.hpp"
#include "levers/data/batcher.hpp"
#include "levers/data/sft_data.hpp"
#include "levers/distributed/context.hpp"
#include "levers/models/batch_generate.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/nn/lora.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/grpo_loss.hpp"
#include "recipes/hf_tuning.hpp"
#include "recipes/lm_params.hpp"
#include "recipes/rollouts.hpp"

#include <filesystem>
#include <optional>

namespace levers_recipe_grpo {

namespace {

using namespace levers;
namespace fs = std::filesystem;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory (Llama, Mistral, Qwen, SmolLM3, Gemma, "
                                   "Phi-3) with its tokenizer"};
const Param<std::string> prompts_file{"prompts", "", "the prompts: FILE.jsonl, one {\"prompt\": text or messages, ...} "
                                      "per line; the other fields are the rewards'"};
const Param<long> num_generations{"num_generations", 8, "answers sampled per prompt (a group)", at_least(2)};
const Param<long> max_completion_length{"max_completion_length", 256, "the most tokens an answer may have",
                                        at_least(1)};
const Param<double> temperature{"temperature", 1.0, "sampling temperature (> 0: a group needs different answers)"};
const Param<int> top_k{"top_k", 0, "sample among the k likeliest tokens (0: all)", at_least(0)};
const Param<double> top_p{"top_p", 1.0, "sample among the likeliest tokens whose probability reaches p (1: all)"};
const Param<std::string> loss_type{"loss_type", "dapo", "how tokens are averaged: grpo (per answer, then answers), "
                                   "dapo (over the step's tokens) or dr_grpo (over a fixed length)"};
const Param<double> epsilon{"epsilon", 0.2, "the ratio's clip below 1 (and above, without epsilon_high)"};
const Param<double> epsilon_high{"epsilon_high", 0.0, "the ratio's clip above 1 (DAPO's clip-higher; 0: epsilon)"};
const Param<double> beta{"beta", 0.0, "the KL penalty's weight (0: no reference at all)"};
const Param<long> num_iterations{"num_iterations", 1, "updates per generated batch (against the old policy's "
                                 "log-probabilities)", at_least(1)};
const Param<bool> scale_rewards{"scale_rewards", true, "divide advantages by the group's std (false: Dr. GRPO)"};
const Param<bool> mask_truncated{"mask_truncated_completions", false, "answers cut at the budget count for nothing"};
const Param<std::string> rewards_list{"rewards", "exact_match", "reward functions, comma-separated (shipped: "
                                      "exact_match, contains, regex, length_penalty; or a project's own)"};
const Param<std::string> reward_weights{"reward_weights", "", "their weights, comma-separated (default: 1 each)"};
const Param<std::string> answer_field{"answer_field", "answer", "the record's field(s) exact_match and contains "
                                      "check, comma-separated"};
const Param<std::string> reward_regex{"reward_regex", "", "the regex reward's PCRE2 pattern"};
const Param<long> length_buffer{"length_buffer", 0, "length_penalty: the budget's last tokens where it grows (0: a "
                                "quarter of max_completion_length)", at_least(0)};
const Param<std::string> ref_model{"ref_model", "", "the reference where beta > 0: another HF directory of the same "
                                   "architecture (default: the base, its adapters switched off with LoRA)"};

struct Grpo {
    data::PromptFile file;
    std::vector<recipes::WeightedReward> rewards;
    std::shared_ptr<const data::BpeTokenizer> tokenizer;
    models::SampleOptions sampling;
    train::GrpoLossOptions loss;
    std::int64_t batch = 0, group = 0, iterations = 1, grad_accum = 1;
    std::uint64_t seed = 0;
    bool mask_truncated = false, scale = true;
    std::string model_dir, ref_dir;
    models::LoraSettings lora;
    DType compute = DType::f32;
    std::unique_ptr<models::Llama> reference;  // a frozen model, where the reference is not the LoRA base
    std::optional<data::Batcher> batcher;
    // The step's rollouts (one per micro-batch), where they came from, and what their generation logged.
    std::vector<recipes::Rollout> rollouts;
    long generated_at = -1;
    std::int64_t round = 0;
    train::Metrics generation_metrics;
    double generate_s = 0, reference_s = 0;

    nlohmann::json save_state() const {
        nlohmann::json buffer = nlohmann::json::array();
        for (const auto& r : rollouts) buffer.push_back(r.to_json());
        return {{"batcher", batcher->save_state()}, {"round", round}, {"generated_at", generated_at},
                {"rollouts", buffer}, {"generation_metrics", generation_metrics}};
    }
    void load_state(const nlohmann::json& j) {
        batcher->load_state(j.at("batcher"));
        round = j.at("round");
        generated_at = j.at("generated_at");
        rollouts.clear();
        for (const auto& r : j.at("rollouts")) rollouts.push_back(recipes::Rollout::from_json(r));
        generation_metrics = j.at("generation_metrics").get<train::Metrics>();
    }
};

fs::path model_path(const Config& cfg) {
    const fs::path dir = cfg[model_dir];
    LEVERS_CHECK(!dir.empty(), "grpo needs --set model=DIR: a Hugging Face model directory (Llama, Mistral, Qwen, "
                 "SmolLM3, Gemma, Phi-3)");
    return dir;
}

std::vector<recipes::WeightedReward> make_rewards(const Config& cfg) {
    const std::vector<std::string> names = recipes::split_targets(cfg[rewards_list]);
    LEVERS_CHECK(!names.empty(), "--set rewards= names no reward; give e.g. exact_match");
    const std::vector<std::string> weights = recipes::split_targets(cfg[reward_weights]);
    LEVERS_CHECK(weights.empty() || weights.size() == names.size(), "--set reward_weights={} gives {} weights for "
                 "{} rewards ({})", cfg[reward_weights], weights.size(), names.size(), cfg[rewards_list]);
    const long budget = cfg[max_completion_length];
    const train::RewardSettings settings{.answer_fields = recipes::split_targets(cfg[answer_field]),
                                         .pattern = cfg[reward_regex],
                                         .max_tokens = budget,
                                         .length_buffer = cfg[length_buffer] > 0 ? cfg[length_buffer]
                                                                                 : std::max(1L, budget / 4)};
    std::vector<recipes::WeightedReward> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        double w = 1;
        if (!weights.empty()) {
            try {
                w = std::stod(weights[i]);
            } catch (const std::exception&) {
                LEVERS_FAIL("--set reward_weights={}: \"{}\" is not a number", cfg[reward_weights], weights[i]);
            }
        }
        out.push_back({names[i], w, train::make_reward(names[i], settings)});
    }
    return out;
}

std::unique_ptr<Grpo> prepare(const Config& cfg);

void check(const Config& cfg) {
    const fs::path dir = model_path(cfg);
    const models::LlamaConfig base = models::check_hf_dir(dir);
    models::check_hf_tokenizer(base, dir);
    LEVERS_CHECK(!cfg[prompts_file].empty(), "grpo needs --set prompts=FILE.jsonl: one {{\"prompt\": ...}} per line");
    train::grpo_loss_type(cfg[loss_type]);
    LEVERS_CHECK(cfg[temperature] > 0, "--set temperature={} must be positive (a group's answers must differ)",
                 cfg[temperature]);
    LEVERS_CHECK(cfg[top_p] > 0 && cfg[top_p] <= 1, "--set top_p={} must be in (0, 1]", cfg[top_p]);
    LEVERS_CHECK(cfg[epsilon] > 0 && cfg[epsilon] < 1, "--set epsilon={} must be in (0, 1)", cfg[epsilon]);
    LEVERS_CHECK(cfg[epsilon_high] >= 0, "--set epsilon_high={} must be >= 0 (0: epsilon's)", cfg[epsilon_high]);
    LEVERS_CHECK(cfg[beta] >= 0, "--set beta={} must be >= 0", cfg[beta]);
    if (const fs::path ref = cfg[ref_model]; !ref.empty()) {
        LEVERS_CHECK(cfg[beta] > 0, "--set ref_model={}: with beta=0 no reference is used (set beta > 0)", ref.string());
        const models::LlamaConfig other = models::check_hf_dir(ref);
        LEVERS_CHECK(other.model_type == base.model_type && other.vocab_size == base.vocab_size,
                     "--set ref_model={}: a {} of {} tokens cannot be the reference of a {} of {} tokens (the "
                     "reference scores the policy's tokens: the same architecture and vocabulary)", ref.string(),
                     other.model_type, other.vocab_size, base.model_type, base.vocab_size);
    }
    LEVERS_CHECK(cfg[max_completion_length] < base.max_position_embeddings, "--set max_completion_length={} leaves "
                 "no room for a prompt in the model's {} positions", cfg[max_completion_length],
                 base.max_position_embeddings);
    make_rewards(cfg);
    recipes::check_lora(cfg, dir);
    recipes::check_gguf(cfg, dir);
    prepare(cfg);  // the prompts read once here too, so a bad line stops the job before anything starts
}

std::unique_ptr<Grpo> prepare(const Config& cfg) {
    const fs::path dir = cfg[model_dir];
    const models::LlamaConfig config = models::read_llama_config(dir / "config.json");
    auto d = std::make_unique<Grpo>();
    d->tokenizer = models::hf_tokenizer(dir, config.vocab_size);
    const std::optional<data::ChatTemplate> chat = recipes::chat_template_of(dir);
    const long budget = cfg[max_completion_length];
    d->file = data::read_prompt_file(cfg[prompts_file], *d->tokenizer, chat ? &*chat : nullptr,
                                     config.max_position_embeddings - budget);
    d->rewards = make_rewards(cfg);
    d->sampling = {.max_new_tokens = static_cast<int>(budget), .temperature = cfg[temperature], .top_k = cfg[top_k],
                   .top_p = cfg[top_p]};
    d->sampling.stop.assign(config.eos_token_ids.begin(), config.eos_token_ids.end());
    if (chat)
        if (const auto end = d->tokenizer->token_id(data::end_of_turn(*d->tokenizer, *chat))) d->sampling.stop.push_back(*end);
    d->loss = {.type = train::grpo_loss_type(cfg[loss_type]), .epsilon = cfg[epsilon],
               .epsilon_high = cfg[epsilon_high] > 0 ? cfg[epsilon_high] : cfg[epsilon], .beta = cfg[beta],
               .max_completion_length = budget};
    d->batch = rank_batch(cfg);
    d->group = cfg[num_generations];
    d->iterations = cfg[num_iterations];
    d->grad_accum = cfg[settings::grad_accum];
    d->seed = cfg[settings::seed] + 1;
    d->mask_truncated = cfg[mask_truncated];
    d->scale = cfg[scale_rewards];
    d->model_dir = dir.string();
    d->lora = recipes::lora_settings(cfg);
    d->compute = cfg.run().compute;
    if (d->loss.beta > 0)
        d->ref_dir = !cfg[ref_model].empty() ? cfg[ref_model] : (cfg[settings::lora_r] == 0 ? d->model_dir : "");
    d->batcher.emplace(static_cast<std::int64_t>(d->file.prompts.size()), d->batch * d->grad_accum, d->seed,
                       data::Batcher::Order::epochs, dist::world_size(), dist::rank());
    return d;
}

std::unique_ptr<Grpo> load_prompts(const Config& cfg) {
    auto d = prepare(cfg);
    std::string reference = "none (beta 0)";
    if (d->loss.beta > 0) {
        reference = d->ref_dir.empty() ? "the base, its LoRA adapters switched off" : "a frozen " + d->ref_dir;
        if (!d->ref_dir.empty()) d->reference = models::load_hf_model(d->ref_dir, dist::device(), d->compute);
    }
    std::string names;
    for (const auto& r : d->rewards) names += fmt::format("{}{} x{}", names.empty() ? "" : ", ", r.name, r.weight);
    dist::print0("prompts {}: {} conversations, {} texts (the longest {} tokens); {} answers each, up to {} tokens\n",
                 cfg[prompts_file], d->file.conversations, d->file.texts, d->file.longest, d->group,
                 d->sampling.max_new_tokens);
    dist::print0("rewards: {}; loss {} (epsilon {}, {}; beta {}); reference: {}\n", names, cfg[loss_type],
                 d->loss.epsilon, d->loss.epsilon_high, d->loss.beta, reference);
    return d;
}

// Per completion token of `r`, log p under `model` (no gradients).
std::vector<float> scored(models::Llama& model, const recipes::Rollout& r, const recipes::RolloutRows& rows) {
    autograd::InferenceMode inference;
    return recipes::gather(model.token_logprobs(rows.tokens, rows.targets), r, rows);
}

// The step's rollouts: this rank's prompts for every micro-batch, all their answers generated together, scored,
// given advantages, and (where the update needs them) the old policy's and the reference's log-probabilities.
void generate(models::Llama& policy, Grpo& d, long step) {
    const auto started = Clock::now();
    const std::vector<std::int64_t> mine = d.batcher->next();  // batch x grad_accum prompts
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<Rng> rngs;
    // Each group's generators from its place in the step's global batch (this rank's slice starts at rank x
    // per_rank): the same draws on any number of ranks, and different ones for a prompt the step takes twice.
    const std::int64_t first = dist::rank() * d.batcher->per_rank();
    for (std::size_t i = 0; i < mine.size(); ++i)
        for (std::int64_t k = 0; k < d.group; ++k) {
            prompts.push_back(d.file.prompts[static_cast<std::size_t>(mine[i])].ids);
            rngs.push_back(recipes::completion_rng(d.seed, d.round, first + static_cast<std::int64_t>(i), k));
        }
    const models::BatchGeneration g = models::generate_batch(policy, prompts, d.sampling, rngs);
    ++d.round;
    d.generate_s = seconds_since(started);

    const auto ref_started = Clock::now();
    d.rollouts.assign(static_cast<std::size_t>(d.grad_accum), {});
    std::vector<std::vector<double>> rewards;
    std::vector<double> tokens = {0};  // dapo's: the tokens the loss counts, this rank's, then every rank's
    std::size_t at = 0;
    for (auto& r : d.rollouts) {
        for (std::int64_t n = 0; n < d.batch * d.group; ++n, ++at) {
            r.prompt.push_back(mine[at / static_cast<std::size_t>(d.group)]);
            r.completion.push_back(g.completions[at]);
            r.stopped.push_back(g.stopped[at]);
        }
        std::vector<std::string> texts;
        for (const auto& c : r.completion) {
            std::vector<std::int32_t> shown = c;
            if (!shown.empty() && std::find(d.sampling.stop.begin(), d.sampling.stop.end(), shown.back()) != d.sampling.stop.end())
                shown.pop_back();
            texts.push_back(d.tokenizer->decode(shown, true));
        }
        const auto scores = recipes::score(r, texts, d.file.prompts, d.rewards);
        r.advantage = train::group_advantages(recipes::total_rewards(scores, d.rewards), d.group, d.scale);
        rewards.insert(rewards.end(), scores.begin(), scores.end());
        const recipes::RolloutRows rows = recipes::rollout_rows(r, d.file.prompts, d.mask_truncated);
        for (const double m : rows.mask.values()) tokens[0] += m;
        if (d.iterations > 1) r.old_logps = scored(policy, r, rows);
        if (d.loss.beta > 0) {
            if (d.reference) {
                r.ref_logps = scored(*d.reference, r, rows);
            } else {
                nn::AdaptersOff base(policy);
                r.ref_logps = scored(policy, r, rows);
            }
        }
    }
    d.reference_s = seconds_since(ref_started);
    d.generation_metrics = recipes::rollout_metrics(rewards, d.rollouts, d.rewards, d.group);
    // dapo: the step's counted tokens over every rank, as each micro-batch's share.
    dist::all_reduce_sum(tokens);
    d.generation_metrics["dapo_tokens"] = tokens[0] / static_cast<double>(d.grad_accum * dist::world_size());
    d.generated_at = step;
}

MicroResult train_step(models::LanguageModel& model, Grpo& d, const StepInfo& info) {
    auto& policy = dynamic_cast<models::Llama&>(model);
    const bool fresh = info.micro == 0 && info.step % d.iterations == 0;
    if (fresh) generate(policy, d, info.step);
    LEVERS_CHECK(d.generated_at >= 0 && info.step - d.generated_at < d.iterations,
                 "grpo: step {} has no generated batch to update on (generated at step {})", info.step, d.generated_at);
    const auto started = Clock::now();
    const recipes::Rollout& r = d.rollouts[static_cast<std::size_t>(info.micro)];
    const recipes::RolloutRows rows = recipes::rollout_rows(r, d.file.prompts, d.mask_truncated);
    const Tensor logps = policy.token_logprobs(rows.tokens, rows.targets);
    std::optional<Tensor> old, ref;
    if (!r.old_logps.empty()) old = recipes::spread(r.old_logps, r, rows);
    if (!r.ref_logps.empty()) ref = recipes::spread(r.ref_logps, r, rows);
    train::GrpoLossOptions options = d.loss;
    options.dapo_tokens = d.generation_metrics.at("dapo_tokens");
    const Tensor advantages = Tensor::from(r.advantage, {r.size()}).to(DType::f32);
    const train::GrpoLoss out = train::grpo_loss(logps, old ? &*old : nullptr, ref ? &*ref : nullptr, advantages,
                                                 rows.mask, options);
    out.loss.backward();
    const double update_s = seconds_since(started);
    Metrics metrics = out.metrics;
    for (const auto& [name, value] : d.generation_metrics)
        if (name != "dapo_tokens") metrics[name] = value;
    // The step's time split (generation and the reference's scoring only in a step that generated). The loop
    // averages a step's micro-batches: each reports the step's generation and its own update times grad_accum.
    const bool generated = d.generated_at == info.step;
    const double gen = generated ? d.generate_s : 0, ref_time = generated ? d.reference_s : 0;
    const double update = update_s * static_cast<double>(d.grad_accum);
    metrics["time/generate_s"] = gen;
    metrics["time/reference_s"] = ref_time;
    metrics["time/update_s"] = update;
    metrics["time/generate_share"] = gen / (gen + ref_time + update);
    long tokens = 0;
    for (const auto& c : r.completion) tokens += static_cast<long>(c.size());
    return {out.loss.item(), tokens, metrics};
}

Result save(models::LanguageModel& model, Grpo& d, const LoopResult&, const Config& cfg) {
    d.reference.reset();  // its memory back before the merged model is written
    return recipes::save_hf_tuned(model, d.model_dir, d.lora, cfg.run().dir, cfg[recipes::gguf],
                                  recipes::save_quantized_spec(cfg));
}

}  // namespace

LEVERS_RECIPE(grpo) {
    return levers::recipe("grpo")
        .describe("reinforcement learning of a HF model with rewards a program checks (GRPO): answers sampled in "
                  "groups through the KV cache, scored by C++ rewards; saves a HF directory and the PEFT adapter")
        .training({.steps = 100, .lr = 1e-5, .warmup = 0, .log_every = 1, .checkpoint_every = 50, .batch_size = 2,
                   .seed = 1337})
        .lora({})
        .activation_checkpointing()
        .params(model_dir, prompts_file, num_generations, max_completion_length, temperature, top_k, top_p, loss_type,
                epsilon, epsilon_high, beta, num_iterations, scale_rewards, mask_truncated, rewards_list,
                reward_weights, answer_field, reward_regex, length_buffer, ref_model, recipes::gguf)
        .check(check)
        .model([](const Config& cfg) { return recipes::load_hf_for_tuning(cfg, model_path(cfg).string()); })
        .data(load_prompts)
        .step(train_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) { o.unit = "tok"; })
        .finish(save);
}

}  // namespace levers_recipe_grpo
