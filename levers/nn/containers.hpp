// Composition: layers applied in turn, a residual branch, and a list of
// modules of one kind (a transformer's blocks). Containers own what they
// hold; children are named "0", "1", ... as in PyTorch.
#pragma once

#include "levers/nn/module.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace levers::nn {

// x -> layer 0 -> layer 1 -> ...
class Sequential : public Layer {
public:
    Sequential() = default;
    Sequential(Module& parent, std::string name) { parent.register_module(std::move(name), *this); }
    // Appends a new L(args...) and returns it.
    template <class L, class... Args> L& add(Args&&... args) {
        auto layer = std::make_unique<L>(std::forward<Args>(args)...);
        L& ref = *layer;
        append(std::move(layer));
        return ref;
    }
    void append(std::unique_ptr<Layer> layer);
    Tensor forward(const Tensor& x) override;
    std::size_t size() const { return layers_.size(); }
    Layer& operator[](std::size_t i) { return *layers_.at(i); }

private:
    std::vector<std::unique_ptr<Layer>> layers_;
};

// x + (its layers, in turn)(x): a residual branch.
class Residual : public Sequential {
public:
    Residual() = default;
    Residual(Module& parent, std::string name) : Sequential(parent, std::move(name)) {}
    Tensor forward(const Tensor& x) override;
};

// Modules of type M named "0", "1", ...: n made alike as M(args...), or added one by one.
template <class M> class ModuleList : public Module {
public:
    ModuleList(Module& parent, std::string name) { parent.register_module(std::move(name), *this); }
    template <class... Args>
    ModuleList(Module& parent, std::string name, int n, const Args&... args) : ModuleList(parent, std::move(name)) {
        for (int i = 0; i < n; ++i) add(args...);
    }
    template <class... Args> M& add(Args&&... args) {
        items_.push_back(std::make_unique<M>(std::forward<Args>(args)...));
        register_module(std::to_string(items_.size() - 1), *items_.back());
        return *items_.back();
    }
    std::size_t size() const { return items_.size(); }
    M& operator[](std::size_t i) { return *items_.at(i); }
    M& back() { return *items_.back(); }
    auto begin() { return Deref{items_.begin()}; }
    auto end() { return Deref{items_.end()}; }

private:
    using Iter = typename std::vector<std::unique_ptr<M>>::iterator;
    struct Deref {
        Iter it;
        M& operator*() const { return **it; }
        Deref& operator++() {
            ++it;
            return *this;
        }
        bool operator!=(const Deref& o) const { return it != o.it; }
    };
    std::vector<std::unique_ptr<M>> items_;
};

}  // namespace levers::nn
