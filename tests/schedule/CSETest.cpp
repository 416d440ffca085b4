#include "schedule/CSE.h"

#include <gtest/gtest.h>

#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "tests/lang/RandomExpr.h"
#include "tests/schedule/StmtInterpreter.h"

namespace kiln {
namespace {

using test::int_var;

const Expr a = int_var("a"), b = int_var("b"), c = int_var("c");

::testing::AssertionResult cse_gives(const Expr &before, const Expr &expected) {
    Expr got = cse(before);
    if (equal(got, expected)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "\n  before:   " << before << "\n  expected: " << expected << "\n  got:      " << got;
}

Expr let(const std::string &name, Expr value, Expr body) {
    return Let::make(name, std::move(value), std::move(body));
}

TEST(CSE, ComputesARepeatedSumOnce) {
    Expr t0 = int_var("t0");
    EXPECT_TRUE(cse_gives((a + b) * (a + b), let("t0", a + b, t0 * t0)));
}

TEST(CSE, SharesTheLargestRepeatedSubexpressionOnly) {
    // a + b occurs twice, but only inside the repeated product, which computes it once.
    Expr t0 = int_var("t0");
    EXPECT_TRUE(cse_gives((a + b) * c + (a + b) * c, let("t0", (a + b) * c, t0 + t0)));
}

TEST(CSE, BindsNestedRepeatsInnermostFirst) {
    Expr t0 = int_var("t0"), t1 = int_var("t1");
    Expr square = (a + b) * (a + b);
    EXPECT_TRUE(cse_gives(square - square, let("t0", a + b, let("t1", t0 * t0, t1 - t1))));
}

TEST(CSE, FreshNamesSkipNamesAlreadyInUse) {
    Expr t0 = int_var("t0"), t1 = int_var("t1");
    EXPECT_TRUE(cse_gives((t0 + b) * (t0 + b), let("t1", t0 + b, t1 * t1)));
}

TEST(CSE, LeavesConstantsVariablesAndRampsOfThemAlone) {
    Expr e = a * a + Expr(3) * Expr(3);
    EXPECT_TRUE(cse_gives(e, e));
    Expr r = Ramp::make(a, 1, 4);
    EXPECT_TRUE(cse_gives(r + r, r + r));
}

TEST(CSE, SharesRepeatedLoads) {
    Expr in = Load::make(Int(32), "in", a);
    Expr t0 = int_var("t0");
    EXPECT_TRUE(cse_gives(in * in + 1, let("t0", in, t0 * t0 + 1)));
}

TEST(CSE, KeepsLikelyHintsInPlace) {
    Expr cond = likely(a < b);
    Expr e = select(cond, a, b) + select(cond, b, a);
    Expr got = cse(e);
    EXPECT_TRUE(equal(got, e)) << got;
}

TEST(CSE, SharesAcrossLetsWithoutConfusingAShadowedName) {
    // Inside the let, v + 1 means a + 1; outside, it is the free v plus one. Both are repeated,
    // and they must stay two different lets.
    Expr v = int_var("v");
    Expr e = let("v", a, (v + 1) * (v + 1)) + (v + 1) * (v + 1);
    Expr t0 = int_var("t0"), t1 = int_var("t1");
    Expr expected = let("t0", a + 1, let("t1", v + 1, t0 * t0 + t1 * t1));
    EXPECT_TRUE(cse_gives(e, expected));
    ExprEvaluator eval;
    eval.bind("a", test::int_value(2));
    eval.bind("v", test::int_value(5));
    EXPECT_EQ(eval.eval(cse(e)), eval.eval(e));
}

TEST(CSE, SharesASubexpressionBetweenALetValueAndTheOuterExpression) {
    // The shape inlining leaves: let f.y = y + 1 in (x - m) * f.y, next to (x - m) outside.
    Expr x = int_var("x"), m = int_var("m"), y = int_var("y");
    Expr e = let("f.y", y + 1, (x - m) * int_var("f.y")) + (x - m);
    Expr t0 = int_var("t0");
    EXPECT_TRUE(cse_gives(e, let("t0", x - m, t0 * (y + 1) + t0)));
}

TEST(CSE, ExpressionWithNothingToShareIsReturnedUnchanged) {
    Expr e = let("v", a + b, int_var("v") * c);
    EXPECT_TRUE(cse(e).same_as(e));
    Stmt s = Store::make("out", a * b, c);
    EXPECT_TRUE(cse(s).same_as(s));
}

TEST(CSE, StoreSharesBetweenItsIndexAndValue) {
    Expr index = a * int_var("w") + b;
    Stmt before = Store::make("out", Load::make(Int(32), "in", index) + 1, index);
    Expr t0 = int_var("t0");
    Stmt expected =
        LetStmt::make("t0", index, Store::make("out", Load::make(Int(32), "in", t0) + 1, t0));
    EXPECT_TRUE(test::same_stmt(cse(before), expected));
}

TEST(CSE, EliminatesInEveryExpressionOfAStatement) {
    Expr x = int_var("x");
    Stmt body = IfThenElse::make((a + b) * (a + b) > x, Store::make("out", x, x));
    Stmt before = For::make("x", 0, (c + 1) * (c + 1), ForType::Serial, body);
    Stmt after = cse(before);
    const auto *loop = after.as<For>();
    ASSERT_NE(loop, nullptr) << after;
    EXPECT_NE(loop->extent.as<Let>(), nullptr) << after;
    const auto *branch = loop->body.as<IfThenElse>();
    ASSERT_NE(branch, nullptr) << after;
    EXPECT_NE(branch->condition.as<Let>(), nullptr) << after;
    test::Buffers buffers{{"out", test::zero_buffer(Int(32), 20)}};
    EXPECT_TRUE(test::same_effect(
        before, after, buffers,
        {{"a", test::int_value(1)}, {"b", test::int_value(2)}, {"c", test::int_value(3)}}));
}

TEST(CSE, RandomExpressionsWithRepeatsKeepTheirValue) {
    std::mt19937_64 rng(20240611);
    std::vector<std::string> vars{"a", "b", "c"};
    test::RandomExprGenerator gen(rng, vars);
    int shared = 0;
    for (int i = 0; i < 500; i++) {
        Expr p = gen.int_expr(Int(32), 3), q = gen.int_expr(Int(32), 3);
        Expr e = (p + q) * (p - q) + select(p < q, p * q, q) + p;
        Expr after = cse(e);
        shared += after.as<Let>() != nullptr;
        ExprEvaluator eval;
        std::uniform_int_distribution<int> value(-100, 100);
        for (const std::string &v : vars)
            eval.bind(v, test::int_value(value(rng)));
        ASSERT_EQ(eval.eval(after), eval.eval(e))
            << "case " << i << "\n  before: " << e << "\n  after:  " << after;
    }
    EXPECT_GT(shared, 250);
}

} // namespace
} // namespace kiln
