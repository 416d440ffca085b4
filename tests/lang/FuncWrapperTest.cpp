// Func::in and ImageParam::in in the front end: the wrapper a call makes (name, pure Vars,
// definition, the in directive), the same wrapper for the same consumers, the algorithm left as
// written (the reference evaluator gives the same result), no ownership cycle, and every error
// with its message.
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <memory>
#include <string>

#include "lang/Buffer.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/Function.h"
#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/ReferenceEvaluator.h"
#include "lang/Var.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

/// The CompileError message of f, checked for the house shape (lowercase, no final period).
/// ("(no error)" passes both checks.)
std::string error_of(const std::function<void()> &f) {
    std::string m = test::error_of(f);
    EXPECT_FALSE(m.empty() || std::isupper(static_cast<unsigned char>(m[0]))) << m;
    EXPECT_FALSE(!m.empty() && m.back() == '.') << m;
    return m;
}

/// f, read by g and by h; k reads only g.
struct Chain {
    Func f{"f"}, g{"g"}, h{"h"}, k{"k"};
    Chain() {
        Var x("x"), y("y");
        f(x, y) = x + y * 3;
        g(x, y) = f(x, y) * 2 + f(x + 1, y);
        h(x, y) = f(x, y) - 1;
        k(x, y) = g(x, y) + h(x, y);
    }
};

TEST(FuncWrapper, InMakesAPureCopyNamedAfterTheFuncAndItsConsumer) {
    Chain c;
    Func w = c.f.in(c.g);
    EXPECT_EQ(w.name(), "f_in_g");
    EXPECT_EQ(w.args(), (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(w.num_updates(), 0);
    EXPECT_EQ(to_string(w.value()), "f(x, y)");
    EXPECT_EQ(w.function()->wrapped, "f");
    EXPECT_EQ(c.f.function()->wrappers.at("g"), w.function());
    EXPECT_EQ(c.f.function()->wrappers.size(), 1u);
}

TEST(FuncWrapper, InLeavesTheConsumersDefinitionsAsWritten) {
    Chain c;
    Expr before = c.g.value();
    c.f.in(c.g).compute_root();
    c.f.in();
    EXPECT_TRUE(c.g.value().same_as(before));
    EXPECT_TRUE(c.f.directives().empty());
}

TEST(FuncWrapper, TheInDirectiveIsKeptByTheWrapperNamingWhatItWraps) {
    Chain c;
    Func w = c.f.in({c.g, c.h});
    EXPECT_EQ(w.name(), "f_in_g_h");
    ASSERT_EQ(w.directives().size(), 1u);
    const Directive &d = w.directives()[0];
    EXPECT_EQ(d.func, "f");
    EXPECT_EQ(d.stage, 0);
    EXPECT_EQ(d.primitive, "in");
    EXPECT_EQ(d.vars, (std::vector<std::string>{"g", "h"}));
    EXPECT_EQ(d.is_rvar, (std::vector<bool>{false, false}));
    EXPECT_EQ(d.target, "f_in_g_h");
    EXPECT_TRUE(c.f.directives().empty());
}

TEST(FuncWrapper, InAgainWithTheSameConsumersReturnsTheSameWrapper) {
    Chain c;
    Func one = c.f.in(c.g);
    EXPECT_EQ(c.f.in(c.g).function(), one.function());
    EXPECT_EQ(c.f.in(std::vector<Func>{c.g}).function(), one.function());
    Func all = c.f.in();
    EXPECT_EQ(all.name(), "f_in");
    EXPECT_EQ(c.f.in().function(), all.function());
    EXPECT_NE(all.function(), one.function());
    EXPECT_EQ(one.directives().size(), 1u);
    EXPECT_EQ(all.directives().size(), 1u);
    EXPECT_EQ(c.f.function()->wrappers.size(), 2u);
}

TEST(FuncWrapper, AWrapperOfSeveralConsumersIsReturnedForThemInAnyOrder) {
    Chain c;
    Func both = c.f.in({c.g, c.h});
    EXPECT_EQ(c.f.in({c.h, c.g}).function(), both.function());
    EXPECT_EQ(c.f.function()->wrappers.at("g"), both.function());
    EXPECT_EQ(c.f.function()->wrappers.at("h"), both.function());
}

// f.in(g).in(g): g reads f through f_in_g, so f_in_g may be wrapped for g in turn (two levels of
// staging), and asking again returns each level's wrapper.
TEST(FuncWrapper, AWrapperMayBeWrappedForTheConsumerThatReadsIt) {
    Chain c;
    Func inner = c.f.in(c.g);
    Func outer = inner.in(c.g);
    EXPECT_EQ(outer.name(), "f_in_g_in_g");
    EXPECT_EQ(to_string(outer.value()), "f_in_g(x, y)");
    EXPECT_EQ(inner.in(c.g).function(), outer.function());
    EXPECT_EQ(c.f.in(c.g).function(), inner.function());
    // h reads f itself, not f_in_g.
    EXPECT_EQ(error_of([&] { inner.in(c.h); }),
              "in: 'h' does not call 'f_in_g', so it would never read a wrapper of it; no Func "
              "that 'h' reaches calls 'f_in_g' either");
}

TEST(FuncWrapper, AMultiValuedFuncIsWrappedValueByValue) {
    Func f("pair"), g("g");
    Var x("x");
    f(x) = Tuple{x, x * 2};
    g(x) = f(x)[0] + f(x)[1];
    Func w = f.in(g);
    ASSERT_EQ(w.num_values(), 2);
    EXPECT_EQ(to_string(w.definition().values[0]), "pair(x)[0]");
    EXPECT_EQ(to_string(w.definition().values[1]), "pair(x)[1]");
}

TEST(FuncWrapper, AnImageParamWrapperHasPositionalVars) {
    ImageParam B(Float(32), 2, "B");
    Func C("C");
    Var j("j"), i("i");
    C(j, i) = B(i, j) * 2.0f;
    Func Bp = B.in();
    EXPECT_EQ(Bp.name(), "B_in");
    EXPECT_EQ(Bp.args(), (std::vector<std::string>{"_0", "_1"}));
    EXPECT_EQ(to_string(Bp.value()), "B(_0, _1)");
    EXPECT_EQ(Bp.function()->wrapped, "B");
    EXPECT_EQ(Bp.output_type(), Float(32));
    Bp.vectorize(_0, 8).reorder_storage(_1, _0);
    EXPECT_EQ(Bp.directives().size(), 4u); // in, split, vectorize, reorder_storage
    Func mine = B.in(C);
    EXPECT_EQ(mine.name(), "B_in_C");
    EXPECT_EQ(B.in(C).function(), mine.function());
    EXPECT_EQ(B.in(std::vector<Func>{C}).function(), mine.function());
    EXPECT_EQ(B.get_contents()->wrappers.size(), 2u);
}

TEST(FuncWrapper, WrappersLeaveTheReferenceEvaluatorsResultUnchanged) {
    ImageParam in(Int(32), 2, "in");
    Buffer<int> data({12, 10}, "data");
    int n = 0;
    data.for_each_offset([&](int64_t o) { data.data()[o] = (n++ * 7) % 23 - 11; });
    in.set(data);
    Func f("f"), g("g");
    Var x("x"), y("y");
    RDom r(0, 3, "r");
    f(x, y) = in(x, y) + in(x + 1, y);
    g(x, y) = 0;
    g(x, y) += f(x + r, y) * in(x, y + 1);
    Buffer<int> before = reference_realize(g, {8, 6});
    Func w = f.in(g);
    w.compute_root().vectorize(x, 4);
    in.in().compute_root();
    in.in(g);
    Buffer<int> after = reference_realize(g, {8, 6});
    for (int yy = 0; yy < 6; yy++) {
        for (int xx = 0; xx < 8; xx++)
            EXPECT_EQ(after(xx, yy), before(xx, yy)) << "at " << xx << ", " << yy;
    }
}

// The wrapped Func owns its wrappers; the wrapper's call back to it does not own it, so a
// pipeline with wrappers is freed like any other (LeakSanitizer would also report the cycle).
TEST(FuncWrapper, AWrapperDoesNotKeepWhatItWrapsAlive) {
    std::weak_ptr<FunctionContents> func, wrapper;
    std::weak_ptr<ParameterContents> image;
    {
        Chain c;
        ImageParam B(Float(32), 1, "B");
        Func use("use");
        Var x("x");
        use(x) = B(x) + cast<float>(c.g(x, 0));
        func = c.f.function();
        wrapper = c.f.in(c.g).function();
        image = B.get_contents();
        B.in(use);
        B.in();
        c.f.in();
    }
    EXPECT_TRUE(func.expired());
    EXPECT_TRUE(wrapper.expired());
    EXPECT_TRUE(image.expired());
}

TEST(FuncWrapperErrors, AConsumerThatDoesNotCallTheFuncIsNamedWithTheFuncsThatDo) {
    Chain c;
    EXPECT_EQ(error_of([&] { c.f.in(c.k); }),
              "in: 'k' does not call 'f', so it would never read a wrapper of it; wrap 'f' for a "
              "Func that calls it: g, h");
}

TEST(FuncWrapperErrors, AConsumerThatReachesNoCallOfTheFuncSaysSo) {
    Chain c;
    Func other("other");
    Var x("x");
    other(x) = x * 5;
    EXPECT_EQ(error_of([&] { c.f.in(other); }),
              "in: 'other' does not call 'f', so it would never read a wrapper of it; no Func "
              "that 'other' reaches calls 'f' either");
    EXPECT_TRUE(c.f.function()->wrappers.empty());
}

TEST(FuncWrapperErrors, AFuncCannotBeWrappedForItself) {
    Func f("acc");
    Var x("x");
    RDom r(0, 4, "r");
    f(x) = x;
    f(x) += f(x) * r;
    EXPECT_EQ(error_of([&] { f.in(f); }),
              "in: 'acc' cannot wrap its own calls (acc.in(acc)); wrap it for another Func that "
              "calls it, or call acc.in() for all of its consumers");
}

TEST(FuncWrapperErrors, AFuncWithoutADefinitionCannotBeWrapped) {
    Func u("u"), g("g");
    Var x("x");
    g(x) = x;
    EXPECT_EQ(error_of([&] { u.in(g); }),
              "in: Func 'u' has no definition to wrap; define it before calling u.in()");
    EXPECT_EQ(error_of([&] { u.in(); }),
              "in: Func 'u' has no definition to wrap; define it before calling u.in()");
}

TEST(FuncWrapperErrors, AnEmptyConsumerListIsAnError) {
    Chain c;
    EXPECT_EQ(error_of([&] { c.f.in(std::vector<Func>{}); }),
              "in: no consumers given for 'f'; name at least one Func that calls it, or call "
              "f.in() for all of its consumers");
    ImageParam B(Float(32), 1, "B");
    EXPECT_EQ(error_of([&] { B.in(std::vector<Func>{}); }),
              "in: no consumers given for 'B'; name at least one Func that calls it, or call "
              "B.in() for all of its consumers");
}

TEST(FuncWrapperErrors, AConsumerNamedTwiceIsAnError) {
    Chain c;
    EXPECT_EQ(error_of([&] {
                  c.f.in({c.g, c.h, c.g});
              }),
              "in: consumer 'g' of 'f' is named twice; name each consumer once");
}

TEST(FuncWrapperErrors, AConsumerWithoutADefinitionIsAnError) {
    Chain c;
    Func later("later");
    EXPECT_EQ(error_of([&] { c.f.in(later); }),
              "in: consumer 'later' has no definition yet; define it before wrapping 'f' for it");
}

TEST(FuncWrapperErrors, AConsumerOfAWrapperOfOtherConsumersCannotGetAnotherOne) {
    Chain c;
    c.f.in({c.g, c.h});
    EXPECT_EQ(error_of([&] { c.f.in(c.g); }),
              "in: 'g' already reads 'f' through 'f_in_g_h', the wrapper of g, h; call in() with "
              "exactly those consumers to get it");
}

TEST(FuncWrapperErrors, AnImageParamConsumerMustCallTheImage) {
    ImageParam B(Float(32), 1, "B");
    Func reads("reads"), not_reads("not_reads");
    Var x("x");
    reads(x) = B(x);
    not_reads(x) = reads(x) + 1.0f;
    EXPECT_EQ(error_of([&] { B.in(not_reads); }),
              "in: 'not_reads' does not call 'B', so it would never read a wrapper of it; wrap "
              "'B' for a Func that calls it: reads");
    EXPECT_EQ(error_of([] { ImageParam().in(); }),
              "in: the ImageParam is undefined; construct it with a type and dimensions");
}

} // namespace
} // namespace kiln
