#include "levers/data/sft_rows.hpp"

#include <nlohmann/json.hpp>

#include "levers/core/error.hpp"

#include <algorithm>

namespace levers::data {

std::int64_t SftRows::learned() const {
    std::int64_t n = 0;
    for (const std::int32_t t : targets) n += t != kIgnoredTarget;
    return n;
}

SftRows make_rows(const std::vector<SftExample>& examples, std::int64_t context, bool packing, TooLong too_long) {
    LEVERS_CHECK(context >= 1, "the context must be at least 1 position, got {}", context);
    SftRows out;
    out.context = context;
    std::int64_t used = context;  // positions filled in the current row (full: start a new one)
    std::int32_t document = 0;
    const auto pad_row = [&] {
        for (; used < context; ++used) {
            out.tokens.push_back(0);
            out.targets.push_back(kIgnoredTarget);
            out.documents.push_back(document);  // a document of its own: no example attends to it
            out.real.push_back(0);
        }
    };
    for (const SftExample& e : examples) {
        std::int64_t n = static_cast<std::int64_t>(e.ids.size()) - 1;  // positions: each token but the last predicts the next
        if (n > context) {
            if (too_long == TooLong::drop) {
                ++out.dropped;
                continue;
            }
            ++out.truncated;
            n = context;
        }
        bool learns = false;
        for (std::int64_t k = 1; k <= n; ++k) learns = learns || e.learned[static_cast<std::size_t>(k)];
        if (n < 1 || !learns) {
            ++out.dropped;
            continue;
        }
        if (!packing || used + n > context) {
            pad_row();
            used = 0;
            ++document;
        }
        for (std::int64_t k = 0; k < n; ++k) {
            const auto next = static_cast<std::size_t>(k + 1);
            out.tokens.push_back(e.ids[static_cast<std::size_t>(k)]);
            out.targets.push_back(e.learned[next] ? e.ids[next] : kIgnoredTarget);
            out.documents.push_back(document);
            out.real.push_back(1);
        }
        used += n;
        ++document;
    }
    pad_row();
    return out;
}

SftBatch rows_at(const SftRows& rows, const std::vector<std::int64_t>& which) {
    const std::int64_t t = rows.context, b = static_cast<std::int64_t>(which.size());
    std::vector<std::int32_t> tokens, targets, documents;
    std::int64_t real = 0;
    for (const std::int64_t r : which) {
        const auto from = static_cast<std::ptrdiff_t>(r * t), to = static_cast<std::ptrdiff_t>((r + 1) * t);
        real += std::count(rows.real.begin() + from, rows.real.begin() + to, 1);
        tokens.insert(tokens.end(), rows.tokens.begin() + from, rows.tokens.begin() + to);
        targets.insert(targets.end(), rows.targets.begin() + from, rows.targets.begin() + to);
        documents.insert(documents.end(), rows.documents.begin() + from, rows.documents.begin() + to);
    }
    return {Tensor::from(tokens, {b, t}), Tensor::from(targets, {b, t}), Tensor::from(documents, {b, t}), real};
}

SftBatches::SftBatches(const SftRows& rows, std::int64_t per_rank, std::uint64_t seed, int world, int rank)
    : rows_(rows), batcher_(rows.rows(), per_rank, seed, Batcher::Order::epochs, world, rank) {}

std::string repeated_rows_note(const SftRows& rows, std::int64_t per_rank, int world) {
    const std::int64_t step = per_rank * world;
    if (rows.rows() >= step) return "";
    return fmt::format("{} row{} of {} positions, fewer than a step's {} ({} per rank x {} rank{}): each step takes "
                       "them more than once, epoch after epoch (a smaller batch_size repeats them less)",
                       rows.rows(), rows.rows() == 1 ? "" : "s", rows.context, step, per_rank, world,
                       world == 1 ? "" : "s");
}

SftBatch SftBatches::next() { return rows_at(rows_, batcher_.next()); }

nlohmann::json SftBatches::save_state() const { return batcher_.save_state(); }
void SftBatches::load_state(const nlohmann::json& j) { batcher_.load_state(j); }

}  // namespace levers::data
