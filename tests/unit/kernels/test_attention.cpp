#include "levers/kernels/attention.hpp"
#include "tests/gradcheck.hpp"

#include <cmath>

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("attention: the first position attends only to itself; rows are causal distributions") {
    const long B = 1, T = 3, C = 4, H = 2;
    Rng rng(6);
    auto qkv = random_vector(B * T * 3 * C, rng);
    std::vector<double> y(B * T * C), att(B * H * T * T);
    k::attention_forward(y.data(), att.data(), qkv.data(), B, T, C, H);
    for (int c = 0; c < C; ++c) CHECK(y[c] == doctest::Approx(qkv[2 * C + c]));  // y[0] = v[0]
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < T; ++i) {
            double sum = 0;
            for (int j = 0; j < T; ++j) {
                double p = att[(h * T + i) * T + j];
                if (j > i) CHECK(p == 0.0);
                sum += p;
            }
            CHECK(sum == doctest::Approx(1.0));
        }
}

TEST_CASE("attention matches a direct softmax(q·k/sqrt(d))·v for one head") {
    const long B = 1, T = 4, C = 3, H = 1;
    Rng rng(7);
    auto qkv = random_vector(B * T * 3 * C, rng);
    std::vector<double> y(T * C), att(T * T);
    k::attention_forward(y.data(), att.data(), qkv.data(), B, T, C, H);
    const long i = 3;  // last row sees everything
    std::vector<double> w(T);
    double z = 0;
    for (long j = 0; j <= i; ++j) {
        double s = 0;
        for (long c = 0; c < C; ++c) s += qkv[i * 3 * C + c] * qkv[j * 3 * C + C + c];
        w[j] = std::exp(s / std::sqrt(3.0));
        z += w[j];
    }
    for (long c = 0; c < C; ++c) {
        double expect = 0;
        for (long j = 0; j <= i; ++j) expect += w[j] / z * qkv[j * 3 * C + 2 * C + c];
        CHECK(y[i * C + c] == doctest::Approx(expect));
    }
}

TEST_CASE("the CPU softmax agrees with the scalar row maths the CUDA kernel uses") {
    const long B = 1, T = 6, C = 4, H = 1;
    Rng rng(10);
    auto qkv = random_vector(B * T * 3 * C, rng, 2.0);
    std::vector<double> y(T * C), att(T * T);
    k::attention_forward(y.data(), att.data(), qkv.data(), B, T, C, H);
    for (long i = 0; i < T; ++i) {
        std::vector<double> row(T);
        for (long j = 0; j < T; ++j) {
            double s = 0;
            for (long c = 0; c < C; ++c) s += qkv[i * 3 * C + c] * qkv[j * 3 * C + C + c];
            row[j] = s / std::sqrt(double(C));
        }
        kernels::causal_softmax_row(row.data(), i, T);
        for (long j = 0; j < T; ++j) CHECK(att[i * T + j] == doctest::Approx(row[j]));
    }
}

TEST_CASE("attention gradient matches finite differences") {
    const long B = 2, T = 4, C = 6, H = 2;
    Rng rng(8);
    auto qkv = random_vector(B * T * 3 * C, rng), r = random_vector(B * T * C, rng);
    std::vector<double> y(B * T * C), att(B * H * T * T);
    auto loss = [&] {
        k::attention_forward(y.data(), att.data(), qkv.data(), B, T, C, H);
        return dot(y, r);
    };
    loss();
    std::vector<double> dqkv(qkv.size(), 42.0);
    k::attention_backward(dqkv.data(), r.data(), att.data(), qkv.data(), B, T, C, H);
    check_gradient("d_qkv", qkv.data(), dqkv.data(), qkv.size(), loss);
}

TEST_CASE("attention rejects channels that do not split into heads") {
    std::vector<float> qkv(3 * 5), y(5), att(2);
    CHECK_THROWS_AS(k::attention_forward(y.data(), att.data(), qkv.data(), 1, 1, 5, 2), Error);
}
