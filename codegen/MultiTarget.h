// Multi-target kernels, as Halide's multitarget: one static library holding a pipeline compiled
// once per target (the variants, named <kernel>_<variant>) and a dispatcher with the kernel's
// own name and C signature. At each call the dispatcher asks the runtime which variant this CPU
// runs (kiln_select_target_variant in runtime/kiln_runtime.h: the first listed whose CPU
// features it has, else the last) and forwards its arguments unchanged. Written by
// compile_lowered_to with a list of targets (codegen/AOT.h). The same dispatcher, choosing by the
// output buffer's extents instead (kiln_select_shape_variant), makes shape-dispatched kernels:
// one schedule per tuned shape and a generic one (compile_shape_dispatched).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/LLVMModule.h"
#include "codegen/Target.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

/// The variants' names, one per target, for KILN_FORCE_TARGET and the header: the target's CPU
/// name ("x86-64-v3"; the host's CPU name for "host"), with "-<index>" added to a name an
/// earlier target already has.
std::vector<std::string> target_variant_names(const std::vector<Target> &targets);

/// The CPU features code for t may use and the runtime can test, as a mask of
/// KILN_CPU_FEATURE_NAMES bits.
uint64_t required_cpu_features(const Target &t);

/// The dispatcher of f: `int f.name(args)` and `int f.name_argv(void **)`, compiled for
/// `portable` (the last target), each calling variant_symbols[i] (or its _argv form) for the
/// variant the runtime picks, or returning the runtime's error code when a forced choice fails.
LLVMModule compile_dispatcher(const LoweredFunc &f, const Target &portable,
                              const std::vector<std::string> &variant_names,
                              const std::vector<std::string> &variant_symbols,
                              const std::vector<uint64_t> &required_features);

/// The dispatcher of a kernel specialized per output shape: variant i < shapes.size() runs when
/// the output buffer's extents are shapes[i], the last (generic) variant otherwise
/// (kiln_select_shape_variant in the runtime). Compiled for t.
LLVMModule compile_shape_dispatcher(const LoweredFunc &f, const Target &t,
                                    const std::vector<std::string> &variant_names,
                                    const std::vector<std::string> &variant_symbols,
                                    const std::vector<std::vector<int64_t>> &shapes);

} // namespace kiln
