// export: a Hugging Face model of the Llama family to one GGUF file for
// llama.cpp, Ollama or LM Studio, in the file type asked for (f16 to
// q4_k_m), with an Ollama Modelfile beside it. The model is a directory
// (--set model=DIR) or what a fine_tune or sft run saved (--set from=RUN_DIR:
// its model/, LoRA merged).
#include "levers/models/gguf_export.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/gguf_params.hpp"

#include <chrono>

namespace {

using namespace levers;
namespace fs = std::filesystem;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory (Llama, Mistral, Qwen 2/3)"};
const Param<std::string> from_run{"from", "", "a fine_tune or sft run directory: its model/ (LoRA merged) is exported"};
const Param<std::string> to_file{"to", "", "the GGUF file to write (a Modelfile for Ollama goes beside it)"};
const Param<std::string> type{"type", "f16", "the file type: f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k"};

fs::path source(const Config& cfg) {
    const std::string dir = cfg[model_dir], run = cfg[from_run];
    LEVERS_CHECK(dir.empty() != run.empty(), "export needs one model: --set model=DIR (a Hugging Face directory) or "
                 "--set from=RUN_DIR (a fine_tune or sft run directory)");
    if (!dir.empty()) return dir;
    LEVERS_CHECK(fs::is_directory(fs::path(run) / "model"), "--set from={}: no model/ there (fine_tune and sft "
                 "save it when a run of a Hugging Face model ends; an unfinished run resumes with recipe run "
                 "--resume)", run);
    return fs::path(run) / "model";
}

void check(const Config& cfg) {
    LEVERS_CHECK(!cfg[to_file].empty(), "export needs --set to=FILE.gguf");
    models::check_gguf_export(source(cfg), cfg[to_file], {.type = cfg[type], .overwrite = cfg[recipes::overwrite]});
}

Result run_export(const Config& cfg) {
    const auto start = std::chrono::steady_clock::now();
    const auto report = recipes::write_gguf(source(cfg), cfg[to_file], cfg[type], cfg[recipes::overwrite]);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return {{"file", report.file.string()}, {"bytes", report.bytes}, {"seconds", seconds},
            {"tensors", report.tensors_by_type}, {"modelfile", report.modelfile.string()}};
}

}  // namespace

LEVERS_RECIPE(export) {
    return levers::recipe("export")
        .describe("a Hugging Face model (or a fine_tune/sft run's) to GGUF for llama.cpp and Ollama, quantized")
        .params(model_dir, from_run, to_file, type, recipes::overwrite)
        .check(check)
        .run(run_export);
}
