#include "levers/kernels/embedding.hpp"
#include "tests/gradcheck.hpp"

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("embedding adds token and position rows; gradients scatter-add") {
    const long B = 2, T = 3, C = 4, V = 5;
    std::vector<std::int32_t> tokens = {0, 3, 3, 4, 0, 1};  // repeats exercise accumulation
    Rng rng(2);
    auto wte = random_vector(V * C, rng), wpe = random_vector(T * C, rng), r = random_vector(B * T * C, rng);
    std::vector<double> out(B * T * C);
    k::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
    CHECK(out[1 * C + 2] == wte[3 * C + 2] + wpe[1 * C + 2]);

    auto loss = [&] {
        k::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
        return dot(out, r);
    };
    std::vector<double> dwte(V * C, 0.0), dwpe(T * C, 0.0);
    k::embedding_backward(dwte.data(), dwpe.data(), r.data(), tokens.data(), B, T, C);
    check_gradient("d_wte", wte.data(), dwte.data(), wte.size(), loss);
    check_gradient("d_wpe", wpe.data(), dwpe.data(), wpe.size(), loss);
}

TEST_CASE("embedding rejects a token outside the vocabulary, naming it") {
    std::vector<std::int32_t> tokens = {1, 7};
    std::vector<float> wte(5 * 2), wpe(2 * 2), out(4);
    CHECK_THROWS_WITH_AS(k::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), 1, 2, 2, 5),
                         doctest::Contains("token id 7 at position 1 is outside the vocabulary [0, 5)"), Error);
}
