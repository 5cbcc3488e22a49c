#include "levers/kernels/layernorm.hpp"
#include "tests/gradcheck.hpp"

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("layernorm normalises each row to zero mean and unit variance") {
    std::vector<double> x = {1, 2, 3, 4, -1, -1, -1, 5}, w(4, 1.0), b(4, 0.0), out(8), mean(2), rstd(2);
    k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), 2, 4, 1e-5);
    CHECK(mean[0] == doctest::Approx(2.5));
    for (int r = 0; r < 2; ++r) {
        double m = 0, v = 0;
        for (int c = 0; c < 4; ++c) m += out[r * 4 + c] / 4;
        for (int c = 0; c < 4; ++c) v += (out[r * 4 + c] - m) * (out[r * 4 + c] - m) / 4;
        CHECK(m == doctest::Approx(0).epsilon(1e-12));
        CHECK(v == doctest::Approx(1).epsilon(1e-4));
    }
}

TEST_CASE("layernorm gradients match finite differences") {
    const long rows = 3, C = 6;
    Rng rng(3);
    auto x = random_vector(rows * C, rng, 2.0), w = random_vector(C, rng), b = random_vector(C, rng);
    auto r = random_vector(rows * C, rng);
    std::vector<double> out(rows * C), mean(rows), rstd(rows);
    auto loss = [&] {
        k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C, 1e-5);
        return dot(out, r);
    };
    loss();
    std::vector<double> dx(rows * C, 99.0), dw(C, 0.0), db(C, 0.0);
    k::layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), mean.data(), rstd.data(), w.data(),
                          rows, C);
    check_gradient("d_x", x.data(), dx.data(), x.size(), loss);
    check_gradient("d_weight", w.data(), dw.data(), w.size(), loss);
    check_gradient("d_bias", b.data(), db.data(), b.size(), loss);
}
