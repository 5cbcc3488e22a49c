// A language model's head and loss over a large vocabulary (Llama 3's
// 128,256 tokens, Qwen's 151,936) in chunks of rows: each chunk's logits are
// made, scored and dropped, so the [tokens, vocabulary] matrix is never held
// whole; backward makes each chunk's logits again and turns them into its
// gradient in place. Memory for logits: one chunk (about 2^26 values by
// default) instead of all rows; time: the head's product once more. Made of
// the linear and cross-entropy kernels, as linear_cross_entropy.hpp, whose
// result it equals (the same loss, to the order of sums). Rows whose target
// is ignored (sft's prompts) are left out before the product.
#pragma once

#include "levers/kernels/cross_entropy.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/linear.hpp"

#include <algorithm>
#include <vector>

#if !defined(__CUDACC__)
namespace levers::ops {

// Rows per chunk: `asked`, or as many as keep a chunk's logits near 2^26 values (256 MB in f32): larger
// chunks pass over the weight's gradient fewer times (once per chunk).
inline std::int64_t loss_chunk_rows(std::int64_t asked, std::int64_t width) {
    return asked > 0 ? asked : std::max<std::int64_t>(1, (std::int64_t{1} << 26) / width);
}

// x [..., C], weight [V, C] (no bias), targets one i32 per row of x (rows
// whose target is ignore_index do not count): the mean cross-entropy, one
// element in the accumulator dtype, differentiable in x and weight.
inline Tensor chunked_linear_cross_entropy(const Tensor& x_in, const Tensor& weight_in, const Tensor& targets_in,
                                           std::int64_t ignore_index = -100, std::int64_t chunk = 0) {
    const Tensor x2 = dense(x_in), weight = dense(weight_in);
    (void)linear_shape("chunked_linear_cross_entropy", x2, weight, Tensor());
    const std::int64_t rows = x2.shape().rows(), vocab = weight.dim(0), channels = weight.dim(1);
    const Tensor x = x2.view({rows, channels});
    const Tensor t = targets_beside("chunked_linear_cross_entropy", targets_in, x, rows, vocab, ignore_index).view({rows});
    // Counted rows per chunk (on the host: a chunk's loss is its own mean, weighted by its share).
    const Tensor host = t.to(Device::cpu());
    const std::int64_t width = x.device().is_cpu() ? vocab : (vocab + 63) / 64 * 64;
    const std::int64_t step = loss_chunk_rows(chunk, width);
    std::vector<std::int64_t> counted;
    std::int64_t total = 0;
    for (std::int64_t start = 0; start < rows; start += step) {
        std::int64_t n = 0;
        for (std::int64_t r = start; r < std::min(rows, start + step); ++r)
            n += host.data<std::int32_t>()[r] != ignore_index;
        counted.push_back(n);
        total += n;
    }
    LEVERS_CHECK(total > 0, "chunked_linear_cross_entropy: every target is ignore_index ({})", ignore_index);
    if (total < rows) {
        // Only the counted rows reach the head (a prompt the loss skips, padding): the same loss and
        // gradients, without a vocabulary-wide product for rows that would contribute nothing.
        std::vector<std::int32_t> keep;
        keep.reserve(static_cast<std::size_t>(total));
        for (std::int64_t r = 0; r < rows; ++r)
            if (host.data<std::int32_t>()[r] != ignore_index) keep.push_back(static_cast<std::int32_t>(r));
        const Tensor index = Tensor::from(keep, {total}).to(x.device());
        return chunked_linear_cross_entropy(index_select(x, 0, index), weight, index_select(t, 0, index),
                                            ignore_index, chunk);
    }
    Tensor logits = Tensor::empty({std::min(rows, step), width}, x.dtype(), x.device());
    Tensor lse = Tensor::empty({rows}, accumulator(x.dtype()), x.device());
    Tensor loss = Tensor::zeros({1}, accumulator(x.dtype()), x.device());
    Tensor part = Tensor::empty({1}, accumulator(x.dtype()), x.device());
    for (std::size_t k = 0; k < counted.size(); ++k) {
        const std::int64_t start = static_cast<std::int64_t>(k) * step, n = std::min(step, rows - start);
        if (counted[k] == 0) continue;
        const Tensor chunk_logits = logits.narrow(0, 0, n);
        linear_into(chunk_logits, x.narrow(0, start, n), weight, Tensor(), width);
        cross_entropy_into(part, lse.narrow(0, start, n), chunk_logits, t.narrow(0, start, n), ignore_index, vocab);
        loss = loss + part * (static_cast<double>(counted[k]) / static_cast<double>(total));
    }
    struct Saved {
        autograd::SavedTensor x, weight, targets, lse;
        std::vector<std::int64_t> counted;
        std::int64_t total, step, ignore_index;
    };
    if (auto* s = autograd::record<Saved>(
            "chunked_linear_cross_entropy",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor &x = s.x, &weight = s.weight;
                const std::int64_t rows = x.dim(0), vocab = weight.dim(0);
                const std::int64_t width = x.device().is_cpu() ? vocab : (vocab + 63) / 64 * 64;
                const Tensor d_x = g.needs_grad(0) ? g.write_grad(0).view({rows, x.dim(1)}) : Tensor();
                const Tensor d_w = g.needs_grad(1) ? g.add_grad(1) : Tensor();
                Tensor logits = Tensor::empty({std::min(rows, s.step), width}, x.dtype(), x.device());
                for (std::size_t k = 0; k < s.counted.size(); ++k) {
                    const std::int64_t start = static_cast<std::int64_t>(k) * s.step, n = std::min(s.step, rows - start);
                    const Tensor d_x_rows = d_x.defined() ? d_x.narrow(0, start, n) : Tensor();
                    if (s.counted[k] == 0) {  // nothing counted: no gradient from these rows
                        if (d_x_rows.defined()) d_x_rows.zero();
                        continue;
                    }
                    // The chunk's logits again, overwritten by their gradient.
                    const Tensor chunk_logits = logits.narrow(0, 0, n);
                    linear_into(chunk_logits, x.narrow(0, start, n), weight, Tensor(), width);
                    const double share = static_cast<double>(s.counted[k]) / static_cast<double>(s.total);
                    cross_entropy_backward_into(chunk_logits, s.lse.get().narrow(0, start, n), chunk_logits,
                                                s.targets.get().narrow(0, start, n), g.grad_out_scalar() * share,
                                                s.ignore_index, vocab);
                    linear_backward_into(d_x_rows, d_w, Tensor(), chunk_logits, x.narrow(0, start, n), weight, width);
                }
            },
            {&x, &weight}, {&loss}))
        *s = {.x = x, .weight = weight, .targets = t, .lse = lse, .counted = counted, .total = total, .step = step,
              .ignore_index = ignore_index};
    return loss;
}

}  // namespace levers::ops
#endif  // !__CUDACC__
