#include "levers/core/rng.hpp"

#include "levers/core/error.hpp"

#include <cmath>
#include <numbers>
#include <sstream>

namespace levers {

std::uint64_t Rng::below(std::uint64_t n) {
    LEVERS_CHECK(n > 0, "Rng::below needs n > 0");
    // Rejection sampling keeps the result unbiased for any n.
    std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x;
    do x = engine_();
    while (x >= limit);
    return x % n;
}

double Rng::normal() {
    double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::string Rng::state() const {
    std::ostringstream out;
    out << engine_;
    return out.str();
}

void Rng::set_state(const std::string& s) {
    std::istringstream in(s);
    std::mt19937_64 e;
    in >> e;
    LEVERS_CHECK(!in.fail(), "malformed random-generator state ({} characters)", s.size());
    engine_ = e;
}

}  // namespace levers
