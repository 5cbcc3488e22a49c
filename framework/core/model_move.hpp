// What the models' to_device(Device, DType) share: whether a model whose
// parameters (of dtype `params`) live on `from` and compute in `current` has
// to move to `to` and compute in `compute` there.
#pragma once

#include "framework/core/device.hpp"
#include "framework/core/dtype.hpp"

namespace levers {

// False where nothing moves: the CPU, where every model starts, or the card
// it is on already. Throws levers::Error, naming `model` ("a GPT"), for what
// no model can do: come back from a card, switch precision in place, bf16 on
// the CPU, a card computing in other than f32 or bf16, any card in a build
// without CUDA, a card for parameters other than f32.
bool needs_move_to_card(const char* model, Device from, DType current, Device to, DType compute, DType params);

}  // namespace levers
