// GGUF export as the recipes share it: export itself, and fine_tune, sft, dpo and grpo's
// --set gguf=TYPE, which writes model-TYPE.gguf (and an Ollama Modelfile)
// beside the run's model/.
#pragma once

#include "levers/core/live_progress.hpp"
#include "levers/models/gguf_export.hpp"
#include "levers/recipe/recipe.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace levers::recipes {

inline const Param<bool> overwrite{"overwrite", false, "replace an existing output file"};
inline const Param<std::string> gguf{"gguf", "", "also export the saved model to GGUF of this type (f16, q8_0, "
                                     "q4_k_m, ...) beside model/"};

// Writes the file with a progress line on a terminal, then says what it wrote.
inline models::GgufExportReport write_gguf(const std::filesystem::path& dir, const std::filesystem::path& out,
                                           const std::string& type, bool replace, const std::string& name = "") {
    const bool live = live_progress_mode() == LiveProgress::terminal;
    models::GgufExportOptions options{.type = type, .overwrite = replace, .name = name};
    options.progress = [live](std::size_t done, std::size_t total, const std::string& name, const std::string& as) {
        if (live) fmt::print(stderr, "\r\x1b[2K[export] {}/{} {} ({})", done, total, name, as);
    };
    const auto report = models::export_gguf(dir, out, options);
    if (live) fmt::print(stderr, "\r\x1b[2K");
    std::string types;
    for (const auto& [t, n] : report.tensors_by_type) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", n, t);
    fmt::print("wrote {} ({}, {:.1f} MiB): {} tensors of {}\n", report.file.string(), report.architecture,
               static_cast<double>(report.bytes) / (1 << 20), type, types);
    for (const auto& note : report.notes) fmt::print("note: {}\n", note);
    if (!report.modelfile.empty())
        fmt::print("wrote {}: `ollama create NAME -f {}` makes an Ollama model of it\n", report.modelfile.string(),
                   report.modelfile.string());
    return report;
}

// For fine_tune and sft's check step: the type and the model, before the run trains.
inline void check_gguf(const Config& cfg, const std::filesystem::path& model_dir) {
    if (cfg[gguf].empty()) return;
    models::check_gguf_file_type(cfg[gguf]);
    models::check_gguf_source(model_dir);
}

}  // namespace levers::recipes
