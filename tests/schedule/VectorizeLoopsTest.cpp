#include "schedule/VectorizeLoops.h"

#include <gtest/gtest.h>

#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "tests/lang/ErrorOf.h"
#include "tests/lang/RandomExpr.h"
#include "tests/schedule/StmtInterpreter.h"

namespace kiln {
namespace {

using test::error_of;
using test::int_value;
using test::int_var;

const Expr x = int_var("x");

Expr load(const std::string &buffer, const Expr &index, Type t = Int(32)) {
    return Load::make(t.with_lanes(index.type().lanes), buffer, index);
}

Stmt vectorized(const Stmt &body, int lanes = 8, Expr min = 0) {
    return For::make("x", min, lanes, ForType::Vectorized, body);
}

Expr ramp(Expr base, Expr stride, int lanes = 8) {
    return Ramp::make(std::move(base), std::move(stride), lanes);
}

Expr bcast(Expr v, int lanes = 8) {
    return Broadcast::make(std::move(v), lanes);
}

// What the statement contains, for checks on the shape of the result.
class Census : public IRVisitor {
public:
    int loops = 0, vectorized_loops = 0, ifs = 0, predicated_stores = 0, plain_vector_stores = 0;
    int predicated_loads = 0;

protected:
    using IRVisitor::visit;
    void visit(const For *op) override {
        loops++;
        vectorized_loops += op->for_type == ForType::Vectorized;
        IRVisitor::visit(op);
    }
    void visit(const IfThenElse *op) override {
        ifs++;
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        if (op->predicate.defined()) predicated_stores++;
        if (!op->predicate.defined() && op->value.type().is_vector()) plain_vector_stores++;
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        if (op->predicate.defined()) predicated_loads++;
        IRVisitor::visit(op);
    }
};

Census census(const Stmt &s) {
    Census c;
    c.include(s);
    return c;
}

test::Buffers random_buffers(std::initializer_list<std::pair<std::string, int>> sizes,
                             unsigned seed = 7) {
    std::mt19937 rng(seed);
    test::Buffers b;
    for (const auto &[name, size] : sizes)
        b[name] = test::random_buffer(Int(32), size, rng);
    return b;
}

// ---- Widening -----------------------------------------------------------------------------------

TEST(VectorizeLoops, DenseCopyBecomesARampLoadAndARampStore) {
    Stmt before = vectorized(Store::make("out", load("in", x) * 2 + 1, x));
    Expr index = ramp(0, 1);
    Stmt expected =
        Store::make("out", Add::make(Mul::make(load("in", index), bcast(2)), bcast(1)), index);
    Stmt after = vectorize_loops(before);
    EXPECT_TRUE(test::same_stmt(after, expected));
    EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 8}, {"out", 8}})));
}

TEST(VectorizeLoops, StrideTwoAccessBecomesAStridedRamp) {
    Stmt before = vectorized(Store::make("out", load("in", 2 * x + 1), x));
    Stmt expected = Store::make("out", load("in", ramp(1, 2)), ramp(0, 1));
    Stmt after = vectorize_loops(before);
    EXPECT_TRUE(test::same_stmt(after, expected));
    EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 16}, {"out", 8}})));
}

TEST(VectorizeLoops, SymbolicMinBecomesTheRampBase) {
    Expr m = int_var("m");
    Stmt before = vectorized(Store::make("out", load("in", x), x), 4, m);
    Stmt after = vectorize_loops(before);
    EXPECT_TRUE(
        test::same_stmt(after, Store::make("out", load("in", ramp(m, 1, 4)), ramp(m, 1, 4))));
    for (int mv : {0, 3, 6}) {
        EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 10}, {"out", 10}}),
                                      {{"m", int_value(mv)}}));
    }
}

TEST(VectorizeLoops, GatherThroughALoadedIndexKeepsItsMeaning) {
    Stmt before = vectorized(Store::make("out", load("in", load("idx", x)), x));
    Stmt after = vectorize_loops(before);
    EXPECT_EQ(census(after).loops, 0) << after;
    test::Buffers buffers = random_buffers({{"in", 8}, {"out", 8}});
    std::mt19937 rng(3);
    buffers["idx"] = test::random_buffer(Int(32), 8, rng, 0, 7);
    EXPECT_TRUE(test::same_effect(before, after, buffers));
}

TEST(VectorizeLoops, LetOfARampKeepsItsScalarNameForTheFirstLane) {
    Stmt before =
        vectorized(LetStmt::make("t", x * 2, Store::make("out", load("in", int_var("t")), x)));
    Stmt expected =
        LetStmt::make("t", 0, Store::make("out", load("in", ramp(int_var("t"), 2)), ramp(0, 1)));
    Stmt after = vectorize_loops(before);
    EXPECT_TRUE(test::same_stmt(after, expected));
    EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 16}, {"out", 8}})));
}

TEST(VectorizeLoops, LetOfAGeneralVectorIsRenamedAndRetyped) {
    Expr v = int_var("v");
    Stmt before = vectorized(LetStmt::make("v", load("in", x) * 3, Store::make("out", v + v, x)));
    Expr wide = Variable::make(Int(32, 8), "v.vec");
    Stmt expected = LetStmt::make("v.vec", Mul::make(load("in", ramp(0, 1)), bcast(3)),
                                  Store::make("out", Add::make(wide, wide), ramp(0, 1)));
    Stmt after = vectorize_loops(before);
    EXPECT_TRUE(test::same_stmt(after, expected));
    EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 8}, {"out", 8}})));
}

TEST(VectorizeLoops, SelectCastAndMathCallsWiden) {
    Expr f = cast(Float(32), load("in", x));
    Expr value = select(x < 3, sqrt(f * f), f + 0.5f);
    Stmt before = vectorized(Store::make("out", value, x));
    Stmt after = vectorize_loops(before);
    const auto *store = after.as<Store>();
    ASSERT_NE(store, nullptr) << after;
    EXPECT_EQ(store->value.type(), Float(32, 8));
    test::Buffers buffers = random_buffers({{"in", 8}});
    buffers["out"] = test::zero_buffer(Float(32), 8);
    EXPECT_TRUE(test::same_effect(before, after, buffers));
}

TEST(VectorizeLoops, ScalarValueStoredAtAVectorIndexIsBroadcast) {
    Stmt before = vectorized(Store::make("out", int_var("k"), x));
    Stmt after = vectorize_loops(before);
    EXPECT_TRUE(test::same_stmt(after, Store::make("out", bcast(int_var("k")), ramp(0, 1))));
}

TEST(VectorizeLoops, InnerSerialLoopStaysALoopWithAVectorBody) {
    // A matrix-vector style accumulation: out[x] += in[k * 4 + x] over k.
    Expr k = int_var("k");
    Stmt update = Store::make("out", load("out", x) + load("in", k * 4 + x), x);
    Stmt before = vectorized(For::make("k", 0, int_var("K"), ForType::Serial, update), 4);
    Stmt after = vectorize_loops(before);
    const auto *loop = after.as<For>();
    ASSERT_NE(loop, nullptr) << after;
    EXPECT_EQ(loop->name, "k");
    EXPECT_EQ(loop->for_type, ForType::Serial);
    EXPECT_EQ(census(loop->body).plain_vector_stores, 1) << after;
    for (int kv : {0, 1, 5}) {
        EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 20}, {"out", 4}}),
                                      {{"K", int_value(kv)}}));
    }
}

// ---- Conditions ---------------------------------------------------------------------------------

TEST(VectorizeLoops, GuardOnTheVariableBecomesAPredicatedStoreAndLoad) {
    Expr n = int_var("n");
    Stmt before = vectorized(IfThenElse::make(x < n, Store::make("out", load("in", x) + 1, x)));
    Stmt after = vectorize_loops(before);
    Census c = census(after);
    EXPECT_EQ(c.ifs, 0) << after;
    EXPECT_EQ(c.predicated_stores, 1) << after;
    EXPECT_EQ(c.predicated_loads, 1) << after;
    // `in` holds only n elements: an unpredicated load would read past its end.
    for (int nv = 0; nv <= 8; nv++) {
        test::Buffers buffers = random_buffers({{"in", nv}, {"out", 8}});
        EXPECT_TRUE(test::same_effect(before, after, buffers, {{"n", int_value(nv)}}));
    }
}

TEST(VectorizeLoops, LikelyGuardGetsAnUnpredicatedPathWhenAllLanesPass) {
    // The tail guard of a GuardWithIf split by 8 of a loop over [0, n).
    Expr xo = int_var("xo"), n = int_var("n");
    Stmt body = LetStmt::make(
        "xx", xo * 8 + x,
        IfThenElse::make(likely(int_var("xx") <= n - 1),
                         Store::make("out", load("in", int_var("xx")) * 2, int_var("xx"))));
    Stmt before = For::make("xo", 0, (n + 7) / 8, ForType::Serial, vectorized(body));
    Stmt after = vectorize_loops(before);
    Census c = census(after);
    EXPECT_EQ(c.vectorized_loops, 0) << after;
    EXPECT_EQ(c.ifs, 1) << after;
    EXPECT_EQ(c.plain_vector_stores, 1) << after;
    EXPECT_EQ(c.predicated_stores, 1) << after;
    for (int nv = 0; nv <= 20; nv++) {
        test::Buffers buffers = random_buffers({{"in", nv}, {"out", nv}});
        EXPECT_TRUE(test::same_effect(before, after, buffers, {{"n", int_value(nv)}}));
    }
}

TEST(VectorizeLoops, ThenAndElseBranchesArePredicatedOnOppositeLanes) {
    Expr n = int_var("n");
    Stmt before = vectorized(IfThenElse::make(x >= n, Store::make("out", load("in", x), x),
                                              Store::make("out", 0 - x, x)));
    Stmt after = vectorize_loops(before);
    EXPECT_EQ(census(after).predicated_stores, 2) << after;
    for (int nv = -1; nv <= 9; nv++) {
        EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 8}, {"out", 8}}),
                                      {{"n", int_value(nv)}}));
    }
}

TEST(VectorizeLoops, ConditionIsComputedOnceBeforeTheBranchesStore) {
    // The then-branch changes what the condition reads; the else-branch must see the old values.
    Expr c = load("buf", x) > 0;
    Stmt before = vectorized(IfThenElse::make(c, Store::make("buf", 0 - load("buf", x), x),
                                              Store::make("buf", load("buf", x) + 100, x)));
    Stmt after = vectorize_loops(before);
    EXPECT_EQ(census(after).loops, 0) << after;
    EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"buf", 8}})));
}

TEST(VectorizeLoops, ReadModifyWriteAtASymbolicStrideIsVectorizedUnderARunTimeTest) {
    // Lanes touch distinct elements only when the stride is not zero, which is only known later.
    Expr s = int_var("s");
    Stmt before = vectorized(Store::make("out", load("out", x * s) + load("in", x), x * s), 4);
    Stmt after = vectorize_loops(before);
    const auto *branch = after.as<IfThenElse>();
    ASSERT_NE(branch, nullptr) << after;
    EXPECT_TRUE(equal(branch->condition, s != 0)) << after;
    EXPECT_EQ(census(branch->then_case).plain_vector_stores, 1) << after;
    ASSERT_NE(branch->else_case.as<For>(), nullptr) << after;
    EXPECT_EQ(branch->else_case.as<For>()->for_type, ForType::Serial);
    for (int sv : {0, 1, 3}) {
        EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 4}, {"out", 10}}),
                                      {{"s", int_value(sv)}}))
            << "s " << sv;
    }
}

TEST(VectorizeLoops, RandomBodiesKeepTheirMeaning) {
    // Random integer expressions of the loop variable (with lets that may shadow it, selects,
    // casts and narrow types), stored directly or under a random condition.
    std::mt19937_64 rng(20240611);
    int widened = 0;
    for (int i = 0; i < 300; i++) {
        test::RandomExprGenerator gen(rng, {"x", "k"});
        Expr value = gen.int_expr(Int(32), 4) + load("in", x);
        Stmt store = Store::make("out", value, x);
        Stmt body = i % 2 ? IfThenElse::make(gen.bool_expr(3), store) : store;
        Stmt before = vectorized(body);
        Stmt after = vectorize_loops(before);
        widened += census(after).loops == 0;
        for (int kv : {-7, 0, 5}) {
            ASSERT_TRUE(test::same_effect(before, after, random_buffers({{"in", 8}, {"out", 8}}),
                                          {{"k", int_value(kv)}}))
                << "case " << i;
        }
    }
    EXPECT_EQ(widened, 300);
}

// ---- Loops that stay serial ---------------------------------------------------------------------

TEST(VectorizeLoops, ReductionIntoOneAddressStaysSerial) {
    Stmt body = Store::make("sum", load("sum", 0) + load("in", x), 0);
    Stmt before = vectorized(body);
    Stmt after = vectorize_loops(before);
    EXPECT_TRUE(test::same_stmt(after, For::make("x", 0, 8, ForType::Serial, body)));
    EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 8}, {"sum", 1}})));
}

TEST(VectorizeLoops, LoopCarriedDependenceStaysSerial) {
    // A prefix sum: lane x reads what lane x - 1 wrote.
    Stmt body = Store::make("out", load("out", x) + load("out", x + 1), x + 1);
    Stmt after = vectorize_loops(vectorized(body));
    EXPECT_TRUE(test::same_stmt(after, For::make("x", 0, 8, ForType::Serial, body)));
}

TEST(VectorizeLoops, InnerLoopWithBoundsDependingOnTheVariableStaysSerial) {
    Expr k = int_var("k");
    Stmt inner = For::make("k", 0, x, ForType::Serial,
                           Store::make("out", load("out", x) + load("in", k), x));
    Stmt after = vectorize_loops(vectorized(inner));
    const auto *loop = after.as<For>();
    ASSERT_NE(loop, nullptr) << after;
    EXPECT_EQ(loop->for_type, ForType::Serial);
    EXPECT_EQ(loop->name, "x");
}

TEST(VectorizeLoops, AllocationInsideAGuardStaysSerial) {
    Stmt then_case = Allocate::make(
        "tmp", Int(32), MemoryType::Stack, {8}, Expr(),
        Block::make(Store::make("tmp", load("in", x), x), Store::make("out", load("tmp", x), x)));
    Stmt before = vectorized(IfThenElse::make(x < int_var("n"), then_case));
    Stmt after = vectorize_loops(before);
    const auto *loop = after.as<For>();
    ASSERT_NE(loop, nullptr) << after;
    EXPECT_EQ(loop->for_type, ForType::Serial);
    EXPECT_TRUE(test::same_effect(before, after, random_buffers({{"in", 8}, {"out", 8}}),
                                  {{"n", int_value(5)}}));
}

TEST(VectorizeLoops, AssertDependingOnTheVariableStaysSerial) {
    Stmt body =
        Block::make(AssertStmt::make(x < int_var("n"), "x out of range"), Store::make("out", x, x));
    Stmt after = vectorize_loops(vectorized(body));
    const auto *loop = after.as<For>();
    ASSERT_NE(loop, nullptr) << after;
    EXPECT_EQ(loop->for_type, ForType::Serial);
}

// ---- Errors -------------------------------------------------------------------------------------

TEST(VectorizeLoops, NonConstantExtentIsAnErrorThatSaysHowToFixIt) {
    Stmt s = For::make("f.s0.x.xi", 0, int_var("n"), ForType::Vectorized,
                       Store::make("f", 0, int_var("f.s0.x.xi")));
    EXPECT_EQ(error_of([&] { vectorize_loops(s); }),
              "vectorize: loop 'f.s0.x.xi' has extent n, which is not a constant; "
              "split it by a constant factor first and vectorize the inner loop");
}

TEST(VectorizeLoops, ExtentOutsideTheSupportedWidthsIsAnError) {
    Stmt s = For::make("x", 0, 100, ForType::Vectorized, Store::make("f", 0, x));
    EXPECT_EQ(error_of([&] { vectorize_loops(s); }),
              "vectorize: loop 'x' has extent 100, outside the supported vector "
              "widths 2 to 64; split it by a factor in that range and vectorize the "
              "inner loop");
}

TEST(VectorizeLoops, ExtentBoundByALetOutsideIsSeenThrough) {
    Stmt loop = For::make("x", 0, int_var("x.loop_extent"), ForType::Vectorized,
                          Store::make("out", load("in", x), x));
    Stmt after = vectorize_loops(LetStmt::make("x.loop_extent", 4, loop));
    EXPECT_EQ(census(after).loops, 0) << after;
    EXPECT_EQ(census(after).plain_vector_stores, 1) << after;
}

} // namespace
} // namespace kiln
