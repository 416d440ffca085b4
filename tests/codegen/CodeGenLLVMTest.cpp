// The LLVM backend run through the JIT on hand-written lowered functions and real buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <sstream>

#include "CodeGenTestUtil.h"
#include "lang/Error.h"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr int lanes = 16;

/// A dense 16-lane ramp starting at base.
Expr dense(Expr base) {
    return Ramp::make(std::move(base), 1, lanes);
}

/// Loads and stores of `a` and `b` at i feeding op, over every pair of values, stored to `out`.
template <typename T>
std::vector<T> run_binary(const std::string &name, const std::vector<T> &as,
                          const std::vector<T> &bs, const std::function<Expr(Expr, Expr)> &op) {
    Type t = type_of<T>();
    int n = int(as.size());
    TestBuffer<T> a({n}), b({n}), out({n});
    a.set(as);
    b.set(bs);
    Stmt body = for_each_element(
        "out", [&](Expr i) { return op(Load::make(t, "a", i), Load::make(t, "b", i)); });
    JITModule m(make_func(
        name, {buffer_arg("a", t, 1), buffer_arg("b", t, 1), buffer_arg("out", t, 1, true)}, body));
    EXPECT_EQ(run(m, {&a.pointer, &b.pointer, &out.pointer}), kiln_success)
        << kiln_last_error_message();
    return out.data;
}

/// Every pair of interesting values of T: zero, small numbers of both signs, the extremes.
template <typename T>
std::pair<std::vector<T>, std::vector<T>> value_pairs() {
    using L = std::numeric_limits<T>;
    std::vector<int64_t> values = {0, 1, -1, 2, -2, 3, -3, 4, -4, 7, -7, 8, 100, -100, 127, -128};
    values.push_back(int64_t(L::min()));
    values.push_back(int64_t(L::min()) + 1);
    values.push_back(int64_t(L::max()));
    values.push_back(int64_t(L::max()) - 1);
    std::mt19937_64 rng(1234);
    for (int k = 0; k < 24; k++)
        values.push_back(int64_t(rng()));
    std::pair<std::vector<T>, std::vector<T>> pairs;
    for (int64_t x : values) {
        for (int64_t y : values) {
            pairs.first.push_back(T(x));
            pairs.second.push_back(T(y));
        }
    }
    return pairs;
}

template <typename T>
void expect_euclidean_div_mod() {
    auto [as, bs] = value_pairs<T>();
    std::string type = type_of<T>().to_string();
    std::vector<T> q = run_binary<T>("div_" + type, as, bs, [](Expr a, Expr b) { return a / b; });
    std::vector<T> r = run_binary<T>("mod_" + type, as, bs, [](Expr a, Expr b) { return a % b; });
    int failures = 0;
    for (size_t k = 0; k < as.size(); k++) {
        T want_q, want_r;
        if constexpr (std::is_signed_v<T>) {
            want_q = T(div_euclid(int64_t(as[k]), int64_t(bs[k])));
            want_r = T(mod_euclid(int64_t(as[k]), int64_t(bs[k])));
        } else {
            want_q = bs[k] == 0 ? T(0) : T(as[k] / bs[k]);
            want_r = bs[k] == 0 ? T(0) : T(as[k] % bs[k]);
        }
        if ((q[k] != want_q || r[k] != want_r) && failures++ < 5) {
            ADD_FAILURE() << type << ": " << +as[k] << " / " << +bs[k] << " = " << +q[k]
                          << " (want " << +want_q << "), % = " << +r[k] << " (want " << +want_r
                          << ")";
        }
    }
    EXPECT_EQ(failures, 0) << "of " << as.size() << " pairs";
}

} // namespace

TEST(CodeGenLLVM, SerialLoopWritesAnAffineFunctionOfTheIndex) {
    TestBuffer<int32_t> out({100}, {-20});
    Expr i = var("i");
    Stmt body = loop("i", min_of("out"), extent_of("out"),
                     Store::make("out", i * 3 - 7, i - min_of("out")));
    JITModule m(make_func("affine", {buffer_arg("out", Int(32), 1, true)}, body));
    ASSERT_EQ(run(m, {&out.pointer}), kiln_success) << kiln_last_error_message();
    for (int x = -20; x < 80; x++)
        EXPECT_EQ(out(x), x * 3 - 7) << "at " << x;
}

TEST(CodeGenLLVM, TwoDimensionalLoopsHonourStridesAndNonzeroMins) {
    // Rows padded to 13 elements, coordinates starting at (-3, 5).
    TestBuffer<float> in({10, 6}, {-3, 5}, {1, 13});
    TestBuffer<float> out({10, 6}, {-3, 5}, {1, 11});
    for (int y = 5; y < 11; y++) {
        for (int x = -3; x < 7; x++)
            in(x, y) = float(x * 100 + y);
    }
    auto at = [](const std::string &b, Expr x, Expr y) {
        return (x - min_of(b, 0)) * stride_of(b, 0) + (y - min_of(b, 1)) * stride_of(b, 1);
    };
    Expr x = var("x"), y = var("y");
    Expr value = Load::make(Float(32), "in", at("in", x, y)) * 2.0f + cast<float>(x - y);
    Stmt body = loop("y", min_of("out", 1), extent_of("out", 1),
                     loop("x", min_of("out", 0), extent_of("out", 0),
                          Store::make("out", value, at("out", x, y))));
    JITModule m(make_func(
        "strided", {buffer_arg("in", Float(32), 2), buffer_arg("out", Float(32), 2, true)}, body));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success) << kiln_last_error_message();
    for (int yy = 5; yy < 11; yy++) {
        for (int xx = -3; xx < 7; xx++) {
            EXPECT_EQ(out(xx, yy), float(xx * 100 + yy) * 2 + float(xx - yy)) << xx << "," << yy;
        }
    }
}

TEST(CodeGenLLVM, DivisionAndModuloAreEuclideanAndZeroForZeroDivisorsInEveryIntegerType) {
    expect_euclidean_div_mod<int8_t>();
    expect_euclidean_div_mod<int16_t>();
    expect_euclidean_div_mod<int32_t>();
    expect_euclidean_div_mod<int64_t>();
    expect_euclidean_div_mod<uint8_t>();
    expect_euclidean_div_mod<uint32_t>();
}

TEST(CodeGenLLVM, ConstantDivisorsOnVectorsMatchEuclideanSemantics) {
    const std::vector<int> divisors = {4, 1, 16, 3, -3, 7, -8, 0, -1};
    std::vector<int32_t> values;
    for (int v = -100; v < 60; v++)
        values.push_back(v);
    values.insert(values.end(), {INT32_MIN, INT32_MIN + 1, INT32_MAX, INT32_MAX - 1});
    while (values.size() % lanes)
        values.push_back(-1);
    int n = int(values.size());
    TestBuffer<int32_t> in({n});
    in.set(values);
    std::deque<TestBuffer<int32_t>> outs;
    std::vector<LoweredArgument> args = {buffer_arg("in", Int(32), 1)};
    std::vector<Stmt> stores;
    Expr x = var("xo") * lanes;
    Expr v = Load::make(Int(32, lanes), "in", dense(x));
    for (size_t k = 0; k < divisors.size(); k++) {
        Expr d = Broadcast::make(divisors[k], lanes);
        std::string q = "q" + std::to_string(k), r = "r" + std::to_string(k);
        args.push_back(buffer_arg(q, Int(32), 1, true));
        args.push_back(buffer_arg(r, Int(32), 1, true));
        stores.push_back(Store::make(q, v / d, dense(x)));
        stores.push_back(Store::make(r, v % d, dense(x)));
    }
    for (size_t k = 0; k < 2 * divisors.size(); k++)
        outs.emplace_back(std::vector<int>{n});
    JITModule m(make_func("const_div", args, loop("xo", 0, n / lanes, Block::make(stores))));
    std::vector<void *> slots = {&in.pointer};
    for (auto &o : outs)
        slots.push_back(&o.pointer);
    ASSERT_EQ(run(m, slots), kiln_success) << kiln_last_error_message();
    for (size_t k = 0; k < divisors.size(); k++) {
        for (int j = 0; j < n; j++) {
            int64_t a = values[j], b = divisors[k];
            ASSERT_EQ(outs[2 * k].data[j], int32_t(div_euclid(a, b))) << a << " / " << b;
            ASSERT_EQ(outs[2 * k + 1].data[j], int32_t(mod_euclid(a, b))) << a << " % " << b;
        }
    }
}

TEST(CodeGenLLVM, EightBitArithmeticWraps) {
    auto [as, bs] = value_pairs<int8_t>();
    auto op = [](Expr a, Expr b) { return a * b + a - b; };
    std::vector<int8_t> got = run_binary<int8_t>("wrap_i8", as, bs, op);
    for (size_t k = 0; k < as.size(); k++) {
        ASSERT_EQ(got[k], int8_t(as[k] * bs[k] + as[k] - bs[k])) << +as[k] << ", " << +bs[k];
    }
    auto [ua, ub] = value_pairs<uint8_t>();
    std::vector<uint8_t> ugot = run_binary<uint8_t>("wrap_u8", ua, ub, op);
    for (size_t k = 0; k < ua.size(); k++) {
        ASSERT_EQ(ugot[k], uint8_t(ua[k] * ub[k] + ua[k] - ub[k])) << +ua[k] << ", " << +ub[k];
    }
}

TEST(CodeGenLLVM, FloatToIntegerCastsTruncateAndSaturateOutOfRange) {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> values = {2.7f, -2.7f, 1e10f, -1e10f, inf, -inf, NAN, 255.9f, 300.0f};
    int n = int(values.size());
    TestBuffer<float> in({n});
    in.set(values);
    TestBuffer<int32_t> to_i32({n});
    TestBuffer<uint8_t> to_u8({n});
    Expr i = var("i"), v = Load::make(Float(32), "in", i);
    Stmt body = loop("i", 0, extent_of("in"),
                     Block::make(Store::make("to_i32", cast<int32_t>(v), i),
                                 Store::make("to_u8", cast<uint8_t>(v), i)));
    JITModule m(make_func("float_to_int",
                          {buffer_arg("in", Float(32), 1), buffer_arg("to_i32", Int(32), 1, true),
                           buffer_arg("to_u8", UInt(8), 1, true)},
                          body));
    ASSERT_EQ(run(m, {&in.pointer, &to_i32.pointer, &to_u8.pointer}), kiln_success);
    std::vector<int32_t> want_i32 = {2,         -2, INT32_MAX, INT32_MIN, INT32_MAX,
                                     INT32_MIN, 0,  255,       300};
    std::vector<uint8_t> want_u8 = {2, 0, 255, 0, 255, 0, 0, 255, 255};
    EXPECT_EQ(to_i32.data, want_i32);
    EXPECT_EQ(to_u8.data, want_u8);
}

TEST(CodeGenLLVM, IntegerCastsWrapAndExtendBySourceSignedness) {
    TestBuffer<int32_t> in({4});
    in.set({300, -1, -129, 65535});
    TestBuffer<int32_t> out({4 * 4});
    Expr i = var("i"), v = Load::make(Int(32), "in", i);
    Stmt body = loop(
        "i", 0, 4,
        Block::make({Store::make("out", cast<int32_t>(cast<int8_t>(v)), i * 4),
                     Store::make("out", cast<int32_t>(cast<uint8_t>(v)), i * 4 + 1),
                     Store::make("out", cast<int32_t>(cast<uint16_t>(cast<int8_t>(v))), i * 4 + 2),
                     Store::make("out", cast<int32_t>(cast<bool>(v)), i * 4 + 3)}));
    JITModule m(make_func(
        "int_casts", {buffer_arg("in", Int(32), 1), buffer_arg("out", Int(32), 1, true)}, body));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success);
    for (int k = 0; k < 4; k++) {
        int32_t x = in.data[k];
        EXPECT_EQ(out.data[4 * k], int32_t(int8_t(x))) << x;
        EXPECT_EQ(out.data[4 * k + 1], int32_t(uint8_t(x))) << x;
        EXPECT_EQ(out.data[4 * k + 2], int32_t(uint16_t(int8_t(x)))) << x;
        EXPECT_EQ(out.data[4 * k + 3], x != 0 ? 1 : 0) << x;
    }
}

TEST(CodeGenLLVM, VectorStoresOfRampAndBroadcastArithmeticMatchScalarMath) {
    const int n = 64;
    TestBuffer<float> fin({n}), fout({n});
    TestBuffer<int32_t> iin({n}), iout({n});
    for (int k = 0; k < n; k++) {
        fin.data[k] = 0.25f * float(k) - 3.0f;
        iin.data[k] = k * k - 50;
    }
    Expr x = var("xo") * lanes;
    Expr fv = Load::make(Float(32, lanes), "fin", dense(x)) * Broadcast::make(2.5f, lanes) +
              Cast::make(Float(32, lanes), dense(x));
    Expr iv = Load::make(Int(32, lanes), "iin", dense(x)) * Broadcast::make(3, lanes) +
              Ramp::make(x, 2, lanes);
    Stmt body =
        loop("xo", 0, n / lanes,
             Block::make(Store::make("fout", fv, dense(x)), Store::make("iout", iv, dense(x))));
    JITModule m(
        make_func("vector_arith",
                  {buffer_arg("fin", Float(32), 1), buffer_arg("iin", Int(32), 1),
                   buffer_arg("fout", Float(32), 1, true), buffer_arg("iout", Int(32), 1, true)},
                  body));
    ASSERT_EQ(run(m, {&fin.pointer, &iin.pointer, &fout.pointer, &iout.pointer}), kiln_success);
    for (int k = 0; k < n; k++) {
        EXPECT_EQ(fout.data[k], fin.data[k] * 2.5f + float(k)) << k;
        EXPECT_EQ(iout.data[k], iin.data[k] * 3 + (k / lanes) * lanes + 2 * (k % lanes)) << k;
    }
}

TEST(CodeGenLLVM, StridedVectorLoadGathersEveryOtherElement) {
    const int n = 32;
    TestBuffer<float> in({2 * n}), out({n});
    for (int k = 0; k < 2 * n; k++)
        in.data[k] = float(k) * 1.5f;
    Expr x = var("xo") * lanes;
    Expr gathered = Load::make(Float(32, lanes), "in", Ramp::make(x * 2, 2, lanes));
    JITModule m(make_func("gather",
                          {buffer_arg("in", Float(32), 1), buffer_arg("out", Float(32), 1, true)},
                          loop("xo", 0, n / lanes, Store::make("out", gathered, dense(x)))));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success);
    for (int k = 0; k < n; k++)
        EXPECT_EQ(out.data[k], in.data[2 * k]) << k;
}

TEST(CodeGenLLVM, ScatterStoreWritesReversedLanes) {
    const int n = 32;
    TestBuffer<int32_t> in({n}), out({n});
    std::iota(in.data.begin(), in.data.end(), 100);
    Expr x = var("xo") * lanes;
    Expr reversed = Ramp::make(x + (lanes - 1), -1, lanes);
    JITModule m(
        make_func("scatter", {buffer_arg("in", Int(32), 1), buffer_arg("out", Int(32), 1, true)},
                  loop("xo", 0, n / lanes,
                       Store::make("out", Load::make(Int(32, lanes), "in", dense(x)), reversed))));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success);
    for (int k = 0; k < n; k++) {
        int block = k / lanes * lanes;
        EXPECT_EQ(out.data[block + lanes - 1 - k % lanes], in.data[k]) << k;
    }
}

TEST(CodeGenLLVM, PredicatedLoadAndStoreLeaveTheTailUntouched) {
    const int n = 37, padded = 48;
    TestBuffer<float> in({n}), out({padded});
    for (int k = 0; k < n; k++)
        in.data[k] = float(k);
    std::fill(out.data.begin(), out.data.end(), -99.0f);
    out.dims[0].extent = n; // the sentinels past n are outside the buffer
    Expr x = var("xo") * lanes;
    Expr in_range = LT::make(dense(x), Broadcast::make(extent_of("out"), lanes));
    Expr v = Load::make(Float(32, lanes), "in", dense(x), in_range) + Broadcast::make(1.0f, lanes);
    Stmt body = loop("xo", 0, (extent_of("out") + (lanes - 1)) / lanes,
                     Store::make("out", v, dense(x), in_range));
    JITModule m(make_func(
        "tail", {buffer_arg("in", Float(32), 1), buffer_arg("out", Float(32), 1, true)}, body));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success) << kiln_last_error_message();
    for (int k = 0; k < n; k++)
        EXPECT_EQ(out.data[k], float(k) + 1) << k;
    for (int k = n; k < padded; k++)
        EXPECT_EQ(out.data[k], -99.0f) << "sentinel " << k;
}

TEST(CodeGenLLVM, PredicatedGatherAndScalarLoadSkipMaskedLanes) {
    TestBuffer<int32_t> in({40}), out({lanes + 1});
    std::iota(in.data.begin(), in.data.end(), 0);
    Expr ramp = Ramp::make(0, 3, lanes); // reaches 45 > 39: the last lanes are masked off
    Expr ok = LT::make(ramp, Broadcast::make(40, lanes));
    Expr gathered = Load::make(Int(32, lanes), "in", ramp, ok);
    Expr scalar = Load::make(Int(32), "in", Expr(1000), const_false());
    JITModule m(make_func("masked_gather",
                          {buffer_arg("in", Int(32), 1), buffer_arg("out", Int(32), 1, true)},
                          Block::make(Store::make("out", gathered, dense(0)),
                                      Store::make("out", scalar + 5, Expr(lanes)))));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success);
    for (int k = 0; k < lanes; k++)
        EXPECT_EQ(out.data[k], 3 * k < 40 ? 3 * k : 0) << k;
    EXPECT_EQ(out.data[lanes], 5);
}

TEST(CodeGenLLVM, VectorSelectPicksPerLane) {
    TestBuffer<float> in({lanes}), out({lanes});
    TestBuffer<int32_t> iout({lanes});
    for (int k = 0; k < lanes; k++)
        in.data[k] = float(k - 8);
    Expr v = Load::make(Float(32, lanes), "in", dense(0));
    Expr positive = GT::make(v, Broadcast::make(0.0f, lanes));
    Expr f = Select::make(positive, v, v * Broadcast::make(0.5f, lanes));
    Expr i = Select::make(positive, Ramp::make(0, 1, lanes), Broadcast::make(-1, lanes));
    JITModule m(
        make_func("vselect",
                  {buffer_arg("in", Float(32), 1), buffer_arg("out", Float(32), 1, true),
                   buffer_arg("iout", Int(32), 1, true)},
                  Block::make(Store::make("out", f, dense(0)), Store::make("iout", i, dense(0)))));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer, &iout.pointer}), kiln_success);
    for (int k = 0; k < lanes; k++) {
        float x = float(k - 8);
        EXPECT_EQ(out.data[k], x > 0 ? x : x * 0.5f) << k;
        EXPECT_EQ(iout.data[k], x > 0 ? k : -1) << k;
    }
}

TEST(CodeGenLLVM, FloatMinAndMaxAreSelectsAsTheIRDefinesThem) {
    std::vector<float> as = {1, NAN, 2, -0.0f, 3}, bs = {NAN, 1, 5, 0.0f, -3};
    std::vector<float> mins =
        run_binary<float>("fmin", as, bs, [](Expr a, Expr b) { return Min::make(a, b); });
    std::vector<float> maxs =
        run_binary<float>("fmax", as, bs, [](Expr a, Expr b) { return Max::make(a, b); });
    for (size_t k = 0; k < as.size(); k++) {
        float want_min = as[k] < bs[k] ? as[k] : bs[k], want_max = as[k] > bs[k] ? as[k] : bs[k];
        EXPECT_EQ(ulp_distance(mins[k], want_min), 0) << as[k] << ", " << bs[k];
        EXPECT_EQ(ulp_distance(maxs[k], want_max), 0) << as[k] << ", " << bs[k];
        EXPECT_EQ(std::signbit(mins[k]), std::signbit(want_min)) << as[k] << ", " << bs[k];
    }
}

TEST(CodeGenLLVM, FloatComparisonsAreOrderedExceptNotEqual) {
    std::vector<float> as = {NAN, 1, 1}, bs = {1, 1, 2};
    auto code = [](Expr a, Expr b) {
        Expr bits[] = {EQ::make(a, b), NE::make(a, b), LT::make(a, b),
                       LE::make(a, b), GT::make(a, b), GE::make(a, b)};
        Expr sum = make_zero(Float(32));
        for (int k = 0; k < 6; k++)
            sum = sum + select(bits[k], float(1 << k), 0.0f);
        return sum;
    };
    std::vector<float> got = run_binary<float>("compare", as, bs, code);
    auto want = [](float a, float b) {
        bool bits[] = {a == b, a != b, a<b, a <= b, a> b, a >= b};
        float sum = 0;
        for (int k = 0; k < 6; k++)
            sum += bits[k] ? float(1 << k) : 0.0f;
        return sum;
    };
    for (size_t k = 0; k < as.size(); k++)
        EXPECT_EQ(got[k], want(as[k], bs[k])) << k;
}

TEST(CodeGenLLVM, WithoutFastMathMultiplyAddIsNotContracted) {
    // a * b rounds to 1 + 2^-11, so a * b + c is 0 with two roundings and 2^-24 with one.
    const float a = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
    TestBuffer<float> out({lanes});
    Expr va = Broadcast::make(Expr(a), lanes), vc = Broadcast::make(Expr(c), lanes);
    Expr loaded = Load::make(Float(32, lanes), "out", dense(0));
    // Reading the operand from memory keeps LLVM from folding the constants.
    Expr v = (loaded + va) * (loaded + va) + vc;
    for (bool fast : {false, true}) {
        Target t = Target::host();
        t.fast_math = fast;
        std::fill(out.data.begin(), out.data.end(), 0.0f);
        JITModule m(make_func(fast ? "fused" : "unfused", {buffer_arg("out", Float(32), 1, true)},
                              Store::make("out", v, dense(0))),
                    t);
        ASSERT_EQ(run(m, {&out.pointer}), kiln_success);
        if (!fast) {
            EXPECT_EQ(out.data[0], 0.0f);
        } else {
            std::printf("[ info ] fast_math a * b + c = %g (2^-24 = %g when contracted)\n",
                        out.data[0], double(0x1p-24f));
        }
    }
}

TEST(CodeGenLLVM, MathIntrinsicsMatchLibm) {
    std::vector<float> values = {-2.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.7f, -3.7f, 0.0f,
                                 9.0f,  1e-3f, 20.f, -7.f, 0.1f, 2.0f, 100.f, -1e-3f};
    TestBuffer<float> in({lanes});
    in.set(values);
    const char *names[] = {"floor", "ceil", "round", "abs", "sqrt", "sin", "cos", "pow", "fma"};
    int count = int(std::size(names));
    TestBuffer<float> vout({lanes * count}), sout({lanes * count});
    auto apply = [&](int k, Expr v) -> Expr {
        switch (k) {
        case 0:
            return floor(v);
        case 1:
            return ceil(v);
        case 2:
            return round(v);
        case 3:
            return abs(v);
        case 4:
            return sqrt(abs(v));
        case 5:
            return sin(v);
        case 6:
            return cos(v);
        case 7:
            return pow(abs(v), v * 0.5f);
        default:
            return fma(v, v, v);
        }
    };
    std::vector<Stmt> stores;
    Expr vector = Load::make(Float(32, lanes), "in", dense(0));
    Expr i = var("i"), scalar = Load::make(Float(32), "in", i);
    std::vector<Stmt> scalar_stores;
    for (int k = 0; k < count; k++) {
        stores.push_back(Store::make("vout", apply(k, vector), dense(k * lanes)));
        scalar_stores.push_back(Store::make("sout", apply(k, scalar), i + k * lanes));
    }
    stores.push_back(loop("i", 0, lanes, Block::make(scalar_stores)));
    JITModule m(make_func("math",
                          {buffer_arg("in", Float(32), 1), buffer_arg("vout", Float(32), 1, true),
                           buffer_arg("sout", Float(32), 1, true)},
                          Block::make(stores)));
    ASSERT_EQ(run(m, {&in.pointer, &vout.pointer, &sout.pointer}), kiln_success);
    for (int k = 0; k < count; k++) {
        for (int j = 0; j < lanes; j++) {
            float x = values[j], want;
            switch (k) {
            case 0:
                want = std::floor(x);
                break;
            case 1:
                want = std::ceil(x);
                break;
            case 2:
                want = std::nearbyint(x);
                break;
            case 3:
                want = std::fabs(x);
                break;
            case 4:
                want = std::sqrt(std::fabs(x));
                break;
            case 5:
                want = std::sin(x);
                break;
            case 6:
                want = std::cos(x);
                break;
            case 7:
                want = std::pow(std::fabs(x), x * 0.5f);
                break;
            default:
                want = std::fma(x, x, x);
                break;
            }
            EXPECT_LE(ulp_distance(vout.data[k * lanes + j], want), 1)
                << names[k] << "(" << x << ")";
            EXPECT_LE(ulp_distance(sout.data[k * lanes + j], want), 1)
                << names[k] << "(" << x << ")";
        }
    }
    EXPECT_EQ(vout.data[2 * lanes + 0], -2.0f) << "round(-2.5) is half to even";
    EXPECT_EQ(vout.data[2 * lanes + 4], 2.0f) << "round(2.5) is half to even";
}

TEST(CodeGenLLVM, IntegerAbsHasAnUnsignedResult) {
    TestBuffer<int8_t> in({4});
    in.set({-128, -5, 0, 127});
    TestBuffer<uint8_t> out({4});
    Expr i = var("i");
    Expr a = Call::make(UInt(8), intrinsic::abs, {Load::make(Int(8), "in", i)}, Call::Intrinsic);
    JITModule m(make_func("iabs",
                          {buffer_arg("in", Int(8), 1), buffer_arg("out", UInt(8), 1, true)},
                          for_each_element("out", [&](Expr) { return a; })));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success);
    EXPECT_EQ(out.data, (std::vector<uint8_t>{128, 5, 0, 127}));
}

TEST(CodeGenLLVM, ScalarArgumentsOfEveryTypeArriveByValue) {
    TestBuffer<double> out({6});
    std::vector<std::pair<std::string, Type>> params = {{"p_i8", Int(8)},     {"p_u16", UInt(16)},
                                                        {"p_i64", Int(64)},   {"p_f32", Float(32)},
                                                        {"p_f64", Float(64)}, {"p_bool", Bool()}};
    std::vector<LoweredArgument> args;
    std::vector<Stmt> stores;
    for (size_t k = 0; k < params.size(); k++) {
        args.push_back(scalar_arg(params[k].first, params[k].second));
        stores.push_back(
            Store::make("out", cast<double>(var(params[k].first, params[k].second)), int(k)));
    }
    args.push_back(buffer_arg("out", Float(64), 1, true));
    JITModule m(make_func("scalars", args, Block::make(stores)));
    int8_t i8 = -7;
    uint16_t u16 = 65000;
    int64_t i64 = -(int64_t(1) << 40);
    float f32 = 1.5f;
    double f64 = -2.25;
    bool b = true;
    ASSERT_EQ(run(m, {&i8, &u16, &i64, &f32, &f64, &b, &out.pointer}), kiln_success);
    EXPECT_EQ(out.data, (std::vector<double>{-7, 65000, double(i64), 1.5, -2.25, 1}));

    // The typed entry point takes the same arguments by value.
    using Entry = int32_t (*)(int8_t, uint16_t, int64_t, float, double, bool, kiln_buffer_t *);
    auto entry = reinterpret_cast<Entry>(m.entry_address());
    ASSERT_EQ(entry(1, 2, 3, 4.0f, 5.0, false, out.pointer), kiln_success);
    EXPECT_EQ(out.data, (std::vector<double>{1, 2, 3, 4, 5, 0}));
}

TEST(CodeGenLLVM, LetsAndIfThenElseChooseBranches) {
    TestBuffer<int32_t> out({10});
    Expr i = var("i"), half = var("half");
    Stmt body =
        loop("i", 0, extent_of("out"),
             LetStmt::make(
                 "half", i / 2,
                 IfThenElse::make(likely(EQ::make(i % 2, 0)), Store::make("out", half, i),
                                  Store::make("out", Let::make("t", half * 10, var("t") + 1), i))));
    JITModule m(make_func("branches", {buffer_arg("out", Int(32), 1, true)}, body));
    ASSERT_EQ(run(m, {&out.pointer}), kiln_success);
    for (int k = 0; k < 10; k++)
        EXPECT_EQ(out.data[k], k % 2 == 0 ? k / 2 : (k / 2) * 10 + 1);
}

TEST(CodeGenLLVM, AssertFailureReturnsAssertionFailedWithItsMessage) {
    TestBuffer<int32_t> out({3});
    Stmt body = Block::make(
        AssertStmt::make(GT::make(extent_of("out"), 5), "out is too small: needs more than 5"),
        Store::make("out", 1, 0));
    JITModule m(make_func("asserts", {buffer_arg("out", Int(32), 1, true)}, body));
    kiln_clear_error();
    EXPECT_EQ(run(m, {&out.pointer}), kiln_error_assertion_failed);
    EXPECT_STREQ(kiln_last_error_message(), "out is too small: needs more than 5");
    EXPECT_EQ(out.data[0], 0) << "nothing after a failed assert runs";
    TestBuffer<int32_t> big({8});
    EXPECT_EQ(run(m, {&big.pointer}), kiln_success);
    EXPECT_EQ(big.data[0], 1);
}

TEST(CodeGenLLVM, AssertWithArgumentsFormatsThemAndReturnsItsOwnCode) {
    TestBuffer<int32_t> out({3}, {-2});
    Expr narrow = cast<int8_t>(min_of("out")), wide = cast<int64_t>(extent_of("out"));
    Stmt body = AssertStmt::make(GT::make(extent_of("out"), 5), "out: min %d extent %lld scale %g",
                                 {narrow, wide, Expr(0.5f)}, kiln_error_access_out_of_bounds);
    JITModule m(make_func("assert_args", {buffer_arg("out", Int(32), 1, true)}, body));
    EXPECT_EQ(run(m, {&out.pointer}), kiln_error_access_out_of_bounds);
    EXPECT_STREQ(kiln_last_error_message(), "out: min -2 extent 3 scale 0.5");
}

TEST(CodeGenLLVM, NullBufferReturnsBufferArgumentNullNamingTheBuffer) {
    JITModule m(
        make_func("null_buffer", {buffer_arg("input_image", Float(32), 1)}, Evaluate::make(0)));
    kiln_buffer_t *null_buffer = nullptr;
    EXPECT_EQ(run(m, {&null_buffer}), kiln_error_buffer_argument_null);
    EXPECT_NE(std::string(kiln_last_error_message()).find("input_image"), std::string::npos)
        << kiln_last_error_message();
}

TEST(CodeGenLLVM, BufferOfTheWrongTypeIsRejectedAtEntry) {
    JITModule m(make_func("wrong_type", {buffer_arg("in", Float(32), 1)}, Evaluate::make(0)));
    TestBuffer<int32_t> ints({4});
    EXPECT_EQ(run(m, {&ints.pointer}), kiln_error_bad_type);
    EXPECT_NE(std::string(kiln_last_error_message()).find("float32"), std::string::npos)
        << kiln_last_error_message();
}

TEST(CodeGenLLVM, ParallelLoopWritesEveryIndexOnTwoThreads) {
    kiln_set_num_threads(2);
    const int n = 1000;
    TestBuffer<int32_t> out({n}, {5});
    Expr i = var("i"), scale = var("scale");
    // The body reads a scalar argument, a buffer symbol and the loop variable: all captured.
    Stmt body = loop("i", min_of("out"), extent_of("out"),
                     Store::make("out", i * scale, i - min_of("out")), ForType::Parallel);
    JITModule m(make_func(
        "par", {scalar_arg("scale", Int(32)), buffer_arg("out", Int(32), 1, true)}, body));
    int32_t s = 3;
    ASSERT_EQ(run(m, {&s, &out.pointer}), kiln_success) << kiln_last_error_message();
    for (int k = 5; k < n + 5; k++)
        ASSERT_EQ(out(k), 3 * k) << k;
    kiln_set_num_threads(0);
}

TEST(CodeGenLLVM, ParallelRowsWithInnerSerialLoopsAndScratchAllocations) {
    kiln_set_num_threads(2);
    TestBuffer<float> out({33, 20});
    Expr x = var("x"), y = var("y");
    Expr at = x + y * stride_of("out", 1);
    // Each row fills a stack scratch row and a heap scratch row, then combines them.
    Stmt fill = loop("x", 0, extent_of("out", 0),
                     Block::make(Store::make("row", cast<float>(x), x),
                                 Store::make("heap_row", cast<float>(y), x)));
    Stmt combine = loop(
        "x", 0, extent_of("out", 0),
        Store::make("out",
                    Load::make(Float(32), "row", x) * 100.0f + Load::make(Float(32), "heap_row", x),
                    at));
    Stmt row =
        Allocate::make("row", Float(32), MemoryType::Stack, {64}, Expr(),
                       Allocate::make("heap_row", Float(32), MemoryType::Heap,
                                      {extent_of("out", 0)}, Expr(), Block::make(fill, combine)));
    JITModule m(make_func("par_rows", {buffer_arg("out", Float(32), 2, true)},
                          loop("y", 0, extent_of("out", 1), row, ForType::Parallel)));
    kiln_memory_stats_t before, after;
    kiln_get_memory_stats(&before);
    ASSERT_EQ(run(m, {&out.pointer}), kiln_success) << kiln_last_error_message();
    kiln_get_memory_stats(&after);
    EXPECT_EQ(after.bytes_live, before.bytes_live) << "every heap row is freed";
    EXPECT_GE(after.allocations - before.allocations, 20u);
    for (int yy = 0; yy < 20; yy++) {
        for (int xx = 0; xx < 33; xx++)
            ASSERT_EQ(out(xx, yy), float(xx * 100 + yy));
    }
    kiln_set_num_threads(0);
}

TEST(CodeGenLLVM, FailingAssertInAParallelTaskReturnsItsCodeAndMessage) {
    kiln_set_num_threads(2);
    TestBuffer<int32_t> out({64});
    Expr i = var("i");
    Stmt body = loop("i", 0, extent_of("out"),
                     Block::make(AssertStmt::make(NE::make(i, 37), "task 37 refuses to run"),
                                 Store::make("out", i, i)),
                     ForType::Parallel);
    JITModule m(make_func("par_fail", {buffer_arg("out", Int(32), 1, true)}, body));
    kiln_clear_error();
    EXPECT_EQ(run(m, {&out.pointer}), kiln_error_assertion_failed);
    EXPECT_STREQ(kiln_last_error_message(), "task 37 refuses to run");
    kiln_set_num_threads(0);
}

TEST(CodeGenLLVM, HeapScratchIsFreedOnSuccessAndOnAFailedAssert) {
    const int n = 100;
    TestBuffer<float> in({n}), out({n});
    for (int k = 0; k < n; k++)
        in.data[k] = float(k);
    Expr i = var("i"), limit = var("limit");
    // Non-constant size: Auto goes to the heap.
    Stmt body = Allocate::make(
        "tmp", Float(32), MemoryType::Auto, {extent_of("in")}, Expr(),
        Block::make(
            {loop("i", 0, extent_of("in"),
                  Store::make("tmp", Load::make(Float(32), "in", i) * 2.0f, i)),
             AssertStmt::make(LT::make(extent_of("in"), limit), "in is too large"),
             loop("i", 0, extent_of("in"),
                  Store::make("out", Load::make(Float(32), "tmp", extent_of("in") - 1 - i), i))}));
    JITModule m(make_func("scratch",
                          {buffer_arg("in", Float(32), 1), scalar_arg("limit", Int(32)),
                           buffer_arg("out", Float(32), 1, true)},
                          body));
    kiln_memory_stats_t before, after;
    kiln_get_memory_stats(&before);
    int32_t big = 1000, small = 10;
    ASSERT_EQ(run(m, {&in.pointer, &big, &out.pointer}), kiln_success);
    for (int k = 0; k < n; k++)
        EXPECT_EQ(out.data[k], float(2 * (n - 1 - k)));
    EXPECT_EQ(run(m, {&in.pointer, &small, &out.pointer}), kiln_error_assertion_failed);
    kiln_get_memory_stats(&after);
    EXPECT_EQ(after.bytes_live, before.bytes_live) << "the error path frees tmp too";
    EXPECT_EQ(after.allocations - before.allocations, 2u);
}

TEST(CodeGenLLVM, ConstantSizeStackAllocationNeedsNoHeap) {
    TestBuffer<int32_t> out({16});
    Expr i = var("i");
    Stmt body = Allocate::make(
        "tmp", Int(32), MemoryType::Auto, {16}, Expr(),
        Block::make(loop("i", 0, 16, Store::make("tmp", i * i, i)),
                    Store::make("out", Load::make(Int(32, lanes), "tmp", dense(0)), dense(0))));
    JITModule m(make_func("stack", {buffer_arg("out", Int(32), 1, true)}, body));
    kiln_memory_stats_t before, after;
    kiln_get_memory_stats(&before);
    ASSERT_EQ(run(m, {&out.pointer}), kiln_success);
    kiln_get_memory_stats(&after);
    EXPECT_EQ(after.allocations, before.allocations);
    for (int k = 0; k < 16; k++)
        EXPECT_EQ(out.data[k], k * k);
    EXPECT_EQ(m.llvm_ir().find("kiln_malloc"), std::string::npos);
}

TEST(CodeGenLLVM, UnrolledAndVectorizedLoopsLeftByLoweringRunSerially) {
    TestBuffer<int32_t> out({4, 3});
    Expr x = var("x"), y = var("y");
    Stmt body = loop("y", 0, 3,
                     loop("x", 0, 4, Store::make("out", x + y * 10, x + y * stride_of("out", 1)),
                          ForType::Vectorized),
                     ForType::Unrolled);
    JITModule m(make_func("leftover_loops", {buffer_arg("out", Int(32), 2, true)}, body));
    ASSERT_EQ(run(m, {&out.pointer}), kiln_success);
    for (int yy = 0; yy < 3; yy++) {
        for (int xx = 0; xx < 4; xx++)
            EXPECT_EQ(out(xx, yy), xx + yy * 10);
    }
}

TEST(CodeGenLLVM, BoolBuffersHoldOneBytePerElement) {
    TestBuffer<uint8_t> in({lanes}), out({lanes});
    in.buffer.type = out.buffer.type = {kiln_type_bool, 1, 1};
    for (int k = 0; k < lanes; k++)
        in.data[k] = k % 3 == 0;
    Expr v = Load::make(Bool(lanes), "in", dense(0));
    Expr odd = EQ::make(Ramp::make(0, 1, lanes) % 2, Broadcast::make(1, lanes));
    Expr scalar = Load::make(Bool(), "in", 1);
    JITModule m(make_func("bools",
                          {buffer_arg("in", Bool(), 1), buffer_arg("out", Bool(), 1, true)},
                          Block::make(Store::make("out", Or::make(v, odd), dense(0)),
                                      Store::make("out", Not::make(scalar), 1))));
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success) << kiln_last_error_message();
    for (int k = 0; k < lanes; k++) {
        uint8_t want = k == 1 ? 1 : (k % 3 == 0 || k % 2 == 1);
        EXPECT_EQ(out.data[k], want) << k;
    }
}

TEST(CodeGenLLVM, GpuLoopReachingTheCpuBackendIsAnInternalError) {
    Stmt body = loop("block", 0, 4, Evaluate::make(0), ForType::GPUBlock);
    EXPECT_THROW(JITModule(make_func("gpu", {}, body)), InternalError);
}

TEST(CodeGenLLVM, UnloweredProvideIsAnInternalError) {
    Stmt body = Provide::make("f", {Expr(1)}, {Expr(0)});
    EXPECT_THROW(JITModule(make_func("provide", {}, body)), InternalError);
}
