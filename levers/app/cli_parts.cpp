#include "levers/app/cli_parts.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace levers {

Examples::Examples(std::string program, std::vector<std::string> recipes)
    : program_(std::move(program)), recipes_(std::move(recipes)) {}

std::string Examples::pick(const char* shipped) const {
    const bool has = std::find(recipes_.begin(), recipes_.end(), shipped) != recipes_.end();
    return has || recipes_.empty() ? shipped : recipes_.front();
}

std::string Examples::operator()(std::string_view text) const {
    return fmt::format(fmt::runtime(text), fmt::arg("recipe", program_), fmt::arg("pretrain", pick("pretrain")),
                       fmt::arg("classify", pick("classify")), fmt::arg("fine_tune", pick("fine_tune")));
}

CLI::Option* add_device_option(CLI::App& command, std::string& device, const std::string& what) {
    return command.add_option("--device", device, what + ": auto, cpu or cuda (default auto: the GPUs where "
                                                         "there are, else the CPU)")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
}

CLI::Option* add_precision_option(CLI::App& command, std::string& precision, const std::string& what) {
    return command.add_option("--precision", precision, what + ": f32, or bf16 on GPUs (bf16 weights, activations and "
                                                               "gradients; f32 sums and master weights)")
        ->check(CLI::IsMember({"f32", "bf16"}));
}

}  // namespace levers
