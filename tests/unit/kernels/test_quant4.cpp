// 4-bit weights against bitsandbytes' definition: the code books, the codes,
// the scales and the dequantized values of fixed inputs, computed with
// PyTorch by tests/reference/quant4.py; then the 4-bit linear layer against
// the dense one over the dequantized weight, in one tile and in many.
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/linear.hpp"
#include "levers/kernels/quant4.hpp"
#include "levers/kernels/reduce.hpp"
#include "tests/gradcheck.hpp"
#include "tests/source_tree.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstring>
#include <fstream>

using namespace levers;

namespace {

nlohmann::json quant4_reference() {
    std::ifstream in(testing::source_path("tests/reference/quant4.json"));
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

// The inputs quant4.py makes: k / 2046 for a scramble k of i, times the block's (1..7) / 8; block 3 zeros.
Tensor inputs(std::int64_t n) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<float>((i * 2654435761LL) % 4093 - 2046);
        x[i] = (k / 2046.0f) * (static_cast<float>((i / 64) % 7 + 1) / 8.0f);
        if (i / 64 == 3) x[i] = 0;
    }
    return Tensor::from(x, {n});
}

std::string hex(const Tensor& bytes) {
    std::string out;
    for (std::int64_t i = 0; i < bytes.numel(); ++i) out += fmt::format("{:02x}", bytes.data<std::uint8_t>()[i]);
    return out;
}

}  // namespace

TEST_CASE("4-bit code books: every bit as bitsandbytes defines them") {
    const auto ref = quant4_reference();
    for (int k = 0; k < 16; ++k) {
        CHECK(kernels::kNf4Code[k] == ref["nf4"][k].get<float>());
        CHECK(kernels::kFp4Code[k] == ref["fp4"][k].get<float>());
        CHECK(kernels::sorted(kernels::kFp4Code).index[k] == ref["fp4_order"][k].get<int>());
    }
    for (int k = 0; k < 256; ++k) CHECK(kernels::kDynamicMap[k] == ref["dynamic"][k].get<float>());
}

TEST_CASE("quantize_4bit then dequantize_4bit: bitsandbytes' codes, scales and values (nf4, fp4, double quant)") {
    const auto ref = quant4_reference();
    for (const auto& c : ref["cases"]) {
        const std::int64_t n = c["n"];
        const bool double_quant = c["double_quant"];
        CAPTURE(c["type"].get<std::string>());
        CAPTURE(n);
        CAPTURE(double_quant);
        const ops::Quantized4 q = ops::quantize_4bit(
            inputs(n), {.type = ops::quant4_type(c["type"].get<std::string>(), "test"), .double_quant = double_quant});
        CHECK(hex(q.codes) == c["codes"].get<std::string>());
        CHECK(q.double_quant() == double_quant);
        if (double_quant) {
            CHECK(hex(q.absmax_codes) == c["absmax_codes"].get<std::string>());
            CHECK(q.offset == c["offset"].get<float>());
            const auto nested = c["nested_absmax"].get<std::vector<float>>();
            REQUIRE(q.nested_absmax.numel() == static_cast<std::int64_t>(nested.size()));
            for (std::size_t b = 0; b < nested.size(); ++b) CHECK(q.nested_absmax.data<float>()[b] == nested[b]);
        } else {
            const auto absmax = c["absmax"].get<std::vector<float>>();
            REQUIRE(q.absmax.numel() == static_cast<std::int64_t>(absmax.size()));
            for (std::size_t b = 0; b < absmax.size(); ++b) CHECK(q.absmax.data<float>()[b] == absmax[b]);
        }
        const Tensor values = ops::dequantize_4bit(q, DType::f32);
        REQUIRE(values.numel() == n);
        const auto head = c["values_head"].get<std::vector<float>>();
        for (std::size_t i = 0; i < head.size(); ++i) CHECK(values.data<float>()[i] == head[i]);
        const auto crc = ::crc32(0L, reinterpret_cast<const Bytef*>(values.raw()), static_cast<uInt>(values.bytes()));
        CHECK(crc == c["values_crc32"].get<std::uint32_t>());
        // f64 is the same values widened.
        const Tensor wide = ops::dequantize_4bit(q, DType::f64);
        for (std::int64_t i = 0; i < n; ++i) CHECK(wide.data<double>()[i] == double(values.data<float>()[i]));
    }
}

TEST_CASE("dequantize_4bit: any rectangle of a weight is those values of the whole") {
    const Tensor w = inputs(37 * 70).view({37, 70});  // rows that cross blocks, an odd count of values per row
    for (const bool dq : {false, true}) {
        const auto q = ops::quantize_4bit(w, {.type = Quant4Type::fp4, .double_quant = dq});
        const Tensor whole = ops::dequantize_4bit(q, DType::f32);
        CHECK(whole.shape() == Shape{37, 70});
        const Tensor part = ops::dequantize_4bit(q, DType::f32, 5, 9, 3, 61);
        for (std::int64_t r = 0; r < 9; ++r)
            for (std::int64_t col = 0; col < 61; ++col)
                CHECK(part.data<float>()[r * 61 + col] == whole.data<float>()[(r + 5) * 70 + col + 3]);
    }
    CHECK_THROWS_WITH(ops::quant4_type("int4", "--set quantize"),
                      doctest::Contains("--set quantize: unknown 4-bit type 'int4'; valid are nf4 and fp4"));
}

TEST_CASE("linear_4bit and lora_linear_4bit: the dense layers over the dequantized weight, in one tile and in many, "
          "and their gradients") {
    const std::int64_t rows = 5, in_dim = 192, out_dim = 24, rank = 3;
    Rng rng(7);
    auto random = [&](Shape shape) {
        return Tensor::from(testing::random_vector(shape.numel(), rng), shape).to(Device::cpu(), DType::f32);
    };
    const Tensor w = random({out_dim, in_dim});
    const auto q = std::make_shared<const ops::Quantized4>(ops::quantize_4bit(w, {}));
    const Tensor dense_w = ops::dequantize_4bit(*q, DType::f32);
    const std::vector<Tensor> inputs = {random({rows, in_dim}), random({out_dim}), random({rank, in_dim}),
                                        random({out_dim, rank})};
    const Tensor r = random({rows, out_dim});
    // The output and every input's gradient (x, bias, and the adapter's where it takes part).
    auto run = [&](auto&& layer, bool adapter) {
        std::vector<Tensor> in;
        for (const Tensor& t : inputs) in.push_back(t.clone().requires_grad_());
        const Tensor y = layer(in);
        ops::sum(y * r).backward();
        std::vector<Tensor> out{y, in[0].grad(), in[1].grad()};
        if (adapter) out.insert(out.end(), {in[2].grad(), in[3].grad()});
        return out;
    };
    auto close = [](const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
        REQUIRE(got.size() == want.size());
        for (std::size_t k = 0; k < got.size(); ++k)
            for (std::int64_t i = 0; i < got[k].numel(); ++i)
                CHECK(got[k].data<float>()[i] == doctest::Approx(want[k].data<float>()[i]).epsilon(1e-5));
    };
    const auto plain = run([&](const std::vector<Tensor>& in) { return ops::linear(in[0], dense_w, in[1]); }, false);
    const auto adapted = run([&](const std::vector<Tensor>& in) {
        return ops::lora_linear(in[0], dense_w, in[1], in[2], in[3], 1.5);
    }, true);
    for (const std::int64_t tile : {ops::kLinear4Tile, std::int64_t(64 * 24), std::int64_t(100)}) {
        CAPTURE(tile);
        close(run([&](const std::vector<Tensor>& in) { return ops::linear_4bit(in[0], q, in[1], tile); }, false), plain);
        close(run([&](const std::vector<Tensor>& in) {
            return ops::lora_linear_4bit(in[0], q, in[1], in[2], in[3], 1.5, tile);
        }, true), adapted);
    }
}
