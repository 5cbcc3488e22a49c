#include "levers/kernels/linear.hpp"
#include "levers/kernels/lora.hpp"
#include "tests/gradcheck.hpp"

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("lora gradients: finite differences; d_in added to what is there") {
    const long n = 3, in_dim = 5, out_dim = 4, rank = 2;
    const double scale = 1.5;
    Rng rng(2);
    auto x = random_vector(n * in_dim, rng), a = random_vector(rank * in_dim, rng), b = random_vector(out_dim * rank, rng);
    auto r = random_vector(n * out_dim, rng);  // loss = Σ r ⊙ out
    std::vector<double> u(n * rank);
    auto loss = [&] {
        std::vector<double> out(n * out_dim, 0.0);
        k::lora_forward(out.data(), u.data(), x.data(), a.data(), b.data(), n, in_dim, out_dim, rank, scale);
        return dot(out, r);
    };
    loss();
    std::vector<double> dx(n * in_dim, 0.0), da(rank * in_dim, 0.0), db(out_dim * rank, 0.0), du(n * rank);
    k::lora_backward(dx.data(), da.data(), db.data(), du.data(), r.data(), x.data(), u.data(), a.data(), b.data(), n,
                     in_dim, out_dim, rank, scale);
    check_gradient("d_in", x.data(), dx.data(), x.size(), loss);
    check_gradient("d_a", a.data(), da.data(), a.size(), loss);
    check_gradient("d_b", b.data(), db.data(), b.size(), loss);

    std::vector<double> dx2(n * in_dim, 1.0);
    loss();
    k::lora_backward(dx2.data(), da.data(), db.data(), du.data(), r.data(), x.data(), u.data(), a.data(), b.data(), n,
                     in_dim, out_dim, rank, scale);
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx2[i] == doctest::Approx(dx[i] + 1.0));
}

TEST_CASE("a merged adapter gives the same outputs as the adapter beside the weight") {
    const long n = 4, in_dim = 6, out_dim = 3, rank = 2;
    Rng rng(3);
    auto x = random_vector(n * in_dim, rng), w = random_vector(out_dim * in_dim, rng);
    auto a = random_vector(rank * in_dim, rng), b = random_vector(out_dim * rank, rng);
    std::vector<double> separate(n * out_dim), merged(n * out_dim), u(n * rank);
    k::linear_forward(separate.data(), x.data(), w.data(), static_cast<const double*>(nullptr), n, in_dim, out_dim);
    k::lora_forward(separate.data(), u.data(), x.data(), a.data(), b.data(), n, in_dim, out_dim, rank, 0.5);
    k::lora_merge(w.data(), a.data(), b.data(), in_dim, out_dim, rank, 0.5);
    k::linear_forward(merged.data(), x.data(), w.data(), static_cast<const double*>(nullptr), n, in_dim, out_dim);
    for (std::size_t i = 0; i < merged.size(); ++i) CHECK(merged[i] == doctest::Approx(separate[i]));
}
