// Where `recipe run` computes: --device auto|cpu|cuda against what this build
// and node have, and which CUDA runtime index a card of the node's ledger is.
#pragma once

#include <string>

namespace levers {

// "cpu" or "cuda". auto: cuda where this build has CUDA and a card is
// visible. Throws levers::Error (exit 2) for cuda without either, naming
// which is missing, and for `ranks` more than the visible cards.
std::string resolve_device(const std::string& flag, int ranks);

// The CUDA runtime's index, under this process's CUDA_VISIBLE_DEVICES, of the
// node's card `card` (a physical index, as the card ledger hands out).
int runtime_index(int card);

}  // namespace levers
