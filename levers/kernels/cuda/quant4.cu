// 4-bit weights on the GPU (levers/kernels/quant4.hpp): a thread per block
// of values quantizes it; a thread per output value dequantizes, with the
// same maths as the CPU (the tables passed by value, the double-quantized
// absmax rounded after each step), so both give the same bits.
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/quant4.hpp"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

struct Code16 {
    float v[16];
};
struct Dynamic256 {
    float v[256];
};

__global__ void quantize_kernel(std::uint8_t* codes, float* absmax, const float* in, index_t n, index_t bs,
                                SortedCode<16> s) {
    const index_t b = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    const index_t i0 = b * bs;
    if (i0 >= n) return;
    const index_t i1 = i0 + bs < n ? i0 + bs : n;  // blocks hold whole bytes (an even size): a thread owns its bytes
    absmax[b] = quantize_block(in, i0, i1, i1 - i0 < bs, s, [&](index_t i, unsigned q) { put_code4(codes, i, q); });
}

void quantize_call(const Quantize4Call& c) {
    const index_t n = c.in.numel(), blocks = (n + c.blocksize - 1) / c.blocksize;  // an even size: the op checks
    if (n <= 0) return;
    LEVERS_LAUNCH(quantize_kernel<<<blocks_for(blocks, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<std::uint8_t>(c.codes), ptr<float>(c.absmax), ptr<const float>(c.in), n, c.blocksize,
        sorted(code_of(c.type))));
}
LEVERS_KERNEL(Quantize4Call, cuda, f32, quantize_call);

template <class S>
__global__ void dequantize_kernel(S* out, index_t rows, index_t cols, const std::uint8_t* codes, const float* absmax,
                                  const std::uint8_t* absmax_codes, const float* nested, float offset, index_t bs,
                                  index_t row_len, index_t row0, index_t col0, Code16 code, Dynamic256 dynamic) {
    const index_t k = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (k >= rows * cols) return;
    const index_t i = (row0 + k / cols) * row_len + col0 + k % cols, b = i / bs;
    const float scale = absmax_codes ? double_quant_absmax(dynamic.v[absmax_codes[b]], nested[b / kNestedBlock], offset)
                                     : absmax[b];
    const std::uint8_t byte = codes[i / 2];
    out[k] = store<S>(static_cast<acc_t<S>>(code.v[i % 2 ? byte & 0xf : byte >> 4] * scale));
}

template <class S> void dequantize_call(const Dequantize4Call& c) {
    const index_t rows = c.out.shape[0], cols = c.out.shape[1];
    if (rows * cols <= 0) return;
    Code16 code{};
    for (int k = 0; k < 16; ++k) code.v[k] = code_of(c.type)[k];
    Dynamic256 dynamic{};
    for (int k = 0; k < 256; ++k) dynamic.v[k] = kDynamicMap[k];
    LEVERS_LAUNCH(dequantize_kernel<S><<<blocks_for(rows * cols, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<S>(c.out), rows, cols, ptr<const std::uint8_t>(c.codes), ptr<const float>(c.absmax),
        ptr<const std::uint8_t>(c.absmax_codes), ptr<const float>(c.nested_absmax), c.offset, c.blocksize, c.row_len,
        c.row0, c.col0, code, dynamic));
}
LEVERS_CUDA_KERNELS(Dequantize4Call, dequantize_call);

}  // namespace

}  // namespace levers::kernels::cuda
