// ggml's tensor types, as GGUF files store them: plain (f32, f16, bf16) and
// blockwise quantized. A quantized row is a run of blocks, each a fixed
// number of values with its own scales, laid out byte for byte as ggml's
// ggml-common.h defines them:
//   q8_0  32 values: f16 scale d, 32 int8 (x = d·q)
//   q4_0  32 values: f16 d, 16 bytes of nibbles (x = d·(q − 8))
//   q5_0  32 values: f16 d, 32 high bits, 16 bytes of nibbles (x = d·(q − 16))
//   q5_1  32 values: f16 d and m, high bits, nibbles (x = d·q + m)
//   q4_K  256 values in 8 sub-blocks of 32: f16 d and dmin, 12 bytes of
//         6-bit scales and mins, nibbles (x = d·sc·q − dmin·m)
//   q5_K  the same with a fifth bit per value
//   q6_K  256 values in 16 sub-blocks of 16: 6-bit q, int8 scales, f16 d (x = d·sc·(q − 32))
// The layouts are ggml's; how the scales are chosen is levers' own (a
// weighted least-squares fit per sub-block, then the scales quantized and
// the values rounded against the scales as stored).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace levers::data {

enum class GgmlType : std::uint32_t {
    f32 = 0, f16 = 1, q4_0 = 2, q5_0 = 6, q5_1 = 7, q8_0 = 8,
    q4_K = 12, q5_K = 13, q6_K = 14, bf16 = 30,
};

struct GgmlTypeInfo {
    GgmlType type;
    const char* name;         // ggml's: "q4_K", "f16", ...
    std::int64_t block;       // values per block
    std::size_t block_bytes;  // bytes per block
};

// The types levers reads and writes (nullptr for any other id, which a file may still hold).
const GgmlTypeInfo* ggml_type_info(GgmlType type);
// ggml's name, or "type N" for an id levers does not know.
std::string ggml_type_name(GgmlType type);
// By ggml's name, any case ("Q4_K" or "q4_k").
std::optional<GgmlType> ggml_type_named(std::string_view name);
// The bytes a row of `n` values takes (n a multiple of the type's block; throws otherwise).
std::size_t ggml_row_bytes(GgmlType type, std::int64_t n);

// One row of `n` values (a multiple of the block) to its blocks at `out`, and back.
void ggml_quantize_row(GgmlType type, const float* x, std::byte* out, std::int64_t n);
void ggml_dequantize_row(GgmlType type, const std::byte* in, float* y, std::int64_t n);

}  // namespace levers::data
