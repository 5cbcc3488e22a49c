// export: a Hugging Face model of the Llama family to one GGUF file for
// llama.cpp, Ollama or LM Studio, in the file type asked for (f16 to
// q4_k_m), with an Ollama Modelfile beside it. The model is a directory
// (--set model=DIR) or what a fine_tune, sft, dpo or grpo run made (--set from=): a
// finished run's model/ (LoRA merged), or one of its checkpoints, merged
// into a Hugging Face directory beside the output first and removed after.
#include "levers/models/gguf_export.hpp"
#include "levers/recipe/checkpoints.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/gguf_params.hpp"
#include "recipes/tuned_checkpoint.hpp"

#include <chrono>
#include <optional>

namespace levers_recipe_export {

namespace {

using namespace levers;
namespace fs = std::filesystem;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory (Llama, Mistral, Qwen 2/3); with "
                                   "from=CHECKPOINT, the base that run read, if it moved"};
const Param<std::string> from_run{"from", "", "a fine_tune, sft, dpo or grpo run directory (its model/, LoRA merged; or, "
                                  "unfinished, its newest checkpoint) or one of its checkpoints"};
const Param<std::string> to_file{"to", "", "the GGUF file to write (a Modelfile for Ollama goes beside it)"};
const Param<std::string> type{"type", "f16", "the file type: f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k"};

// A Hugging Face directory to export, or a checkpoint to make one of first.
struct Source {
    fs::path dir;
    std::optional<recipes::TunedCheckpoint> checkpoint;
    const fs::path& model() const { return checkpoint ? checkpoint->base : dir; }
};

Source source(const Config& cfg) {
    const std::string dir = cfg[model_dir], run = cfg[from_run];
    if (run.empty()) {
        LEVERS_CHECK(!dir.empty(), "export needs one model: --set model=DIR (a Hugging Face directory) or "
                     "--set from=RUN (a fine_tune, sft, dpo or grpo run directory, or one of its checkpoints)");
        return {dir, {}};
    }
    const fs::path from = run;
    if (fs::is_regular_file(from)) return {{}, recipes::read_tuned_checkpoint(from, dir)};
    LEVERS_CHECK(fs::is_directory(from), "--set from={}: no such file or directory (expected a fine_tune, sft, dpo or grpo run "
                 "directory, or one of its checkpoints)", run);
    if (fs::is_directory(from / "model")) {
        LEVERS_CHECK(dir.empty(), "--set model={} with --set from={}: the run is finished and its model/ is what is "
                     "exported; --set model= goes with a checkpoint (the base its run read)", dir, run);
        return {from / "model", {}};
    }
    const auto newest = newest_checkpoint(from);
    LEVERS_CHECK(newest.has_value(), "--set from={}: no model/ there (saved when a fine_tune, sft, dpo or grpo run ends) and no "
                 "checkpoint (checkpoints/step-*.ckpt)", run);
    return {{}, recipes::read_tuned_checkpoint(*newest, dir)};
}

void check(const Config& cfg) {
    LEVERS_CHECK(!cfg[to_file].empty(), "export needs --set to=FILE.gguf");
    models::check_gguf_export(source(cfg).model(), cfg[to_file], {.type = cfg[type], .overwrite = cfg[recipes::overwrite]});
}

// The checkpoint merged into a Hugging Face directory beside the output, exported, and the directory removed
// whatever happens.
models::GgufExportReport export_checkpoint(const recipes::TunedCheckpoint& ck, const Config& cfg) {
    const fs::path out = cfg[to_file];
    const fs::path staged = out.string() + ".merging";
    struct Cleanup {
        fs::path dir;
        ~Cleanup() {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    } cleanup{staged};
    fs::remove_all(staged);  // left by a run that was killed
    fmt::print("{}: {} step {} of {}{}, merged into {}\n", ck.file.string(), ck.recipe, ck.step, ck.base.string(),
               ck.lora.rank > 0 ? fmt::format(" with LoRA rank {}", ck.lora.rank) : "", staged.string());
    recipes::save_tuned_checkpoint(ck, staged);
    const std::string name = fmt::format("{}-step{}", fs::weakly_canonical(ck.base).filename().string(), ck.step);
    return recipes::write_gguf(staged, out, cfg[type], cfg[recipes::overwrite], name);
}

Result run_export(const Config& cfg) {
    const auto start = std::chrono::steady_clock::now();
    const Source src = source(cfg);
    const auto report = src.checkpoint ? export_checkpoint(*src.checkpoint, cfg)
                                       : recipes::write_gguf(src.dir, cfg[to_file], cfg[type], cfg[recipes::overwrite]);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Result out = {{"file", report.file.string()}, {"bytes", report.bytes}, {"seconds", seconds},
                  {"tensors", report.tensors_by_type}, {"modelfile", report.modelfile.string()}};
    if (src.checkpoint) out["checkpoint"] = src.checkpoint->file.string(), out["step"] = src.checkpoint->step;
    return out;
}

}  // namespace

LEVERS_RECIPE(export) {
    return levers::recipe("export")
        .describe("a Hugging Face model (or a fine_tune/sft/dpo/grpo run's, or one of its checkpoints) to GGUF for llama.cpp and Ollama, quantized")
        .params(model_dir, from_run, to_file, type, recipes::overwrite)
        .check(check)
        .run(run_export);
}

}  // namespace levers_recipe_export
