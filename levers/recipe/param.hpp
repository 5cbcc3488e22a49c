// A recipe parameter declared once: its name, type, default, help and bounds,
// in a handle the recipe registers and reads its value through. A misspelt
// handle does not compile, nor does reading one as another type.
//
//   const Param<int> block_size{"block_size", 128, "context length in bytes", at_least(1)};
//   ... recipe("pretrain").params(block_size, n_layer) ...
//   const int t = cfg[block_size];
//
// The settings every training recipe has (steps, lr, batch_size, seed,
// eval_every, checkpoint_every, ...) are the framework's handles in
// settings.hpp, declared by .training({...}).
#pragma once

#include "levers/core/error.hpp"
#include "levers/recipe/config.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace levers {

namespace detail {
// How a parameter of type T is held in a ParamValue: integers as long, floating point as double.
template <class T> struct Held {
    static_assert(std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_floating_point_v<T> ||
                      std::is_same_v<T, std::string>,
                  "Param<T>: T is bool, an integer type, a floating-point type, std::string, or a "
                  "std::vector of integers or of floating-point numbers");
    using type = std::conditional_t<std::is_same_v<T, bool>, bool,
                 std::conditional_t<std::is_integral_v<T>, long,
                 std::conditional_t<std::is_floating_point_v<T>, double, std::string>>>;
};
template <class T> struct Held<std::vector<T>> {
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                  "Param<std::vector<T>>: T is an integer or a floating-point type");
    using type = std::conditional_t<std::is_integral_v<T>, std::vector<long>, std::vector<double>>;
};

// A value read back as the handle's type; an integer out of T's range is an error naming the parameter.
long checked_integer(long v, long min, long max, const std::string& name);

// The range of values an integer type holds, as long.
template <class I> constexpr long lowest() { return std::is_signed_v<I> ? static_cast<long>(std::numeric_limits<I>::min()) : 0; }
template <class I> constexpr long highest() {
    return sizeof(I) >= sizeof(long) ? std::numeric_limits<long>::max() : static_cast<long>(std::numeric_limits<I>::max());
}

template <class T> T read_as(const ParamValue& v, const std::string& name) {
    using H = typename Held<T>::type;
    LEVERS_CHECK(std::holds_alternative<H>(v), "parameter '{}' is declared as {}, read through a handle of another type",
                 name, type_name(v));
    const H& held = std::get<H>(v);
    if constexpr (std::is_same_v<T, H>) {
        return held;
    } else if constexpr (std::is_integral_v<T>) {
        return static_cast<T>(checked_integer(held, lowest<T>(), highest<T>(), name));
    } else if constexpr (std::is_arithmetic_v<T>) {
        return static_cast<T>(held);
    } else {
        using Item = typename T::value_type;
        T out;
        for (const auto& x : held) {
            if constexpr (std::is_integral_v<Item>) out.push_back(static_cast<Item>(checked_integer(x, lowest<Item>(), highest<Item>(), name)));
            else out.push_back(static_cast<Item>(x));
        }
        return out;
    }
}
}  // namespace detail

template <class T> class Param {
public:
    using Type = T;
    using Held = typename detail::Held<T>::type;  // how the config holds it (and a clear error for a T it cannot)

    Param(std::string name, T default_value, std::string help, Bounds bounds = {})
        : name_(std::move(name)), default_(std::move(default_value)), help_(std::move(help)), bounds_(bounds) {}

    const std::string& name() const { return name_; }
    const T& default_value() const { return default_; }
    const std::string& help() const { return help_; }
    const Bounds& bounds() const { return bounds_; }

    // The same parameter with the recipe's own default: .params(settings::seed.with_default(7)).
    Param with_default(T value) const {
        Param p = *this;
        p.default_ = std::move(value);
        return p;
    }

    // What a recipe declares (recipe.hpp's builder calls it).
    ParamSpec spec() const {
        using H = Held;
        if constexpr (std::is_same_v<T, H>) return {name_, default_, help_, bounds_};
        else if constexpr (std::is_arithmetic_v<T>) return {name_, static_cast<H>(default_), help_, bounds_};
        else return {name_, H(default_.begin(), default_.end()), help_, bounds_};
    }

private:
    std::string name_;
    T default_;
    std::string help_;
    Bounds bounds_;
};

// Text defaults are std::string parameters: Param{"corpus", "", "..."} needs no <std::string>.
Param(std::string, const char*, std::string, Bounds = {}) -> Param<std::string>;

template <class T> T Config::operator[](const Param<T>& p) const { return detail::read_as<T>(value(p.name()), p.name()); }

}  // namespace levers
