#include "kernels/residual.hpp"
#include "tests/gradcheck.hpp"

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("residual add and its gradients") {
    Rng rng(5);
    auto a = random_vector(10, rng), b = random_vector(10, rng), r = random_vector(10, rng);
    auto loss = [&] {
        std::vector<double> out(10);
        k::residual_forward(out.data(), a.data(), b.data(), 10);
        return dot(out, r);
    };
    std::vector<double> da(10, 5.0), db(10, 5.0);
    k::residual_backward(da.data(), db.data(), r.data(), 10);
    check_gradient("d_a", a.data(), da.data(), a.size(), loss);
    check_gradient("d_b", b.data(), db.data(), b.size(), loss);
    // In place (out aliasing a) is how models sum gradients at a fork.
    auto a0 = a;
    k::residual_forward(a.data(), a.data(), b.data(), 10);
    for (int i = 0; i < 10; ++i) CHECK(a[i] == a0[i] + b[i]);
}
