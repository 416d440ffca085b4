// The arguments of a lowered pipeline and the checks at its entry: every input image is read only
// inside the buffer given, every output is written only inside its buffer (a violation returns
// kiln_error_access_out_of_bounds with a message naming the buffer, the dimension, the needed
// and the given range), the values of a multi-valued output share one shape, and scalar Params
// lie in their declared ranges.
// Requires: bounds_inference output (before storage flattening). Guarantees: the checks precede
// all work.
#pragma once

#include <vector>

#include "lang/IR.h"
#include "schedule/LoweredFunc.h"
#include "schedule/ScheduleFunctions.h"

namespace kiln {

/// The arguments of the pipeline, in call order: ImageParams and scalar Params in the order they
/// were declared (created), then Buffers the algorithm uses directly (by first use), then the
/// output buffers.
std::vector<LoweredArgument> collect_arguments(const Stmt &s, const PipelineEnv &env);

Stmt add_buffer_checks(const Stmt &s, const PipelineEnv &env,
                       const std::vector<LoweredArgument> &args);

} // namespace kiln
