// A model's parameters and their gradients, each in one flat contiguous buffer
// (and a compute copy of the parameters where the model computes in another
// dtype than the optimizer keeps: bf16 on a GPU).
//
// Parameters are declared with add(), then allocate(); every parameter is a
// view into the flat buffer (the gradients' buffer is made, zeroed, at its
// first use: a set whose gradients ZeRO-2 shards never holds the whole), so the data-parallel layer reduces slices of
// grads() in place and the optimizer sweeps one array. Entries are laid out
// in the order declared: models declare them in forward order, so backward
// finishes the end of the buffer first.
#pragma once

#include "levers/core/flat_shard.hpp"
#include "levers/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace levers {

// What the autograd engine tells whoever listens to a ParamSet's gradients
// during a backward pass (data parallelism registers one: levers/distributed/grad_sync.hpp),
// as PyTorch's post-accumulate-grad hooks do per parameter. In order:
// backward_begins(); will_compute(entry) for each entry whose gradient this
// pass computes; planned() (every other entry's gradient is final already);
// then grad_final(entry) for each of those once backward has passed the last
// node that adds to it, given the entry's gradient (the listener may take it).
// Where the set keeps no gradient for an entry (sharded_grads()), the engine
// asks grad_storage(entry) at its first write: zeroed memory the listener
// provides (a bucket's), or an undefined tensor for the engine to make its own.
class GradHooks {
public:
    virtual ~GradHooks() = default;
    virtual void backward_begins() = 0;
    virtual void will_compute(int entry) = 0;
    virtual void planned() = 0;
    virtual void grad_final(int entry, Tensor& grad) = 0;
    virtual Tensor grad_storage(int /*entry*/) { return {}; }
};

// Where the values a set computes with are still arriving (ZeRO's all-gather
// of the updated parameters, queued to run while the next forward starts:
// levers/distributed/data_parallel.hpp): await(end) returns once elements [0, end) have
// arrived, and says whether all have.
class ParamArrivals {
public:
    virtual ~ParamArrivals() = default;
    virtual bool await(std::int64_t end) = 0;
};

class ParamSet {
public:
    struct Entry {
        std::string name;
        Shape shape;
        std::int64_t offset = 0;  // in elements, into the flat buffers
        bool decay = true;        // weight decay applies (matrices, embeddings)
    };

    // Declares a parameter; returns its id. Only before allocate().
    int add(std::string name, Shape shape, bool decay);
    // Creates the zeroed flat buffers, parameters and (unless `with_grads` is
    // false: frozen parameters) gradients in `dtype` (f32 or f64).
    void allocate(DType dtype = DType::f32, bool with_grads = true);
    bool has_grads() const { return with_grads_; }
    // Moves the parameters to `device`, computing in `compute`: the
    // parameters' dtype, bf16 on a GPU, or f32 for f64 parameters. Where it
    // differs, the set keeps a compute copy (compute()) beside the master
    // values the optimizer updates; gradients (if the set has them) are in
    // `compute`, made zeroed at their first use.
    void to_device(Device device, DType compute);
    // A set without gradients (frozen parameters: nothing updates them) held
    // on `device` in `compute` alone, bf16 on a GPU: no master values in f32
    // beside the copy computed with (a third of the memory). dtype() is then
    // `compute`; to_device() and convert() take it back to f32 on the host.
    void hold_as(Device device, DType compute);
    // The parameters converted to `dtype` where they are (f32 <-> f64, the CPU
    // only), computing in it; gradients alike and zeroed.
    void convert(DType dtype);
    Device device() const { return params_.device(); }
    DType dtype() const { return params_.dtype(); }  // the master values'
    DType grad_dtype() const { return grad_dtype_; }
    DType compute_dtype() const { return compute_.defined() ? compute_.dtype() : dtype(); }
    bool allocated() const { return params_.defined(); }

    // Views of one entry. param_tensor fails while the master values are
    // sharded; grad_tensor is undefined while the gradients are.
    Tensor param_tensor(int id) const;
    Tensor grad_tensor(int id) const;
    Tensor compute_tensor(int id) const;  // a view of compute()
    // The host pointer to an entry's parameters (f32 or f64 on the CPU).
    template <class T> T* param(int id) const { return param_tensor(id).data<T>(); }

    // The master values, flat [size()]; while sharded, the shard's only, compactly.
    const Tensor& params() const {
        await(size_);
        return params_;
    }
    // The master values of elements [begin, end): a slice of params(); while
    // sharded, [begin, end) must lie in one of the shard's ranges.
    Tensor param_slice(std::int64_t begin, std::int64_t end) const;
    // The values to compute with, flat [size()]: the compute copy, converted
    // from the master values when they changed since (not while they are
    // sharded: whoever sharded them keeps it), or params() itself.
    const Tensor& compute() const;
    // The compute copy holds the current master values (written there by
    // whoever shards them: dist's ParamSync gathers it).
    void compute_written() { compute_version_ = version_; }
    // Entry `id`'s values to compute with are here (arrived, the copy caught
    // up where it converts): Parameter::operator() asks before it hands them out.
    void ready(int id) const;
    // While values arrive, every accessor of the values waits for all of
    // them but ready(), which waits for its entry's (the buffer's start
    // first: forward order). Not owned; null once all have arrived.
    void set_arrivals(ParamArrivals* arrivals) { arrivals_ = arrivals; }
    void await(std::int64_t end) const {
        if (arrivals_ && arrivals_->await(end)) arrivals_ = nullptr;
    }
    // Flat [size()] (made zeroed here at first use); while sharded, the
    // shard's elements only, compactly. Undefined for a set without gradients.
    const Tensor& grads() const;
    // The gradients of elements [begin, end) of the flat buffer: a slice of
    // grads(); while sharded, [begin, end) must lie in one of the shard's ranges.
    Tensor grad_slice(std::int64_t begin, std::int64_t end) const;

    // ZeRO-2 (levers/distributed/data_parallel.hpp): the set keeps gradients for `shard`
    // only (zeroed; the whole buffer goes), and a backward pass's gradients
    // live where the set's listener puts them. unshard_grads() keeps the
    // whole zeroed buffer again; to_device() and convert() do too.
    void shard_grads(const FlatShard& shard);
    void unshard_grads();
    // The gradients' memory goes, sharded or whole; they are made whole and zeroed at their next use.
    void release_grads() {
        grads_ = Tensor();
        grad_shard_ = {};
    }
    // The shard kept, or null when the gradients are whole.
    const FlatShard* sharded_grads() const { return grad_shard_.ranges.empty() ? nullptr : &grad_shard_; }
    // ZeRO-1 and 2 with a compute copy (bf16 on a GPU): the set keeps the
    // master values of `shard` only (the whole buffer goes, the compute copy
    // stays whole). unshard_params(whole) takes the whole master values back
    // (gathered by the caller). Moving or converting a set fails while sharded.
    void shard_params(const FlatShard& shard);
    void unshard_params(const Tensor& whole);
    const FlatShard* sharded_params() const { return param_shard_.ranges.empty() ? nullptr : &param_shard_; }
    const std::vector<Entry>& entries() const { return entries_; }
    const Entry& entry(int id) const { return entries_[static_cast<std::size_t>(id)]; }
    int find(const std::string& name) const;  // -1 if absent
    std::int64_t size() const { return size_; }
    void zero_grad() {  // (no-op without gradients, or before they are made)
        if (grads_.defined()) grads_.zero();
    }
    // Bumped by whoever changes the parameters (the optimizer, loading): a
    // compute copy in another dtype knows when to refresh.
    std::uint64_t version() const { return version_; }
    void changed() { ++version_; }

    // Who hears the autograd engine's calls on these gradients (null: nobody;
    // not owned: the listener unsets itself before it goes).
    void set_grad_hooks(GradHooks* hooks) { hooks_ = hooks; }
    GradHooks* grad_hooks() const { return hooks_; }

private:
    std::vector<Entry> entries_;
    std::int64_t size_ = 0;
    Tensor params_;
    mutable Tensor grads_;  // made by grads() at first use
    Tensor compute_;        // the compute copy, where the set computes in another dtype
    mutable std::uint64_t compute_version_ = 0;  // the master values' version compute_ holds
    bool with_grads_ = false;
    DType grad_dtype_ = DType::f32;
    FlatShard grad_shard_;   // empty: the gradients are whole
    FlatShard param_shard_;  // empty: the master values are whole
    std::uint64_t version_ = 0;
    GradHooks* hooks_ = nullptr;
    mutable ParamArrivals* arrivals_ = nullptr;
};

}  // namespace levers
