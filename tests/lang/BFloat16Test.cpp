// bfloat16 in the language: the type and its C++ element, rounding to nearest even, constants,
// the operators computing in float32 (the IR holds no bfloat16 arithmetic), and the reference
// evaluator reading and writing bfloat16 buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "lang/Buffer.h"
#include "lang/Func.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/ReferenceEvaluator.h"

namespace kiln {
namespace {

TEST(BFloat16, TheTypeIsAFloatOf16Bits) {
    Type t = type_of<bfloat16_t>();
    EXPECT_EQ(t, BFloat(16));
    EXPECT_TRUE(t.is_float());
    EXPECT_TRUE(t.is_bfloat());
    EXPECT_FALSE(Float(32).is_bfloat());
    EXPECT_EQ(t.bytes(), 2);
    EXPECT_EQ(t.to_string(), "bfloat16");
    EXPECT_EQ(BFloat(16, 8).to_string(), "bfloat16x8");
    EXPECT_EQ(t.c_name(), "kiln::bfloat16_t");
}

// Ties go to the even neighbour; NaN stays NaN with its sign; overflow gives infinity; denormals
// are kept.
TEST(BFloat16, ConversionRoundsToNearestEven) {
    auto bits = [](float f) { return bfloat16_t(f).bits; };
    EXPECT_EQ(bits(1.0f), 0x3f80);
    EXPECT_EQ(bits(1.0f + 0x1p-8f), 0x3f80) << "half way between 1 and 1 + 2^-7: to even";
    EXPECT_EQ(bits(1.0f + 3 * 0x1p-8f), 0x3f82) << "half way, odd below: up";
    EXPECT_EQ(bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81) << "above half way: up";
    EXPECT_EQ(bits(-2.0f), 0xc000);
    EXPECT_EQ(bits(-0.0f), 0x8000);
    EXPECT_EQ(bits(std::numeric_limits<float>::max()), 0x7f80) << "rounds up to infinity";
    EXPECT_EQ(bits(0x1p-130f), 0x0008) << "a denormal is kept (2^-130 = 2^19 ulps of 2^-149)";
    uint16_t nan = bits(-std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(nan & 0x8000, 0x8000);
    EXPECT_TRUE(std::isnan(float(bfloat16_t::from_bits(nan))));
    // A signalling NaN whose payload sits in the low bits only stays a NaN (quieted).
    EXPECT_TRUE(std::isnan(float(bfloat16_t(std::numeric_limits<float>::signaling_NaN()))));
    EXPECT_EQ(float(bfloat16_t::from_bits(0x4049)), 3.140625f);
}

TEST(BFloat16, ConstantsHoldBFloat16Values) {
    Expr c = make_const(BFloat(16), 1.0 + 0x1p-8);
    ASSERT_TRUE(as_const_float(c));
    EXPECT_EQ(*as_const_float(c), 1.0);
    EXPECT_EQ(c.type(), BFloat(16));
    Expr from_int = cast(BFloat(16), Expr(257));
    EXPECT_EQ(*as_const_float(from_int), 256.0) << from_int;
    EXPECT_EQ(to_string(make_const(BFloat(16), 0.5)), "bfloat16(0.5f)");
}

// a + b of bfloat16 is bfloat16(float32(a) + float32(b)); comparisons are made in float32; math
// functions run in float32 and round back; bfloat16 with a float32 Expr is float32.
TEST(BFloat16, OperatorsComputeInFloat32) {
    Param<bfloat16_t> a("a"), b("b");
    Expr sum = Expr(a) + Expr(b);
    EXPECT_EQ(sum.type(), BFloat(16));
    const auto *c = sum.as<Cast>();
    ASSERT_TRUE(c) << sum;
    EXPECT_EQ(c->value.type(), Float(32));
    ASSERT_TRUE(c->value.as<Add>()) << sum;
    EXPECT_EQ(to_string(sum), "bfloat16((float32(a) + float32(b)))");
    EXPECT_EQ((Expr(a) * 2).type(), BFloat(16));
    EXPECT_EQ(min(Expr(a), Expr(b)).type(), BFloat(16));
    EXPECT_EQ(clamp(Expr(a), 0.f, 1.f).type(), BFloat(16));
    Expr lt = Expr(a) < Expr(b);
    ASSERT_TRUE(lt.as<LT>());
    EXPECT_EQ(lt.as<LT>()->a.type(), Float(32));
    Expr e = exp(Expr(a));
    EXPECT_EQ(e.type(), BFloat(16));
    ASSERT_TRUE(e.as<Cast>());
    EXPECT_EQ(e.as<Cast>()->value.type(), Float(32));
    EXPECT_EQ((Expr(a) + 1.5f).type(), BFloat(16)) << "a C++ literal takes the Expr's type";
    EXPECT_EQ((Expr(a) + Expr(1.5f)).type(), Float(32));
    EXPECT_EQ((Expr(a) + Expr(1.5)).type(), Float(64));
}

// The reference evaluator reads bfloat16 inputs, computes in float32 as the IR says and rounds
// what it stores.
TEST(BFloat16, TheReferenceEvaluatorRoundsWhatItStores) {
    Buffer<bfloat16_t> in({4}, "bf_in");
    in(0) = bfloat16_t(1.0f);
    in(1) = bfloat16_t(0.5f);
    in(2) = bfloat16_t(-3.0f);
    in(3) = bfloat16_t(1.0f + 0x1p-7f);
    Func f("bf_f"), g("bf_g");
    Var x("x");
    f(x) = in(x)*in(x) + in(x);              // in bfloat16: each step rounded
    g(x) = cast<float>(in(x)) * 3.0f + 1.0f; // in float32
    Buffer<bfloat16_t> fr = reference_realize(f, {4});
    Buffer<float> gr = reference_realize(g, {4});
    EXPECT_EQ(float(fr(0)), 2.0f);
    EXPECT_EQ(float(fr(1)), 0.75f);
    EXPECT_EQ(float(fr(2)), 6.0f);
    // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 rounds to 1 + 2^-6 in bfloat16; + (1 + 2^-7) = 2 + 3 * 2^-7,
    // half way between 2 + 2^-6 and 2 + 2^-5 (steps of 2^-6 there): to even, 2 + 2^-5.
    EXPECT_EQ(float(fr(3)), 2.0f + 0x1p-5f);
    EXPECT_EQ(gr(3), (1.0f + 0x1p-7f) * 3.0f + 1.0f);
}

} // namespace
} // namespace kiln
