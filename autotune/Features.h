// Features of a lowered loop nest for the cost model: what a schedule does to the loops, the
// vectors and the memory traffic, as a fixed-length vector of numbers. Loop extents are
// evaluated with the instance's buffer shapes bound, so most are constants. Every count is
// weighted by how many times it executes (the product of the enclosing loop extents).
#pragma once

#include <string>
#include <vector>

#include "apps/Operator.h"
#include "schedule/LoweredFunc.h"

namespace kiln::autotune {

/// The names of the features, in the order loop_nest_features returns them.
const std::vector<std::string> &feature_names();

/// The features of f, lowered from `inst` (whose input data and output extents give the
/// buffer shapes): log2-scaled loop extents of the four innermost loop levels, vector width,
/// bytes loaded and stored per iteration of each of those levels, float operations, arithmetic
/// intensity, parallel and unrolled loop counts, allocation sizes.
std::vector<float> loop_nest_features(const LoweredFunc &f, const apps::OperatorInstance &inst);

} // namespace kiln::autotune
