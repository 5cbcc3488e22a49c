// What the recipes that train a language model on windows of a text share
// (pretrain, pretrain_llama, fine_tune): the tokenized text and where
// training is in it, the step, the validation loss, and pretraining's finish
// (the whole split scored, a sample written).
#pragma once

#include "levers/data/text_corpus.hpp"
#include "levers/data/token_windows.hpp"
#include "levers/models/language_model.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/lm_params.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace levers::recipes {

// A data position made at the first step, once the model is built (a
// model's context may be known only then); a resumed position is held until
// then. Batches: save_state(), load_state(json).
template <class Batches> class Position {
public:
    template <class Make> Batches& get(Make make) {
        if (!batches_) {
            batches_.emplace(make());
            if (!resumed_.is_null()) batches_->load_state(resumed_);
        }
        return *batches_;
    }
    bool made() const { return batches_.has_value(); }
    const Batches& made_batches() const { return *batches_; }
    nlohmann::json save_state() const { return batches_ ? batches_->save_state() : resumed_; }
    void load_state(const nlohmann::json& j) {
        resumed_ = j;
        if (batches_) batches_->load_state(j);
    }

private:
    std::optional<Batches> batches_;
    nlohmann::json resumed_;
};

// A tokenized text split into training and validation, drawn in windows of
// `context` tokens, batch windows per rank (rank_batch) at seeded starts.
struct TextWindows {
    data::TextCorpus corpus;
    std::int64_t batch = 0, context = 0;  // context 0: the model's, known at the first step
    std::uint64_t seed = 0;
    long eval_batches = 0;
    Position<data::TokenWindows> position;

    data::TokenWindows& windows(const models::LanguageModel& model);
    nlohmann::json save_state() const { return position.save_state(); }
    void load_state(const nlohmann::json& j) { position.load_state(j); }
};

// The text's windows with the config's batch (rank_batch), seed (+1) and
// eval_batches; says what it read.
void init_text_windows(TextWindows& text, data::TextCorpus corpus, const Config& cfg, std::int64_t context);

// One micro-batch of windows: the mean next-token loss, backward.
MicroResult window_step(models::LanguageModel& model, TextWindows& text, const StepInfo&);
// The mean loss over validation windows (all of them when max_batches <= 0).
double validation_loss(models::LanguageModel& model, TextWindows& text, long max_batches);
// eval_batches of them: {"val_loss"}.
Metrics window_validation(models::LanguageModel& model, TextWindows& text);

// Pretraining's end: the whole validation split scored and said, a sample of
// sample_tokens from prompt (at temperature, among top_k; rank 0) through
// `codec`. The result's val_loss, tokens_per_second, parameters and sample.
Result finish_pretraining(models::LanguageModel& model, TextWindows& text, const LoopResult& run, const Config& cfg,
                          const models::TextCodec& codec, std::int64_t parameters);

}  // namespace levers::recipes
