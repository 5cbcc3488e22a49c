// Steady training steps make no heap allocation: after a few steps of one
// shape, forward, backward, clipping and AdamW allocate nothing (activations
// come from the storage pool, the tape reuses its slots). This binary counts
// every malloc of the process (its own, the library's, OpenBLAS's and
// OpenMP's) by interposing the allocator while a step runs.
#include "levers/core/threads.hpp"
#include "levers/nn/nn.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/train/param_kernels.hpp"
#include "levers/models/gpt.hpp"
#include "levers/models/mlp.hpp"

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0}, g_blas_allocations{0};
// OpenBLAS's threaded GEMM driver (Debian's build) mallocs its job table on
// every call with more than one thread: counted apart, as not levers' own.
bool from_blas(void* caller) {
    Dl_info info{};
    return dladdr(caller, &info) && info.dli_fname && std::strstr(info.dli_fname, "openblas");
}
// The call stacks of levers' first own allocations, named when a check fails.
constexpr int kStacks = 4, kDepth = 8;
void* g_stacks[kStacks][kDepth];
int g_depths[kStacks];
// backtrace() loads its unwinder (and allocates) on first use: done before any count.
const int g_unwinder_loaded = backtrace(g_stacks[0], 1);
void count(void* caller) {
    if (!g_counting.load(std::memory_order_relaxed)) return;
    if (from_blas(caller)) {
        g_blas_allocations.fetch_add(1);
        return;
    }
    if (const long n = g_allocations.fetch_add(1); n < kStacks) g_depths[n] = backtrace(g_stacks[n], kDepth);
}
#define COUNTED() count(__builtin_return_address(0))
}  // namespace

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* malloc(std::size_t n) {
    COUNTED();
    return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
    COUNTED();
    return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
    COUNTED();
    return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
    COUNTED();
    return __libc_memalign(alignment, n);
}
void* memalign(std::size_t alignment, std::size_t n) {
    COUNTED();
    return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
    COUNTED();
    *out = __libc_memalign(alignment, n);
    return *out ? 0 : ENOMEM;
}
}

using namespace levers;

namespace {
// Allocations during `steps` calls of `step` after `warmup` uncounted ones.
template <class Step> long allocations_in(int warmup, int steps, Step&& step) {
    for (int i = 0; i < warmup; ++i) step();
    g_allocations = 0;
    g_blas_allocations = 0;
    g_counting = true;
    for (int i = 0; i < steps; ++i) step();
    g_counting = false;
    if (g_blas_allocations > 0) MESSAGE(g_blas_allocations.load() << " allocations inside OpenBLAS's threaded GEMM");
    for (long i = 0; i < std::min<long>(g_allocations, kStacks); ++i) {
        std::string stack;
        for (int f = 1; f < g_depths[i]; ++f) {  // frame 0 is count()
            Dl_info info{};
            dladdr(g_stacks[i][f], &info);
            stack += std::string(" < ") + (info.dli_sname ? info.dli_sname : info.dli_fname ? info.dli_fname : "?");
        }
        MESSAGE("allocated in" << stack);
    }
    return g_allocations.load();
}
}  // namespace

TEST_CASE("a steady GPT training step allocates nothing: forward, backward, clipping, AdamW") {
    set_threads(2);
    models::Gpt gpt({.vocab_size = 64, .block_size = 32, .n_layer = 2, .n_head = 2, .n_embd = 32}, 1);
    train::AdamW adamw(gpt.params(), {.lr = 1e-3, .weight_decay = 0.1});
    std::vector<std::int32_t> x(4 * 32), y(4 * 32);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int32_t>(i * 7 % 64), y[i] = static_cast<std::int32_t>(i * 5 % 64);
    const Tensor tokens = Tensor::from(x, {4, 32}), targets = Tensor::from(y, {4, 32});
    double loss = 0;
    const long n = allocations_in(3, 3, [&] {
        gpt.params().zero_grad();
        const Tensor l = gpt.loss(tokens, targets);
        l.backward();
        loss = l.item();
        train::clip_grad_norm(gpt.params(), 1.0);
        adamw.step(1e-3);
    });
    CHECK(std::isfinite(loss));
    CHECK(n == 0);
}

TEST_CASE("a steady MLP step and a steady evaluation under InferenceMode allocate nothing") {
    models::Mlp mlp({.inputs = 20, .hidden = {32, 16}, .classes = 5}, 1);
    train::AdamW adamw(mlp.params(), {.lr = 1e-3});
    const Tensor x = Tensor::full({16, 20}, 0.25, DType::f32);
    const Tensor y = Tensor::zeros({16}, DType::i32);
    CHECK(allocations_in(3, 3, [&] {
              mlp.params().zero_grad();
              mlp.loss(x, y).backward();
              adamw.step(1e-3);
          }) == 0);
    CHECK(allocations_in(2, 3, [&] {
              autograd::InferenceMode inference;
              (void)mlp.loss(x, y).item();
          }) == 0);
}

namespace {
// A Llama-style block of levers' modules (RMSNorm, attention with rotary
// embeddings and grouped-query heads, SwiGLU) and a small CNN: models made of
// the general ops.
struct LlamaBlock : nn::Layer {
    nn::RMSNorm attn_norm;
    nn::Attention attn;
    nn::RMSNorm mlp_norm;
    nn::GatedMLP mlp;
    LlamaBlock()
        : attn_norm(*this, "attn_norm", 32),
          attn(*this, "attn", 32, 4, {.kv_heads = 2, .rope_theta = 10000}),
          mlp_norm(*this, "mlp_norm", 32),
          mlp(*this, "mlp", 32, 64) {
        initialize(1);
    }
    Tensor forward(const Tensor& x) override {
        const Tensor h = x + attn(attn_norm(x));
        return h + mlp(mlp_norm(h));
    }
};
struct Cnn : nn::Layer {
    nn::Conv2d conv1, conv2;
    nn::Linear head;
    Cnn()
        : conv1(*this, "conv1", 1, 4, {3, 3}, {.padding = {1, 1}}),
          conv2(*this, "conv2", 4, 8, {3, 3}, {.padding = {1, 1}}),
          head(*this, "head", 8 * 4 * 4, 10) {
        initialize(2);
    }
    Tensor forward(const Tensor& x) override {
        const Tensor h = ops::max_pool2d(ops::relu(conv1(x)), {2, 2});
        return head(ops::avg_pool2d(ops::silu(conv2(h)), {2, 2}).flatten(1));
    }
};
}  // namespace

TEST_CASE("steady steps of models made of the general ops allocate nothing: a Llama-style block and a CNN") {
    set_threads(2);
    LlamaBlock block;
    train::AdamW block_adamw(block.params(), {.lr = 1e-3});
    const Tensor x = Tensor::full({2, 8, 32}, 0.1, DType::f32), y = Tensor::full({2, 8, 32}, 0.2, DType::f32);
    CHECK(allocations_in(3, 3, [&] {
              block.params().zero_grad();
              ops::mse_loss(block(x), y).backward();
              block_adamw.step(1e-3);
          }) == 0);
    Cnn cnn;
    train::AdamW cnn_adamw(cnn.params(), {.lr = 1e-3});
    const Tensor images = Tensor::full({4, 1, 16, 16}, 0.5, DType::f32), labels = Tensor::zeros({4}, DType::i32);
    CHECK(allocations_in(3, 3, [&] {
              cnn.params().zero_grad();
              ops::cross_entropy(cnn(images), labels).backward();
              cnn_adamw.step(1e-3);
          }) == 0);
}
