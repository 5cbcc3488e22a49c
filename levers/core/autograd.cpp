#include "levers/core/autograd.hpp"

#include "levers/core/dispatch.hpp"
#include "levers/core/generic_calls.hpp"
#include "levers/core/params.hpp"

#include <algorithm>

namespace levers::autograd {

namespace {
thread_local bool g_grad_enabled = true;

[[noreturn]] void freed(const char* op) {
    LEVERS_FAIL("{}: backward reached a tensor whose graph an earlier backward already freed (each forward's graph "
                "is freed by its backward: run the forward again, or call backward once)",
                op);
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
InferenceMode::InferenceMode() : before_(g_grad_enabled) { g_grad_enabled = false; }
InferenceMode::~InferenceMode() { g_grad_enabled = before_; }
EnableGrad::EnableGrad() : before_(g_grad_enabled) { g_grad_enabled = true; }
EnableGrad::~EnableGrad() { g_grad_enabled = before_; }

namespace {
thread_local Tape* g_recompute = nullptr;  // the innermost RecomputeScope's tape, or null
thread_local int g_recompute_depth = 0;
// The recompute tapes, one per nesting depth, kept so steady steps reuse their slots. Never destroyed, as tape().
std::vector<Tape*>& recompute_tapes() {
    thread_local auto* tapes = new std::vector<Tape*>;
    return *tapes;
}
}  // namespace

Tape& tape() {
    if (g_recompute) return *g_recompute;
    // Never destroyed: tensors may outlive the thread's static destruction order.
    thread_local Tape* t = new Tape;
    return *t;
}

RecomputeScope::RecomputeScope() : before_(g_recompute) {
    auto& tapes = recompute_tapes();
    if (static_cast<int>(tapes.size()) <= g_recompute_depth) {
        tapes.push_back(new Tape);
        tapes.back()->set_tracks_leaves(false);
    }
    g_recompute = tapes[static_cast<std::size_t>(g_recompute_depth++)];
}

RecomputeScope::~RecomputeScope() {
    --g_recompute_depth;
    g_recompute = before_;
}

Node* record(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
             std::initializer_list<Tensor*> outputs) {
    return tape().record(op, backward, inputs, outputs);
}

Node* record_using(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
                   std::initializer_list<Tensor*> outputs, const std::vector<Tensor>& leaves) {
    return tape().record(op, backward, inputs, outputs, &leaves);
}

namespace {
TensorArg arg_of(const Tensor& t) { return {t.raw(), t.shape(), t.strides(), t.dtype()}; }
}  // namespace

void add_into(const Tensor& out, const Tensor& a, const Tensor& b) {
    static KernelSlot& add = kernel_slot_of<ElementwiseCall>("add");
    LEVERS_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.device() == b.device(),
                 "gradients of different shapes meet: {} {} and {} {}", name_of(a.dtype()), a.shape().str(),
                 name_of(b.dtype()), b.shape().str());
    ElementwiseCall call;
    call.out = arg_of(out);
    call.in[0] = arg_of(a);
    call.in[1] = arg_of(b);
    run_kernel(add, a.device(), a.dtype(), call);
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
    if (g.shape() == shape) return g;
    const int lead = g.ndim() - shape.ndim();
    LEVERS_CHECK(lead >= 0, "sum_to: a {} gradient cannot sum to {}", g.shape().str(), shape.str());
    // Summed with g's rank (keepdim), then the leading dimensions dropped.
    Shape kept;
    for (int d = 0; d < g.ndim(); ++d) {
        const std::int64_t size = d < lead ? 1 : shape[d - lead];
        LEVERS_CHECK(size == g.dim(d) || size == 1, "sum_to: a {} gradient cannot sum to {}", g.shape().str(),
                     shape.str());
        kept = kept.appended(size);
    }
    Tensor out = Tensor::empty(kept, g.dtype(), g.device());
    ReduceCall call;
    call.out = arg_of(out);
    call.in = arg_of(g);
    run_kernel(g.device(), g.dtype(), call);
    return out.view(shape);
}

// --- nodes' saved state ----------------------------------------------------------

Node::Node(Node&& o) noexcept
    : op(o.op),
      backward(o.backward),
      typed_backward(o.typed_backward),
      in(std::move(o.in)),
      n_in(o.n_in),
      out_shape(o.out_shape),
      out_dtype(o.out_dtype),
      out_device(o.out_device),
      n_out(o.n_out),
      grad(std::move(o.grad)),
      grad_owned(o.grad_owned),
      seed_is_one(o.seed_is_one),
      consumed(o.consumed) {
    if (o.state_ops_) {
        o.state_ops_->move(state_.data(), o.state_.data());
        state_ops_ = o.state_ops_;
        o.state_ops_ = nullptr;
    }
}

Node& Node::operator=(Node&& o) noexcept {
    if (this == &o) return *this;
    this->~Node();
    new (this) Node(std::move(o));
    return *this;
}

void Node::release_state() {
    if (!state_ops_) return;
    state_ops_->destroy(state_.data());
    state_ops_ = nullptr;
}

bool Tape::is_stale(const ValueRef& v) const {
    return v.tape != this || v.generation != generation_ || v.node < 0 ||
           static_cast<std::size_t>(v.node) >= nodes_.size() || nodes_[static_cast<std::size_t>(v.node)].consumed;
}

void Tape::reset() {
    nodes_.clear();  // capacity stays: the next graph reuses the slots
    leaves_.clear();
    consumed_ = 0;
    live_ = 0;       // handles of this generation become stale
    ++generation_;
}

Edge Tape::edge_for(const Tensor& t, std::int32_t node) {
    Edge e;
    e.present = true;
    e.shape = t.shape();
    e.dtype = t.dtype();
    e.device = t.device();
    const ValueRef& v = t.value_ref();
    if (v.tape) {
        if (is_stale(v))
            e.stale = v.tape == this;
        else
            e.node = v.node, e.output = v.output;
        return e;
    }
    Leaf* leaf = t.leaf();
    if (leaf && leaf->requires_grad) {
        e.leaf = t.leaf_ptr();
        note_first_use(t, node);
    }
    return e;
}

void Tape::note_first_use(const Tensor& t, std::int32_t node) {
    Leaf* leaf = t.leaf();
    if (!tracks_leaves_ || !leaf || !leaf->requires_grad) return;
    if (leaf->tape != this || leaf->generation != generation_) {  // its first use in this graph
        leaf->tape = this;
        leaf->generation = generation_;
        leaf->first_use = node;
        leaves_.push_back(leaf);
    }
}

Node* Tape::record(const char* op, BackwardFn backward, std::initializer_list<const Tensor*> inputs,
                   std::initializer_list<Tensor*> outputs, const std::vector<Tensor>* leaves) {
    if (!g_grad_enabled) return nullptr;
    bool needed = false;
    for (const Tensor* t : inputs) {
        if (!t || !t->defined()) continue;
        needed |= t->value_ref().tape == this;  // its graph (or a freed one: backward through it is refused)
        needed |= t->leaf() && t->leaf()->requires_grad;
    }
    if (leaves)
        for (const Tensor& t : *leaves) needed |= t.leaf() && t.leaf()->requires_grad;
    if (!needed) return nullptr;
    if (live_ == 0 && !nodes_.empty()) reset();  // no tensor of the old graph is alive: drop it
    LEVERS_CHECK(inputs.size() <= Node::kInputs && outputs.size() <= Node::kOutputs,
                 "{}: an op records at most {} inputs and {} outputs", op, Node::kInputs, Node::kOutputs);
    const auto index = static_cast<std::int32_t>(nodes_.size());
    Node& n = nodes_.emplace_back();
    n.op = op;
    n.backward = backward;
    for (const Tensor* t : inputs) {
        if (t && t->defined()) n.in[static_cast<std::size_t>(n.n_in)] = edge_for(*t, index);
        ++n.n_in;
    }
    if (leaves)
        for (const Tensor& t : *leaves) note_first_use(t, index);
    for (Tensor* t : outputs) {
        const auto k = static_cast<std::size_t>(n.n_out);
        n.out_shape[k] = t->shape();
        n.out_dtype[k] = t->dtype();
        n.out_device = t->device();
        t->set_value_ref({this, generation_, index, n.n_out});
        ++n.n_out;
    }
    return &n;
}

namespace {
// Who listens to this leaf's gradient: its parameter set's hooks (DDP's), if any.
GradHooks* hooks_of(const Leaf* l) { return l->set ? l->set->grad_hooks() : nullptr; }

// The leaf's gradient, bound at its first write to what its set's listener
// provides where the set keeps none (ZeRO-2's buckets); undefined: make one.
Tensor& leaf_grad(Leaf* l) {
    if (!l->grad.defined())
        if (GradHooks* hooks = hooks_of(l)) l->grad = hooks->grad_storage(l->entry);
    return l->grad;
}
}  // namespace

Tensor& Tape::slot(const Edge& edge, bool*& owned) {
    Node& producer = nodes_[static_cast<std::size_t>(edge.node)];
    owned = &producer.grad_owned[static_cast<std::size_t>(edge.output)];
    return producer.grad[static_cast<std::size_t>(edge.output)];
}

void Tape::accumulate(const Edge& edge, const Tensor& given, bool shared) {
    // Gradients are kept contiguous: a view's backward may hand over a strided one.
    const bool strided = !given.is_contiguous();
    const Tensor g = strided ? given.contiguous() : given;
    shared = shared && !strided;
    if (edge.leaf) {
        Tensor& lg = leaf_grad(edge.leaf.get());
        if (!lg.defined()) {
            lg = shared ? g.clone() : g;
        } else {
            LEVERS_CHECK(lg.dtype() == g.dtype() && lg.shape() == g.shape(),
                         "a leaf's gradient is {} {}, but backward gives {} {}", name_of(lg.dtype()), lg.shape().str(),
                         name_of(g.dtype()), g.shape().str());
            add_into(lg, lg, g);
        }
        return;
    }
    bool* owned = nullptr;
    Tensor& s = slot(edge, owned);
    if (!s.defined()) {
        s = g;
        *owned = !shared;
    } else if (*owned) {
        add_into(s, s, g);
    } else {
        Tensor sum = Tensor::empty(s.shape(), s.dtype(), s.device());
        add_into(sum, s, g);
        s = sum;
        *owned = true;
    }
}

const Tensor& Tape::one_like(const Tensor& root) {
    for (const Tensor& t : ones_)
        if (t.device() == root.device() && t.dtype() == root.dtype() && t.shape() == root.shape()) return t;
    Tensor one = Tensor::persistent(root.shape(), root.dtype(), root.device());
    one.copy_from(Tensor::full(root.shape(), 1.0, root.dtype()));
    ones_.push_back(one);
    return ones_.back();
}

void Tape::mark_leaves_final(std::int32_t node, std::int64_t& cursor) {
    for (; cursor >= 0 && leaves_[static_cast<std::size_t>(cursor)]->first_use >= node; --cursor) {
        Leaf* l = leaves_[static_cast<std::size_t>(cursor)];
        if (GradHooks* hooks = hooks_of(l)) hooks->grad_final(l->entry, l->grad);
    }
}

void Tape::backward(const Tensor& root, const Tensor* gradient) {
    const ValueRef& v = root.value_ref();
    LEVERS_CHECK(v.tape != nullptr || root.leaf(),
                 "backward: this {} tensor was not computed by recorded ops (it was computed under InferenceMode, or "
                 "from tensors that need no gradient: parameters of a model, or a leaf made with requires_grad_())",
                 root.shape().str());
    if (!v.tape) return;  // a leaf itself: nothing to propagate
    LEVERS_CHECK(v.tape == this, "backward: this tensor was recorded by another thread; run backward there");
    if (is_stale(v)) freed(v.node >= 0 && static_cast<std::size_t>(v.node) < nodes_.size()
                               ? nodes_[static_cast<std::size_t>(v.node)].op
                               : "backward");
    Node& top = nodes_[static_cast<std::size_t>(v.node)];
    if (gradient) {
        LEVERS_CHECK(gradient->shape() == root.shape() && gradient->dtype() == root.dtype(),
                     "backward: the gradient given is {} {}, the tensor {} {}", name_of(gradient->dtype()),
                     gradient->shape().str(), name_of(root.dtype()), root.shape().str());
        top.grad[static_cast<std::size_t>(v.output)] = gradient->detach();
        top.grad_owned[static_cast<std::size_t>(v.output)] = false;
        top.seed_is_one = false;
    } else {
        LEVERS_CHECK(root.numel() == 1,
                     "backward of a {} tensor needs its gradient: reduce it to one value first, or call "
                     "backward(gradient)",
                     root.shape().str());
        top.grad[static_cast<std::size_t>(v.output)] = one_like(root);
        top.grad_owned[static_cast<std::size_t>(v.output)] = false;
        top.seed_is_one = v.output == 0;
    }
    InferenceMode no_recording;  // backward functions call kernels, never ops; views of gradients record nothing

    // A parameter's gradient is where its set keeps it now (nowhere yet while the set is sharded: leaf_grad).
    for (Leaf* l : leaves_)
        if (l->set) l->grad = l->set->grad_tensor(l->entry);
    // Sets with listeners (DDP's) hear which of their gradients this graph computes.
    sets_.clear();
    for (Leaf* l : leaves_)
        if (hooks_of(l) && std::find(sets_.begin(), sets_.end(), l->set) == sets_.end()) {
            sets_.push_back(l->set);
            hooks_of(l)->backward_begins();
        }
    for (Leaf* l : leaves_)
        if (GradHooks* hooks = hooks_of(l)) hooks->will_compute(l->entry);
    for (ParamSet* s : sets_) s->grad_hooks()->planned();

    std::int64_t cursor = static_cast<std::int64_t>(leaves_.size()) - 1;
    for (std::int32_t i = v.node; i >= 0; --i) {
        Node& n = nodes_[static_cast<std::size_t>(i)];
        bool reached = false;
        for (int k = 0; k < n.n_out; ++k) reached |= n.grad[static_cast<std::size_t>(k)].defined();
        if (!n.consumed && reached) {
            for (int k = 0; k < n.n_out; ++k) {
                auto& g = n.grad[static_cast<std::size_t>(k)];
                if (!g.defined())
                    g = Tensor::zeros(n.out_shape[static_cast<std::size_t>(k)], n.out_dtype[static_cast<std::size_t>(k)],
                                      n.out_device);
            }
            Backward b(*this, n);
            n.backward(b);
            for (int k = 0; k < n.n_in; ++k)
                if (b.pending_[static_cast<std::size_t>(k)].defined())
                    accumulate(n.in[static_cast<std::size_t>(k)], b.pending_[static_cast<std::size_t>(k)], false);
            n.release_state();  // saved tensors back to the pool for the nodes still to come
            for (auto& t : n.grad) t = Tensor();
            n.consumed = true;
            ++consumed_;
        }
        mark_leaves_final(i, cursor);
    }
    if (consumed_ == nodes_.size()) reset();
}

// --- what a backward function sees --------------------------------------------

double Backward::grad_out_scalar(int k) const {
    if (k == 0 && node_.seed_is_one) return 1.0;
    return grad_out(k).item();
}

Tensor Backward::write_grad(int k) {
    const Edge& e = node_.in[static_cast<std::size_t>(k)];
    if (e.stale) freed(node_.op);
    if (e.node >= 0) {
        bool* owned = nullptr;
        Tensor& s = tape_.slot(e, owned);
        if (!s.defined()) {  // the first contribution: written in place, no sum needed
            s = Tensor::empty(e.shape, e.dtype, e.device);
            *owned = true;
            return s;
        }
    } else if (e.leaf && !leaf_grad(e.leaf.get()).defined()) {
        e.leaf->grad = Tensor::empty(e.shape, e.dtype, e.device);
        return e.leaf->grad;
    }
    auto& pending = pending_[static_cast<std::size_t>(k)];
    pending = Tensor::empty(e.shape, e.dtype, e.device);
    return pending;
}

Tensor Backward::add_grad(int k) {
    const Edge& e = node_.in[static_cast<std::size_t>(k)];
    if (e.stale) freed(node_.op);
    if (e.leaf) {
        if (!leaf_grad(e.leaf.get()).defined()) e.leaf->grad = Tensor::zeros(e.shape, e.dtype, e.device);
        return e.leaf->grad;
    }
    bool* owned = nullptr;
    Tensor& s = tape_.slot(e, owned);
    if (!s.defined()) {
        s = Tensor::zeros(e.shape, e.dtype, e.device);
    } else if (!*owned) {
        s = s.clone();  // it is someone else's too: add into a copy
    }
    *owned = true;
    return s;
}

Tensor Backward::write_grad_or_scratch(int k) {
    const Edge& e = node_.in[static_cast<std::size_t>(k)];
    return e.needs_grad() ? write_grad(k) : Tensor::empty(e.shape, e.dtype, e.device);
}

Tensor Backward::add_grad_or_scratch(int k) {
    const Edge& e = node_.in[static_cast<std::size_t>(k)];
    return e.needs_grad() ? add_grad(k) : Tensor::zeros(e.shape, e.dtype, e.device);
}

void Backward::pass_grad(int k, const Tensor& g) {
    const Edge& e = node_.in[static_cast<std::size_t>(k)];
    if (e.stale) freed(node_.op);
    if (e.needs_grad()) tape_.accumulate(e, g, /*shared=*/true);
}

void Backward::set_grad(int k, const Tensor& g) {
    const Edge& e = node_.in[static_cast<std::size_t>(k)];
    if (e.stale) freed(node_.op);
    LEVERS_CHECK(g.shape() == e.shape, "{}: backward gave input {} a gradient of shape {}, but the input is {}", node_.op,
                 k, g.shape().str(), e.shape.str());
    if (e.needs_grad()) tape_.accumulate(e, g, /*shared=*/false);
}

}  // namespace levers::autograd

// --- the autograd parts of Tensor ----------------------------------------------

namespace levers {

bool Tensor::requires_grad() const {
    if (value_.tape) return !value_.tape->is_stale(value_);
    return leaf_ && leaf_->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
    LEVERS_CHECK(!value_.tape, "requires_grad_() on a tensor computed by recorded ops: only leaves (tensors you made) "
                 "take it; detach() it first to make one");
    if (!leaf_) leaf_ = std::make_shared<autograd::Leaf>();
    leaf_->requires_grad = on;
    return *this;
}

Tensor Tensor::grad() const { return leaf_ ? leaf_->grad : Tensor(); }

void Tensor::backward() const {
    if (value_.tape) return value_.tape->backward(*this, nullptr);
    autograd::tape().backward(*this, nullptr);  // explains why there is nothing to do
}

void Tensor::backward(const Tensor& gradient) const {
    if (value_.tape) return value_.tape->backward(*this, &gradient);
    autograd::tape().backward(*this, &gradient);
}

}  // namespace levers
