// 4-bit weights as bitsandbytes stores them (QLoRA's NF4, and FP4): the
// weight flattened row-major, cut in blocks of 64 values; each block scaled
// by its largest magnitude (absmax) into [-1, 1], each value replaced by the
// index of the nearest of 16 code values (a value on a midpoint takes the
// lower), two indices a byte, the first in the high nibble. With double
// quantization the blocks' absmax are held in 8 bits too: less their mean
// (the offset), in blocks of 256 against the 256-value signed dynamic map,
// each of those blocks with an f32 absmax of its own.
//
// The offset is the absmax' mean rounded once from their exact sum;
// bitsandbytes takes PyTorch's f32 mean, summed in an order that depends on
// the device and its vector width, so the two may differ in the last bit
// (and the nested absmax with it).
//
// Dequantizing is code[index] · absmax in f32, rounded once to the output's
// dtype (a double-quantized absmax is dynamic[code] · nested absmax, then +
// offset, each rounded: never one fused multiply-add), so the CPU and a GPU
// give the same bits. The tables are bitsandbytes' values (checked against
// them by tests/reference/quant4.py).
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"
#include "levers/kernels/quant4_tables.hpp"

#include <array>
#include <cstdint>
#include <utility>

namespace levers {

enum class Quant4Type : std::uint8_t { nf4, fp4 };

// "quantize_4bit" (dtype f32): codes [ceil(n / 2)] u8 and absmax [ceil(n / blocksize)] f32 of in [n].
struct Quantize4Call : KernelCallBase {
    static constexpr const char* kName = "quantize_4bit";
    TensorArg codes, absmax, in;
    Quant4Type type = Quant4Type::nf4;
    std::int64_t blocksize = 64;
};
// "dequantize_4bit" (dtype: out's): out [rows, cols] = the values at rows row0.., columns col0.. of the
// weight (rows `row_len` long) whose codes and scales these are. Without double quantization absmax is
// f32 [blocks]; with it, absmax_codes u8 [blocks], nested_absmax f32 [ceil(blocks / 256)] and offset.
struct Dequantize4Call : KernelCallBase {
    static constexpr const char* kName = "dequantize_4bit";
    TensorArg out, codes, absmax, absmax_codes, nested_absmax;
    float offset = 0;
    Quant4Type type = Quant4Type::nf4;
    std::int64_t blocksize = 64, row_len = 0, row0 = 0, col0 = 0;
};

namespace kernels {

inline const std::array<float, 16>& code_of(Quant4Type t) { return t == Quant4Type::nf4 ? kNf4Code : kFp4Code; }
// Blocks of the absmax' own quantization.
inline constexpr std::int64_t kNestedBlock = 256;

// A code's values sorted, with the midpoints between neighbours and the index each sorted place stands for
// (NF4 is sorted already; FP4's indices are sign-and-magnitude). What quantizing searches.
template <std::size_t N> struct SortedCode {
    float mid[N - 1];
    std::uint8_t index[N];
};
template <std::size_t N> SortedCode<N> sorted(const std::array<float, N>& code) {
    SortedCode<N> s{};
    for (std::size_t i = 0; i < N; ++i) s.index[i] = static_cast<std::uint8_t>(i);
    for (std::size_t i = 1; i < N; ++i)  // insertion sort: stable, so FP4's two zeros keep their order (0, then 8)
        for (std::size_t j = i; j > 0 && code[s.index[j - 1]] > code[s.index[j]]; --j) std::swap(s.index[j - 1], s.index[j]);
    for (std::size_t i = 0; i + 1 < N; ++i) s.mid[i] = (code[s.index[i]] + code[s.index[i + 1]]) / 2;
    return s;
}

// The place of x among the midpoints: how many are below it (torch.bucketize, ties to the lower).
template <std::size_t N> LEVERS_HD int bucket(const SortedCode<N>& s, float x) {
    int lo = 0, hi = static_cast<int>(N) - 1;
    while (lo < hi) {
        const int m = (lo + hi) / 2;
        if (s.mid[m] < x) lo = m + 1;
        else hi = m;
    }
    return lo;
}

// Below this an absmax scales as this (bitsandbytes' clamp; an all-zero block stays zeros).
inline constexpr float kTinyAbsmax = 1e-38f;
// x scaled into [-1, 1] by its block: x · (1 / absmax) in full blocks, x / absmax in the last, short one.
LEVERS_HD float scale_into_block(float x, float absmax, bool short_block) {
    const float m = absmax < kTinyAbsmax ? kTinyAbsmax : absmax;
    if (absmax == 0) return 0;  // a flushed 1e-38 must not make 0 · inf
    const float s = short_block ? x / m : x * (1.0f / m);
    return s < -1.0f ? -1.0f : (s > 1.0f ? 1.0f : s);
}

// Block [i0, i1) of `in` quantized against `s`: each value's code handed to emit(i, code); returns the
// absmax bitsandbytes stores for it (a short last block's clamped). The CPU's and the GPU's 4-bit kernels
// and the host's 8-bit quantization of the absmax all quantize a block so.
template <std::size_t N, class Emit>
LEVERS_HD float quantize_block(const float* in, index_t i0, index_t i1, bool short_block, const SortedCode<N>& s,
                               Emit emit) {
    float m = 0;
    for (index_t i = i0; i < i1; ++i) {
        const float a = in[i] < 0 ? -in[i] : in[i];
        m = a > m ? a : m;
    }
    for (index_t i = i0; i < i1; ++i) emit(i, s.index[bucket(s, scale_into_block(in[i], m, short_block))]);
    return short_block && m < kTinyAbsmax ? kTinyAbsmax : m;
}

// Value i's 4-bit code into packed codes: two a byte, the first in the high nibble (the high one written
// first: it clears the low one, so an odd count's last byte is padded with code 0, as bitsandbytes pads).
LEVERS_HD void put_code4(std::uint8_t* codes, index_t i, unsigned code) {
    std::uint8_t& byte = codes[i / 2];
    byte = i % 2 ? static_cast<std::uint8_t>((byte & 0xf0) | code) : static_cast<std::uint8_t>(code << 4);
}

// dynamic[code] · nested + offset, rounded after each step as bitsandbytes computes it.
LEVERS_HD float double_quant_absmax(float dynamic_value, float nested, float offset) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(__fmul_rn(dynamic_value, nested), offset);
#else
    volatile float product = dynamic_value * nested;  // no contraction into an FMA
    return product + offset;
#endif
}

namespace cpu {
// The f32 absmax of blocks [first, first + count) of a Dequantize4Call's weight (double quantization undone).
void absmax_values(float* out, const Dequantize4Call& c, std::int64_t first, std::int64_t count);
}  // namespace cpu

}  // namespace kernels

}  // namespace levers

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

#include <memory>
#include <string_view>

namespace levers::ops {

std::string_view name_of(Quant4Type t);
// "nf4" or "fp4"; anything else is an error naming what was given and what would do.
Quant4Type quant4_type(std::string_view name, std::string_view where);

struct Quant4Spec {
    Quant4Type type = Quant4Type::nf4;
    bool double_quant = true;
    std::int64_t blocksize = 64;
};

// A weight held in 4 bits: its codes and scales, on one device.
struct Quantized4 {
    Quant4Type type = Quant4Type::nf4;
    Shape shape;  // the weight's
    std::int64_t blocksize = 64;
    Tensor codes;          // u8 [ceil(n / 2)]
    Tensor absmax;         // f32 [blocks], without double quantization
    Tensor absmax_codes;   // u8 [blocks], with it
    Tensor nested_absmax;  // f32 [ceil(blocks / 256)], with it
    float offset = 0;      // with it: the absmax' mean, taken out before quantizing them

    bool double_quant() const { return absmax_codes.defined(); }
    std::int64_t blocks() const;
    Device device() const { return codes.device(); }
    // The same on `device` (copies in memory of their own where it is another).
    Quantized4 to(Device device) const;
    // The same in memory of its own (Tensor::persistent) on `device`: a frozen
    // weight's codes and scales live as long as the model, and the pools, which
    // search a size's blocks for a free one, would hold tens of thousands of
    // them for a mixture of experts.
    Quantized4 persistent(Device device) const;
    // The bytes it holds (codes and scales).
    std::int64_t bytes() const;
};

// `weight` (f32, bf16 or f64, any shape, any device) quantized where it lives; the absmax' second
// quantization runs on the host (one value per 64 weights).
Quantized4 quantize_4bit(const Tensor& weight, const Quant4Spec& spec);
// The weight again, in `dtype`, on its device.
Tensor dequantize_4bit(const Quantized4& q, DType dtype);
// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of a 2-d weight, in `dtype`.
Tensor dequantize_4bit(const Quantized4& q, DType dtype, std::int64_t row0, std::int64_t rows, std::int64_t col0,
                       std::int64_t cols);

// in · weightᵀ + bias with a 4-bit weight [out_dim, in_dim]: the weight dequantized in the input's
// dtype in tiles of at most `tile_elements` values (kLinear4Tile, 4 MiB of f32, unless given), each
// feeding the matrix product at its full depth (forward: rows of the weight, backward: its columns),
// never whole where it is larger. Differentiable in `in` and `bias`; the weight is frozen.
inline constexpr std::int64_t kLinear4Tile = std::int64_t(1) << 20;
Tensor linear_4bit(const Tensor& in, std::shared_ptr<const Quantized4> weight, const Tensor& bias = Tensor(),
                   std::int64_t tile_elements = kLinear4Tile);
// The same with a LoRA adapter beside it (levers/kernels/lora.hpp): + scale · (in · aᵀ) · bᵀ, a [rank, in_dim]
// and b [out_dim, rank] differentiable too. QLoRA's layer.
Tensor lora_linear_4bit(const Tensor& in, std::shared_ptr<const Quantized4> weight, const Tensor& bias,
                        const Tensor& lora_a, const Tensor& lora_b, double scale,
                        std::int64_t tile_elements = kLinear4Tile);

}  // namespace levers::ops
#endif  // !__CUDACC__
