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

} // namespace kiln
