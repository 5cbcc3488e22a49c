#include "levers/models/batch_generate.hpp"

#include "levers/core/error.hpp"
#include "levers/kernels/indexing.hpp"

#include <algorithm>
#include <map>

namespace levers::models {

namespace {
// i32 [rows, queries]: the first position each query sees, the row's first token (its padding unseen); a padding
// query sees itself alone, so its outputs stay finite. The queries are the last of `held` positions.
Tensor first_seen(const std::vector<std::int64_t>& pad, std::int64_t queries, std::int64_t held) {
    std::vector<std::int32_t> starts;
    for (const std::int64_t p : pad)
        for (std::int64_t q = held - queries; q < held; ++q) starts.push_back(static_cast<std::int32_t>(std::min(p, q)));
    return Tensor::from(starts, {static_cast<std::int64_t>(pad.size()), queries});
}
}  // namespace

namespace {
template <class RngOf>
BatchGeneration generate_rows(Llama& model, const std::vector<std::vector<std::int32_t>>& prompts,
                              const SampleOptions& options, RngOf rng_of) {
    LEVERS_CHECK(!prompts.empty(), "batched generation needs at least one prompt");
    LEVERS_CHECK(options.max_new_tokens >= 0, "max_new_tokens must be >= 0, got {}", options.max_new_tokens);
    // Each distinct prompt is computed once (a GRPO group's completions share theirs), the longest setting the padding.
    std::map<std::vector<std::int32_t>, std::int32_t> distinct;
    std::vector<const std::vector<std::int32_t>*> unique;
    std::vector<std::int32_t> unique_of;
    std::int64_t longest = 0;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        LEVERS_CHECK(!prompts[i].empty(), "batched generation: prompt {} is empty (each needs a token at least)", i);
        const auto [at, fresh] = distinct.try_emplace(prompts[i], static_cast<std::int32_t>(unique.size()));
        if (fresh) unique.push_back(&prompts[i]);
        unique_of.push_back(at->second);
        longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(prompts[i].size()));
    }
    BatchGeneration out;
    out.completions.resize(prompts.size());
    out.stopped.assign(prompts.size(), false);
    if (options.max_new_tokens == 0) return out;
    autograd::InferenceMode inference;
    const bool was_training = model.training();
    model.eval();
    const auto vocab = static_cast<int>(model.vocab_size());
    LlamaCache cache = model.new_cache(longest + options.max_new_tokens);

    // The prompts, left-padded to one length (the padding any id: no query sees it).
    std::vector<std::int64_t> unique_pad;
    std::vector<std::int32_t> tokens;
    for (const auto* p : unique) {
        unique_pad.push_back(longest - static_cast<std::int64_t>(p->size()));
        tokens.insert(tokens.end(), static_cast<std::size_t>(unique_pad.back()), p->front());
        tokens.insert(tokens.end(), p->begin(), p->end());
    }
    const auto rows_of = [](const std::vector<std::int32_t>& v) { return Tensor::from(v, {static_cast<std::int64_t>(v.size())}); };
    const auto u = static_cast<std::int64_t>(unique.size());
    Tensor logits = model.next_logits(Tensor::from(tokens, {u, longest}), cache, first_seen(unique_pad, longest, longest));
    // Every prompt's row: its distinct prompt's cache and logits.
    cache.keep_rows(rows_of(unique_of));
    logits = ops::index_select(logits, 0, rows_of(unique_of).to(logits.device()));
    std::vector<std::int64_t> prompt_of, pad;  // the rows still going: which prompt each is, its padding
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        prompt_of.push_back(static_cast<std::int64_t>(i));
        pad.push_back(unique_pad[static_cast<std::size_t>(unique_of[i])]);
    }
    for (int n = 0;; ++n) {
        const Tensor host = logits.to(Device::cpu(), DType::f32).contiguous();
        std::vector<std::int32_t> next, keep;
        for (std::size_t r = 0; r < prompt_of.size(); ++r) {
            const auto i = static_cast<std::size_t>(prompt_of[r]);
            const std::int32_t token =
                sample_token(host.data<float>() + r * static_cast<std::size_t>(vocab), vocab, options, rng_of(i));
            out.completions[i].push_back(token);
            if (std::find(options.stop.begin(), options.stop.end(), token) != options.stop.end()) {
                out.stopped[i] = true;
                continue;
            }
            keep.push_back(static_cast<std::int32_t>(r));
            next.push_back(token);
        }
        if (keep.empty() || n + 1 == options.max_new_tokens) break;
        if (keep.size() < prompt_of.size()) {  // finished rows leave the batch
            cache.keep_rows(rows_of(keep));
            std::vector<std::int64_t> still, still_pad;
            for (const std::int32_t r : keep) {
                still.push_back(prompt_of[static_cast<std::size_t>(r)]);
                still_pad.push_back(pad[static_cast<std::size_t>(r)]);
            }
            prompt_of = std::move(still);
            pad = std::move(still_pad);
        }
        const auto rows = static_cast<std::int64_t>(prompt_of.size());
        out.row_steps += rows;
        logits = model.next_logits(Tensor::from(next, {rows, 1}), cache, first_seen(pad, 1, cache.length() + 1));
    }
    model.train(was_training);
    return out;
}
}  // namespace

BatchGeneration generate_batch(Llama& model, const std::vector<std::vector<std::int32_t>>& prompts,
                               const SampleOptions& options, Rng& rng) {
    return generate_rows(model, prompts, options, [&](std::size_t) -> Rng& { return rng; });
}

BatchGeneration generate_batch(Llama& model, const std::vector<std::vector<std::int32_t>>& prompts,
                               const SampleOptions& options, std::vector<Rng>& rngs) {
    LEVERS_CHECK(rngs.size() == prompts.size(), "batched generation: {} generators for {} prompts", rngs.size(),
                 prompts.size());
    return generate_rows(model, prompts, options, [&](std::size_t i) -> Rng& { return rngs[i]; });
}

}  // namespace levers::models
