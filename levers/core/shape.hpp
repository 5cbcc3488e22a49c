// A tensor's dimensions (at most six), and its strides: how far apart in
// memory, in elements, neighbours along each dimension are. No fmt here: CUDA
// kernels see shapes through levers/core/kernel.hpp, and nvcc cannot
// compile fmt.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace levers {

class Shape {
public:
    static constexpr int kMaxDims = 6;
    Shape() = default;
    Shape(std::initializer_list<std::int64_t> dims);
    explicit Shape(const std::vector<std::int64_t>& dims);

    int ndim() const { return ndim_; }
    std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
    std::vector<std::int64_t> dims() const { return {dims_.begin(), dims_.begin() + ndim_}; }
    std::int64_t numel() const {
        std::int64_t n = 1;
        for (int i = 0; i < ndim_; ++i) n *= dims_[static_cast<std::size_t>(i)];
        return n;
    }
    // The last dimension (1 for a scalar), and the product of the others: an
    // op over rows sees [rows(), last()].
    std::int64_t last() const { return ndim_ == 0 ? 1 : dims_[static_cast<std::size_t>(ndim_ - 1)]; }
    std::int64_t rows() const { return last() == 0 ? 0 : numel() / last(); }
    bool operator==(const Shape& o) const;
    std::string str() const;  // "[2, 3]"
    Shape with_dim(int i, std::int64_t size) const;  // copy with dimension i replaced
    Shape appended(std::int64_t size) const;         // copy with one more dimension at the end

private:
    std::array<std::int64_t, kMaxDims> dims_{};
    int ndim_ = 0;
};

// Strides in elements, one per dimension of the shape they go with (which
// carries the count). Never negative; 0 where a dimension repeats one element
// (a broadcast).
class Strides {
public:
    Strides() = default;
    // Row-major: the last dimension 1 apart, each other one the product of the sizes after it.
    static Strides contiguous(const Shape& shape) {
        Strides s;
        std::int64_t step = 1;
        for (int d = shape.ndim() - 1; d >= 0; --d) {
            s[d] = step;
            step *= shape[d];
        }
        return s;
    }
    std::int64_t operator[](int i) const { return v_[static_cast<std::size_t>(i)]; }
    std::int64_t& operator[](int i) { return v_[static_cast<std::size_t>(i)]; }
    // Whether memory holds `shape` row-major without gaps (a dimension of size 1 may have any stride).
    bool contiguous_for(const Shape& shape) const {
        std::int64_t step = 1;
        for (int d = shape.ndim() - 1; d >= 0; --d) {
            if (shape[d] == 1) continue;
            if (v_[static_cast<std::size_t>(d)] != step) return false;
            step *= shape[d];
        }
        return true;
    }

private:
    std::array<std::int64_t, Shape::kMaxDims> v_{};
};

}  // namespace levers
