#include "levers/train/early_stopping.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"

#include <fmt/format.h>

namespace levers::train {

bool should_stop(const EarlyStopping& es, LoopState& st, const Metrics& eval, bool last) {
    auto it = eval.find(es.metric);
    if (it == eval.end()) {
        std::string have;
        for (const auto& [name, v] : eval) have += (have.empty() ? "" : ", ") + name;
        LEVERS_FAIL("early stopping watches '{}', but evaluation reports only: {}", es.metric, have);
    }
    const double gain = es.maximize ? it->second - st.best_metric : st.best_metric - it->second;
    bool stop = false;
    if (!st.have_best || gain > es.min_delta) {
        st.have_best = true;
        st.best_metric = it->second;
        st.best_step = st.step;
        st.evals_without_gain = 0;
    } else if (++st.evals_without_gain >= es.patience && !last) {
        stop = true;
    }
    if (dist::backend()) stop = dist::all_reduce_mean(stop ? 1.0 : 0.0) > 0;
    return stop;
}

std::string stop_line(const EarlyStopping& es, const LoopState& st) {
    return fmt::format("early stop at step {}: {} has not improved on {:.4f} (step {}) for {} evaluations", st.step,
                       es.metric, st.best_metric, st.best_step, st.evals_without_gain);
}

}  // namespace levers::train
