// Tensorize: each loop nest a `tensorize` directive marked (ForType::Tensorized, from the marked
// loop inward) becomes one `tile_matmul` intrinsic (lang/IR.h), which the CPU code generator
// emits as Intel AMX tile loads, tile multiplies and a tile store (codegen/CodeGenLLVM.cpp).
//
// The nest must be, through lets, perfectly nested serial loops of constant extent around one
// store `c[ic] = c[ic] + i32(a[ia]) * i32(b[ib])` of an int32 Func c and 8-bit inputs a and b,
// or `c[ic] = c[ic] + f32(a[ia]) * f32(b[ib])` of a float32 c and bfloat16 a and b (either order
// of the sum and of the product), each index linear in the nest's loops. With L the k lanes, the
// values of k in 4 bytes (4 int8, 2 bfloat16), the loops are recognised by how each index moves
// with them (coefficients in elements):
//   columns: c 1, a 0, b L      (at most 32: two tiles, a tile row being 64 bytes of c)
//   rows:    c any, a any, b 0  (at most 32: two tiles of 16 rows)
//   lane:    c 0, a 1, b 1      (extent L: the L consecutive values of k a column of b holds)
//   k4:      c 0, a L, b any    (any constant extent; 16 of them are one tile multiply)
//   column tiles: c 16, a 0, b any constant (extent 2, around a columns loop of 16: the second
//            tile of 16 columns anywhere in b, as in a layout of 16-column blocks)
// that is, `c(j, i) += i32(a(r.x + 4 * r.y, i)) * i32(b(r.x, j, r.y))` with RDom r(0, 4, 0, K/4),
// or b in 16-column blocks, `b(r.x, j % 16, r.y, j / 16)`: the indices are simplified with the
// nest's loop ranges, so j % 16 of j = 16 jo + ji is ji, and a block of 32 columns split into
// two loops (j = 32 jo + 16 jt + ji) reads its two tiles of b from two blocks (jt: column tiles).
// The sum may start at zero, `c = select(first, 0, c) + a * b` (a Func's zero initial value
// folded into its update by ScheduleFunctions, or written so by the user), where first's terms
// on the nest's own loops hold exactly at the first value of its k loops: the intrinsic then
// starts its tiles at zero (tilezero) where the rest of `first`, on the loops outside, holds.
// Anything else is a CompileError naming the loop, what was found and how to fix the schedule.
// Requires: flattened, simplified IR, before unrolling and vectorization. Guarantees: no
// Tensorized loop remains; for 8-bit inputs the intrinsic computes exactly what the nest computed
// (integer sums wrap in both, and their order does not matter); for bfloat16 it adds the products
// (exact in float32) in the nest's k order, each sum rounded to float32 as the nest's are, but
// the matrix unit treats denormal inputs and results as zero.
#pragma once

#include <optional>

#include "lang/IR.h"

namespace kiln {

/// Replaces each Tensorized loop nest by a tile_matmul intrinsic.
Stmt tensorize_loops(const Stmt &s);

/// The input type of the first tile_matmul in s (a tensorized nest's a operand), if any.
std::optional<Type> tile_matmul_input(const Stmt &s);

} // namespace kiln
