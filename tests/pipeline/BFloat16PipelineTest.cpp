// bfloat16 through Pipeline: a bfloat16 scalar Param reaches the compiled code as its 16 bits,
// and bfloat16 inputs and outputs equal the reference evaluator's bit for bit.
#include <gtest/gtest.h>

#include <cstdint>

#include "kiln.h"
#include "lang/ReferenceEvaluator.h"

namespace kiln {
namespace {

TEST(BFloat16Pipeline, ScalarParamsAndBuffersMatchTheReference) {
    Buffer<bfloat16_t> in({64}, "bfp_in");
    for (int x = 0; x < 64; x++)
        in(x) = bfloat16_t(float(x - 32) / 7.0f);
    Param<bfloat16_t> p("bfp_p", bfloat16_t(1.5f + 0x1p-7f));
    Func f("bfp_f"), g("bfp_g");
    Var x("x");
    f(x) = in(x)*p + in(x); // bfloat16, each step rounded
    g(x) = cast<float>(in(x)) * cast<float>(Expr(p));
    f.vectorize(x, 16);
    Buffer<bfloat16_t> want_f = reference_realize(f, {64});
    Buffer<float> want_g = reference_realize(g, {64});
    Buffer<bfloat16_t> got_f({64}, "bfp_f");
    Buffer<float> got_g({64}, "bfp_g");
    Pipeline(f).realize({got_f});
    Pipeline(g).realize({got_g});
    for (int i = 0; i < 64; i++) {
        EXPECT_EQ(got_f(i).bits, want_f(i).bits) << "at " << i;
        EXPECT_EQ(got_g(i), want_g(i)) << "at " << i;
    }
    EXPECT_EQ(got_g(33), float(bfloat16_t(1.0f / 7.0f)) * (1.5f + 0x1p-7f));
}

} // namespace
} // namespace kiln
