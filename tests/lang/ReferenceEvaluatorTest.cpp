// The reference evaluator against hand-written C++ loops. Where the loops perform the same float32
// operations in the same order as the algorithm, the results must be bit-identical: IR.h fixes
// float32 rounding after every operation and forbids contraction into fma, and the tests are built
// without -ffast-math or FMA-enabling -march flags, so the C++ loops round the same way.
#include "lang/ReferenceEvaluator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lang/BoundaryConditions.h"
#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/Param.h"
#include "lang/Reduce.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

// A deterministic spread of small values, negative ones included. Dividing by 7 makes them
// inexact in binary, so sums that run in a different order round differently.
float sample(int i) {
    return float((i * 37 + 11) % 23 - 11) / 7.0f;
}

int floor_div(int a, int b) {
    return int(std::floor(double(a) / double(b)));
}
int floor_mod(int a, int b) {
    return a - b * floor_div(a, b);
}

TEST(ReferenceEvaluator, BoxBlurWithRepeatEdgeMatchesHandLoops) {
    const int w = 7, h = 5;
    Buffer<float> in(w, h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            in(x, y) = sample(x + y * w);
    }
    Var x("x"), y("y");
    Func clamped = repeat_edge(in);
    Func blur_x("blur_x"), blur_y("blur_y");
    blur_x(x, y) = (clamped(x - 1, y) + clamped(x, y) + clamped(x + 1, y)) / 3.0f;
    blur_y(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3.0f;

    // Two pixels beyond the input on every side, so every edge is repeated.
    const int x0 = -2, y0 = -2, out_w = w + 4, out_h = h + 4;
    Buffer<float> out = reference_realize(blur_y, {out_w, out_h}, {x0, y0});

    auto at = [&](int xx, int yy) {
        return in(std::clamp(xx, 0, w - 1), std::clamp(yy, 0, h - 1));
    };
    auto bx = [&](int xx, int yy) { return (at(xx - 1, yy) + at(xx, yy) + at(xx + 1, yy)) / 3.0f; };
    for (int yy = y0; yy < y0 + out_h; yy++) {
        for (int xx = x0; xx < x0 + out_w; xx++) {
            float expected = (bx(xx, yy - 1) + bx(xx, yy) + bx(xx, yy + 1)) / 3.0f;
            EXPECT_EQ(out(xx, yy), expected) << "at (" << xx << ", " << yy << ")";
        }
    }
}

// C(i, j) = sum over k of A(k, j) * B(i, k), with odd sizes so no dimension is a power of two.
struct Matmul {
    static constexpr int m = 7, n = 5, k = 3;
    Buffer<float> a{k, n}, b{m, k};
    RDom r{0, k, "k"};

    Matmul() {
        for (int j = 0; j < n; j++) {
            for (int kk = 0; kk < k; kk++)
                a(kk, j) = sample(kk + 3 * j);
        }
        for (int kk = 0; kk < k; kk++) {
            for (int i = 0; i < m; i++)
                b(i, kk) = sample(100 + i + 7 * kk);
        }
    }

    Func as_update() const {
        Var i("i"), j("j");
        Func c("C");
        c(i, j) = 0.0f;
        c(i, j) += a(r, j) * b(i, r);
        return c;
    }

    Func as_compute() const {
        return compute(
            {m, n}, [&](Var i, Var j) { return sum(a(r, j) * b(i, r)); }, "C2");
    }

    float expected(int i, int j) const {
        float acc = 0.0f;
        for (int kk = 0; kk < k; kk++) {
            float product = a(kk, j) * b(i, kk);
            acc = acc + product;
        }
        return acc;
    }
};

TEST(ReferenceEvaluator, MatmulAsAnUpdateOverAnRDomMatchesHandLoops) {
    Matmul mm;
    Buffer<float> c = reference_realize(mm.as_update(), {Matmul::m, Matmul::n});
    for (int j = 0; j < Matmul::n; j++) {
        for (int i = 0; i < Matmul::m; i++) {
            EXPECT_EQ(c(i, j), mm.expected(i, j)) << "at (" << i << ", " << j << ")";
        }
    }
}

TEST(ReferenceEvaluator, MatmulWithComputeAndSumMatchesHandLoops) {
    Matmul mm;
    Buffer<float> c = reference_realize(mm.as_compute(), {Matmul::m, Matmul::n});
    for (int j = 0; j < Matmul::n; j++) {
        for (int i = 0; i < Matmul::m; i++) {
            EXPECT_EQ(c(i, j), mm.expected(i, j)) << "at (" << i << ", " << j << ")";
        }
    }
}

TEST(ReferenceEvaluator, MatmulUpdateAndComputeFormsAgreeBitForBit) {
    Matmul mm;
    // Both forms add the products in the same order, starting from 0, so they agree exactly.
    Buffer<float> c1 = reference_realize(mm.as_update(), {Matmul::m, Matmul::n});
    Buffer<float> c2 = reference_realize(mm.as_compute(), {Matmul::m, Matmul::n});
    for (int j = 0; j < Matmul::n; j++) {
        for (int i = 0; i < Matmul::m; i++)
            EXPECT_EQ(c1(i, j), c2(i, j));
    }
}

TEST(ReferenceEvaluator, Conv2dWithZeroPaddingMatchesHandLoops) {
    // NCHW with W innermost: dimensions (x, y, channel, batch).
    const int w = 5, h = 4, in_ch = 2, out_ch = 3, batch = 2;
    Buffer<float> input(w, h, in_ch, batch), weights(3, 3, in_ch, out_ch), bias(out_ch);
    for (int i = 0; i < w * h * in_ch * batch; i++)
        input.data()[i] = sample(i);
    for (int i = 0; i < 3 * 3 * in_ch * out_ch; i++)
        weights.data()[i] = sample(1000 + 3 * i);
    for (int c = 0; c < out_ch; c++)
        bias(c) = sample(c) + 0.5f;

    Func padded = constant_exterior(input, 0.0f);
    RDom r({{0, 3}, {0, 3}, {0, in_ch}}, "r");
    Var x("x"), y("y"), c("c"), n("n");
    Func conv("conv");
    conv(x, y, c, n) = bias(c);
    conv(x, y, c, n) += weights(r.x, r.y, r.z, c) * padded(x + r.x - 1, y + r.y - 1, r.z, n);
    Buffer<float> out = reference_realize(conv, {w, h, out_ch, batch});

    for (int nn = 0; nn < batch; nn++) {
        for (int co = 0; co < out_ch; co++) {
            for (int yy = 0; yy < h; yy++) {
                for (int xx = 0; xx < w; xx++) {
                    // r.x innermost, then r.y, then r.z, as the RDom iterates.
                    float acc = bias(co);
                    for (int ci = 0; ci < in_ch; ci++) {
                        for (int ky = 0; ky < 3; ky++) {
                            for (int kx = 0; kx < 3; kx++) {
                                int sx = xx + kx - 1, sy = yy + ky - 1;
                                bool inside = sx >= 0 && sx < w && sy >= 0 && sy < h;
                                float v = inside ? input(sx, sy, ci, nn) : 0.0f;
                                float product = weights(kx, ky, ci, co) * v;
                                acc = acc + product;
                            }
                        }
                    }
                    EXPECT_EQ(out(xx, yy, co, nn), acc)
                        << "at (" << xx << ", " << yy << ", " << co << ", " << nn << ")";
                }
            }
        }
    }
}

TEST(ReferenceEvaluator, RowSoftmaxMatchesHandLoopsExactly) {
    const int w = 6, h = 3;
    Buffer<float> in(w, h);
    for (int i = 0; i < w * h; i++)
        in.data()[i] = sample(i) * 4.0f;
    in(2, 1) = in(4, 1); // a repeated value in a row

    Var x("x"), y("y");
    RDom r(0, w, "r");
    Func row_max("row_max"), e("e"), total("total"), softmax("softmax");
    row_max(y) = maximum(in(r, y));
    e(x, y) = exp(in(x, y) - row_max(y));
    total(y) = sum(e(r, y));
    softmax(x, y) = e(x, y) / total(y);
    Buffer<float> out = reference_realize(softmax, {w, h});

    // The loops use the same float32 operations in the same order, and the evaluator's float32
    // exp is the same libm expf, so no tolerance is needed.
    for (int yy = 0; yy < h; yy++) {
        float m = -std::numeric_limits<float>::infinity();
        for (int xx = 0; xx < w; xx++)
            m = m > in(xx, yy) ? m : in(xx, yy);
        std::vector<float> ex(w);
        float denominator = 0.0f;
        for (int xx = 0; xx < w; xx++) {
            ex[xx] = std::exp(in(xx, yy) - m);
            denominator = denominator + ex[xx];
        }
        for (int xx = 0; xx < w; xx++) {
            EXPECT_EQ(out(xx, yy), ex[xx] / denominator) << "at (" << xx << ", " << yy << ")";
        }
    }
}

TEST(ReferenceEvaluator, ArgmaxOfARowReturnsTheFirstMaximum) {
    const int w = 7;
    const std::vector<std::vector<int>> rows = {
        {3, 9, 2, 9, 1, 9, 0},
        {5, 5, 5, 5, 5, 5, 5},
        {-4, -2, -8, -2, -9, -1, -1},
        {8, 1, 8, 0, 0, 0, 7},
    };
    const int h = int(rows.size());
    Buffer<int> in(w, h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            in(x, y) = rows[y][x];
    }
    Var y("y");
    RDom r(0, w, "r");
    Func best("best");
    best(y) = argmax(in(r, y));
    std::vector<BufferBase> out = reference_realize_all(best, {h});
    ASSERT_EQ(out.size(), 2u);
    Buffer<int> index = out[0], value = out[1];

    const int expected_index[] = {1, 0, 5, 0};
    for (int yy = 0; yy < h; yy++) {
        auto first_max = std::max_element(rows[yy].begin(), rows[yy].end());
        ASSERT_EQ(first_max - rows[yy].begin(), expected_index[yy]) << "the table is wrong";
        EXPECT_EQ(index(yy), expected_index[yy]) << "row " << yy;
        EXPECT_EQ(value(yy), *first_max) << "row " << yy;
    }
}

TEST(ReferenceEvaluator, IntegerDivisionAndModuloRoundTowardNegativeInfinity) {
    const int w = 9, h = 2;
    Buffer<int> in(w, h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            in(x, y) = (x - 4) * 3 + y * 5 - 2;
    }
    Var x("x"), y("y");
    Func quotient("quotient"), remainder("remainder"), combined("combined");
    quotient(x, y) = in(x, y) / 4;
    remainder(x, y) = in(x, y) % 4;
    combined(x, y) = quotient(x, y) * 100 + remainder(x, y) + (in(x, y) - 7) / 3 % 5;
    Buffer<int> out = reference_realize(combined, {w, h});
    for (int yy = 0; yy < h; yy++) {
        for (int xx = 0; xx < w; xx++) {
            int a = in(xx, yy);
            int expected =
                floor_div(a, 4) * 100 + floor_mod(a, 4) + floor_mod(floor_div(a - 7, 3), 5);
            EXPECT_EQ(out(xx, yy), expected) << "for " << a;
        }
    }
}

TEST(ReferenceEvaluator, IntegerDivisionByNegativeOrZeroFollowsTheIRSemantics) {
    Buffer<int> in(11);
    for (int i = 0; i < 11; i++)
        in(i) = i * 3 - 16;
    Param<int> divisor("divisor");
    Var x("x");
    Func q("q"), m("m");
    q(x) = in(x) / divisor;
    m(x) = in(x) % divisor;

    divisor.set(-3);
    Buffer<int> quotients = reference_realize(q, {11}), remainders = reference_realize(m, {11});
    for (int i = 0; i < 11; i++) {
        // For a negative divisor the remainder still lies in [0, |b|): -7 / -3 is 3, rem 2.
        int a = in(i), rem = ((a % 3) + 3) % 3;
        EXPECT_EQ(remainders(i), rem) << "for " << a;
        EXPECT_EQ(quotients(i), (a - rem) / -3) << "for " << a;
    }

    divisor.set(0);
    quotients = reference_realize(q, {11});
    remainders = reference_realize(m, {11});
    for (int i = 0; i < 11; i++) {
        EXPECT_EQ(quotients(i), 0);
        EXPECT_EQ(remainders(i), 0);
    }
}

TEST(ReferenceEvaluator, ScanSeesValuesWrittenByEarlierIterations) {
    const int n = 8;
    Buffer<float> in(n);
    for (int i = 0; i < n; i++)
        in(i) = sample(i);
    Var x("x");
    RDom r(1, n - 1, "r");
    Func f("f");
    f(x) = in(x);
    f(r) = f(r - 1) + in(r);
    Buffer<float> out = reference_realize(f, {n});
    float acc = in(0);
    EXPECT_EQ(out(0), acc);
    for (int i = 1; i < n; i++) {
        acc = acc + in(i);
        EXPECT_EQ(out(i), acc) << "at " << i;
    }
}

TEST(ReferenceEvaluator, ScanAlongRowsRunsSeparatelyForEachRow) {
    const int w = 5, h = 4;
    Buffer<int> in(w, h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            in(x, y) = (x + 1) * (y + 2) - 6;
    }
    Var x("x"), y("y");
    RDom r(1, w - 1, "r");
    Func prefix("prefix");
    prefix(x, y) = in(x, y);
    prefix(r, y) = prefix(r - 1, y) + prefix(r, y);
    // Only rows 1 and 2 are demanded.
    Buffer<int> out = reference_realize(prefix, {w, 2}, {0, 1});
    for (int yy = 1; yy < 3; yy++) {
        int acc = 0;
        for (int xx = 0; xx < w; xx++) {
            acc += in(xx, yy);
            EXPECT_EQ(out(xx, yy), acc) << "at (" << xx << ", " << yy << ")";
        }
    }
}

TEST(ReferenceEvaluator, HistogramCountsEveryInputOnce) {
    const int n = 20;
    Buffer<int> in(n);
    for (int i = 0; i < n; i++)
        in(i) = (i * 7) % 15 - 3; // in [-3, 11], so clamping matters
    RDom r(0, n, "r");
    Func hist("hist");
    hist(clamp(in(r), 0, 9)) += 1;
    // One bin beyond each end: never written, so the identity 0 of += stays there.
    Buffer<int> out = reference_realize(hist, {12}, {-1});
    std::vector<int> expected(12, 0);
    for (int i = 0; i < n; i++)
        expected[std::clamp(in(i), 0, 9) + 1]++;
    for (int b = -1; b < 11; b++)
        EXPECT_EQ(out(b), expected[b + 1]) << "bin " << b;
}

TEST(ReferenceEvaluator, UpdateWithoutPureVarsWritesOnlyTheSitesItReaches) {
    Var x("x");
    RDom r(0, 5, "r");
    Func f("f");
    f(x) = -1;
    f(r * 2) = r + 10;
    Buffer<int> out = reference_realize(f, {12});
    for (int i = 0; i < 12; i++)
        EXPECT_EQ(out(i), i % 2 == 0 && i < 10 ? i / 2 + 10 : -1);
}

TEST(ReferenceEvaluator, UpdatesApplyInTheOrderWritten) {
    Var x("x");
    Func f("f");
    f(x) = x;
    f(x) = f(x) * 2;
    f(x) = f(x) + 1;
    Buffer<int> out = reference_realize(f, {6}, {-3});
    for (int i = -3; i < 3; i++)
        EXPECT_EQ(out(i), 2 * i + 1);
}

TEST(ReferenceEvaluator, PointsAnUpdateSkipsKeepTheValueOfTheLatestUpdateThatWroteThem) {
    Var x("x");
    RDom all(0, 6, "all"), evens(0, 3, "evens");
    Func f("f");
    f(x) = 0;
    f(all) = all + 1;
    f(evens * 2) = f(evens * 2) + 100;
    Buffer<int> out = reference_realize(f, {7});
    const int expected[] = {101, 2, 103, 4, 105, 6, 0};
    for (int i = 0; i < 7; i++)
        EXPECT_EQ(out(i), expected[i]) << "at " << i;
}

TEST(ReferenceEvaluator, RDomIteratesItsFirstDimensionFastest) {
    RDom r({{0, 3}, {0, 2}}, "r");
    Func order("order");
    order() = 0;
    // Appends one decimal digit per iteration: the digits spell the visiting order.
    order() = order() * 10 + (r.x + 3 * r.y);
    EXPECT_EQ(Buffer<int>(reference_realize(order, {}))(), 12345);
}

TEST(ReferenceEvaluator, ReadsOfAnotherColumnInAnUpdateSeeThePreviousStage) {
    // A documented choice (see ReferenceEvaluator.cpp): f(x - 1) inside update 0 reads the pure
    // value there, even though x - 1 is updated too.
    Var x("x");
    Func f("f");
    f(x) = x;
    f(x) = f(x - 1) * 10 + f(x);
    Buffer<int> out = reference_realize(f, {5});
    for (int i = 0; i < 5; i++)
        EXPECT_EQ(out(i), (i - 1) * 10 + i);
}

TEST(ReferenceEvaluator, TupleUpdateComputesAllValuesBeforeStoringAny) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, x * 100};
    f(x) = Tuple{f(x)[1], f(x)[0]};
    std::vector<BufferBase> out = reference_realize_all(f, {4});
    Buffer<int> first = out[0], second = out[1];
    for (int i = 0; i < 4; i++) {
        EXPECT_EQ(first(i), i * 100);
        EXPECT_EQ(second(i), i);
    }
}

TEST(ReferenceEvaluator, EmptyRDomLeavesThePureValues) {
    Param<int> n("n", 0);
    Var x("x");
    RDom r(0, n, "r");
    Func f("f");
    f(x) = 7;
    f(x) += r;
    Buffer<int> out = reference_realize(f, {3});
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(out(i), 7);
}

TEST(ReferenceEvaluator, DeepStencilChainIsMemoizedPerPoint) {
    // Without memoization the 30 stages would take 2^30 evaluations per output point.
    Var x("x");
    Func f("f0");
    f(x) = 1;
    for (int i = 1; i <= 30; i++) {
        Func g("f" + std::to_string(i));
        g(x) = f(x - 1) + f(x + 1);
        f = g;
    }
    Buffer<int> out = reference_realize(f, {3});
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(out(i), 1 << 30);
}

TEST(ReferenceEvaluator, MirrorInteriorReflectsWithoutRepeatingTheEdge) {
    const int w = 4, h = 3;
    Buffer<int> in(w, h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            in(x, y) = 10 * x + y + 1;
    }
    // Reflect one step at a time until inside: ..., 2, 1, [0, 1, 2, 3], 2, 1, 0, 1, ...
    auto reflect = [](int v, int n) {
        while (v < 0 || v >= n)
            v = v < 0 ? -v : 2 * (n - 1) - v;
        return v;
    };
    Func mirrored = mirror_interior(in);
    // More than a whole period beyond each edge.
    const int x0 = -8, y0 = -6, out_w = 20, out_h = 15;
    Buffer<int> out = reference_realize(mirrored, {out_w, out_h}, {x0, y0});
    for (int y = y0; y < y0 + out_h; y++) {
        for (int x = x0; x < x0 + out_w; x++) {
            EXPECT_EQ(out(x, y), in(reflect(x, w), reflect(y, h)))
                << "at (" << x << ", " << y << ")";
        }
    }
}

TEST(ReferenceEvaluator, MirrorInteriorOfOneElementRepeatsIt) {
    Buffer<int> in(1);
    in(0) = 42;
    Buffer<int> out = reference_realize(mirror_interior(in), {7}, {-3});
    for (int x = -3; x < 4; x++)
        EXPECT_EQ(out(x), 42) << "at " << x;
}

TEST(ReferenceEvaluator, ConstantExteriorIsTheValueOutsideAndTheInputInside) {
    const int w = 4, h = 3;
    Buffer<float> in(w, h);
    for (int i = 0; i < w * h; i++)
        in.data()[i] = sample(i);
    Func padded = constant_exterior(in, -7.5f);
    Buffer<float> out = reference_realize(padded, {w + 4, h + 4}, {-2, -2});
    for (int y = -2; y < h + 2; y++) {
        for (int x = -2; x < w + 2; x++) {
            bool inside = x >= 0 && x < w && y >= 0 && y < h;
            EXPECT_EQ(out(x, y), inside ? in(x, y) : -7.5f) << "at (" << x << ", " << y << ")";
        }
    }
}

TEST(ReferenceEvaluator, ParamsAndImageParamsReadTheirBoundValues) {
    Param<float> alpha("alpha");
    Param<int> offset("offset");
    ImageParam img(Float(32), 2, "img");
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = img(x, y) * alpha + cast<float>(offset + img.width() * 100);

    Buffer<float> b(4, 3);
    for (int i = 0; i < 12; i++)
        b.data()[i] = sample(i);
    img.set(b);
    alpha.set(1.5f);
    offset.set(-2);
    Buffer<float> out = reference_realize(f, {4, 3});
    for (int yy = 0; yy < 3; yy++) {
        for (int xx = 0; xx < 4; xx++) {
            float expected = b(xx, yy) * 1.5f + float(-2 + 4 * 100);
            EXPECT_EQ(out(xx, yy), expected) << "at (" << xx << ", " << yy << ")";
        }
    }
}

TEST(ReferenceEvaluator, ImageParamShapeBoundsAnRDom) {
    ImageParam img(Int(32), 1, "img");
    RDom r(img.min(0), img.extent(0), "r");
    Func total("total");
    total() = 0;
    total() += img(r);

    Buffer<int> five(5);
    for (int i = 0; i < 5; i++)
        five(i) = i + 1;
    img.set(five);
    EXPECT_EQ(Buffer<int>(reference_realize(total, {}))(), 15);

    // Rebinding changes the domain: three elements starting at coordinate 10.
    Buffer<int> three(3);
    three.set_min({10});
    for (int i = 10; i < 13; i++)
        three(i) = i;
    img.set(three);
    EXPECT_EQ(Buffer<int>(reference_realize(total, {}))(), 10 + 11 + 12);
}

TEST(ReferenceEvaluator, MultiValuedOutputGivesOneTypedBufferPerValue) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x * 2, cast<float>(x) / 4.0f};
    std::vector<BufferBase> out = reference_realize_all(f, {5}, {-2});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].type(), Int(32));
    EXPECT_EQ(out[1].type(), Float(32));
    Buffer<int> doubled = out[0];
    Buffer<float> quarter = out[1];
    for (int i = -2; i < 3; i++) {
        EXPECT_EQ(doubled(i), 2 * i);
        EXPECT_EQ(quarter(i), float(i) / 4.0f);
    }
}

TEST(ReferenceEvaluator, ValuesAreStoredInTheOutputElementType) {
    Var x("x");
    Func bytes("bytes"), flags("flags"), wide("wide"), doubles("doubles");
    bytes(x) = cast<uint8_t>(x * 100);
    flags(x) = x % 3 == 0;
    wide(x) = cast<int64_t>(x) * Expr(int64_t(3000000000));
    doubles(x) = cast<double>(x) / 3.0;
    Buffer<uint8_t> b = reference_realize(bytes, {4});
    Buffer<bool> fl = reference_realize(flags, {4});
    Buffer<int64_t> wd = reference_realize(wide, {4});
    Buffer<double> db = reference_realize(doubles, {4});
    for (int i = 0; i < 4; i++) {
        EXPECT_EQ(b(i), uint8_t(i * 100)) << "casts to uint8 wrap";
        EXPECT_EQ(fl(i), i % 3 == 0);
        EXPECT_EQ(wd(i), int64_t(i) * int64_t(3000000000));
        EXPECT_EQ(db(i), double(i) / 3.0);
    }
}

TEST(ReferenceEvaluator, RealizeIntoFillsTheBuffersOwnRegionAndLayout) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = x * 10 + y;
    // A transposed layout (y innermost) with mins away from zero.
    std::vector<int> storage(3 * 4, -1);
    BufferBase out(Int(32), storage.data(), {{5, 4, 3}, {-1, 3, 1}}, "out");
    reference_realize_into(f, out);
    Buffer<int> typed = out;
    for (int yy = -1; yy < 2; yy++) {
        for (int xx = 5; xx < 9; xx++)
            EXPECT_EQ(typed(xx, yy), xx * 10 + yy);
    }
    EXPECT_EQ(storage[0], 5 * 10 - 1); // (5, -1) is the first element
    EXPECT_EQ(storage[1], 5 * 10 + 0); // (5, 0) is next, y being innermost
}

TEST(ReferenceEvaluatorErrors, UnboundParamIsNamed) {
    Param<float> alpha("alpha");
    Var x("x");
    Func f("f");
    f(x) = cast<float>(x) * alpha;
    EXPECT_EQ(test::error_of<RuntimeError>([&] { reference_realize(f, {4}); }),
              "param 'alpha' has no value; call set() before realizing");
}

TEST(ReferenceEvaluatorErrors, UnboundImageParamIsNamed) {
    ImageParam img(Float(32), 1, "img");
    Var x("x");
    Func f("f");
    f(x) = img(x);
    EXPECT_EQ(test::error_of<RuntimeError>([&] { reference_realize(f, {4}); }),
              "image param 'img' has no buffer; call set() before realizing");
}

TEST(ReferenceEvaluatorErrors, ParamOutsideItsRangeIsRejected) {
    Param<int> p("p");
    p.set_range(0, 3);
    p.set(5);
    Var x("x");
    Func f("f");
    f(x) = x + p;
    EXPECT_EQ(test::error_of<RuntimeError>([&] { reference_realize(f, {4}); }),
              "param 'p' is 5, outside its range [0, 3]");
}

// The buffer's own out-of-bounds message for a coordinate, which the evaluator extends.
std::string access_error(const BufferBase &b, const std::vector<int> &coords) {
    std::string message = test::error_of<RuntimeError>([&] { b.address_of(coords); });
    EXPECT_NE(message.find("'" + b.name() + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("dimension 0"), std::string::npos) << message;
    return message;
}

TEST(ReferenceEvaluatorErrors, OutOfBoundsReadNamesBufferDimensionCoordinateAndReader) {
    Buffer<int> in({4, 2}, "in");
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = in(x + 1, y);
    std::string message = test::error_of<RuntimeError>([&] { reference_realize(f, {4, 2}); });
    EXPECT_EQ(message, access_error(in, {4, 0}) + "; read by f(3, 0)");
}

TEST(ReferenceEvaluatorErrors, OutOfBoundsReadInAnUpdateNamesTheIteration) {
    Buffer<int> in({4}, "in");
    Var x("x");
    RDom r(0, 5, "r");
    Func f("f");
    f(x) = 0;
    f(x) += in(r);
    std::string message = test::error_of<RuntimeError>([&] { reference_realize(f, {1}); });
    EXPECT_EQ(message, access_error(in, {4}) + "; read by f.update(0) with x = 0, r.x = 4");
}

TEST(ReferenceEvaluatorErrors, WrongNumberOfExtentsIsACompileError) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = x + y;
    EXPECT_EQ(test::error_of<CompileError>([&] {
                  reference_realize(f, {2, 3, 4});
              }),
              "reference_realize: 'f' has 2 dimensions, but 3 extents were given");
    EXPECT_EQ(test::error_of<CompileError>([&] {
                  reference_realize(f, {2, 3}, {1});
              }),
              "reference_realize: 'f' has 2 dimensions, but 1 min was given");
}

TEST(ReferenceEvaluatorErrors, UndefinedFuncIsACompileError) {
    Func f("f");
    EXPECT_EQ(test::error_of<CompileError>([&] { reference_realize(f, {}); }),
              "reference_realize: Func 'f' has no definition; define it first");
}

TEST(ReferenceEvaluatorErrors, RecursionThroughAnotherFuncIsACompileError) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = 1;
    g(x) = f(x) + 1;
    f(x) = g(x) + f(x);
    std::string message = test::error_of<CompileError>([&] { reference_realize(f, {2}); });
    EXPECT_EQ(message.rfind("recursive definition: f -> g -> f", 0), 0u) << message;
    // f and g own each other through their calls; drop f's update so the test does not leak.
    f.function()->updates.clear();
}

TEST(ReferenceEvaluatorErrors, RDomBoundsMayNotUsePureVars) {
    Var x("x");
    RDom r(0, x, "r");
    Func f("f");
    f(x) = 0;
    f(x) += r;
    EXPECT_EQ(test::error_of<CompileError>([&] { reference_realize(f, {3}); }),
              "update 0 of 'f': the bounds of RDom 'r' use variable 'x'; RDom bounds may use "
              "only constants, Params, ImageParam shapes and calls");
}

TEST(ReferenceEvaluatorErrors, MultiValuedFuncNeedsRealizeAll) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, x};
    EXPECT_EQ(test::error_of<CompileError>([&] { reference_realize(f, {2}); }),
              "reference_realize: 'f' has 2 values; use reference_realize_all");
}

TEST(ReferenceEvaluatorErrors, RealizeIntoABufferOfAnotherTypeIsRejected) {
    Var x("x");
    Func f("f");
    f(x) = x;
    Buffer<float> out({3}, "out");
    EXPECT_EQ(test::error_of<CompileError>([&] { reference_realize_into(f, out); }),
              "reference_realize_into: 'f' has type int32, but buffer 'out' holds float32");
}

// Scattered points in one pass: the values of a region evaluation, and a whole-Func reduction
// every point reads is computed once (its update has no pure Var in place: one column).
TEST(ReferenceEvaluator, PointsGiveTheValuesOfTheRegion) {
    Buffer<float> in(std::vector<int>{12, 9}, "in");
    for (int y = 0; y < 9; y++)
        for (int x = 0; x < 12; x++)
            in(x, y) = sample(x + 12 * y);
    Var x("x"), y("y");
    Func total("total"), out("out");
    RDom r({{0, 12}, {0, 9}}, "r");
    total() = 0.0f;
    total() += in(r.x, r.y);
    Func edge = repeat_edge(in);
    out(x, y) = edge(x - 1, y + 1) * 2 + total();
    Buffer<float> region = reference_realize(out, {12, 9});
    std::vector<std::vector<int>> points = {{0, 0}, {11, 8}, {5, 3}, {0, 8}};
    Buffer<float> at = reference_realize_points(out, points);
    ASSERT_EQ(at.dimensions(), 1);
    ASSERT_EQ(at.width(), 4);
    for (int i = 0; i < 4; i++)
        EXPECT_EQ(at(i), region(points[i][0], points[i][1])) << i;
    EXPECT_EQ(test::error_of<CompileError>([&] {
                  reference_realize_points(out, {{1, 2, 3}});
              }),
              "reference_realize_points: 'out' has 2 dimensions, but 3 coordinates were given");
}

} // namespace
} // namespace kiln
