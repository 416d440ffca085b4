#include "schedule/UnrollLoops.h"

#include <gtest/gtest.h>

#include "lang/IROperator.h"
#include "tests/lang/ErrorOf.h"
#include "tests/schedule/StmtInterpreter.h"

namespace kiln {
namespace {

using test::error_of;
using test::int_value;
using test::int_var;

Expr load_in(const Expr &index) {
    return Load::make(Int(32), "in", index);
}

TEST(UnrollLoops, ReplacesALoopOfFourByFourCopiesWithTheVariableSubstituted) {
    Expr x = int_var("x");
    Stmt before = For::make("x", 0, 4, ForType::Unrolled, Store::make("out", load_in(x) * 2, x));
    std::vector<Stmt> copies;
    for (int i = 0; i < 4; i++)
        copies.push_back(Store::make("out", load_in(Expr(i)) * 2, Expr(i)));
    EXPECT_TRUE(test::same_stmt(unroll_loops(before), Block::make(copies)));
}

TEST(UnrollLoops, OffsetsEachCopyByTheLoopMin) {
    Expr x = int_var("x"), m = int_var("m");
    Stmt before = For::make("x", m, 3, ForType::Unrolled, Store::make("out", x, x - m));
    Stmt after = unroll_loops(before);
    test::Buffers buffers{{"out", test::zero_buffer(Int(32), 3)}};
    for (int mv : {-5, 0, 7}) {
        EXPECT_TRUE(test::same_effect(before, after, buffers, {{"m", int_value(mv)}}));
    }
}

TEST(UnrollLoops, SeesThroughALetBoundExtent) {
    Expr x = int_var("x");
    Stmt loop = For::make("x", 0, int_var("x.loop_extent"), ForType::Unrolled,
                          Store::make("out", x + 1, x));
    Stmt before = LetStmt::make("x.loop_extent", 3, loop);
    Stmt after = unroll_loops(before);
    const auto *let = after.as<LetStmt>();
    ASSERT_NE(let, nullptr) << after;
    EXPECT_EQ(let->body.as<For>(), nullptr) << after;
    test::Buffers buffers{{"out", test::zero_buffer(Int(32), 4)}};
    EXPECT_TRUE(test::same_effect(before, after, buffers));
}

TEST(UnrollLoops, UnrollsNestedLoopsAndKeepsTheirMeaning) {
    Expr x = int_var("x"), y = int_var("y");
    Stmt inner =
        For::make("x", 0, 3, ForType::Unrolled, Store::make("out", load_in(x + y), x + y * 3));
    Stmt before = For::make("y", 1, 2, ForType::Unrolled, inner);
    Stmt after = unroll_loops(before);
    EXPECT_EQ(after.as<For>(), nullptr) << after;
    std::mt19937 rng(1);
    test::Buffers buffers{{"in", test::random_buffer(Int(32), 8, rng)},
                          {"out", test::zero_buffer(Int(32), 9)}};
    EXPECT_TRUE(test::same_effect(before, after, buffers));
}

TEST(UnrollLoops, SemanticCheckNoticesACopyWithTheWrongOffset) {
    // Guards the other tests: the interpreter comparison must be able to fail.
    Expr x = int_var("x");
    Stmt before = For::make("x", 0, 2, ForType::Unrolled, Store::make("out", x, x));
    Stmt wrong = Block::make(Store::make("out", 0, 0), Store::make("out", 0, 1));
    test::Buffers buffers{{"out", test::zero_buffer(Int(32), 2)}};
    EXPECT_FALSE(test::same_effect(before, wrong, buffers));
}

TEST(UnrollLoops, LeavesSerialLoopsAlone) {
    Expr x = int_var("x");
    Stmt before = For::make("x", 0, int_var("n"), ForType::Serial, Store::make("out", x, x));
    EXPECT_TRUE(unroll_loops(before).same_as(before));
}

TEST(UnrollLoops, AnEmptyLoopBecomesANoOp) {
    Expr x = int_var("x");
    Stmt before = For::make("x", 0, 0, ForType::Unrolled, Store::make("out", x, x));
    Stmt after = unroll_loops(before);
    test::Buffers buffers{{"out", test::zero_buffer(Int(32), 1)}};
    test::StmtInterpreter run;
    run.buffers = buffers;
    run.run(after);
    EXPECT_EQ(run.stores, 0);
}

TEST(UnrollLoops, NonConstantExtentIsAnErrorThatSaysHowToFixIt) {
    Expr x = int_var("f.s0.x.xi");
    Stmt s = For::make("f.s0.x.xi", 0, int_var("n"), ForType::Unrolled, Store::make("f", x, x));
    EXPECT_EQ(error_of([&] { unroll_loops(s); }),
              "unroll: loop 'f.s0.x.xi' has extent n, which is not a constant; split "
              "it by a constant factor first and unroll the inner loop");
}

TEST(UnrollLoops, ExtentOverTheLimitIsAnErrorThatNamesTheLimit) {
    Expr x = int_var("x");
    Stmt s = For::make("x", 0, 300, ForType::Unrolled, Store::make("f", x, x));
    EXPECT_EQ(error_of([&] { unroll_loops(s); }),
              "unroll: loop 'x' has extent 300, more than the limit of 256; split it "
              "by a constant factor of at most 256 first and unroll the inner loop");
}

} // namespace
} // namespace kiln
