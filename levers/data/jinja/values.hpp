// What Jinja does with values (levers/data/jinja/jinja.hpp), as Python does:
// truth, str() and repr(), json.dumps, strings as code points, and the
// built-in filters, tests, string and dict methods and globals. Errors are
// plain messages; the renderer adds the template's name and the line.
#pragma once

#include "levers/data/jinja/syntax.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace levers::data::jinja {

// What the built-ins throw; the renderer names the template and the line.
struct ValueError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline Value undefined() { return Value(Value::value_t::discarded); }
inline bool is_undefined(const Value& v) { return v.is_discarded(); }

// A namespace() object: a dict whose attributes `set` may change.
constexpr const char* kNamespaceKey = "\x01namespace";
inline bool is_namespace(const Value& v) { return v.is_object() && v.contains(kNamespaceKey); }

// Positional and keyword arguments, evaluated.
struct Arguments {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;
    // The argument at `index`, or named `name`, or `fallback`.
    Value get(std::size_t index, const char* name, const Value& fallback) const;
};

bool truthy(const Value& v);
std::string type_name(const Value& v);
std::string str(const Value& v);   // Python's str()
std::string repr(const Value& v);  // Python's repr()
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none, Python's ", " and ": " separators).
std::string to_json(const Value& v, int indent = -1);

// Strings as Python sees them: code points.
std::vector<std::string> code_points(const std::string& s);
// Python's str.strip(chars) family: `which` 'b'oth, 'l'eft or 'r'ight; chars null: whitespace.
std::string strip(const std::string& s, const Value& chars, char which);

Value call_filter(const std::string& name, const Value& input, const Arguments& args);
bool call_test(const std::string& name, const Value& input, const Arguments& args);
// obj.name(args); throws naming the method where `obj` has none of that name.
Value call_method(const Value& obj, const std::string& name, const Arguments& args);
// namespace(), range(), dict(), raise_exception(), strftime_now().
bool is_global(const std::string& name);
Value call_global(const std::string& name, const Arguments& args);

// Python's operators on values: + - * / // % ** and comparisons (== != < > <= >=), `in`.
Value arithmetic(const std::string& op, const Value& a, const Value& b);
bool compare(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

}  // namespace levers::data::jinja
