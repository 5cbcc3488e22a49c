// The language-model benchmarks' input: `rows` sequences of `length` real
// tokens (bench/book_ids.sh's ids, one after another) and their next tokens.
#pragma once

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/core/tensor.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace levers::bench {

inline std::pair<Tensor, Tensor> token_batch(const std::string& ids_file, std::int64_t rows, std::int64_t length) {
    const auto text = nlohmann::json::parse(read_file(ids_file)).get<std::vector<std::int32_t>>();
    LEVERS_CHECK(static_cast<std::int64_t>(text.size()) > rows * (length + 1), "--ids: {} ids, fewer than {}",
                 text.size(), rows * (length + 1) + 1);
    std::vector<std::int32_t> in, out;
    for (std::int64_t r = 0; r < rows; ++r) {
        in.insert(in.end(), text.begin() + r * (length + 1), text.begin() + r * (length + 1) + length);
        out.insert(out.end(), text.begin() + r * (length + 1) + 1, text.begin() + (r + 1) * (length + 1));
    }
    return {Tensor::from(in, {rows, length}), Tensor::from(out, {rows, length})};
}

}  // namespace levers::bench
