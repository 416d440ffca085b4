// The simplifier: constant folding, canonical operand order, collection of linear terms,
// min/max/select/comparison rules, Euclidean division and modulo by constants, and let handling.
// Requires nothing; guarantees an expression equal in value to its input at every point (checked
// by a fuzzer against ExprEvaluator) and structurally canonical enough that equal affine
// expressions simplify to structurally equal results.
//
// Overflow: like Halide, the simplifier assumes that int32 and int64 arithmetic does not overflow
// (so x + 1 > x is true and (x * 4 + y) / 4 is x + y / 4); where the input does overflow, the
// result may differ. For int8, int16 and every unsigned type it is exact under wrapping: only
// rewrites that hold modulo 2^bits, or that constant bounds show cannot wrap, are applied.
// Floats are folded with the IR's float32 rounding and lose only exact identities (x * 1, x / 1,
// x - 0); they are never reordered, since NaN makes min, max and comparisons order-sensitive.
//
// Canonical forms: sums list their non-constant terms in the order of IREquality's compare, with
// negative coefficients subtracted and the constant last (x - 3 becomes x + -3); commutative
// operands put constants on the right; a > b becomes b < a and a >= b becomes b <= a.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "lang/IR.h"

namespace kiln {

/// Known constant bounds of an integer variable (either side may be unknown).
struct ConstantBounds {
    std::optional<int64_t> min, max;
};

/// Simplifies e, optionally using known constant bounds of its variables.
Expr simplify(const Expr &e, const std::map<std::string, ConstantBounds> &bounds = {});
/// Simplifies each expression in s, removes dead branches and trivial loops and lets. A statement
/// that simplifies to nothing becomes Evaluate(0).
Stmt simplify(const Stmt &s, const std::map<std::string, ConstantBounds> &bounds = {});

/// True when e (a bool expression) simplifies to true; false means "could not prove".
bool can_prove(const Expr &e, const std::map<std::string, ConstantBounds> &bounds = {});

} // namespace kiln
