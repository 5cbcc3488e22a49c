// GGUF export read back: the metadata llama.cpp reads, the tensor table in
// its names and types (the _M mixes, tied embeddings, fallbacks), q and k
// rows interleaved for the llama architecture and left alone for qwen3, every
// tensor's values within its type's error of the source, the Modelfile, and
// bad input refused before anything is written.
#include "levers/core/error.hpp"
#include "levers/data/files.hpp"
#include "levers/data/gguf.hpp"
#include "levers/data/safetensors.hpp"
#include "levers/models/gguf_export.hpp"
#include "levers/models/hf_dir.hpp"
#include "tests/installed_data.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace levers;
using data::GgmlType;
namespace fs = std::filesystem;

namespace {

testing::TinyLlama shape(bool tied = false, std::int64_t intermediate = 512) {
    return {.vocab = testing::kTinyTokenizerVocab, .hidden = 256, .intermediate = intermediate, .layers = 2, .heads = 4,
            .kv_heads = 2, .context = 64, .tied = tied};
}

// The relative RMS error each type may leave on the tiny model's weights.
double allowed(GgmlType t) {
    switch (t) {
        case GgmlType::f32: return 0;
        case GgmlType::f16: return 1e-3;
        case GgmlType::bf16: return 5e-3;
        case GgmlType::q8_0: return 0.01;
        case GgmlType::q6_K: return 0.03;
        case GgmlType::q5_K: case GgmlType::q5_0: case GgmlType::q5_1: return 0.06;
        default: return 0.12;
    }
}

// The source row of a GGUF q/k row interleaved from HF's halves (head size d).
std::int64_t hf_row(std::int64_t r, std::int64_t d) { return r / d * d + (r % d % 2) * (d / 2) + r % d / 2; }

// Every tensor of `file` against the directory's: names mapped, rows reordered where `interleave`.
void check_values(const data::GgufFile& file, const fs::path& dir, const models::LlamaConfig& c, bool interleave) {
    const auto source = data::SafeTensorsFile::open(dir / "model.safetensors");
    const std::map<std::string, std::string> names = {
        {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},           {"attn_norm.weight", "input_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},  {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},  {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},       {"ffn_down.weight", "mlp.down_proj.weight"}};
    for (const auto& t : file.tensors()) {
        CAPTURE(t.name);
        std::string hf;
        if (t.name.starts_with("blk.")) {
            const auto dot = t.name.find('.', 4);
            hf = "model.layers." + t.name.substr(4, dot - 4) + "." + names.at(t.name.substr(dot + 1));
        } else {
            hf = names.at(t.name);
        }
        const auto expected = source.tensors().at(hf).to_f32().values();
        const auto got = file.read_f32(t);
        REQUIRE(got.size() == expected.size());
        const bool q = t.name.ends_with("attn_q.weight"), k = t.name.ends_with("attn_k.weight");
        const std::int64_t cols = t.dims[0], d = c.head_size();
        double err = 0, ref = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
            const auto r = static_cast<std::int64_t>(i) / cols, col = static_cast<std::int64_t>(i) % cols;
            const std::int64_t from = interleave && (q || k) ? hf_row(r, d) : r;
            const float e = expected[static_cast<std::size_t>(from * cols + col)];
            err += (got[i] - e) * (got[i] - e), ref += e * e;
        }
        CHECK(std::sqrt(err / ref) <= allowed(t.type));
    }
}

std::string text_of(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("GGUF export of a Llama: llama.cpp's metadata, names, mixes and values in every file type") {
    testing::TempDir tmp;
    const auto config = testing::tiny_llama(shape());
    const auto dir = testing::save_tiny_llama(tmp.path() / "llama", config, 3);
    const auto tokenizer = models::hf_tokenizer(dir, config.vocab_size);
    const struct {
        const char* type;
        std::uint32_t file_type;
    } types[] = {{"f32", 0}, {"f16", 1}, {"bf16", 32}, {"q8_0", 7}, {"q4_0", 2}, {"q4_k_m", 15}, {"q5_k_m", 17}, {"q6_k", 18}};
    for (const auto& [type, file_type] : types) {
        CAPTURE(type);
        const auto out = tmp.path() / "out" / (std::string(type) + ".gguf");
        const auto report = models::export_gguf(dir, out, {.type = type, .overwrite = true});
        CHECK(report.notes.empty());
        const auto f = data::GgufFile::open(out);
        CHECK(report.bytes == f.size());
        CHECK(f.at("general.architecture").as_string("") == "llama");
        CHECK(f.at("general.file_type").as_int("") == file_type);
        CHECK(f.at("llama.block_count").as_int("") == 2);
        CHECK(f.at("llama.embedding_length").as_int("") == 256);
        CHECK(f.at("llama.feed_forward_length").as_int("") == 512);
        CHECK(f.at("llama.attention.head_count").as_int("") == 4);
        CHECK(f.at("llama.attention.head_count_kv").as_int("") == 2);
        CHECK(f.at("llama.context_length").as_int("") == 64);
        CHECK(f.at("llama.rope.dimension_count").as_int("") == 64);
        CHECK(f.at("llama.vocab_size").as_int("") == 517);
        CHECK(f.at("llama.rope.freq_base").as_real("") == config.rope_theta);
        CHECK(f.at("llama.attention.layer_norm_rms_epsilon").as_real("") == doctest::Approx(config.rms_norm_eps));
        CHECK(f.at("tokenizer.ggml.model").as_string("") == "gpt2");
        CHECK(f.at("tokenizer.ggml.pre").as_string("") == "gpt-2");
        const auto& tokens = f.at("tokenizer.ggml.tokens").as_strings("");
        REQUIRE(tokens.size() == 517);
        for (std::size_t id : {0, 100, 300}) CHECK(tokens[id] == tokenizer->spec().vocab[id]);
        CHECK(f.at("tokenizer.ggml.merges").as_strings("").size() == tokenizer->spec().merges.size());
        CHECK(f.at("tokenizer.ggml.merges").as_strings("").front() ==
              tokenizer->spec().merges.front().first + " " + tokenizer->spec().merges.front().second);
        const auto& token_types = std::get<std::vector<std::int64_t>>(f.at("tokenizer.ggml.token_type").value);
        const auto bos = f.at("tokenizer.ggml.bos_token_id").as_int("");
        CHECK(tokens[static_cast<std::size_t>(bos)] == "<|begin_of_text|>");
        CHECK(token_types[static_cast<std::size_t>(bos)] == 3);  // control
        CHECK(token_types[100] == 1);
        CHECK(tokens[static_cast<std::size_t>(f.at("tokenizer.ggml.eos_token_id").as_int(""))] == "<|eot_id|>");
        CHECK(f.at("tokenizer.chat_template").as_string("").find("<|start_header_id|>") != std::string::npos);
        CHECK(f.at("tokenizer.ggml.add_bos_token").summary() ==
              (tokenizer->encode("a", true).size() > tokenizer->encode("a").size() ? "true" : "false"));

        REQUIRE(f.tensors().size() == 21);  // embeddings, 9 per layer, final norm, output
        CHECK(f.tensors().front().name == "token_embd.weight");
        CHECK(f.tensors().back().name == "output.weight");
        CHECK(f.tensor("blk.1.ffn_down.weight")->dims == std::vector<std::int64_t>{512, 256});
        CHECK(f.tensor("blk.0.attn_norm.weight")->type == GgmlType::f32);
        check_values(f, dir, config, true);
    }
    // llama.cpp's q4_k_m mix at 2 layers: the last layer's attn_v and ffn_down in q6_K, the output too.
    const auto m = data::GgufFile::open(tmp.path() / "out" / "q4_k_m.gguf");
    CHECK(m.tensor("blk.0.attn_v.weight")->type == GgmlType::q4_K);
    CHECK(m.tensor("blk.1.attn_v.weight")->type == GgmlType::q6_K);
    CHECK(m.tensor("blk.0.ffn_down.weight")->type == GgmlType::q4_K);
    CHECK(m.tensor("blk.1.ffn_down.weight")->type == GgmlType::q6_K);
    CHECK(m.tensor("output.weight")->type == GgmlType::q6_K);
    CHECK(m.tensor("token_embd.weight")->type == GgmlType::q4_K);
    CHECK(data::GgufFile::open(tmp.path() / "out" / "q4_0.gguf").tensor("output.weight")->type == GgmlType::q6_K);
    CHECK(data::GgufFile::open(tmp.path() / "out" / "q8_0.gguf").tensor("output.weight")->type == GgmlType::q8_0);

    // The Modelfile names the last file and stops at the template's markers and EOS.
    const std::string modelfile = text_of(tmp.path() / "out" / "Modelfile");
    CHECK(modelfile.find("FROM ./q6_k.gguf\n") != std::string::npos);
    CHECK(modelfile.find("PARAMETER stop \"<|eot_id|>\"\n") != std::string::npos);
    CHECK(modelfile.find("<|begin_of_text|>") == std::string::npos);
}

TEST_CASE("GGUF export of a Qwen 3 with tied embeddings: its own names, q and k as they are, the embeddings as output") {
    testing::TempDir tmp;
    const auto config = testing::tiny_of_type("qwen3", shape(true));
    const auto dir = testing::save_tiny_llama(tmp.path() / "qwen3", config, 4);
    models::export_gguf(dir, tmp.path() / "q.gguf", {.type = "f32"});
    const auto f = data::GgufFile::open(tmp.path() / "q.gguf");
    CHECK(f.at("general.architecture").as_string("") == "qwen3");
    CHECK(f.at("qwen3.block_count").as_int("") == 2);
    CHECK(f.find("qwen3.rope.dimension_count") == nullptr);  // llama's alone, as llama.cpp's converter writes it
    CHECK(f.tensor("blk.0.attn_q_norm.weight") != nullptr);
    CHECK(f.tensor("output.weight") == nullptr);
    check_values(f, dir, config, false);
    models::export_gguf(dir, tmp.path() / "k.gguf", {.type = "q4_k_m", .modelfile = false});
    CHECK(data::GgufFile::open(tmp.path() / "k.gguf").tensor("token_embd.weight")->type == GgmlType::q6_K);
}

TEST_CASE("GGUF export of a SmolLM3: llama.cpp's smollm3 (every fourth layer without rope); other patterns refused") {
    testing::TempDir tmp;
    testing::TinyLlama four = shape();
    four.layers = 4;
    nlohmann::json j = testing::tiny_of_type("smollm3", four).to_json();
    j["no_rope_layers"] = {1, 1, 1, 0};  // SmolLM3-3B's pattern, at 4 layers
    const auto config = models::parse_llama_config(j, "smollm3");
    const auto dir = testing::save_tiny_llama(tmp.path() / "smol", config, 8);
    models::export_gguf(dir, tmp.path() / "s.gguf", {.type = "f32"});
    const auto f = data::GgufFile::open(tmp.path() / "s.gguf");
    CHECK(f.at("general.architecture").as_string("") == "smollm3");
    CHECK(f.at("smollm3.block_count").as_int("") == 4);
    CHECK(f.at("smollm3.rope.dimension_count").as_int("") == 64);
    CHECK(f.at("smollm3.vocab_size").as_int("") == testing::kTinyTokenizerVocab);
    check_values(f, dir, config, true);  // q and k in llama.cpp's llama order

    // The fixture's own pattern (every second layer unrotated) has no form in llama.cpp.
    const auto other = testing::save_tiny_llama(tmp.path() / "other", testing::tiny_of_type("smollm3", shape()), 9);
    CHECK_THROWS_WITH_AS(models::export_gguf(other, tmp.path() / "o" / "o.gguf", {}),
                         doctest::Contains("no_rope_layers 1,0 rotates layer 1 otherwise than llama.cpp's smollm3 "
                                           "architecture (every fourth layer without rope)"),
                         Error);
    CHECK(!fs::exists(tmp.path() / "o"));
}

TEST_CASE("GGUF export: rows a K-quant cannot divide fall back as llama.cpp's do, and say so") {
    testing::TempDir tmp;
    const auto config = testing::tiny_llama(shape(false, 384));
    const auto dir = testing::save_tiny_llama(tmp.path() / "m", config, 5);
    const auto report = models::export_gguf(dir, tmp.path() / "m.gguf", {.type = "q4_k_m"});
    const auto f = data::GgufFile::open(tmp.path() / "m.gguf");
    CHECK(f.tensor("blk.0.ffn_down.weight")->type == GgmlType::q5_0);
    CHECK(f.tensor("blk.1.ffn_down.weight")->type == GgmlType::q8_0);  // q6_K's fallback
    CHECK(f.tensor("blk.0.ffn_up.weight")->type == GgmlType::q4_K);
    REQUIRE(report.notes.size() == 2);
    CHECK(report.notes[0] == "blk.0.ffn_down.weight: rows of 384 values, not a multiple of 256 (q4_K): q5_0 instead, "
                             "as llama.cpp falls back");
    check_values(f, dir, config, true);
}

TEST_CASE("GGUF export refuses bad input before it writes anything") {
    testing::TempDir tmp;
    const auto dir = testing::save_tiny_llama(tmp.path() / "m", testing::tiny_llama(shape()), 6);
    const auto out = tmp.path() / "o" / "m.gguf";
    CHECK_THROWS_WITH_AS(models::export_gguf(dir, out, {.type = "q3_k"}),
                         doctest::Contains("type=q3_k is not a GGUF file type levers writes (f32, f16, bf16, q8_0, q4_0, "
                                           "q4_k_m, q5_k_m, q6_k)"),
                         Error);
    CHECK_THROWS_WITH_AS(models::export_gguf(dir, tmp.path() / "m.bin", {}),
                         doctest::Contains((("to=" + (tmp.path() / "m.bin").string() + ": give a file name ending in .gguf")).c_str()),
                         Error);
    const auto gemma = testing::save_tiny_llama(tmp.path() / "g", testing::tiny_of_type("gemma2", shape()), 7);
    CHECK_THROWS_WITH_AS(models::export_gguf(gemma, out, {}),
                         doctest::Contains("model_type gemma2 has no GGUF export in levers yet; it exports llama"), Error);
    fs::create_directories(tmp.path() / "bare");
    fs::copy(dir / "config.json", tmp.path() / "bare");
    fs::copy(dir / "model.safetensors", tmp.path() / "bare");
    CHECK_THROWS_WITH_AS(models::export_gguf(tmp.path() / "bare", out, {}), doctest::Contains("tokenizer.json"), Error);
    CHECK(!fs::exists(tmp.path() / "o"));

    models::export_gguf(dir, out, {.type = "q8_0"});
    const auto size = fs::file_size(out);
    CHECK_THROWS_WITH_AS(models::export_gguf(dir, out, {.type = "f32"}),
                         doctest::Contains((out.string() + " exists; --set overwrite=true replaces it").c_str()), Error);
    CHECK(fs::file_size(out) == size);
    fs::remove(out);
    CHECK_THROWS_WITH_AS(models::export_gguf(dir, out, {.type = "f32"}),
                         doctest::Contains(((tmp.path() / "o" / "Modelfile").string() + " exists").c_str()), Error);
    models::export_gguf(dir, out, {.type = "f32", .overwrite = true});
    CHECK(fs::file_size(out) > size);
    for (const auto& entry : fs::directory_iterator(tmp.path() / "o"))  // no temporary left beside them
        CHECK((entry.path().filename() == "m.gguf" || entry.path().filename() == "Modelfile"));
}

TEST_CASE("GGUF export of a SentencePiece-style tokenizer (Llama 2's): scores replay the merges, bytes typed" *
          testing::needs({testing::Data::hf_tokenizers})) {
    testing::TempDir tmp;
    auto config = testing::tiny_llama({.vocab = 32000, .hidden = 256, .intermediate = 256, .layers = 1, .heads = 4,
                                       .kv_heads = 4, .context = 64});
    const auto dir = testing::save_tiny_llama(tmp.path() / "m", config, 8,
                                              data::data_dir() / "tokenizers" / "llama2");
    models::export_gguf(dir, tmp.path() / "m.gguf", {.type = "f16"});
    const auto f = data::GgufFile::open(tmp.path() / "m.gguf");
    const auto tokenizer = models::hf_tokenizer(dir, 32000);
    CHECK(f.at("tokenizer.ggml.model").as_string("") == "llama");
    CHECK(f.find("tokenizer.ggml.merges") == nullptr);
    CHECK(f.find("tokenizer.ggml.pre") == nullptr);
    const auto& tokens = f.at("tokenizer.ggml.tokens").as_strings("");
    const auto& scores = std::get<std::vector<double>>(f.at("tokenizer.ggml.scores").value);
    const auto& types = std::get<std::vector<std::int64_t>>(f.at("tokenizer.ggml.token_type").value);
    REQUIRE(tokens.size() == 32000);
    // The first merges make the best-scoring tokens, in their order.
    const auto& merges = tokenizer->spec().merges;
    const auto id = [&](const std::string& t) { return static_cast<std::size_t>(*tokenizer->token_id(t)); };
    CHECK(scores[id(merges[0].first + merges[0].second)] == -1);
    CHECK(scores[id(merges[1].first + merges[1].second)] == -2);
    CHECK(scores[id(merges[0].first + merges[0].second)] > scores[id(merges[500].first + merges[500].second)]);
    CHECK(tokens[id("<0x41>")] == "<0x41>");
    CHECK(types[id("<0x41>")] == 6);  // byte
    CHECK(types[static_cast<std::size_t>(f.at("tokenizer.ggml.unknown_token_id").as_int(""))] == 2);
    CHECK(types[static_cast<std::size_t>(f.at("tokenizer.ggml.bos_token_id").as_int(""))] == 3);
    CHECK(f.at("tokenizer.ggml.add_space_prefix").summary() == "true");
    CHECK(f.at("tokenizer.ggml.add_bos_token").summary() == "true");
}
