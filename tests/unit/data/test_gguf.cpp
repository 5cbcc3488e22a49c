// GGUF files and ggml's block types: the blocks decode as ggml's own code
// decodes them (figures from ggml's dequantize_row_* on the same bytes),
// each type's round trip stays within its error, and a file written
// (metadata of every kind, tensors in parts) reads back as it was written.
#include "levers/core/error.hpp"
#include "levers/data/gguf.hpp"
#include "levers/data/half.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

using namespace levers;
using data::GgmlType;

namespace {

// An LCG's bytes, then each block's f16 scales set to fixed values (0.05, then 0.01) so none is NaN.
std::vector<std::byte> pattern(const data::GgmlTypeInfo& info, int blocks, const std::vector<int>& half_at) {
    std::uint32_t state = 12345;
    std::vector<std::byte> b(static_cast<std::size_t>(blocks) * info.block_bytes);
    for (auto& x : b) {
        state = state * 1664525u + 1013904223u;
        x = static_cast<std::byte>(state >> 24);
    }
    const std::uint16_t halves[] = {0x2A66, 0x211F};
    for (int i = 0; i < blocks; ++i)
        for (std::size_t k = 0; k < half_at.size(); ++k)
            std::memcpy(&b[static_cast<std::size_t>(i) * info.block_bytes + static_cast<std::size_t>(half_at[k])],
                        &halves[k], 2);
    return b;
}

struct Golden {
    GgmlType type;
    std::vector<int> half_at;  // where the block's f16 scales are
    double sum, sum_sq;
    std::vector<double> every_37th;
};

// Printed by a program calling ggml's ggml_get_type_traits(type)->to_float on pattern()'s bytes (4 blocks).
const Golden kGolden[] = {
    {GgmlType::q8_0, {0}, -31.7422485, 1782.00206, {-5.84857178, -5.84857178, -2.1494751, 0.249938965}},
    {GgmlType::q4_0, {0}, 2.0994873, 5.65723667, {0.149963379, 0.199951172, -0.149963379, -0.049987793}},
    {GgmlType::q5_0, {0}, 1.99951172, 24.1232168, {0.699829102, -0.299926758, 0.199951172, -0.399902344}},
    {GgmlType::q5_1, {0, 2}, 104.055176, 110.320866, {0.40990448, 0.359916687, 0.559867859, 1.15972137}},
    {GgmlType::q4_K, {0, 2}, 11242.4762, 224825.929,
     {9.75750732, 13.9165649, 15.3961945, 0.579574585, 38.0205002, 0.60962677, 0.839744568, -0.190040588, 1.44948578,
      11.0370712, 13.7663956, -0.410087585, 6.22830963, 4.52881622, 3.14902496, 22.3842773, 3.97892761, -0.520111084,
      15.9261017, 1.34953308, 18.865242, 29.1328354, 9.97732544, 0.869773865, 14.5262146, 8.67759705, 1.0496521,
      -0.320068359}},
    {GgmlType::q5_K, {0, 2}, 23780.4699, 1029828.45,
     {41.7496948, 16.7158813, 92.8772736, -0.0202789307, 29.7725143, 0.209724426, 19.8351059, 8.72774506, 36.7208862,
      29.6325989, 34.6014633, 56.9759216, 27.6231995, 3.81903076, 13.3766785, -0.110023499, 3.85887909, 18.2954636,
      15.1560974, 10.2972565, 5.49865723, 3.40898895, 0.699760437, 4.72881317, 0.079788208, 85.2390518, 60.3052139,
      18.785202}},
    {GgmlType::q6_K, {208}, 62.1348267, 4654015.22,
     {85.0292358, -24.144104, 25.59375, 0.599853516, -73.4820557, 18.8953857, 94.4769287, -66.1338501, 43.7393188,
      -115.671753, 5.59863281, -1.59960938, -71.9824219, -23.3942871, 1.3996582, -31.0424194, 30.5925293, 20.1450806,
      -23.0943604, -101.175293, 118.970947, 113.722229, 18.2955322, 49.2879639, -21.1948242, -8.99780273, 3.19921875,
      13.1967773}},
};

std::vector<float> normal_values(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.f, 0.02f);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(gen);
    x[17] = 0.3f;  // an outlier, as weights have
    return x;
}

// The RMS of the round trip's error over the RMS of the values.
double quant_error(GgmlType type, const std::vector<float>& x) {
    const auto n = static_cast<std::int64_t>(x.size());
    std::vector<std::byte> q(data::ggml_row_bytes(type, n));
    data::ggml_quantize_row(type, x.data(), q.data(), n);
    std::vector<float> y(x.size());
    data::ggml_dequantize_row(type, q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (std::size_t i = 0; i < x.size(); ++i) err += (y[i] - x[i]) * (y[i] - x[i]), ref += x[i] * x[i];
    return std::sqrt(err / ref);
}

}  // namespace

TEST_CASE("ggml blocks decode as ggml decodes them") {
    for (const Golden& g : kGolden) {
        const data::GgmlTypeInfo& info = *data::ggml_type_info(g.type);
        CAPTURE(info.name);
        const auto bytes = pattern(info, 4, g.half_at);
        std::vector<float> y(static_cast<std::size_t>(4 * info.block));
        data::ggml_dequantize_row(g.type, bytes.data(), y.data(), 4 * info.block);
        double sum = 0, sum_sq = 0;
        for (float v : y) sum += v, sum_sq += static_cast<double>(v) * v;
        CHECK(sum == doctest::Approx(g.sum).epsilon(1e-6));
        CHECK(sum_sq == doctest::Approx(g.sum_sq).epsilon(1e-6));
        for (std::size_t i = 0; i < g.every_37th.size(); ++i) CHECK(y[37 * i] == doctest::Approx(g.every_37th[i]).epsilon(1e-6));
    }
}

TEST_CASE("ggml types: each round trip within its error, with llama.cpp's sizes") {
    const auto x = normal_values(4096, 7);
    // Bits per value, and the relative RMS error each type reaches on Gaussian weights with an outlier.
    const struct {
        GgmlType type;
        double bits, max_error;
    } cases[] = {
        {GgmlType::f32, 32, 0},        {GgmlType::f16, 16, 1e-3},     {GgmlType::bf16, 16, 4e-3},
        {GgmlType::q8_0, 8.5, 0.006},  {GgmlType::q6_K, 6.5625, 0.02}, {GgmlType::q5_K, 5.5, 0.04},
        {GgmlType::q5_1, 6, 0.05},     {GgmlType::q5_0, 5.5, 0.05},   {GgmlType::q4_K, 4.5, 0.08},
        {GgmlType::q4_0, 4.5, 0.12},
    };
    double previous = 0;
    for (const auto& c : cases) {
        CAPTURE(data::ggml_type_name(c.type));
        CHECK(data::ggml_row_bytes(c.type, 4096) * 8 == static_cast<std::size_t>(c.bits * 4096));
        const double e = quant_error(c.type, x);
        CHECK(e <= c.max_error);
        if (c.type == GgmlType::q8_0 || c.type == GgmlType::q6_K || c.type == GgmlType::q5_K || c.type == GgmlType::q4_K) {
            CHECK(e > previous);  // fewer bits, more error
            previous = e;
        }
    }
    // Constant and zero blocks keep their value; tiny ones (below what an f16 scale holds) may flush to zero, as
    // in ggml, but never to NaN.
    for (GgmlType t : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q5_0, GgmlType::q5_1, GgmlType::q4_K, GgmlType::q5_K,
                       GgmlType::q6_K}) {
        CAPTURE(data::ggml_type_name(t));
        for (float v : {0.f, 0.5f, -0.25f, -1e-6f}) {
            std::vector<float> c(256, v), back(256);
            std::vector<std::byte> q(data::ggml_row_bytes(t, 256));
            data::ggml_quantize_row(t, c.data(), q.data(), 256);
            data::ggml_dequantize_row(t, q.data(), back.data(), 256);
            for (float b : back) {
                if (std::fabs(v) >= 0.25f) CHECK(b == doctest::Approx(v).epsilon(0.01));
                CHECK(std::fabs(b - v) <= std::fabs(v));
            }
        }
    }
    CHECK(data::ggml_type_named("Q4_K") == GgmlType::q4_K);
    CHECK(!data::ggml_type_named("q3_K"));
    CHECK(data::ggml_type_name(static_cast<GgmlType>(23)) == "type 23");
    CHECK_THROWS_WITH_AS(data::ggml_row_bytes(GgmlType::q4_K, 100),
                         doctest::Contains("a row of 100 values is not a whole number of q4_K blocks (256 values each)"),
                         Error);
}

TEST_CASE("GGUF: metadata of every kind and tensors written in parts read back") {
    testing::TempDir tmp;
    const auto path = tmp.path() / "m.gguf";
    std::vector<float> a(256 * 3), b(7);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) - 3;
    {
        data::GgufWriter w(path);
        w.set("general.architecture", data::GgufValue::string("llama"));
        w.set("llama.block_count", data::GgufValue::u32(2));
        w.set("llama.rope.freq_base", data::GgufValue::f32(500000));
        w.set("x.flag", data::GgufValue::boolean(true));
        w.set("x.signed", data::GgufValue::i32(-5));
        w.set("x.tokens", data::GgufValue::strings({"a", "Ġb", ""}));
        w.set("x.types", data::GgufValue::i32s({1, 3, 6}));
        w.set("x.scores", data::GgufValue::f32s({-1.5, 0}));
        w.add_tensor("a.weight", {256, 3}, GgmlType::q8_0);
        w.add_tensor("b.bias", {7}, GgmlType::f32);
        std::vector<std::byte> qa(data::ggml_row_bytes(GgmlType::q8_0, 256) * 3);
        for (int r = 0; r < 3; ++r)
            data::ggml_quantize_row(GgmlType::q8_0, a.data() + 256 * r, qa.data() + qa.size() / 3 * r, 256);
        w.begin_data();
        w.write_tensor(qa.data(), qa.size() / 3);  // a row at a time
        w.write_tensor(qa.data() + qa.size() / 3, qa.size() / 3 * 2);
        CHECK_THROWS_WITH_AS(w.write_tensor(qa.data(), 29), doctest::Contains("tensor b.bias given 29 bytes, its table says 28"),
                             Error);
        w.write_tensor(reinterpret_cast<const std::byte*>(b.data()), 28);
        CHECK(!std::filesystem::exists(path));  // under its temporary name until finished
        const std::uint64_t size = w.finish();
        CHECK(size == std::filesystem::file_size(path));
    }
    const auto f = data::GgufFile::open(path);
    CHECK(f.version() == 3);
    CHECK(f.metadata().front().first == "general.architecture");  // in the order written
    CHECK(f.at("general.architecture").as_string("") == "llama");
    CHECK(f.at("llama.block_count").type == data::GgufValue::Type::u32);
    CHECK(f.at("llama.block_count").as_int("") == 2);
    CHECK(f.at("llama.rope.freq_base").as_real("") == 500000);
    CHECK(f.at("x.flag").summary() == "true");
    CHECK(f.at("x.signed").as_int("") == -5);
    CHECK(f.at("x.tokens").as_strings("") == std::vector<std::string>{"a", "Ġb", ""});
    CHECK(std::get<std::vector<std::int64_t>>(f.at("x.types").value) == std::vector<std::int64_t>{1, 3, 6});
    CHECK(std::get<std::vector<double>>(f.at("x.scores").value) == std::vector<double>{-1.5, 0});
    CHECK(f.at("x.types").summary() == "[1, 3, 6] (3 i32)");
    REQUIRE(f.tensors().size() == 2);
    const auto& ta = *f.tensor("a.weight");
    CHECK(ta.dims == std::vector<std::int64_t>{256, 3});
    CHECK(ta.offset % 32 == 0);
    CHECK(f.tensor("b.bias")->offset % 32 == 0);
    const auto back = f.read_f32(ta);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(back[i] - a[i]) <= 0.5f / 127 + 1e-3f);  // half a step
    CHECK(f.read_f32(*f.tensor("b.bias")) == b);
    CHECK_THROWS_WITH_AS(f.at("nope"), doctest::Contains("has no metadata nope"), Error);
    CHECK_THROWS_WITH_AS(f.at("x.flag").as_string("x.flag"), doctest::Contains("x.flag is bool, not a string"), Error);

    // Truncated, or not GGUF at all: refused naming the file and what ran past.
    std::string bytes(std::filesystem::file_size(path), '\0');
    std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const auto cut = tmp.write("cut.gguf", bytes.substr(0, bytes.size() - 10));
    CHECK_THROWS_WITH_AS(data::GgufFile::open(cut), doctest::Contains("is truncated: tensor b.bias ends past the end"), Error);
    const auto header_cut = tmp.write("header.gguf", bytes.substr(0, 60));
    CHECK_THROWS_WITH_AS(data::GgufFile::open(header_cut), doctest::Contains("is truncated or malformed"), Error);
    const auto other = tmp.write("other.gguf", "GGML and then some bytes");
    CHECK_THROWS_WITH_AS(data::GgufFile::open(other), doctest::Contains("is not a GGUF file"), Error);
}

TEST_CASE("GGUF: a writer left unfinished leaves no file") {
    testing::TempDir tmp;
    const auto path = tmp.path() / "half.gguf";
    {
        data::GgufWriter w(path);
        w.add_tensor("t", {32}, GgmlType::f32);
        w.begin_data();
        std::vector<float> part(16);
        w.write_tensor(reinterpret_cast<const std::byte*>(part.data()), 64);
    }  // as when an exception leaves export
    CHECK(std::filesystem::is_empty(tmp.path()));
    data::GgufWriter w(path);
    CHECK_THROWS_WITH_AS(w.add_tensor("t", {100}, GgmlType::q4_0),
                         doctest::Contains("a row of 100 values is not a whole number of q4_0 blocks"), Error);
}
