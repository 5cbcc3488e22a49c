// convert: a GPT from one file format to the other, by the extensions: a
// levers model.ckpt <-> GPT-2 weights in Hugging Face's safetensors layout.
#include "levers/recipe/recipe.hpp"
#include "levers/models/gpt_files.hpp"

#include <fmt/format.h>

namespace {

using namespace levers;

void check(const Config& cfg) {
    const std::string from = cfg.get<std::string>("from"), to = cfg.get<std::string>("to");
    LEVERS_CHECK(!from.empty() && !to.empty(), "convert needs --set from=PATH and --set to=PATH (.ckpt or .safetensors)");
    models::weights_format(from, "--set from=");
}

Result convert(const Config& cfg) {
    const std::string from = cfg.get<std::string>("from"), to = cfg.get<std::string>("to");
    auto model = models::load_any_gpt(from, cfg.get<int>("n_head"));
    models::save_any_gpt(to, *model);
    fmt::print("wrote {} ({} parameters)\n", to, model->params().size());
    return {{"from", from}, {"to", to}, {"parameters", model->params().size()}};
}

}  // namespace

LEVERS_RECIPE(convert) {
    return levers::recipe("convert")
        .describe("a GPT between levers' model.ckpt and GPT-2 safetensors (Hugging Face's layout)")
        .param("from", "", "the file to read (.ckpt or .safetensors)")
        .param("to", "", "the file to write (.safetensors or .ckpt)")
        .param("n_head", 0, "attention heads of safetensors weights (0: from their metadata or config.json)", at_least(0))
        .check(check)
        .run(convert);
}
