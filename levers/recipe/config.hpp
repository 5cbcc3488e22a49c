// A recipe's parameter values: declared with a default and a help line
// (param.hpp's handles), set from the command line as text, read back by the
// recipe with their own type through their handle: cfg[handle].
#pragma once

#include "levers/recipe/run_context.hpp"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace levers {

// int, float, string, bool, or a list of ints ("256,128") or floats ("1e-3,3e-3").
using ParamValue = std::variant<long, double, std::string, bool, std::vector<long>, std::vector<double>>;

// The range a numeric parameter (or each item of a list) must fall in;
// checked whenever it is set, so a bad value is refused before a run starts.
struct Bounds {
    std::optional<double> min, max;
    bool empty() const { return !min && !max; }
    std::string str() const;  // ">= 1", "in [0, 1]", "<= 8"
};
inline Bounds at_least(double min) { return Bounds{min, std::nullopt}; }
inline Bounds at_most(double max) { return Bounds{std::nullopt, max}; }
inline Bounds between(double min, double max) { return Bounds{min, max}; }

template <class T> class Param;

struct ParamSpec {
    std::string name;
    ParamValue default_value;
    std::string help;
    Bounds bounds;
};

std::string type_name(const ParamValue& v);  // "int", "float", "string", "bool", "int list", "float list"
std::string to_text(const ParamValue& v);    // as the command line would write it

// Parses `text` as the type of `like`; throws levers::Error naming `name`, the
// text and the expected type.
ParamValue parse_as(const ParamValue& like, const std::string& name, const std::string& text);

// Throws levers::Error naming the parameter, the value and its range when `v`
// (a number, or any item of a list) falls outside `spec.bounds`.
void check_bounds(const ParamSpec& spec, const ParamValue& v);

// "1,2,4" as integers >= `min`, for flags that take a list (--gpus 1,2,4);
// an empty item or one that is not an integer is refused, naming `flag`.
std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int min);

class Config {
public:
    explicit Config(std::vector<ParamSpec> specs);

    // Sets a declared parameter from text ("key=value" on the command line).
    // Unknown names list the valid ones; bad values name the expected type.
    void set(const std::string& name, const std::string& text);

    // A parameter's value with its handle's type: cfg[settings::seed], cfg[width]
    // (param.hpp defines it). Throws levers::Error naming it if this config does
    // not declare it.
    template <class T> T operator[](const Param<T>& p) const;
    // A value by name, untyped (the command line's tools; recipes read through handles).
    const ParamValue& value(const std::string& name) const { return values_[index_of(name)]; }

    bool has(const std::string& name) const;
    std::size_t index(const std::string& name) const { return index_of(name); }  // throws for unknown names
    // The values as JSON: {"steps": 100, "lr": 0.001, ...}.
    nlohmann::json to_json() const;

    const std::vector<ParamSpec>& specs() const { return specs_; }
    const std::vector<ParamValue>& values() const { return values_; }

    // The run these values belong to: its directory, precision, checkpoint
    // (outside `recipe run`, as in tests: no directory, f32).
    const RunContext& run() const { return run_; }
    void set_run(RunContext run) { run_ = std::move(run); }

private:
    std::size_t index_of(const std::string& name) const;
    std::vector<ParamSpec> specs_;
    std::vector<ParamValue> values_;
    RunContext run_;
};

}  // namespace levers
