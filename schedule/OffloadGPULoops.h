// Offloading GPU loops: the last lowering pass of a pipeline with gpu_blocks/gpu_threads loops.
//
// Requires: a flattened, simplified loop nest (the output of the other passes), in which GPU loops
// are still For loops of type GPUBlock/GPUThread.
//
// Does, for each outermost GPU block loop nest (one kernel launch):
//  - outlines it into a DeviceKernel (schedule/LoweredFunc.h): block loops become gpu_block_id,
//    innermost first (x, y, z); the thread loops of every stage inside a block share one thread
//    space (gpu_thread_id, innermost thread loop = x), each guarded by its own extent, the block
//    size being the largest extent of each dimension;
//  - code at block level (outside every thread loop) runs as follows: lets, loops and ifs run in
//    every thread (they are uniform across a block); a statement that stores without any thread
//    loop inside runs in thread 0 only; a barrier follows every statement at block level that
//    stores (and ends every serial loop body that stores), so shared memory written by one stage
//    is complete before any other stage (or the next iteration) touches it;
//  - allocations at block level live in shared memory (MemoryType Auto or GPUShared), lifted to
//    the top of the kernel with a constant size; in MemoryType::Register they are lifted into a
//    private array per thread, each thread keeping the elements it alone touches
//    (schedule/GPURegisters.h); allocations inside thread loops are thread-private arrays of
//    constant size, except a GPUShared one in a statement that thread 0 runs alone, which is
//    shared like one at block level; constant sizes are upper bounds found by simplifying with
//    the lets in scope, + and - moved into min/max arms (a min() that occurs more than once is
//    named first, so a tile's base cancels) and interval arithmetic;
//  - in the host code, replaces the loop nest by copies to the device (inputs whose device copy is
//    stale, device allocations for outputs), a gpu_launch intrinsic and device-dirty marks; host
//    statements that touch a buffer some kernel touches first copy it back (when the device copy
//    is newer) and mark it host-dirty when they write it (see the host intrinsics below).
//
// Host intrinsics (Evaluate(Call::Intrinsic), each taking the UInt(64) Variable "<buffer>.buffer",
// the buffer's kiln_buffer_t descriptor, which the CPU backend provides for arguments and for
// allocations whose descriptor is used): device_copy_to_device, device_prepare_output,
// device_copy_to_host, device_set_host_dirty, device_set_device_dirty; and gpu_launch(kernel index,
// block counts x, y, z, scalar args in DeviceKernel::args order).
//
// Raises CompileError naming the Func and the loop for schedules no GPU can run: thread loops
// outside block loops, more than 3 block or thread dimensions, GPU loops inside parallel or
// vectorized loops, parallel loops inside kernels, non-constant thread extents or kernel-local
// allocation sizes, more than 1024 threads or 48 KiB of shared memory per block (CUDA's portable
// limits, which PoCL's larger ones would hide), shared memory outside kernels, and register
// storage at block level whose elements are not each touched by one thread.
#pragma once

#include <vector>

#include "schedule/LoweredFunc.h"

namespace kiln {

/// Portable limits every GPU schedule is checked against at compile time.
inline constexpr int64_t gpu_max_threads_per_block = 1024;
inline constexpr int64_t gpu_max_shared_bytes = int64_t(48) * 1024;

/// The checks of host code that need loops as the schedule wrote them (before vectorization):
/// GPU loops inside parallel or vectorized loops, thread loops outside block loops, shared
/// memory outside kernels. Run on the output of schedule_functions; offload_gpu_loops runs it
/// again.
void check_gpu_loops(const Stmt &s);

/// Outlines the GPU loops of s into kernels (appended to *kernels) and returns the host code.
Stmt offload_gpu_loops(const Stmt &s, std::vector<DeviceKernel> *kernels);

} // namespace kiln
