// Loop-invariant code motion for lets: a LetStmt inside a loop whose value depends neither on the
// loop variable, nor on any name bound inside the loop (other than lets already hoisted), nor on a
// buffer stored or allocated inside the loop, moves in front of the loop, keeping the order of the
// hoisted lets. Let expressions at the top of a statement's expressions (as CSE leaves them) are
// first turned into LetStmts so that they can move too. Loops are processed innermost first, so a
// let can leave a whole nest. A let that loads memory is only hoisted when it is not under a
// condition inside the loop, and the loop is then guarded by `extent > 0` unless that is provable,
// so no load happens that the original program would not do. GPU loops are left alone.
// Requires: flattened IR. Guarantees: the same values and memory accesses; a let is only moved
// when its name is bound once in the statement and never used free, so nothing is captured.
#pragma once

#include "lang/IR.h"

namespace kiln {

/// Moves loop-invariant lets out of loops.
Stmt hoist_loop_invariants(const Stmt &s);

} // namespace kiln
