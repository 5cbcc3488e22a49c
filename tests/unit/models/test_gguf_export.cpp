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

// Every tensor of `file` against the directory's: names mapped (Gemma's sandwich norms, Phi-3's fused
// products), rows reordered where `interleave`, Gemma's norms read as 1 + weight.
void check_values(const data::GgufFile& file, const fs::path& dir, const models::LlamaConfig& c, bool interleave) {
    const auto source = data::SafeTensorsFile::open(dir / "model.safetensors");
    std::map<std::string, std::string> names = {
        {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},           {"attn_norm.weight", "input_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},  {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},  {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},       {"ffn_down.weight", "mlp.down_proj.weight"},
        {"attn_qkv.weight", "self_attn.qkv_proj.weight"}, {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}};
    if (c.sandwich_norms) names["ffn_norm.weight"] = "pre_feedforward_layernorm.weight";
    if (c.fused_projections) names["ffn_up.weight"] = "mlp.gate_up_proj.weight";
    for (const auto& t : file.tensors()) {
        CAPTURE(t.name);
        if (t.name.starts_with("rope_factors_")) continue;  // made from the configuration, checked by the test
        std::string hf;
        if (t.name.starts_with("blk.")) {
            const auto dot = t.name.find('.', 4);
            hf = "model.layers." + t.name.substr(4, dot - 4) + "." + names.at(t.name.substr(dot + 1));
        } else {
            hf = names.at(t.name);
        }
        auto expected = source.tensors().at(hf).to_f32().values();
        if (hf.ends_with("norm.weight"))
            for (auto& v : expected) v += c.norm_offset;
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

// A tiny Gemma whose queries llama.cpp scales as it does (by the head size's root).
models::LlamaConfig tiny_gemma(const std::string& type, std::int64_t layers) {
    testing::TinyLlama t = shape(true);
    t.layers = layers;
    nlohmann::json j = testing::tiny_of_type(type, t).to_json();
    j["query_pre_attn_scalar"] = type == "gemma2" ? 64 : j.at("head_dim").get<int>();
    return models::parse_llama_config(j, type);
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

TEST_CASE("GGUF export of Gemma 2 and 3: norms as 1 + weight, sandwich norms by llama.cpp's names, soft caps, windows") {
    testing::TempDir tmp;
    const auto gemma2 = tiny_gemma("gemma2", 2);
    const auto dir2 = testing::save_tiny_llama(tmp.path() / "g2", gemma2, 10);
    models::export_gguf(dir2, tmp.path() / "g2.gguf", {.type = "f32", .modelfile = false});
    const auto f2 = data::GgufFile::open(tmp.path() / "g2.gguf");
    CHECK(f2.at("general.architecture").as_string("") == "gemma2");
    CHECK(f2.at("gemma2.attention.sliding_window").as_int("") == 4);
    CHECK(f2.find("gemma2.attention.sliding_window_pattern") == nullptr);  // llama.cpp's default, every other layer
    CHECK(f2.at("gemma2.attn_logit_softcapping").as_real("") == doctest::Approx(2.0));
    CHECK(f2.at("gemma2.final_logit_softcapping").as_real("") == doctest::Approx(3.0));
    CHECK(f2.at("gemma2.attention.key_length").as_int("") == 64);
    for (const char* name : {"blk.1.post_attention_norm.weight", "blk.1.ffn_norm.weight", "blk.1.post_ffw_norm.weight"})
        CHECK(f2.tensor(name) != nullptr);
    CHECK(f2.tensor("output.weight") == nullptr);
    check_values(f2, dir2, gemma2, false);  // rotated by halves in llama.cpp too: q and k as they are

    const auto gemma3 = tiny_gemma("gemma3_text", 3);  // sliding, full, sliding: a period of two
    const auto dir3 = testing::save_tiny_llama(tmp.path() / "g3", gemma3, 11);
    models::export_gguf(dir3, tmp.path() / "g3.gguf", {.type = "f32", .modelfile = false});
    const auto f3 = data::GgufFile::open(tmp.path() / "g3.gguf");
    CHECK(f3.at("general.architecture").as_string("") == "gemma3");
    CHECK(f3.at("gemma3.attention.sliding_window_pattern").as_int("") == 2);  // llama.cpp's default is 6
    CHECK(f3.at("gemma3.rope.freq_base").as_real("") == doctest::Approx(1e6));
    CHECK(f3.at("gemma3.rope.freq_base_swa").as_real("") == doctest::Approx(1e4));
    CHECK(f3.at("gemma3.rope.scaling.type").as_string("") == "linear");
    CHECK(f3.find("gemma3.attn_logit_softcapping") == nullptr);
    CHECK(f3.tensor("blk.2.attn_q_norm.weight") != nullptr);
    check_values(f3, dir3, gemma3, false);

    // What llama.cpp hard-codes must be what the model does: its query scale, its sliding pattern, tied output.
    const auto out = tmp.path() / "o" / "g.gguf";
    const auto scaled = testing::save_tiny_llama(tmp.path() / "scaled", testing::tiny_of_type("gemma2", shape(true)), 12);
    CHECK_THROWS_WITH_AS(models::export_gguf(scaled, out, {}),
                         doctest::Contains("query_pre_attn_scalar 16, and llama.cpp's gemma2 architecture scales queries "
                                           "by 64^-1/2 at 2 layers"), Error);
    nlohmann::json j = tiny_gemma("gemma3_text", 3).to_json();
    j["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
    const auto odd = testing::save_tiny_llama(tmp.path() / "odd", models::parse_llama_config(j, "odd"), 13);
    CHECK_THROWS_WITH_AS(models::export_gguf(odd, out, {}),
                         doctest::Contains("layer_types full_attention,sliding_attention,full_attention has no form in "
                                           "llama.cpp's gemma3 architecture"), Error);
    j = tiny_gemma("gemma2", 2).to_json();
    j["tie_word_embeddings"] = false;
    const auto untied = testing::save_tiny_llama(tmp.path() / "untied", models::parse_llama_config(j, "untied"), 14);
    CHECK_THROWS_WITH_AS(models::export_gguf(untied, out, {}),
                         doctest::Contains("tie_word_embeddings is false, and llama.cpp's gemma2 architecture takes the "
                                           "embeddings as the output"), Error);
    CHECK(!fs::exists(tmp.path() / "o"));
}

TEST_CASE("GGUF export of a Phi-3: fused qkv and gate_up as llama.cpp's phi3 takes them, longrope's factors") {
    testing::TempDir tmp;
    const auto config = testing::tiny_of_type("phi3", shape());
    const auto dir = testing::save_tiny_llama(tmp.path() / "phi", config, 15);
    const auto report = models::export_gguf(dir, tmp.path() / "p.gguf", {.type = "f32"});
    const auto f = data::GgufFile::open(tmp.path() / "p.gguf");
    CHECK(f.at("general.architecture").as_string("") == "phi3");
    CHECK(f.at("phi3.rope.dimension_count").as_int("") == 48);  // three quarters of 64 turn
    CHECK(f.at("phi3.rope.scaling.original_context_length").as_int("") == 32);
    CHECK(f.at("phi3.rope.scaling.attn_factor").as_real("") ==
          doctest::Approx(std::sqrt(1 + std::log(2.0) / std::log(32.0))));
    CHECK(f.at("phi3.attention.sliding_window").as_int("") == 6);
    REQUIRE(report.notes.size() == 1);
    CHECK(report.notes[0].find("llama.cpp's phi3 architecture runs without it") != std::string::npos);
    CHECK(f.tensor("blk.0.attn_qkv.weight")->dims == std::vector<std::int64_t>{256, 256 + 2 * 2 * 64});
    CHECK(f.tensor("blk.0.ffn_up.weight")->dims == std::vector<std::int64_t>{256, 2 * 512});
    CHECK(f.tensor("blk.0.ffn_gate.weight") == nullptr);
    const auto long_factors = f.read_f32(*f.tensor("rope_factors_long.weight"));
    const auto short_factors = f.read_f32(*f.tensor("rope_factors_short.weight"));
    REQUIRE(long_factors.size() == 24);
    REQUIRE(short_factors.size() == 24);
    for (std::size_t i = 0; i < 24; ++i) {
        CHECK(long_factors[i] == static_cast<float>(config.rope_scaling->long_factor[i]));
        CHECK(short_factors[i] == static_cast<float>(config.rope_scaling->short_factor[i]));
    }
    check_values(f, dir, config, false);
    models::export_gguf(dir, tmp.path() / "k.gguf", {.type = "q4_k_m", .modelfile = false});
    const auto k = data::GgufFile::open(tmp.path() / "k.gguf");
    CHECK(k.tensor("blk.0.attn_qkv.weight")->type == GgmlType::q5_K);  // llama.cpp's q4_k_m puts fused qkv a step up
    CHECK(k.tensor("rope_factors_long.weight")->type == GgmlType::f32);
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
    nlohmann::json bert = testing::tiny_llama(shape()).to_json();
    fs::create_directories(tmp.path() / "bert");
    fs::copy(dir / "model.safetensors", tmp.path() / "bert");
    fs::copy(dir / "tokenizer.json", tmp.path() / "bert");
    bert["model_type"] = "bert";
    std::ofstream(tmp.path() / "bert" / "config.json") << bert.dump();
    CHECK_THROWS_WITH_AS(models::export_gguf(tmp.path() / "bert", out, {}), doctest::Contains("bert"), Error);
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
