// 4-bit weights on the CPU (levers/kernels/quant4.hpp): quantizing a block at
// a time; dequantizing a run of each row a block at a time, through the
// block's 16 values (code · absmax, the same products the definition makes)
// looked up by nibble.
#include "levers/kernels/quant4.hpp"

#include <algorithm>
#include <vector>

namespace levers::kernels::cpu {

namespace {

void quantize_4bit(const Quantize4Call& c) {
    const float* in = c.in.as<float>();
    std::uint8_t* codes = c.codes.as<std::uint8_t>();
    float* absmax = c.absmax.as<float>();
    const index_t n = c.in.numel(), bs = c.blocksize, blocks = (n + bs - 1) / bs;
    const SortedCode<16> s = sorted(code_of(c.type));
    // Blocks are an even size (the op checks): each holds whole bytes, so blocks go in parallel.
#pragma omp parallel for schedule(static) if (n > 65536)
    for (index_t b = 0; b < blocks; ++b) {
        const index_t i0 = b * bs, i1 = std::min(n, i0 + bs);
        absmax[b] = quantize_block(in, i0, i1, i1 - i0 < bs, s, [&](index_t i, unsigned q) { put_code4(codes, i, q); });
    }
}
LEVERS_KERNEL(Quantize4Call, cpu, f32, quantize_4bit);

// One run of the weight, flat elements [i, i + count), into out.
// `absmax` holds the scales of blocks from `first` on.
template <class T>
void dequantize_run(T* out, const std::uint8_t* codes, const float* absmax, index_t first,
                    const std::array<float, 16>& code, index_t bs, index_t i, index_t count) {
    const index_t end = i + count;
    while (i < end) {
        const index_t b = i / bs, stop = std::min(end, (b + 1) * bs);
        float v[16];
        for (int k = 0; k < 16; ++k) v[k] = code[k] * absmax[b - first];
        if (i % 2 && i < stop) *out++ = static_cast<T>(v[codes[i++ / 2] & 0xf]);
        for (; i + 1 < stop; i += 2) {
            const std::uint8_t byte = codes[i / 2];
            out[0] = static_cast<T>(v[byte >> 4]);
            out[1] = static_cast<T>(v[byte & 0xf]);
            out += 2;
        }
        if (i < stop) *out++ = static_cast<T>(v[codes[i++ / 2] >> 4]);
    }
}

template <class T> void dequantize_4bit(const Dequantize4Call& c) {
    const index_t rows = c.out.shape[0], cols = c.out.shape[1], bs = c.blocksize;
    // The absmax this rectangle reads, double quantization undone once.
    const index_t first = (c.row0 * c.row_len + c.col0) / bs;
    const index_t last = ((c.row0 + rows - 1) * c.row_len + c.col0 + cols - 1) / bs;
    std::vector<float> scales(static_cast<std::size_t>(last + 1 - first));
    absmax_values(scales.data(), c, first, last + 1 - first);
    T* out = c.out.as<T>();
    const std::uint8_t* codes = c.codes.as<std::uint8_t>();
    const auto& code = code_of(c.type);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (index_t r = 0; r < rows; ++r)
        dequantize_run(out + r * cols, codes, scales.data(), first, code, bs, (c.row0 + r) * c.row_len + c.col0, cols);
}
LEVERS_KERNEL(Dequantize4Call, cpu, f32, dequantize_4bit<float>);
LEVERS_KERNEL(Dequantize4Call, cpu, f64, dequantize_4bit<double>);

}  // namespace

void absmax_values(float* out, const Dequantize4Call& c, std::int64_t first, std::int64_t count) {
    if (!c.absmax_codes.defined()) {
        std::copy_n(c.absmax.as<float>() + first, count, out);
        return;
    }
    const std::uint8_t* q = c.absmax_codes.as<std::uint8_t>();
    const float* nested = c.nested_absmax.as<float>();
    for (std::int64_t b = first; b < first + count; ++b)
        out[b - first] = double_quant_absmax(kDynamicMap[q[b]], nested[b / kNestedBlock], c.offset);
}

}  // namespace levers::kernels::cpu
