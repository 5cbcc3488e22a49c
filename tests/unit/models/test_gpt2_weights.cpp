#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/safetensors.hpp"
#include "levers/models/gpt2_weights.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

using namespace levers;
namespace fs = std::filesystem;

namespace {

models::GptConfig tiny_gpt2() { return {.vocab_size = 40, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 12}; }

std::vector<std::int32_t> tokens() { return {1, 5, 9, 3, 7, 2, 30, 4, 11, 0, 6, 8}; }

double loss_of(models::Gpt& m) {
    auto t = tokens();
    std::vector<std::int32_t> x(t.begin(), t.begin() + 6), y(t.begin() + 1, t.begin() + 7);
    return m.loss(Tensor::from(x, {1, 6}), Tensor::from(y, {1, 6})).item();
}

// A safetensors file written by hand: header JSON, then the bytes.
fs::path raw_file(const testing::TempDir& dir, const std::string& name, const nlohmann::json& header,
                  const std::string& data) {
    std::string h = header.dump();
    const std::uint64_t len = h.size();
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &len, 8);
    return dir.write(name, bytes + h + data);
}

}  // namespace

TEST_CASE("GPT weights round-trip through safetensors: same tensors, same loss, Hugging Face's names and layouts") {
    testing::TempDir dir;
    models::Gpt gpt(tiny_gpt2(), 7);
    const fs::path file = dir.path() / "model.safetensors";
    models::save_gpt2_safetensors(file, gpt);

    auto st = data::read_safetensors(file);
    CHECK(st.tensors.count("transformer.wte.weight") == 1);
    CHECK(st.tensors.count("transformer.h.1.mlp.c_proj.bias") == 1);
    CHECK(st.metadata.at("n_head") == "2");
    // Conv1D orientation: [in, out], the transpose of levers' [out, in].
    const Tensor& c_attn = st.tensors.at("transformer.h.0.attn.c_attn.weight");
    CHECK(c_attn.shape() == Shape({12, 36}));
    int id = -1;
    for (std::size_t i = 0; i < gpt.params().entries().size(); ++i)
        if (gpt.params().entries()[i].name == "h.0.attn.c_attn.weight") id = static_cast<int>(i);
    REQUIRE(id >= 0);
    const float* ours = gpt.params().param<float>(id);  // [36, 12]
    CHECK(c_attn.data<float>()[5 * 36 + 20] == ours[20 * 12 + 5]);

    auto back = models::load_gpt2_safetensors(file);
    CHECK(back->config().n_layer == 2);
    CHECK(back->config().n_head == 2);
    REQUIRE(back->params().size() == gpt.params().size());
    CHECK(std::memcmp(back->params().params().raw(), gpt.params().params().raw(), gpt.params().params().bytes()) == 0);
    CHECK(loss_of(*back) == loss_of(gpt));
}

TEST_CASE("GPT2Model names (no prefix), a tied lm_head and mask buffers import too; the head count can come from "
          "config.json") {
    testing::TempDir dir;
    models::Gpt gpt(tiny_gpt2(), 9);
    const fs::path ours = dir.path() / "levers.safetensors";
    models::save_gpt2_safetensors(ours, gpt);
    auto st = data::read_safetensors(ours);
    std::vector<std::pair<std::string, Tensor>> renamed;
    for (auto& [name, t] : st.tensors) renamed.emplace_back(name.substr(std::string("transformer.").size()), t);
    renamed.emplace_back("lm_head.weight", st.tensors.at("transformer.wte.weight"));
    renamed.emplace_back("h.0.attn.bias", Tensor::zeros({1, 1, 8, 8}, DType::f32));
    fs::create_directories(dir.path() / "hf");
    data::write_safetensors(dir.path() / "hf" / "model.safetensors", renamed);  // no metadata: no n_head
    CHECK_THROWS_WITH_AS(models::load_gpt2_safetensors(dir.path() / "hf" / "model.safetensors"),
                         doctest::Contains("put Hugging Face's config.json beside them or give n_head"), Error);
    std::ofstream(dir.path() / "hf" / "config.json") << R"({"model_type": "gpt2", "n_head": 2})";
    auto loaded = models::load_gpt2_safetensors(dir.path() / "hf" / "model.safetensors");
    CHECK(loss_of(*loaded) == loss_of(gpt));
}

TEST_CASE("safetensors: F16 and BF16 are read as f32; malformed files are refused naming the file") {
    testing::TempDir dir;
    // 1.0, -2.0, 0.5 in F16 and in BF16.
    const std::string f16("\x00\x3c\x00\xc0\x00\x38", 6), bf16("\x80\x3f\x00\xc0\x00\x3f", 6);
    auto halves = raw_file(dir, "halves.safetensors",
                           {{"a", {{"dtype", "F16"}, {"shape", {3}}, {"data_offsets", {0, 6}}}},
                            {"b", {{"dtype", "BF16"}, {"shape", {3}}, {"data_offsets", {6, 12}}}}},
                           f16 + bf16);
    auto st = data::read_safetensors(halves);
    for (const char* name : {"a", "b"}) {
        const float* v = st.tensors.at(name).data<float>();
        CHECK(v[0] == 1.0f);
        CHECK(v[1] == -2.0f);
        CHECK(v[2] == 0.5f);
    }
    struct Case {
        fs::path file;
        const char* message;
    };
    const Case cases[] = {
        {dir.write("short.safetensors", "abc"), "truncated"},
        {raw_file(dir, "range.safetensors", {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}},
                  std::string(8, '\0')),
         "truncated"},
        {raw_file(dir, "size.safetensors", {{"a", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}},
                  std::string(8, '\0')),
         "its shape and dtype need 12"},
        {raw_file(dir, "int.safetensors", {{"a", {{"dtype", "I64"}, {"shape", {1}}, {"data_offsets", {0, 8}}}}},
                  std::string(8, '\0')),
         "is I64; levers reads F64, F32, F16, BF16 (and U8: 4-bit codes)"},
        {dir.write("json.safetensors", std::string("\x05\0\0\0\0\0\0\0", 8) + "[1,2]"), "not a JSON object"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.file);
        std::string error;
        try {
            data::read_safetensors(c.file);
        } catch (const Error& e) {
            error = e.what();
        }
        CHECK(error.find(c.file.filename().string()) != std::string::npos);
        CHECK(error.find(c.message) != std::string::npos);
    }
    // Weights that are not GPT-2's.
    CHECK_THROWS_WITH_AS(models::load_gpt2_safetensors(halves, 2),
                         doctest::Contains("no tensor 'transformer.wte.weight'"), Error);
}
