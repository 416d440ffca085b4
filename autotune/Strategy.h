// Search strategies: each proposes configs of a search space that have not been measured, learns
// from every outcome, and saves its whole state as JSON (stored in the tuning run's row) so that a
// resumed run continues where it stopped.
//
//   random      uniform samples that meet the constraints
//   grid        the space in mixed-radix order, skipping configs that break a constraint
//   evolution   tournament selection from the best configs, uniform crossover, mutation
//   annealing   a walk to neighbouring configs, accepting slower ones with a falling probability
//   model       evolution guided by an XGBoost cost model on loop-nest features
//               (autotune/CostModel.h): a population evolves by the model's predictions, and
//               the best predicted unmeasured configs are measured (every fourth: random)
//   bandit      UCB1 over the strategies above: each proposal goes to the strategy that most
//               often found a new best, and every strategy learns from every outcome
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/CostModel.h"
#include "autotune/SearchSpace.h"
#include "tuning_db/TuningDB.h"

namespace kiln::autotune {

/// The result of measuring one config, as strategies see it.
struct Outcome {
    tuning_db::Status status = tuning_db::Status::ok;
    double median_ms = 0; ///< meaningful when status is ok
    bool ok() const { return status == tuning_db::Status::ok; }
};

/// What a strategy may ask of the tuner while proposing.
struct ProposalContext {
    const SearchSpace &space;
    /// Whether the config (by hash) was measured already or is being measured now.
    std::function<bool(const std::string &hash)> known;
    /// The loop-nest features of a config (autotune/Features.h), or empty when the config does
    /// not lower. Only the model strategy asks.
    std::function<std::optional<std::vector<float>>(const Config &)> features;
    /// When set, the only configs that may be proposed (simulation replays a database): random
    /// sampling and grid order draw from it instead of the whole space.
    const std::vector<Config> *universe = nullptr;
    /// When set, what the database knows of other workloads on this target (their configs'
    /// features and scores, across runs): the model strategy trains on these with its own rows,
    /// so it ranks from its first proposal.
    const TrainingRows *prior = nullptr;
};

class Strategy {
public:
    virtual ~Strategy() = default;
    virtual std::string name() const = 0;
    /// Up to n distinct configs that meet the space's constraints and are not known; fewer when
    /// the strategy runs out (grid at the end of the space, or no new config found).
    virtual std::vector<Config> propose(ProposalContext &ctx, int n) = 0;
    /// Learns from a measured config (in any order, including configs another run measured).
    virtual void observe(ProposalContext &ctx, const Config &config, const Outcome &outcome) = 0;
    /// Everything needed to continue: restore(state()) on a fresh strategy of the same name,
    /// seed and space gives one that proposes what this one would.
    virtual nlohmann::json state() const = 0;
    /// Raises RuntimeError naming the strategy and the field for a malformed state.
    virtual void restore(const nlohmann::json &state) = 0;
};

/// "random", "grid", "evolution", "annealing", "model", "bandit".
const std::vector<std::string> &strategy_names();
/// Raises CompileError listing the names for an unknown one.
std::unique_ptr<Strategy> make_strategy(const std::string &name, uint64_t seed);

/// Helpers shared by the strategies (exposed for tests).
namespace detail {
/// Saves and loads a generator's full state as text.
std::string save_rng(const std::mt19937_64 &rng);
void load_rng(std::mt19937_64 &rng, const std::string &text);
/// A config changed in 1 or 2 knobs: integer knobs move to a neighbouring value or any value;
/// a knob coupled to one that steps (SearchSpace::add_coupling) steps along half of the time.
Config mutate(const SearchSpace &space, const Config &c, std::mt19937_64 &rng);
/// Every valid config that differs from `c` in exactly one knob, knob by knob in space order and
/// each knob's values in order: the incumbent's neighbourhood, which a mutation reaches only one
/// value at a time (an integer knob mostly steps to an adjacent value).
std::vector<Config> neighbours(const SearchSpace &space, const Config &c);
/// A valid config not known and not in `taken`, found within `tries` random samples.
std::optional<Config> random_new(ProposalContext &ctx, std::mt19937_64 &rng,
                                 const std::vector<std::string> &taken, int tries = 2000);
} // namespace detail

} // namespace kiln::autotune
