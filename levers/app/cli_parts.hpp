// The command line's shared pieces: the help's examples made for the binary
// that prints them, and the options several commands take, each defined once.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace levers {

// Fills help examples for this binary: in `text`, {recipe} is the program's
// name (`recipe`, or a user's own binary's), and {pretrain}, {classify} and
// {fine_tune} those shipped recipes, or the binary's first recipe where it
// does not have them.
class Examples {
public:
    Examples(std::string program, std::vector<std::string> recipes);
    std::string operator()(std::string_view text) const;
    const std::string& program() const { return program_; }

private:
    std::string pick(const char* shipped) const;
    std::string program_;
    std::vector<std::string> recipes_;
};

// --device: auto, cpu or cuda (`what` says whose device it sets).
CLI::Option* add_device_option(CLI::App& command, std::string& device, const std::string& what);
// --precision: f32, or bf16 on GPUs.
CLI::Option* add_precision_option(CLI::App& command, std::string& precision, const std::string& what);

}  // namespace levers
