#include "schedule/UnswitchLoops.h"

#include <gtest/gtest.h>

#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "tests/schedule/StmtInterpreter.h"

namespace kiln {
namespace {

using test::int_value;
using test::int_var;

const Expr x = int_var("x"), y = int_var("y"), w = int_var("w"), h = int_var("h");
const Expr p = int_var("p"), q = int_var("q"), r = int_var("r");

Stmt loop(const std::string &name, Expr extent, Stmt body, ForType type = ForType::Serial) {
    return For::make(name, 0, std::move(extent), type, std::move(body));
}

Stmt store(const Expr &value, const Expr &index) {
    return Store::make("out", value, index);
}

test::Buffers buffers(int in_size, int out_size, unsigned seed = 11) {
    std::mt19937 rng(seed);
    return {{"in", test::random_buffer(Int(32), in_size, rng)},
            {"out", test::zero_buffer(Int(32), out_size)}};
}

std::map<std::string, Value> params(int pv, int qv = 1, int rv = 1) {
    return {{"w", int_value(4)},
            {"h", int_value(3)},
            {"p", int_value(pv)},
            {"q", int_value(qv)},
            {"r", int_value(rv)}};
}

// How many loops named `name` and conditions a statement holds, and how many of those
// conditions are inside such a loop.
struct Census : IRVisitor {
    explicit Census(std::string name) : name(std::move(name)) {}
    std::string name;
    int loops = 0, conditions = 0, conditions_inside = 0, depth = 0;

protected:
    using IRVisitor::visit;
    void visit(const For *op) override {
        bool mine = op->name == name;
        loops += mine;
        depth += mine;
        IRVisitor::visit(op);
        depth -= mine;
    }
    void visit(const IfThenElse *op) override {
        conditions++;
        conditions_inside += depth > 0;
        IRVisitor::visit(op);
    }
};

Census census(const Stmt &s, const std::string &name) {
    Census c(name);
    c.include(s);
    return c;
}

// The loop is copied once for each side of the condition and simplified (which writes w + x).
TEST(UnswitchLoops, AnInvariantConditionIsDecidedOnceInFrontOfTheLoop) {
    Stmt body = Block::make(IfThenElse::make(p > 2, store(Load::make(Int(32), "in", x), x)),
                            store(x * 10, w + x));
    Stmt before = loop("x", w, body);
    Stmt after = unswitch_loops(before);
    Stmt expected = IfThenElse::make(
        p > 2,
        loop("x", w, Block::make(store(Load::make(Int(32), "in", x), x), store(x * 10, w + x))),
        loop("x", w, store(x * 10, w + x)));
    EXPECT_TRUE(test::same_stmt(after, expected));
    for (int pv : {3, 0}) {
        EXPECT_TRUE(test::same_effect(before, after, buffers(4, 8), params(pv))) << "p = " << pv;
    }
}

TEST(UnswitchLoops, AConditionGuardingTheWholeBodyLeavesWithoutACopy) {
    Stmt before = loop("x", w, IfThenElse::make(p > 2, store(x, x)));
    Stmt expected = IfThenElse::make(p > 2, loop("x", w, store(x, x)));
    EXPECT_TRUE(test::same_stmt(unswitch_loops(before), expected));
}

TEST(UnswitchLoops, ConditionsOnTheLoopOrOnMemoryStay) {
    Stmt on_loop = loop("x", w, Block::make(IfThenElse::make(x > p, store(x, x)), store(1, x + w)));
    EXPECT_TRUE(unswitch_loops(on_loop).same_as(on_loop));
    // A load's value may change with the loop's stores.
    Stmt on_memory = loop(
        "x", w,
        Block::make(IfThenElse::make(Load::make(Int(32), "out", 0) > 0, store(x, x)), store(1, 0)));
    EXPECT_TRUE(unswitch_loops(on_memory).same_as(on_memory));
    // A let bound inside the loop is not known in front of it.
    Stmt on_let = loop("x", w,
                       LetStmt::make("t", x * 2,
                                     Block::make(IfThenElse::make(int_var("t") > p, store(x, x)),
                                                 store(1, x + w))));
    EXPECT_TRUE(unswitch_loops(on_let).same_as(on_let));
}

TEST(UnswitchLoops, AConditionLeavesEveryLoopItDoesNotDependOn) {
    // Invariant in both loops: decided outside the outer one.
    Stmt inner = Block::make(IfThenElse::make(p > 0, store(x, x + y * w)), store(-1, 100 + y));
    Stmt before = loop("y", h, loop("x", w, inner));
    Stmt after = unswitch_loops(before);
    const auto *top = after.as<IfThenElse>();
    ASSERT_NE(top, nullptr) << after;
    EXPECT_EQ(census(after, "y").loops, 2);
    EXPECT_EQ(census(after, "y").conditions_inside, 0);
    for (int pv : {1, -1}) {
        EXPECT_TRUE(test::same_effect(before, after, buffers(0, 104), params(pv))) << pv;
    }
    // Depending on the outer loop's variable: decided in front of the inner loop, in the outer.
    Stmt on_y = Block::make(IfThenElse::make(y > 0, store(x, x + y * w)), store(-1, 100 + y));
    Stmt before_y = loop("y", h, loop("x", w, on_y));
    Stmt after_y = unswitch_loops(before_y);
    ASSERT_NE(after_y.as<For>(), nullptr) << after_y;
    EXPECT_EQ(census(after_y, "x").loops, 2);
    EXPECT_EQ(census(after_y, "x").conditions_inside, 0);
    EXPECT_TRUE(test::same_effect(before_y, after_y, buffers(0, 104), params(0)));
}

TEST(UnswitchLoops, ALoopIsCopiedForAtMostTwoConditions) {
    Stmt body = Block::make(
        {IfThenElse::make(p > 0, store(x, x)), IfThenElse::make(q > 0, store(x * 2, x + w)),
         IfThenElse::make(r > 0, store(x * 3, x + 2 * w)), store(7, x + 3 * w)});
    Stmt before = loop("x", w, body);
    Stmt after = unswitch_loops(before);
    Census c = census(after, "x");
    EXPECT_EQ(c.loops, 4);
    EXPECT_EQ(c.conditions_inside, 4); // the third condition, in each copy
    for (int pv : {1, -1})
        for (int qv : {1, -1})
            for (int rv : {1, -1}) {
                EXPECT_TRUE(test::same_effect(before, after, buffers(0, 16), params(pv, qv, rv)))
                    << pv << " " << qv << " " << rv;
            }
}

// q guards every store, p one: deciding q first (it costs no copy) leaves one test of p, where
// deciding p first would test q in both of p's copies.
TEST(UnswitchLoops, AConditionThatCostsNoCopyIsDecidedFirst) {
    Stmt body = Block::make(IfThenElse::make(p > 0, IfThenElse::make(q > 0, store(x, x))),
                            IfThenElse::make(q > 0, store(x * 2, x + w)));
    Stmt before = loop("x", w, body);
    Stmt after = unswitch_loops(before);
    const auto *top = after.as<IfThenElse>();
    ASSERT_NE(top, nullptr) << after;
    EXPECT_TRUE(equal(top->condition, q > 0)) << after;
    Census c = census(after, "x");
    EXPECT_EQ(c.loops, 2);
    EXPECT_EQ(c.conditions, 2) << after;
    EXPECT_EQ(c.conditions_inside, 0);
    for (int pv : {1, -1})
        for (int qv : {1, -1}) {
            EXPECT_TRUE(test::same_effect(before, after, buffers(0, 8), params(pv, qv)))
                << pv << " " << qv;
        }
}

TEST(UnswitchLoops, AnElseSideIsKeptInItsCopy) {
    Stmt body = Block::make(IfThenElse::make(p > 0, store(x, x), store(-x, x)), store(5, x + w));
    Stmt before = loop("x", w, body);
    Stmt after = unswitch_loops(before);
    EXPECT_EQ(census(after, "x").loops, 2);
    EXPECT_EQ(census(after, "x").conditions_inside, 0);
    for (int pv : {1, -1}) {
        EXPECT_TRUE(test::same_effect(before, after, buffers(0, 8), params(pv))) << pv;
    }
}

TEST(UnswitchLoops, GPULoopsAreLeftAlone) {
    Stmt before = loop("x", w, Block::make(IfThenElse::make(p > 0, store(x, x)), store(1, x + w)),
                       ForType::GPUThread);
    EXPECT_TRUE(unswitch_loops(before).same_as(before));
}

} // namespace
} // namespace kiln
