// Element types a tensor can hold. f64 exists for gradient checks; bf16 is
// computed on GPUs only (storage only, fp32 accumulation); i32 holds token
// ids and indices; boolean (one byte, 0 or 1) holds masks; u8 holds packed
// codes (4-bit weights, two a byte), stored and moved, never computed. No fmt here.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace levers {

enum class DType : std::uint8_t { f32, f64, bf16, i32, boolean, u8 };
inline constexpr int kDTypes = 6;

constexpr std::size_t size_of(DType t) {
    switch (t) {
        case DType::f32: return 4;
        case DType::f64: return 8;
        case DType::bf16: return 2;
        case DType::i32: return 4;
        case DType::boolean: return 1;
        case DType::u8: return 1;
    }
    return 0;
}

constexpr std::string_view name_of(DType t) {
    switch (t) {
        case DType::f32: return "f32";
        case DType::f64: return "f64";
        case DType::bf16: return "bf16";
        case DType::i32: return "i32";
        case DType::boolean: return "bool";
        case DType::u8: return "u8";
    }
    return "?";
}

// A bf16 value (its 16 bits) as f32: bf16 is an f32's high half.
inline float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
// f32 to bf16 bits, rounded to nearest even (NaN stays NaN).
inline std::uint16_t float_to_bf16(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// dtype_of<T>: the DType tag of a C++ element type.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }
// Whether a dtype holds real numbers (f32, f64, bf16).
constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

}  // namespace levers
