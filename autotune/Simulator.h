// Simulation mode (`kiln tune --simulate`): strategies replay a tuning database instead of
// measuring. Each strategy proposes configs as in a real run, but only among the configs the
// database has measured for the workload and target (the others count as known, the way measured
// configs do in a real run); each proposal costs one trial and yields its recorded outcome.
// Strategies can so be compared offline, on the same data, by the number of trials each needs to
// come within 95% of the best time known (best / time >= 0.95). Baseline rows (default and hand
// schedules) are not points of the space and are left out.
#pragma once

#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace kiln::autotune {

struct SimulateOptions {
    std::string op;
    std::vector<int64_t> shape; ///< empty: the operator's default shape
    std::string db_path = "tuning_db/kiln.db";
    std::vector<std::string> strategies; ///< empty: all of them
    std::string space = "template";
    int64_t trials = 100; ///< trials per strategy (each a config the database has)
    int threads = 0;      ///< selects the target: 0 = default_threads()
    uint64_t seed = 1;
};

struct SimulatedStrategy {
    std::string strategy;
    int64_t trials = 0; ///< configs found in the database and replayed
    std::optional<double> best_ms;
    std::optional<int64_t> trials_to_95; ///< empty when never reached
};

struct SimulationReport {
    int64_t measured_configs = 0; ///< distinct configs of this workload and target in the database
    std::optional<double> best_known_ms;
    std::vector<SimulatedStrategy> strategies;
};

/// Runs the simulation and prints a table to `out`. Raises RuntimeError naming the database,
/// workload and target when the database has no measurement of them.
SimulationReport simulate(const SimulateOptions &options, std::ostream &out = std::cout);

} // namespace kiln::autotune
