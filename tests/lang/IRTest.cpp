// The IR itself: node construction and the invariants make() checks, the semantics helpers, the
// printer, structural equality and hashing, the mutator and substitute.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "lang/BoundaryConditions.h"
#include "lang/Buffer.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IR.h"
#include "lang/IREquality.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "lang/Reduce.h"
#include "lang/ReferenceEvaluator.h"
#include "lang/Var.h"

namespace kiln {
namespace {

Expr var(const std::string &name, Type t = Int(32)) {
    return Variable::make(t, name);
}

/// The message of the InternalError that f throws, or a failure.
template <typename F>
std::string internal_error_of(F &&f) {
    try {
        f();
    } catch (const InternalError &e) {
        return e.what();
    } catch (const std::exception &e) {
        ADD_FAILURE() << "threw the wrong kind of error: " << e.what();
        return "";
    }
    ADD_FAILURE() << "threw nothing";
    return "";
}

bool contains(const std::string &s, const std::string &part) {
    return s.find(part) != std::string::npos;
}

// Constants and node types.

TEST(IRNodes, CppNumbersBecomeConstantsOfMatchingType) {
    EXPECT_EQ(Expr(3).type(), Int(32));
    EXPECT_EQ(Expr(int64_t(3)).type(), Int(64));
    EXPECT_EQ(Expr(1.5f).type(), Float(32));
    EXPECT_EQ(Expr(1.5).type(), Float(64));
    EXPECT_EQ(Expr(3).as<IntImm>()->value, 3);
}

TEST(IRNodes, IntImmWrapsValueIntoItsType) {
    EXPECT_EQ(IntImm::make(Int(8), 200).as<IntImm>()->value, -56);
    EXPECT_EQ(IntImm::make(Int(16), -32769).as<IntImm>()->value, 32767);
    EXPECT_EQ(IntImm::make(Int(64), INT64_MIN).as<IntImm>()->value, INT64_MIN);
}

TEST(IRNodes, UIntImmWrapsValueIntoItsType) {
    EXPECT_EQ(UIntImm::make(UInt(8), 256 + 7).as<UIntImm>()->value, 7u);
    EXPECT_EQ(UIntImm::make(Bool(), 2).as<UIntImm>()->value, 0u);
    EXPECT_EQ(UIntImm::make(UInt(64), UINT64_MAX).as<UIntImm>()->value, UINT64_MAX);
}

TEST(IRNodes, FloatImmRoundsFloat32Constants) {
    EXPECT_EQ(FloatImm::make(Float(32), 0.1).as<FloatImm>()->value, double(0.1f));
    EXPECT_EQ(FloatImm::make(Float(64), 0.1).as<FloatImm>()->value, 0.1);
}

TEST(IRNodes, ArithmeticTakesOperandTypeAndComparisonsGiveBoolOfSameLanes) {
    Expr a = var("a", Int(16)), b = var("b", Int(16));
    EXPECT_EQ(Add::make(a, b).type(), Int(16));
    EXPECT_EQ(Min::make(a, b).type(), Int(16));
    EXPECT_EQ(LT::make(a, b).type(), Bool());
    Expr v = Ramp::make(var("x"), 1, 4);
    EXPECT_EQ(v.type(), Int(32, 4));
    EXPECT_EQ(EQ::make(v, v).type(), Bool(4));
}

TEST(IRNodes, RampAndBroadcastMakeVectorsOfTheScalarType) {
    Expr r = Ramp::make(var("x", Int(16)), IntImm::make(Int(16), 2), 8);
    EXPECT_EQ(r.type(), Int(16, 8));
    EXPECT_EQ(r.as<Ramp>()->lanes, 8);
    Expr b = Broadcast::make(Expr(1.5f), 4);
    EXPECT_EQ(b.type(), Float(32, 4));
}

TEST(IRNodes, LetTakesTheTypeOfItsBody) {
    Expr l = Let::make("t", Expr(1), cast<float>(var("t")));
    EXPECT_EQ(l.type(), Float(32));
}

TEST(IRNodes, VariableRemembersItsParamAndRDom) {
    Param<int> p("p");
    RDom r(0, 4, "r");
    Expr pe = p, re = r.x;
    const Variable *pv = pe.as<Variable>();
    ASSERT_NE(pv, nullptr);
    EXPECT_EQ(pv->param, p.get_contents());
    const Variable *rv = re.as<Variable>();
    ASSERT_NE(rv, nullptr);
    EXPECT_EQ(rv->rdom, r.get_contents());
    EXPECT_EQ(rv->name, "r.x");
}

TEST(IRNodes, AsReturnsNullForAnotherNodeKind) {
    Expr e = var("x") + 1;
    EXPECT_NE(e.as<Add>(), nullptr);
    EXPECT_EQ(e.as<Sub>(), nullptr);
    EXPECT_EQ(Expr().as<Add>(), nullptr);
}

TEST(IRNodes, BlockSkipsUndefinedStatementsAndKeepsOrder) {
    Stmt a = Evaluate::make(1), b = Evaluate::make(2), c = Evaluate::make(3);
    EXPECT_TRUE(Block::make(a, Stmt()).same_as(a));
    EXPECT_TRUE(Block::make(Stmt(), b).same_as(b));
    Stmt s = Block::make({a, Stmt(), b, c});
    const Block *outer = s.as<Block>();
    ASSERT_NE(outer, nullptr);
    EXPECT_TRUE(outer->first.same_as(a));
    const Block *inner = outer->rest.as<Block>();
    ASSERT_NE(inner, nullptr);
    EXPECT_TRUE(inner->first.same_as(b));
    EXPECT_TRUE(inner->rest.same_as(c));
    EXPECT_FALSE(Block::make(std::vector<Stmt>{}).defined());
}

TEST(IRNodes, NodeKindsHaveTheirNames) {
    EXPECT_STREQ(node_type_name(IRNodeType::Add), "Add");
    EXPECT_STREQ(node_type_name(IRNodeType::ProducerConsumer), "ProducerConsumer");
    EXPECT_STREQ(for_type_name(ForType::Vectorized), "vectorized");
    EXPECT_STREQ(memory_type_name(MemoryType::GPUShared), "gpu_shared");
}

// Invariants checked by make(): violating one is a bug in kiln, so it raises InternalError.

TEST(IRInvariants, InternalErrorNamesFileLineConditionAndOperandTypes) {
    std::string m = internal_error_of([] { Add::make(var("x"), Expr(1.5f)); });
    EXPECT_EQ(m.rfind("internal error at ", 0), 0u) << m;
    EXPECT_TRUE(contains(m, "IR.cpp:")) << m;
    EXPECT_TRUE(contains(m, "Add: operand types differ: int32 vs float32")) << m;
}

TEST(IRInvariants, BinaryNodeRejectsAnUndefinedOperand) {
    std::string m = internal_error_of([] { Sub::make(var("x"), Expr()); });
    EXPECT_TRUE(contains(m, "Sub: operand 'b' is undefined")) << m;
}

TEST(IRInvariants, ArithmeticRejectsBoolOperands) {
    std::string m = internal_error_of([] { Mul::make(const_true(), const_false()); });
    EXPECT_TRUE(contains(m, "Mul: bool operands")) << m;
}

TEST(IRInvariants, LogicalNodesRejectNonBoolOperands) {
    EXPECT_TRUE(contains(internal_error_of([] { And::make(var("x"), var("y")); }),
                         "And: operands must be bool, got int32"));
    EXPECT_TRUE(contains(internal_error_of([] { Not::make(var("x")); }),
                         "Not: operand must be bool, got int32"));
}

TEST(IRInvariants, SelectRejectsNonBoolConditionAndMismatchedLanes) {
    EXPECT_TRUE(contains(internal_error_of([] { Select::make(var("c"), Expr(1), Expr(2)); }),
                         "Select: condition must be bool, got int32"));
    Expr cond = Broadcast::make(const_true(), 4);
    Expr value = Broadcast::make(Expr(1), 8);
    EXPECT_TRUE(contains(internal_error_of([&] { Select::make(cond, value, value); }),
                         "Select: condition lanes 4 vs value lanes 8"));
}

TEST(IRInvariants, CastRejectsAChangeOfLanes) {
    Expr v = Broadcast::make(Expr(1), 4);
    EXPECT_TRUE(contains(internal_error_of([&] { Cast::make(Float(32, 8), v); }),
                         "Cast: lanes differ: int32x4 to float32x8"));
}

TEST(IRInvariants, ConstantsRejectTypesOfAnotherKind) {
    EXPECT_TRUE(
        contains(internal_error_of([] { IntImm::make(UInt(8), 1); }), "IntImm of type uint8"));
    EXPECT_TRUE(
        contains(internal_error_of([] { UIntImm::make(Int(32), 1); }), "UIntImm of type int32"));
    EXPECT_TRUE(contains(internal_error_of([] { FloatImm::make(Float(16), 1.0); }),
                         "float16 is not supported"));
    EXPECT_TRUE(
        contains(internal_error_of([] { IntImm::make(Int(32, 4), 1); }), "IntImm of type int32x4"));
}

TEST(IRInvariants, VariableNeedsAName) {
    EXPECT_TRUE(contains(internal_error_of([] { Variable::make(Int(32), ""); }),
                         "Variable without a name"));
}

TEST(IRInvariants, RampAndBroadcastNeedScalarsAndSeveralLanes) {
    Expr v = Broadcast::make(Expr(1), 4);
    EXPECT_TRUE(contains(internal_error_of([] { Ramp::make(Expr(0), Expr(1), 1); }),
                         "Ramp: lanes must be > 1, got 1"));
    EXPECT_TRUE(
        contains(internal_error_of([&] { Ramp::make(v, v, 4); }), "Ramp: base must be scalar"));
    EXPECT_TRUE(contains(internal_error_of([&] { Broadcast::make(v, 2); }),
                         "Broadcast: value must be scalar"));
}

TEST(IRInvariants, LoadAndStoreNeedInt32IndicesOfMatchingLanes) {
    EXPECT_TRUE(contains(internal_error_of([] { Load::make(Float(32), "buf", Expr(1.0f)); }),
                         "Load: index must be int32"));
    Expr index = Ramp::make(Expr(0), Expr(1), 4);
    EXPECT_TRUE(contains(internal_error_of([&] { Load::make(Float(32), "buf", index); }),
                         "Load: lanes of type float32 and index int32x4 differ"));
    EXPECT_TRUE(contains(internal_error_of([&] { Store::make("buf", Expr(1.0f), index); }),
                         "Store: lanes of value float32 and index int32x4 differ"));
}

TEST(IRInvariants, CallsToFuncsAndImagesNeedTheirTarget) {
    EXPECT_TRUE(contains(internal_error_of([] { Call::make(Int(32), "f", {}, Call::Func); }),
                         "Call to Func f without func"));
    EXPECT_TRUE(contains(internal_error_of([] { Call::make(Int(32), "in", {}, Call::Image); }),
                         "Call to image in without param or buffer"));
    EXPECT_TRUE(contains(internal_error_of([] { Call::make(Int(32), "g", {Expr()}, Call::Math); }),
                         "Call to g: undefined arg"));
}

TEST(IRInvariants, StatementsCheckTheirConditionsAndBounds) {
    Stmt body = Evaluate::make(0);
    EXPECT_TRUE(contains(
        internal_error_of([&] { For::make("i", Expr(int64_t(0)), 4, ForType::Serial, body); }),
        "For: min and extent must be int32, got int64 and int32"));
    EXPECT_TRUE(contains(internal_error_of([&] { IfThenElse::make(var("c"), body); }),
                         "IfThenElse: condition must be scalar bool, got int32"));
    EXPECT_TRUE(contains(internal_error_of([&] { AssertStmt::make(const_true(4), "m"); }),
                         "AssertStmt: condition must be scalar bool"));
    EXPECT_TRUE(contains(internal_error_of([&] { Provide::make("f", {}, {Expr(0)}); }),
                         "Provide to f without values"));
    EXPECT_TRUE(contains(
        internal_error_of([&] { Realize::make("f", {}, MemoryType::Auto, {}, Expr(), body); }),
        "Realize of f without types"));
    EXPECT_TRUE(contains(internal_error_of([&] {
                             Allocate::make("a", Float(32), MemoryType::Auto, {Expr(1.0f)}, Expr(),
                                            body);
                         }),
                         "Allocate: extents must be int32"));
    EXPECT_TRUE(contains(internal_error_of([] { LetStmt::make("t", Expr(1), Stmt()); }),
                         "LetStmt: statement 'body' is undefined"));
}

// Semantics helpers: Euclidean division and modulo on plain integers.

TEST(Semantics, DivEuclidRoundsTowardNegativeInfinityForPositiveDivisors) {
    EXPECT_EQ(div_euclid(7, 2), 3);
    EXPECT_EQ(div_euclid(-7, 2), -4);
    EXPECT_EQ(div_euclid(-8, 2), -4);
    EXPECT_EQ(div_euclid(-1, 5), -1);
}

TEST(Semantics, ModEuclidIsNonNegativeForAnySignOfOperands) {
    EXPECT_EQ(mod_euclid(7, 3), 1);
    EXPECT_EQ(mod_euclid(-7, 3), 2);
    EXPECT_EQ(mod_euclid(7, -3), 1);
    EXPECT_EQ(mod_euclid(-7, -3), 2);
    EXPECT_EQ(mod_euclid(-6, 3), 0);
}

TEST(Semantics, DivAndModEuclidReconstructTheDividendForNegativeDivisors) {
    for (int64_t a : {-9, -7, -1, 0, 1, 7, 9}) {
        for (int64_t b : {-4, -3, -1, 1, 3, 4}) {
            int64_t q = div_euclid(a, b), r = mod_euclid(a, b);
            EXPECT_EQ(q * b + r, a) << a << " / " << b;
            EXPECT_GE(r, 0) << a << " % " << b;
            EXPECT_LT(r, std::abs(b)) << a << " % " << b;
        }
    }
    EXPECT_EQ(div_euclid(-7, -2), 4);
    EXPECT_EQ(div_euclid(7, -2), -3);
}

TEST(Semantics, DivisionByZeroAndOverflowDoNotTrap) {
    EXPECT_EQ(div_euclid(5, 0), 0);
    EXPECT_EQ(mod_euclid(5, 0), 0);
    EXPECT_EQ(div_euclid(INT64_MIN, -1), INT64_MIN);
    EXPECT_EQ(mod_euclid(INT64_MIN, -1), 0);
}

// Constant helpers.

TEST(Constants, MakeConstBroadcastsForVectorTypesAndWrapsIntegers) {
    Expr v = make_const(Int(32, 4), int64_t(7));
    ASSERT_NE(v.as<Broadcast>(), nullptr);
    EXPECT_EQ(as_const_int(v), 7);
    EXPECT_EQ(as_const_int(make_const(UInt(8), int64_t(-1))), 255);
    EXPECT_EQ(as_const_float(make_const(Float(32), 0.5)), 0.5);
    EXPECT_TRUE(is_const_true(make_const(Bool(), int64_t(5))));
}

TEST(Constants, PositiveZeroExcludesAFloatsNegativeZero) {
    EXPECT_TRUE(is_positive_zero(Expr(0)));
    EXPECT_TRUE(is_positive_zero(make_const(Float(32), 0.0)));
    EXPECT_TRUE(is_positive_zero(make_const(Float(32, 8), 0.0)));
    EXPECT_FALSE(is_positive_zero(make_const(Float(32), -0.0)));
    EXPECT_FALSE(is_positive_zero(make_const(Float(32, 8), -0.0)));
    EXPECT_FALSE(is_positive_zero(make_const(Float(32), 1.0)));
    EXPECT_FALSE(is_positive_zero(Variable::make(Float(32), "x")));
}

TEST(Constants, TypeMinAndMaxCoverEachKindOfType) {
    EXPECT_EQ(as_const_int(type_min(Int(8))), -128);
    EXPECT_EQ(as_const_int(type_max(Int(8))), 127);
    EXPECT_EQ(as_const_int(type_min(UInt(16))), 0);
    EXPECT_EQ(as_const_int(type_max(UInt(16))), 65535);
    EXPECT_EQ(type_max(UInt(64)).as<UIntImm>()->value, UINT64_MAX);
    EXPECT_EQ(as_const_float(type_min(Float(32))), -std::numeric_limits<double>::infinity());
    EXPECT_TRUE(is_const_true(type_max(Bool())));
}

TEST(Constants, PredicatesRecognizeConstantsAndNothingElse) {
    EXPECT_TRUE(is_const(Expr(3)));
    EXPECT_TRUE(is_const(Expr(2.0f), 2));
    EXPECT_TRUE(is_const_zero(make_zero(Float(64))));
    EXPECT_TRUE(is_const_one(make_one(UInt(8, 4))));
    EXPECT_TRUE(is_positive_const(Expr(1)));
    EXPECT_FALSE(is_positive_const(Expr(0)));
    EXPECT_FALSE(is_const(var("x")));
    EXPECT_FALSE(is_const_true(Expr(1))); // an int, not a bool
    EXPECT_FALSE(as_const_int(Expr()).has_value());
}

// The printer.

TEST(IRPrinter, PrintsArithmeticFullyParenthesized) {
    Expr x = var("x"), y = var("y");
    EXPECT_EQ(to_string((x + 1) * y - x / 2 % 3), "(((x + 1) * y) - ((x / 2) % 3))");
}

TEST(IRPrinter, PrintsConstantsWithTheirTypes) {
    EXPECT_EQ(to_string(Expr(-3)), "-3");
    EXPECT_EQ(to_string(Expr(int64_t(3))), "(int64)3");
    EXPECT_EQ(to_string(make_const(UInt(8), int64_t(200))), "(uint8)200");
    EXPECT_EQ(to_string(const_true()), "true");
    EXPECT_EQ(to_string(const_false()), "false");
    EXPECT_EQ(to_string(Expr(0.5f)), "0.5f");
    EXPECT_EQ(to_string(Expr(2.0f)), "2.0f");
    EXPECT_EQ(to_string(Expr(0.25)), "0.25");
    EXPECT_EQ(to_string(Expr(1e20)), "1e+20");
}

TEST(IRPrinter, PrintsFloatConstantsAsTheShortestTextOfTheirPrecision) {
    EXPECT_EQ(to_string(Expr(0.1f)), "0.1f");
    EXPECT_EQ(to_string(Expr(1.0f / 3.0f)), "0.33333334f");
    EXPECT_EQ(to_string(Expr(0.1)), "0.1");
    EXPECT_EQ(to_string(type_min(Float(32))), "-inff");
}

TEST(IRPrinter, PrintsCastsMinMaxSelectAndLogic) {
    Expr x = var("x"), y = var("y");
    EXPECT_EQ(to_string(cast<float>(x)), "float32(x)");
    EXPECT_EQ(to_string(min(x, y)), "min(x, y)");
    EXPECT_EQ(to_string(max(x, 0)), "max(x, 0)");
    EXPECT_EQ(to_string(select(x < y, x, y)), "select((x < y), x, y)");
    EXPECT_EQ(to_string(!(x == y) || (x != 1 && y >= 2)), "(!(x == y) || ((x != 1) && (y >= 2)))");
}

TEST(IRPrinter, PrintsVectorsLetsLoadsAndCalls) {
    Expr x = var("x");
    EXPECT_EQ(to_string(Ramp::make(x, 2, 4)), "ramp(x, 2, 4)");
    EXPECT_EQ(to_string(Broadcast::make(x, 8)), "x8(x)");
    EXPECT_EQ(to_string(Let::make("t", x + 1, var("t") * 2)), "(let t = (x + 1) in (t * 2))");
    EXPECT_EQ(to_string(Load::make(Float(32), "buf", x)), "buf[x]");
    Expr lanes = Ramp::make(x, 1, 4);
    EXPECT_EQ(to_string(Load::make(Float(32, 4), "buf", lanes, const_true(4))),
              "buf[ramp(x, 1, 4)] if x4(true)");
    EXPECT_EQ(to_string(sqrt(cast<float>(x))), "sqrt(float32(x))");
    EXPECT_EQ(to_string(Expr()), "(undefined)");
}

TEST(IRPrinter, PrintsCallsToValuesOfATupleFuncWithTheirIndex) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = Tuple{x, x + 1};
    g(x) = x;
    EXPECT_EQ(to_string(f(x)[0]), "f(x)[0]");
    EXPECT_EQ(to_string(f(x)[1]), "f(x)[1]");
    EXPECT_EQ(to_string(g(x)), "g(x)");
}

TEST(IRPrinter, PrintsStatementsIndentedByNesting) {
    Expr x = var("x"), y = var("y");
    Stmt store = Store::make("out", cast<float>(x), x);
    Stmt inner = For::make("x", 0, 16, ForType::Vectorized, store);
    Stmt guarded = IfThenElse::make(y < 4, inner, Evaluate::make(y));
    Stmt loop = For::make("y", 0, var("n"), ForType::Parallel, guarded);
    Stmt alloc = Allocate::make("out", Float(32), MemoryType::Heap, {Expr(16), var("n")}, Expr(),
                                Block::make(loop, Free::make("out")));
    Stmt produce = ProducerConsumer::make("out", true, alloc);
    Stmt all = LetStmt::make("n", 8, Block::make(AssertStmt::make(var("n") > 0, "n > 0"), produce));
    EXPECT_EQ(to_string(all), "let n = 8\n"
                              "assert((n > 0), \"n > 0\")\n"
                              "produce out {\n"
                              "  allocate out[float32 * 16 * n] in heap\n"
                              "  parallel (y, 0, n) {\n"
                              "    if ((y < 4)) {\n"
                              "      vectorized (x, 0, 16) {\n"
                              "        out[x] = float32(x)\n"
                              "      }\n"
                              "    } else {\n"
                              "      y\n"
                              "    }\n"
                              "  }\n"
                              "  free out\n"
                              "}\n");
}

TEST(IRPrinter, PrintsRealizeAndProvideOfMultiValuedFuncs) {
    Expr x = var("x");
    Stmt provide = Provide::make("f", {x, cast<float>(x)}, {x});
    Stmt realize = Realize::make("f", {Int(32), Float(32)}, MemoryType::Stack, {Range(0, 10)},
                                 Expr(), For::make("x", 0, 10, ForType::Serial, provide));
    EXPECT_EQ(to_string(realize), "realize f([0, 10]) in stack {\n"
                                  "  for (x, 0, 10) {\n"
                                  "    f(x) = {x, float32(x)}\n"
                                  "  }\n"
                                  "}\n");
}

// Structural equality and hashing.

TEST(IREquality, TreesBuiltSeparatelyAreEqualAndHashAlike) {
    Expr a = select(var("x") < 3, var("x") * 2, min(var("y"), 7));
    Expr b = select(var("x") < 3, var("x") * 2, min(var("y"), 7));
    EXPECT_FALSE(a.same_as(b));
    EXPECT_TRUE(equal(a, b));
    EXPECT_EQ(compare(a, b), 0);
    EXPECT_EQ(structural_hash(a), structural_hash(b));
}

TEST(IREquality, ConstantsOfDifferentTypesDiffer) {
    EXPECT_FALSE(equal(Expr(1), Expr(int64_t(1))));
    EXPECT_FALSE(equal(Expr(1), make_const(UInt(32), int64_t(1))));
    EXPECT_FALSE(equal(Expr(1.0f), Expr(1.0)));
    EXPECT_FALSE(equal(var("x"), var("x", Int(16))));
}

TEST(IREquality, NamesConstantsAndShapesDistinguishTrees) {
    EXPECT_FALSE(equal(var("x"), var("y")));
    EXPECT_FALSE(equal(var("x") + 1, var("x") + 2));
    EXPECT_FALSE(equal(var("x") + 1, var("x") - 1));
    EXPECT_FALSE(equal(var("x") + 1, Expr(1) + var("x")));
    EXPECT_FALSE(equal(Broadcast::make(Expr(1), 4), Broadcast::make(Expr(1), 8)));
    EXPECT_FALSE(equal(var("x"), Expr()));
    EXPECT_TRUE(equal(Expr(), Expr()));
}

TEST(IREquality, NaNEqualsItselfAndNegativeZeroDiffersFromZero) {
    Expr nan = Expr(std::numeric_limits<double>::quiet_NaN());
    EXPECT_TRUE(equal(nan, Expr(std::numeric_limits<double>::quiet_NaN())));
    EXPECT_FALSE(equal(Expr(0.0), Expr(-0.0)));
    EXPECT_NE(structural_hash(Expr(0.0)), structural_hash(Expr(-0.0)));
}

TEST(IREquality, CallsCompareByNameValueIndexAndArguments) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, x};
    EXPECT_TRUE(equal(f(x)[0], f(x)[0]));
    EXPECT_FALSE(equal(f(x)[0], f(x)[1]));
    EXPECT_FALSE(equal(f(x)[0], f(x + 1)[0]));
}

TEST(IREquality, CompareIsAConsistentTotalOrder) {
    std::vector<Expr> es = {Expr(1),      Expr(2),    var("a"),         var("b"),
                            var("a") + 1, Expr(1.5f), Expr(int64_t(1)), min(var("a"), 1)};
    for (const Expr &a : es) {
        for (const Expr &b : es) {
            int ab = compare(a, b), ba = compare(b, a);
            EXPECT_EQ(ab<0, ba> 0) << a << " vs " << b;
            EXPECT_EQ(ab == 0, ba == 0) << a << " vs " << b;
            EXPECT_EQ(ab == 0, equal(a, b)) << a << " vs " << b;
        }
    }
}

TEST(IREquality, ExprLessKeysAMapByStructure) {
    std::map<Expr, int, ExprLess> m;
    m[var("x") + 1] = 1;
    m[var("x") + 1] = 2;
    m[var("x") + 2] = 3;
    EXPECT_EQ(m.size(), 2u);
    EXPECT_EQ(m[var("x") + 1], 2);
}

TEST(IREquality, StatementsCompareAndHashStructurally) {
    auto make = [](int extent) {
        return For::make("i", 0, extent, ForType::Serial,
                         Store::make("buf", Expr(1.0f), Variable::make(Int(32), "i")));
    };
    EXPECT_TRUE(equal(make(4), make(4)));
    EXPECT_EQ(structural_hash(make(4)), structural_hash(make(4)));
    EXPECT_FALSE(equal(make(4), make(5)));
    Stmt a = make(4);
    Stmt parallel = For::make("i", 0, 4, ForType::Parallel, a.as<For>()->body);
    EXPECT_FALSE(equal(a, parallel));
}

// The mutator.

/// Replaces the variable `from` with `to`; everything else keeps the default behaviour.
class Rename : public IRMutator {
public:
    Rename(std::string from, std::string to) : from(std::move(from)), to(std::move(to)) {}

protected:
    using IRMutator::visit;
    Expr visit(const Variable *op) override {
        return op->name == from ? Variable::make(op->type, to) : Expr(op);
    }

private:
    std::string from, to;
};

TEST(IRMutator, ReturnsTheSameExprWhenNothingChanges) {
    Expr e = select(var("x") < 3, cast<float>(var("x")) * 2.0f, sqrt(cast<float>(var("y"))));
    Expr l = Let::make("t", e, Ramp::make(var("t", Float(32)), Expr(1.0f), 4));
    EXPECT_TRUE(Rename("z", "w").mutate(e).same_as(e));
    EXPECT_TRUE(Rename("z", "w").mutate(l).same_as(l));
}

TEST(IRMutator, ReturnsTheSameStmtWhenNothingChanges) {
    Stmt s = For::make("i", 0, 8, ForType::Serial,
                       Block::make(Store::make("a", Expr(1), var("i")),
                                   IfThenElse::make(var("i") > 2, Evaluate::make(var("i")))));
    EXPECT_TRUE(Rename("z", "w").mutate(s).same_as(s));
}

TEST(IRMutator, RebuildsOnlyThePathToTheChange) {
    Expr left = var("a") * 3, right = var("b") + 1;
    Expr e = left - right;
    Expr out = Rename("b", "c").mutate(e);
    EXPECT_EQ(to_string(out), "((a * 3) - (c + 1))");
    const Sub *sub = out.as<Sub>();
    ASSERT_NE(sub, nullptr);
    EXPECT_TRUE(sub->a.same_as(left));
    EXPECT_FALSE(sub->b.same_as(right));
}

TEST(IRMutator, KeepsCallTargetsWhenRebuildingACall) {
    Var x("x");
    Func f("f");
    f(x) = x;
    Expr call = f(var("y"));
    Expr out = Rename("y", "z").mutate(call);
    const Call *c = out.as<Call>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->func, f.function());
    EXPECT_EQ(to_string(out), "f(z)");
}

TEST(IRMutator, SubstituteReplacesTheVariableAndLeavesOthersAlone) {
    Expr e = var("x") * var("y") + var("x");
    EXPECT_EQ(to_string(substitute("x", Expr(3), e)), "((3 * y) + 3)");
    EXPECT_EQ(to_string(substitute("y", var("z") + 1, e)), "((x * (z + 1)) + x)");
}

TEST(IRMutator, SubstituteReturnsTheSameNodeWhenTheVariableIsAbsent) {
    Expr e = var("x") + var("y");
    EXPECT_TRUE(substitute("z", Expr(1), e).same_as(e));
}

TEST(IRMutator, SubstituteRespectsLetShadowing) {
    // (let x = x + 1 in x * 2): the x in the value is free, the x in the body is bound.
    Expr e = Let::make("x", var("x") + 1, var("x") * 2);
    EXPECT_EQ(to_string(substitute("x", Expr(5), e)), "(let x = (5 + 1) in (x * 2))");
}

TEST(IRMutator, SubstituteIntoStatementsRespectsLetStmtShadowing) {
    Stmt body = Store::make("buf", var("x"), var("i"));
    Stmt s = Block::make(Store::make("buf", var("x"), 0), LetStmt::make("x", 7, body));
    EXPECT_EQ(to_string(substitute("x", Expr(1), s)), "buf[0] = 1\n"
                                                      "let x = 7\n"
                                                      "buf[i] = x\n");
}

// The visitor.

TEST(IRVisitor, VisitsEveryVariableOfExpressionsAndStatements) {
    struct Names : IRVisitor {
        std::vector<std::string> seen;
        using IRVisitor::visit;
        void visit(const Variable *op) override { seen.push_back(op->name); }
    } names;
    Stmt s = For::make("i", var("lo"), var("n"), ForType::Serial,
                       Store::make("buf", select(var("c") > 0, var("a"), var("b")), var("i")));
    names.include(s);
    EXPECT_EQ(names.seen, (std::vector<std::string>{"lo", "n", "c", "a", "b", "i"}));
}

} // namespace
} // namespace kiln
