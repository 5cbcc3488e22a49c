// IEEE half precision (f16) to and from f32, as safetensors' F16 and GGUF's
// f16 tensors and block scales store it.
#pragma once

#include <cstdint>

namespace levers::data {

float half_to_float(std::uint16_t h);
// Rounded to nearest even; out of range becomes infinity, NaN stays NaN.
std::uint16_t float_to_half(float f);

}  // namespace levers::data
