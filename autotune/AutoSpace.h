// The automatic search space: knobs derived from the structure of any operator's pipeline, for
// operators without a hand-written template (autotune/Templates.h). For the output Func it tiles
// the two innermost dimensions at two levels (an inner tile and an outer multiple of it), picks a
// vector width and whether to unroll the tile rows and to parallelize the outermost loop; each
// update of the output may vectorize its innermost pure loop, split its first reduction variable
// and, for a large reduction, rfactor it. Every other Func of the pipeline (OperatorInstance::
// stages) gets a placement knob: inline (pure Funcs only), root, or computed at the row, the
// outer tile or the inner tile loop of the output, and whether to vectorize it.
#pragma once

#include "autotune/SearchSpace.h"

namespace kiln::autotune {

/// The automatic space of one instance of an operator (built with op.make(shape)).
SearchSpace auto_space(const apps::Operator &op, const std::vector<int64_t> &shape);

} // namespace kiln::autotune
