// Interval arithmetic: the range of values an expression takes given ranges, symbolic or constant,
// of its free variables. Bounds inference is built on it, so it is precise on what that needs:
// affine indices, min/max, clamps, division and modulo by constants, and selects (each branch is
// bounded over the part of the scope where the condition picks it, when the condition compares a
// variable of the scope).
//
// Overflow: like Halide, int32 and int64 arithmetic (index arithmetic) is assumed not to
// overflow, so their bounds are those of exact integer arithmetic. The assumption covers the
// ends too: a constant end that would leave the type is dropped (unbounded on that side), but a
// symbolic end is an expression of the type and wraps if its exact value does not fit (which
// only loose bounds near 2^31 reach, e.g. a full 16-bit range times 65536 plus t). Narrower integer
// types and unsigned types do wrap, so a result that might leave the type becomes the type's
// full range. Casts are exact when the source interval provably fits the target, else the
// target's full range (unbounded for int32 and int64). Float bounds assume no NaN. Vector
// expressions get scalar bounds that hold for every lane.
#pragma once

#include <map>
#include <string>

#include "lang/IR.h"

namespace kiln {

/// A closed interval [min, max]. An undefined min or max means unbounded on that side.
struct Interval {
    Expr min, max;

    Interval() = default;
    Interval(Expr lo, Expr hi) : min(std::move(lo)), max(std::move(hi)) {}
    /// The single point e.
    static Interval single_point(const Expr &e) { return Interval(e, e); }
    static Interval everything() { return Interval(); }

    bool has_lower_bound() const { return min.defined(); }
    bool has_upper_bound() const { return max.defined(); }
    bool is_bounded() const { return min.defined() && max.defined(); }
    bool is_single_point() const;

    /// The smallest interval containing both (symbolic min/max where needed, then simplified).
    static Interval make_union(const Interval &a, const Interval &b);
    /// The largest interval inside both.
    static Interval make_intersection(const Interval &a, const Interval &b);
};

std::ostream &operator<<(std::ostream &s, const Interval &i);

/// Ranges of free variables, by name. A variable absent from the scope is treated as a single
/// point (itself), so results may mention it symbolically. The ends are used as they are, so they
/// should not mention variables of the same scope.
using Scope = std::map<std::string, Interval>;

/// An interval containing every value e takes when each variable in scope ranges over its
/// interval. Results are simplified. Sound for every expression; precise on the shapes above.
Interval bounds_of_expr(const Expr &e, const Scope &scope = {});

} // namespace kiln
