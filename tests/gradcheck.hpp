// Finite-difference gradient checks in double precision, shared by the op and
// model tests.
#pragma once

#include "levers/core/error.hpp"
#include "levers/core/rng.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace levers::testing {

// Compares grad[0..n) with central differences of f around x[0..n), perturbing
// x in place (restored afterwards). The error is relative to the gradient's scale.
inline void check_gradient(const std::string& what, double* x, const double* grad, std::size_t n,
                           const std::function<double()>& f, double tolerance = 1e-6) {
    const double h = 1e-5;
    double worst = 0, scale = 1e-3;
    std::size_t worst_at = 0;
    std::vector<double> numeric(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double saved = x[i];
        x[i] = saved + h;
        const double up = f();
        x[i] = saved - h;
        const double down = f();
        x[i] = saved;
        numeric[i] = (up - down) / (2 * h);
        scale = std::max(scale, std::abs(numeric[i]));
    }
    for (std::size_t i = 0; i < n; ++i) {
        double err = std::abs(numeric[i] - grad[i]);
        if (err > worst) {
            worst = err;
            worst_at = i;
        }
    }
    INFO(what << ": worst element " << worst_at << " numeric " << numeric[worst_at] << " analytic "
              << grad[worst_at]);
    CHECK(worst / scale <= tolerance);
}

inline std::vector<double> random_vector(std::size_t n, Rng& rng, double scale = 1.0) {
    std::vector<double> v(n);
    for (double& x : v) x = rng.normal() * scale;
    return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

}  // namespace levers::testing
