#include "levers/kernels/cpu/few_rows_product.hpp"
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

TEST_CASE("linear over a few rows (a decoding step's) equals the product in double, a row the same bits alone") {
    Rng rng(3);
    // Widths with a tail past the 16-lane steps (37, 517) and outputs past the 4-row tiles (7, 130).
    for (const auto& [in_dim, out_dim] : {std::pair<long, long>{37, 7}, std::pair<long, long>{517, 130}}) {
        CAPTURE(in_dim);
        const long most = k::kFewRows + 1;  // one more row than the few-rows product takes: the general product
        std::vector<float> x(most * in_dim), w(out_dim * in_dim), b(out_dim);
        for (float& v : x) v = static_cast<float>(rng.normal());
        for (float& v : w) v = static_cast<float>(rng.normal());
        for (float& v : b) v = static_cast<float>(rng.normal());
        std::vector<float> alone(out_dim);
        for (long n = 1; n <= most; ++n) {
            CAPTURE(n);
            std::vector<float> out(n * out_dim);
            k::linear_forward(out.data(), x.data(), w.data(), b.data(), n, in_dim, out_dim);
            double worst = 0;
            for (long i = 0; i < n; ++i)
                for (long o = 0; o < out_dim; ++o) {
                    double exact = b[o], size = std::abs(b[o]);  // size: the sum's terms' magnitudes, f32's scale
                    for (long j = 0; j < in_dim; ++j) {
                        exact += double(x[i * in_dim + j]) * w[o * in_dim + j];
                        size += std::abs(double(x[i * in_dim + j]) * w[o * in_dim + j]);
                    }
                    worst = std::max(worst, std::abs(out[i * out_dim + o] - exact) / size);
                }
            CHECK(worst < 1e-6);
            if (n == 1) alone.assign(out.begin(), out.begin() + out_dim);
            if (n <= k::kFewRows && k::have_few_rows_product())  // row 0 in a batch: the bits it had alone
                CHECK(std::equal(alone.begin(), alone.end(), out.begin()));
        }
    }
}
