// The coercion rules documented at the top of lang/IROperator.h, operator by operator: C++
// numbers take the Expr's type, float wins over integers, integers widen (signed wins), bool
// joins the other operand, and scalars broadcast to vectors.
#include <gtest/gtest.h>

#include <string>

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

Expr var(const std::string &name, Type t = Int(32)) {
    return Variable::make(t, name);
}

// Rule 1: a C++ number combined with an Expr takes the Expr's type.

TEST(TypeCoercion, IntegerLiteralTakesTheTypeOfANarrowExpr) {
    Expr u = var("u", UInt(8));
    Expr e = u + 1;
    EXPECT_EQ(e.type(), UInt(8));
    EXPECT_EQ(to_string(e), "(u + (uint8)1)");
    EXPECT_EQ((var("s", Int(16)) * 2).type(), Int(16));
    EXPECT_EQ((var("w", Int(64)) - 1).type(), Int(64));
}

TEST(TypeCoercion, IntegerLiteralOnTheLeftAlsoTakesTheExprType) {
    Expr e = 1 + var("u", UInt(8));
    EXPECT_EQ(e.type(), UInt(8));
    EXPECT_EQ(to_string(e), "((uint8)1 + u)");
    EXPECT_EQ((100 - var("s", Int(8))).type(), Int(8));
}

TEST(TypeCoercion, IntegerLiteralWithFloatExprBecomesThatFloat) {
    EXPECT_EQ(to_string(var("f", Float(32)) + 1), "(f + 1.0f)");
    EXPECT_EQ((var("d", Float(64)) * 3).type(), Float(64));
}

TEST(TypeCoercion, FloatLiteralWithIntExprMakesItFloat32) {
    Expr e = var("x") * 0.5;
    EXPECT_EQ(e.type(), Float(32));
    EXPECT_EQ(to_string(e), "(float32(x) * 0.5f)");
    EXPECT_EQ((var("u", UInt(8)) + 1.5f).type(), Float(32));
    EXPECT_EQ((2.0 / var("x")).type(), Float(32));
}

TEST(TypeCoercion, DoubleLiteralWithFloat32ExprStaysFloat32) {
    Expr e = var("f", Float(32)) * 0.1;
    EXPECT_EQ(e.type(), Float(32));
    EXPECT_EQ(to_string(e), "(f * 0.1f)");
}

TEST(TypeCoercion, FloatLiteralWithFloat64ExprStaysFloat64) {
    EXPECT_EQ((var("d", Float(64)) + 0.5f).type(), Float(64));
}

TEST(TypeCoercion, LiteralInAComparisonTakesTheExprType) {
    Expr c = var("u", UInt(8)) < 200;
    EXPECT_EQ(c.type(), Bool());
    EXPECT_EQ(to_string(c), "(u < (uint8)200)");
}

TEST(TypeCoercion, LiteralThatFitsOnlyAsNegativeIsRejectedForUnsignedExprs) {
    EXPECT_THROW((void)(var("u", UInt(8)) + -1), CompileError);
    EXPECT_THROW((void)(var("s", Int(8)) + 128), CompileError);
    EXPECT_NO_THROW((void)(var("s", Int(8)) + -128));
    EXPECT_NO_THROW((void)(var("u", UInt(16)) + 65535));
}

TEST(TypeCoercion, ExprMadeFromACppNumberIsNotALiteral) {
    // Expr(300) is an int32 Expr, so the two operands widen to int32 instead.
    Expr e = var("u", UInt(8)) + Expr(300);
    EXPECT_EQ(e.type(), Int(32));
}

// Rule 2: if one side is float and the other is not, the other is cast to that float type.

TEST(TypeCoercion, IntPlusFloatIsFloat) {
    Expr e = var("x") + var("f", Float(32));
    EXPECT_EQ(e.type(), Float(32));
    EXPECT_EQ(to_string(e), "(float32(x) + f)");
}

TEST(TypeCoercion, WideIntegerPlusFloat32IsFloat32) {
    EXPECT_EQ((var("w", Int(64)) + var("f", Float(32))).type(), Float(32));
    EXPECT_EQ((var("f", Float(32)) * var("u", UInt(8))).type(), Float(32));
}

// Rule 3: floats widen to the wider; integers widen, and become signed if either is signed.

TEST(TypeCoercion, Float32PlusFloat64IsFloat64) {
    Expr e = var("f", Float(32)) + var("d", Float(64));
    EXPECT_EQ(e.type(), Float(64));
    EXPECT_EQ(to_string(e), "(float64(f) + d)");
}

TEST(TypeCoercion, Uint8PlusInt32IsInt32) {
    Expr e = var("u", UInt(8)) + var("x");
    EXPECT_EQ(e.type(), Int(32));
    EXPECT_EQ(to_string(e), "(int32(u) + x)");
}

TEST(TypeCoercion, UnsignedIntegersWidenToTheWiderUnsigned) {
    EXPECT_EQ((var("a", UInt(8)) + var("b", UInt(16))).type(), UInt(16));
}

TEST(TypeCoercion, MixedSignednessWidensToTheWiderSigned) {
    EXPECT_EQ((var("a", Int(8)) + var("b", UInt(16))).type(), Int(16));
    EXPECT_EQ((var("a", UInt(32)) - var("b", Int(8))).type(), Int(32));
}

TEST(TypeCoercion, BoolInArithmeticTakesTheOtherOperandsType) {
    Expr b = var("x") > 0;
    EXPECT_EQ((b + var("u", UInt(8))).type(), UInt(8));
    EXPECT_EQ((var("f", Float(32)) * b).type(), Float(32));
    EXPECT_EQ((b + b).type(), Int(32));
    EXPECT_EQ((-b).type(), Int(32));
}

TEST(TypeCoercion, BoolWithLiteralIsInt32) {
    Expr b = var("x") > 0;
    EXPECT_EQ((b + 1).type(), Int(32));
    EXPECT_EQ((b == 1).type(), Bool());
}

TEST(TypeCoercion, ComparisonsCoerceTheirOperandsAndGiveBool) {
    Expr c = var("u", UInt(8)) < var("f", Float(32));
    EXPECT_EQ(c.type(), Bool());
    EXPECT_EQ(to_string(c), "(float32(u) < f)");
}

// Rule 4: a scalar combined with a vector is broadcast to the vector's lanes.

TEST(TypeCoercion, ScalarIsBroadcastToTheVectorsLanes) {
    Expr v = Ramp::make(var("x"), 1, 4);
    Expr e = v + var("y");
    EXPECT_EQ(e.type(), Int(32, 4));
    EXPECT_EQ(to_string(e), "(ramp(x, 1, 4) + x4(y))");
}

TEST(TypeCoercion, LiteralWithAVectorIsBroadcastInTheVectorsElementType) {
    Expr v = Ramp::make(var("u", UInt(8)), make_const(UInt(8), int64_t(1)), 8);
    Expr e = v * 2;
    EXPECT_EQ(e.type(), UInt(8, 8));
    EXPECT_EQ(to_string(e), "(ramp(u, (uint8)1, 8) * x8((uint8)2))");
}

TEST(TypeCoercion, ScalarOfAnotherTypeIsConvertedAndBroadcast) {
    Expr v = Broadcast::make(var("f", Float(32)), 4);
    Expr e = v + var("x");
    EXPECT_EQ(e.type(), Float(32, 4));
    EXPECT_EQ(to_string(e), "(x4(f) + x4(float32(x)))");
}

TEST(TypeCoercion, VectorComparisonGivesVectorOfBool) {
    Expr v = Ramp::make(var("x"), 1, 4);
    EXPECT_EQ((v < 3).type(), Bool(4));
}

TEST(TypeCoercion, ScalarConditionOfSelectIsBroadcastToVectorValues) {
    Expr v = Ramp::make(var("x"), 1, 4);
    Expr e = select(var("c", Bool()), v, 0);
    EXPECT_EQ(e.type(), Int(32, 4));
    EXPECT_EQ(e.as<Select>()->condition.type(), Bool(4));
}

TEST(TypeCoercion, VectorConditionOfSelectBroadcastsScalarValues) {
    Expr c = Ramp::make(var("x"), 1, 4) > 2;
    Expr e = select(c, 1, 2.5f);
    EXPECT_EQ(e.type(), Float(32, 4));
}

// select, min, max and clamp.

TEST(TypeCoercion, SelectCoercesItsTwoValues) {
    EXPECT_EQ(select(var("c", Bool()), var("u", UInt(8)), var("x")).type(), Int(32));
    EXPECT_EQ(select(var("c", Bool()), 1, 0.5f).type(), Float(32));
}

TEST(TypeCoercion, ChainedSelectPicksTheFirstTrueCondition) {
    Expr x = var("x");
    EXPECT_EQ(to_string(select(x<0, -1, x> 0, 1, 0)), "select((x < 0), -1, select((x > 0), 1, 0))");
}

TEST(TypeCoercion, MinAndMaxFollowTheLiteralRule) {
    Expr u = var("u", UInt(8));
    EXPECT_EQ(to_string(min(u, 3)), "min(u, (uint8)3)");
    EXPECT_EQ(to_string(max(3, u)), "max((uint8)3, u)");
    EXPECT_EQ(min(u, var("x")).type(), Int(32));
    EXPECT_EQ(max(var("x"), 0.5).type(), Float(32));
}

TEST(TypeCoercion, MinWithAFractionalConstantOnEitherSideKeepsTheFraction) {
    Expr f = var("f", Float(32));
    EXPECT_EQ(to_string(min(0.5f, f)), "min(0.5f, f)");
    EXPECT_EQ(to_string(max(f, 0.25)), "max(f, 0.25f)");
    EXPECT_EQ(to_string(max(0.25, f)), "max(0.25f, f)");
    EXPECT_EQ(to_string(min(0.5f, var("x"))), "min(0.5f, float32(x))");
}

TEST(TypeCoercion, ClampCastsItsBoundsToTheExprType) {
    Expr u = var("u", UInt(8));
    Expr e = clamp(u, 0, 9);
    EXPECT_EQ(e.type(), UInt(8));
    EXPECT_EQ(to_string(e), "max(min(u, (uint8)9), (uint8)0)");
    EXPECT_EQ(to_string(clamp(var("f", Float(32)), 0, 1)), "max(min(f, 1.0f), 0.0f)");
}

TEST(TypeCoercion, ClampWithSymbolicBoundsConvertsThem) {
    Expr e = clamp(var("x"), var("lo", Int(16)), var("hi", Int(64)));
    EXPECT_EQ(e.type(), Int(32));
    EXPECT_EQ(to_string(e), "max(min(x, int32(hi)), int32(lo))");
}

// cast.

TEST(TypeCoercion, CastOfAConstantFoldsAndWraps) {
    EXPECT_TRUE(equal(cast<uint8_t>(Expr(-1)), make_const(UInt(8), int64_t(255))));
    EXPECT_TRUE(equal(cast<float>(Expr(3)), Expr(3.0f)));
    EXPECT_TRUE(equal(cast<bool>(Expr(7)), const_true()));
    EXPECT_TRUE(equal(cast<double>(Expr(0.1f)), Expr(double(0.1f))));
}

TEST(TypeCoercion, CastOfLargeUnsignedConstantToFloatKeepsItsValue) {
    Expr big = type_max(UInt(64));
    EXPECT_EQ(as_const_float(cast<double>(big)), 18446744073709551615.0);
}

TEST(TypeCoercion, CastToTheSameTypeReturnsTheSameExpr) {
    Expr x = var("x");
    EXPECT_TRUE(cast<int32_t>(x).same_as(x));
}

TEST(TypeCoercion, CastOfFloatToIntIsAnExplicitCastNode) {
    Expr e = cast<int>(Expr(2.5f));
    ASSERT_NE(e.as<Cast>(), nullptr);
    EXPECT_EQ(to_string(e), "int32(2.5f)");
}

TEST(TypeCoercion, CastOfAVectorToAScalarTypeKeepsTheLanes) {
    Expr v = Ramp::make(var("x"), 1, 4);
    EXPECT_EQ(cast<float>(v).type(), Float(32, 4));
}

TEST(TypeCoercion, CastOfAScalarToAVectorTypeBroadcasts) {
    Expr e = cast(Float(32, 8), var("x"));
    EXPECT_EQ(to_string(e), "x8(float32(x))");
}

// Math functions.

TEST(TypeCoercion, MathFunctionsTakeIntegersAsFloat32) {
    EXPECT_EQ(sqrt(var("x")).type(), Float(32));
    EXPECT_EQ(to_string(exp(var("x"))), "exp(float32(x))");
    EXPECT_EQ(floor(var("d", Float(64))).type(), Float(64));
}

TEST(TypeCoercion, PowAndFmaWidenTheirArgumentsToACommonFloat) {
    EXPECT_EQ(pow(var("x"), var("d", Float(64))).type(), Float(64));
    EXPECT_EQ(fma(var("f", Float(32)), var("f", Float(32)), var("d", Float(64))).type(), Float(64));
    Expr f = fma(var("x"), var("d", Float(64)), var("f", Float(32)));
    const Call *c = f.as<Call>();
    ASSERT_NE(c, nullptr);
    for (const Expr &a : c->args)
        EXPECT_EQ(a.type(), Float(64)) << a;
}

TEST(TypeCoercion, AbsKeepsTheTypeAndIsTheIdentityOnUnsigned) {
    Expr u = var("u", UInt(8));
    EXPECT_TRUE(abs(u).same_as(u));
    EXPECT_EQ(abs(var("x")).type(), Int(32));
    EXPECT_EQ(to_string(abs(var("f", Float(32)))), "abs(f)");
}

TEST(TypeCoercion, LikelyKeepsItsArgumentsType) {
    Expr e = likely(var("x") < 4);
    EXPECT_EQ(e.type(), Bool());
    EXPECT_EQ(e.as<Call>()->call_type, Call::Intrinsic);
}

// Params coerce like any other Expr.

TEST(TypeCoercion, ParamTakesPartAsAnExprOfItsType) {
    Param<uint8_t> p("p");
    Param<float> alpha("alpha");
    EXPECT_EQ((p + 1).type(), UInt(8));
    EXPECT_EQ((var("x") * alpha).type(), Float(32));
    EXPECT_EQ(to_string(var("x") * alpha), "(float32(x) * alpha)");
}

} // namespace
} // namespace kiln
