// The lowering contract (schedule/LoweredFunc.h) checked as code. verify_lowered() raises an
// InternalError naming the first broken promise and where it is broken:
//  - "undefined variable": a Variable with no binder in scope (host: a Let, LetStmt or For, a
//    scalar argument, a buffer argument's b.min/extent/stride.<i> or descriptor, the descriptor
//    of an enclosing Allocate; kernels: a binder or a scalar argument of the kernel);
//  - "unknown buffer": a Load or Store of a name that is neither a buffer argument nor an
//    enclosing Allocate;
//  - "loop variable rebound": a For whose name is already bound where it starts;
//  - "loop left": a Vectorized or Unrolled loop anywhere, a GPU loop in host code or a kernel;
//  - "bad gpu_launch": a launch whose kernel index is not a constant index into `kernels`;
//  - "bad kernel": block or thread dimensions outside 1..3, a kernel Allocate without constant
//    extents, or a GPUShared Allocate outside a kernel.
// Lower.cpp runs it after the last pass when NDEBUG is not defined; the schedule fuzzers run it
// on every pipeline they lower.
#pragma once

#include "schedule/LoweredFunc.h"

namespace kiln {

void verify_lowered(const LoweredFunc &f);

} // namespace kiln
