// Bounds inference: defines the region symbols `f.<x>.min` / `f.<x>.max` of every computed Func
// (consumers first, from the box of calls in its consume node, widened by the sites its updates
// touch) and the bounds of every Realize (the box its body writes and reads). Outputs compute
// the region of their output buffer. Uses interval arithmetic (lang/Interval.h), symbolic in the
// variables of enclosing loops.
// Requires: schedule_functions output. Guarantees: every region symbol and Realize bound defined.
#pragma once

#include "lang/Function.h"
#include "lang/IR.h"
#include "schedule/ScheduleFunctions.h"

namespace kiln {

Stmt bounds_inference(const Stmt &s, const PipelineEnv &env);

} // namespace kiln
