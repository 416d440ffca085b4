#include "schedule/HoistLoopInvariants.h"

#include <gtest/gtest.h>

#include "lang/IROperator.h"
#include "schedule/CSE.h"
#include "tests/schedule/StmtInterpreter.h"

namespace kiln {
namespace {

using test::int_value;
using test::int_var;

const Expr x = int_var("x"), y = int_var("y"), w = int_var("w"), h = int_var("h");
const Expr p = int_var("p"), q = int_var("q");

Expr load(const std::string &buffer, const Expr &index) {
    return Load::make(Int(32), buffer, index);
}

Stmt loop(const std::string &name, Expr extent, Stmt body, ForType type = ForType::Serial) {
    return For::make(name, 0, std::move(extent), type, std::move(body));
}

test::Buffers buffers(int in_size, int out_size, unsigned seed = 11) {
    std::mt19937 rng(seed);
    return {{"in", test::random_buffer(Int(32), in_size, rng)},
            {"out", test::zero_buffer(Int(32), out_size)}};
}

std::map<std::string, Value> sizes(int wv, int hv) {
    return {{"w", int_value(wv)}, {"h", int_value(hv)}, {"p", int_value(3)}, {"q", int_value(-4)}};
}

TEST(HoistLoopInvariants, MovesAnInvariantLetOutOfATwoLevelNest) {
    Stmt store = Store::make("out", int_var("t") + x, x + y * w);
    Stmt before = loop("y", h, loop("x", w, LetStmt::make("t", p * q, store)));
    Stmt expected = LetStmt::make("t", p * q, loop("y", h, loop("x", w, store)));
    Stmt after = hoist_loop_invariants(before);
    EXPECT_TRUE(test::same_stmt(after, expected));
    EXPECT_TRUE(test::same_effect(before, after, buffers(0, 12), sizes(4, 3)));
}

TEST(HoistLoopInvariants, LetOfTheOuterVariableMovesOnlyOutOfTheInnerLoop) {
    Stmt store = Store::make("out", x, x + int_var("row"));
    Stmt before = loop("y", h, loop("x", w, LetStmt::make("row", y * w, store)));
    Stmt expected = loop("y", h, LetStmt::make("row", y * w, loop("x", w, store)));
    EXPECT_TRUE(test::same_stmt(hoist_loop_invariants(before), expected));
}

TEST(HoistLoopInvariants, DependentLetsMoveTogetherInOrder) {
    Stmt store = Store::make("out", int_var("v") + x, x);
    Stmt before =
        loop("x", w, LetStmt::make("u", p * 2, LetStmt::make("v", int_var("u") + q, store)));
    Stmt expected =
        LetStmt::make("u", p * 2, LetStmt::make("v", int_var("u") + q, loop("x", w, store)));
    EXPECT_TRUE(test::same_stmt(hoist_loop_invariants(before), expected));
}

TEST(HoistLoopInvariants, LetsThatDependOnTheLoopStayWithTheirDependents) {
    Stmt store = Store::make("out", int_var("v"), x);
    Stmt before =
        loop("x", w, LetStmt::make("u", x * 2, LetStmt::make("v", int_var("u") + q, store)));
    EXPECT_TRUE(hoist_loop_invariants(before).same_as(before));
}

TEST(HoistLoopInvariants, LetLoadingABufferStoredInTheLoopStays) {
    Stmt body = LetStmt::make("v", load("out", 0), Store::make("out", int_var("v") + x, 0));
    Stmt before = loop("x", w, body);
    EXPECT_TRUE(hoist_loop_invariants(before).same_as(before));
}

TEST(HoistLoopInvariants, LetLoadingAnUnchangedBufferRunsOnlyIfTheLoopDoes) {
    Stmt store = Store::make("out", int_var("v") + x, x);
    Stmt before = loop("x", w, LetStmt::make("v", load("in", 0), store));
    Stmt after = hoist_loop_invariants(before);
    Stmt expected = IfThenElse::make(w > 0, LetStmt::make("v", load("in", 0), loop("x", w, store)));
    EXPECT_TRUE(test::same_stmt(after, expected));
    // With w = 0 the original never loads, and `in` may be empty.
    EXPECT_TRUE(test::same_effect(before, after, buffers(0, 0), sizes(0, 1)));
    EXPECT_TRUE(test::same_effect(before, after, buffers(1, 5), sizes(5, 1)));
}

TEST(HoistLoopInvariants, LoadInAConstantExtentLoopNeedsNoGuard) {
    Stmt store = Store::make("out", int_var("v") + x, x);
    Stmt before = loop("x", 4, LetStmt::make("v", load("in", 0), store));
    Stmt expected = LetStmt::make("v", load("in", 0), loop("x", 4, store));
    EXPECT_TRUE(test::same_stmt(hoist_loop_invariants(before), expected));
}

TEST(HoistLoopInvariants, LoadUnderAConditionStaysButAPureLetThereMoves) {
    Stmt guarded = LetStmt::make(
        "v", load("in", p),
        LetStmt::make("k", p * q, Store::make("out", int_var("v") + int_var("k"), x)));
    Stmt before = loop("x", w, IfThenElse::make(p < h, guarded));
    Stmt after = hoist_loop_invariants(before);
    Stmt expected = LetStmt::make(
        "k", p * q,
        loop("x", w,
             IfThenElse::make(p < h,
                              LetStmt::make("v", load("in", p),
                                            Store::make("out", int_var("v") + int_var("k"), x)))));
    EXPECT_TRUE(test::same_stmt(after, expected));
    EXPECT_TRUE(test::same_effect(before, after, buffers(2, 6), sizes(6, 2)));
}

TEST(HoistLoopInvariants, LetsMadeByCSEAreHoistedOutOfTheLoop) {
    Stmt before = loop("y", h, loop("x", w, Store::make("out", (p + q) * (p + q) + x, x + y * w)));
    Stmt after = hoist_loop_invariants(cse(before));
    const auto *let = after.as<LetStmt>();
    ASSERT_NE(let, nullptr) << after;
    EXPECT_TRUE(equal(let->value, p + q)) << after;
    EXPECT_NE(let->body.as<For>(), nullptr) << after;
    EXPECT_TRUE(test::same_effect(before, after, buffers(0, 12), sizes(4, 3)));
}

TEST(HoistLoopInvariants, LetsInsideALoopConditionAreLiftedAndHoisted) {
    Expr product = p * q * h;
    Stmt body = IfThenElse::make(product + x > product, Store::make("out", x, x));
    Stmt before = loop("x", w, body);
    Stmt after = hoist_loop_invariants(cse(before));
    const auto *let = after.as<LetStmt>();
    ASSERT_NE(let, nullptr) << after;
    EXPECT_NE(let->body.as<For>(), nullptr) << after;
    EXPECT_TRUE(test::same_effect(before, after, buffers(0, 6), sizes(6, 2)));
}

TEST(HoistLoopInvariants, GPULoopsAreLeftAlone) {
    Stmt before = loop("x", w, LetStmt::make("t", p * q, Store::make("out", int_var("t"), x)),
                       ForType::GPUThread);
    EXPECT_TRUE(hoist_loop_invariants(before).same_as(before));
}

TEST(HoistLoopInvariants, NameBoundTwiceIsNotMoved) {
    // Two lets of the same name (as after unrolling a body with a let) would collide outside.
    Stmt first = LetStmt::make("t", p, Store::make("out", int_var("t"), 0));
    Stmt second = LetStmt::make("t", q, Store::make("out", int_var("t"), 1));
    Stmt before = loop("x", w, Block::make(first, second));
    EXPECT_TRUE(hoist_loop_invariants(before).same_as(before));
    EXPECT_TRUE(
        test::same_effect(before, hoist_loop_invariants(before), buffers(0, 2), sizes(2, 1)));
}

} // namespace
} // namespace kiln
