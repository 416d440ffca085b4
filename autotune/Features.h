// Features of a lowered loop nest for the cost model: what a schedule does to the loops, the
// vectors and the memory traffic, as a fixed-length vector of numbers. Loop extents are
// evaluated with the instance's buffer shapes bound, so most are constants. Every count is
// weighted by how many times it executes (the product of the enclosing loop extents).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "autotune/SearchSpace.h"
#include "schedule/LoweredFunc.h"

namespace kiln::autotune {

/// The names of the features, in the order loop_nest_features returns them.
const std::vector<std::string> &feature_names();
/// The version of the feature set, under which the tuning database stores features
/// (Database::record_features): a hash of the names and of kFeatureRevision, which changes
/// whenever a feature's meaning does. Rows of another version are not used for training.
std::string feature_version();

/// The features of f, lowered from `inst` (whose input data and output extents give the
/// buffer shapes): log2-scaled loop extents of the four innermost loop levels, vector width,
/// bytes loaded and stored per iteration of each of those levels, float operations, arithmetic
/// intensity, parallel and unrolled loop counts, allocation sizes; for GPU kernels, their work
/// (each body counted once per thread of every block launched), launches, blocks, threads and
/// warps per block, shared memory and the occupancy of a nominal multiprocessor. With
/// `failed_check`, also the message (values filled in) of the first check outside every loop that
/// these shapes make fail, e.g. "... the schedule needs [-3588, 7935] but the buffer covers [0,
/// 4095]": a run would fail there whatever the data, so the tuner need not measure it to know.
std::vector<float> loop_nest_features(const LoweredFunc &f, const apps::OperatorInstance &inst,
                                      std::optional<std::string> *failed_check = nullptr);

/// The features of a space's configs (what ProposalContext::features gives a strategy), lowered
/// from a fresh instance of the operator at the shape, remembered by config hash. A config that
/// does not lower, for whatever reason (any exception), has none, and is not lowered again. One
/// class for the tuner and the simulator, so both rank what the same lowering produces.
class FeatureCache {
public:
    FeatureCache(const apps::Operator &op, std::vector<int64_t> shape, const SearchSpace &space)
        : op(op), shape(std::move(shape)), space(space) {}
    std::optional<std::vector<float>> operator()(const Config &c) { return entry(c).features; }
    /// The check this config fails at the shape before any loop runs (loop_nest_features), if
    /// any; empty for a config that does not lower.
    std::optional<std::string> failed_check(const Config &c) { return entry(c).failed_check; }

private:
    struct Entry {
        std::optional<std::vector<float>> features;
        std::optional<std::string> failed_check;
    };
    const Entry &entry(const Config &c);

    const apps::Operator &op;
    std::vector<int64_t> shape;
    const SearchSpace &space;
    std::map<std::string, Entry> cache;
    std::vector<BufferBase> input_data; ///< the inputs of one instance: their shapes are read
};

} // namespace kiln::autotune
