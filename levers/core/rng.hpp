// A seeded random generator whose output is the same on every platform
// (std's distributions are not), with a state that can be saved and restored.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace levers {

class Rng {
public:
    explicit Rng(std::uint64_t seed = 0) : engine_(seed) {}

    std::uint64_t next_u64() { return engine_(); }
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
    // Uniform integer in [0, n); n > 0.
    std::uint64_t below(std::uint64_t n);
    // Standard normal (Box-Muller, no cached second value so the state is the engine alone).
    double normal();

    std::string state() const;             // opaque text, for checkpoints
    void set_state(const std::string& s);  // throws levers::Error on malformed text

private:
    std::mt19937_64 engine_;
};

}  // namespace levers
