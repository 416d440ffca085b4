// End to end: algorithms realized through the JIT agree with the reference evaluator, the JIT
// cache compiles a pipeline once, Params and ImageParams are bound at run time, and the run-time
// errors name the buffer or parameter at fault.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln.h"
#include "runtime/kiln_runtime.h"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

/// Every element of got equals the one of want at the same coordinates (both over the same
/// region); reports the first few that differ with their coordinates.
template <typename T>
void expect_same_buffer(const Buffer<T> &want, const Buffer<T> &got) {
    ASSERT_EQ(want.dimensions(), got.dimensions());
    for (int d = 0; d < want.dimensions(); d++) {
        ASSERT_EQ(want.dim(d).min, got.dim(d).min) << "dimension " << d;
        ASSERT_EQ(want.dim(d).extent, got.dim(d).extent) << "dimension " << d;
    }
    int reported = 0;
    std::vector<int> at(want.dimensions());
    for (int d = 0; d < want.dimensions(); d++) at[d] = want.dim(d).min;
    for (int64_t n = 0; n < want.number_of_elements(); n++) {
        T w = *reinterpret_cast<T *>(want.address_of(at));
        T g = *reinterpret_cast<T *>(got.address_of(at));
        if (!(w == g) && reported++ < 5) {
            std::string where;
            for (int c : at) where += (where.empty() ? "" : ", ") + std::to_string(c);
            ADD_FAILURE() << "at (" << where << "): want " << w << ", got " << g;
        }
        for (int d = 0; d < want.dimensions(); d++) {
            if (++at[d] < want.dim(d).min + want.dim(d).extent) break;
            at[d] = want.dim(d).min;
        }
    }
}

std::string compile_error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const CompileError &e) {
        return e.what();
    }
    return "(no CompileError)";
}

std::string runtime_error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const RuntimeError &e) {
        return e.what();
    }
    return "(no RuntimeError)";
}

/// Small, distinct values that depend on the coordinates (no overflow in the tests' arithmetic).
Buffer<int> ramp_buffer(const std::vector<int> &extents, const std::string &name, int seed = 0) {
    Buffer<int> b(extents, name);
    int k = seed;
    b.for_each_offset([&](int64_t offset) { b.data()[offset] = (k++ * 37 + 11) % 101 - 50; });
    return b;
}

TEST(Pipeline, PointwiseRealizeEqualsTheReferenceEvaluator) {
    Func f("pointwise_f");
    Var x("x"), y("y");
    f(x, y) = x * 3 - y * y + select(x > y, x - y, y - x) * 7;
    Buffer<int> got = f.realize({13, 7});
    expect_same_buffer<int>(reference_realize(f, {13, 7}), got);
}

// Bug: schedule/ScheduleFunctions.cpp, inject(): `FindLoops finder({compute_loop}, f.name)` keeps
// a reference to the temporary std::set made from {compute_loop} (FindLoops::names is a const
// reference member), which is destroyed at the end of that statement; the visit then reads freed
// memory, often finds no loop, and raises "... is computed inside loop 'x' ... but it is also used
// outside that loop" for a legal compute_at. Fix: make FindLoops::names (and func) values, not
// references. Enable once fixed.
TEST(Pipeline, DISABLED_PipelineRealizeOfAScheduledBlurEqualsTheReferenceEvaluator) {
    Buffer<float> in = Buffer<float>({19, 17}, "blur_in");
    for (int y = 0; y < 17; y++) {
        for (int x = 0; x < 19; x++) in(x, y) = float((x * 7 + y * 13) % 23) * 0.25f;
    }
    Func blur_x("sched_blur_x"), blur_y("sched_blur_y");
    Var x("x"), y("y"), xi("xi"), yi("yi");
    blur_x(x, y) = (in(x, y) + in(x + 1, y) + in(x + 2, y)) * 0.5f;
    blur_y(x, y) = (blur_x(x, y) + blur_x(x, y + 1) + blur_x(x, y + 2)) * 0.5f;
    Buffer<float> want = reference_realize(blur_y, {17, 15});
    blur_y.tile(x, y, xi, yi, 8, 4).vectorize(xi).parallel(y);
    blur_x.compute_at(blur_y, x).vectorize(x, 4);
    Buffer<float> got = Pipeline(blur_y).realize({17, 15});
    // No reassociation: each output is the same float operations in the same order.
    expect_same_buffer(want, got);
}

TEST(Pipeline, RealizingTwiceCompilesOnce) {
    Func f("compile_once_f");
    Var x("x");
    f(x) = x * x + 1;
    JITCacheStats before = jit_cache_stats();
    Buffer<int> a = f.realize({10});
    JITCacheStats middle = jit_cache_stats();
    EXPECT_EQ(middle.misses, before.misses + 1);
    Buffer<int> b = f.realize({10});
    JITCacheStats after = jit_cache_stats();
    EXPECT_EQ(after.misses, middle.misses);
    EXPECT_EQ(after.hits, middle.hits + 1);
    expect_same_buffer(a, b);
}

// Bug: schedule/ScheduleFunctions.cpp, InlineCalls::visit(const Call *) names the lets of an
// inlined call with unique_name() ("g.x.17"), a process-wide counter, and the lets stay in the
// final IR; codegen/Pipeline.cpp cache_key() hashes the body by names, so every lowering of a
// pipeline with an inlined Func has a new key and compiles again (the cache never hits, and
// fills with copies). Fix: number the fresh names per lowering (a counter in PipelineEnv, or
// names derived from the call's position), or hash the body modulo renaming of let-bound names.
// Enable once fixed.
TEST(Pipeline, DISABLED_RealizingTwiceCompilesOnceWhenAFuncIsInlined) {
    Func g("compile_once_inlined_g"), f("compile_once_inlined_f");
    Var x("x");
    g(x) = x * 5 - 3;
    f(x) = g(x + 1) * g(x * 2);
    JITCacheStats before = jit_cache_stats();
    Buffer<int> a = f.realize({10});
    Buffer<int> b = f.realize({10});
    JITCacheStats after = jit_cache_stats();
    EXPECT_EQ(after.misses, before.misses + 1);
    expect_same_buffer(a, b);
}

TEST(Pipeline, ParamValuesChangeResultsWithoutRecompiling) {
    Param<int> offset("param_offset");
    Param<float> scale("param_scale");
    Func f("param_f");
    Var x("x");
    f(x) = cast<float>(x + offset) * scale;
    offset.set(3);
    scale.set(0.5f);
    JITCacheStats before = jit_cache_stats();
    Buffer<float> a = f.realize({8});
    expect_same_buffer<float>(reference_realize(f, {8}), a);
    EXPECT_EQ(a(2), 2.5f);
    offset.set(-4);
    scale.set(2.0f);
    Buffer<float> b = f.realize({8});
    expect_same_buffer<float>(reference_realize(f, {8}), b);
    EXPECT_EQ(b(2), -4.0f);
    JITCacheStats after = jit_cache_stats();
    EXPECT_EQ(after.misses, before.misses + 1);
    EXPECT_EQ(after.hits, before.hits + 1);
}

TEST(Pipeline, AParamInAnRDomBoundChangesTheReductionWithoutRecompiling) {
    Param<int> n("param_rdom_n");
    Buffer<int> in = ramp_buffer({6, 20}, "param_rdom_in");
    Func s("param_rdom_sum");
    Var x("x");
    RDom r(0, n, "param_rdom_r");
    s(x) = 0;
    s(x) += in(x, r);
    JITCacheStats before = jit_cache_stats();
    for (int value : {0, 1, 7, 20}) {
        SCOPED_TRACE("n = " + std::to_string(value));
        n.set(value);
        expect_same_buffer<int>(reference_realize(s, {6}), s.realize({6}));
    }
    EXPECT_EQ(jit_cache_stats().misses, before.misses + 1);
}

TEST(Pipeline, AnImageParamTakesTheBufferBoundWithSet) {
    ImageParam in(Int(32), 2, "image_param_in");
    Func f("image_param_f");
    Var x("x"), y("y");
    f(x, y) = in(x, y) * 2 + in(x + 1, y);
    in.set(ramp_buffer({11, 5}, "image_param_a", 1));
    JITCacheStats before = jit_cache_stats();
    expect_same_buffer<int>(reference_realize(f, {10, 5}), f.realize({10, 5}));
    // Another buffer of another size, with the same compiled code.
    in.set(ramp_buffer({8, 3}, "image_param_b", 2));
    expect_same_buffer<int>(reference_realize(f, {7, 3}), f.realize({7, 3}));
    EXPECT_EQ(jit_cache_stats().misses, before.misses + 1);
}

TEST(Pipeline, BuffersWithNonzeroMinsAreAddressedByCoordinates) {
    Buffer<int> in = ramp_buffer({9, 8}, "mins_in");
    in.set_min({-4, 3});
    Func f("mins_f");
    Var x("x"), y("y");
    f(x, y) = in(x - 1, y + 1) * 10 + x - y;
    Buffer<int> out({5, 4}, "mins_f");
    out.set_min({-2, 2});
    Pipeline(f).realize({out});
    Buffer<int> want = reference_realize(f, {5, 4}, {-2, 2});
    expect_same_buffer(want, out);
    EXPECT_EQ(out(-2, 2), in(-3, 3) * 10 - 4);
}

TEST(Pipeline, TupleOutputsRealizeIntoOneBufferPerValue) {
    Buffer<int> in = ramp_buffer({9, 6}, "tuple_in");
    Func f("tuple_argmax");
    Var y("y");
    RDom r(0, 9, "tuple_r");
    f(y) = Tuple(argmax(in(r, y), "tuple_argmax_red"));
    Buffer<int> where({6}, "where"), best({6}, "best");
    Pipeline(f).realize({where, best});
    std::vector<BufferBase> want = reference_realize_all(f, {6});
    ASSERT_EQ(want.size(), 2u);
    expect_same_buffer<int>(want[0], where);
    expect_same_buffer<int>(want[1], best);
}

TEST(PipelineErrors, AnOutputTooSmallForAShiftInwardsSplitNamesTheBufferAndRanges) {
    Func f("too_small_out");
    Var x("x"), xo("xo"), xi("xi");
    f(x) = x;
    f.split(x, xo, xi, 8, TailStrategy::ShiftInwards);
    std::string msg = runtime_error_of([&] { f.realize({5}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'too_small_out' dimension 0: the schedule needs"));
}

TEST(PipelineErrors, AnOutputTooSmallForARoundUpSplitNamesTheBufferAndRanges) {
    Func f("round_up_out");
    Var x("x"), y("y"), yo("yo"), yi("yi");
    f(x, y) = x + y;
    f.split(y, yo, yi, 4, TailStrategy::RoundUp);
    std::string msg = runtime_error_of([&] { f.realize({3, 7}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'round_up_out' dimension 1: the schedule needs"));
}

TEST(PipelineErrors, AnInputTooSmallNamesTheBufferAndRanges) {
    Buffer<int> in = ramp_buffer({5}, "small_in");
    Func f("reads_small_in");
    Var x("x");
    f(x) = in(x + 1);
    std::string msg = runtime_error_of([&] { f.realize({5}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'small_in' dimension 0: the schedule needs"));
}

TEST(PipelineErrors, AnUnboundParamIsNamed) {
    Param<int> p("unbound_p");
    Func f("uses_unbound_p");
    Var x("x");
    f(x) = x + p;
    std::string msg = runtime_error_of([&] { f.realize({4}); });
    EXPECT_THAT(msg, HasSubstr("param 'unbound_p' has no value"));
    EXPECT_THAT(msg, HasSubstr("set()"));
}

TEST(PipelineErrors, AnUnboundImageParamIsNamed) {
    ImageParam in(Float(32), 1, "unbound_image");
    Func f("uses_unbound_image");
    Var x("x");
    f(x) = in(x) * 2.0f;
    std::string msg = runtime_error_of([&] { f.realize({4}); });
    EXPECT_THAT(msg, HasSubstr("ImageParam 'unbound_image' has no buffer"));
}

TEST(PipelineErrors, RunWithAnOutputOfTheWrongTypeNamesBothTypes) {
    Func f("typed_out");
    Var x("x");
    f(x) = x;
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<float> wrong({4}, "typed_out");
    std::string msg = runtime_error_of([&] { c.run({wrong}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'typed_out' holds float32, but the pipeline expects int32"));
}

TEST(PipelineErrors, RunWithAnOutputOfTheWrongDimensionsNamesBothCounts) {
    Func f("dims_out");
    Var x("x"), y("y");
    f(x, y) = x + y;
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<int> wrong({4}, "dims_out");
    std::string msg = runtime_error_of([&] { c.run({wrong}); });
    EXPECT_THAT(msg,
                HasSubstr("buffer 'dims_out' has 1 dimensions, but the pipeline expects 2"));
}

TEST(PipelineErrors, RunWithTheWrongNumberOfOutputsSaysHowMany) {
    Func f("count_out");
    Var x("x");
    f(x) = x;
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<int> a({4}), b({4});
    EXPECT_THAT(runtime_error_of([&] { c.run({a, b}); }),
                HasSubstr("the pipeline writes 1 output buffers, but 2 were given"));
    EXPECT_THAT(runtime_error_of([&] { c.run({}); }), HasSubstr("but 0 were given"));
}

TEST(PipelineErrors, AParamOutsideItsRangeFailsTheRunWithItsValueAndLimit) {
    Param<int> p("ranged_p");
    p.set_range(0, 10);
    Func f("uses_ranged_p");
    Var x("x");
    f(x) = x * p;
    p.set(12);
    EXPECT_THAT(runtime_error_of([&] { f.realize({4}); }),
                AllOf(HasSubstr("param 'ranged_p' is"), HasSubstr("must be at most")));
    p.set(-1);
    EXPECT_THAT(runtime_error_of([&] { f.realize({4}); }),
                AllOf(HasSubstr("param 'ranged_p' is"), HasSubstr("must be at least")));
    // run() reports the failure as a code and keeps the message for kiln_last_error_message.
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<int> out({4});
    EXPECT_NE(c.run({out}), 0);
    EXPECT_THAT(std::string(kiln_last_error_message()), HasSubstr("ranged_p"));
    p.set(10);
    EXPECT_EQ(c.run({out}), 0);
    EXPECT_EQ(out(3), 30);
}

TEST(PipelineErrors, AFloatParamOutsideItsRangeIsReported) {
    Param<float> p("ranged_float_p");
    p.set_range(0.0f, 1.0f);
    Func f("uses_ranged_float_p");
    Var x("x");
    f(x) = cast<float>(x) * p;
    p.set(1.5f);
    EXPECT_THAT(runtime_error_of([&] { f.realize({4}); }),
                AllOf(HasSubstr("param 'ranged_float_p' is"), HasSubstr("must be at most")));
}

TEST(PipelineErrors, RealizeWithTheWrongNumberOfExtentsIsACompileError) {
    Func f("extents_f");
    Var x("x"), y("y");
    f(x, y) = x + y;
    EXPECT_THAT(compile_error_of([&] { f.realize({4}); }),
                HasSubstr("'extents_f' has 2 dimensions, but 1 extents were given"));
}

// Bug: schedule/Schedule.cpp, StageBuilder::split() accepts TailStrategy::RoundUp on any pure
// loop of an update, and schedule/ScheduleFunctions.cpp build_stage() then runs the rounded-up
// iterations without a guard. Rounding up is harmless only past the end of the dimension: on an
// inner loop (here xi, the inner piece of x split by 4) the extra iterations are the first points
// of the next outer iteration, so the update is applied twice to them: f(4) and f(5) come out
// 2 * in(x) (measured: 1 2 3 4 10 12 7 8). Fix: in updates, allow RoundUp only on a loop whose
// iterations past its extent lie past the end of the original dimension (the original pure Var,
// or the outer loop of splits of it), else raise a CompileError saying to use GuardWithIf (or
// guard the rounded-up iterations). Enable once fixed (as a CompileError test if so fixed).
TEST(Pipeline, DISABLED_RoundUpOnAnInnerSplitOfAnUpdateAppliesTheUpdateOnce) {
    Buffer<int> in({8}, "round_up_twice_in");
    for (int i = 0; i < 8; i++) in(i) = i + 1;
    Func f("round_up_twice");
    Var x("x"), xo("xo"), xi("xi"), xio("xio"), xii("xii");
    f(x) = 0;
    f(x) = f(x) + in(x);
    f.update(0)
        .split(x, xo, xi, 4, TailStrategy::GuardWithIf)
        .split(xi, xio, xii, 3, TailStrategy::RoundUp);
    Buffer<int> out = f.realize({8});
    expect_same_buffer<int>(reference_realize(f, {8}), out);
}

// Bug: the buffer checks (schedule/AddBufferChecks.cpp, with schedule/BoxesTouched.cpp) bound the
// region a schedule reads by interval arithmetic over let-bound names, losing the relation
// between them. The loop extent of a Func computed per tile is `(f.x.max - f.x.min) + 1` with
// f.x.max = f.x.min + 7, but the two lets are bounded separately over all tiles, so the extent
// seems to range over [-1, 17]; a ShiftInwards split of f then seems to start 5 points before the
// tile, and a legal schedule on an input of exactly the needed size fails its check. (Also behind
// the FindLoops bug above.) Fix: substitute let values (or simplify x.max - x.min symbolically)
// before taking bounds, or emit constant loop extents when the region's width is constant.
TEST(Pipeline, DISABLED_AShiftInwardsSplitOfAFuncComputedPerTileReadsOnlyTheInputItNeeds) {
    Buffer<int> in = ramp_buffer({13}, "shift_tile_in");
    Func f("shift_tile_f"), g("shift_tile_g");
    Var x("x"), xo("xo"), xi("xi"), a("a"), b("b");
    f(x) = in(x) * 2;
    g(x) = f(x) + 1;
    g.split(x, xo, xi, 8, TailStrategy::ShiftInwards);
    f.compute_at(g, xo).split(x, a, b, 4, TailStrategy::ShiftInwards);
    expect_same_buffer<int>(reference_realize(g, {13}), g.realize({13}));
}

// Bug: the same loss of precision for a fused loop. build_stage() recovers the fused pieces as
// fused % inner_extent and fused / inner_extent with symbolic extents; their bounds come out as
// products of the extents' intervals, so a Func fused and computed per row (or per point) seems
// to read far outside its region, and a legal schedule on an exactly sized input fails its check
// (found by the fuzzer on matmul with rfactor: the check wanted [-142, 148] of a 7-wide input).
// Fix: bound each piece of a fuse by its own loop range ([min, min + extent - 1]) rather than by
// the arithmetic that recovers it, as Halide's bounds of split and fused dimensions do.
TEST(Pipeline, DISABLED_AFusedFuncComputedAtATileReadsOnlyTheInputItNeeds) {
    Buffer<int> in = ramp_buffer({5, 4}, "fused_tile_in");
    Func g("fused_tile_g"), h("fused_tile_h");
    Var x("x"), y("y"), yo("yo"), yi("yi"), xy("xy");
    g(x, y) = in(x, y) * 2;
    h(x, y) = g(x, y) + 1;
    h.split(y, yo, yi, 2, TailStrategy::GuardWithIf);
    g.compute_at(h, yo).fuse(x, y, xy);
    expect_same_buffer<int>(reference_realize(h, {5, 4}), h.realize({5, 4}));
}

// Bug: codegen/CodeGenLLVM.cpp, visit(const AssertStmt *) calls
// call_kiln_error(kiln_error_assertion_failed, op->message): it prints the message through "%s"
// and ignores op->args and op->error_code. So every failed buffer or Param check reports its
// printf placeholders instead of the values ("the schedule needs [%lld, %lld] but the buffer
// covers [%lld, %lld]") and returns kiln_error_assertion_failed instead of the code that
// schedule/AddBufferChecks.cpp chose (access_out_of_bounds, param_out_of_range, bad_stride).
// Fix: pass op->message as the format and codegen op->args as the variadic arguments of
// kiln_error (int64 and double, as the %lld and %g in the messages expect), and return
// op->error_code. Enable these three once fixed.
TEST(PipelineErrors, DISABLED_OutOfBoundsMessagesShowTheNeededAndCoveredRanges) {
    Func f("ranges_out");
    Var x("x"), xo("xo"), xi("xi");
    f(x) = x;
    f.split(x, xo, xi, 8, TailStrategy::ShiftInwards);
    EXPECT_THAT(runtime_error_of([&] { f.realize({5}); }),
                HasSubstr("buffer 'ranges_out' dimension 0: the schedule needs [-3, 4] but the "
                          "buffer covers [0, 4]"));
    Buffer<int> in = ramp_buffer({5}, "ranges_in");
    Func g("reads_ranges_in");
    g(x) = in(x + 1);
    EXPECT_THAT(runtime_error_of([&] { g.realize({5}); }),
                HasSubstr("buffer 'ranges_in' dimension 0: the schedule needs [1, 5] but the "
                          "buffer covers [0, 4]"));
}

TEST(PipelineErrors, DISABLED_AParamOutsideItsRangeReportsItsValueAndLimit) {
    Param<int> p("valued_p");
    p.set_range(0, 10);
    Param<float> q("valued_q");
    q.set_range(0.0f, 1.0f);
    Func f("uses_valued_params");
    Var x("x");
    f(x) = cast<float>(x * p) * q;
    p.set(12);
    q.set(0.5f);
    EXPECT_THAT(runtime_error_of([&] { f.realize({4}); }),
                HasSubstr("param 'valued_p' is 12 but must be at most 10"));
    p.set(3);
    q.set(1.5f);
    EXPECT_THAT(runtime_error_of([&] { f.realize({4}); }),
                HasSubstr("param 'valued_q' is 1.5 but must be at most 1"));
}

TEST(PipelineErrors, DISABLED_FailedChecksReturnTheirOwnErrorCodes) {
    Param<int> p("coded_p");
    p.set_range(0, 10);
    Func f("coded_f");
    Var x("x"), xo("xo"), xi("xi");
    f(x) = x * p;
    f.split(x, xo, xi, 8, TailStrategy::ShiftInwards);
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<int> small({5}), big({16});
    p.set(3);
    EXPECT_EQ(c.run({small}), kiln_error_access_out_of_bounds);
    p.set(11);
    EXPECT_EQ(c.run({big}), kiln_error_param_out_of_range);
}

} // namespace
} // namespace kiln
