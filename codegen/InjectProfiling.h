// Per-Func profiling (Target::profile, Halide's Target::Profile): the code of a profiled
// pipeline tells the runtime which Func each thread is computing, and the runtime adds the time
// between two switches to the Func that was current (runtime/kiln_profiler.cpp), so each Func's
// figure is its own time, not its consumers' or its producers'. Threads of parallel loops are
// counted too, so the figures are thread time: on 2 threads a run of 1 ms can sum to 2 ms.
//
// The pass wraps every `produce f` body in a switch to f and back to what ran before it, and
// every parallel loop's body in a switch to the Func whose loop it is (a worker thread starts with
// none). The pipeline's entry switches to "(overhead)" (id 0: the entry's buffer checks and what
// lies outside every produce) and counts a call; its exit stops the clock. Runs on the host code
// of a LoweredFunc, after GPU kernels have been offloaded: a kernel's time is the host's time in
// its launch, inside the Func whose produce launched it.
#pragma once

#include <string>
#include <vector>

#include "schedule/LoweredFunc.h"

namespace kiln {

namespace intrinsic {
/// (int32 id, int32 mode) -> int32, in the host code of a profiled pipeline only: makes Func `id`
/// the one this thread computes and returns the one it replaced (-1: none); mode 1 enters the
/// pipeline (a call), 2 leaves it, 0 switches. Codegen calls kiln_profiler_switch.
inline constexpr const char *profiler_switch = "profiler_switch";
} // namespace intrinsic

/// The name the profile gives to time outside every Func's produce (id 0).
inline constexpr const char *profile_overhead_name = "(overhead)";

/// `f` with profiling switches (intrinsic::profiler_switch) in its host code. `funcs` receives
/// the names by id: funcs[0] is profile_overhead_name, then each Func in the order its produce
/// first appears.
LoweredFunc inject_profiling(const LoweredFunc &f, std::vector<std::string> *funcs);

} // namespace kiln
