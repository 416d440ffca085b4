// Unrolling: every loop marked Unrolled becomes its body repeated once per iteration, with the
// loop variable replaced by the constant offset min + i.
// Requires: flattened IR; the extent of an unrolled loop must simplify to a constant (possibly
// through enclosing lets) of at most 256. Guarantees: no Unrolled loops remain; a non-constant or
// too large extent is a CompileError naming the loop and saying how to fix the schedule.
#pragma once

#include "lang/IR.h"

namespace kiln {

/// Replaces each Unrolled loop by copies of its body, innermost loops first.
Stmt unroll_loops(const Stmt &s);

} // namespace kiln
