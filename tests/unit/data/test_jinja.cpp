// The Jinja engine of chat templates against Jinja2 set up as Hugging Face's
// apply_chat_template sets it up (tests/reference/chat/: the script, the
// conversations, constructs.jinja and what Jinja2 rendered): every
// construct the engine knows, and the Llama 3, Qwen 3 and Gemma 3 chat
// templates on turns, several turns, the generation prompt, reasoning, tools
// (Gemma's refuses a tool's turn, as in Jinja2). Then what
// it refuses, by construct and line.
#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/files.hpp"
#include "levers/data/jinja/jinja.hpp"
#include "tests/installed_data.hpp"
#include "tests/source_tree.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace levers;
using data::JinjaTemplate;
using Json = nlohmann::ordered_json;

namespace {

std::filesystem::path chat_reference(const char* file) { return testing::source_path("tests/reference/chat") / file; }

// Every rendering of `template_name` in rendered.json against the engine's, the variables as render.py makes them.
void check_renderings(const std::string& template_name, const std::string& source, const Json& special) {
    const JinjaTemplate tpl(source, template_name);
    const Json conversations = Json::parse(read_file(chat_reference("conversations.json")));
    const Json rendered = Json::parse(read_file(chat_reference("rendered.json")));
    int checked = 0;
    for (const Json& want : rendered) {
        if (want["template"] != template_name) continue;
        for (const Json& c : conversations) {
            if (c["name"] != want["case"]) continue;
            Json variables = special;
            variables["messages"] = c["messages"];
            variables["tools"] = c.contains("tools") ? c["tools"] : Json();
            variables["add_generation_prompt"] = c["add_generation_prompt"];
            if (c.contains("extra"))
                for (const auto& [k, v] : c["extra"].items()) variables[k] = v;
            if (want.contains("raised")) {  // Jinja2 stopped at the template's raise_exception: so must the engine
                const std::string raised = "the template raised: " + want["raised"].get<std::string>();
                CHECK_THROWS_WITH_AS(tpl.render(variables), doctest::Contains(raised.c_str()), Error);
                ++checked;
                continue;
            }
            const std::string got = tpl.render(variables), expected = want["text"].get<std::string>();
            // Where they part, with some context, when they do.
            std::size_t same = 0;
            while (same < got.size() && same < expected.size() && got[same] == expected[same]) ++same;
            const std::size_t from = same > 40 ? same - 40 : 0;
            INFO(want["case"].get<std::string>(), ": from byte ", from, "\n got: ", got.substr(from, 120),
                 "\nwant: ", expected.substr(from, 120));
            CHECK(got == expected);
            ++checked;
        }
    }
    CHECK(checked == 6);
}

std::string refusal(const std::string& source, const Json& variables = Json::object()) {
    try {
        JinjaTemplate(source, "t").render(variables);
    } catch (const Error& e) {
        return e.message();
    }
    return "(rendered)";
}

}  // namespace

TEST_CASE("the Jinja engine renders every construct it knows as Jinja2 does (trim_blocks, lstrip_blocks)") {
    check_renderings("constructs", read_file(chat_reference("constructs.jinja")),
                     Json{{"bos_token", "<s>"}, {"eos_token", "</s>"}});
}

TEST_CASE("the Llama 3, Qwen 3 and Gemma 3 chat templates render conversations as Hugging Face renders them" *
          testing::needs({testing::Data::hf_tokenizers})) {
    for (const char* name : {"llama3", "qwen3", "gemma3"}) {
        CAPTURE(name);
        const Json config =
            Json::parse(read_file(data::data_dir() / "tokenizers" / name / "tokenizer_config.json"));
        check_renderings(name, config["chat_template"].get<std::string>(),
                         Json{{"bos_token", config["bos_token"]}, {"eos_token", config["eos_token"]}});
    }
}

TEST_CASE("the Jinja engine refuses what it does not know, naming the construct and its line") {
    CHECK(refusal("a\n{% macro m() %}x{% endmacro %}") ==
          "t, line 2: '{% macro %}' is not supported (this engine knows if, for, set, break, continue and generation)");
    CHECK(refusal("{{ x | wordwrap }}", {{"x", "a"}}) == "t, line 1: the filter 'wordwrap' is not supported");
    CHECK(refusal("{% if x is callable2 %}{% endif %}") == "t, line 1: the test 'callable2' is not supported");
    CHECK(refusal("{{ 'a'.zfill(3) }}") == "t, line 1: a string has no method 'zfill' here");
    CHECK(refusal("{{ cycler() }}") == "t, line 1: the function 'cycler' is not supported");
    CHECK(refusal("\n\n{% if x %}never closed") == "t, line 3: 'if' is never closed (expected endif)");
    CHECK(refusal("{{ 'open }}") == "t, line 1: a tag opened with '{{' is never closed");
    CHECK(refusal("{{ 1 + }}") == "t, line 1: unexpected the end of the tag");
    CHECK(refusal("{{ missing + 1 }}") == "t, line 1: '+' on an undefined value");
    CHECK(refusal("{% set x.y = 1 %}", {{"x", Json::object()}}) == "t, line 1: 'x.y' can be set only on a namespace()");
    CHECK(refusal("{{ raise_exception('roles must alternate') }}") == "t, line 1: the template raised: roles must alternate");
    CHECK(refusal("{% for a, b in [1] %}{% endfor %}") == "t, line 1: cannot unpack 1 into 2 loop variables");
}
