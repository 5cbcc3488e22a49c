#include "levers/data/half.hpp"

#include <bit>
#include <cmath>

namespace levers::data {

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            int e = -1;
            std::uint32_t m = mant;
            do {
                ++e;
                m <<= 1;
            } while ((m & 0x400u) == 0);
            bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    return std::bit_cast<float>(bits);
}


std::uint16_t float_to_half(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);  // inf, NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504
    if (abs < 0x38800000u) {  // below the smallest normal half: a subnormal (or zero)
        const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // 2^24: units of the smallest subnormal
        return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
    }
    const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // to nearest even at bit 13
    return sign | static_cast<std::uint16_t>((rounded - 0x38000000u) >> 13);
}

}  // namespace levers::data
