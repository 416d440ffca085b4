// Storage flattening: turns each Realize into one Allocate per value (dense, in the Func's
// storage order), each Provide into Stores, and each call to a Func or input image into a Load
// at a flat index sum((arg_d - min_d) * stride_d). Buffers are described by the symbols
// `b.min.d`, `b.extent.d`, `b.stride.d`: defined by lets at each Allocate, and read from the
// buffer descriptors for inputs and outputs.
// Requires: bounds_inference output. Guarantees: no Realize, Provide or Func/Image Call remain.
#pragma once

#include "lang/IR.h"
#include "schedule/ScheduleFunctions.h"

namespace kiln {

Stmt storage_flattening(const Stmt &s, const PipelineEnv &env);

} // namespace kiln
