// The parameters the language-model recipes share, declared once.
#pragma once

#include "levers/recipe/param.hpp"

#include <string>

namespace levers::recipes {

inline const Param<long> eval_batches{"eval_batches", 16, "batches per validation pass", at_least(1)};
inline const Param<std::string> prompt{"prompt", "The", "text the sample starts from"};
inline const Param<int> sample_tokens{"sample_tokens", 40, "tokens to generate after training (0: none)", at_least(0)};
inline const Param<double> temperature{"temperature", 0.8, "sampling temperature (0: greedy, the likeliest token each "
                                       "time)", at_least(0)};
inline const Param<int> top_k{"top_k", 40, "sample among the k likeliest tokens (0: all)", at_least(0)};
inline const Param<double> top_p{"top_p", 1.0, "sample among the likeliest tokens whose probability reaches p (1: all)",
                                 between(0, 1)};
inline const Param<int> n_head{"n_head", 0, "attention heads of safetensors weights (0: from their metadata or "
                               "config.json)", at_least(0)};

}  // namespace levers::recipes
