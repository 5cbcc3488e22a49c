#include "levers/kernels/linear.hpp"
#include "tests/gradcheck.hpp"

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("linear forward matches a hand-computed product") {
    // in [2,3], weight [2,3] (out_dim 2), bias [2]
    std::vector<float> in = {1, 2, 3, 4, 5, 6}, w = {1, 0, -1, 0.5f, 0.5f, 0.5f}, b = {10, 20}, out(4);
    k::linear_forward(out.data(), in.data(), w.data(), b.data(), 2, 3, 2);
    CHECK(out == std::vector<float>{1 - 3 + 10, 3 + 20, 4 - 6 + 10, 7.5f + 20});
}

TEST_CASE("linear gradients: finite differences, d_in written, parameter grads added") {
    const long n = 3, in_dim = 4, out_dim = 5;
    Rng rng(1);
    auto x = random_vector(n * in_dim, rng), w = random_vector(out_dim * in_dim, rng), b = random_vector(out_dim, rng);
    auto r = random_vector(n * out_dim, rng);  // loss = Σ r ⊙ out
    auto loss = [&] {
        std::vector<double> out(n * out_dim);
        k::linear_forward(out.data(), x.data(), w.data(), b.data(), n, in_dim, out_dim);
        return dot(out, r);
    };
    std::vector<double> dx(n * in_dim, 123.0), dw(out_dim * in_dim, 0.0), db(out_dim, 0.0);
    k::linear_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), n, in_dim, out_dim);
    check_gradient("d_in", x.data(), dx.data(), x.size(), loss);
    check_gradient("d_weight", w.data(), dw.data(), w.size(), loss);
    check_gradient("d_bias", b.data(), db.data(), b.size(), loss);

    // A second backward adds the same amount again to parameter gradients only.
    auto dw1 = dw;
    std::vector<double> dx2(n * in_dim, -7.0);
    k::linear_backward(dx2.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), n, in_dim, out_dim);
    for (std::size_t i = 0; i < dw.size(); ++i) CHECK(dw[i] == doctest::Approx(2 * dw1[i]));
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx2[i] == doctest::Approx(dx[i]));  // written, not added
}
