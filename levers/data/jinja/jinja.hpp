// Jinja templates of the subset chat templates use (tokenizer_config.json's
// `chat_template`), rendered as Hugging Face's apply_chat_template renders
// them: Jinja2 with trim_blocks and lstrip_blocks, loop controls, and the
// globals it adds (raise_exception, strftime_now). Text, {{ }}, {% %} and
// {# #} with whitespace control (-); if/elif/else, for (with loop.*, an
// `if` filter, else, break, continue), set (also of a namespace's
// attribute); expressions with Python's values (strings, numbers, lists,
// dicts, none), operators, subscripts and slices, string and dict methods,
// the usual filters and tests. A construct outside the subset is refused
// when the template is read (or, for a filter, test or method met only
// while rendering, then), naming it and its line.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace levers::data {

namespace jinja {
struct Program;
}

class JinjaTemplate {
public:
    // Parses `source`; `name` is how errors call it ("chat template of DIR").
    explicit JinjaTemplate(std::string_view source, std::string name = "template");
    // The text for these variables (a JSON object: strings, numbers, lists, dicts, booleans, null).
    std::string render(const nlohmann::ordered_json& variables) const;

private:
    std::shared_ptr<const jinja::Program> program_;
};

}  // namespace levers::data
