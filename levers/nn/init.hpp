// How a parameter starts. Initialisers run when the model is laid out
// (Module::initialize), in the order parameters are named, from one seed, so
// a model is the same on every rank and every run with that seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace levers::nn {

struct Init {
    enum class Kind { zeros, ones, normal, uniform, fan_in_uniform };
    Kind kind = Kind::zeros;
    double a = 0, b = 0;  // normal: mean, std; uniform: low, high
    std::string describe() const;
};

namespace init {
inline Init zeros() { return {Init::Kind::zeros}; }
inline Init ones() { return {Init::Kind::ones}; }
inline Init normal(double std, double mean = 0) { return {Init::Kind::normal, mean, std}; }
inline Init uniform(double low, double high) { return {Init::Kind::uniform, low, high}; }
// U(-1/√fan_in, 1/√fan_in), fan_in the elements per output row (all
// dimensions but the first: a Linear's in_features, a Conv2d's in · kh · kw):
// PyTorch's nn.Linear and nn.Conv2d default.
inline Init fan_in_uniform() { return {Init::Kind::fan_in_uniform}; }
// GPT-2's residual projections: N(0, std / √(2 · layers)), so the residual
// stream's variance does not grow with depth.
inline Init gpt2_residual(double std, int layers) { return normal(std / std::sqrt(2.0 * layers)); }
}  // namespace init

}  // namespace levers::nn
