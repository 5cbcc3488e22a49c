#include "levers/core/error.hpp"
#include "levers/core/rng.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;

TEST_CASE("rng: same seed same stream; state round-trips") {
    Rng a(42), b(42);
    for (int i = 0; i < 5; ++i) CHECK(a.next_u64() == b.next_u64());
    std::string saved = a.state();
    double x = a.normal();
    a.set_state(saved);
    CHECK(a.normal() == x);
    CHECK_THROWS_AS(a.set_state("not a state"), Error);
}

TEST_CASE("rng: normal() has mean 0 and variance 1; below() stays in range") {
    Rng r(7);
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        double z = r.normal();
        s += z;
        s2 += z * z;
    }
    CHECK(std::abs(s / n) < 0.01);
    CHECK(std::abs(s2 / n - 1) < 0.02);
    for (int i = 0; i < 1000; ++i) CHECK(r.below(3) < 3);
}
