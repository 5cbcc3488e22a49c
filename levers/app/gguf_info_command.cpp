// `recipe gguf-info FILE`: what a GGUF file holds, as llama.cpp will read it:
// its metadata (long arrays shortened) and its tensor table (name, ggml
// type, dimensions innermost first, bytes), then the count of each type.
#include "levers/app/command.hpp"
#include "levers/core/error.hpp"
#include "levers/data/gguf.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>

namespace levers {

namespace {

int gguf_info(const std::string& path, bool tensors) {
    LEVERS_CHECK(std::filesystem::is_regular_file(path), "{}: no such file (give a .gguf file)", path);
    const auto f = data::GgufFile::open(path);
    fmt::print("{}: GGUF version {}, {:.1f} MiB, {} metadata keys, {} tensors, data aligned to {} bytes\n", path,
               f.version(), static_cast<double>(f.size()) / (1 << 20), f.metadata().size(), f.tensors().size(),
               f.alignment());
    fmt::print("\nmetadata\n");
    for (const auto& [key, value] : f.metadata()) fmt::print("  {:<44} {}\n", key, value.summary());
    std::map<std::string, std::pair<int, std::uint64_t>> by_type;
    if (tensors) fmt::print("\ntensors\n");
    for (const auto& t : f.tensors()) {
        const std::string type = data::ggml_type_name(t.type);
        const bool known = data::ggml_type_info(t.type) != nullptr;
        auto& [count, bytes] = by_type[type];
        ++count;
        bytes += known ? t.bytes() : 0;
        if (tensors)
            fmt::print("  {:<36} {:<6} [{}] {}\n", t.name, type, fmt::join(t.dims, ", "),
                       known ? fmt::format("{:.2f} MiB", static_cast<double>(t.bytes()) / (1 << 20)) : "");
    }
    fmt::print("\n");
    for (const auto& [type, n] : by_type)
        fmt::print("{:>5} tensors of {:<6} {:.1f} MiB\n", n.first, type, static_cast<double>(n.second) / (1 << 20));
    return 0;
}

class GgufInfoCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        auto* cmd = command_ = app.add_subcommand("gguf-info", "What a GGUF file holds: its metadata and tensor table");
        cmd->add_option("file", file_, "a .gguf file (levers' export, llama.cpp's or anyone's)")->required();
        cmd->add_flag("--no-tensors", no_tensors_, "the metadata and the count of each type, without the table");
        cmd->footer(ex("\nExamples:\n  {recipe} run export --set model=runs/sft/latest/model --set to=model.gguf "
                       "--set type=q4_k_m\n  {recipe} gguf-info model.gguf"));
    }
    int run(int, char**) override { return gguf_info(file_, !no_tensors_); }

private:
    std::string file_;
    bool no_tensors_ = false;
};

}  // namespace

std::unique_ptr<Command> gguf_info_command() { return std::make_unique<GgufInfoCommand>(); }

}  // namespace levers
