// Accuracy of the float32 exp, log and tanh that the backend writes out in IR for vectors,
// against the correctly rounded result (libm in double precision, rounded to float).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "CodeGenTestUtil.h"
#include "codegen/CodeGenLLVM.h"
#include "codegen/LLVMModule.h"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr int lanes = 16;
const float inf = std::numeric_limits<float>::infinity();

/// fn applied to vectors of `width` lanes of buffer "in", stored to "out", n elements.
LoweredFunc vector_func(const std::string &name, Expr (*fn)(Expr), int n, int width) {
    Expr x = var("xo") * width;
    Expr v = fn(Load::make(Float(32, width), "in", Ramp::make(x, 1, width)));
    return make_func(name, {buffer_arg("in", Float(32), 1), buffer_arg("out", Float(32), 1, true)},
                     loop("xo", 0, n / width, Store::make("out", v, Ramp::make(x, 1, width))));
}

/// Applies fn to every element of inputs with vectors of `width` lanes, through the JIT.
std::vector<float> run_vector(const std::string &name, Expr (*fn)(Expr), std::vector<float> inputs,
                              int width = lanes) {
    while (inputs.size() % width)
        inputs.push_back(1.0f);
    int n = int(inputs.size());
    TestBuffer<float> in({n}), out({n});
    in.set(inputs);
    JITModule m(vector_func(name, fn, n, width));
    EXPECT_EQ(m.call(std::vector<void *>{&in.pointer, &out.pointer}.data()), kiln_success);
    return out.data;
}

/// Evenly spaced values in [lo, hi] plus every float32 bit pattern with a stride, inside it.
std::vector<float> sample(float lo, float hi, int count) {
    std::vector<float> values;
    for (int k = 0; k <= count; k++)
        values.push_back(lo + (hi - lo) * float(k) / float(count));
    for (uint32_t bits = 0; bits < 0xff800000u; bits += 4099) {
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        if (f >= lo && f <= hi) values.push_back(f);
        if (-f >= lo && -f <= hi) values.push_back(-f);
    }
    return values;
}

/// The largest ulp error of fn against reference over inputs, printing the worst input.
int64_t max_ulp_error(const std::string &name, Expr (*fn)(Expr), double (*reference)(double),
                      const std::vector<float> &inputs, int width = lanes) {
    std::vector<float> got = run_vector(name, fn, inputs, width);
    int64_t worst = 0;
    float worst_x = 0;
    for (size_t k = 0; k < inputs.size(); k++) {
        float want = float(reference(double(inputs[k])));
        int64_t e = ulp_distance(got[k], want);
        if (e > worst) {
            worst = e;
            worst_x = inputs[k];
        }
    }
    std::printf("[ info ] %s: max error %lld ulp over %zu inputs (at x = %.9g)\n", name.c_str(),
                static_cast<long long>(worst), inputs.size(), double(worst_x));
    return worst;
}

Expr exp_of(Expr e) {
    return exp(std::move(e));
}
Expr log_of(Expr e) {
    return log(std::move(e));
}
Expr tanh_of(Expr e) {
    return tanh(std::move(e));
}
double exp_ref(double x) {
    return std::exp(x);
}
double log_ref(double x) {
    return std::log(x);
}
double tanh_ref(double x) {
    return std::tanh(x);
}

} // namespace

TEST(VectorMath, ExpIsWithinOneUlpOverItsWholeRange) {
    EXPECT_LE(max_ulp_error("vexp", exp_of, exp_ref, sample(-103.0f, 88.7f, 100000)), 1);
}

// exp scales by 2^n with AVX-512's vscalefps on each 16 lanes where the target has AVX-512F,
// and builds 2^n in the exponent field elsewhere: both within 1 ulp, at 4, 8 and 32 lanes too
// (32: two vscalefps and their halves put back together).
TEST(VectorMath, ExpIsWithinOneUlpAtOtherVectorWidths) {
    for (int width : {4, 8, 32}) {
        EXPECT_LE(max_ulp_error("vexp" + std::to_string(width), exp_of, exp_ref,
                                sample(-103.0f, 88.7f, 20000), width),
                  1)
            << width << " lanes";
    }
    std::vector<float> got =
        run_vector("vexp_special32", exp_of, {89.0f, -104.0f, NAN, 0.0f, -87.5f, -100.0f}, 32);
    EXPECT_EQ(got[0], inf);
    EXPECT_EQ(got[1], 0.0f);
    EXPECT_TRUE(std::isnan(got[2]));
    EXPECT_EQ(got[3], 1.0f);
    EXPECT_EQ(got[4], float(std::exp(-87.5)));  // a normal result just above the smallest
    EXPECT_EQ(got[5], float(std::exp(-100.0))); // a denormal result
}

TEST(VectorMath, ExpUsesVscalefpsOnlyWithAVX512) {
    LoweredFunc f = vector_func("vexp_asm", exp_of, 64, 16);
    EXPECT_EQ(compile_to_llvm_module(f, Target::parse("x86-64-v3")).assembly().find("vscalefps"),
              std::string::npos);
    if (!Target::host().has_feature("avx512f"))
        GTEST_SKIP() << "this CPU has no AVX-512F; the vscalefps path is not run here";
    EXPECT_NE(compile_to_llvm_module(f, Target::host()).assembly().find("vscalefps"),
              std::string::npos);
}

TEST(VectorMath, LogIsWithinOneUlpOverAllPositiveFloats) {
    EXPECT_LE(max_ulp_error("vlog", log_of, log_ref, sample(0.0f, 3.4e38f, 100000)), 1);
}

TEST(VectorMath, TanhIsWithinTwoUlpOverItsWholeRange) {
    EXPECT_LE(max_ulp_error("vtanh", tanh_of, tanh_ref, sample(-20.0f, 20.0f, 100000)), 2);
}

TEST(VectorMath, ExpOverflowsToInfinityAndUnderflowsToZero) {
    std::vector<float> got = run_vector("vexp_special", exp_of,
                                        {89.0f, 1000.0f, inf, -104.0f, -1000.0f, -inf, NAN, 0.0f});
    EXPECT_EQ(got[0], inf);
    EXPECT_EQ(got[1], inf);
    EXPECT_EQ(got[2], inf);
    EXPECT_EQ(got[3], 0.0f);
    EXPECT_EQ(got[4], 0.0f);
    EXPECT_EQ(got[5], 0.0f);
    EXPECT_TRUE(std::isnan(got[6]));
    EXPECT_EQ(got[7], 1.0f);
}

TEST(VectorMath, LogOfZeroIsMinusInfinityAndOfNegativesNaN) {
    std::vector<float> got =
        run_vector("vlog_special", log_of, {0.0f, -0.0f, -1.0f, -inf, inf, NAN, 1.0f, 1e-45f});
    EXPECT_EQ(got[0], -inf);
    EXPECT_EQ(got[1], -inf);
    EXPECT_TRUE(std::isnan(got[2]));
    EXPECT_TRUE(std::isnan(got[3]));
    EXPECT_EQ(got[4], inf);
    EXPECT_TRUE(std::isnan(got[5]));
    EXPECT_EQ(got[6], 0.0f);
    EXPECT_LE(ulp_distance(got[7], float(std::log(double(1e-45f)))), 1) << "smallest denormal";
}

TEST(VectorMath, TanhSaturatesToPlusMinusOne) {
    std::vector<float> got =
        run_vector("vtanh_special", tanh_of, {inf, -inf, 50.0f, -50.0f, NAN, 0.0f, -0.0f});
    EXPECT_EQ(got[0], 1.0f);
    EXPECT_EQ(got[1], -1.0f);
    EXPECT_EQ(got[2], 1.0f);
    EXPECT_EQ(got[3], -1.0f);
    EXPECT_TRUE(std::isnan(got[4]));
    EXPECT_EQ(got[5], 0.0f);
    EXPECT_TRUE(std::signbit(got[6])) << "tanh(-0) = -0";
}

TEST(VectorMath, ScalarAndFloat64CallsUseLibm) {
    // Inputs come from memory: LLVM folds calls on constants with its own arithmetic.
    TestBuffer<float> fin({1}), fout({3});
    TestBuffer<double> din({1}), dout({3 * 4});
    fin.set({0.7f});
    din.set({0.7});
    Expr fx = Load::make(Float(32), "fin", 0);
    Expr dv = Load::make(Float(64, 4), "din", Broadcast::make(0, 4));
    Stmt body = Block::make({Store::make("fout", exp(fx), 0), Store::make("fout", log(fx), 1),
                             Store::make("fout", tanh(fx), 2),
                             Store::make("dout", exp(dv), Ramp::make(0, 1, 4)),
                             Store::make("dout", log(dv), Ramp::make(4, 1, 4)),
                             Store::make("dout", tanh(dv), Ramp::make(8, 1, 4))});
    JITModule m(
        make_func("libm",
                  {buffer_arg("fin", Float(32), 1), buffer_arg("din", Float(64), 1),
                   buffer_arg("fout", Float(32), 1, true), buffer_arg("dout", Float(64), 1, true)},
                  body));
    ASSERT_EQ(
        m.call(
            std::vector<void *>{&fin.pointer, &din.pointer, &fout.pointer, &dout.pointer}.data()),
        kiln_success);
    // Through volatile, so the compiler of this test calls libm too instead of folding.
    volatile float f = 0.7f;
    volatile double d = 0.7;
    EXPECT_EQ(fout.data, (std::vector<float>{expf(f), logf(f), tanhf(f)}));
    for (int k = 0; k < 4; k++) {
        EXPECT_EQ(dout.data[k], std::exp(d));
        EXPECT_EQ(dout.data[4 + k], std::log(d));
        EXPECT_EQ(dout.data[8 + k], std::tanh(d));
    }
}
