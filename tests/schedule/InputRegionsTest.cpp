#include "schedule/InputRegions.h"

#include <functional>

#include <gtest/gtest.h>

#include "lang/BoundaryConditions.h"
#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/Param.h"

namespace kiln {
namespace {

std::string error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const std::exception &e) {
        return e.what();
    }
    return "(no error)";
}

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

TEST(InputRegions, ReadsThatDependOnDataOrUnsetParamsAreErrors) {
    ImageParam in(Float(32), 1, "in");
    ImageParam index(Int(32), 1, "index");
    Func gather("gather");
    Var x("x");
    gather(x) = in(index(x));
    EXPECT_EQ(
        error_of([&] { input_regions({gather}, {8}); })
            .rfind("cannot size input 'in' in dimension 0: the pipeline reads it at coordinates "
                   "that depend on data",
                   0),
        0u);
    Param<int> shift("shift");
    Func shifted("shifted");
    shifted(x) = in(x + shift);
    EXPECT_EQ(error_of([&] { input_regions({shifted}, {8}); }),
              "param 'shift' has no value; give it one (Param<T>(name, value) or set())");
}

} // namespace
} // namespace kiln
