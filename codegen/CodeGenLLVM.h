// The LLVM CPU backend: compiles a LoweredFunc into an optimized LLVM module.
//
// The module defines two entry points:
//  - `int32_t name(kiln_buffer_t *b0, float p1, ...)`: buffers by pointer and scalars by value in
//    their C types, in LoweredFunc::args order (bool scalars as C bool); the ahead-of-time ABI.
//  - `int32_t name_argv(void **args)`: args[i] points to the i-th buffer pointer or scalar; the
//    JIT and the tuner call this one.
// Both return kiln_success (0) or a kiln_error_code_t after recording a message with kiln_error:
// each buffer is checked with kiln_buffer_check at entry (a null buffer gives
// kiln_error_buffer_argument_null), a failed AssertStmt returns its error_code (its message is a
// printf format for its args, evaluated only on failure), a failed heap allocation
// kiln_error_out_of_memory, and a failing parallel task its own code.
//
// How IR maps to LLVM, where a choice was made:
//  - integer + - * wrap (no nsw/nuw); / and % are Euclidean, 0 for a zero divisor, and never trap
//    (x / -1 wraps); float-to-int casts saturate (llvm.fptosi.sat), NaN gives 0;
//  - float min(a, b) is select(a < b, a, b) and max(a, b) is select(a > b, a, b), exactly as the
//    IR defines them, so a NaN in a yields b; float != is unordered (true for NaN), the other
//    comparisons are ordered;
//  - loads and stores with a dense ramp index are vector loads and stores, other vector indices
//    gathers and scatters, predicated ones masked; alignment is that of one element;
//  - float32 vector exp/log/tanh use codegen/VectorMath.h; other math calls are LLVM intrinsics
//    or libm, and vectors of them are computed lane by lane;
//  - Parallel loops become a task function over a closure struct, run by kiln_parallel_for;
//    Vectorized and Unrolled loops left by lowering run as serial loops;
//  - Stack and Register allocations of constant size, and Auto ones up to 16 KiB, live on the
//    stack; the others use kiln_malloc and are freed on every exit, error returns included;
//  - GPU kernel launches and host/device copies (schedule/OffloadGPULoops.h) are calls into the
//    runtime's device functions (kiln_device_launch, kiln_buffer_copy_to_device, ...) with the
//    interface of the target's GPU API; allocations that kernels use get a kiln_buffer_t from
//    kiln_device_buffer_wrap, released on every exit.
#pragma once

#include "codegen/LLVMModule.h"
#include "codegen/Target.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

/// Compiles the host code of f for t and optimizes it with kiln's pass list (codegen/LLVMModule).
/// A pipeline with GPU kernels needs t.gpu and the kernels' source (codegen/CodeGenDevice.h),
/// which the module embeds and hands to the runtime's device interface at each launch.
/// InternalError on IR that lowering should not have left (Provide, Realize, Func calls, GPU
/// loops and shared allocations).
LLVMModule compile_to_llvm_module(const LoweredFunc &f, const Target &t,
                                  const std::string &device_source = "");

} // namespace kiln
