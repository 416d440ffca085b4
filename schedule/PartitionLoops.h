// Loop partitioning: a Serial or Parallel loop whose body holds `if (likely(c))` guards, where c is
// a conjunction of comparisons linear in the loop variable (such as the `x <= x.loop_max` guards
// of GuardWithIf splits, or `v >= e` from clamps), is split into a prologue, a steady state in
// which every such guard is provably true and replaced by its then-branch, and an epilogue. Inner
// loop variables in a guard range over their loops; lets inside the loop are seen through.
// Requires: flattened IR. Guarantees: the three loops cover exactly the original iterations in
// order (the boundaries are clamped, so each extent is non-negative); guards that cannot be proven
// stay as they are. The prologue and epilogue are cold code: their `likely` hints are removed so
// that inner loops there are not partitioned again.
#pragma once

#include "lang/IR.h"

namespace kiln {

/// Splits loops with likely guards into prologue, guard-free steady state and epilogue.
Stmt partition_loops(const Stmt &s);

/// Trims loops to the iterations that do something. A Serial or Parallel loop outside GPU
/// kernels whose body is, through lets, inner loops and likely guards only (GuardWithIf's,
/// left to partition_loops), one `if (c)` without else and without a likely hint (the guard
/// RDom::where puts around an update) runs only over the range that c's conjuncts linear in the
/// loop variable allow (`v + e >= 0`, `v < e`, `v == e`, ... with e fixed in the loop and not a
/// vectorized variable); those conjuncts, then true in every iteration, leave the guard.
/// Requires: flattened IR, before unrolling and vectorization. Guarantees: the skipped
/// iterations are exactly those whose guard is false.
Stmt trim_no_ops(const Stmt &s);

} // namespace kiln
