// Software prefetch (Stage::prefetch, Halide's): at the top of each iteration of a stage's loop
// `at`, the region of a Func or input that the loop's body reads `offset` iterations of loop
// `from` later is prefetched, one `prefetch` intrinsic per cache line of its innermost dimension
// (codegen: llvm.prefetch, a read into all cache levels). Runs after the entry checks, so a
// prefetch never widens the region an input must cover, and before storage flattening, which
// turns the element it names into an address.
#pragma once

#include "lang/IR.h"
#include "schedule/ScheduleFunctions.h"

namespace kiln {

/// Inserts the prefetches of every stage's schedule. CompileError, naming the Func, the loop
/// and the prefetched Func or input, when the loop is not in the lowered pipeline (its Func is
/// inlined), lies inside a vectorized or GPU loop, or its body does not read what is prefetched
/// over a bounded region.
Stmt inject_prefetches(const Stmt &s, const PipelineEnv &env);

/// Whether s does nothing but prefetch (loops, lets and ifs around prefetch intrinsics), so
/// that passes may look through it: trim_no_ops trims a loop by the guard after it.
bool only_prefetches(const Stmt &s);

} // namespace kiln
