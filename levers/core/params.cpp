#include "levers/core/params.hpp"

namespace levers {

int ParamSet::add(std::string name, Shape shape, bool decay) {
    LEVERS_CHECK(!params_.defined(), "parameter '{}' declared after allocate()", name);
    // Every parameter starts on 16 elements inside the flat buffer: 64 bytes
    // in f32 (vector loads), 128 in f64, 32 in a GPU's bf16 copy.
    constexpr std::int64_t kAlignElems = 16;
    std::int64_t offset = (size_ + kAlignElems - 1) / kAlignElems * kAlignElems;
    entries_.push_back({std::move(name), shape, offset, decay});
    size_ = offset + shape.numel();
    return static_cast<int>(entries_.size()) - 1;
}

void ParamSet::allocate(DType dtype, bool with_grads) {
    LEVERS_CHECK(dtype == DType::f32 || dtype == DType::f64, "parameters are f32 or f64, not {}", name_of(dtype));
    params_ = Tensor::persistent({size_}, dtype);
    grads_ = Tensor();
    compute_ = Tensor();
    param_shard_ = {};
    with_grads_ = with_grads;
    grad_dtype_ = dtype;
    grad_shard_ = {};
    ++version_;
}

void ParamSet::to_device(Device device, DType compute) {
    await(size_);
    LEVERS_CHECK(params_.defined(), "to_device() before allocate()");
    LEVERS_CHECK(!sharded_params(), "the parameters' master values are sharded over the ranks (ZeRO): they move once "
                 "the training loop that sharded them has ended");
    LEVERS_CHECK(compute == dtype() || (compute == DType::bf16 && !device.is_cpu()) ||
                     (compute == DType::f32 && dtype() == DType::f64),
                 "gradients in {} for {} parameters on {}: only {} there{}", name_of(compute), name_of(dtype()),
                 device.str(), name_of(dtype()), device.is_cpu() ? "" : ", or bf16");
    if (device != params_.device()) {
        Tensor moved = Tensor::persistent({size_}, dtype(), device);
        moved.copy_from(params_);
        params_ = moved;
    }
    // Gradients already where and as asked are zeroed in place; others are made there at their first use.
    if (grads_.defined() && grads_.device() == device && grads_.dtype() == compute && !sharded_grads()) {
        grads_.zero();
    } else {
        grads_ = Tensor();
        grad_shard_ = {};
    }
    if (with_grads_) grad_dtype_ = compute;
    compute_ = Tensor();
    if (compute != dtype()) compute_ = Tensor::persistent({size_}, compute, device);
    ++version_;  // the compute copy is written at its first use
}

void ParamSet::hold_as(Device device, DType compute) {
    await(size_);
    LEVERS_CHECK(params_.defined(), "hold_as() before allocate()");
    LEVERS_CHECK(!with_grads_, "a set with gradients keeps master values for its optimizer: to_device(), not hold_as()");
    LEVERS_CHECK(!sharded_params(), "the parameters' master values are sharded over the ranks (ZeRO)");
    if (params_.device() != device || params_.dtype() != compute) {
        // Converted on the host, then copied: the device never holds a second copy while it fills.
        Tensor held = Tensor::persistent({size_}, compute, device);
        held.copy_from(params_.to(Device::cpu(), compute));
        params_ = held;
    }
    compute_ = Tensor();
    grad_dtype_ = compute;
    ++version_;
}

void ParamSet::convert(DType dtype) {
    await(size_);
    LEVERS_CHECK(params_.defined(), "convert() before allocate()");
    LEVERS_CHECK(dtype == DType::f32 || dtype == DType::f64, "parameters are f32 or f64, not {}", name_of(dtype));
    if (dtype == this->dtype() && !compute_.defined()) return;
    LEVERS_CHECK(device().is_cpu(), "parameters change dtype on the CPU only, not on {}", device().str());
    LEVERS_CHECK(!sharded_params(), "the parameters' master values are sharded over the ranks (ZeRO): they convert "
                 "once the training loop that sharded them has ended");
    Tensor converted = Tensor::persistent({size_}, dtype);
    converted.copy_from(params_.to(Device::cpu(), dtype));
    params_ = converted;
    compute_ = Tensor();
    grads_ = Tensor();  // made in the new dtype at first use
    grad_shard_ = {};
    grad_dtype_ = dtype;
    ++version_;
}

namespace {
// Elements [begin, end) of the flat buffer from `part`, which holds `shard`'s ranges compactly.
Tensor shard_slice(const Tensor& part, const FlatShard& shard, std::int64_t begin, std::int64_t end, const char* what) {
    std::int64_t at = 0;  // where the range's elements start in the compact buffer
    for (const auto& [b, e] : shard.ranges) {
        if (b <= begin && end <= e) return part.slice(at + (begin - b), at + (end - b));
        at += e - b;
    }
    LEVERS_FAIL("{} [{}, {}) are not in this rank's shard", what, begin, end);
}
}  // namespace

Tensor ParamSet::param_tensor(int id) const {
    await(size_);
    const Entry& e = entry(id);
    LEVERS_CHECK(!sharded_params(), "parameter '{}': its master values are sharded over the ranks (ZeRO) while the "
                 "training loop runs; read the values computed with (the compute copy) or read it after the loop",
                 e.name);
    return params_.slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

Tensor ParamSet::param_slice(std::int64_t begin, std::int64_t end) const {
    await(size_);
    if (!sharded_params()) return params_.slice(begin, end);
    return shard_slice(params_, param_shard_, begin, end, "parameters");
}

const Tensor& ParamSet::compute() const {
    await(size_);
    if (!compute_.defined()) return params_;
    if (compute_version_ != version_ && !sharded_params()) {
        compute_.convert_from(params_);
        compute_version_ = version_;
    }
    return compute_;
}

void ParamSet::ready(int id) const {
    const Entry& e = entry(id);
    await(e.offset + e.shape.numel());
    if (!arrivals_) (void)compute();  // the copy converts where the master values changed (none arrive then)
}

Tensor ParamSet::compute_tensor(int id) const {
    const Entry& e = entry(id);
    const Tensor& flat = compute_.defined() ? compute_ : params_;  // a view: no conversion here
    return flat.slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

const Tensor& ParamSet::grads() const {
    if (with_grads_ && !grads_.defined() && params_.defined())
        grads_ = Tensor::persistent({sharded_grads() ? grad_shard_.size() : size_}, grad_dtype_, params_.device());
    return grads_;
}

Tensor ParamSet::grad_tensor(int id) const {
    const Entry& e = entry(id);
    LEVERS_CHECK(with_grads_, "parameter '{}' has no gradient (a frozen set)", e.name);
    if (sharded_grads()) return {};
    return grads().slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

Tensor ParamSet::grad_slice(std::int64_t begin, std::int64_t end) const {
    if (!sharded_grads()) return grads().slice(begin, end);
    return shard_slice(grads(), grad_shard_, begin, end, "gradients");
}

void ParamSet::shard_grads(const FlatShard& shard) {
    LEVERS_CHECK(with_grads_, "shard_grads() on a set without gradients");
    LEVERS_CHECK(!shard.ranges.empty() && shard.ranges.back().second <= size_, "a shard of {} elements outside {}",
                 shard.size(), size_);
    grads_ = Tensor();  // the whole buffer goes; the shard's is made at first use
    grad_shard_ = shard;
}

void ParamSet::unshard_grads() {
    if (sharded_grads()) release_grads();
}

void ParamSet::shard_params(const FlatShard& shard) {
    await(size_);
    LEVERS_CHECK(compute_.defined(), "shard_params() on a set without a compute copy: its master values are the "
                 "values it computes with");
    LEVERS_CHECK(!sharded_params(), "shard_params() on a set sharded already");
    LEVERS_CHECK(!shard.ranges.empty() && shard.ranges.back().second <= size_, "a shard of {} elements outside {}",
                 shard.size(), size_);
    (void)compute();  // the copy catches up while the whole master values are here
    Tensor part = Tensor::persistent({shard.size()}, dtype(), device());
    whole_to_shard(shard, params_, part);
    params_ = part;
    param_shard_ = shard;
}

void ParamSet::unshard_params(const Tensor& whole) {
    await(size_);
    LEVERS_CHECK(sharded_params(), "unshard_params() on a set whose master values are whole");
    LEVERS_CHECK(whole.shape() == Shape({size_}) && whole.dtype() == dtype() && whole.device() == device(),
                 "unshard_params(): {} {} values on {} for {} {} parameters on {}", whole.shape().str(),
                 name_of(whole.dtype()), whole.device().str(), size_, name_of(dtype()), device().str());
    params_ = whole;
    param_shard_ = {};
    compute_version_ = version_;  // the copy was gathered from these values
}

int ParamSet::find(const std::string& name) const {
    for (std::size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].name == name) return static_cast<int>(i);
    return -1;
}

}  // namespace levers
