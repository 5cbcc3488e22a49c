// Exact evaluation over samples sharded across ranks: each rank adds its
// samples' sums and counts, and means() combines them, so every sample counts
// once, whatever the rank count and however unevenly the shards fall (no
// padding or repeated samples, unlike a DistributedSampler).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace levers::dist {

class SampleMeans {
public:
    // The metrics every rank reports, in the same order on every rank.
    explicit SampleMeans(std::vector<std::string> metrics);

    // Adds `count` samples whose values sum to `sum` (a rank may add none).
    void add(const std::string& metric, double sum, double count);

    // Collective: each metric's sum over all ranks divided by its count.
    // Throws levers::Error if a metric has no sample on any rank.
    std::map<std::string, double> means() const;
    double count(const std::string& metric) const;  // this rank's, before means()

private:
    std::size_t index(const std::string& metric) const;
    std::vector<std::string> names_;
    std::vector<double> sums_;  // sum, count per metric
};

}  // namespace levers::dist
