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
// first node that used a parameter, its gradient is final, and the set's
// listener hears it (GradHooks, params.hpp), so data parallelism averages
// gradient buckets while backward goes on without the model doing anything.
#pragma once

#include "levers/core/tensor.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
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

// Grad mode on for a scope, where backward has turned it off: a block
// recomputed during backward (activation checkpointing) records again.
class EnableGrad {
public:
    EnableGrad();
    ~EnableGrad();
    EnableGrad(const EnableGrad&) = delete;
    EnableGrad& operator=(const EnableGrad&) = delete;

private:
    bool before_;
};

class Tape;

// For a scope, the calling thread's ops record on a tape of its own (nested
// scopes take one each, kept for reuse), with grad mode on: a checkpointed
// block recomputed inside the backward of the outer tape, which must not
// grow while it is walked. That tape tracks no parameter's first use and
// tells no listener (GradHooks): the outer graph announced the block's
// parameters and reports them final after the block's node (record_using).
class RecomputeScope {
public:
    RecomputeScope();
    ~RecomputeScope();
    RecomputeScope(const RecomputeScope&) = delete;
    RecomputeScope& operator=(const RecomputeScope&) = delete;

private:
    Tape* before_;
    EnableGrad grad_;
};

class Backward;
using BackwardFn = void (*)(Backward& b);

// A tensor an op keeps for its backward: the memory, not the record
// (assigning one detaches it, so a saved tensor never keeps a graph alive).
class SavedTensor {
public:
    SavedTensor() = default;
    SavedTensor(const Tensor& t) : t_(t.detach()) {}  // NOLINT: implicit, so states fill as {.x = x}
    SavedTensor& operator=(const Tensor& t) {
        t_ = t.detach();
        return *this;
    }
    operator const Tensor&() const { return t_; }
    const Tensor& get() const { return t_; }
    const Tensor* operator->() const { return &t_; }

private:
    Tensor t_;
};

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

// One recorded op: its inputs' edges, its outputs' gradients, and the state
// its backward reads (a struct of the op's own: named saved tensors and
// attributes, kept inside the node).
struct Node {
    static constexpr int kInputs = 6, kOutputs = 2;
    static constexpr std::size_t kStateBytes = 8 * sizeof(Tensor) + 64;
    const char* op = "";
    BackwardFn backward = nullptr;
    void (*typed_backward)() = nullptr;  // the op's backward taking its state (called through `backward`)
    std::array<Edge, kInputs> in{};
    int n_in = 0;
    // Outputs: their shapes (for zero gradients), and the gradients backward accumulates for them.
    std::array<Shape, kOutputs> out_shape{};
    std::array<DType, kOutputs> out_dtype{};
    Device out_device;
    int n_out = 0;
    std::array<Tensor, kOutputs> grad{};
    std::array<bool, kOutputs> grad_owned{};  // false: shared with another tensor, copy before adding into it
    bool seed_is_one = false;                 // grad[0] is the implicit 1 of backward() on a scalar
    bool consumed = false;

    Node() = default;
    Node(Node&& other) noexcept;
    Node& operator=(Node&& other) noexcept;
    ~Node() { release_state(); }
    // Makes a `State` in the node (replacing any), for record<State>.
    template <class State> State* make_state() {
        static_assert(sizeof(State) <= kStateBytes, "an op's saved state must fit in Node::kStateBytes");
        static_assert(alignof(State) <= alignof(std::max_align_t));
        release_state();
        State* s = new (state_.data()) State{};
        state_ops_ = &kOps<State>;
        return s;
    }
    template <class State> const State& state() const {
        return *std::launder(reinterpret_cast<const State*>(state_.data()));
    }
    bool has_state() const { return state_ops_ != nullptr; }
    // Frees the saved tensors (after backward passed the node).
    void release_state();

private:
    struct StateOps {
        void (*destroy)(void*);
        void (*move)(void* to, void* from);  // move-constructs at `to`, destroys `from`
    };
    template <class State>
    static constexpr StateOps kOps = {[](void* p) { static_cast<State*>(p)->~State(); },
                                      [](void* to, void* from) {
                                          new (to) State(std::move(*static_cast<State*>(from)));
                                          static_cast<State*>(from)->~State();
                                      }};
    alignas(std::max_align_t) std::array<std::byte, kStateBytes> state_{};
    const StateOps* state_ops_ = nullptr;
};

// What a node's backward function sees. Conventions: write_grad gives a
// buffer to overwrite with input k's gradient, add_grad one to add it into
// (a parameter's own gradient), pass_grad hands over a gradient as it is;
// the engine sums contributions where an input feeds several ops.
class Backward {
public:
    Backward(Tape& tape, Node& node) : tape_(tape), node_(node) {}
    const Node& node() const { return node_; }
    // The shape of input k (its gradient's shape).
    const Shape& input_shape(int k) const { return node_.in[static_cast<std::size_t>(k)].shape; }
    // d(loss)/d(output k).
    const Tensor& grad_out(int k = 0) const { return node_.grad[static_cast<std::size_t>(k)]; }
    // The same for a one-element output, as a number on the host (1 for backward()'s own seed).
    double grad_out_scalar(int k = 0) const;
    bool needs_grad(int k) const { return node_.in[static_cast<std::size_t>(k)].needs_grad(); }
    Tensor write_grad(int k);
    Tensor add_grad(int k);
    void pass_grad(int k, const Tensor& g);
    // Hands over a gradient made for input k alone (the engine may add into it).
    void set_grad(int k, const Tensor& g);
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
// gradient and grad mode is on; returns its node, or null (nothing to
// record). Sets the outputs' records. `backward` needs nothing saved.
Node* record(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
             std::initializer_list<Tensor*> outputs);
// The same for an op that also uses `leaves` it does not take as inputs (a
// checkpointed block's parameters): recorded if any of them needs a
// gradient too, and their first use in the graph is this node, so the
// parameter sets' listeners hear that backward computes them and that they
// are final once it has passed the node.
Node* record_using(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
                   std::initializer_list<Tensor*> outputs, const std::vector<Tensor>& leaves);
// The same for an op whose backward reads a `State` of its own (saved tensors
// as SavedTensor fields, attributes): returns the state to fill, or null.
// The backward's type names the state, so the two cannot disagree.
template <class State>
State* record(const char* op, void (*backward)(Backward&, const State&), std::initializer_list<const Tensor*> inputs,
              std::initializer_list<Tensor*> outputs) {
    Node* n = record(
        op,
        [](Backward& b) {
            const auto fn = reinterpret_cast<void (*)(Backward&, const State&)>(b.node().typed_backward);
            fn(b, b.node().template state<State>());
        },
        inputs, outputs);
    if (!n) return nullptr;
    n->typed_backward = reinterpret_cast<void (*)()>(backward);
    return n->make_state<State>();
}

// out = a + b on their device, any strides (the gradient sums), through the backends' "add" kernel.
void add_into(const Tensor& out, const Tensor& a, const Tensor& b);
// `g` summed over the dimensions it was broadcast along, down to `shape` (a
// broadcast's backward); `g` itself where the shapes match.
Tensor sum_to(const Tensor& g, const Shape& shape);

// The calling thread's tape.
class Tape {
public:
    Node* record(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
                 std::initializer_list<Tensor*> outputs, const std::vector<Tensor>* leaves = nullptr);
    void backward(const Tensor& root, const Tensor* gradient);
    // A recompute's tape (RecomputeScope): leaves' first uses are not tracked, listeners not told.
    void set_tracks_leaves(bool on) { tracks_leaves_ = on; }
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
    void note_first_use(const Tensor& leaf, std::int32_t node);
    // Adds `g` into the gradient slot of `edge`'s target (a producer's output or a leaf).
    void accumulate(const Edge& edge, const Tensor& g, bool shared);
    Tensor& slot(const Edge& edge, bool*& owned);
    void mark_leaves_final(std::int32_t node, std::int64_t& cursor);

    // backward()'s implicit 1 for a one-element root, one per device, dtype
    // and shape: made once, never written (gradient slots share it, and
    // copy it before adding into it), so a step copies nothing to the GPU for it.
    const Tensor& one_like(const Tensor& root);

    std::vector<Node> nodes_;
    std::vector<Tensor> ones_;
    std::vector<Leaf*> leaves_;  // in order of first use
    std::vector<ParamSet*> sets_;
    std::int64_t live_ = 0;
    std::size_t consumed_ = 0;
    std::uint32_t generation_ = 1;
    bool tracks_leaves_ = true;
};
// The calling thread's tape (a RecomputeScope's, inside one).
Tape& tape();

}  // namespace levers::autograd
