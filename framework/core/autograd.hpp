// Reverse-mode automatic differentiation: ops record themselves on the
// calling thread's tape as they run (when an input needs a gradient and
// grad mode is on); Tensor::backward() walks the tape in reverse, each node
// turning its outputs' gradients into its inputs' (PyTorch's autograd, on a
// linear tape).
//
// Steady training steps allocate nothing here: nodes are slots of a vector
// whose capacity is kept, tensors are handles (the memory comes from the
// storage pools), and a node's saved tensors go back to the pool as soon as
// backward has passed it, so later nodes reuse their memory.
//
// The graph is freed by backward (a second backward through it is an error
// that says so) and dropped when no tensor of it is alive any more, so a
// forward without backward (an evaluation not under InferenceMode) costs
// memory only while its outputs live.
//
// Parameters are leaves that belong to a ParamSet: as backward passes the
// first node that used a parameter, its gradient is final, and the set hears
// it (ParamSet::mark_final), so data parallelism averages gradient buckets
// while backward goes on without the model doing anything.
#pragma once

#include "framework/core/tensor.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace levers::autograd {

struct Leaf {
    Tensor grad;  // made on first use for a user's leaf; a view of the flat gradients for a parameter
    bool requires_grad = true;
    ParamSet* set = nullptr;  // parameters: whose entry
    int entry = -1;
    // The leaf's first use in the tape's current graph: final once backward passed that node.
    Tape* tape = nullptr;
    std::uint32_t generation = 0;
    std::int32_t first_use = -1;
};

// Grad mode (thread-local, on by default). InferenceMode turns it off for a
// scope: ops record nothing and save nothing (evaluation, sampling).
bool grad_enabled();
class InferenceMode {
public:
    InferenceMode();
    ~InferenceMode();
    InferenceMode(const InferenceMode&) = delete;
    InferenceMode& operator=(const InferenceMode&) = delete;

private:
    bool before_;
};

class Backward;
using BackwardFn = void (*)(Backward& b);

// Where one input's gradient goes.
struct Edge {
    std::int32_t node = -1;  // the node that made the input, or -1
    std::int32_t output = 0;
    std::shared_ptr<Leaf> leaf;  // a leaf that wants a gradient (kept alive while the graph is)
    bool stale = false;    // made by a graph an earlier backward freed
    Shape shape;
    DType dtype = DType::f32;
    Device device;
    bool present = false;  // false: an optional input left out
    bool needs_grad() const { return node >= 0 || leaf != nullptr || stale; }
};

// One recorded op: what its backward needs.
struct Node {
    static constexpr int kInputs = 6, kOutputs = 2, kSaved = 8;
    const char* op = "";
    BackwardFn backward = nullptr;
    std::array<Edge, kInputs> in{};
    int n_in = 0;
    std::array<Tensor, kSaved> saved{};
    std::array<std::int64_t, 4> ints{};
    std::array<double, 4> reals{};
    // Outputs: their shapes (for zero gradients), and the gradients backward accumulates for them.
    std::array<Shape, kOutputs> out_shape{};
    std::array<DType, kOutputs> out_dtype{};
    Device out_device;
    int n_out = 0;
    std::array<Tensor, kOutputs> grad{};
    std::array<bool, kOutputs> grad_owned{};  // false: shared with another tensor, copy before adding into it
    bool seed_is_one = false;                 // grad[0] is the implicit 1 of backward() on a scalar
    bool consumed = false;

    // During forward: keeps `t` (its memory, not its record) for backward.
    void save(int slot, const Tensor& t) { saved[static_cast<std::size_t>(slot)] = t.detach(); }
};

// What a node's backward function sees. Conventions: write_grad gives a
// buffer to overwrite with input k's gradient, add_grad one to add it into
// (a parameter's own gradient), pass_grad hands over a gradient as it is;
// the engine sums contributions where an input feeds several ops.
class Backward {
public:
    Backward(Tape& tape, Node& node) : tape_(tape), node_(node) {}
    const Node& node() const { return node_; }
    const Tensor& saved(int slot) const { return node_.saved[static_cast<std::size_t>(slot)]; }
    std::int64_t attr_int(int i) const { return node_.ints[static_cast<std::size_t>(i)]; }
    double attr_real(int i) const { return node_.reals[static_cast<std::size_t>(i)]; }
    // d(loss)/d(output k).
    const Tensor& grad_out(int k = 0) const { return node_.grad[static_cast<std::size_t>(k)]; }
    // The same for a one-element output, as a number on the host (1 for backward()'s own seed).
    double grad_out_scalar(int k = 0) const;
    bool needs_grad(int k) const { return node_.in[static_cast<std::size_t>(k)].needs_grad(); }
    Tensor write_grad(int k);
    Tensor add_grad(int k);
    void pass_grad(int k, const Tensor& g);
    // The same where input k needs a gradient, else a scratch buffer of its
    // shape to discard (for kernels that compute several gradients at once).
    Tensor write_grad_or_scratch(int k);
    Tensor add_grad_or_scratch(int k);

private:
    friend class Tape;
    Tape& tape_;
    Node& node_;
    std::array<Tensor, Node::kInputs> pending_{};  // write_grad buffers to add in after the node ran
};

// Records an op whose outputs are `outputs`, if any of `inputs` needs a
// gradient and grad mode is on; returns the node to save tensors and
// attributes in, or null (nothing to record). Sets the outputs' records.
Node* record(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
             std::initializer_list<Tensor*> outputs);

// Tensor::view and Tensor::slice record themselves through these (the output
// shares the input's memory; backward reshapes, or places the rows back).
void record_view(const Tensor& in, Tensor& out);
void record_slice(const Tensor& in, Tensor& out, std::int64_t begin);
// out = a + b on their device (the gradient sums), through the backends' "add" kernel.
void add_into(const Tensor& out, const Tensor& a, const Tensor& b);

// The calling thread's tape.
class Tape {
public:
    Node* record(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
                 std::initializer_list<Tensor*> outputs);
    void backward(const Tensor& root, const Tensor* gradient);
    std::size_t nodes() const { return nodes_.size(); }  // recorded and not yet dropped

    // Handles of tensors this tape made (Tensor's copy and destroy keep count).
    void retain() { ++live_; }
    void release() { --live_; }
    std::uint32_t generation() const { return generation_; }
    bool is_stale(const ValueRef& v) const;

private:
    friend class Backward;
    void reset();
    Edge edge_for(const Tensor& t, std::int32_t node);
    // Adds `g` into the gradient slot of `edge`'s target (a producer's output or a leaf).
    void accumulate(const Edge& edge, const Tensor& g, bool shared);
    Tensor& slot(const Edge& edge, bool*& owned);
    void mark_leaves_final(std::int32_t node, std::int64_t& cursor);

    // backward()'s implicit 1 for a one-element root, one per device, dtype
    // and shape: made once, never written (gradient slots share it, and
    // copy it before adding into it), so a step copies nothing to the card for it.
    const Tensor& one_like(const Tensor& root);

    std::vector<Node> nodes_;
    std::vector<Tensor> ones_;
    std::vector<Leaf*> leaves_;  // in order of first use
    std::vector<ParamSet*> sets_;
    std::int64_t live_ = 0;
    std::size_t consumed_ = 0;
    std::uint32_t generation_ = 1;
};
Tape& tape();

}  // namespace levers::autograd
