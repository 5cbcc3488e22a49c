#include "levers/recipe/config.hpp"

#include <nlohmann/json.hpp>

#include "levers/core/error.hpp"
#include "levers/core/split.hpp"
#include "levers/recipe/param.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace levers {

namespace {

template <class... F> struct Overload : F... { using F::operator()...; };
template <class... F> Overload(F...) -> Overload<F...>;

bool parse_long(const std::string& s, long& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

bool parse_double(const std::string& s, double& out) {
    char* end = nullptr;
    errno = 0;
    out = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && errno == 0 && std::isfinite(out);
}

// Splits "a,b,c" and parses each item; false if any item is bad.
template <class T, class Parse> bool parse_list(const std::string& text, std::vector<T>& xs, Parse parse) {
    for (const auto& item : split(text)) {
        T x;
        if (!parse(item, x)) return false;
        xs.push_back(x);
    }
    return true;
}

}  // namespace

std::string type_name(const ParamValue& v) {
    return std::visit(Overload{[](long) { return "int"; }, [](double) { return "float"; },
                               [](const std::string&) { return "string"; }, [](bool) { return "bool"; },
                               [](const std::vector<long>&) { return "int list"; },
                               [](const std::vector<double>&) { return "float list"; }},
                      v);
}

std::string to_text(const ParamValue& v) {
    return std::visit(Overload{[](long x) { return std::to_string(x); }, [](double x) { return fmt::format("{}", x); },
                               [](const std::string& s) { return s; },
                               [](bool b) { return std::string(b ? "true" : "false"); },
                               [](const std::vector<long>& xs) { return fmt::format("{}", fmt::join(xs, ",")); },
                               [](const std::vector<double>& xs) { return fmt::format("{}", fmt::join(xs, ",")); }},
                      v);
}

ParamValue parse_as(const ParamValue& like, const std::string& name, const std::string& text) {
    auto bad = [&](const char* expected) {
        LEVERS_FAIL("parameter '{}': '{}' is not {}", name, text, expected);
    };
    return std::visit(
        Overload{[&](long) -> ParamValue {
                     long x;
                     if (!parse_long(text, x)) bad("an integer (e.g. 100)");
                     return x;
                 },
                 [&](double) -> ParamValue {
                     double x;
                     if (!parse_double(text, x)) bad("a finite number (e.g. 3e-4)");
                     return x;
                 },
                 [&](const std::string&) -> ParamValue { return text; },
                 [&](bool) -> ParamValue {
                     if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
                     if (text == "false" || text == "0" || text == "no" || text == "off") return false;
                     bad("a bool (true/false)");
                     return false;
                 },
                 [&](const std::vector<long>&) -> ParamValue {
                     std::vector<long> xs;
                     if (!parse_list(text, xs, parse_long)) bad("a comma-separated list of integers (e.g. 256,128)");
                     return xs;
                 },
                 [&](const std::vector<double>&) -> ParamValue {
                     std::vector<double> xs;
                     if (!parse_list(text, xs, parse_double)) bad("a comma-separated list of numbers (e.g. 1e-3,3e-3)");
                     return xs;
                 }},
        like);
}

std::string Bounds::str() const {
    if (min && max) return fmt::format("in [{}, {}]", *min, *max);
    if (min) return fmt::format(">= {}", *min);
    if (max) return fmt::format("<= {}", *max);
    return "any value";
}

void check_bounds(const ParamSpec& spec, const ParamValue& v) {
    if (spec.bounds.empty()) return;
    auto check = [&](double x) {
        LEVERS_CHECK((!spec.bounds.min || x >= *spec.bounds.min) && (!spec.bounds.max || x <= *spec.bounds.max),
                     "parameter '{}': {} is out of range; it must be {} ({})", spec.name, to_text(v),
                     spec.bounds.str(), spec.help);
    };
    std::visit(Overload{[&](long x) { check(static_cast<double>(x)); }, [&](double x) { check(x); },
                        [&](const std::vector<long>& xs) {
                            for (long x : xs) check(static_cast<double>(x));
                        },
                        [&](const std::vector<double>& xs) {
                            for (double x : xs) check(x);
                        },
                        [](const auto&) {}},
               v);
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int min) {
    std::vector<int> xs;
    for (const auto& item : split(text)) {
        long x = 0;
        LEVERS_CHECK(parse_long(item, x) && x >= min && x <= (1 << 20),
                     "{} '{}': item {} ({}) is not an integer >= {}; give them separated by commas (e.g. 1,2,4)",
                     flag, text, xs.size() + 1, item.empty() ? "empty" : "'" + item + "'", min);
        xs.push_back(static_cast<int>(x));
    }
    return xs;
}

Config::Config(std::vector<ParamSpec> specs) : specs_(std::move(specs)) {
    for (const auto& s : specs_) values_.push_back(s.default_value);
}

std::size_t Config::index_of(const std::string& name) const {
    for (std::size_t i = 0; i < specs_.size(); ++i)
        if (specs_[i].name == name) return i;
    std::string valid;
    for (const auto& s : specs_) valid += (valid.empty() ? "" : ", ") + s.name;
    LEVERS_FAIL("unknown parameter '{}'; valid parameters: {}", name, valid.empty() ? "(none)" : valid);
}

bool Config::has(const std::string& name) const {
    return std::any_of(specs_.begin(), specs_.end(), [&](const ParamSpec& s) { return s.name == name; });
}

nlohmann::json Config::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (std::size_t i = 0; i < specs_.size(); ++i)
        std::visit([&](const auto& v) { j[specs_[i].name] = v; }, values_[i]);
    return j;
}

void Config::set(const std::string& name, const std::string& text) {
    std::size_t i = index_of(name);
    ParamValue v = parse_as(specs_[i].default_value, name, text);
    check_bounds(specs_[i], v);
    values_[i] = std::move(v);
}

namespace detail {

long checked_integer(long v, long min, long max, const std::string& name) {
    LEVERS_CHECK(v >= min && v <= max, "parameter '{}': {} does not fit the type it is read as ({} to {})", name, v,
                 min, max);
    return v;
}

}  // namespace detail

}  // namespace levers
