#include "levers/data/ggml_quants.hpp"

#include "levers/core/dtype.hpp"
#include "levers/core/error.hpp"
#include "levers/data/half.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>

namespace levers::data {

namespace {

constexpr std::int64_t kSuper = 256;  // values per K-quant block

constexpr std::array<GgmlTypeInfo, 10> kTypes{{
    {GgmlType::f32, "f32", 1, 4},
    {GgmlType::f16, "f16", 1, 2},
    {GgmlType::bf16, "bf16", 1, 2},
    {GgmlType::q8_0, "q8_0", 32, 34},
    {GgmlType::q4_0, "q4_0", 32, 18},
    {GgmlType::q5_0, "q5_0", 32, 22},
    {GgmlType::q5_1, "q5_1", 32, 24},
    {GgmlType::q4_K, "q4_K", kSuper, 144},
    {GgmlType::q5_K, "q5_K", kSuper, 176},
    {GgmlType::q6_K, "q6_K", kSuper, 210},
}};

std::uint16_t load16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
void store16(std::byte* p, std::uint16_t v) { std::memcpy(p, &v, 2); }
float load_half(const std::byte* p) { return half_to_float(load16(p)); }
// Stores `v` as f16 and returns the value stored, which the levels are rounded against.
float store_half(std::byte* p, float v) {
    const std::uint16_t h = float_to_half(v);
    store16(p, h);
    return half_to_float(h);
}
std::uint8_t* bytes(std::byte* p) { return reinterpret_cast<std::uint8_t*>(p); }
const std::uint8_t* bytes(const std::byte* p) { return reinterpret_cast<const std::uint8_t*>(p); }

int nearest(float v) { return static_cast<int>(std::nearbyint(v)); }

// The value of largest magnitude, with its sign.
float signed_peak(const float* x, int n) {
    float peak = 0, amax = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(peak = x[i]);
    return peak;
}

// ---- 32-value blocks: one scale from the block's extremes, as the format defines it.

void quantize_q8_0(const float* x, std::byte* b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    store_half(b, d);
    auto* q = reinterpret_cast<std::int8_t*>(b + 2);
    for (int i = 0; i < 32; ++i) q[i] = static_cast<std::int8_t>(nearest(x[i] * id));
}
void dequantize_q8_0(const std::byte* b, float* y) {
    const float d = load_half(b);
    const auto* q = reinterpret_cast<const std::int8_t*>(b + 2);
    for (int i = 0; i < 32; ++i) y[i] = d * q[i];
}

// q4_0 and q5_0: the peak maps to the most negative level (−8 or −16), so the
// other sign gets the one level fewer. Value j and j + 16 share a byte.
template <int kBits>
void quantize_symmetric_32(const float* x, std::byte* b) {
    constexpr int half_range = 1 << (kBits - 1), top = (1 << kBits) - 1;
    const float d = signed_peak(x, 32) / -half_range, id = d != 0 ? 1 / d : 0;
    store_half(b, d);
    std::uint32_t high = 0;
    std::uint8_t* qs = bytes(b) + (kBits == 5 ? 6 : 2);
    for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(top, static_cast<int>(x[j] * id + half_range + 0.5f));
        const int q1 = std::min(top, static_cast<int>(x[j + 16] * id + half_range + 0.5f));
        qs[j] = static_cast<std::uint8_t>((q0 & 0xf) | (q1 & 0xf) << 4);
        high |= static_cast<std::uint32_t>(q0 >> 4 & 1) << j | static_cast<std::uint32_t>(q1 >> 4 & 1) << (j + 16);
    }
    if constexpr (kBits == 5) std::memcpy(b + 2, &high, 4);
}
template <int kBits>
void dequantize_symmetric_32(const std::byte* b, float* y) {
    constexpr int half_range = 1 << (kBits - 1);
    const float d = load_half(b);
    std::uint32_t high = 0;
    if constexpr (kBits == 5) std::memcpy(&high, b + 2, 4);
    const std::uint8_t* qs = bytes(b) + (kBits == 5 ? 6 : 2);
    for (int j = 0; j < 16; ++j) {
        const int q0 = (qs[j] & 0xf) | static_cast<int>(high >> j & 1) << 4;
        const int q1 = (qs[j] >> 4) | static_cast<int>(high >> (j + 16) & 1) << 4;
        y[j] = d * (q0 - half_range);
        y[j + 16] = d * (q1 - half_range);
    }
}

// q5_1: the block's range in 32 levels from its minimum.
void quantize_q5_1(const float* x, std::byte* b) {
    const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
    const float d = (hi - lo) / 31, id = d != 0 ? 1 / d : 0;
    store_half(b, d);
    store_half(b + 2, lo);
    std::uint32_t high = 0;
    std::uint8_t* qs = bytes(b) + 8;
    for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
        const int q1 = std::min(31, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
        qs[j] = static_cast<std::uint8_t>((q0 & 0xf) | (q1 & 0xf) << 4);
        high |= static_cast<std::uint32_t>(q0 >> 4 & 1) << j | static_cast<std::uint32_t>(q1 >> 4 & 1) << (j + 16);
    }
    std::memcpy(b + 4, &high, 4);
}
void dequantize_q5_1(const std::byte* b, float* y) {
    const float d = load_half(b), m = load_half(b + 2);
    std::uint32_t high;
    std::memcpy(&high, b + 4, 4);
    const std::uint8_t* qs = bytes(b) + 8;
    for (int j = 0; j < 16; ++j) {
        y[j] = d * ((qs[j] & 0xf) | static_cast<int>(high >> j & 1) << 4) + m;
        y[j + 16] = d * ((qs[j] >> 4) | static_cast<int>(high >> (j + 16) & 1) << 4) + m;
    }
}

// ---- K-quants: a scale (and for q4_K/q5_K an offset) per sub-block, fitted
// by weighted least squares over a few candidate level spacings; large
// values weigh more (|x| plus the sub-block's RMS), as they matter more to
// a layer's output.

void weights_of(const float* x, int n, float* w) {
    float sum_sq = 0;
    for (int i = 0; i < n; ++i) sum_sq += x[i] * x[i];
    const float rms = std::sqrt(sum_sq / static_cast<float>(n));
    for (int i = 0; i < n; ++i) w[i] = rms + std::fabs(x[i]);
}

struct Affine {
    float scale = 0, offset = 0;  // x ≈ scale·q − offset, offset ≥ 0
};

// Rounds to the nearest integer (ties to even) in float arithmetic, for
// |v| < 2^22: adding 1.5·2^23 leaves no bits below the point. Unlike
// nearbyint, a loop of it vectorises.
float round_even(float v) {
    constexpr float kShift = 12582912.f;
    return (v + kShift) - kShift;
}
float clamp_level(float q, float lo, float hi) { return std::min(std::max(q, lo), hi); }

// The candidates are searched side by side: each loop over a sub-block's
// values runs an inner loop across candidates, which vectorises (a loop of
// sums over 32 values would not, without reassociating floats). Float sums
// over 32 values are exact enough; each candidate's 2x2 solve is in double.
// 32 candidates, level counts top (or half) + 0.1·(−16..15) across the range:
// a whole number of vectors of 8 or 16 floats, so no lane is left to scalar code.
constexpr int kSteps = 32;
float spacing_step(int c) { return 0.1f * static_cast<float>(c - kSteps / 2); }

// q ∈ [0, top], the offset kept ≥ 0 (the format stores it unsigned).
Affine fit_affine(const float* x, const float* w, int n, int top) {
    const float lo = std::min(0.f, *std::min_element(x, x + n));
    const float hi = *std::max_element(x, x + n);
    if (hi <= lo) return {0, -lo};
    const float ftop = static_cast<float>(top);
    std::array<float, kSteps> inv{}, sq{}, sqq{}, sqx{};
    for (int c = 0; c < kSteps; ++c) inv[c] = (ftop + spacing_step(c)) / (hi - lo);
    float sw = 0, sx = 0;
    for (int i = 0; i < n; ++i) {
        const float wi = w[i], xi = x[i], u = xi - lo;
        sw += wi, sx += wi * xi;
        for (int c = 0; c < kSteps; ++c) {
            const float q = clamp_level(round_even(inv[c] * u), 0.f, ftop);
            sq[c] += wi * q, sqq[c] += wi * q * q, sqx[c] += wi * q * xi;
        }
    }
    std::array<float, kSteps> scale{}, shift{}, rscale{}, err{};  // x ≈ scale·q + shift
    for (int c = 0; c < kSteps; ++c) {
        const double det = double{sw} * sqq[c] - double{sq[c]} * sq[c];
        if (det <= 0) continue;
        double s = (double{sw} * sqx[c] - double{sq[c]} * sx) / det;
        double m = (double{sqq[c]} * sx - double{sq[c]} * sqx[c]) / det;
        if (m > 0) m = 0, s = double{sqx[c]} / sqq[c];
        if (s <= 0) continue;
        scale[c] = static_cast<float>(s), shift[c] = static_cast<float>(m), rscale[c] = static_cast<float>(1 / s);
    }
    for (int i = 0; i < n; ++i) {
        const float wi = w[i], xi = x[i];
        for (int c = 0; c < kSteps; ++c) {
            const float q = clamp_level(round_even((xi - shift[c]) * rscale[c]), 0.f, ftop);
            const float e = scale[c] * q + shift[c] - xi;
            err[c] += wi * e * e;
        }
    }
    Affine best{(hi - lo) / ftop, -lo};
    float best_err = INFINITY;
    for (int c = 0; c < kSteps; ++c)
        if (scale[c] > 0 && err[c] < best_err) best_err = err[c], best = {scale[c], -shift[c]};
    return best;
}

// q ∈ [−half, half − 1]: the peak on −half, the spacing tried around it.
float fit_symmetric(const float* x, const float* w, int n, int half) {
    const float peak = signed_peak(x, n);
    if (peak == 0) return 0;
    const float fhalf = static_cast<float>(half);
    std::array<float, kSteps> inv{}, sqq{}, sqx{};
    for (int c = 0; c < kSteps; ++c) inv[c] = -(fhalf + spacing_step(c)) / peak;
    for (int i = 0; i < n; ++i) {
        const float wi = w[i], xi = x[i];
        for (int c = 0; c < kSteps; ++c) {
            const float q = clamp_level(round_even(inv[c] * xi), -fhalf, fhalf - 1);
            sqq[c] += wi * q * q, sqx[c] += wi * q * xi;
        }
    }
    std::array<float, kSteps> scale{}, rscale{}, err{};
    for (int c = 0; c < kSteps; ++c)
        if (sqq[c] > 0 && sqx[c] != 0) scale[c] = sqx[c] / sqq[c], rscale[c] = sqq[c] / sqx[c];
    for (int i = 0; i < n; ++i) {
        const float wi = w[i], xi = x[i];
        for (int c = 0; c < kSteps; ++c) {
            const float q = clamp_level(round_even(xi * rscale[c]), -fhalf, fhalf - 1);
            const float e = scale[c] * q - xi;
            err[c] += wi * e * e;
        }
    }
    float best = peak / -fhalf, best_err = INFINITY;
    for (int c = 0; c < kSteps; ++c)
        if (scale[c] != 0 && err[c] < best_err) best_err = err[c], best = scale[c];
    return best;
}

// Eight 6-bit scales and eight 6-bit mins in q4_K/q5_K's 12 bytes.
void pack_scales(const std::array<int, 8>& sc, const std::array<int, 8>& mn, std::uint8_t* out) {
    for (int j = 0; j < 4; ++j) {
        out[j] = static_cast<std::uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = static_cast<std::uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
        out[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 0xf) | (mn[j + 4] & 0xf) << 4);
    }
}
void unpack_scale(int j, const std::uint8_t* in, int& sc, int& mn) {
    if (j < 4) {
        sc = in[j] & 63, mn = in[j + 4] & 63;
    } else {
        sc = (in[j + 4] & 0xf) | (in[j - 4] >> 6) << 4;
        mn = (in[j + 4] >> 4) | (in[j] >> 6) << 4;
    }
}

// q4_K (kBits 4) and q5_K (kBits 5): levels L[256] from the fitted, then stored, scales.
template <int kBits>
void quantize_k_affine(const float* x, std::byte* b) {
    constexpr int top = (1 << kBits) - 1;
    std::array<Affine, 8> fits;
    std::array<float, 32> w;
    float max_scale = 0, max_offset = 0;
    for (int s = 0; s < 8; ++s) {
        weights_of(x + 32 * s, 32, w.data());
        fits[s] = fit_affine(x + 32 * s, w.data(), 32, top);
        max_scale = std::max(max_scale, fits[s].scale);
        max_offset = std::max(max_offset, fits[s].offset);
    }
    const float d = store_half(b, max_scale / 63), dmin = store_half(b + 2, max_offset / 63);
    std::array<int, 8> sc{}, mn{};
    for (int s = 0; s < 8; ++s) {
        sc[s] = d > 0 ? std::clamp(nearest(fits[s].scale / d), 0, 63) : 0;
        mn[s] = dmin > 0 ? std::clamp(nearest(fits[s].offset / dmin), 0, 63) : 0;
    }
    std::uint8_t* scales = bytes(b) + 4;
    pack_scales(sc, mn, scales);
    std::array<std::uint8_t, kSuper> level{};
    for (int s = 0; s < 8; ++s) {
        const float step = d * static_cast<float>(sc[s]), offset = dmin * static_cast<float>(mn[s]);
        for (int i = 0; i < 32; ++i)
            level[32 * s + i] =
                step > 0 ? static_cast<std::uint8_t>(std::clamp(nearest((x[32 * s + i] + offset) / step), 0, top)) : 0;
    }
    std::uint8_t* high = scales + 12;
    std::uint8_t* qs = kBits == 5 ? high + 32 : high;
    if constexpr (kBits == 5) std::memset(high, 0, 32);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const int lo = level[64 * c + l], hi = level[64 * c + 32 + l];
            qs[32 * c + l] = static_cast<std::uint8_t>((lo & 0xf) | (hi & 0xf) << 4);
            if constexpr (kBits == 5) high[l] |= static_cast<std::uint8_t>((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
        }
}
template <int kBits>
void dequantize_k_affine(const std::byte* b, float* y) {
    const float d = load_half(b), dmin = load_half(b + 2);
    const std::uint8_t* scales = bytes(b) + 4;
    const std::uint8_t* high = scales + 12;
    const std::uint8_t* qs = kBits == 5 ? high + 32 : high;
    for (int c = 0; c < 4; ++c) {
        int sc0, m0, sc1, m1;
        unpack_scale(2 * c, scales, sc0, m0);
        unpack_scale(2 * c + 1, scales, sc1, m1);
        for (int l = 0; l < 32; ++l) {
            int lo = qs[32 * c + l] & 0xf, hi = qs[32 * c + l] >> 4;
            if constexpr (kBits == 5) lo |= (high[l] >> (2 * c) & 1) << 4, hi |= (high[l] >> (2 * c + 1) & 1) << 4;
            y[64 * c + l] = d * static_cast<float>(sc0) * static_cast<float>(lo) - dmin * static_cast<float>(m0);
            y[64 * c + 32 + l] = d * static_cast<float>(sc1) * static_cast<float>(hi) - dmin * static_cast<float>(m1);
        }
    }
}

// q6_K: ql[128] (low nibbles), qh[64] (2 high bits each), int8 scales[16], f16 d.
// In each half of 128 values, value l, l+32, l+64, l+96 share qh[l] and pair up in ql.
void quantize_q6_K(const float* x, std::byte* b) {
    std::array<float, 16> scale{};
    std::array<float, 16> w;
    float peak = 0;
    for (int s = 0; s < 16; ++s) {
        weights_of(x + 16 * s, 16, w.data());
        scale[s] = fit_symmetric(x + 16 * s, w.data(), 16, 32);
        if (std::fabs(scale[s]) > std::fabs(peak)) peak = scale[s];
    }
    std::uint8_t* ql = bytes(b);
    std::uint8_t* qh = ql + 128;
    auto* sc = reinterpret_cast<std::int8_t*>(qh + 64);
    const float d = store_half(b + 208, peak / -128);
    std::array<std::uint8_t, kSuper> level{};
    for (int s = 0; s < 16; ++s) {
        sc[s] = static_cast<std::int8_t>(d != 0 ? std::clamp(nearest(scale[s] / d), -128, 127) : 0);
        const float step = d * sc[s];
        for (int i = 0; i < 16; ++i)
            level[16 * s + i] =
                static_cast<std::uint8_t>((step != 0 ? std::clamp(nearest(x[16 * s + i] / step), -32, 31) : 0) + 32);
    }
    for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
            const std::uint8_t* q = level.data() + 128 * n + l;
            ql[64 * n + l] = static_cast<std::uint8_t>((q[0] & 0xf) | (q[64] & 0xf) << 4);
            ql[64 * n + 32 + l] = static_cast<std::uint8_t>((q[32] & 0xf) | (q[96] & 0xf) << 4);
            qh[32 * n + l] = static_cast<std::uint8_t>(q[0] >> 4 | (q[32] >> 4) << 2 | (q[64] >> 4) << 4 | (q[96] >> 4) << 6);
        }
}
void dequantize_q6_K(const std::byte* b, float* y) {
    const std::uint8_t* ql = bytes(b);
    const std::uint8_t* qh = ql + 128;
    const auto* sc = reinterpret_cast<const std::int8_t*>(qh + 64);
    const float d = load_half(b + 208);
    for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
            const int h = qh[32 * n + l];
            const int q[4] = {(ql[64 * n + l] & 0xf) | (h & 3) << 4, (ql[64 * n + 32 + l] & 0xf) | (h >> 2 & 3) << 4,
                              (ql[64 * n + l] >> 4) | (h >> 4 & 3) << 4, (ql[64 * n + 32 + l] >> 4) | (h >> 6 & 3) << 4};
            for (int k = 0; k < 4; ++k) {
                const int at = 128 * n + 32 * k + l;
                y[at] = d * static_cast<float>(sc[at / 16]) * static_cast<float>(q[k] - 32);
            }
        }
}

using BlockFn = void (*)(const float*, std::byte*);
using UnblockFn = void (*)(const std::byte*, float*);

struct BlockCodec {
    BlockFn quantize;
    UnblockFn dequantize;
};

BlockCodec codec_of(GgmlType type) {
    switch (type) {
        case GgmlType::q8_0: return {quantize_q8_0, dequantize_q8_0};
        case GgmlType::q4_0: return {quantize_symmetric_32<4>, dequantize_symmetric_32<4>};
        case GgmlType::q5_0: return {quantize_symmetric_32<5>, dequantize_symmetric_32<5>};
        case GgmlType::q5_1: return {quantize_q5_1, dequantize_q5_1};
        case GgmlType::q4_K: return {quantize_k_affine<4>, dequantize_k_affine<4>};
        case GgmlType::q5_K: return {quantize_k_affine<5>, dequantize_k_affine<5>};
        case GgmlType::q6_K: return {quantize_q6_K, dequantize_q6_K};
        default: return {nullptr, nullptr};
    }
}

const GgmlTypeInfo& known(GgmlType type) {
    const GgmlTypeInfo* info = ggml_type_info(type);
    LEVERS_CHECK(info != nullptr, "GGUF: tensor type {} is not one levers reads or writes", ggml_type_name(type));
    return *info;
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(GgmlType type) {
    for (const auto& info : kTypes)
        if (info.type == type) return &info;
    return nullptr;
}

std::string ggml_type_name(GgmlType type) {
    const GgmlTypeInfo* info = ggml_type_info(type);
    return info ? info->name : "type " + std::to_string(static_cast<std::uint32_t>(type));
}

std::optional<GgmlType> ggml_type_named(std::string_view name) {
    for (const auto& info : kTypes) {
        const std::string_view known_name = info.name;
        if (known_name.size() == name.size() &&
            std::equal(name.begin(), name.end(), known_name.begin(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
            }))
            return info.type;
    }
    return std::nullopt;
}

std::size_t ggml_row_bytes(GgmlType type, std::int64_t n) {
    const GgmlTypeInfo& info = known(type);
    LEVERS_CHECK(n % info.block == 0, "GGUF: a row of {} values is not a whole number of {} blocks ({} values each)",
                 n, info.name, info.block);
    return static_cast<std::size_t>(n / info.block) * info.block_bytes;
}

void ggml_quantize_row(GgmlType type, const float* x, std::byte* out, std::int64_t n) {
    const GgmlTypeInfo& info = known(type);
    ggml_row_bytes(type, n);
    switch (type) {
        case GgmlType::f32: std::memcpy(out, x, static_cast<std::size_t>(n) * 4); return;
        case GgmlType::f16:
            for (std::int64_t i = 0; i < n; ++i) store16(out + 2 * i, float_to_half(x[i]));
            return;
        case GgmlType::bf16:
            for (std::int64_t i = 0; i < n; ++i) store16(out + 2 * i, float_to_bf16(x[i]));
            return;
        default: break;
    }
    const BlockFn quantize = codec_of(type).quantize;
    for (std::int64_t i = 0; i < n / info.block; ++i)
        quantize(x + i * info.block, out + static_cast<std::size_t>(i) * info.block_bytes);
}

void ggml_dequantize_row(GgmlType type, const std::byte* in, float* y, std::int64_t n) {
    const GgmlTypeInfo& info = known(type);
    ggml_row_bytes(type, n);
    switch (type) {
        case GgmlType::f32: std::memcpy(y, in, static_cast<std::size_t>(n) * 4); return;
        case GgmlType::f16:
            for (std::int64_t i = 0; i < n; ++i) y[i] = half_to_float(load16(in + 2 * i));
            return;
        case GgmlType::bf16:
            for (std::int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(load16(in + 2 * i));
            return;
        default: break;
    }
    const UnblockFn dequantize = codec_of(type).dequantize;
    for (std::int64_t i = 0; i < n / info.block; ++i)
        dequantize(in + static_cast<std::size_t>(i) * info.block_bytes, y + i * info.block);
}

}  // namespace levers::data
