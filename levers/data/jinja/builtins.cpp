// Jinja's values as Python treats them, and the built-ins chat templates use
// (jinja_values.hpp). Anything else is refused by name.
#include "levers/data/jinja/values.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

namespace levers::data::jinja {

namespace {

[[noreturn]] void fail(const std::string& what) { throw ValueError(what); }

bool is_number(const Value& v) { return v.is_number() && !v.is_boolean(); }
double number(const Value& v, const char* what) {
    if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
    if (!v.is_number()) fail(fmt::format("{} needs a number, got {}", what, type_name(v)));
    return v.get<double>();
}
const std::string& string(const Value& v, const char* what) {
    if (!v.is_string()) fail(fmt::format("{} needs a string, got {}", what, type_name(v)));
    return v.get_ref<const std::string&>();
}
// Python's float repr: the shortest round trip, with ".0" on whole numbers.
std::string float_text(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    std::string s = fmt::format("{}", d);
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    return s;
}
std::string quoted(const std::string& s) {
    const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (const char c : s) {
        if (c == '\\' || c == q) out += '\\', out += c;
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else out += c;
    }
    return out + q;
}
bool is_space(std::uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}
std::uint32_t decode(const std::string& cp) {
    const auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(cp[i])); };
    if (cp.size() == 1) return b(0);
    if (cp.size() == 2) return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
    if (cp.size() == 3) return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
    return ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
}
std::string join(const std::vector<std::string>& parts, std::size_t from, std::size_t to) {
    std::string out;
    for (std::size_t i = from; i < to; ++i) out += parts[i];
    return out;
}
Value list_of(const std::vector<std::string>& items) {
    Value out = Value::array();
    for (const std::string& s : items) out.push_back(s);
    return out;
}
// str.split(sep, maxsplit), Python's: no separator splits on runs of whitespace.
Value split(const std::string& s, const Value& sep, long long maxsplit) {
    std::vector<std::string> parts;
    if (sep.is_null() || is_undefined(sep)) {
        const auto cps = code_points(s);
        std::string word;
        bool in_word = false;
        for (std::size_t i = 0; i < cps.size(); ++i) {
            if (is_space(decode(cps[i]))) {
                if (in_word) parts.push_back(word), word.clear(), in_word = false;
                continue;
            }
            if (!in_word && maxsplit >= 0 && static_cast<long long>(parts.size()) == maxsplit) {
                parts.push_back(strip(join(cps, i, cps.size()), Value(), 'r'));
                return list_of(parts);
            }
            in_word = true;
            word += cps[i];
        }
        if (in_word) parts.push_back(word);
        return list_of(parts);
    }
    const std::string& by = string(sep, "split");
    if (by.empty()) fail("split: empty separator");
    std::size_t at = 0;
    while (maxsplit < 0 || static_cast<long long>(parts.size()) < maxsplit) {
        const std::size_t next = s.find(by, at);
        if (next == std::string::npos) break;
        parts.push_back(s.substr(at, next - at));
        at = next + by.size();
    }
    parts.push_back(s.substr(at));
    return list_of(parts);
}
std::string replace_all(std::string s, const std::string& from, const std::string& to, long long count = -1) {
    if (from.empty()) fail("replace: an empty string to replace");
    std::size_t at = 0;
    for (long long n = 0; (count < 0 || n < count) && (at = s.find(from, at)) != std::string::npos; ++n) {
        s.replace(at, from.size(), to);
        at += to.size();
    }
    return s;
}
std::string map_ascii(std::string s, int (*f)(int)) {
    for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
    return s;
}
std::string title(const std::string& s) {
    std::string out = s;
    bool start = true;
    for (char& c : out) {
        const unsigned char u = static_cast<unsigned char>(c);
        if (std::isalpha(u)) {
            c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
            start = false;
        } else {
            start = true;
        }
    }
    return out;
}
std::string capitalize(const std::string& s) {
    std::string out = map_ascii(s, [](int c) { return std::tolower(c); });
    if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return out;
}
std::size_t length(const Value& v) {
    if (v.is_string()) return code_points(v.get<std::string>()).size();
    if (is_namespace(v)) return v.size() - 1;
    if (v.is_array() || v.is_object()) return v.size();
    if (is_undefined(v)) return 0;
    fail(fmt::format("length of {}", type_name(v)));
}
// The items of something iterable: a list's, a dict's keys, a string's characters.
std::vector<Value> items_of(const Value& v) {
    std::vector<Value> out;
    if (v.is_array()) out.assign(v.begin(), v.end());
    else if (v.is_object())
        for (const auto& [k, _] : v.items()) {
            if (k != kNamespaceKey) out.emplace_back(k);
        }
    else if (v.is_string())
        for (const std::string& c : code_points(v.get<std::string>())) out.emplace_back(c);
    else if (!is_undefined(v))
        fail(fmt::format("{} is not iterable", type_name(v)));
    return out;
}
Value attribute_of(const Value& v, const std::string& name) {
    if (v.is_object() && v.contains(name)) return v.at(name);
    return undefined();
}
// selectattr/rejectattr(attribute, test, args...) and select/reject(test, args...).
Value select(const Value& input, const Arguments& args, bool by_attribute, bool keep) {
    Value out = Value::array();
    std::size_t first = by_attribute ? 1 : 0;
    Arguments test_args;
    for (std::size_t i = first + 1; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
    const std::string test = args.positional.size() > first ? string(args.positional[first], "select") : "";
    for (const Value& item : items_of(input)) {
        const Value subject = by_attribute ? attribute_of(item, string(args.get(0, "attribute", Value()), "selectattr"))
                                           : item;
        const bool passes = test.empty() ? truthy(subject) : call_test(test, subject, test_args);
        if (passes == keep) out.push_back(item);
    }
    return out;
}
}  // namespace

Value Arguments::get(std::size_t index, const char* name, const Value& fallback) const {
    for (const auto& [k, v] : named)
        if (k == name) return v;
    return index < positional.size() ? positional[index] : fallback;
}

std::vector<std::string> code_points(const std::string& s) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

std::string strip(const std::string& s, const Value& chars, char which) {
    const auto cps = code_points(s);
    std::vector<std::string> set;
    const bool whitespace = chars.is_null() || is_undefined(chars);
    if (!whitespace) set = code_points(string(chars, "strip"));
    const auto drop = [&](const std::string& cp) {
        return whitespace ? is_space(decode(cp)) : std::find(set.begin(), set.end(), cp) != set.end();
    };
    std::size_t from = 0, to = cps.size();
    if (which != 'r')
        while (from < to && drop(cps[from])) ++from;
    if (which != 'l')
        while (to > from && drop(cps[to - 1])) --to;
    return join(cps, from, to);
}

bool truthy(const Value& v) {
    if (is_undefined(v) || v.is_null()) return false;
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();  // json's empty() is false for any string
    if (v.is_array()) return !v.empty();
    if (v.is_object()) return is_namespace(v) || !v.empty();
    return true;
}

std::string type_name(const Value& v) {
    if (is_undefined(v)) return "an undefined value";
    if (v.is_null()) return "none";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a float";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "a list";
    if (is_namespace(v)) return "a namespace";
    return "a dict";
}

std::string str(const Value& v) {
    if (v.is_string()) return v.get<std::string>();
    if (is_undefined(v)) return "";
    return repr(v);
}

std::string repr(const Value& v) {
    if (is_undefined(v)) return "Undefined";
    if (v.is_null()) return "None";
    if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
    if (v.is_number_integer()) return std::to_string(v.get<long long>());
    if (v.is_number_unsigned()) return std::to_string(v.get<unsigned long long>());
    if (v.is_number()) return float_text(v.get<double>());
    if (v.is_string()) return quoted(v.get<std::string>());
    std::string out;
    if (v.is_array()) {
        for (const Value& item : v) out += (out.empty() ? "" : ", ") + repr(item);
        return "[" + out + "]";
    }
    for (const auto& [k, item] : v.items())
        if (k != kNamespaceKey) out += (out.empty() ? "" : ", ") + quoted(k) + ": " + repr(item);
    return (is_namespace(v) ? "<Namespace {" : "{") + out + (is_namespace(v) ? "}>" : "}");
}

std::string to_json(const Value& v, int indent) {
    const auto walk = [&](const auto& self, const Value& x, int depth) -> std::string {
        const auto line = [&](int level) {
            std::string s;
            if (indent >= 0) s.append(1, '\n').append(static_cast<std::size_t>(indent * level), ' ');
            return s;
        };
        const std::string pad = line(depth + 1), close = line(depth);
        const std::string comma = indent < 0 ? ", " : ",";
        if (is_undefined(x)) fail("tojson of an undefined value");
        if (x.is_number_float()) return float_text(x.get<double>());
        if (x.is_array()) {
            if (x.empty()) return "[]";
            std::string out = "[";
            for (std::size_t i = 0; i < x.size(); ++i) out += (i ? comma : "") + pad + self(self, x[i], depth + 1);
            return out + close + "]";
        }
        if (x.is_object()) {
            std::string out = "{";
            bool first = true;
            for (const auto& [k, item] : x.items()) {
                if (k == kNamespaceKey) continue;
                out += (first ? "" : comma) + pad + Value(k).dump(-1, ' ', false) + ": " + self(self, item, depth + 1);
                first = false;
            }
            return first ? "{}" : out + close + "}";
        }
        return x.dump(-1, ' ', false);
    };
    return walk(walk, v, 0);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    if (is_undefined(a) || is_undefined(b))
        fail(fmt::format("'{}' on an undefined value", op));
    if (op == "+") {
        if (a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
        if (a.is_array() && b.is_array()) {
            Value out = a;
            for (const Value& x : b) out.push_back(x);
            return out;
        }
    }
    if (op == "*" && (a.is_string() || b.is_string())) {
        const Value& s = a.is_string() ? a : b;
        const Value& n = a.is_string() ? b : a;
        if (!n.is_number_integer()) fail("a string can be multiplied by an integer only");
        std::string out;
        for (long long i = 0; i < n.get<long long>(); ++i) out += s.get<std::string>();
        return out;
    }
    if (!(is_number(a) || a.is_boolean()) || !(is_number(b) || b.is_boolean()))
        fail(fmt::format("'{}' between {} and {}", op, type_name(a), type_name(b)));
    const bool integers = !a.is_number_float() && !b.is_number_float();
    const double x = number(a, op.c_str()), y = number(b, op.c_str());
    if ((op == "/" || op == "//" || op == "%") && y == 0) fail("division by zero");
    if (op == "/") return x / y;
    if (op == "**") return integers && y >= 0 ? Value(static_cast<long long>(std::llround(std::pow(x, y)))) : Value(std::pow(x, y));
    double r = 0;
    if (op == "+") r = x + y;
    else if (op == "-") r = x - y;
    else if (op == "*") r = x * y;
    else if (op == "//") r = std::floor(x / y);
    else if (op == "%") r = x - std::floor(x / y) * y;
    else fail(fmt::format("unknown operator '{}'", op));
    if (integers) return static_cast<long long>(r);
    return r;
}

bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==" || op == "!=") {
        bool equal;
        if ((is_number(a) || a.is_boolean()) && (is_number(b) || b.is_boolean()))
            equal = number(a, "==") == number(b, "==");
        else if (is_undefined(a) || is_undefined(b))
            equal = is_undefined(a) && is_undefined(b);
        else
            equal = a == b;
        return op == "==" ? equal : !equal;
    }
    int order;
    if ((is_number(a) || a.is_boolean()) && (is_number(b) || b.is_boolean())) {
        const double x = number(a, op.c_str()), y = number(b, op.c_str());
        order = x < y ? -1 : x > y ? 1 : 0;
    } else if (a.is_string() && b.is_string()) {
        order = a.get<std::string>().compare(b.get<std::string>());
    } else {
        fail(fmt::format("'{}' between {} and {}", op, type_name(a), type_name(b)));
    }
    if (op == "<") return order < 0;
    if (op == ">") return order > 0;
    if (op == "<=") return order <= 0;
    return order >= 0;
}

bool contains(const Value& container, const Value& item) {
    if (container.is_string()) return container.get<std::string>().find(string(item, "'in' a string")) != std::string::npos;
    if (container.is_array()) {
        for (const Value& x : container)
            if (compare("==", x, item)) return true;
        return false;
    }
    if (container.is_object()) return item.is_string() && item.get<std::string>() != kNamespaceKey && container.contains(item.get<std::string>());
    fail(fmt::format("'in' {}", type_name(container)));
}

Value call_filter(const std::string& name, const Value& in, const Arguments& args) {
    if (name == "trim") return strip(string(in, "trim"), args.get(0, "chars", Value()), 'b');
    if (name == "length" || name == "count") return static_cast<long long>(length(in));
    if (name == "tojson") {
        const Value& indent = args.get(0, "indent", Value());
        return to_json(in, indent.is_null() ? -1 : static_cast<int>(number(indent, "tojson's indent")));
    }
    if (name == "upper") return map_ascii(string(in, "upper"), [](int c) { return std::toupper(c); });
    if (name == "lower") return map_ascii(string(in, "lower"), [](int c) { return std::tolower(c); });
    if (name == "title") return title(string(in, "title"));
    if (name == "capitalize") return capitalize(string(in, "capitalize"));
    if (name == "string") return str(in);
    if (name == "safe" || name == "e" || name == "escape") {
        if (name != "safe") fail("the filter 'escape' is not supported (chat templates render without escaping)");
        return in;
    }
    if (name == "int") return in.is_string() ? Value(std::stoll(in.get<std::string>())) : Value(static_cast<long long>(number(in, "int")));
    if (name == "float") return in.is_string() ? Value(std::stod(in.get<std::string>())) : Value(number(in, "float"));
    if (name == "abs") return in.is_number_integer() ? Value(std::llabs(in.get<long long>())) : Value(std::fabs(number(in, "abs")));
    if (name == "default" || name == "d") {
        const bool boolean = truthy(args.get(1, "boolean", Value(false)));
        const bool use = is_undefined(in) || (boolean && !truthy(in));
        return use ? args.get(0, "default_value", Value("")) : in;
    }
    if (name == "list") return Value(items_of(in));
    if (name == "first" || name == "last") {
        const auto items = items_of(in);
        if (items.empty()) return undefined();
        return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") {
        if (in.is_string()) {
            auto cps = code_points(in.get<std::string>());
            std::reverse(cps.begin(), cps.end());
            return join(cps, 0, cps.size());
        }
        auto items = items_of(in);
        std::reverse(items.begin(), items.end());
        return Value(items);
    }
    if (name == "join") {
        const std::string sep = args.positional.empty() && args.named.empty() ? "" : string(args.get(0, "d", Value("")), "join");
        const Value& attribute = args.get(1, "attribute", Value());
        std::string out;
        bool first = true;
        for (const Value& item : items_of(in)) {
            out += (first ? "" : sep) + str(attribute.is_null() ? item : attribute_of(item, string(attribute, "join")));
            first = false;
        }
        return out;
    }
    if (name == "items") {
        if (!in.is_object()) fail(fmt::format("items of {}", type_name(in)));
        Value out = Value::array();
        for (const auto& [k, v] : in.items())
            if (k != kNamespaceKey) out.push_back(Value::array({k, v}));
        return out;
    }
    if (name == "replace")
        return replace_all(string(in, "replace"), string(args.get(0, "old", Value()), "replace"),
                           string(args.get(1, "new", Value()), "replace"));
    if (name == "selectattr" || name == "rejectattr") return select(in, args, true, name == "selectattr");
    if (name == "select" || name == "reject") return select(in, args, false, name == "select");
    if (name == "map") {
        Value out = Value::array();
        const Value& attribute = args.get(99, "attribute", Value());
        for (const Value& item : items_of(in)) {
            if (!attribute.is_null()) {
                const Value got = attribute_of(item, string(attribute, "map"));
                out.push_back(is_undefined(got) ? args.get(99, "default", Value()) : got);
            } else {
                if (args.positional.empty()) fail("map needs a filter's name or attribute=");
                Arguments rest;
                rest.positional.assign(args.positional.begin() + 1, args.positional.end());
                out.push_back(call_filter(string(args.positional[0], "map"), item, rest));
            }
        }
        return out;
    }
    fail(fmt::format("the filter '{}' is not supported", name));
}

bool call_test(const std::string& name, const Value& in, const Arguments& args) {
    const Value& other = args.get(0, "value", Value());
    if (name == "defined") return !is_undefined(in);
    if (name == "undefined") return is_undefined(in);
    if (name == "none") return in.is_null();
    if (name == "string") return in.is_string();
    if (name == "number") return is_number(in);
    if (name == "integer") return in.is_number_integer();
    if (name == "float") return in.is_number_float();
    if (name == "boolean") return in.is_boolean();
    if (name == "true") return in.is_boolean() && in.get<bool>();
    if (name == "false") return in.is_boolean() && !in.get<bool>();
    if (name == "mapping") return in.is_object();
    if (name == "sequence") return in.is_array() || in.is_string() || in.is_object();
    if (name == "iterable") return in.is_array() || in.is_string() || in.is_object();
    if (name == "callable") return false;
    if (name == "even" || name == "odd") {
        if (!in.is_number_integer()) fail(fmt::format("'{}' of {}", name, type_name(in)));
        return (in.get<long long>() % 2 == 0) == (name == "even");
    }
    if (name == "divisibleby") return std::fmod(number(in, name.c_str()), number(other, name.c_str())) == 0;
    if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return compare("==", in, other);
    if (name == "ne" || name == "!=") return compare("!=", in, other);
    if (name == "lt" || name == "lessthan") return compare("<", in, other);
    if (name == "gt" || name == "greaterthan") return compare(">", in, other);
    if (name == "le") return compare("<=", in, other);
    if (name == "ge") return compare(">=", in, other);
    if (name == "in") return contains(other, in);
    if (name == "lower" || name == "upper") {
        const std::string s = string(in, name.c_str());
        return s == map_ascii(s, name == "lower" ? [](int c) { return std::tolower(c); } : [](int c) { return std::toupper(c); });
    }
    fail(fmt::format("the test '{}' is not supported", name));
}

Value call_method(const Value& obj, const std::string& name, const Arguments& args) {
    if (obj.is_string()) {
        const std::string& s = obj.get_ref<const std::string&>();
        const Value& a0 = args.get(0, "", Value());
        if (name == "startswith" || name == "endswith") {
            const auto test = [&](const std::string& affix) {
                if (affix.size() > s.size()) return false;
                return name == "startswith" ? s.compare(0, affix.size(), affix) == 0
                                            : s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
            };
            if (a0.is_array())
                return std::any_of(a0.begin(), a0.end(), [&](const Value& v) { return test(string(v, name.c_str())); });
            return test(string(a0, name.c_str()));
        }
        if (name == "strip") return strip(s, a0, 'b');
        if (name == "lstrip") return strip(s, a0, 'l');
        if (name == "rstrip") return strip(s, a0, 'r');
        if (name == "split") {
            const Value& max = args.get(1, "maxsplit", Value(-1));
            return split(s, args.get(0, "sep", Value()), static_cast<long long>(number(max, "split")));
        }
        if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
            return call_filter(name, obj, {});
        if (name == "replace") {
            const Value& count = args.get(2, "count", Value(-1));
            return replace_all(s, string(a0, "replace"), string(args.get(1, "new", Value()), "replace"),
                               static_cast<long long>(number(count, "replace")));
        }
        if (name == "join") {
            std::string out;
            bool first = true;
            for (const Value& item : items_of(a0)) out += (first ? "" : s) + string(item, "join"), first = false;
            return out;
        }
        if (name == "find") {
            const std::size_t at = s.find(string(a0, "find"));
            return at == std::string::npos ? -1LL : static_cast<long long>(code_points(s.substr(0, at)).size());
        }
    }
    if (obj.is_object() && !is_namespace(obj)) {
        if (name == "items") return call_filter("items", obj, {});
        if (name == "keys") return Value(items_of(obj));
        if (name == "values") {
            Value out = Value::array();
            for (const auto& [_, v] : obj.items()) out.push_back(v);
            return out;
        }
        if (name == "get") {
            const Value& key = args.get(0, "key", Value());
            return contains(obj, key) ? obj.at(key.get<std::string>()) : args.get(1, "default", Value());
        }
    }
    fail(fmt::format("{} has no method '{}' here", type_name(obj), name));
}

bool is_global(const std::string& name) {
    return name == "namespace" || name == "range" || name == "dict" || name == "raise_exception" ||
           name == "strftime_now";
}

Value call_global(const std::string& name, const Arguments& args) {
    if (name == "namespace" || name == "dict") {
        Value out = Value::object();
        if (name == "namespace") out[kNamespaceKey] = true;
        if (!args.positional.empty()) {
            if (!args.positional[0].is_object()) fail(name + "() takes a dict or names=values");
            for (const auto& [k, v] : args.positional[0].items()) out[k] = v;
        }
        for (const auto& [k, v] : args.named) out[k] = v;
        return out;
    }
    if (name == "range") {
        long long start = 0, stop, step = 1;
        const auto n = [&](std::size_t i) { return static_cast<long long>(number(args.positional.at(i), "range")); };
        if (args.positional.empty() || args.positional.size() > 3) fail("range() takes 1 to 3 numbers");
        if (args.positional.size() == 1) stop = n(0);
        else start = n(0), stop = n(1);
        if (args.positional.size() == 3) step = n(2);
        if (step == 0) fail("range() with a step of 0");
        Value out = Value::array();
        for (long long i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(i);
        return out;
    }
    if (name == "raise_exception") fail("the template raised: " + str(args.get(0, "message", Value(""))));
    if (name == "strftime_now") {
        const std::time_t now = std::time(nullptr);
        std::tm local{};
        localtime_r(&now, &local);
        char buffer[256];
        const std::size_t n = std::strftime(buffer, sizeof buffer, string(args.get(0, "format", Value()), "strftime_now").c_str(), &local);
        return std::string(buffer, n);
    }
    fail(fmt::format("the function '{}' is not supported", name));
}

}  // namespace levers::data::jinja
