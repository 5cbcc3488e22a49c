// convert: a GPT from one file format to the other, by the extensions: a
// levers model.ckpt <-> GPT-2 weights in Hugging Face's safetensors layout.
#include "levers/recipe/recipe.hpp"
#include "levers/models/gpt_files.hpp"
#include "recipes/lm_params.hpp"

#include <fmt/format.h>

namespace levers_recipe_convert {

namespace {

using namespace levers;

const Param<std::string> from_file{"from", "", "the file to read (.ckpt or .safetensors)"};
const Param<std::string> to_file{"to", "", "the file to write (.safetensors or .ckpt)"};

void check(const Config& cfg) {
    const std::string from = cfg[from_file], to = cfg[to_file];
    LEVERS_CHECK(!from.empty() && !to.empty(), "convert needs --set from=PATH and --set to=PATH (.ckpt or .safetensors)");
    models::weights_format(from, "--set from=");
}

Result convert(const Config& cfg) {
    const std::string from = cfg[from_file], to = cfg[to_file];
    auto model = models::load_any_gpt(from, cfg[recipes::n_head]);
    models::save_any_gpt(to, *model);
    fmt::print("wrote {} ({} parameters)\n", to, model->params().size());
    return {{"from", from}, {"to", to}, {"parameters", model->params().size()}};
}

}  // namespace

LEVERS_RECIPE(convert) {
    return levers::recipe("convert")
        .describe("a GPT between levers' model.ckpt and GPT-2 safetensors (Hugging Face's layout)")
        .params(from_file, to_file, recipes::n_head)
        .check(check)
        .run(convert);
}

}  // namespace levers_recipe_convert
