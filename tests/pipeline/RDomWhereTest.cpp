// RDom::where: an update visits only the points of its domain where the predicate holds. The
// JIT-compiled pipeline agrees with the reference evaluator and with plain loops written here;
// linear predicates trim the loops (no guard is left in the loop nest), others stay as guards;
// rfactor carries the predicate; misuse is a CompileError naming the RDom and the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kiln.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

Buffer<int> values(int n, const std::string &name) {
    Buffer<int> b({n}, name);
    for (int i = 0; i < n; i++)
        b(i) = (i * 37 + 11) % 101 - 50;
    return b;
}

/// The loop nest after the last lowering pass.
std::string final_stmt(const Func &f) {
    std::ostringstream s;
    s << Pipeline(f).lower().body;
    return s.str();
}

template <typename T>
void expect_equal(const Buffer<T> &want, const Buffer<T> &got) {
    ASSERT_EQ(want.number_of_elements(), got.number_of_elements());
    for (int64_t i = 0; i < want.number_of_elements(); i++)
        ASSERT_EQ(want.data()[i], got.data()[i]) << "at element " << i;
}

TEST(RDomWhere, ATriangularSumVisitsOnlyThePointsBelowTheDiagonal) {
    const int N = 23;
    Buffer<int> a = values(N * N, "tri_a");
    Func f("tri_f");
    Var x("x");
    RDom r({{0, N}, {0, N}}, "tri_r");
    r.where(r.x < r.y);
    f(x) = 0;
    f(x) += a(r.x + N * r.y) * (x + 1);
    Buffer<int> got = f.realize({3});
    for (int x0 = 0; x0 < 3; x0++) {
        int want = 0;
        for (int ry = 0; ry < N; ry++) {
            for (int rx = 0; rx < ry; rx++)
                want += a(rx + N * ry) * (x0 + 1);
        }
        EXPECT_EQ(got(x0), want) << "x = " << x0;
    }
    expect_equal(Buffer<int>(reference_realize(f, {3})), got);
    // The predicate is linear in r.x: its loop runs to r.y - 1 and no guard is left.
    EXPECT_THAT(final_stmt(f), Not(HasSubstr("if (")));
}

// The same sum with r.x split by 4 (GuardWithIf, the default for an RVar): the split's likely
// guard sits between the loops and the predicate's guard, and the inner loop is still trimmed.
TEST(RDomWhere, ASplitReductionIsTrimmedThroughItsTailGuard) {
    const int N = 23;
    Buffer<int> a = values(N * N, "trisplit_a");
    Func f("trisplit_f");
    Var x("x");
    RVar ro("ro"), ri("ri");
    RDom r({{0, N}, {0, N}}, "trisplit_r");
    r.where(r.x < r.y);
    f(x) = 0;
    f(x) += a(r.x + N * r.y) * (x + 1);
    f.update(0).split(r.x, ro, ri, 4);
    expect_equal(Buffer<int>(reference_realize(f, {3})), Buffer<int>(f.realize({3})));
    // No guard compares r.x with r.y: the inner loop's bounds do.
    EXPECT_THAT(final_stmt(f), Not(HasSubstr("< trisplit_f.s1.trisplit_r.y")));
}

TEST(RDomWhere, APredicateOnAPureVariableTrimsTheReductionPerSite) {
    // A prefix sum: f(x) = sum of in(r) for r <= x, a bound that changes with the site.
    const int N = 40;
    Buffer<int> in = values(N, "prefix_in");
    Func f("prefix_f");
    Var x("x");
    RDom r(0, N, "prefix_r");
    r.where(r <= x);
    f(x) = 0;
    f(x) += in(r);
    f.parallel(x);
    Buffer<int> got = f.realize({N});
    int running = 0;
    for (int i = 0; i < N; i++) {
        running += in(i);
        EXPECT_EQ(got(i), running) << "x = " << i;
    }
    EXPECT_THAT(final_stmt(f), Not(HasSubstr("if (")));
}

TEST(RDomWhere, APredicateUnderAVectorizedSiteStaysAGuardAndIsExact) {
    const int N = 37;
    Buffer<int> in = values(N, "vec_in");
    Func f("vec_f");
    Var x("x");
    RDom r(0, N, "vec_r");
    r.where(r <= x);
    f(x) = 0;
    f(x) += in(r);
    f.update(0).reorder(x, r).vectorize(x, 8);
    Buffer<int> got = f.realize({N + 3});
    expect_equal(Buffer<int>(reference_realize(f, {N + 3})), got);
}

TEST(RDomWhere, APredicateThatReadsAnImageKeepsItsGuardAndItsBounds) {
    const int N = 50;
    Buffer<int> in = values(N, "mask_in");
    ImageParam mask(Int(32), 1, "mask");
    Buffer<int> m({N}, "mask_buf");
    for (int i = 0; i < N; i++)
        m(i) = (i % 3 == 0 || i % 7 == 2) ? 1 : 0;
    mask.set(m);
    Func f("masked_sum");
    Var x("x");
    RDom r(0, N, "mask_r");
    r.where(mask(r) != 0 && r % 2 == 0);
    f(x) = 0;
    f(x) += in(r) + x;
    Buffer<int> got = f.realize({4});
    for (int x0 = 0; x0 < 4; x0++) {
        int want = 0;
        for (int i = 0; i < N; i++) {
            if (m(i) != 0 && i % 2 == 0) want += in(i) + x0;
        }
        EXPECT_EQ(got(x0), want) << "x = " << x0;
    }
    // A smaller mask is a run-time error naming it: the predicate's reads are bounded too.
    Buffer<int> small({N - 1}, "small_mask");
    mask.set(small);
    EXPECT_THROW(f.realize({4}), RuntimeError);
}

TEST(RDomWhere, RfactorKeepsThePredicateInTheIntermediate) {
    const int N = 64;
    Buffer<int> in = values(N * N, "rf_in");
    Func f("rf_f");
    Var x("x"), u("u");
    RDom r({{0, N}, {0, N}}, "rf_r");
    r.where(r.x + r.y < N + 5);
    f(x) = 0;
    f(x) += in(r.x + N * r.y) - x;
    Func intm = f.update(0).rfactor(r.y, u);
    intm.compute_root().update(0).parallel(u);
    Buffer<int> got = f.realize({2});
    for (int x0 = 0; x0 < 2; x0++) {
        int want = 0;
        for (int ry = 0; ry < N; ry++) {
            for (int rx = 0; rx < N; rx++) {
                if (rx + ry < N + 5) want += in(rx + N * ry) - x0;
            }
        }
        EXPECT_EQ(got(x0), want) << "x = " << x0;
    }
}

TEST(RDomWhere, TheAlgorithmPrintsThePredicate) {
    Func f("printed_f");
    Var x("x");
    RDom r(0, 10, "printed_r");
    r.where(r < x + 2);
    f(x) = 0;
    f(x) += r;
    EXPECT_THAT(f.to_string(), HasSubstr("printed_r.x in [0, 10) and (printed_r.x < (x + 2))"));
}

TEST(RDomWhereErrors, MisuseNamesTheRDomAndTheFix) {
    Var x("x"), y("y");
    {
        RDom r(0, 10, "late_r");
        Func f("late_f");
        f(x) = 0;
        f(x) += r;
        EXPECT_THAT(test::error_of([&] { r.where(r < 3); }),
                    AllOf(HasSubstr("RDom 'late_r'"), HasSubstr("update late_f(x)"),
                          HasSubstr("call where() before defining")));
    }
    {
        RDom r(0, 10, "int_r");
        EXPECT_THAT(test::error_of([&] { r.where(r + 1); }),
                    AllOf(HasSubstr("RDom 'int_r'"), HasSubstr("needs a boolean condition"),
                          HasSubstr("!= 0")));
    }
    {
        RDom r(0, 10, "free_r");
        r.where(r < y);
        Func f("free_f");
        f(x) = 0;
        EXPECT_THAT(test::error_of([&] { f(x) += r; }),
                    AllOf(HasSubstr("where() predicate"), HasSubstr("uses variable 'y'"),
                          HasSubstr("not a pure variable on the left")));
    }
    {
        RDom r(0, 10, "own_r"), other(0, 4, "other_r");
        r.where(r < other);
        Func f("own_f");
        f(x) = 0;
        EXPECT_THAT(test::error_of([&] { f(x) += r; }),
                    AllOf(HasSubstr("RVar 'other_r.x' of RDom 'other_r'"),
                          HasSubstr("only the RVars of its own RDom")));
    }
    {
        RDom r(0, 10, "self_r");
        Func f("self_f");
        Var u("u");
        f(x) = 0;
        r.where(f(x) < 100);
        f(x) += r;
        EXPECT_THAT(test::error_of([&] { f.update(0).rfactor(r, u); }),
                    AllOf(HasSubstr("rfactor"), HasSubstr("where() predicate"),
                          HasSubstr("reads 'self_f'")));
    }
    {
        RDom undefined;
        EXPECT_THAT(test::error_of([&] { undefined.where(x < 3); }),
                    AllOf(HasSubstr("where() on an undefined RDom"), HasSubstr("RDom r(0, n)")));
        RDom r(0, 10, "empty_r");
        EXPECT_THAT(test::error_of([&] { r.where(Expr()); }),
                    AllOf(HasSubstr("RDom 'empty_r'"), HasSubstr("needs a condition"),
                          HasSubstr("undefined Expr")));
    }
}

// A predicate that reads the Func it updates: a running sum that stops adding once it reaches a
// limit. The RDom keeps calls to that Func weak, so nothing keeps the Func alive but its user.
TEST(RDomWhere, APredicateThatReadsItsOwnFuncWorksAndFreesIt) {
    std::weak_ptr<FunctionContents> func;
    std::weak_ptr<RDomContents> dom;
    {
        const int N = 12, limit = 20;
        Func f("capped_f");
        Var x("x");
        RDom r(0, N, "capped_r");
        f(x) = x;
        r.where(f(x) < limit);
        f(x) += r;
        Buffer<int> got = f.realize({8});
        for (int x0 = 0; x0 < 8; x0++) {
            int want = x0;
            for (int i = 0; i < N; i++) {
                if (want < limit) want += i;
            }
            EXPECT_EQ(got(x0), want) << "x = " << x0;
        }
        expect_equal(Buffer<int>(reference_realize(f, {8})), got);
        func = f.function();
        dom = r.get_contents();
    }
    EXPECT_TRUE(func.expired());
    EXPECT_TRUE(dom.expired());
}

} // namespace
} // namespace kiln
