// Ops users define in their own projects, as PyTorch's autograd.Function: a
// forward and a backward written with tensors, recorded as one node.
//
//   struct ScaledTanh : autograd::Function<ScaledTanh> {
//       static Tensor forward(autograd::Context& ctx, const Tensor& x, double scale) {
//           const Tensor y = ops::tanh(x);
//           ctx.save(y);
//           ctx.attributes[0] = scale;
//           return y * scale;
//       }
//       static std::vector<Tensor> backward(const autograd::Context& ctx, const Tensor& grad) {
//           const Tensor& y = ctx.saved(0);
//           return {grad * (1.0 - y * y) * ctx.attributes[0]};  // one gradient per tensor argument
//       }
//   };
//   Tensor out = ScaledTanh::apply(x, 2.0);
//
// forward runs under InferenceMode (its own ops record nothing) and may call
// anything: ops, or a kernel of the user's own registered with LEVERS_KERNEL
// (levers/core/kernel.hpp) for each device it should run on. backward
// runs under InferenceMode too and returns d(loss)/d(each tensor argument),
// in order, undefined for one that needs none; each must have its
// argument's shape (a mismatch is a levers::Error naming the op). Tensor
// arguments are at most autograd::Node::kInputs; other arguments (numbers,
// options) pass through to forward.
#pragma once

#include "levers/core/autograd.hpp"

#include <array>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace levers::autograd {

// What forward keeps for backward: tensors (their memory, not their record)
// and numbers.
class Context {
public:
    static constexpr int kSaved = 6;
    // Keeps tensors for backward, in order (at most kSaved in all).
    template <class... T> void save(const T&... tensors) { (save_one(tensors), ...); }
    const Tensor& saved(int i) const;
    int saved_count() const { return count_; }
    // Free numbers for backward (a scale, a flag).
    std::array<double, 4> attributes{};
    // During backward: whether tensor argument k needs a gradient (a frozen
    // one does not: backward may skip computing it).
    bool needs_grad(int k) const { return needs_[static_cast<std::size_t>(k)]; }

private:
    template <class F> friend struct Function;
    void save_one(const Tensor& t);
    std::array<SavedTensor, kSaved> saved_{};
    int count_ = 0;
    std::array<bool, Node::kInputs> needs_{};
    const char* op_ = "";
};

namespace detail {
// Hands backward's gradients to the node's inputs, checking their shapes.
void hand_over(Backward& b, const char* op, const std::vector<Tensor>& grads);
template <class T> constexpr bool is_tensor = std::is_same_v<std::decay_t<T>, Tensor>;
}  // namespace detail

template <class F> struct Function {
    // F::forward(ctx, args...) recorded with F::backward as its gradient. The
    // op's name in errors is F::kName where F declares one, else "function".
    template <class... Args> static Tensor apply(const Args&... args) {
        static_assert(sizeof...(Args) > 0, "a function takes at least one argument");
        std::vector<const Tensor*> inputs;
        (collect(inputs, args), ...);
        LEVERS_CHECK(inputs.size() <= static_cast<std::size_t>(Node::kInputs),
                     "{}: {} tensor arguments; a function takes at most {}", name(), inputs.size(), Node::kInputs);
        Context ctx;
        ctx.op_ = name();
        Tensor out;
        {
            InferenceMode inside;  // forward's own ops record nothing
            out = F::forward(ctx, args...);
        }
        std::array<const Tensor*, Node::kInputs> slots{};
        const Tensor none;
        for (std::size_t k = 0; k < slots.size(); ++k) slots[k] = k < inputs.size() ? inputs[k] : &none;
        out = out.detach();  // the forward's value, recorded as this node's output
        if (auto* state = record<Context>(name(), &run_backward, {slots[0], slots[1], slots[2], slots[3], slots[4], slots[5]},
                                          {&out})) {
            *state = std::move(ctx);
            for (std::size_t k = 0; k < inputs.size(); ++k) state->needs_[k] = inputs[k]->requires_grad();
        }
        return out;
    }

private:
    static const char* name() {
        if constexpr (requires { F::kName; })
            return F::kName;
        else
            return "function";
    }
    template <class T> static void collect(std::vector<const Tensor*>& out, const T& arg) {
        if constexpr (detail::is_tensor<T>) out.push_back(&arg);
    }
    static void run_backward(Backward& b, const Context& ctx) {
        detail::hand_over(b, ctx.op_, F::backward(ctx, b.grad_out()));
    }
};

}  // namespace levers::autograd
