// A parsed Jinja template (levers/data/jinja/jinja.hpp): statements and
// expressions as trees, built by jinja_parse.cpp and walked by
// jinja_render.cpp. Values are JSON values in insertion order; Jinja's
// undefined is the JSON "discarded" value.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace levers::data::jinja {

using Value = nlohmann::ordered_json;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    enum class Kind {
        literal,    // value
        name,       // name
        list,       // args: the items
        dict,       // args: key, value, key, value, ...
        attribute,  // args[0].name
        index,      // args[0][args[1]]
        slice,      // args[0][args[1]:args[2]:args[3]] (null parts omitted)
        call,       // args[0](args[1..], kwargs)
        filter,     // args[0] | name(args[1..], kwargs)
        test,       // args[0] is [not] name(args[1..])
        unary,      // name: "not" or "-", args[0]
        binary,     // args[0] name args[1]: or and == != < > <= >= in "not in" + - * / // % ** ~
        condition,  // args[0] if args[1] else args[2] (args[2] may be null)
    };
    Kind kind = Kind::literal;
    int line = 1;
    Value value;
    std::string name;
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    bool negated = false;  // "is not"
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
    enum class Kind { text, output, if_, for_, set, break_, continue_ };
    Kind kind = Kind::text;
    int line = 1;
    std::string text;  // text
    ExprPtr expr;      // output: the value; for: the iterable; set: the value
    // if: (condition, body) per branch, the else branch's condition null.
    std::vector<std::pair<ExprPtr, Body>> branches;
    // for: the loop variables (one, or several unpacked); set: the name, and
    // `attribute` when setting a namespace's.
    std::vector<std::string> targets;
    std::string attribute;
    ExprPtr loop_filter;  // for ... if this
    Body body, otherwise;  // for: the body, and the else body (run when nothing was iterated)
};

struct Program {
    std::string name;  // for errors
    Body body;
};

// Parses a template (trim_blocks and lstrip_blocks on, as Hugging Face's environment has them).
Program parse(std::string_view source, std::string name);

}  // namespace levers::data::jinja
