// The result of lowering: a function with C-ABI arguments and a flattened loop nest, ready for a
// code generator.
//
// Conventions of the body, which every backend relies on:
//  - Loads and Stores name a buffer argument or an Allocate; indices are in elements of the
//    buffer's type, relative to its host pointer (the element at the minimum coordinate).
//  - For each buffer argument `b` of d dimensions, the Variables `b.min.<i>`, `b.extent.<i>` and
//    `b.stride.<i>` (int32, names from lang/Param.h) are in scope, read from its descriptor.
//  - Scalar arguments are in scope as Variables of their name and type; the descriptor of a
//    buffer argument, and of an Allocate inside its body, as `<buffer>.buffer` (the argument of
//    the device intrinsics below).
//  - AssertStmt failure makes the function return kiln_error_assertion_failed (or the code given
//    by an `error_code` suffix convention of the backend) after recording its message.
//  - Parallel loops run through the runtime's kiln_parallel_for; Heap allocations use
//    kiln_malloc/kiln_free; Stack and Register allocations live on the stack.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "lang/IR.h"
#include "lang/Param.h"

namespace kiln {

/// One argument of a lowered function.
struct LoweredArgument {
    enum Kind { Buffer, Scalar };
    std::string name;
    Kind kind = Buffer;
    Type type;          ///< the element type of a buffer, or the scalar's type
    int dimensions = 0; ///< for buffers
    bool is_output = false;
    /// Where the value comes from when the pipeline is run from C++: an ImageParam or a scalar
    /// Param (param), or a Buffer used directly in the algorithm (buffer).
    std::shared_ptr<ParameterContents> param;
    std::shared_ptr<BufferContents> buffer;
};

/// One argument of a device kernel: a buffer (a pointer to its device copy, indexed in elements
/// relative to the element at the buffer's minimum coordinate, as on the host) or a scalar passed
/// by value.
struct DeviceArgument {
    std::string name; ///< the buffer's name, or the scalar Variable's name in the host code
    bool is_buffer = false;
    Type type;            ///< element type of a buffer, or the scalar's type
    bool read = false;    ///< buffers: the kernel loads from it
    bool written = false; ///< buffers: the kernel stores to it
};

/// A kernel outlined from an outermost GPU block loop (schedule/OffloadGPULoops.h). The body is
/// device IR, which every device backend prints:
///  - `Call::Intrinsic gpu_block_id(d)` and `gpu_thread_id(d)` (int32, d = 0, 1, 2 for x, y, z)
///    are the block and thread indices; the loops are gone;
///  - `Evaluate(Call::Intrinsic gpu_barrier())` waits for every thread of the block and makes
///    their shared-memory writes visible; it only appears where every thread reaches it;
///  - `Allocate` with MemoryType::GPUShared appear only at the top of the body (function scope),
///    with constant extents; other Allocates are thread-private arrays of constant size;
///  - free Variables are exactly the scalar arguments; Loads and Stores name buffer arguments or
///    allocations of the body.
struct DeviceKernel {
    std::string name;                 ///< a C identifier, unique within the pipeline
    std::vector<DeviceArgument> args; ///< in launch order
    Stmt body;
    int block_dims = 1, thread_dims = 1; ///< how many of x, y, z are used
    /// The threads per block in x, y, z (1 for unused dimensions); constant for every launch.
    int threads[3] = {1, 1, 1};
    int64_t shared_bytes = 0; ///< total static shared memory
};

/// Names of the host intrinsics (each takes the "<buffer>.buffer" Variable but gpu_launch):
/// device_copy_to_device (kiln_buffer_copy_to_device), device_prepare_output
/// (kiln_buffer_prepare_output), device_copy_to_host, device_set_host_dirty and
/// device_set_device_dirty (the runtime functions of those names).
namespace intrinsic {
inline constexpr const char *gpu_launch = "gpu_launch";
inline constexpr const char *device_copy_to_device = "device_copy_to_device";
inline constexpr const char *device_prepare_output = "device_prepare_output";
inline constexpr const char *device_copy_to_host = "device_copy_to_host";
inline constexpr const char *device_set_host_dirty = "device_set_host_dirty";
inline constexpr const char *device_set_device_dirty = "device_set_device_dirty";
} // namespace intrinsic

/// The Variable naming a buffer's descriptor in host code.
std::string buffer_descriptor_name(const std::string &buffer);

/// A kernel's name, block size, shared memory, arguments and body, as text.
std::string describe_kernel(const DeviceKernel &k);

struct LoweredFunc {
    std::string name;
    std::vector<LoweredArgument> args; ///< in call order: inputs, scalar params, outputs
    /// Host code. Each kernel launch is `Evaluate(Call::Intrinsic gpu_launch(i, bx, by, bz,
    /// scalar args...))`, where i indexes `kernels` and bx..bz are the block counts; buffer copies
    /// between host and device are explicit intrinsics (see schedule/OffloadGPULoops.h).
    Stmt body;
    std::vector<DeviceKernel> kernels; ///< empty for a CPU-only pipeline
    /// Buffers whose dense vector stores are non-temporal (Func::store_nontemporal).
    std::set<std::string> nontemporal_stores;
};

} // namespace kiln
