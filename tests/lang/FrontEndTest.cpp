// The algorithm language: Var, RDom, Param, ImageParam, Func definitions (pure, updates, Tuples),
// compute(), the inline reducers, boundary conditions and Func::to_string.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "lang/BoundaryConditions.h"
#include "lang/Buffer.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IR.h"
#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/Reduce.h"
#include "lang/ReferenceEvaluator.h"
#include "lang/Var.h"

namespace kiln {
namespace {

bool starts_with(const std::string &s, const std::string &prefix) {
    return s.rfind(prefix, 0) == 0;
}

// Var

TEST(Var, VarsWithTheSameNameAreTheSameVariable) {
    EXPECT_TRUE(equal(Var("x"), Var("x")));
    EXPECT_FALSE(equal(Var("x"), Var("y")));
    Expr e = Var("x");
    EXPECT_EQ(e.type(), Int(32));
    EXPECT_EQ(e.as<Variable>()->name, "x");
}

TEST(Var, DefaultVarsGetDistinctImplicitNames) {
    Var a, b;
    EXPECT_NE(a.name(), b.name());
    EXPECT_TRUE(a.is_implicit());
    EXPECT_FALSE(Var("x").is_implicit());
}

TEST(Var, EmptyNameIsRejected) {
    EXPECT_THROW(Var(""), CompileError);
    EXPECT_THROW(Func(""), CompileError);
}

// RDom

TEST(RDom, OneDimensionalRDomIsItsOwnVariable) {
    RDom r(2, 5, "r");
    EXPECT_EQ(r.dimensions(), 1);
    EXPECT_EQ(r.name(), "r");
    EXPECT_EQ(r.x.name(), "r.x");
    EXPECT_TRUE(equal(Expr(r), Expr(r.x)));
    EXPECT_TRUE(equal(r.x.min(), Expr(2)));
    EXPECT_TRUE(equal(r.x.extent(), Expr(5)));
    EXPECT_EQ(RVar(r).domain(), r.get_contents());
}

TEST(RDom, MultiDimensionalRDomNamesItsDimensionsXYZW) {
    RDom r({{0, 2}, {0, 3}, {1, 4}, {0, 5}, {0, 6}}, "r");
    EXPECT_EQ(r.dimensions(), 5);
    EXPECT_EQ(r.x.name(), "r.x");
    EXPECT_EQ(r.y.name(), "r.y");
    EXPECT_EQ(r.z.name(), "r.z");
    EXPECT_EQ(r.w.name(), "r.w");
    EXPECT_EQ(r[4].name(), "r.4");
    EXPECT_TRUE(equal(r.z.min(), Expr(1)));
    EXPECT_TRUE(equal(r[4].extent(), Expr(6)));
}

TEST(RDom, IndexingGivesTheSameVariableAsTheNamedField) {
    RDom r({{0, 2}, {0, 3}}, "r");
    EXPECT_EQ(r[1].name(), r.y.name());
    EXPECT_EQ(r[1].domain(), r.y.domain());
    EXPECT_TRUE(equal(Expr(r[0]), Expr(r.x)));
}

TEST(RDom, RVarsKnowTheirRDom) {
    RDom r(0, 4, "r");
    Expr e = r.x;
    const Variable *v = e.as<Variable>();
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->rdom, r.get_contents());
    EXPECT_EQ(v->param, nullptr);
}

TEST(RDom, BoundsAreConvertedToInt32) {
    RDom r(cast<uint8_t>(Expr(1)), Expr(int64_t(7)), "r");
    EXPECT_EQ(r.x.min().type(), Int(32));
    EXPECT_EQ(r.x.extent().type(), Int(32));
    EXPECT_TRUE(equal(r.x.extent(), Expr(7)));
}

TEST(RDom, BoundsMayBeParamsAndImageParamShapes) {
    Param<int> n("n");
    ImageParam in(Float(32), 1, "in");
    RDom r(in.min(0), n, "r");
    EXPECT_EQ(to_string(r.x.min()), "in.min.0");
    EXPECT_EQ(to_string(r.x.extent()), "n");
}

TEST(RDom, EmptyRDomIsAllowed) {
    RDom r(0, 0, "r");
    EXPECT_EQ(r.dimensions(), 1);
}

TEST(RDom, UnnamedRDomsGetDistinctNames) {
    RDom a(0, 2), b(0, 2);
    EXPECT_NE(a.name(), b.name());
    EXPECT_EQ(a.x.name(), a.name() + ".x");
}

TEST(RDom, FreeRVarKeepsItsNameForSchedules) {
    RVar k("k");
    EXPECT_EQ(k.name(), "k");
    EXPECT_EQ(k.domain(), nullptr);
    EXPECT_THROW((void)k.min(), CompileError);
}

// Param and ImageParam

TEST(Param, ParamIsAVariableOfItsTypeThatKnowsItsParameter) {
    Param<uint16_t> p("p");
    Expr e = p;
    const Variable *v = e.as<Variable>();
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->name, "p");
    EXPECT_EQ(e.type(), UInt(16));
    EXPECT_EQ(v->param, p.get_contents());
}

TEST(Param, SetStoresAConstantOfTheParamsType) {
    Param<int8_t> p("p");
    p.set(-3);
    EXPECT_TRUE(equal(p.get_contents()->scalar_value, IntImm::make(Int(8), -3)));
    Param<float> alpha("alpha", 0.5f);
    EXPECT_TRUE(equal(alpha.get_contents()->scalar_value, Expr(0.5f)));
    Param<double> d("d", 0.1);
    EXPECT_TRUE(equal(d.get_contents()->scalar_value, Expr(0.1)));
}

TEST(Param, SetRangeStoresBothEnds) {
    Param<int> p("p");
    p.set_range(1, 10);
    EXPECT_TRUE(equal(p.get_contents()->min_value, Expr(1)));
    EXPECT_TRUE(equal(p.get_contents()->max_value, Expr(10)));
}

TEST(Param, CopiesShareTheBoundValue) {
    Param<int> p("p");
    Param<int> q = p;
    q.set(4);
    EXPECT_TRUE(equal(p.get_contents()->scalar_value, Expr(4)));
}

TEST(Param, UnnamedParamsGetDistinctNames) {
    Param<int> a, b;
    EXPECT_NE(a.name(), b.name());
    ImageParam i(UInt(8), 2), j(UInt(8), 2);
    EXPECT_NE(i.name(), j.name());
}

TEST(ImageParam, CallIsAnImageCallOfItsTypeWithInt32Arguments) {
    ImageParam in(UInt(8), 2, "in");
    Var x("x");
    Expr e = in(x, cast<int16_t>(x));
    const Call *c = e.as<Call>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->call_type, Call::Image);
    EXPECT_EQ(c->type, UInt(8));
    EXPECT_EQ(c->param, in.get_contents());
    EXPECT_EQ(c->args[1].type(), Int(32));
    EXPECT_EQ(to_string(e), "in(x, int32(int16(x)))");
}

TEST(ImageParam, ShapeSymbolsNameTheBufferDimension) {
    ImageParam in(Float(32), 3, "in");
    EXPECT_EQ(to_string(in.min(1)), "in.min.1");
    EXPECT_EQ(to_string(in.extent(2)), "in.extent.2");
    EXPECT_EQ(to_string(in.stride(0)), "in.stride.0");
    EXPECT_TRUE(equal(in.width(), in.extent(0)));
    EXPECT_TRUE(equal(in.height(), in.extent(1)));
    EXPECT_TRUE(equal(in.channels(), in.extent(2)));
    EXPECT_EQ(in.extent(0).as<Variable>()->param, in.get_contents());
    EXPECT_EQ(buffer_extent_name("in", 2), "in.extent.2");
}

TEST(ImageParam, SetBindsTheBuffer) {
    ImageParam in(Int(16), 2, "in");
    Buffer<int16_t> b({3, 2}, "b");
    in.set(b);
    EXPECT_EQ(in.get().get_contents(), b.get_contents());
    EXPECT_EQ(in.dimensions(), 2);
    EXPECT_EQ(in.type(), Int(16));
}

TEST(ImageParam, DimensionsOutsideZeroToEightAreRejected) {
    try {
        ImageParam in(Float(32), 9, "in");
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "dimensions of ImageParam 'in' must be in [0, 8], got 9");
    }
}

// Func: pure definitions

TEST(Func, PureDefinitionRecordsArgsValueAndType) {
    Var x("x"), y("y");
    Func f("f");
    EXPECT_FALSE(f.defined());
    f(x, y) = cast<float>(x + y);
    EXPECT_TRUE(f.defined());
    EXPECT_EQ(f.name(), "f");
    EXPECT_EQ(f.dimensions(), 2);
    EXPECT_EQ(f.args(), (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(f.output_type(), Float(32));
    EXPECT_EQ(f.num_values(), 1);
    EXPECT_EQ(f.num_updates(), 0);
    EXPECT_EQ(to_string(f.value()), "float32((x + y))");
    ASSERT_EQ(f.definition().args.size(), 2u);
    EXPECT_TRUE(equal(f.definition().args[1], y));
}

TEST(Func, VarsReturnsThePureVariablesInOrder) {
    Var x("x"), y("y");
    Func f("f");
    f(y, x) = 0;
    std::vector<Var> vars = f.vars();
    ASSERT_EQ(vars.size(), 2u);
    EXPECT_EQ(vars[0].name(), "y");
    EXPECT_EQ(vars[1].name(), "x");
}

TEST(Func, PureDefinitionMayUseParams) {
    Var x("x");
    Param<float> alpha("alpha");
    Func f("f");
    f(x) = alpha * x;
    EXPECT_EQ(to_string(f.value()), "(alpha * float32(x))");
}

TEST(Func, ZeroDimensionalFuncCanBeDefinedAndUpdated) {
    Func f("f");
    f() = 3;
    f() = f() + 1;
    EXPECT_EQ(f.dimensions(), 0);
    EXPECT_EQ(f.num_updates(), 1);
}

TEST(Func, UnnamedFuncsGetDistinctNames) {
    Func a, b;
    EXPECT_NE(a.name(), b.name());
}

TEST(Func, CopiesShareTheDefinition) {
    Var x("x");
    Func f("f");
    Func g = f;
    g(x) = x;
    EXPECT_TRUE(f.defined());
    EXPECT_EQ(Func(f.function()).name(), "f");
}

TEST(Func, CallIsAFuncCallWithInt32Arguments) {
    Var x("x");
    Func f("f");
    f(x) = x;
    Expr e = f(cast<uint8_t>(x));
    const Call *c = e.as<Call>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->call_type, Call::Func);
    EXPECT_EQ(c->func, f.function());
    EXPECT_EQ(c->type, Int(32));
    EXPECT_EQ(c->args[0].type(), Int(32));
}

TEST(Func, AssigningOneCallToAnotherDefinesTheFunc) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = x * 2;
    g(x) = f(x);
    EXPECT_EQ(to_string(g.value()), "f(x)");
}

TEST(Func, AssigningACallOfATupleFuncCopiesEveryValue) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = Tuple{x, cast<float>(x)};
    g(x) = f(x);
    ASSERT_EQ(g.num_values(), 2);
    EXPECT_EQ(g.output_types()[1], Float(32));
    EXPECT_EQ(to_string(g.definition().values[1]), "f(x)[1]");
}

// Func: update definitions

TEST(Func, UpdateOverAnRDomIsRecordedWithItsRDom) {
    Var x("x");
    Func f("f");
    RDom r(0, 10, "r");
    f(x) = 0;
    f(r) = f(r) + 1;
    ASSERT_EQ(f.num_updates(), 1);
    const Definition &u = f.update_definition(0);
    EXPECT_EQ(u.rdom, r.get_contents());
    EXPECT_EQ(to_string(u.args[0]), "r.x");
    EXPECT_EQ(to_string(u.values[0]), "(f(r.x) + 1)");
}

TEST(Func, UpdateMayUseThePureVarsInPlace) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = x + y;
    f(x, y) = f(x, y) * 2;
    ASSERT_EQ(f.num_updates(), 1);
    EXPECT_EQ(f.update_definition(0).rdom, nullptr);
}

TEST(Func, UpdateAtAConstantSiteIsAllowed) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = 0;
    f(x, 0) = 1;
    EXPECT_EQ(f.num_updates(), 1);
    EXPECT_EQ(to_string(f.update_definition(0).args[1]), "0");
}

TEST(Func, UpdatesApplyInTheOrderWritten) {
    Var x("x");
    Func f("f");
    f(x) = x;
    f(x) = f(x) + 1;
    f(x) = f(x) * 3;
    ASSERT_EQ(f.num_updates(), 2);
    EXPECT_EQ(to_string(f.update_definition(0).values[0]), "(f(x) + 1)");
    EXPECT_EQ(to_string(f.update_definition(1).values[0]), "(f(x) * 3)");
}

TEST(Func, UpdateStageIsNamedAfterTheFunc) {
    Var x("x");
    Func f("f");
    f(x) = x;
    f(x) += 1;
    Stage s = f.update(0);
    EXPECT_EQ(s.name(), "f.update(0)");
    EXPECT_EQ(s.stage_index(), 1);
    EXPECT_EQ(s.function(), f.function());
    EXPECT_THROW(f.update(1), CompileError);
}

TEST(Func, PlusEqualsOnAnUndefinedFuncStartsFromZero) {
    Var x("x");
    Func f("f");
    f(x) += x;
    EXPECT_EQ(to_string(f.value()), "0");
    ASSERT_EQ(f.num_updates(), 1);
    EXPECT_EQ(to_string(f.update_definition(0).values[0]), "(f(x) + x)");
}

TEST(Func, MinusEqualsStartsFromZeroAndTimesEqualsFromOne) {
    Var x("x");
    Func a("a"), m("m"), d("d");
    a(x) -= 2.5f;
    m(x) *= x;
    d(x) /= 2.0f;
    EXPECT_EQ(to_string(a.value()), "0.0f");
    EXPECT_EQ(to_string(a.update_definition(0).values[0]), "(a(x) - 2.5f)");
    EXPECT_EQ(to_string(m.value()), "1");
    EXPECT_EQ(to_string(m.update_definition(0).values[0]), "(m(x) * x)");
    EXPECT_EQ(to_string(d.value()), "1.0f");
    EXPECT_EQ(to_string(d.update_definition(0).values[0]), "(d(x) / 2.0f)");
}

TEST(Func, PlusEqualsAtAComputedSiteOfAnUndefinedFuncGivesItAFreshPureVar) {
    ImageParam in(UInt(8), 1, "in");
    RDom r(0, 100, "r");
    Func h("h");
    h(clamp(in(r), 0, 9)) += 1;
    ASSERT_EQ(h.dimensions(), 1);
    EXPECT_TRUE(starts_with(h.args()[0], "_")) << h.args()[0];
    EXPECT_EQ(h.output_type(), Int(32));
    EXPECT_EQ(to_string(h.value()), "0");
    ASSERT_EQ(h.num_updates(), 1);
    const Definition &u = h.update_definition(0);
    EXPECT_EQ(u.rdom, r.get_contents());
    EXPECT_EQ(to_string(u.args[0]), "int32(max(min(in(r.x), (uint8)9), (uint8)0))");
    EXPECT_EQ(to_string(u.values[0]), "(h(int32(max(min(in(r.x), (uint8)9), (uint8)0))) + 1)");
}

TEST(Func, PlusEqualsWithAnRVarOnTheRightKeepsThePureVar) {
    Var x("x"), y("y");
    Func g("g"), f("f");
    g(x, y) = x * y;
    RDom r(0, 8, "r");
    f(x) += g(x, r);
    EXPECT_EQ(f.args(), (std::vector<std::string>{"x"}));
    EXPECT_EQ(to_string(f.value()), "0");
    const Definition &u = f.update_definition(0);
    EXPECT_EQ(u.rdom, r.get_contents());
    EXPECT_EQ(to_string(u.args[0]), "x");
    EXPECT_EQ(to_string(u.values[0]), "(f(x) + g(x, r.x))");
}

TEST(Func, PlusEqualsTakesTheTypeOfTheFirstValueForAnUndefinedFunc) {
    Var x("x");
    Func f("f");
    f(x) += cast<uint16_t>(x);
    EXPECT_EQ(f.output_type(), UInt(16));
    EXPECT_EQ(to_string(f.value()), "(uint16)0");
}

TEST(Func, PlusEqualsWithALiteralKeepsTheFuncsNarrowType) {
    Var x("x");
    Func f("f");
    f(x) = cast<uint8_t>(x);
    f(x) += 1;
    EXPECT_EQ(to_string(f.update_definition(0).values[0]), "(f(x) + (uint8)1)");
    Func g("g");
    g(x) = 0.0f;
    g(x) += 0.5; // a double literal with a float32 Func stays float32
    EXPECT_EQ(to_string(g.update_definition(0).values[0]), "(g(x) + 0.5f)");
}

TEST(Func, PlusEqualsWithANarrowerIntegerWidensIt) {
    Var x("x");
    Func f("f");
    f(x) = 0;
    f(x) += cast<uint8_t>(x);
    EXPECT_EQ(to_string(f.update_definition(0).values[0]), "(f(x) + int32(uint8(x)))");
}

TEST(Func, PlusEqualsWithAnIntegerIntoAFloatFuncConvertsIt) {
    Var x("x");
    Func f("f");
    f(x) = 0.0f;
    f(x) += x;
    EXPECT_EQ(to_string(f.update_definition(0).values[0]), "(f(x) + float32(x))");
}

TEST(Func, AReductionDoesNotKeepItselfAlive) {
    std::weak_ptr<FunctionContents> contents;
    {
        Var x("x");
        RDom r(0, 4, "r");
        Func f("f");
        f(x) = 0;
        f(x) += r;
        contents = f.function();
        const Call *self = f.update_definition(0).values[0].as<Add>()->a.as<Call>();
        ASSERT_NE(self, nullptr);
        EXPECT_EQ(self->func.get(), f.function().get());
    }
    EXPECT_TRUE(contents.expired());
}

TEST(Func, ACallToAReductionKeepsItAlive) {
    std::weak_ptr<FunctionContents> contents;
    Expr call;
    {
        RDom r(0, 4, "r");
        call = sum(r * 2);
        contents = call.as<Call>()->func;
    }
    ASSERT_FALSE(contents.expired());
    Func s(contents.lock());
    EXPECT_EQ(to_string(s.update_definition(0).values[0]), "(" + s.name() + "() + (r.x * 2))");
}

// Tuples

TEST(Tuple, TupleFuncHasOneTypePerValue) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, cast<float>(x), x > 2};
    EXPECT_EQ(f.num_values(), 3);
    EXPECT_EQ(f.output_types(), (std::vector<Type>{Int(32), Float(32), Bool()}));
    EXPECT_THROW((void)f.output_type(), CompileError);
}

TEST(Tuple, ValuesAreSelectedWithBrackets) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, cast<float>(x)};
    Expr e = f(x + 1)[1];
    const Call *c = e.as<Call>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->value_index, 1);
    EXPECT_EQ(c->type, Float(32));
    EXPECT_EQ(to_string(e), "f((x + 1))[1]");
}

TEST(Tuple, UpdateOfATupleFuncGivesEveryValue) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{0, 0.0f};
    RDom r(0, 4, "r");
    f(x) = Tuple{f(x)[0] + r, f(x)[1] + 1.0f};
    ASSERT_EQ(f.num_updates(), 1);
    EXPECT_EQ(f.update_definition(0).values.size(), 2u);
}

TEST(Tuple, ElementsAreCheckedWhenIndexed) {
    Tuple t{1, 2};
    EXPECT_EQ(t.size(), 2u);
    EXPECT_TRUE(equal(t[1], Expr(2)));
    try {
        (void)t[2];
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "tuple of 2 values has no element 2");
    }
}

// compute()

TEST(Compute, OneVarBodyDefinesAOneDimensionalFuncWithItsShape) {
    Func f = compute(
        {10}, [](Var i) { return i * 2; }, "f");
    EXPECT_EQ(f.name(), "f");
    EXPECT_EQ(f.dimensions(), 1);
    EXPECT_EQ(to_string(f.value()), "(f.i * 2)");
    ASSERT_EQ(f.function()->shape.size(), 1u);
    EXPECT_TRUE(equal(f.function()->shape[0], Expr(10)));
}

TEST(Compute, TwoVarBodyNamesItsVarsIAndJ) {
    Func f = compute(
        {4, 5}, [](Var i, Var j) { return i + j; }, "f");
    EXPECT_EQ(f.args(), (std::vector<std::string>{"f.i", "f.j"}));
    EXPECT_EQ(f.function()->shape.size(), 2u);
}

TEST(Compute, ThreeAndFourVarBodiesDefineFuncsOfThatRank) {
    Func f3 = compute(
        {2, 3, 4}, [](Var i, Var j, Var k) { return i + j * k; }, "f3");
    EXPECT_EQ(f3.args(), (std::vector<std::string>{"f3.i", "f3.j", "f3.k"}));
    Func f4 = compute(
        {2, 3, 4, 5}, [](Var i, Var j, Var k, Var l) { return i + j + k + l; }, "f4");
    EXPECT_EQ(f4.args(), (std::vector<std::string>{"f4.i", "f4.j", "f4.k", "f4.l"}));
}

TEST(Compute, VectorOfVarsBodyTakesAnyRank) {
    Func f = compute(
        {2, 2, 2, 2, 2},
        [](const std::vector<Var> &v) {
            Expr e = 0;
            for (const Var &x : v)
                e = e + x;
            return e;
        },
        "f");
    EXPECT_EQ(f.dimensions(), 5);
    EXPECT_EQ(f.args()[4], "f.d4");
    EXPECT_EQ(f.function()->shape.size(), 5u);
}

TEST(Compute, ShapeIsConvertedToInt32AndMayBeSymbolic) {
    Param<uint16_t> n("n");
    Func f = compute(
        {n}, [](Var i) { return i; }, "f");
    EXPECT_EQ(to_string(f.function()->shape[0]), "int32(n)");
}

TEST(Compute, UnnamedComputeGetsAUniqueName) {
    Func a = compute({2}, [](Var i) { return i; });
    Func b = compute({2}, [](Var i) { return i; });
    EXPECT_NE(a.name(), b.name());
}

TEST(Compute, SumInsideComputeBuildsTheSameAlgorithmAsAnUpdate) {
    // The reducer's Func takes the free Vars in order of first use: j (in A) before i.
    ImageParam a(Float(32), 2, "A"), b(Float(32), 2, "B");
    RDom k(0, 16, "k");
    Func c = compute(
        {8, 8}, [&](Var i, Var j) { return sum(a(k, j) * b(i, k), "acc"); }, "C");
    EXPECT_EQ(c.to_string(), "acc(C.j, C.i) = 0.0f\n"
                             "acc(C.j, C.i) = (acc(C.j, C.i) + (A(k.x, C.j) * B(C.i, k.x)))  "
                             "where k.x in [0, 16)\n"
                             "C(C.i, C.j) = acc(C.j, C.i)\n");
}

// Inline reducers

TEST(Reduce, SumIsAnUpdateOverTheRDomStartingFromZeroOfTheArgumentsType) {
    Var x("x");
    ImageParam in(UInt(16), 2, "in");
    RDom r(0, 3, "r");
    Expr e = sum(in(x, r), "s");
    const Call *c = e.as<Call>();
    ASSERT_NE(c, nullptr);
    Func s(c->func);
    EXPECT_EQ(s.name(), "s");
    EXPECT_EQ(s.args(), (std::vector<std::string>{"x"}));
    EXPECT_EQ(s.output_type(), UInt(16));
    EXPECT_EQ(to_string(s.value()), "(uint16)0");
    ASSERT_EQ(s.num_updates(), 1);
    EXPECT_EQ(s.update_definition(0).rdom, r.get_contents());
    EXPECT_EQ(to_string(s.update_definition(0).values[0]), "(s(x) + in(x, r.x))");
    EXPECT_EQ(to_string(e), "s(x)");
}

TEST(Reduce, ReducerIsAFuncOverTheFreeVarsInOrderOfFirstUse) {
    Var x("x"), y("y");
    ImageParam in(Float(32), 2, "in");
    RDom r(0, 3, "r");
    Param<float> scale("scale");
    Expr e = sum(in(y + r, x) * scale, "s");
    Func s(e.as<Call>()->func);
    EXPECT_EQ(s.args(), (std::vector<std::string>{"y", "x"}));
    EXPECT_EQ(to_string(e), "s(y, x)");
}

TEST(Reduce, MaximumStartsFromTheLowestValueOfTheType) {
    ImageParam in(Int(8), 1, "in");
    RDom r(0, 5, "r");
    Func m(maximum(in(r), "m").as<Call>()->func);
    EXPECT_EQ(to_string(m.value()), "(int8)-128");
    EXPECT_EQ(to_string(m.update_definition(0).values[0]), "max(m(), in(r.x))");
}

TEST(Reduce, MinimumStartsFromTheHighestValueOfTheType) {
    ImageParam in(Float(32), 1, "in");
    RDom r(0, 5, "r");
    Func m(minimum(in(r), "m").as<Call>()->func);
    EXPECT_EQ(to_string(m.value()), "inff");
    EXPECT_EQ(to_string(m.update_definition(0).values[0]), "min(m(), in(r.x))");
}

TEST(Reduce, ArgmaxTracksTheCoordinateAndTheValue) {
    Var x("x");
    ImageParam in(Float(32), 2, "in");
    RDom r(2, 5, "r");
    Tuple t = argmax(in(x, r), "am");
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(to_string(t[0]), "am(x)[0]");
    EXPECT_EQ(to_string(t[1]), "am(x)[1]");
    Func am(t[0].as<Call>()->func);
    EXPECT_EQ(am.output_types(), (std::vector<Type>{Int(32), Float(32)}));
    EXPECT_EQ(to_string(am.definition().values[0]), "2"); // the RDom's min
    EXPECT_EQ(to_string(am.definition().values[1]), "-inff");
    const Definition &u = am.update_definition(0);
    EXPECT_EQ(u.rdom, r.get_contents());
    EXPECT_EQ(to_string(u.values[0]), "select((in(x, r.x) > am(x)[1]), r.x, am(x)[0])");
    EXPECT_EQ(to_string(u.values[1]), "select((in(x, r.x) > am(x)[1]), in(x, r.x), am(x)[1])");
}

TEST(Reduce, ArgminOverTwoDimensionsTracksEachCoordinate) {
    ImageParam in(Int(32), 2, "in");
    RDom r({{0, 3}, {1, 4}}, "r");
    Tuple t = argmin(in(r.x, r.y), "best");
    ASSERT_EQ(t.size(), 3u);
    Func best(t[0].as<Call>()->func);
    EXPECT_EQ(best.dimensions(), 0);
    EXPECT_EQ(best.output_types(), (std::vector<Type>{Int(32), Int(32), Int(32)}));
    EXPECT_EQ(to_string(best.definition().values[1]), "1");
    EXPECT_EQ(to_string(best.definition().values[2]), "2147483647");
    const Definition &u = best.update_definition(0);
    EXPECT_EQ(to_string(u.values[1]), "select((in(r.x, r.y) < best()[2]), r.y, best()[1])");
}

TEST(Reduce, ArgmaxResultDefinesATupleFunc) {
    Var x("x");
    ImageParam in(Float(32), 2, "in");
    RDom r(0, 5, "r");
    Func f("f");
    f(x) = argmax(in(x, r), "am");
    EXPECT_EQ(f.num_values(), 2);
    EXPECT_EQ(to_string(f.definition().values[0]), "am(x)[0]");
}

TEST(Reduce, UnnamedReducersGetDistinctNamesAfterTheReducer) {
    RDom r(0, 5, "r");
    Expr a = sum(r), b = sum(r);
    const std::string &na = a.as<Call>()->name, &nb = b.as<Call>()->name;
    EXPECT_TRUE(starts_with(na, "sum")) << na;
    EXPECT_NE(na, nb);
}

// Boundary conditions

TEST(BoundaryConditions, RepeatEdgeOfABufferClampsEachDimensionIntoIt) {
    Buffer<float> b({4, 3}, "b");
    b.set_min({0, 1});
    Func f = repeat_edge(b);
    EXPECT_EQ(f.dimensions(), 2);
    EXPECT_EQ(f.output_type(), Float(32));
    std::vector<std::string> a = f.args();
    EXPECT_EQ(to_string(f.value()),
              "b(max(min(" + a[0] + ", 3), 0), max(min(" + a[1] + ", 3), 1))");
}

TEST(BoundaryConditions, RepeatEdgeOfAnImageParamUsesItsShapeSymbols) {
    ImageParam in(UInt(8), 3, "in");
    Func f = repeat_edge(in);
    EXPECT_EQ(f.dimensions(), 3);
    EXPECT_EQ(f.output_type(), UInt(8));
    std::string a0 = f.args()[0];
    const Call *c = f.value().as<Call>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(to_string(c->args[0]),
              "max(min(" + a0 + ", ((in.min.0 + in.extent.0) - 1)), in.min.0)");
}

TEST(BoundaryConditions, RepeatEdgeOfAFuncTakesExplicitBounds) {
    Var x("x"), y("y"), c("c");
    Func g("g");
    g(x, y, c) = x + y + c;
    Func f = repeat_edge(g, {{0, 10}, {0, 8}, {0, 3}});
    EXPECT_EQ(f.dimensions(), 3);
    EXPECT_EQ(to_string(f.value().as<Call>()->args[2]), "max(min(" + f.args()[2] + ", 2), 0)");
}

TEST(BoundaryConditions, ConstantExteriorSelectsTheValueOutsideTheBounds) {
    Buffer<int> b({4}, "b");
    Func f = constant_exterior(b, 7);
    EXPECT_EQ(f.dimensions(), 1);
    std::string v = f.args()[0];
    EXPECT_EQ(to_string(f.value()),
              "select(((" + v + " >= 0) && (" + v + " < 4)), b(max(min(" + v + ", 3), 0)), 7)");
}

TEST(BoundaryConditions, ConstantExteriorConvertsTheValueToTheSourceType) {
    Buffer<uint8_t> b({4, 4}, "b");
    Func f = constant_exterior(b, 255);
    EXPECT_EQ(f.output_type(), UInt(8));
    EXPECT_EQ(to_string(f.value().as<Select>()->false_value), "(uint8)255");
}

TEST(BoundaryConditions, ConstantExteriorValueThatDoesNotFitIsRejected) {
    Buffer<uint8_t> b({4}, "b");
    try {
        constant_exterior(b, 0.5f);
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "constant_exterior of 'b': the value 0.5f does not fit in uint8, "
                               "the type of 'b'; give a value of type uint8");
    }
}

TEST(BoundaryConditions, ConstantExteriorOfAFuncWithSymbolicBounds) {
    Var x("x");
    Param<int> n("n");
    Func g("g");
    g(x) = x;
    Func f = constant_exterior(g, 0, {{1, n}});
    std::string v = f.args()[0];
    EXPECT_EQ(to_string(f.value()), "select(((" + v + " >= 1) && (" + v +
                                        " < (1 + n))), g(max(min(" + v +
                                        ", ((1 + n) - 1)), 1)), 0)");
}

TEST(BoundaryConditions, MirrorInteriorReflectsWithoutRepeatingTheEdge) {
    Buffer<float> b({4}, "b");
    Func f = mirror_interior(b);
    EXPECT_EQ(f.dimensions(), 1);
    std::string v = f.args()[0];
    std::string m = "(" + v + " % 6)";
    EXPECT_EQ(to_string(f.value()),
              "b(max(min(select((" + m + " < 4), " + m + ", (6 - " + m + ")), 3), 0))");
}

TEST(BoundaryConditions, MirrorInteriorOfAFuncHasItsDimensionality) {
    Var x("x"), y("y");
    Func g("g");
    g(x, y) = x - y;
    Func f = mirror_interior(g, {{0, 5}, {2, 5}});
    EXPECT_EQ(f.dimensions(), 2);
    EXPECT_EQ(f.output_type(), Int(32));
}

TEST(BoundaryConditions, ZeroDimensionalBufferNeedsNoBounds) {
    Buffer<int> b(std::vector<int>{}, "scalar");
    EXPECT_EQ(to_string(constant_exterior(b, 1).value()), "scalar()");
}

TEST(BoundaryConditions, BoundaryConditionOfAnUndefinedFuncIsRejected) {
    Func g("g");
    try {
        repeat_edge(g, {});
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "repeat_edge: Func 'g' has no definition");
    }
}

// Func::to_string

TEST(FuncToString, PrintsABlurProducersFirst) {
    Var x("x"), y("y");
    ImageParam in(Float(32), 2, "in");
    Func blur_x("blur_x"), blur_y("blur_y");
    blur_x(x, y) = (in(x - 1, y) + in(x, y) + in(x + 1, y)) / 3;
    blur_y(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3;
    EXPECT_EQ(blur_y.to_string(),
              "blur_x(x, y) = (((in((x - 1), y) + in(x, y)) + in((x + 1), y)) / 3.0f)\n"
              "blur_y(x, y) = (((blur_x(x, (y - 1)) + blur_x(x, y)) + blur_x(x, (y + 1))) / "
              "3.0f)\n");
}

TEST(FuncToString, PrintsUpdatesAfterThePureDefinitionWithTheirReductionDomain) {
    Var x("x"), y("y");
    ImageParam in(Float(32), 2, "in");
    Func blur("blur"), total("total");
    blur(x, y) = (in(x, y) + in(x + 1, y)) * 0.5f;
    RDom r(0, 5, "r");
    total(y) = 0.0f;
    total(y) += blur(r, y);
    EXPECT_EQ(total.to_string(), "blur(x, y) = ((in(x, y) + in((x + 1), y)) * 0.5f)\n"
                                 "total(y) = 0.0f\n"
                                 "total(y) = (total(y) + blur(r.x, y))  where r.x in [0, 5)\n");
}

TEST(FuncToString, PrintsEveryDimensionOfAMultiDimensionalRDom) {
    Func f("f");
    RDom r({{0, 3}, {-1, 3}}, "r");
    f() = 0;
    f() += r.x * r.y;
    EXPECT_EQ(f.to_string(), "f() = 0\n"
                             "f() = (f() + (r.x * r.y))  where r.x in [0, 3), r.y in [-1, 2)\n");
}

TEST(FuncToString, PrintsSymbolicReductionBoundsAsMinPlusExtent) {
    Var x("x");
    Param<int> n("n"), lo("lo");
    Func f("f"), g("g");
    RDom r(1, n, "r"), s(0, n, "s"), t(lo, 4, "t");
    f(x) = 0;
    f(x) += r;
    EXPECT_EQ(f.to_string(), "f(x) = 0\n"
                             "f(x) = (f(x) + r.x)  where r.x in [1, 1 + n)\n");
    g(x) = 0;
    g(x) += s;
    g(x) += t;
    EXPECT_EQ(g.to_string(), "g(x) = 0\n"
                             "g(x) = (g(x) + s.x)  where s.x in [0, n)\n"
                             "g(x) = (g(x) + t.x)  where t.x in [lo, lo + 4)\n");
}

TEST(FuncToString, PrintsTupleValuesInBraces) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, cast<float>(x)};
    f(x) = Tuple{f(x)[0] + 1, f(x)[1] * 2.0f};
    EXPECT_EQ(f.to_string(), "f(x) = {x, float32(x)}\n"
                             "f(x) = {(f(x)[0] + 1), (f(x)[1] * 2.0f)}\n");
}

TEST(FuncToString, PrintsAFuncCalledTwiceOnce) {
    Var x("x");
    Func a("a"), b("b"), c("c"), d("d");
    a(x) = x;
    b(x) = a(x) + 1;
    c(x) = a(x) * 2;
    d(x) = b(x) + c(x);
    EXPECT_EQ(d.to_string(), "a(x) = x\n"
                             "b(x) = (a(x) + 1)\n"
                             "c(x) = (a(x) * 2)\n"
                             "d(x) = (b(x) + c(x))\n");
}

TEST(FuncToString, StreamingAFuncPrintsTheSame) {
    Var x("x");
    Func f("f");
    f(x) = x * x;
    std::ostringstream s;
    s << f;
    EXPECT_EQ(s.str(), f.to_string());
    EXPECT_EQ(s.str(), "f(x) = (x * x)\n");
}

TEST(FuncToString, UndefinedFuncSaysSo) {
    Func f("f");
    EXPECT_EQ(f.to_string(), "f: (undefined)\n");
}

} // namespace
} // namespace kiln
