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

/// The features of f, lowered from `inst` (whose input data and output extents give the
/// buffer shapes): log2-scaled loop extents of the four innermost loop levels, vector width,
/// bytes loaded and stored per iteration of each of those levels, float operations, arithmetic
/// intensity, parallel and unrolled loop counts, allocation sizes.
std::vector<float> loop_nest_features(const LoweredFunc &f, const apps::OperatorInstance &inst);

/// The features of a space's configs (what ProposalContext::features gives a strategy), lowered
/// from a fresh instance of the operator at the shape, remembered by config hash. A config that
/// does not lower, for whatever reason (any exception), has none, and is not lowered again. One
/// class for the tuner and the simulator, so both rank what the same lowering produces.
class FeatureCache {
public:
    FeatureCache(const apps::Operator &op, std::vector<int64_t> shape, const SearchSpace &space)
        : op(op), shape(std::move(shape)), space(space) {}
    std::optional<std::vector<float>> operator()(const Config &c);

private:
    const apps::Operator &op;
    std::vector<int64_t> shape;
    const SearchSpace &space;
    std::map<std::string, std::optional<std::vector<float>>> cache;
};

} // namespace kiln::autotune
