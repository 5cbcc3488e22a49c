// Typed recipe parameters: declared with a default and a help line, set from
// the command line as text, read back by the recipe with their own type.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <variant>
#include <vector>

namespace levers {

// int, float, string, bool, or a list of ints ("256,128") or floats ("1e-3,3e-3").
using ParamValue = std::variant<long, double, std::string, bool, std::vector<long>, std::vector<double>>;

struct ParamSpec {
    std::string name;
    ParamValue default_value;
    std::string help;
};

std::string type_name(const ParamValue& v);  // "int", "float", "string", "bool", "int list", "float list"
std::string to_text(const ParamValue& v);    // as the command line would write it

// Parses `text` as the type of `like`; throws levers::Error naming `name`, the
// text and the expected type.
ParamValue parse_as(const ParamValue& like, const std::string& name, const std::string& text);

class Config {
public:
    explicit Config(std::vector<ParamSpec> specs);

    // Sets a declared parameter from text ("key=value" on the command line).
    // Unknown names list the valid ones; bad values name the expected type.
    void set(const std::string& name, const std::string& text);

    // Typed read: get<long>, get<int>, get<double>, get<std::string>, get<bool>,
    // get<std::vector<long>>, get<std::vector<double>>. Throws if the parameter is undeclared or of another type.
    template <class T> T get(const std::string& name) const;

    bool has(const std::string& name) const;
    std::size_t index(const std::string& name) const { return index_of(name); }  // throws for unknown names
    // The values as JSON: {"steps": 100, "lr": 0.001, ...}.
    nlohmann::json to_json() const;

    const std::vector<ParamSpec>& specs() const { return specs_; }
    const std::vector<ParamValue>& values() const { return values_; }

private:
    std::size_t index_of(const std::string& name) const;
    std::vector<ParamSpec> specs_;
    std::vector<ParamValue> values_;
};

}  // namespace levers
