// build_func_schedule: how a Func's directives become the loops of its stages. Most of it is
// exercised end to end by tests/pipeline; these tests pin the GPU loop marks, which nothing
// lowers yet.
#include "schedule/Schedule.h"

#include <functional>

#include <gtest/gtest.h>

#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IROperator.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

using test::error_of;

struct Loop {
    std::string name;
    ForType for_type;
    int gpu_dim;
};

/// The loops of a stage, innermost first, compared by name, type and GPU dimension.
void expect_loops(const StageSchedule &s, const std::vector<Loop> &want) {
    ASSERT_EQ(s.dims.size(), want.size()) << loop_names(s);
    for (size_t i = 0; i < want.size(); i++) {
        SCOPED_TRACE("loop " + std::to_string(i) + " (" + want[i].name + ")");
        EXPECT_EQ(s.dims[i].name, want[i].name);
        EXPECT_EQ(for_type_name(s.dims[i].for_type), std::string(for_type_name(want[i].for_type)));
        EXPECT_EQ(s.dims[i].gpu_dim, want[i].gpu_dim);
    }
}

Func make_2d(const std::string &name) {
    Func f(name);
    Var x("x"), y("y");
    f(x, y) = x + y * 2;
    return f;
}

TEST(Schedule, GpuTileOfTwoLoopsMarksTheBlocksAndThreadsWithTheirDimensions) {
    Func f = make_2d("f");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    f.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
    FuncSchedule s = build_func_schedule(*f.function(), true);
    expect_loops(s.stages[0], {{"xi", ForType::GPUThread, 0},
                               {"yi", ForType::GPUThread, 1},
                               {"xo", ForType::GPUBlock, 0},
                               {"yo", ForType::GPUBlock, 1}});
    EXPECT_FALSE(s.stages[0].gpu_single_thread);
}

TEST(Schedule, GpuTileOfThreeLoopsMarksTheBlocksAndThreadsWithTheirDimensions) {
    Func f("f");
    Var x("x"), y("y"), z("z"), xo("xo"), yo("yo"), zo("zo"), xi("xi"), yi("yi"), zi("zi");
    f(x, y, z) = x + y + z;
    f.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 8, 4, 2);
    expect_loops(build_func_schedule(*f.function(), true).stages[0],
                 {{"xi", ForType::GPUThread, 0},
                  {"yi", ForType::GPUThread, 1},
                  {"zi", ForType::GPUThread, 2},
                  {"xo", ForType::GPUBlock, 0},
                  {"yo", ForType::GPUBlock, 1},
                  {"zo", ForType::GPUBlock, 2}});
}

TEST(Schedule, GpuTileOfOneLoopLeavesTheOtherLoopsSerial) {
    Func f = make_2d("f");
    f.gpu_tile(Var("x"), Var("xo"), Var("xi"), 32);
    expect_loops(
        build_func_schedule(*f.function(), true).stages[0],
        {{"xi", ForType::GPUThread, 0}, {"xo", ForType::GPUBlock, 0}, {"y", ForType::Serial, -1}});
}

TEST(Schedule, TheFirstLoopOfAGpuCallIsDimensionXWhereverItIsInTheNest) {
    Func f = make_2d("f");
    f.gpu_blocks(Var("y"), Var("x"));
    expect_loops(build_func_schedule(*f.function(), true).stages[0],
                 {{"x", ForType::GPUBlock, 1}, {"y", ForType::GPUBlock, 0}});
}

TEST(Schedule, ALoopMadeSerialAgainHasNoGpuDimension) {
    Func f = make_2d("f");
    f.gpu_threads(Var("x"), Var("y")).serial(Var("y"));
    expect_loops(build_func_schedule(*f.function(), true).stages[0],
                 {{"x", ForType::GPUThread, 0}, {"y", ForType::Serial, -1}});
}

TEST(Schedule, SplittingAGpuBlockLoopKeepsTheOuterLoopOnTheBlocks) {
    Func f = make_2d("f");
    f.gpu_blocks(Var("x")).split(Var("x"), Var("xo"), Var("xi"), 4);
    expect_loops(
        build_func_schedule(*f.function(), true).stages[0],
        {{"xi", ForType::Serial, -1}, {"xo", ForType::GPUBlock, 0}, {"y", ForType::Serial, -1}});
}

TEST(Schedule, GpuSingleThreadMarksOnlyItsStage) {
    Func f("f");
    Var x("x");
    RDom r(0, 8, "r");
    f(x) = x;
    f(x) += r;
    f.update(0).gpu_single_thread();
    FuncSchedule s = build_func_schedule(*f.function(), true);
    EXPECT_FALSE(s.stages[0].gpu_single_thread);
    EXPECT_TRUE(s.stages[1].gpu_single_thread);
}

TEST(Schedule, GpuThreadsOfAnIndependentRVarIsAccepted) {
    Func f("f");
    Var x("x");
    RDom r(0, 8, "r");
    f(x) = x;
    f(r) = f(r) * 2;
    f.update(0).gpu_threads(r);
    expect_loops(build_func_schedule(*f.function(), true).stages[1],
                 {{"r.x", ForType::GPUThread, 0}});
}

TEST(Schedule, GpuBlocksOfADependentRVarSaysToUseRfactor) {
    Func f("gpu_rvar_f");
    Var x("x");
    RDom r(0, 8, "r");
    f(x) = x;
    f(x) += r;
    f.update(0).gpu_blocks(r);
    EXPECT_EQ(error_of([&] { build_func_schedule(*f.function(), true); }),
              "gpu_blocks: 'r.x' of 'gpu_rvar_f.update(0)' is an RVar whose iterations depend on "
              "each other (they update the same point of 'gpu_rvar_f'); use rfactor to make a "
              "pure variable of it, then gpu_blocks that");
}

TEST(Schedule, GpuThreadsOfAFusedDependentRVarNamesTheRVarItCovers) {
    Func f("gpu_fused_f");
    Var x("x");
    RDom r({{0, 4}, {0, 4}}, "r");
    f(x) = x;
    f(r.x) += r.y;
    f.update(0).fuse(r.x, r.y, RVar("r.f")).gpu_threads(RVar("r.f"));
    EXPECT_EQ(error_of([&] { build_func_schedule(*f.function(), true); }),
              "gpu_threads: 'r.f' of 'gpu_fused_f.update(0)' is an RVar whose iterations depend on "
              "each other (it covers RVar 'r.y') (they update the same point of 'gpu_fused_f'); "
              "use rfactor to make a pure variable of it, then gpu_threads that");
}

TEST(Schedule, GpuThreadsOfALoopThatDoesNotExistListsTheLoops) {
    Func f = make_2d("gpu_missing_f");
    f.gpu_threads(Var("x"), Var("z"));
    EXPECT_EQ(error_of([&] { build_func_schedule(*f.function(), true); }),
              "gpu_threads: 'gpu_missing_f' has no loop 'z'; its loops are x, y (innermost "
              "first)");
}

} // namespace
} // namespace kiln
