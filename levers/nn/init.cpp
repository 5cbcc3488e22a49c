#include "levers/nn/init.hpp"

#include <fmt/format.h>

namespace levers::nn {

std::string Init::describe() const {
    switch (kind) {
        case Kind::zeros: return "zeros";
        case Kind::ones: return "ones";
        case Kind::normal: return fmt::format("normal(mean {}, std {})", a, b);
        case Kind::uniform: return fmt::format("uniform({}, {})", a, b);
        case Kind::fan_in_uniform: return "uniform(+-1/sqrt(fan_in))";
    }
    return "?";
}

}  // namespace levers::nn
