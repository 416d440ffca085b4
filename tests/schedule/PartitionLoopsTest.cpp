#include "schedule/PartitionLoops.h"

#include <gtest/gtest.h>

#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "schedule/CSE.h"
#include "schedule/HoistLoopInvariants.h"
#include "schedule/UnrollLoops.h"
#include "schedule/VectorizeLoops.h"
#include "tests/lang/RandomExpr.h"
#include "tests/schedule/StmtInterpreter.h"

namespace kiln {
namespace {

using test::int_value;
using test::int_var;

Expr load(const std::string &buffer, const Expr &index) {
    return Load::make(Int(32).with_lanes(index.type().lanes), buffer, index);
}

// Ifs and likely hints in a statement.
class Counts : public IRVisitor {
public:
    int ifs = 0, likelies = 0;

protected:
    using IRVisitor::visit;
    void visit(const IfThenElse *op) override {
        ifs++;
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        likelies += op->name == intrinsic::likely;
        IRVisitor::visit(op);
    }
};

class FindLoops : public IRVisitor {
public:
    explicit FindLoops(const std::string &name) : name(name) {}
    std::vector<const For *> loops;

protected:
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (op->name == name) loops.push_back(op);
        IRVisitor::visit(op);
    }

private:
    std::string name;
};

struct LoopSummary {
    const For *loop;
    int ifs, likelies;
};

// Each loop named `name`, in order, with the ifs and likely hints inside it.
std::vector<LoopSummary> census(const Stmt &s, const std::string &name) {
    FindLoops find(name);
    find.include(s);
    std::vector<LoopSummary> result;
    for (const For *loop : find.loops) {
        Counts c;
        c.include(loop->body);
        result.push_back({loop, c.ifs, c.likelies});
    }
    return result;
}

// The loop nest of a split of x by `factor` with GuardWithIf over [0, n): as ScheduleFunctions
// builds it, the guard tests the original variable, a let of the outer and inner variables.
Stmt guarded_split(int factor, ForType outer_type = ForType::Serial) {
    Expr n = int_var("n"), xo = int_var("x.o"), xi = int_var("x.i"), x = int_var("x");
    Stmt store = Store::make("out", load("in", x) + x, x);
    Stmt guarded = IfThenElse::make(likely(x <= n - 1), store);
    Stmt inner =
        For::make("x.i", 0, factor, ForType::Serial, LetStmt::make("x", xo * factor + xi, guarded));
    return For::make("x.o", 0, (n + factor - 1) / factor, outer_type, inner);
}

test::Buffers buffers_of_size(int n, unsigned seed = 5) {
    std::mt19937 rng(seed);
    return {{"in", test::random_buffer(Int(32), n, rng)}, {"out", test::zero_buffer(Int(32), n)}};
}

TEST(PartitionLoops, GuardWithIfSplitGetsAGuardFreeSteadyStateForEveryExtentAndFactor) {
    for (int factor = 1; factor <= 8; factor++) {
        Stmt before = guarded_split(factor);
        Stmt after = partition_loops(before);
        auto loops = census(after, "x.o");
        ASSERT_EQ(loops.size(), 2u) << "factor " << factor << "\n" << after;
        EXPECT_EQ(loops[0].ifs, 0) << "steady state of factor " << factor << "\n" << after;
        EXPECT_EQ(loops[1].ifs, 1) << "epilogue of factor " << factor << "\n" << after;
        // `in` and `out` hold exactly n elements, so a guard dropped too early reads past them.
        for (int n = 0; n <= 20; n++) {
            EXPECT_TRUE(test::same_effect(before, after, buffers_of_size(n), {{"n", int_value(n)}}))
                << "factor " << factor << ", n " << n;
        }
    }
}

TEST(PartitionLoops, SeesThroughLetBoundLoopBounds) {
    // The shape lowering produces: extents and maxima are lets outside the nest.
    Expr xo = int_var("x.o"), xi = int_var("x.i"), x = int_var("x");
    Stmt store = Store::make("out", load("in", x) * 3, x);
    Stmt inner =
        For::make("x.i", int_var("x.i.loop_min"), int_var("x.i.loop_extent"), ForType::Serial,
                  LetStmt::make("x", xo * 4 + xi + int_var("x.loop_min"),
                                IfThenElse::make(likely(x <= int_var("x.loop_max")), store)));
    Stmt nest = For::make("x.o", 0, int_var("x.o.loop_extent"), ForType::Serial, inner);
    Stmt before = LetStmt::make(
        "x.i.loop_min", 0,
        LetStmt::make(
            "x.i.loop_extent", 4,
            LetStmt::make("x.o.loop_extent", (int_var("x.loop_extent") + 3) / 4,
                          LetStmt::make("x.loop_max",
                                        int_var("x.loop_min") + int_var("x.loop_extent") - 1,
                                        nest))));
    Stmt after = partition_loops(before);
    auto loops = census(after, "x.o");
    ASSERT_EQ(loops.size(), 2u) << after;
    EXPECT_EQ(loops[0].ifs, 0) << after;
    for (int mn : {0, 3}) {
        for (int ext = 0; ext <= 11; ext++) {
            test::Buffers buffers = buffers_of_size(mn + ext);
            EXPECT_TRUE(test::same_effect(
                before, after, buffers,
                {{"x.loop_min", int_value(mn)}, {"x.loop_extent", int_value(ext)}}))
                << "min " << mn << ", extent " << ext;
        }
    }
}

TEST(PartitionLoops, LowerBoundGuardGetsAPrologue) {
    Expr x = int_var("x"), m = int_var("m");
    Stmt store = Store::make("out", load("in", x - m + 3), x);
    Stmt before = For::make("x", 0, 20, ForType::Serial, IfThenElse::make(likely(x >= m), store));
    Stmt after = partition_loops(before);
    auto loops = census(after, "x");
    ASSERT_EQ(loops.size(), 2u) << after;
    EXPECT_EQ(loops[0].ifs, 1) << "prologue\n" << after;
    EXPECT_EQ(loops[1].ifs, 0) << "steady state\n" << after;
    for (int mv = -3; mv <= 23; mv++) {
        test::Buffers buffers = buffers_of_size(20);
        std::mt19937 rng(2);
        buffers["in"] = test::random_buffer(Int(32), 26, rng);
        EXPECT_TRUE(test::same_effect(before, after, buffers, {{"m", int_value(mv)}}))
            << "m " << mv;
    }
}

TEST(PartitionLoops, TwoSidedGuardGetsPrologueSteadyStateAndEpilogue) {
    Expr x = int_var("x"), lo = int_var("lo"), hi = int_var("hi"), m = int_var("m");
    Stmt store = Store::make("out", load("in", x - lo), x - m);
    Stmt before = For::make(
        "x", m, int_var("e"), ForType::Serial,
        IfThenElse::make(likely(lo <= x && x < hi), store, Store::make("out", 0 - x, x - m)));
    Stmt after = partition_loops(before);
    auto loops = census(after, "x");
    ASSERT_EQ(loops.size(), 3u) << after;
    EXPECT_EQ(loops[1].ifs, 0) << after;
    for (int e : {0, 1, 7, 12}) {
        for (int l = -2; l <= 14; l += 4) {
            for (int h = l - 1; h <= 14; h += 3) {
                for (int mv : {-3, 2}) {
                    // in holds exactly the elements the guarded branch may read.
                    test::Buffers buffers = buffers_of_size(12);
                    std::mt19937 rng(9);
                    buffers["in"] = test::random_buffer(Int(32), std::max(0, h - l), rng);
                    EXPECT_TRUE(test::same_effect(before, after, buffers,
                                                  {{"lo", int_value(l)},
                                                   {"hi", int_value(h)},
                                                   {"m", int_value(mv)},
                                                   {"e", int_value(e)}}))
                        << "lo " << l << ", hi " << h << ", m " << mv << ", e " << e;
                }
            }
        }
    }
}

TEST(PartitionLoops, NegativeCoefficientGivesALowerBound) {
    // 10 - 2x >= n - x*... : 10 - 2 * x <= n holds for x >= (10 - n) / 2, rounded up.
    Expr x = int_var("x"), n = int_var("n");
    Stmt before = For::make("x", 0, 12, ForType::Serial,
                            IfThenElse::make(likely(10 - 2 * x <= n), Store::make("out", x, x)));
    Stmt after = partition_loops(before);
    EXPECT_EQ(census(after, "x").size(), 2u) << after;
    for (int nv = -20; nv <= 20; nv++) {
        EXPECT_TRUE(test::same_effect(before, after, buffers_of_size(12), {{"n", int_value(nv)}}))
            << "n " << nv;
    }
}

TEST(PartitionLoops, ParallelLoopsStayParallelInEveryPart) {
    Stmt after = partition_loops(guarded_split(4, ForType::Parallel));
    auto loops = census(after, "x.o");
    ASSERT_EQ(loops.size(), 2u) << after;
    for (const auto &l : loops)
        EXPECT_EQ(l.loop->for_type, ForType::Parallel) << after;
}

TEST(PartitionLoops, EpilogueLosesItsLikelyHintsSoInnerLoopsAreNotPartitionedAgain) {
    Stmt after = partition_loops(guarded_split(4));
    auto loops = census(after, "x.o");
    ASSERT_EQ(loops.size(), 2u) << after;
    EXPECT_EQ(loops[1].likelies, 0) << after;
    EXPECT_EQ(census(after, "x.i").size(), 2u) << after;
}

TEST(PartitionLoops, NonLinearGuardIsLeftAlone) {
    Expr x = int_var("x");
    Stmt before =
        For::make("x", 0, 10, ForType::Serial,
                  IfThenElse::make(likely(x * x < int_var("n")), Store::make("out", x, x)));
    EXPECT_TRUE(partition_loops(before).same_as(before));
}

TEST(PartitionLoops, GuardWithoutLikelyIsLeftAlone) {
    Expr x = int_var("x");
    Stmt before = For::make("x", 0, 10, ForType::Serial,
                            IfThenElse::make(x < int_var("n"), Store::make("out", x, x)));
    EXPECT_TRUE(partition_loops(before).same_as(before));
}

TEST(PartitionLoops, GuardThatLoadsIsLeftAlone) {
    Expr x = int_var("x");
    Stmt before = For::make("x", 0, 10, ForType::Serial,
                            IfThenElse::make(likely(x < load("in", 0)), Store::make("out", x, x)));
    EXPECT_TRUE(partition_loops(before).same_as(before));
}

TEST(PartitionLoops, GuardWithAnUnprovableConjunctIsLeftInPlace) {
    Expr x = int_var("x"), k = int_var("k");
    Stmt before = For::make(
        "x", 0, 10, ForType::Serial,
        IfThenElse::make(likely(x < int_var("n") && k * k > 3), Store::make("out", x, x)));
    EXPECT_TRUE(partition_loops(before).same_as(before));
}

TEST(PartitionLoops, VectorizedTailFastPathBecomesTheSteadyState) {
    // vectorize_loops guards an unpredicated copy of a likely tail with a test on all lanes; the
    // steady state keeps only that copy.
    Expr xo = int_var("xo"), xi = int_var("xi"), x = int_var("x"), n = int_var("n");
    Stmt body = LetStmt::make(
        "x", xo * 8 + xi,
        IfThenElse::make(likely(x <= n - 1), Store::make("out", load("in", x) * 2, x)));
    Stmt before = For::make("xo", 0, (n + 7) / 8, ForType::Serial,
                            For::make("xi", 0, 8, ForType::Vectorized, body));
    Stmt after = partition_loops(vectorize_loops(before));
    auto loops = census(after, "xo");
    ASSERT_EQ(loops.size(), 2u) << after;
    EXPECT_EQ(loops[0].ifs, 0) << after;
    for (int nv = 0; nv <= 20; nv++) {
        EXPECT_TRUE(test::same_effect(before, after, buffers_of_size(nv), {{"n", int_value(nv)}}))
            << "n " << nv;
    }
}

TEST(PartitionLoops, LoweringPassesInOrderKeepTheMeaningOfRandomGuardedSplits) {
    // unroll, vectorize, partition, CSE and hoisting, as Lower.cpp runs them, on a split by 8
    // with a vectorized and a serial inner loop, a random value and a guard on the tail.
    std::mt19937_64 rng(99);
    Expr n = int_var("n"), xo = int_var("x.o"), xi = int_var("x.i"), x = int_var("x");
    for (int i = 0; i < 40; i++) {
        test::RandomExprGenerator gen(rng, {"x", "k"});
        Expr value = gen.int_expr(Int(32), 3) * load("in", x) + gen.int_expr(Int(32), 2);
        Stmt guarded = IfThenElse::make(likely(x <= n - 1), Store::make("out", value, x));
        ForType inner_type = i % 2 ? ForType::Vectorized : ForType::Unrolled;
        Stmt inner = For::make("x.i", 0, 8, inner_type, LetStmt::make("x", xo * 8 + xi, guarded));
        Stmt before = For::make("x.o", 0, (n + 7) / 8, ForType::Serial, inner);
        Stmt after =
            hoist_loop_invariants(cse(partition_loops(vectorize_loops(unroll_loops(before)))));
        for (int nv = 0; nv <= 20; nv++) {
            ASSERT_TRUE(test::same_effect(before, after, buffers_of_size(nv),
                                          {{"n", int_value(nv)}, {"k", int_value(nv - 9)}}))
                << "case " << i << ", n " << nv;
        }
    }
}

} // namespace
} // namespace kiln
