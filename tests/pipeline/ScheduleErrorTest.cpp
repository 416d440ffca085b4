// Illegal schedules: each raises a CompileError (when the call is made, or when the pipeline is
// lowered) whose message names the Func, the primitive and what would be legal instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kiln.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

/// The message of the CompileError raised by lowering the pipeline of f.
std::string lowering_error_of(const Func &f) {
    return test::error_of([&] { Pipeline(f).lower(); });
}

Buffer<int> input_2d(const std::string &name, int w = 16, int h = 16) {
    Buffer<int> b({w, h}, name);
    int k = 0;
    b.for_each_offset([&](int64_t offset) { b.data()[offset] = (k++ * 7) % 13; });
    return b;
}

// --- compute_at and store_at -------------------------------------------------------------------

TEST(ScheduleErrors, ComputeAtALoopThatDoesNotExistListsTheConsumersLoops) {
    Func g("cat_missing_g"), f("cat_missing_f");
    Var x("x"), y("y");
    g(x, y) = x + y;
    f(x, y) = g(x, y) * 2;
    g.compute_at(f, Var("z"));
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("compute_at: 'cat_missing_f' has no loop 'z' to compute "
                                "'cat_missing_g' at"),
                      HasSubstr("its loops are x, y (innermost first), or use compute_root()")));
}

TEST(ScheduleErrors, ComputeAtListsTheLoopsAfterSplits) {
    Func g("cat_split_g"), f("cat_split_f");
    Var x("x"), y("y"), xo("xo"), xi("xi");
    g(x, y) = x + y;
    f(x, y) = g(x, y) * 2;
    f.split(x, xo, xi, 4);
    g.compute_at(f, x);
    EXPECT_THAT(lowering_error_of(f), HasSubstr("its loops are xi, xo, y (innermost first)"));
}

TEST(ScheduleErrors, ComputeAtALoopOfAStageThatDoesNotUseTheProducerSaysSo) {
    // g is used only by the update of f; xo is a loop of f's pure definition only.
    Func g("cat_stage_g"), f("cat_stage_f");
    Var x("x"), xo("xo"), xi("xi");
    g(x) = x * 3;
    f(x) = x;
    f(x) += g(x);
    f.split(x, xo, xi, 4);
    g.compute_at(f, xo);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("compute_at: loop 'xo' of 'cat_stage_f' does not enclose any use "
                                "of 'cat_stage_g'"),
                      HasSubstr("use compute_root()")));
}

TEST(ScheduleErrors, ComputeAtAConsumerThatDoesNotCallTheProducerSaysSo) {
    Func g("cat_other_g"), h("cat_other_h"), f("cat_other_f");
    Var x("x");
    g(x) = x * 3;
    h(x) = x + 1;
    f(x) = g(x) + h(x);
    h.compute_root();
    g.compute_at(h, x);
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("loop 'x' of 'cat_other_h' does not enclose any use of 'cat_other_g'"));
}

TEST(ScheduleErrors, ComputeAtALoopWhenTheProducerIsAlsoUsedOutsideItSaysSo) {
    Func g("cat_outside_g"), h("cat_outside_h"), f("cat_outside_f");
    Var x("x");
    g(x) = x * 3;
    h(x) = g(x) + 1;
    f(x) = h(x) + g(x + 1);
    h.compute_root();
    g.compute_at(h, x);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("compute_at: 'cat_outside_g' is computed inside loop 'x' of "
                                "'cat_outside_h', but it is also used outside that loop"),
                      HasSubstr("compute it at root or at a loop that encloses every use")));
}

TEST(ScheduleErrors, ComputeAtALoopNameSharedByTwoStagesThatBothUseTheProducerSaysSo) {
    Func g("cat_two_stages_g"), f("cat_two_stages_f");
    Var x("x");
    g(x) = x * 3;
    f(x) = g(x);
    f(x) += g(x + 1);
    g.compute_at(f, x);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("compute_at: 'cat_two_stages_g' is used inside loop 'x' of "
                                "several stages of 'cat_two_stages_f'"),
                      HasSubstr("compute it at root or at a loop that encloses all of them")));
}

TEST(ScheduleErrors, ComputeAtALoopOfAnInlinedFuncSaysItHasNoLoops) {
    Func g("cat_inlined_g"), h("cat_inlined_h"), f("cat_inlined_f");
    Var x("x");
    g(x) = x * 3;
    h(x) = g(x) + 1;
    f(x) = h(x) * 2;
    g.compute_at(h, x);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("'cat_inlined_h' is inlined and has no loops"),
                      HasSubstr("schedule 'cat_inlined_h' with compute_root() or compute_at()")));
}

TEST(ScheduleErrors, ComputeAtAFuncOutsideThePipelineSaysSo) {
    Func g("cat_stranger_g"), f("cat_stranger_f"), stranger("cat_stranger");
    Var x("x");
    g(x) = x;
    f(x) = g(x);
    stranger(x) = x;
    g.compute_at(stranger, x);
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("compute_at: 'cat_stranger_g' is scheduled at a loop of "
                          "'cat_stranger', which is not a Func of this pipeline"));
}

TEST(ScheduleErrors, ComputeAtOneOfItsOwnLoopsIsRejectedAtTheCall) {
    Func f("cat_self");
    Var x("x");
    f(x) = x;
    EXPECT_THAT(test::error_of([&] { f.compute_at(f, x); }),
                HasSubstr("compute_at: 'cat_self' cannot be computed at one of its own loops"));
}

TEST(ScheduleErrors, ComputeAtOnAnOutputSaysItIsComputedAtRoot) {
    Func g("cat_output_g"), f("cat_output_f");
    Var x("x");
    g(x) = x;
    f(x) = g(x);
    g.compute_root();
    f.compute_at(g, x);
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("compute_at: 'cat_output_f' is an output of the pipeline and is "
                          "computed at root; remove compute_at"));
}

TEST(ScheduleErrors, StoreAtALoopInsideTheComputeLevelNamesBothLoops) {
    Func g("sat_inside_g"), f("sat_inside_f");
    Var x("x"), y("y");
    g(x, y) = x + y;
    f(x, y) = g(x, y) + g(x + 1, y);
    g.compute_at(f, y).store_at(f, x);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("store_at: loop 'x' of 'sat_inside_f' must enclose the loop 'y' "
                                "of 'sat_inside_f' where 'sat_inside_g' is computed"),
                      HasSubstr("store it at that loop or further out")));
}

TEST(ScheduleErrors, StoreAtALoopOfAFuncComputedAtRootSaysItMustEncloseTheComputeLevel) {
    Func g("sat_root_g"), f("sat_root_f");
    Var x("x"), y("y");
    g(x, y) = x + y;
    f(x, y) = g(x, y) * 2;
    g.compute_root().store_at(f, y);
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("store_at: loop 'y' of 'sat_root_f' must enclose the loop"));
}

TEST(ScheduleErrors, StoreAtALoopThatDoesNotExistListsTheLoops) {
    Func g("sat_missing_g"), f("sat_missing_f");
    Var x("x"), y("y");
    g(x, y) = x + y;
    f(x, y) = g(x, y) * 2;
    g.compute_at(f, x).store_at(f, Var("w"));
    EXPECT_THAT(lowering_error_of(f), AllOf(HasSubstr("store_at: 'sat_missing_f' has no loop 'w'"),
                                            HasSubstr("its loops are x, y")));
}

TEST(ScheduleErrors, StoreAtOneOfItsOwnLoopsIsRejectedAtTheCall) {
    Func f("sat_self");
    Var x("x");
    f(x) = x;
    EXPECT_THAT(test::error_of([&] { f.store_at(f, x); }),
                HasSubstr("store_at: 'sat_self' cannot be stored at one of its own loops"));
}

// --- vectorize, parallel and unroll -------------------------------------------------------------

TEST(ScheduleErrors, VectorizingAnRVarThatUpdatesOnePointSaysToUseRfactor) {
    Buffer<int> in = input_2d("vec_rvar_in");
    Func f("vec_rvar_f");
    Var x("x");
    RDom r(0, 8, "r");
    f(x) = 0;
    f(x) += in(x, r);
    f.update(0).vectorize(r);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("vectorize: 'r.x' of 'vec_rvar_f.update(0)' is an RVar whose "
                                "iterations depend on each other"),
                      HasSubstr("use rfactor to make a pure variable of it, then vectorize that")));
}

TEST(ScheduleErrors, VectorizingTheRVarOfAScanSaysItsIterationsDepend) {
    Buffer<int> in = input_2d("vec_scan_in");
    Func f("vec_scan_f");
    Var x("x");
    RDom r(1, 8, "r");
    f(x) = in(x, 0);
    f(r) = f(r - 1) + f(r);
    f.update(0).vectorize(r);
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("vectorize: 'r.x' of 'vec_scan_f.update(0)' is an RVar whose "
                          "iterations depend on each other"));
}

TEST(ScheduleErrors, VectorizingASplitRVarOfAReductionIsStillRejected) {
    Buffer<int> in = input_2d("vec_split_rvar_in");
    Func f("vec_split_rvar_f");
    Var x("x");
    RDom r(0, 16, "r");
    f(x) = 0;
    f(x) += in(x, r);
    f.update(0).split(r, RVar("r.xo"), RVar("r.xi"), 4).vectorize(RVar("r.xi"));
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("vectorize: 'r.xi' of 'vec_split_rvar_f.update(0)' is an RVar whose "
                          "iterations depend on each other"));
}

TEST(ScheduleErrors, ParallelizingAnRVarWithoutRfactorSaysToUseRfactor) {
    Buffer<int> in = input_2d("par_rvar_in");
    Func f("par_rvar_f");
    Var x("x");
    RDom r({{0, 4}, {0, 4}}, "r");
    f(x) = 0;
    f(x) += in(x + r.x, r.y);
    f.update(0).parallel(r.y);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("parallel: 'r.y' of 'par_rvar_f.update(0)' is an RVar whose "
                                "iterations depend on each other"),
                      HasSubstr("use rfactor to make a pure variable of it, then parallel that")));
}

TEST(ScheduleErrors, ParallelizingTheRVarOfAHistogramIsRejected) {
    Buffer<int> in = input_2d("par_hist_in");
    Func hist("par_hist");
    Var x("x");
    RDom r({{0, 16}, {0, 16}}, "r");
    hist(x) = 0;
    hist(clamp(in(r.x, r.y), 0, 15)) += 1;
    hist.update(0).parallel(r.x);
    EXPECT_THAT(lowering_error_of(hist),
                HasSubstr("parallel: 'r.x' of 'par_hist.update(0)' is an RVar whose iterations "
                          "depend on each other"));
}

TEST(ScheduleErrors, UnrollOfALoopWithANonConstantExtentSaysToSplitFirst) {
    Func f("unroll_var_f");
    Var x("x");
    f(x) = x * 2;
    f.unroll(x);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("unroll: loop 'unroll_var_f.s0.x' has extent"),
                      HasSubstr("which is not a constant; split it by a constant factor first "
                                "and unroll the inner loop")));
}

TEST(ScheduleErrors, UnrollOfAnRVarWithAParamExtentSaysToSplitFirst) {
    Param<int> n("unroll_rvar_n");
    Buffer<int> in = input_2d("unroll_rvar_in");
    Func f("unroll_rvar_f");
    Var x("x");
    RDom r(0, n, "r");
    f(x) = 0;
    f(x) += in(x, r);
    f.update(0).unroll(r);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("unroll: loop 'unroll_rvar_f.s1.r.x' has extent"),
                      HasSubstr("which is not a constant")));
}

TEST(ScheduleErrors, UnrollBeyondTheLimitSaysWhatTheLimitIs) {
    Func f("unroll_big_f");
    Var x("x"), xo("xo"), xi("xi");
    f(x) = x * 2;
    f.split(x, xo, xi, 300).unroll(xi);
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("unroll: loop 'unroll_big_f.s0.xi' has extent 300, more than the limit "
                          "of 256"));
}

TEST(ScheduleErrors, VectorizeOfALoopWithANonConstantExtentSaysToSplitFirst) {
    Func f("vec_var_f");
    Var x("x");
    f(x) = x * 2;
    f.vectorize(x);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("vectorize: loop 'vec_var_f.s0.x' has extent"),
                      HasSubstr("which is not a constant; split it by a constant factor first")));
}

TEST(ScheduleErrors, VectorizeWiderThanTheLimitSaysWhichWidthsAreSupported) {
    Func f("vec_wide_f");
    Var x("x");
    f(x) = x * 2;
    f.vectorize(x, 65);
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("vectorize: loop 'vec_wide_f.s0.x_vi' has extent 65, outside the "
                          "supported vector widths 2 to 64"));
}

// --- split, fuse, reorder -----------------------------------------------------------------------

TEST(ScheduleErrors, ASplitFactorOfZeroIsRejectedAtTheCall) {
    Func f("split_zero_f");
    Var x("x");
    f(x) = x;
    EXPECT_THAT(test::error_of([&] { f.split(x, Var("xo"), Var("xi"), 0); }),
                HasSubstr("split: factor for 'x' of 'split_zero_f' must be a positive constant, "
                          "got 0"));
}

TEST(ScheduleErrors, ANegativeSplitFactorIsRejectedAtTheCall) {
    Func f("split_negative_f");
    Var x("x");
    f(x) = x;
    EXPECT_THAT(test::error_of([&] { f.split(x, Var("xo"), Var("xi"), -4); }),
                HasSubstr("split: factor for 'x' of 'split_negative_f' must be a positive "
                          "constant, got -4"));
    EXPECT_THAT(test::error_of([&] { f.vectorize(x, -4); }),
                HasSubstr("vectorize: factor for 'x' of 'split_negative_f' must be a positive "
                          "constant, got -4"));
    EXPECT_THAT(test::error_of([&] { f.unroll(x, 0); }),
                HasSubstr("unroll: factor for 'x' of 'split_negative_f' must be a positive "
                          "constant, got 0"));
    EXPECT_THAT(test::error_of([&] { f.tile(x, Var("y"), Var("xi"), Var("yi"), 4, -1); }),
                HasSubstr("must be a positive constant, got -1"));
    EXPECT_TRUE(f.directives().empty() || f.directives().back().primitive == "split");
}

TEST(ScheduleErrors, SplittingAVarOfAnotherStageListsTheStagesLoops) {
    Buffer<int> in = input_2d("split_other_in");
    Func f("split_other_f");
    Var x("x"), y("y");
    RDom r(0, 4, "r");
    f(x, y) = x + y;
    f(x, 0) += in(x, r);
    // The update writes only row 0: it has no loop over y.
    f.update(0).split(y, Var("yo"), Var("yi"), 2);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("split: 'split_other_f.update(0)' has no loop 'y'"),
                      HasSubstr("its loops are r.x, x (innermost first)")));
}

TEST(ScheduleErrors, SplittingAnRVarOnThePureStageListsThePureLoops) {
    Buffer<int> in = input_2d("split_rvar_pure_in");
    Func f("split_rvar_pure_f");
    Var x("x");
    RDom r(0, 4, "r");
    f(x) = 0;
    f(x) += in(x, r);
    f.split(r, RVar("r.xo"), RVar("r.xi"), 2);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("split: 'split_rvar_pure_f' has no loop 'r.x'"),
                      HasSubstr("its loops are x (innermost first)")));
}

TEST(ScheduleErrors, ReorderWithAnRVarOnThePureStageListsThePureLoops) {
    Buffer<int> in = input_2d("reorder_rvar_in");
    Func f("reorder_rvar_f");
    Var x("x"), y("y");
    RDom r(0, 4, "r");
    f(x, y) = 0;
    f(x, y) += in(x + r, y);
    f.reorder(r, y);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("reorder: 'reorder_rvar_f' has no loop 'r.x'"),
                      HasSubstr("its loops are x, y (innermost first)")));
}

TEST(ScheduleErrors, ReorderingTheRVarsOfADependentReductionSaysTheyKeepTheirOrder) {
    Buffer<int> in = input_2d("reorder_rvars_in");
    Func f("reorder_rvars_f");
    Var x("x");
    RDom r({{0, 4}, {0, 4}}, "r");
    f(x) = 0;
    f(x) = f(x) * 3 + in(r.x, r.y);
    f.update(0).reorder(r.y, r.x);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("reorder: in 'reorder_rvars_f.update(0)', the RVars must keep "
                                "their order (r.x, r.y, x)"),
                      HasSubstr("changes the order the update applies in")));
}

TEST(ScheduleErrors, NamingALoopTwiceInReorderIsRejectedAtTheCall) {
    Func f("reorder_twice_f");
    Var x("x"), y("y");
    f(x, y) = x + y;
    EXPECT_THAT(test::error_of([&] { f.reorder(x, y, x); }),
                HasSubstr("reorder of 'reorder_twice_f': 'x' is named twice"));
}

TEST(ScheduleErrors, SplitIntoANameTheStageAlreadyHasSaysToPickANewName) {
    Func f("split_taken_f");
    Var x("x"), y("y");
    f(x, y) = x + y;
    f.split(x, y, Var("xi"), 4);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("split: 'split_taken_f' already has a loop named 'y'"),
                      HasSubstr("pick a new name")));
}

TEST(ScheduleErrors, SplitIntoTwoEqualNamesIsRejectedAtTheCall) {
    Func f("split_same_f");
    Var x("x");
    f(x) = x;
    EXPECT_THAT(test::error_of([&] { f.split(x, Var("a"), Var("a"), 4); }),
                HasSubstr("the outer and inner names are both 'a'"));
}

TEST(ScheduleErrors, FuseOfLoopsThatAreNotAdjacentSaysToReorderFirst) {
    Func f("fuse_far_f");
    Var x("x"), y("y"), z("z");
    f(x, y, z) = x + y + z;
    f.fuse(x, z, Var("xz"));
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("fuse: in 'fuse_far_f', 'z' must be the loop just outside 'x'"),
                      HasSubstr("the loops are x, y, z (innermost first); reorder them first")));
}

TEST(ScheduleErrors, FuseOfAnRVarWithAPureLoopIsRejected) {
    Buffer<int> in = input_2d("fuse_mixed_in");
    Func f("fuse_mixed_f");
    Var x("x");
    RDom r(0, 4, "r");
    f(x) = 0;
    f(x) += in(x, r);
    f.update(0).fuse(r, x, Var("rx"));
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("fuse: 'fuse_mixed_f.update(0)' cannot fuse the RVar and pure loops "
                          "'r.x' and 'x'"));
}

TEST(ScheduleErrors, ShiftInwardsOnAnUpdateSaysToUseGuardWithIfOrRoundUp) {
    Buffer<int> in = input_2d("shift_update_in");
    Func f("shift_update_f");
    Var x("x"), xo("xo"), xi("xi");
    RDom r(0, 4, "r");
    f(x) = 0;
    f(x) += in(x, r);
    f.update(0).split(x, xo, xi, 4, TailStrategy::ShiftInwards);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("split: 'shift_update_f.update(0)' is an update, so 'x' cannot "
                                "use TailStrategy::ShiftInwards"),
                      HasSubstr("use GuardWithIf or RoundUp")));
}

TEST(ScheduleErrors, RoundUpOnAnRVarSaysToUseGuardWithIf) {
    Buffer<int> in = input_2d("round_rvar_in");
    Func f("round_rvar_f");
    Var x("x");
    RDom r(0, 10, "r");
    f(x) = 0;
    f(x) += in(x, r);
    f.update(0).split(r, RVar("r.xo"), RVar("r.xi"), 4, TailStrategy::RoundUp);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("split: RVar 'r.x' of 'round_rvar_f.update(0)' must use "
                                "TailStrategy::GuardWithIf; RoundUp would visit")));
}

TEST(ScheduleErrors, RoundUpOnASplitLoopOfAnUpdateSaysItWouldApplyTheUpdateTwice) {
    // Rounding up the inner loop xi runs the first points of the next tile again: the update
    // would be applied twice to them (it was, until this check existed: 1 2 3 4 10 12 7 8).
    Buffer<int> in = input_2d("round_twice_in", 8, 1);
    Func f("round_twice_f");
    Var x("x"), xo("xo"), xi("xi"), xio("xio"), xii("xii");
    f(x) = 0;
    f(x) = f(x) + in(x, 0);
    f.update(0)
        .split(x, xo, xi, 4, TailStrategy::GuardWithIf)
        .split(xi, xio, xii, 3, TailStrategy::RoundUp);
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("split: 'round_twice_f.update(0)' is an update, so 'xi'"),
                      HasSubstr("cannot use TailStrategy::RoundUp"),
                      HasSubstr("apply the update twice; use GuardWithIf")));
}

TEST(ScheduleErrors, RoundUpOnTheOriginalLoopOfAnUpdateIsAccepted) {
    Buffer<int> in = input_2d("round_once_in", 8, 1);
    Func g("round_once_g"), f("round_once_f");
    Var x("x"), xo("xo"), xi("xi");
    g(x) = 0;
    g(x) = g(x) + in(x, 0);
    f(x) = g(x);
    g.compute_root().update(0).split(x, xo, xi, 3, TailStrategy::RoundUp);
    EXPECT_EQ(lowering_error_of(f), "(no error)");
}

TEST(ScheduleErrors, ScheduleOfAnUpdateThatDoesNotExistSaysHowManyThereAre) {
    Func f("no_update_f");
    Var x("x");
    f(x) = x;
    EXPECT_THAT(test::error_of([&] { f.update(0); }),
                HasSubstr("update 0 of Func 'no_update_f' does not exist; it has 0 update "
                          "definitions"));
}

// --- compute_inline, reorder_storage, bound -----------------------------------------------------

TEST(ScheduleErrors, ComputeInlineOfAFuncWithUpdatesSaysToComputeItSomewhere) {
    Func g("inline_update_g"), f("inline_update_f");
    Var x("x");
    g(x) = x;
    g(x) += 1;
    f(x) = g(x) * 2;
    g.compute_inline();
    EXPECT_THAT(lowering_error_of(f),
                AllOf(HasSubstr("compute_inline: 'inline_update_g' has update definitions and "
                                "cannot be inlined"),
                      HasSubstr("use compute_root() or compute_at()")));
}

TEST(ScheduleErrors, ComputeInlineOfAnOutputSaysItIsAnOutput) {
    Func f("inline_output_f");
    Var x("x");
    f(x) = x;
    f.compute_inline();
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("compute_inline: 'inline_output_f' is an output of the pipeline"));
}

TEST(ScheduleErrors, ReorderStorageOfAVarThatIsNotADimensionListsTheDimensions) {
    Func f("storage_f");
    Var x("x"), y("y");
    f(x, y) = x + y;
    EXPECT_THAT(test::error_of([&] { f.reorder_storage(y, Var("z")); }),
                HasSubstr("reorder_storage: 'z' is not a dimension of 'storage_f'; its "
                          "dimensions are x, y"));
}

TEST(ScheduleErrors, BoundOfAVarThatIsNotADimensionListsTheDimensions) {
    Func f("bound_f");
    Var x("x");
    f(x) = x;
    EXPECT_THAT(test::error_of([&] { f.bound(Var("q"), 0, 4); }),
                HasSubstr("bound: 'q' is not a dimension of 'bound_f'; its dimensions are x"));
    EXPECT_THAT(test::error_of([&] { f.bound(x, 0, -1); }),
                HasSubstr("bound: extent of 'x' in 'bound_f' must be >= 0, got -1"));
}

// --- rfactor ------------------------------------------------------------------------------------

TEST(ScheduleErrors, RfactorOnThePureStageSaysToCallItOnAnUpdate) {
    Buffer<int> in = input_2d("rf_pure_in");
    Func f("rf_pure_f");
    Var x("x"), u("u");
    RDom r(0, 4, "r");
    f(x) = 0;
    f(x) += in(x, r);
    EXPECT_THAT(test::error_of([&] { Stage(f.function(), 0).rfactor(r, u); }),
                AllOf(HasSubstr("rfactor: 'rf_pure_f' pure definition has no RDom"),
                      HasSubstr("call rfactor on an update, e.g. rf_pure_f.update(0).rfactor")));
}

TEST(ScheduleErrors, RfactorOfANonAssociativeUpdateShowsTheUpdate) {
    Buffer<int> in = input_2d("rf_nonassoc_in");
    Func f("rf_nonassoc_f");
    Var x("x"), u("u");
    RDom r(0, 4, "r");
    f(x) = 0;
    f(x) = f(x) * 2 + in(x, r);
    EXPECT_THAT(test::error_of([&] { f.update(0).rfactor(r, u); }),
                AllOf(HasSubstr("rfactor: rf_nonassoc_f.update(0) = "),
                      HasSubstr("is not an associative update of the form f(x) = f(x) + e (or *, "
                                "min, max, fma(a, b, f(x)))")));
}

TEST(ScheduleErrors, RfactorOfAnRVarOfAnotherRDomListsTheUpdatesRVars) {
    Buffer<int> in = input_2d("rf_foreign_in");
    Func f("rf_foreign_f");
    Var x("x"), u("u");
    RDom r({{0, 4}, {0, 4}}, "r"), s(0, 4, "s");
    f(x) = 0;
    f(x) += in(x + r.x, r.y);
    EXPECT_THAT(test::error_of([&] { f.update(0).rfactor(s, u); }),
                HasSubstr("rfactor: 's.x' is not an RVar of rf_foreign_f.update(0); its RVars "
                          "are r.x, r.y"));
}

TEST(ScheduleErrors, RfactorOfASplitRVarWhoseExtentIsNotAMultipleOfTheFactorSaysSo) {
    Buffer<int> in = input_2d("rf_split_odd_in");
    Func f("rf_split_odd_f");
    Var x("x"), u("u");
    RVar ro("ro"), ri("ri");
    RDom r(0, 15, "r");
    f(x) = 0;
    f(x) += in(r, x);
    EXPECT_THAT(test::error_of([&] { f.update(0).split(r, ro, ri, 4).rfactor(ro, u); }),
                HasSubstr("rfactor: 'ro' is the outer part of a split of 'r.x' by 4 in "
                          "rf_split_odd_f.update(0); rfactor of a split RVar needs the RVar's "
                          "extent to be a constant multiple of the factor, and the extent of "
                          "'r.x' is 15 (split it by a divisor of its extent)"));
}

TEST(ScheduleErrors, RfactorOfOneRVarTwiceOrIntoOneVarTwiceSaysWhichOne) {
    Buffer<int> in = input_2d("rf_twice_in");
    Func f("rf_twice_f");
    Var x("x"), u("u"), v("v");
    RDom r({{0, 4}, {0, 4}}, "r");
    f(x) = 0;
    f(x) += in(x + r.x, r.y);
    EXPECT_THAT(test::error_of([&] {
                    f.update(0).rfactor({{r.x, u}, {r.x, v}});
                }),
                HasSubstr("rfactor: rf_twice_f.update(0) names RVar 'r.x' twice; preserve each "
                          "RVar once"));
    EXPECT_THAT(test::error_of([&] {
                    f.update(0).rfactor({{r.x, u}, {r.y, u}});
                }),
                HasSubstr("rfactor: rf_twice_f.update(0) names Var 'u' for two RVars; give each "
                          "preserved RVar its own new Var"));
}

TEST(ScheduleErrors, RfactorIntoAnExistingPureVarSaysToPassANewVar) {
    Buffer<int> in = input_2d("rf_taken_in");
    Func f("rf_taken_f");
    Var x("x");
    RDom r(0, 4, "r");
    f(x) = 0;
    f(x) += in(x, r);
    EXPECT_THAT(test::error_of([&] { f.update(0).rfactor(r, x); }),
                HasSubstr("rfactor: 'x' is already a pure variable of 'rf_taken_f'; pass a new "
                          "Var"));
}

TEST(ScheduleErrors, RfactorOfAnUpdateThatWritesOtherSitesShowsTheArgument) {
    Buffer<int> in = input_2d("rf_hist_in");
    Func hist("rf_hist");
    Var x("x"), u("u");
    RDom r({{0, 16}, {0, 16}}, "r");
    hist(x) = 0;
    hist(clamp(in(r.x, r.y), 0, 15)) += 1;
    EXPECT_THAT(test::error_of([&] { hist.update(0).rfactor(r.y, u); }),
                HasSubstr("rfactor: rf_hist.update(0) must write 'rf_hist' at its pure "
                          "variables, but argument 0 is"));
}

// --- Parallel and vectorize legality of split and fused RVars -------------------------------
// Regressions: legality was once decided on the original RVar found by name prefix, so a split
// RVar named without the RDom's prefix was rejected, and a dependent RVar fused behind an
// independent one ran in parallel (a race). Each loop now records the original RVars it covers.

TEST(ScheduleErrors, SplitRVarsWithNamesOfTheirOwnMayRunInParallel) {
    Buffer<int> in = input_2d("own_names_in", 64, 1);
    Func f("own_names_f");
    Var x("x");
    RDom r(0, 32, "r");
    f(x) = x;
    f(r) = f(r) * 2 + in(r, 0); // r writes only its own site: any order is legal
    f.update(0).split(r, RVar("ro"), RVar("ri"), 4).parallel(RVar("ro")).vectorize(RVar("ri"));
    EXPECT_EQ(lowering_error_of(f), "(no error)");
    Buffer<int> out = f.realize({32});
    Buffer<int> want = reference_realize(f, {32});
    for (int i = 0; i < 32; i++)
        EXPECT_EQ(out(i), want(i)) << "at " << i;
}

TEST(ScheduleErrors, VectorizeOfASplitOfAFusedRVarChecksEveryRVarItCovers) {
    Buffer<int> in = input_2d("fused_split_in", 4, 8);
    Func f("fused_split_f");
    Var x("x");
    RDom r({{0, 4}, {0, 8}}, "r");
    f(x) = 0;
    f(r.x) += in(r.x, r.y);
    f.update(0)
        .fuse(r.x, r.y, RVar("rr"))
        .split(RVar("rr"), RVar("ro"), RVar("ri"), 4)
        .vectorize(RVar("ri"));
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("vectorize: 'ri' of 'fused_split_f.update(0)' is an RVar whose "
                          "iterations depend on each other (it covers RVar 'r.y')"));
}

TEST(ScheduleErrors, ParallelOfADependentRVarFusedBehindAnIndependentOneIsRejected) {
    Buffer<int> in = input_2d("fused_dep_in", 2, 64);
    Func f("fused_dep_f");
    Var x("x");
    RDom r({{0, 2}, {0, 64}}, "r");
    f(x) = 0;
    f(r.x) += in(r.x, r.y); // r.x is independent, r.y updates the same site again and again
    f.update(0).fuse(r.x, r.y, RVar("r.xy")).parallel(RVar("r.xy"));
    EXPECT_THAT(lowering_error_of(f),
                HasSubstr("parallel: 'r.xy' of 'fused_dep_f.update(0)' is an RVar whose "
                          "iterations depend on each other"));
}

} // namespace
} // namespace kiln
