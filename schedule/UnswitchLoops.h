// Loop unswitching: an `if` inside a CPU loop whose condition is the same on every iteration (it
// reads no memory, calls nothing and uses no name bound inside the loop: not the loop's variable,
// not an inner loop's, not a let of the body) is decided once, in front of the loop, which becomes
// `if (c) loop[c := true] else loop[c := false]`. Loops are visited outermost first, so a
// condition leaves every loop it does not depend on. An RDom's `where` on the tile's position
// (conv2d's taps in the padding, in an unrolled row of pixels) is such a condition: in the loop it
// is a branch around a few of the vector instructions, which LLVM leaves there (its own unswitching
// gives up on large bodies), splitting the FMA sequence into blocks. A loop is copied for at most
// two conditions (four copies), a pipeline for at most 16 times; a condition on which one of the
// two loops does nothing (it guards the whole body) costs no copy and is always decided outside.
// GPU loops are left alone: their threads would diverge on a condition all of them share anyway.
// Requires: flattened IR with loop invariants hoisted. Guarantees: the same values and memory
// accesses, in the same order.
#pragma once

#include "lang/IR.h"

namespace kiln {

/// Decides loop-invariant conditions once in front of their loops.
Stmt unswitch_loops(const Stmt &s);

} // namespace kiln
