#include "levers/kernels/losses.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/kernels/softmax.hpp"

namespace levers::ops {

namespace {

Tensor reduce(const Tensor& per_element, Reduction reduction) {
    switch (reduction) {
        case Reduction::mean: return mean(per_element);
        case Reduction::sum: return sum(per_element);
        case Reduction::none: return per_element;
    }
    return per_element;
}

void check_pair_shapes(const char* op, const Tensor& input, const Tensor& target) {
    check_float(op, "input", input);
    check_like(op, "target", target, "input", input);
    LEVERS_CHECK(input.shape() == target.shape(), "{}: 'input' is {} and 'target' {}: they need one shape", op,
                 input.shape().str(), target.shape().str());
}

// Targets as rows: checked against the classes (ignore_index allowed), and which rows count.
struct Rows {
    Tensor safe;   // i32, ignored rows as class 0
    Tensor valid;  // bool
};
Rows target_rows(const char* op, const Tensor& log_probs, const Tensor& targets, std::int64_t ignore_index) {
    check_float(op, "input", log_probs);
    LEVERS_CHECK(log_probs.ndim() >= 1, "{}: 'input' needs a class dimension", op);
    check_dtype(op, "targets", targets, DType::i32);
    std::vector<std::int64_t> rows;
    for (int d = 0; d + 1 < log_probs.ndim(); ++d) rows.push_back(log_probs.dim(d));
    LEVERS_CHECK(targets.shape() == Shape(rows),
                 "{}: 'targets' is {}, but 'input' {} needs one target per row: {} (classes along the last dimension)",
                 op, describe(targets), log_probs.shape().str(), Shape(rows).str());
    const Tensor t = targets.to(log_probs.device());
    const Tensor valid = ne(t, static_cast<double>(ignore_index));
    const Tensor safe = where(valid, t, 0.0);
    (void)checked_indices(op, safe, log_probs.dim(-1), log_probs);
    return {safe, valid};
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    check_pair_shapes("mse_loss", input, target);
    return reduce(square(sub(input, target)), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    check_pair_shapes("l1_loss", input, target);
    return reduce(abs(sub(input, target)), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, double beta, Reduction reduction) {
    check_pair_shapes("smooth_l1_loss", input, target);
    if (beta == 0) return l1_loss(input, target, reduction);
    return reduce(smooth_l1(sub(input, target), beta), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, const BceOptions& o) {
    check_pair_shapes("binary_cross_entropy_with_logits", logits, targets);
    Tensor loss;
    if (o.pos_weight.defined()) {
        check_like("binary_cross_entropy_with_logits", "pos_weight", o.pos_weight, "logits", logits);
        // (1 - y)·x + (1 + (pw - 1)·y)·softplus(-x)
        const Tensor scale = add(mul(sub(o.pos_weight, 1.0), targets), 1.0);
        loss = add(mul(sub(1.0, targets), logits), mul(scale, softplus(neg(logits))));
    } else {
        loss = sub(softplus(logits), mul(targets, logits));  // softplus(x) - y·x
    }
    if (o.weight.defined()) {
        check_like("binary_cross_entropy_with_logits", "weight", o.weight, "logits", logits);
        loss = mul(loss, o.weight);
    }
    return reduce(loss, o.reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const NllOptions& o) {
    const Rows r = target_rows("nll_loss", log_probs, targets, o.ignore_index);
    const Tensor picked = gather(log_probs, -1, r.safe.unsqueeze(-1)).squeeze(-1);
    Tensor w = r.valid.to(log_probs.dtype());
    if (o.weight.defined()) {
        check_like("nll_loss", "weight", o.weight, "input", log_probs);
        LEVERS_CHECK(o.weight.shape() == Shape{log_probs.dim(-1)}, "nll_loss: 'weight' is {}, expected one per class: [{}]",
                     describe(o.weight), log_probs.dim(-1));
        w = mul(w, index_select(o.weight, 0, r.safe.reshape({-1})).view(r.safe.shape()));
    }
    const Tensor loss = neg(mul(picked, w));
    switch (o.reduction) {
        case Reduction::mean: return div(sum(loss), sum(w));
        case Reduction::sum: return sum(loss);
        case Reduction::none: return loss;
    }
    return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
    LEVERS_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1, "cross_entropy: label_smoothing must be in [0, 1], got {}",
                 o.label_smoothing);
    const Tensor logp = log_softmax(logits, -1);
    const Tensor nll = nll_loss(logp, targets, {o.weight, o.ignore_index, o.reduction});
    if (o.label_smoothing == 0) return nll;
    const Rows r = target_rows("cross_entropy", logp, targets, o.ignore_index);
    const std::int64_t classes = logits.dim(-1);
    Tensor smooth = neg(sum(o.weight.defined() ? mul(logp, o.weight) : logp, {-1}));
    smooth = where(r.valid, smooth, 0.0);
    Tensor smoothed;
    switch (o.reduction) {
        case Reduction::mean:
            smoothed = o.weight.defined()
                           ? div(sum(smooth), sum(mul(index_select(o.weight, 0, r.safe.reshape({-1})),
                                                      r.valid.reshape({-1}).to(logits.dtype()))))
                           : mean(smooth);
            break;
        case Reduction::sum: smoothed = sum(smooth); break;
        case Reduction::none: smoothed = smooth; break;
    }
    return add(mul(nll, 1 - o.label_smoothing), mul(smoothed, o.label_smoothing / static_cast<double>(classes)));
}

}  // namespace levers::ops
