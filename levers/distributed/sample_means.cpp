#include "levers/distributed/sample_means.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"

#include <algorithm>

namespace levers::dist {

SampleMeans::SampleMeans(std::vector<std::string> metrics)
    : names_(std::move(metrics)), sums_(2 * names_.size(), 0.0) {}

std::size_t SampleMeans::index(const std::string& metric) const {
    auto it = std::find(names_.begin(), names_.end(), metric);
    LEVERS_CHECK(it != names_.end(), "metric '{}' was not declared to SampleMeans", metric);
    return static_cast<std::size_t>(it - names_.begin());
}

void SampleMeans::add(const std::string& metric, double sum, double count) {
    const auto i = index(metric);
    sums_[2 * i] += sum;
    sums_[2 * i + 1] += count;
}

double SampleMeans::count(const std::string& metric) const { return sums_[2 * index(metric) + 1]; }

std::map<std::string, double> SampleMeans::means() const {
    std::vector<double> all = sums_;
    all_reduce_sum(all);
    std::map<std::string, double> out;
    for (std::size_t i = 0; i < names_.size(); ++i) {
        LEVERS_CHECK(all[2 * i + 1] > 0, "metric '{}' has no samples on any rank", names_[i]);
        out[names_[i]] = all[2 * i] / all[2 * i + 1];
    }
    return out;
}

}  // namespace levers::dist
