#include "lang/Interval.h"

#include <gtest/gtest.h>

#include <sstream>

#include "lang/Error.h"
#include "lang/ExprEvaluator.h"
#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Simplify.h"

namespace kiln {
namespace {

Expr var(const std::string &name, Type t = Int(32)) {
    return Variable::make(t, name);
}

/// An integer constant of type t (make_const is ambiguous on an int literal).
Expr typed(Type t, int64_t v) {
    return make_const(t, v);
}

std::string end_string(const Expr &e) {
    return e.defined() ? to_string(e) : "unbounded";
}

::testing::AssertionResult same_end(const char *side, const Expr &got, const Expr &expected) {
    Expr want = expected.defined() ? simplify(expected) : Expr();
    if (!got.defined() && !want.defined()) return ::testing::AssertionSuccess();
    if (got.defined() && want.defined() && equal(got, want)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << side << ": expected " << end_string(want) << ", got " << end_string(got);
}

/// Checks both ends structurally against the simplified expectation; undefined means unbounded.
::testing::AssertionResult has_bounds(const Interval &got, const Expr &lo, const Expr &hi) {
    auto a = same_end("min", got.min, lo);
    auto b = same_end("max", got.max, hi);
    if (a && b) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (a ? "" : a.message()) << (a || b ? "" : "; ")
                                         << (b ? "" : b.message()) << " (interval " << got << ")";
}

/// Checks that got and expected evaluate alike for every binding of the named int32 variables
/// in [-6, 6], for ends whose exact printed form is the simplifier's business.
::testing::AssertionResult same_values(const Expr &got, const Expr &expected,
                                       const std::vector<std::string> &names) {
    if (!got.defined()) return ::testing::AssertionFailure() << "got unbounded";
    std::vector<int> point(names.size(), -6);
    while (true) {
        ExprEvaluator eval;
        for (size_t i = 0; i < names.size(); i++) {
            eval.bind(names[i], Value::make_int(Int(32), point[i]));
        }
        Value g = eval.eval(got), w = eval.eval(expected);
        if (g != w) {
            auto failure = ::testing::AssertionFailure();
            failure << "expected " << expected << " = " << w << ", got " << got << " = " << g
                    << " at";
            for (size_t i = 0; i < names.size(); i++)
                failure << " " << names[i] << "=" << point[i];
            return failure;
        }
        size_t i = 0;
        while (i < point.size() && ++point[i] > 6)
            point[i++] = -6;
        if (i == point.size()) return ::testing::AssertionSuccess();
    }
}

const Expr x = var("x"), y = var("y");
const Expr xo = var("xo"), yo = var("yo"), w = var("w");

TEST(Interval, ConstantIsASinglePoint) {
    Interval i = bounds_of_expr(Expr(42));
    EXPECT_TRUE(has_bounds(i, 42, 42));
    EXPECT_TRUE(i.is_single_point());
}

TEST(Interval, VariableOutsideTheScopeIsItself) {
    Interval i = bounds_of_expr(x + 1, {{"y", Interval(0, 10)}});
    EXPECT_TRUE(has_bounds(i, x + 1, x + 1));
    EXPECT_TRUE(i.is_single_point());
}

TEST(Interval, VariableInTheScopeTakesItsInterval) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(x, {{"x", Interval(xo, xo + 7)}}), xo, xo + 7));
}

TEST(Interval, StencilWidensByOneOnEachSide) {
    Scope s = {{"x", Interval(xo * 8, xo * 8 + 7)}};
    Interval left = bounds_of_expr(x - 1, s), right = bounds_of_expr(x + 1, s);
    EXPECT_TRUE(has_bounds(Interval::make_union(left, right), xo * 8 - 1, xo * 8 + 8));
}

TEST(Interval, AffineIndexOverATileIsTheShiftedTile) {
    Scope s = {{"x", Interval(xo * 8, xo * 8 + 7)}, {"y", Interval(yo * 4, yo * 4 + 3)}};
    EXPECT_TRUE(
        has_bounds(bounds_of_expr(x + y * 16 + 3, s), xo * 8 + yo * 64 + 3, xo * 8 + yo * 64 + 58));
}

TEST(Interval, ScaledIndexMovesBothEnds) {
    Scope s = {{"x", Interval(xo * 8, xo * 8 + 7)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x * 2 - 1, s), xo * 16 - 1, xo * 16 + 13));
}

TEST(Interval, ConstantRangeGivesConstantBounds) {
    Scope s = {{"x", Interval(0, 99)}, {"y", Interval(-2, 5)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x + y * 100 - 7, s), -207, 592));
}

TEST(Interval, SymbolicStrideOfUnknownSignTakesBothProducts) {
    // y * w for y in [0, 3] is between 0 and 3 * w whatever the sign of w.
    Interval i = bounds_of_expr(x + y * w, {{"x", Interval(0, 9)}, {"y", Interval(0, 3)}});
    EXPECT_TRUE(same_values(i.min, min(0, w * 3), {"w"}));
    EXPECT_TRUE(same_values(i.max, max(0, w * 3) + 9, {"w"}));
}

TEST(Interval, NegativeConstantFactorSwapsTheEnds) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(x * -3, {{"x", Interval(1, 5)}}), -15, -3));
    EXPECT_TRUE(
        has_bounds(bounds_of_expr(x * -2, {{"x", Interval(xo, xo + 4)}}), xo * -2 - 8, xo * -2));
}

TEST(Interval, ZeroFactorIsZeroEvenWhenUnbounded) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(x * 0, {{"x", Interval::everything()}}), 0, 0));
}

TEST(Interval, ProductOfIntervalsOfMixedSignUsesTheCorners) {
    Scope s = {{"x", Interval(-2, 3)}, {"y", Interval(-5, 4)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x * y, s), -15, 12));
}

TEST(Interval, ProductOfNonNegativeSymbolicIntervalsMultipliesTheEnds) {
    Scope s = {{"x", Interval(2, xo * xo + 2)}, {"y", Interval(3, 5)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x * y, s), 6, (xo * xo + 2) * 5));
}

TEST(Interval, ProductOfSymbolicIntervalsOfUnknownSignIsBoundedByTheCorners) {
    Interval i = bounds_of_expr(x * y, {{"x", Interval(xo, xo + 2)}, {"y", Interval(-1, 1)}});
    EXPECT_TRUE(same_values(i.min, min(min(-xo, xo), min(-(xo + 2), xo + 2)), {"xo"}));
    EXPECT_TRUE(same_values(i.max, max(max(-xo, xo), max(-(xo + 2), xo + 2)), {"xo"}));
}

TEST(Interval, ProductWithAHalfLineKeepsTheKnownSide) {
    Scope s = {{"x", Interval(0, Expr())}, {"y", Interval(1, 2)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x * y, s), 0, Expr()));
    s["y"] = Interval(-1, 2);
    EXPECT_TRUE(has_bounds(bounds_of_expr(x * y, s), Expr(), Expr()));
}

TEST(Interval, DivisionByPositiveConstantDividesTheEnds) {
    // Euclidean division rounds down, so -7 / 4 is -2.
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / 4, {{"x", Interval(-7, 9)}}), -2, 2));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / 4, {{"x", Interval(xo * 8, xo * 8 + 7)}}), xo * 2,
                           xo * 2 + 1));
}

TEST(Interval, DivisionByNegativeConstantSwapsTheEnds) {
    // For a negative divisor Euclidean division rounds up: -7 / -4 is 2 and 9 / -4 is -2.
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / -4, {{"x", Interval(-7, 9)}}), -2, 2));
}

TEST(Interval, DivisionByZeroIsZero) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / 0, {{"x", Interval(3, 9)}}), 0, 0));
}

TEST(Interval, DivisionByPositiveIntervalUsesTheCorners) {
    Scope s = {{"x", Interval(10, 20)}, {"y", Interval(2, 5)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / y, s), 2, 10));
    s["x"] = Interval(-20, 10);
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / y, s), -10, 5));
}

TEST(Interval, DivisionByIntervalThatMayBeZeroIncludesZero) {
    Scope s = {{"x", Interval(10, 20)}, {"y", Interval(0, 5)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / y, s), 0, 20));
    s["y"] = Interval(-3, 5);
    EXPECT_TRUE(has_bounds(bounds_of_expr(x / y, s), -20, 20));
}

TEST(Interval, ModuloByConstantIsItsRange) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(x % 4, {{"x", Interval(-100, 100)}}), 0, 3));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x % 4, {{"x", Interval::everything()}}), 0, 3));
}

TEST(Interval, ModuloByNegativeConstantIsNonNegative) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(x % -4, {{"x", Interval(-100, 100)}}), 0, 3));
}

TEST(Interval, ModuloWithinOnePeriodKeepsTheEnds) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(x % 8, {{"x", Interval(17, 20)}}), 1, 4));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x % 8, {{"x", Interval(xo * 8 + 1, xo * 8 + 5)}}), 1, 5));
}

TEST(Interval, ModuloOfSmallNonNegativeValueIsAtMostTheValue) {
    Scope s = {{"x", Interval(0, 5)}, {"y", Interval(1, 100)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x % y, s), 0, 5));
}

TEST(Interval, ModuloBySymbolicIntervalIsBelowTheLargestMagnitude) {
    Scope s = {{"x", Interval::everything()}, {"y", Interval(-7, 3)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x % y, s), 0, 6));
}

TEST(Interval, MinAndMaxCombineTheEndsEndwise) {
    Scope s = {{"x", Interval(0, 10)}, {"y", Interval(5, 7)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(min(x, y), s), 0, 7));
    EXPECT_TRUE(has_bounds(bounds_of_expr(max(x, y), s), 5, 10));
}

TEST(Interval, MinWithUnboundedSideKeepsTheBoundedOne) {
    Scope s = {{"x", Interval(Expr(), Expr())}, {"y", Interval(5, 7)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(min(x, y), s), Expr(), 7));
    EXPECT_TRUE(has_bounds(bounds_of_expr(max(x, y), s), 5, Expr()));
}

TEST(Interval, ClampOfConstantRangeIsClipped) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(clamp(x, 0, 99), {{"x", Interval(-5, 200)}}), 0, 99));
    EXPECT_TRUE(has_bounds(bounds_of_expr(clamp(x, 0, 99), {{"x", Interval(10, 20)}}), 10, 20));
}

TEST(Interval, ClampOfSymbolicRangeClampsTheEnds) {
    Expr a = var("a"), b = var("b");
    Interval i = bounds_of_expr(clamp(x, 0, w - 1), {{"x", Interval(a, b)}});
    EXPECT_TRUE(has_bounds(i, max(min(a, w - 1), 0), max(min(b, w - 1), 0)));
}

TEST(Interval, ClampedStencilStaysInsideTheImage) {
    Scope s = {{"x", Interval(xo * 8, xo * 8 + 7)}};
    Interval i = bounds_of_expr(clamp(x + 1, 0, 99), s);
    EXPECT_TRUE(same_values(i.min, max(min(xo * 8 + 1, 99), 0), {"xo"}));
    EXPECT_TRUE(same_values(i.max, max(min(xo * 8 + 8, 99), 0), {"xo"}));
}

TEST(Interval, SelectIsTheUnionOfItsBranches) {
    Scope s = {{"x", Interval(0, 10)}, {"y", Interval(0, 3)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(select(x + y < 5, x * 2, 100 - x), s), 0, 100));
}

TEST(Interval, SelectOnAScopeVariableBoundsEachBranchOverItsSide) {
    // x * 2 only matters for x in [0, 4] and 100 - x for x in [5, 10].
    Interval i = bounds_of_expr(select(x < 5, x * 2, 100 - x), {{"x", Interval(0, 10)}});
    EXPECT_TRUE(has_bounds(i, 0, 95));
    i = bounds_of_expr(select(x >= xo && x <= xo + 2, x, xo), {{"x", Interval(0, 100)}});
    EXPECT_TRUE(same_values(i.min, min(max(xo, 0), xo), {"xo"}));
    EXPECT_TRUE(same_values(i.max, max(min(xo + 2, 100), xo), {"xo"}));
}

TEST(Interval, SelectWithDecidedConditionTakesOneBranch) {
    Scope s = {{"x", Interval(0, 10)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(select(x < 20, x, 1000), s), 0, 10));
    EXPECT_TRUE(has_bounds(bounds_of_expr(select(x > 20, 1000, x + 1), s), 1, 11));
}

TEST(Interval, SelectOnConditionOutsideTheScopePicksBetweenTheEnds) {
    Expr p = var("p", Bool());
    Interval i = bounds_of_expr(select(p, x, x + 1), {{"x", Interval(0, 10)}});
    EXPECT_TRUE(has_bounds(i, select(p, 0, 1), select(p, 10, 11)));
}

TEST(Interval, LetBoundsTheValueThenTheBody) {
    Expr e = Let::make("v", x * 2, Variable::make(Int(32), "v") + 1);
    EXPECT_TRUE(has_bounds(bounds_of_expr(e, {{"x", Interval(0, 10)}}), 1, 21));
}

TEST(Interval, LetShadowsTheScopeOnlyInsideItsBody) {
    Expr e = Let::make("x", 5, x) + x;
    EXPECT_TRUE(has_bounds(bounds_of_expr(e, {{"x", Interval(0, 10)}}), 5, 15));
}

TEST(Interval, WideningCastIsExact) {
    Interval i = bounds_of_expr(cast<int64_t>(x), {{"x", Interval(xo, xo + 3)}});
    EXPECT_TRUE(has_bounds(i, cast<int64_t>(xo), cast<int64_t>(xo + 3)));
    EXPECT_TRUE(has_bounds(bounds_of_expr(cast<int32_t>(var("u", UInt(8)))),
                           cast<int32_t>(var("u", UInt(8))), cast<int32_t>(var("u", UInt(8)))));
}

TEST(Interval, NarrowingCastOfFittingRangeIsExact) {
    Interval i = bounds_of_expr(cast<uint8_t>(x), {{"x", Interval(3, 200)}});
    EXPECT_TRUE(has_bounds(i, typed(UInt(8), 3), typed(UInt(8), 200)));
}

TEST(Interval, NarrowingCastThatMayWrapIsTheTypeRange) {
    Interval i = bounds_of_expr(cast<uint8_t>(x), {{"x", Interval(0, 300)}});
    EXPECT_TRUE(has_bounds(i, typed(UInt(8), 0), typed(UInt(8), 255)));
    i = bounds_of_expr(cast<int16_t>(x), {{"x", Interval(xo, xo + 1)}});
    EXPECT_TRUE(has_bounds(i, typed(Int(16), -32768), typed(Int(16), 32767)));
}

TEST(Interval, NarrowingCastOfProvablyFittingSymbolicRangeIsExact) {
    // The int64 ends are widened int32 values, so casting back cannot wrap.
    Interval i = bounds_of_expr(cast<int32_t>(cast<int64_t>(x)), {{"x", Interval(xo, xo + 3)}});
    EXPECT_TRUE(has_bounds(i, xo, xo + 3));
}

TEST(Interval, CastOfFloatToIntTruncatesConstantEnds) {
    Expr f = var("f", Float(32));
    Interval i = bounds_of_expr(cast<int32_t>(f), {{"f", Interval(Expr(-2.5f), Expr(7.9f))}});
    EXPECT_TRUE(has_bounds(i, -2, 7));
}

TEST(Interval, NarrowArithmeticThatMayWrapIsTheTypeRange) {
    Expr u = var("u", UInt(8));
    Type t = UInt(8);
    Interval i = bounds_of_expr(u + 10, {{"u", Interval(typed(t, 0), typed(t, 100))}});
    EXPECT_TRUE(has_bounds(i, typed(t, 10), typed(t, 110)));
    i = bounds_of_expr(u + 10, {{"u", Interval(typed(t, 200), typed(t, 250))}});
    EXPECT_TRUE(has_bounds(i, typed(t, 0), typed(t, 255)));
    i = bounds_of_expr(u - 1, {{"u", Interval(typed(t, 0), typed(t, 10))}});
    EXPECT_TRUE(has_bounds(i, typed(t, 0), typed(t, 255)));
}

TEST(Interval, WrappingTypeBoundsAnUnknownSideByItsRange) {
    // |int8(y)| may reach 128, which int8 cannot hold, yet every int8 result is at most 127.
    Expr e = cast<int8_t>(x) % cast<int8_t>(y);
    Interval i = bounds_of_expr(e, {{"x", Interval(0, 1000)}, {"y", Interval(0, 1000)}});
    EXPECT_TRUE(has_bounds(i, typed(Int(8), 0), typed(Int(8), 127)));
}

TEST(Interval, Int32ConstantEndThatOverflowsBecomesUnbounded) {
    Interval i = bounds_of_expr(x * 1000000, {{"x", Interval(-5, 10000)}});
    EXPECT_TRUE(has_bounds(i, -5000000, Expr()));
}

TEST(Interval, ComparisonIsDecidedWhenTheRangesDoNotOverlap) {
    Scope s = {{"x", Interval(0, 5)}, {"y", Interval(6, 9)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x < y, s), const_true(), const_true()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x >= y, s), const_false(), const_false()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x == y, s), const_false(), const_false()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x <= xo * 0 + 5, s), const_true(), const_true()));
}

TEST(Interval, ComparisonOfOverlappingRangesIsUnknown) {
    Scope s = {{"x", Interval(0, 6)}, {"y", Interval(6, 9)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x < y, s), const_false(), const_true()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x <= y, s), const_true(), const_true()));
}

TEST(Interval, ComparisonOfSymbolicRangesUsesTheProver) {
    Scope s = {{"x", Interval(xo * 8, xo * 8 + 7)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x < xo * 8 + 8, s), const_true(), const_true()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x < xo * 8 + 4, s), const_false(), const_true()));
}

TEST(Interval, BooleanOperatorsAreMonotonic) {
    Scope s = {{"x", Interval(0, 5)}, {"y", Interval(0, 9)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(x < 10 && y < 5, s), const_false(), const_true()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(x < 10 || y < 5, s), const_true(), const_true()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(!(x < 10), s), const_false(), const_false()));
}

TEST(Interval, RampSpansBasePlusLanesTimesStride) {
    Scope s = {{"x", Interval(0, 10)}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(Ramp::make(x, 2, 4), s), 0, 16));
    EXPECT_TRUE(has_bounds(bounds_of_expr(Ramp::make(x, -3, 4), s), -9, 10));
    EXPECT_TRUE(has_bounds(bounds_of_expr(Ramp::make(x * 8, Expr(1), 8), {{"x", Interval(xo, xo)}}),
                           xo * 8, xo * 8 + 7));
}

TEST(Interval, VectorArithmeticHasScalarBounds) {
    Expr v = Ramp::make(x, 1, 4) * Broadcast::make(Expr(2), 4) + Broadcast::make(y, 4);
    Interval i = bounds_of_expr(v, {{"x", Interval(0, 10)}, {"y", Interval(1, 1)}});
    EXPECT_TRUE(has_bounds(i, 1, 27));
}

TEST(Interval, LoadOfNarrowTypeIsTheTypeRange) {
    Interval i = bounds_of_expr(Load::make(UInt(8), "buf", x));
    EXPECT_TRUE(has_bounds(i, typed(UInt(8), 0), typed(UInt(8), 255)));
    i = bounds_of_expr(Load::make(Int(16), "buf", x));
    EXPECT_TRUE(has_bounds(i, typed(Int(16), -32768), typed(Int(16), 32767)));
}

TEST(Interval, LoadOfWideTypeIsUnbounded) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(Load::make(Int(32), "buf", x)), Expr(), Expr()));
    EXPECT_TRUE(has_bounds(bounds_of_expr(Load::make(Float(32), "buf", x)), Expr(), Expr()));
}

TEST(Interval, WidenedLoadIsTheNarrowTypeRange) {
    Expr e = cast<int32_t>(Load::make(UInt(8), "buf", x)) * 2 + 1;
    EXPECT_TRUE(has_bounds(bounds_of_expr(e), 1, 511));
}

TEST(Interval, FloatArithmeticIsTrackedLikeIntegers) {
    Expr f = var("f", Float(32));
    Scope s = {{"f", Interval(Expr(0.5f), Expr(2.0f))}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(f * -2.0f + 1.0f, s), Expr(-3.0f), Expr(0.0f)));
    EXPECT_TRUE(has_bounds(bounds_of_expr(f / 2.0f, s), Expr(0.25f), Expr(1.0f)));
}

TEST(Interval, FloatDivisionByNonConstantIsUnbounded) {
    Expr f = var("f", Float(32)), g = var("g", Float(32));
    Scope s = {{"f", Interval(Expr(0.5f), Expr(2.0f))}, {"g", Interval(Expr(-1.0f), Expr(1.0f))}};
    EXPECT_TRUE(has_bounds(bounds_of_expr(f / g, s), Expr(), Expr()));
    s["g"] = Interval(Expr(1.0f), Expr(4.0f));
    EXPECT_TRUE(has_bounds(bounds_of_expr(f / g, s), Expr(0.125f), Expr(2.0f)));
}

TEST(Interval, MonotonicMathFunctionsMapTheEnds) {
    Expr f = var("f", Float(32));
    Scope s = {{"f", Interval(Expr(0.5f), Expr(2.5f))}};
    Interval i = bounds_of_expr(floor(f), s);
    EXPECT_TRUE(has_bounds(i, floor(Expr(0.5f)), floor(Expr(2.5f))));
    EXPECT_TRUE(has_bounds(bounds_of_expr(sin(f), s), Expr(-1.0f), Expr(1.0f)));
}

TEST(Interval, AbsOfRangeAcrossZeroStartsAtZero) {
    Expr f = var("f", Float(32));
    Interval i = bounds_of_expr(abs(f), {{"f", Interval(Expr(-3.0f), Expr(2.0f))}});
    EXPECT_TRUE(has_bounds(i, Expr(0.0f), Expr(3.0f)));
    i = bounds_of_expr(abs(x), {{"x", Interval(-3, 2)}});
    EXPECT_TRUE(has_bounds(i, 0, 3));
}

TEST(Interval, LikelyHasTheBoundsOfItsArgument) {
    EXPECT_TRUE(has_bounds(bounds_of_expr(likely(x < 5), {{"x", Interval(0, 3)}}), const_true(),
                           const_true()));
}

TEST(Interval, TwoLoopLevelsComposeByBoundingTheBounds) {
    // Inner loop x over a tile of xo, then xo over [0, 3]: the bounds of the bounds.
    Interval inner = bounds_of_expr(x * 2 + 1, {{"x", Interval(xo * 8, xo * 8 + 7)}});
    Scope outer = {{"xo", Interval(0, 3)}};
    Interval lo = bounds_of_expr(inner.min, outer), hi = bounds_of_expr(inner.max, outer);
    EXPECT_TRUE(has_bounds(Interval(lo.min, hi.max), 1, 63));
}

TEST(Interval, SinglePointNeedsEqualDefinedEnds) {
    EXPECT_TRUE(Interval(x + 1, x + 1).is_single_point());
    EXPECT_FALSE(Interval(x, x + 1).is_single_point());
    EXPECT_FALSE(Interval(x, Expr()).is_single_point());
    EXPECT_FALSE(Interval::everything().is_single_point());
}

TEST(Interval, UnionIsUnboundedWhereEitherSideIs) {
    Interval u = Interval::make_union(Interval(0, 5), Interval(3, Expr()));
    EXPECT_TRUE(has_bounds(u, 0, Expr()));
    EXPECT_TRUE(has_bounds(Interval::make_union(Interval(0, 5), Interval(-3, 2)), -3, 5));
}

TEST(Interval, IntersectionKeepsTheTighterEnds) {
    Interval i = Interval::make_intersection(Interval(0, 5), Interval(3, Expr()));
    EXPECT_TRUE(has_bounds(i, 3, 5));
    i = Interval::make_intersection(Interval(x, x + 10), Interval(x + 2, x + 20));
    EXPECT_TRUE(has_bounds(i, x + 2, x + 10));
}

TEST(Interval, PrintsUnboundedSidesAsInfinities) {
    std::ostringstream s;
    s << Interval(0, Expr()) << " " << Interval(Expr(), 7);
    EXPECT_EQ(s.str(), "[0, +inf] [-inf, 7]");
}

TEST(Interval, UndefinedExpressionIsAnInternalError) {
    EXPECT_THROW(bounds_of_expr(Expr()), InternalError);
}

} // namespace
} // namespace kiln
