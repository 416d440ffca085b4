// Vectorization: a loop marked Vectorized with constant extent L (2 to 64) becomes its body run
// once on L lanes. The loop variable becomes Ramp(min, 1, L); every expression depending on it is
// widened (scalar operands broadcast, lets rebound as vector lets, loads and stores with vector
// indices, comparisons giving Bool(L)). Serial loops inside stay loops with a vector body.
// An if whose condition depends on the variable becomes predicated stores and loads; when the
// condition is a `likely` conjunction of comparisons linear in the variable, a scalar test that
// all lanes pass guards an unpredicated copy, so that loop partitioning can find the steady state.
// Loops that cannot be widened safely stay Serial (correctness first): a store of a vector value to
// a single address (a reduction), any buffer stored in the loop and accessed at an index that may
// touch another lane's element, loop bounds or asserts depending on the variable, allocations,
// non-serial inner loops, or a loop or assert under a vector condition. KILN_DEBUG=1 says why.
// A buffer read and written at base + s * var with a symbolic s (a stride) is vectorized under a
// run-time test s != 0, with the serial loop as the other branch.
// Requires: flattened IR, unique loop names, unrolling done. Guarantees: no Vectorized loops
// remain; a non-constant extent or one outside 2..64 is a CompileError naming the loop.
#pragma once

#include "lang/IR.h"

namespace kiln {

/// Replaces each Vectorized loop by a vector body (or a Serial loop where that is not safe).
Stmt vectorize_loops(const Stmt &s);

} // namespace kiln
