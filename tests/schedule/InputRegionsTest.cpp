#include "schedule/InputRegions.h"

#include <functional>

#include <gtest/gtest.h>

#include "lang/BoundaryConditions.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IROperator.h"
#include "lang/Param.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

using test::error_of;

TEST(InputRegions, AStencilReadsAMarginAroundTheOutputRegion) {
    ImageParam in(Float(32), 2, "in");
    Func out("out");
    Var x("x"), y("y");
    out(x, y) = in(x - 1, y) + in(x + 2, 2 * y);
    std::vector<InputRegion> r = input_regions({out}, {64, 48}, {10, 0});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].argument.name, "in");
    EXPECT_EQ(r[0].mins, (std::vector<int64_t>{9, 0}));
    EXPECT_EQ(r[0].extents, (std::vector<int64_t>{67, 95}));
}

TEST(InputRegions, ScalarsTakeTheirValuesAndClampsToTheInputsOwnShapeAreIgnored) {
    ImageParam in(Float(32), 1, "in");
    Param<int> shift("shift", 3);
    Func edge = repeat_edge(in);
    Func out("out");
    Var x("x");
    out(x) = edge(x + shift) + edge(x - 1);
    std::vector<InputRegion> r = input_regions({out}, {16});
    ASSERT_EQ(r.size(), 2u); // the image, then the scalar
    EXPECT_EQ(r[0].mins, (std::vector<int64_t>{-1}));
    EXPECT_EQ(r[0].extents, (std::vector<int64_t>{20}));
    EXPECT_EQ(r[1].argument.name, "shift");
}

TEST(InputRegions, AReadOfTheInputsOwnSizeFallsBackToTheOutputsExtent) {
    ImageParam in(Float(32), 1, "in");
    Func flip("flip");
    Var x("x");
    flip(x) = in(in.width() - 1 - x);
    std::vector<InputRegion> r = input_regions({flip}, {40});
    EXPECT_EQ(r[0].mins, (std::vector<int64_t>{0}));
    EXPECT_EQ(r[0].extents, (std::vector<int64_t>{40}));
}

TEST(InputRegions, EstimatesSizeAnInputAndTheReadsThatDependOnIt) {
    // An RDom over A's width: B's rows depend on A's size, which only its estimate gives.
    ImageParam A(Float(32), 2, "A"), B(Float(32), 2, "B");
    Var j("j"), i("i");
    RDom k(0, A.width(), "k");
    Func C("C");
    C(j, i) = 0.0f;
    C(j, i) += A(k, i) * B(j, k);
    A.set_estimate(0, 0, 24);
    std::vector<InputRegion> r = input_regions({C}, {16, 8});
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].argument.name, "A");
    EXPECT_EQ(r[0].extents, (std::vector<int64_t>{24, 8}));
    EXPECT_EQ(r[1].extents, (std::vector<int64_t>{16, 24}));
    // An estimate wins over the region read.
    A.set_estimates({{-2, 30}, {0, 9}});
    r = input_regions({C}, {16, 8});
    EXPECT_EQ(r[0].mins, (std::vector<int64_t>{-2, 0}));
    EXPECT_EQ(r[0].extents, (std::vector<int64_t>{30, 9}));
}

TEST(InputRegions, BadEstimatesNameTheFuncOrImageAndTheValue) {
    ImageParam in(Float(32), 2, "in");
    Func out("out");
    Var x("x"), y("y"), z("z");
    out(x, y) = in(x, y);
    EXPECT_EQ(error_of<std::exception>([&] { out.set_estimate(z, 0, 8); }),
              "set_estimate: 'z' is not a dimension of 'out'; its dimensions are x, y");
    EXPECT_EQ(error_of<std::exception>([&] { out.set_estimate(x, 0, 0); }),
              "set_estimate: the estimate of 'x' in 'out' is min 0 extent 0; give an extent of at "
              "least 1 and a region inside 32-bit coordinates");
    EXPECT_EQ(error_of<std::exception>([&] {
                  out.set_estimates({{0, 8}});
              }),
              "set_estimates: 'out' has 2 dimensions, but 1 estimates were given; give one {min, "
              "extent} per dimension");
    out.set_estimates({{0, 8}, {0, 4}});
    EXPECT_EQ(out.estimates()[1], std::make_pair(int64_t(0), int64_t(4)));
    EXPECT_EQ(error_of<std::exception>([&] { in.set_estimate(2, 0, 8); }),
              "set_estimate: ImageParam 'in' has 2 dimensions, so there is no dimension 2; give "
              "0..1");
    EXPECT_EQ(error_of<std::exception>([&] { in.set_estimate(0, 0, -3); }),
              "set_estimate: the estimate of dimension 0 of ImageParam 'in' is min 0 extent -3; "
              "give an extent of at least 1 and a region inside 32-bit coordinates");
    EXPECT_EQ(error_of<std::exception>([&] {
                  in.set_estimates({{0, 8}, {0, 8}, {0, 8}});
              }),
              "set_estimates: ImageParam 'in' has 2 dimensions, but 3 estimates were given; give "
              "one {min, extent} per dimension");
}

TEST(InputRegions, ReadsThatDependOnDataOrUnsetParamsAreErrors) {
    ImageParam in(Float(32), 1, "in");
    ImageParam index(Int(32), 1, "index");
    Func gather("gather");
    Var x("x");
    gather(x) = in(index(x));
    EXPECT_EQ(
        error_of<std::exception>([&] { input_regions({gather}, {8}); })
            .rfind("cannot size input 'in' in dimension 0: the pipeline reads it at coordinates "
                   "that depend on data",
                   0),
        0u);
    Param<int> shift("shift");
    Func shifted("shifted");
    shifted(x) = in(x + shift);
    EXPECT_EQ(error_of<std::exception>([&] { input_regions({shifted}, {8}); }),
              "param 'shift' has no value; give it one (Param<T>(name, value) or set())");
}

} // namespace
} // namespace kiln
