// Common subexpression elimination: within each expression, a non-trivial subexpression (not a
// constant, variable, or broadcast or ramp of those) that occurs more than once is computed once
// into a Let with a fresh name (t0, t1, ..., skipping names already in use), innermost first, so
// every let only refers to earlier ones. Loads are shared too: expressions are pure. The value,
// index and predicate of a Store are treated as one expression whose lets become LetStmts around
// the Store. Lets already inside an expression are substituted first (they are pure), so sharing
// crosses them; an expression with nothing to share is returned as it was, lets included.
// Requires: nothing. Guarantees: each expression computes the same value, and no non-trivial
// subexpression is computed twice within it.
#pragma once

#include "lang/IR.h"

namespace kiln {

/// The expression with each repeated subexpression computed once, in lets around it.
Expr cse(const Expr &e);
/// Applies cse to every expression of s.
Stmt cse(const Stmt &s);

} // namespace kiln
