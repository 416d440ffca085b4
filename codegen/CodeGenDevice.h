// The device code generator: prints the kernels of a lowered pipeline (schedule/LoweredFunc.h,
// DeviceKernel) as one self-contained CUDA C or OpenCL C program that users can read.
//
// The printed code keeps the semantics of lang/IR.h exactly:
//  - signed (and narrow unsigned) + - * compute in an unsigned type of 32 or 64 bits and convert
//    back, so they wrap instead of overflowing (undefined in C); uint32/uint64 use C's own;
//  - integer / and % are Euclidean and give 0 for a zero divisor (helpers kiln_div_i32 & co.;
//    a positive power-of-two constant divisor is a shift or a mask);
//  - float-to-integer casts truncate and saturate, NaN giving 0, as the CPU backend's
//    fptosi.sat (OpenCL convert_T_sat, CUDA helpers kiln_f32_to_i32 & co.);
//  - float min/max are a < b ? a : b and a > b ? a : b; round is half to even (CUDA rint;
//    OpenCL a helper kiln_round_f32, as PoCL miscompiles rint of large constants);
//  - bfloat16 is held as its bits (uint16_t in CUDA, ushort and ushortN in OpenCL), in memory
//    and in registers, and is only loaded, stored, selected and converted (lang/Type.h): to
//    float32 exactly (kiln_bf16_to_f32: the bits shifted up), from float32 to nearest even in
//    integer arithmetic as the CPU backend (kiln_f32_to_bf16), other types through float32;
//    bfloat16 constants print as their bits;
//  - no contraction into fused multiply-add: OpenCL programs say `#pragma OPENCL FP_CONTRACT OFF`;
//    CUDA programs must be compiled with --fmad=false (codegen/NVRTC.h does). OpenCL programs
//    must be built with -cl-fp32-correctly-rounded-divide-sqrt for float32 / and sqrt to be
//    correctly rounded.
// Structure follows the IR: LetStmts are `const T name = value;`, loops
// `for (int v = min; v < min + extent; v++)`, and a Let inside an expression becomes such a
// declaration just before the statement that uses it (expressions are pure). IR names become C
// identifiers ("blur_y.s0.x" -> blur_y_s0_x), with a numeric suffix when one is taken.
// In OpenCL, a loop whose body ends with a barrier (lowering's "the next iteration must not
// overwrite what other threads still read") is printed with the barrier opening the body and one
// more after the loop: every access keeps its order against every other, at the cost of one
// barrier per loop. PoCL 3.1 miscompiles the first form when a guarded store precedes that
// barrier (tests/pipeline/GPUScheduleFuzzTest.cpp, GPUScheduleFuzzBugs.PoCLRuns...); CUDA keeps it.
// Barriers print lazily, before the next line: two in a row print as one, and such a loop takes
// the place of a barrier right before or after it (PoCL 3.1 lost a local store before the pair).
// Vector code (Ramp, Broadcast, vector Loads, Stores and lets):
//  - OpenCL, 2, 3, 4, 8 or 16 lanes: OpenCL vector types (float4, int8, ...); dense loads and
//    unpredicated dense stores are vloadN/vstoreN; bool vectors are masks (-1/0) of the signed
//    integer vector type of the compared width; what OpenCL C has no (exact) vector form for
//    (integer division and abs, gathers, predicated loads, float min/max, transcendental
//    functions, which the CPU backend also computes lane by lane) is a vector literal of the
//    lanes, each a scalar call on the lanes of vector arguments declared first; a scatter or a
//    predicated store computes the value as a vector and stores it lane by lane;
//  - CUDA, and other lane counts: lane by lane; a vector let is a const array `T name[lanes]`, a
//    vector Store one assignment per lane (guarded by its predicate lane), in lane order.
// Either way a vector Store reads every lane before writing any (when its parts read the stored
// memory, they are computed first).
//
// Kernel arguments follow DeviceKernel::args in order: buffers as `__global T *restrict name`
// (OpenCL) or `T *__restrict__ name` (CUDA), const when the kernel does not write them; scalars by
// value. OpenCL has no bool kernel arguments or bool memory: a bool scalar argument is passed as a
// `uchar` (0 or 1), and bool buffers and allocations hold uchar. OpenCL kernels carry
// reqd_work_group_size(threads), CUDA kernels are `extern "C" __global__` with
// __launch_bounds__(threads[0] * threads[1] * threads[2]).
#pragma once

#include <string>
#include <vector>

#include "codegen/Target.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

/// Prints the kernels as one self-contained source program in the dialect of `api` (CUDA or
/// OpenCL): a short preamble of the helper functions the kernels use, then one kernel function per
/// DeviceKernel. No header is included, so NVRTC or an OpenCL driver compiles it anywhere.
/// InternalError for IR that device code cannot contain (AssertStmt, Parallel or GPU loops,
/// Func calls, shared allocations of non-constant size).
std::string print_device_source(const std::vector<DeviceKernel> &kernels, GpuApi api);

/// The kernels' source for target's GPU API (empty without kernels); CompileError when f has
/// kernels and the target no GPU API. KILN_DEBUG=2 prints it.
std::string kernel_source(const LoweredFunc &f, const Target &target);

} // namespace kiln
