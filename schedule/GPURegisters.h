// GPU registers at block level: a block-level allocation in MemoryType::Register, lifted into a
// private array per thread (part of offload_gpu_loops; see docs/GPU.md), and the constant bounds
// of clamped tile extents that the kernel builder also uses.
//
// Requires: a kernel body after offloading (thread ids as gpu_thread_id calls, the kernel's
// block size known). Guarantees: the allocation's accesses index each thread's own array, or a
// CompileError that names the Func, the kernel and the access that breaks the rule.
#pragma once

#include <optional>
#include <string>

#include "lang/IR.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

/// e with + and - moved inside min and max (min(p, q) - b is min(p - b, q - b)), so that a
/// guarded tile's extent min(loop_max, base + 31) - base becomes min(loop_max - base, 31).
Expr distribute(const Expr &e);

/// A constant upper bound of e, if its min and max arms give one.
std::optional<int64_t> constant_upper_bound(const Expr &e);

/// Wraps `body` (a kernel body, its block lets included) in a private array per thread for the
/// block-level allocation `name` of `type` in MemoryType::Register, rewriting its accesses.
Stmt lift_register_array(const Stmt &body, const std::string &name, Type type,
                         const DeviceKernel &kernel, const std::string &kernel_func);

} // namespace kiln
