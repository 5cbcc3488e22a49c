// Safetensors written and read back: every dtype levers writes, f64 kept
// exactly, and a file of another dtype refused by name.
#include "levers/core/error.hpp"
#include "levers/data/safetensors.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fstream>

using namespace levers;

TEST_CASE("safetensors: f64 and f32 tensors written as F64, F32, BF16 or F16 read back as stored") {
    testing::TempDir tmp;
    const std::vector<double> values = {1.0 / 3, -2.5, 1e-30, 65504.0, 0.1, 7};
    const Tensor f64 = Tensor::from(values, {2, 3});
    const Tensor f32 = f64.to(DType::f32);
    for (const char* dtype : {"F64", "F32", "BF16", "F16"}) {
        CAPTURE(dtype);
        const auto path = tmp.path() / (std::string(dtype) + ".safetensors");
        data::write_safetensors(path, {{"a", f64}, {"b", f32}}, {{"format", "pt"}}, dtype);
        const data::SafeTensorsFile file = data::SafeTensorsFile::open(path);
        CHECK(file.metadata().at("format") == "pt");
        for (const char* name : {"a", "b"}) {
            const data::StoredTensor& stored = file.tensors().at(name);
            CHECK(stored.dtype == dtype);
            CHECK(stored.shape == Shape{2, 3});
            CHECK(stored.bytes == data::stored_bytes(6, dtype));
        }
        const std::vector<double> a = file.tensors().at("a").to_f64().values();
        if (std::string(dtype) == "F64") CHECK(a == values);  // exactly: nothing went through f32
        if (std::string(dtype) == "F32") CHECK(a == f32.values());
        CHECK(file.tensors().at("b").to_f32().values() == file.tensors().at("a").to_f32().values());
    }
    CHECK_THROWS_WITH_AS(data::write_safetensors(tmp.path() / "x.safetensors", {{"ids", Tensor::zeros({2}, DType::i32)}}),
                         doctest::Contains("takes dense f32, f64 or u8 host tensors; 'ids' is i32"), Error);
    CHECK_THROWS_WITH_AS(data::stored_bytes(2, "I64"), doctest::Contains("dtype I64 is not one levers writes (F64, F32, "
                                                                          "BF16, F16, U8)"),
                         Error);
    // A file of a dtype levers does not read is refused, naming the tensor and what it reads.
    const std::string header = R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})";
    {
        std::ofstream out(tmp.path() / "ids.safetensors", std::ios::binary);
        const std::uint64_t n = header.size();
        out.write(reinterpret_cast<const char*>(&n), 8);
        out << header << std::string(16, '\0');
    }
    CHECK_THROWS_WITH_AS(data::SafeTensorsFile::open(tmp.path() / "ids.safetensors"),
                         doctest::Contains("tensor 'ids' is I64; levers reads F64, F32, F16, BF16 (and U8: "
                                           "4-bit codes)"), Error);
}

TEST_CASE("safetensors: bytes as U8 and named tensors kept F32 beside BF16 ones (a 4-bit weight and its state)") {
    testing::TempDir tmp;
    const Tensor codes = Tensor::from(std::vector<std::uint8_t>{0x12, 0xab, 0xff, 0x00}, {4, 1});
    const Tensor scale = Tensor::from(std::vector<float>{0.1f, 3.0f}, {2});
    const auto path = tmp.path() / "mixed.safetensors";
    data::write_safetensors(path, {{"w", codes}, {"w.absmax", scale}, {"norm", scale}}, {}, "BF16", {"w.absmax"});
    const data::SafeTensorsFile file = data::SafeTensorsFile::open(path);
    CHECK(file.tensors().at("w").dtype == "U8");
    CHECK(file.tensors().at("w").to_u8().values() == codes.values());
    CHECK(file.tensors().at("w.absmax").dtype == "F32");
    CHECK(file.tensors().at("w.absmax").to_f32().values() == scale.values());
    CHECK(file.tensors().at("norm").dtype == "BF16");
    CHECK_THROWS_WITH_AS(file.tensors().at("w").to_f32(), doctest::Contains("a tensor of bytes (U8: packed 4-bit codes) "
                                                                              "read as real numbers"), Error);
    CHECK_THROWS_WITH_AS(file.tensors().at("norm").to_u8(), doctest::Contains("a BF16 tensor read as bytes"), Error);
}
