// End to end: algorithms realized through the JIT agree with the reference evaluator, the JIT
// cache compiles a pipeline once, Params and ImageParams are bound at run time, and the run-time
// errors name the buffer or parameter at fault.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "runtime/kiln_runtime.h"
#include "tests/lang/ErrorOf.h"

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
    for (int d = 0; d < want.dimensions(); d++)
        at[d] = want.dim(d).min;
    for (int64_t n = 0; n < want.number_of_elements(); n++) {
        T w = *reinterpret_cast<T *>(want.address_of(at));
        T g = *reinterpret_cast<T *>(got.address_of(at));
        if (!(w == g) && reported++ < 5) {
            std::string where;
            for (int c : at)
                where += (where.empty() ? "" : ", ") + std::to_string(c);
            ADD_FAILURE() << "at (" << where << "): want " << w << ", got " << g;
        }
        for (int d = 0; d < want.dimensions(); d++) {
            if (++at[d] < want.dim(d).min + want.dim(d).extent) break;
            at[d] = want.dim(d).min;
        }
    }
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

// A parallel loop that uses a vector let hoisted outside it (the ramp base of a boundary
// condition's vectorized reads) and a buffer: the task's closure once listed the ramp base's type
// before the buffers' but stored it after them, so a buffer pointer was read from a 4-byte field
// (a crash, or wrong data). Found by the automatic space's corpus test.
TEST(Pipeline, AParallelLoopWithAHoistedVectorAndABufferGetsItsClosureRight) {
    ImageParam in(Float(32), 2, "closure_in");
    Func m = mirror_interior(in);
    Func out("closure_out");
    Var x("x"), y("y");
    out(x, y) = m(x, y) * 2.0f;
    Buffer<float> data({16, 36}, "closure_in");
    int k = 0;
    data.for_each_offset([&](int64_t offset) { data.data()[offset] = float(k++ % 23) * 0.5f; });
    in.set(data);
    Buffer<float> expected = reference_realize(out, {16, 36});
    m.compute_root().parallel(Var(m.args()[1])).vectorize(Var(m.args()[0]), 4);
    expect_same_buffer<float>(expected, out.realize({16, 36}));
}

// A regression test: compute_at once read a destroyed std::set in inject() and rejected this
// schedule, and the buffer check once over-estimated the input the shifted tiles read.
TEST(Pipeline, PipelineRealizeOfAScheduledBlurEqualsTheReferenceEvaluator) {
    Buffer<float> in = Buffer<float>({19, 17}, "blur_in");
    for (int y = 0; y < 17; y++) {
        for (int x = 0; x < 19; x++)
            in(x, y) = float((x * 7 + y * 13) % 23) * 0.25f;
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

// A fused loop split by a GuardWithIf vector and then by a ShiftInwards unroll: the unroll of a
// loop shorter than its factor starts one vector before the fused loop, 15 rows before the
// region here, and the region must be allocated to cover that. The bounds once counted only the
// ShiftInwards factor, and this schedule (found by the schedule fuzzer, seed 1068) wrote before
// the start of r's allocation.
TEST(Pipeline, AFusedLoopSplitByAVectorThenShiftedInwardsStaysInsideItsAllocation) {
    Buffer<int> in = ramp_buffer({60, 60}, "fs_in");
    in.set_min({-20, -20});
    Func p("fs_p"), l("fs_l"), r("fs_r"), out("fs_out");
    Var x("x"), y("y"), xy("xy"), yo("yo"), yi("yi");
    p(x, y) = in(x, y) * 3 - y;
    l(x, y) = p(x, y) + p(x + 1, y);
    r(x, y) = p(x, y + 1) * 2 - p(x, y);
    out(x, y) = l(x, y) * 2 - r(x, y) + (l(x, y) - r(x, y)) % 7;
    Buffer<int> want = reference_realize(out, {11, 13});
    r.fuse(x, y, xy).compute_at(out, x).store_root();
    r.vectorize(xy, 16, TailStrategy::GuardWithIf).unroll(xy, 2, TailStrategy::Auto);
    p.split(y, yo, yi, 5, TailStrategy::ShiftInwards).compute_root();
    p.vectorize(x, 16, TailStrategy::RoundUp).unroll(yi).parallel(x);
    expect_same_buffer<int>(want, out.realize({11, 13}));
}

// A producer whose inner dimension has 4 values, fused with the next and vectorized: the
// fused loop's coordinates are f % 4 and f / 4, and its stores, at c + 4 x in its own buffer,
// are the dense ramp of f (recombined by the simplifier), not a scatter; its values are the
// reference's. (Its loads from the input stay a gather: the input's stride.1 is known only at
// run time.)
TEST(Pipeline, AFusedVectorizedLoopOverADenseRegionStoresDenseVectors) {
    Buffer<int> in = ramp_buffer({4, 40}, "fv_in");
    Func g("fv_g"), out("fv_out");
    Var c("c"), x("x"), f("f");
    g(c, x) = in(c, x) * 3 + c;
    out(c, x) = g(c, x) - x;
    out.bound(c, 0, 4);
    g.compute_root().fuse(c, x, f).vectorize(f, 16);
    Buffer<int> want = reference_realize(out, {4, 40});
    std::string text = to_string(Pipeline(out).lower().body);
    EXPECT_THAT(text, HasSubstr("fv_g[ramp(")) << text;
    expect_same_buffer<int>(want, out.realize({4, 40}));
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

TEST(Pipeline, RealizingTwiceCompilesOnceWhenAFuncIsInlined) {
    // Inlining introduces lets with fresh names; once they came from a process-wide counter, so
    // every lowering had a new cache key and compiled again.
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

// ImageParam::dim(d).set_min / set_extent / set_stride (Halide's Dimension): the promised values
// replace the buffer's fields in the lowered code (an image's loads index with the constant row
// pitch, no `.stride.1` or `.min.` symbol in them), only the entry checks read the fields, and a
// buffer that keeps the promises gives what the reference evaluator gives.
TEST(Pipeline, PromisedStridesAndMinsAreConstantsInTheLoweredCode) {
    ImageParam in(Int(32), 2, "promised_in");
    in.dim(0).set_bounds(0, 16);
    in.dim(1).set_bounds(0, 6).set_stride(16);
    Func f("promised_f");
    Var x("x"), y("y");
    f(x, y) = in(x, y) + in(15 - x, 5 - y) * 2;
    struct Loads : IRVisitor {
        int loads = 0, with_fields = 0, asserts_with_fields = 0;
        using IRVisitor::visit;
        void visit(const Load *op) override {
            if (op->name == "promised_in") {
                loads++;
                with_fields += expr_uses_vars(
                    op->index, {"promised_in.stride.1", "promised_in.min.0", "promised_in.min.1"});
            }
            IRVisitor::visit(op);
        }
        void visit(const AssertStmt *op) override {
            asserts_with_fields += expr_uses_var(op->condition, "promised_in.stride.1");
            IRVisitor::visit(op);
        }
    } v;
    v.include(Pipeline(f).lower().body);
    EXPECT_GT(v.loads, 0);
    EXPECT_EQ(v.with_fields, 0);
    EXPECT_EQ(v.asserts_with_fields, 1); // the promise's own check
    in.set(ramp_buffer({16, 6}, "promised_a", 3));
    expect_same_buffer<int>(reference_realize(f, {16, 6}), f.realize({16, 6}));
}

// dim(d).min(), extent() and max() are the bound buffer's, read when the pipeline runs: a
// reversal over whatever range the buffer covers.
TEST(Pipeline, AnImagesDimensionMaxIsItsLastCoordinate) {
    ImageParam in(Int(32), 1, "reversed_in");
    Func f("reversed_f");
    Var x("x");
    f(x) = in(in.dim(0).max() - x) * 100 + in.dim(0).extent();
    for (int min : {0, 2}) {
        Buffer<int> b({10}, "reversed_data");
        for (int i = 0; i < 10; i++)
            b(i) = i * 3;
        b.set_min({min});
        in.set(b);
        Buffer<int> out = f.realize({8});
        for (int i = 0; i < 8; i++) {
            // max = min + 9: f(i) reads the buffer's element (min + 9 - i) - min = 9 - i.
            EXPECT_EQ(out(i), (9 - i) * 3 * 100 + 10) << "min " << min << ", x " << i;
        }
    }
}

// Func::output_buffer() (Halide's): the same promises about the buffer an output is written
// into. The stores and the update's loads of the output index with the promised row pitch and
// mins, only the entry checks read the fields, and the result is the reference evaluator's.
TEST(Pipeline, AnOutputsPromisedStrideIsAConstantInItsStoresAndLoads) {
    Func f("promised_out");
    Var x("x"), y("y");
    f(x, y) = x * 10 + y;
    f(x, y) += f(x, y) * 2 + x;
    f.output_buffer().dim(0).set_bounds(0, 8);
    f.output_buffer().dim(1).set_min(0).set_stride(8);
    const std::set<std::string> fields = {"promised_out.stride.1", "promised_out.min.0",
                                          "promised_out.min.1"};
    struct Accesses : IRVisitor {
        const std::set<std::string> &fields;
        explicit Accesses(const std::set<std::string> &fields) : fields(fields) {}
        int stores = 0, loads = 0, with_fields = 0, asserts_with_fields = 0;
        using IRVisitor::visit;
        void visit(const Store *op) override {
            if (op->name == "promised_out") {
                stores++;
                with_fields += expr_uses_vars(op->index, fields);
            }
            IRVisitor::visit(op);
        }
        void visit(const Load *op) override {
            if (op->name == "promised_out") {
                loads++;
                with_fields += expr_uses_vars(op->index, fields);
            }
            IRVisitor::visit(op);
        }
        void visit(const AssertStmt *op) override {
            asserts_with_fields += expr_uses_var(op->condition, "promised_out.stride.1");
            IRVisitor::visit(op);
        }
    } v(fields);
    v.include(Pipeline(f).lower().body);
    EXPECT_GT(v.stores, 0);
    EXPECT_GT(v.loads, 0);
    EXPECT_EQ(v.with_fields, 0);
    EXPECT_EQ(v.asserts_with_fields, 1); // the promise's own check
    expect_same_buffer<int>(reference_realize(f, {8, 5}), f.realize({8, 5}));
}

// An output buffer that breaks a promise is refused with both values, nothing written; a
// Tuple's values each have a buffer of their own, named as the outputs' buffers are.
TEST(PipelineErrors, AnOutputBufferBreakingItsPromiseIsRefusedWithBothValues) {
    Func f("promise_out");
    Var x("x"), y("y");
    f(x, y) = x + y;
    f.output_buffer().dim(1).set_stride(12);
    Buffer<int> out({10, 3}, "promise_out"); // stride 10
    out.fill(-5);
    EXPECT_THAT(test::error_of<RuntimeError>([&] { Pipeline(f).realize({out}); }),
                HasSubstr("buffer 'promise_out' dimension 1 must have stride 12 "
                          "(Func::output_buffer().dim(1).set_stride), got 10"));
    EXPECT_EQ(out(4, 2), -5);
    Func t("promise_tuple");
    t(x, y) = Tuple{x, y};
    std::vector<OutputImageParam> buffers = t.output_buffers();
    ASSERT_EQ(buffers.size(), 2u);
    EXPECT_EQ(buffers[1].name(), "promise_tuple.1");
    buffers[1].dim(0).set_extent(4);
    Buffer<int> first({6, 2}, "promise_tuple.0"), second({6, 2}, "promise_tuple.1");
    EXPECT_THAT(test::error_of<RuntimeError>([&] {
                    Pipeline(t).realize({first, second});
                }),
                HasSubstr("buffer 'promise_tuple.1' dimension 0 must have extent 4 "
                          "(Func::output_buffer().dim(0).set_extent), got 6"));
}

// A buffer that breaks a promise is a run-time error naming the image, the dimension, the
// promised and the actual value, and nothing is written.
TEST(PipelineErrors, ABufferBreakingAnImagesPromiseIsRefusedWithBothValues) {
    ImageParam in(Int(32), 2, "promise_in");
    in.dim(1).set_stride(12);
    Func f("promise_f");
    Var x("x"), y("y");
    f(x, y) = in(x, y) + 1;
    in.set(ramp_buffer({10, 3}, "promise_wide", 1)); // stride 10
    Buffer<int> out({10, 3}, "promise_f");
    out.fill(-5);
    EXPECT_THAT(test::error_of<RuntimeError>([&] { Pipeline(f).realize({out}); }),
                HasSubstr("buffer 'promise_in' dimension 1 must have stride 12 "
                          "(ImageParam::dim(1).set_stride), got 10"));
    EXPECT_EQ(out(4, 2), -5);
    ImageParam at(Int(32), 1, "promise_at");
    at.dim(0).set_min(0);
    Func g("promise_g");
    g(x) = at(x);
    Buffer<int> shifted = ramp_buffer({8}, "promise_shifted");
    shifted.set_min({-1});
    at.set(shifted);
    EXPECT_THAT(test::error_of<RuntimeError>([&] { g.realize({4}); }),
                HasSubstr("buffer 'promise_at' dimension 0 must have min 0 "
                          "(ImageParam::dim(0).set_min), got -1"));
    at.dim(0).set_extent(4);
    at.set(ramp_buffer({8}, "promise_long"));
    EXPECT_THAT(test::error_of<RuntimeError>([&] { g.realize({4}); }),
                HasSubstr("buffer 'promise_at' dimension 0 must have extent 4 "
                          "(ImageParam::dim(0).set_extent), got 8"));
}

// Promises the compiler cannot hold are CompileErrors that say which and why.
TEST(PipelineErrors, ImpossiblePromisesAreCompileErrors) {
    ImageParam in(Float(32), 2, "bad_promise");
    EXPECT_THAT(test::error_of<CompileError>([&] { in.dim(2); }),
                HasSubstr("dimension 2 of ImageParam 'bad_promise' does not exist"));
    EXPECT_THAT(test::error_of<CompileError>([&] { in.dim(0).set_stride(2); }),
                HasSubstr("dimension 0 of ImageParam 'bad_promise' always has stride 1"));
    EXPECT_THAT(test::error_of<CompileError>([&] { in.dim(1).set_stride(Expr(1.5f)); }),
                HasSubstr("the stride of dimension 1 of ImageParam 'bad_promise' must be a "
                          "scalar integer"));
    EXPECT_THAT(test::error_of<CompileError>([&] { in.dim(1).set_extent(0); }),
                HasSubstr("must be at least 1, got 0"));
}

// output_buffer on a Func with no definition yet, or with several values, and impossible
// promises about an output's buffer: CompileErrors that name the Func or buffer and say what to do.
TEST(PipelineErrors, OutputBufferMisusesAreCompileErrors) {
    Func undefined("no_def_out");
    EXPECT_THAT(test::error_of<CompileError>([&] { undefined.output_buffer(); }),
                HasSubstr("output_buffer: Func 'no_def_out' has no definition yet; define it"));
    Func pair("pair_out"), f("bad_out");
    Var x("x"), y("y");
    pair(x) = Tuple{x, x + 1};
    EXPECT_THAT(test::error_of<CompileError>([&] { pair.output_buffer(); }),
                HasSubstr("Func 'pair_out' has 2 values, each in a buffer of its own; use "
                          "output_buffers()[i]"));
    f(x, y) = x * y;
    EXPECT_THAT(test::error_of<CompileError>([&] { f.output_buffer().dim(2); }),
                HasSubstr("dimension 2 of the output buffer 'bad_out' does not exist; it has 2 "
                          "dimensions"));
    EXPECT_THAT(test::error_of<CompileError>([&] { f.output_buffer().dim(0).set_stride(3); }),
                HasSubstr("dimension 0 of output buffer 'bad_out' always has stride 1"));
    EXPECT_THAT(test::error_of<CompileError>([&] { f.output_buffer().dim(1).set_extent(0); }),
                HasSubstr("extent of dimension 1 of output buffer 'bad_out' must be at least 1"));
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

TEST(Pipeline, TwoOutputsListedProducerFirstAreBothRealized) {
    Func f("two_out_f"), g("two_out_g");
    Var x("x"), y("y");
    f(x, y) = x * 3 + y;
    g(x, y) = f(x, y) * 2 - x;
    Buffer<int> bf({7, 5}, "two_out_f"), bg({7, 5}, "two_out_g");
    Pipeline({f, g}).realize({bf, bg});
    expect_same_buffer<int>(reference_realize(f, {7, 5}), bf);
    expect_same_buffer<int>(reference_realize(g, {7, 5}), bg);
}

// Regression: outputs were once produced in the order the Pipeline lists them, so g ran before
// the f it reads; they are now produced in realization order.
TEST(Pipeline, TwoOutputsListedConsumerFirstAreBothRealized) {
    Func f("out_order_f"), g("out_order_g");
    Var x("x"), y("y");
    f(x, y) = x * 3 + y;
    g(x, y) = f(x, y) * 2 - x;
    Buffer<int> bf({7, 5}, "out_order_f"), bg({7, 5}, "out_order_g");
    Pipeline({g, f}).realize({bg, bf});
    expect_same_buffer<int>(reference_realize(f, {7, 5}), bf);
    expect_same_buffer<int>(reference_realize(g, {7, 5}), bg);
}

// Regression: an output was once checked only against what its own Func writes, so g read f
// past the end of f's buffer; an output buffer must now also cover what the pipeline reads of it.
TEST(PipelineErrors, AnOutputReadPastItsBufferByAnotherOutputIsReported) {
    Func f("out_past_f"), g("out_past_g");
    Var x("x"), y("y");
    f(x, y) = x * 3 + y;
    g(x, y) = f(x + 1, y) * 2;
    Buffer<int> bf({7, 5}, "out_past_f"), bg({7, 5}, "out_past_g");
    EXPECT_THAT(test::error_of<RuntimeError>([&] {
                    Pipeline({f, g}).realize({bf, bg});
                }),
                HasSubstr("buffer 'out_past_f' dimension 0: the schedule needs [0, 7] but the "
                          "buffer covers [0, 6]"));
}

// Func::bound() on a Func that is not an output is honoured as the region it computes, with a
// check at run time that its uses lie inside (as Halide does).
TEST(PipelineErrors, ABoundSmallerThanTheRegionItsConsumersReadIsReported) {
    Func g("small_bound_g"), f("small_bound_f");
    Var x("x");
    g(x) = x * 2;
    f(x) = g(x) + g(x + 5);
    g.compute_root().bound(x, 0, 4);
    EXPECT_THAT(test::error_of<RuntimeError>([&] { f.realize({8}); }),
                HasSubstr("func 'small_bound_g' dimension 'x': its uses need [0, 12] but its "
                          "bound() covers [0, 3]; widen the bound or remove it"));
}

TEST(Pipeline, ABoundOnAnIntermediateIsTheRegionItComputes) {
    Func g("wide_bound_g"), f("wide_bound_f");
    Var x("x"), y("y");
    RDom r(0, 3, "wide_bound_r");
    g(x, y) = x * 2 + y;
    g(x, y) += r; // an update: its region is what the bound says, and the update covers it
    f(x, y) = g(x, y) + g(x + 5, y);
    g.compute_at(f, y).bound(x, -2, 20);
    expect_same_buffer<int>(reference_realize(f, {8, 3}), f.realize({8, 3}));
    // The whole bound is computed: the allocation holds 20 columns, not the 13 read.
    std::string text = Pipeline(f).lowered_text();
    EXPECT_THAT(text, HasSubstr("wide_bound_g.x.min = -2"));
    EXPECT_THAT(text, HasSubstr("wide_bound_g.x.max = 17"));
}

TEST(PipelineErrors, AnOutputUpdateReadingPastItsBufferIsReported) {
    Func f("self_past_f");
    Var x("x");
    RDom r(0, 8, "self_past_r");
    f(x) = x;
    f(r) = f(r + 1) * 2;
    Buffer<int> out({8}, "self_past_f");
    EXPECT_THAT(test::error_of<RuntimeError>([&] { Pipeline(f).realize({out}); }),
                HasSubstr("buffer 'self_past_f' dimension 0: the schedule needs [0, 8] but the "
                          "buffer covers [0, 7]"));
}

TEST(PipelineErrors, AnOutputTooSmallForAShiftInwardsSplitNamesTheBufferAndRanges) {
    Func f("too_small_out");
    Var x("x"), xo("xo"), xi("xi");
    f(x) = x;
    f.split(x, xo, xi, 8, TailStrategy::ShiftInwards);
    std::string msg = test::error_of<RuntimeError>([&] { f.realize({5}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'too_small_out' dimension 0: the schedule needs [-3, 4] "
                               "but the buffer covers [0, 4]"));
}

TEST(PipelineErrors, AnOutputTooSmallForARoundUpSplitNamesTheBufferAndRanges) {
    Func f("round_up_out");
    Var x("x"), y("y"), yo("yo"), yi("yi");
    f(x, y) = x + y;
    f.split(y, yo, yi, 4, TailStrategy::RoundUp);
    std::string msg = test::error_of<RuntimeError>([&] { f.realize({3, 7}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'round_up_out' dimension 1: the schedule needs [0, 7] "
                               "but the buffer covers [0, 6]"));
}

TEST(PipelineErrors, AnInputTooSmallNamesTheBufferAndRanges) {
    Buffer<int> in = ramp_buffer({5}, "small_in");
    Func f("reads_small_in");
    Var x("x");
    f(x) = in(x + 1);
    std::string msg = test::error_of<RuntimeError>([&] { f.realize({5}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'small_in' dimension 0: the schedule needs [1, 5] but "
                               "the buffer covers [0, 4]"));
}

TEST(PipelineErrors, AnUnboundParamIsNamed) {
    Param<int> p("unbound_p");
    Func f("uses_unbound_p");
    Var x("x");
    f(x) = x + p;
    std::string msg = test::error_of<RuntimeError>([&] { f.realize({4}); });
    EXPECT_THAT(msg, HasSubstr("param 'unbound_p' has no value"));
    EXPECT_THAT(msg, HasSubstr("set()"));
}

TEST(PipelineErrors, AnUnboundImageParamIsNamed) {
    ImageParam image(Float(32), 1, "unbound_image");
    Func f("uses_unbound_image");
    Var x("x");
    f(x) = image(x) * 2.0f;
    std::string msg = test::error_of<RuntimeError>([&] { f.realize({4}); });
    EXPECT_THAT(msg, HasSubstr("ImageParam 'unbound_image' has no buffer"));
}

TEST(PipelineErrors, RunWithAnOutputOfTheWrongTypeNamesBothTypes) {
    Func f("typed_out");
    Var x("x");
    f(x) = x;
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<float> wrong({4}, "typed_out");
    std::string msg = test::error_of<RuntimeError>([&] { c.run({wrong}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'typed_out' holds float32, but the pipeline expects int32"));
}

TEST(PipelineErrors, RunWithAnOutputOfTheWrongDimensionsNamesBothCounts) {
    Func f("dims_out");
    Var x("x"), y("y");
    f(x, y) = x + y;
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<int> wrong({4}, "dims_out");
    std::string msg = test::error_of<RuntimeError>([&] { c.run({wrong}); });
    EXPECT_THAT(msg, HasSubstr("buffer 'dims_out' has 1 dimensions, but the pipeline expects 2"));
}

TEST(PipelineErrors, RunWithTheWrongNumberOfOutputsSaysHowMany) {
    Func f("count_out");
    Var x("x");
    f(x) = x;
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<int> a({4}), b({4});
    std::vector<BufferBase> two{a, b};
    EXPECT_THAT(test::error_of<RuntimeError>([&] { c.run(two); }),
                HasSubstr("the pipeline writes 1 output buffers, but 2 were given"));
    EXPECT_THAT(test::error_of<RuntimeError>([&] { c.run({}); }), HasSubstr("but 0 were given"));
}

TEST(PipelineErrors, AParamOutsideItsRangeFailsTheRunWithItsValueAndLimit) {
    Param<int> p("ranged_p");
    p.set_range(0, 10);
    Func f("uses_ranged_p");
    Var x("x");
    f(x) = x * p;
    p.set(12);
    EXPECT_THAT(test::error_of<RuntimeError>([&] { f.realize({4}); }),
                HasSubstr("param 'ranged_p' is 12 but must be at most 10"));
    p.set(-1);
    EXPECT_THAT(test::error_of<RuntimeError>([&] { f.realize({4}); }),
                HasSubstr("param 'ranged_p' is -1 but must be at least 0"));
    // run() reports the failure as a code and keeps the message for kiln_last_error_message.
    CompiledPipeline c = Pipeline(f).compile_jit();
    Buffer<int> out({4});
    EXPECT_EQ(c.run({out}), kiln_error_param_out_of_range);
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
    EXPECT_THAT(test::error_of<RuntimeError>([&] { f.realize({4}); }),
                HasSubstr("param 'ranged_float_p' is 1.5 but must be at most 1"));
}

TEST(PipelineErrors, TupleOutputBuffersOfDifferentShapesAreReported) {
    Func f("tuple_shapes_f");
    Var x("x");
    f(x) = Tuple({Expr(x), x * 2});
    Buffer<int> a({4}, "a"), b({5}, "b");
    std::string msg = test::error_of<RuntimeError>([&] { Pipeline(f).realize({a, b}); });
    EXPECT_THAT(msg, HasSubstr("kiln_error_bad_dimensions"));
    EXPECT_THAT(msg, HasSubstr("output buffers 'tuple_shapes_f.0' and 'tuple_shapes_f.1' must "
                               "have the same shape, but differ in dimension 0"));
}

TEST(PipelineErrors, RealizeWithTheWrongNumberOfExtentsIsACompileError) {
    Func f("extents_f");
    Var x("x"), y("y");
    f(x, y) = x + y;
    EXPECT_THAT(test::error_of([&] { f.realize({4}); }),
                HasSubstr("'extents_f' has 2 dimensions, but 1 extents were given"));
}

// A regression test: the buffer check once bounded the loop extent of a Func computed per tile,
// (f.x.max - f.x.min) + 1, with the two lets bounded separately, so a shifted split seemed to
// start before the tile and the exactly sized input failed the check.
TEST(Pipeline, AShiftInwardsSplitOfAFuncComputedPerTileReadsOnlyTheInputItNeeds) {
    Buffer<int> input = ramp_buffer({13}, "shift_tile_in");
    Func f("shift_tile_f"), g("shift_tile_g");
    Var x("x"), xo("xo"), xi("xi"), a("a"), b("b");
    f(x) = input(x) + input(x) * 2;
    g(x) = f(x) + 1;
    g.split(x, xo, xi, 8, TailStrategy::ShiftInwards);
    f.compute_at(g, xo).split(x, a, b, 4, TailStrategy::ShiftInwards);
    expect_same_buffer<int>(reference_realize(g, {13}), g.realize({13}));
}

// Regression: the pieces of a fused loop (fused % extent, fused / extent) were bounded by
// interval arithmetic over symbolic extents, which blew up to products of the extents, so a Func
// fused and computed per tile seemed to read far outside its input (here rows [0, 5] of a 4-row
// input). Each piece is now bounded by its own loop range.
TEST(Pipeline, AFusedFuncComputedAtATileReadsOnlyTheInputItNeeds) {
    Buffer<int> in = ramp_buffer({5, 4}, "fused_tile_in");
    Func g("fused_tile_g"), h("fused_tile_h");
    Var x("x"), y("y"), yo("yo"), yi("yi"), xy("xy");
    g(x, y) = in(x, y) * 2;
    h(x, y) = g(x, y) + 1;
    h.split(y, yo, yi, 2, TailStrategy::GuardWithIf);
    g.compute_at(h, yo).fuse(x, y, xy);
    expect_same_buffer<int>(reference_realize(h, {5, 4}), h.realize({5, 4}));
}

/// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name(name) { setenv(name, value, 1); }
    ~ScopedEnv() { unsetenv(name); }

private:
    const char *name;
};

TEST(Pipeline, KilnLlvmPipelineO3CompilesTheSameResults) {
    Buffer<float> in({37, 9}, "o3_in");
    for (int y = 0; y < 9; y++) {
        for (int x = 0; x < 37; x++)
            in(x, y) = float(x * 3 - y) * 0.25f;
    }
    Func f("o3_f");
    Var x("x"), y("y"), xo("xo"), xi("xi");
    f(x, y) = in(x, y) * 2.0f + in(x, y);
    f.split(x, xo, xi, 8).vectorize(xi);
    ScopedEnv env("KILN_LLVM_PIPELINE", "O3");
    clear_jit_cache();
    expect_same_buffer<float>(reference_realize(f, {37, 9}), f.realize({37, 9}));
}

TEST(PipelineErrors, AKilnLlvmPipelineThatDoesNotParseIsReported) {
    Func f("bad_llvm_pipeline_f");
    Var x("x");
    f(x) = x * 2;
    ScopedEnv env("KILN_LLVM_PIPELINE", "function(no-such-pass)");
    clear_jit_cache();
    EXPECT_THAT(test::error_of([&] { f.realize({4}); }),
                AllOf(HasSubstr("KILN_LLVM_PIPELINE='function(no-such-pass)' is not an LLVM pass "
                                "pipeline"),
                      HasSubstr("use O3, a pipeline in opt -passes syntax, or unset it")));
}

// Regression (found by the schedule fuzzer, seed 2758): a fused Func computed per tile of a
// consumer whose outer tile loops run past the end in both dimensions has a region with negative
// extents in both, and the fused loop ran extent_x * extent_y > 0 times at wild coordinates,
// corrupting the heap. The fused extent now counts each piece from zero.
TEST(Pipeline, AFusedFuncComputedInTilesPastTheEndInBothDimensionsComputesNothingThere) {
    Buffer<int> in = ramp_buffer({3, 3}, "fused_empty_in");
    Func g("fused_empty_g"), h("fused_empty_h");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi"), xoo("xoo"), xoi("xoi"), yoo("yoo"),
        yoi("yoi"), xy("xy");
    g(x, y) = in(x, y) * 5;
    h(x, y) = g(x, y) + 2;
    h.split(x, xo, xi, 2, TailStrategy::GuardWithIf)
        .split(y, yo, yi, 2, TailStrategy::GuardWithIf)
        .split(xo, xoo, xoi, 4, TailStrategy::GuardWithIf)
        .split(yo, yoo, yoi, 4, TailStrategy::GuardWithIf)
        .reorder(xi, yi, xoi, yoi, xoo, yoo);
    g.compute_at(h, xoi).store_at(h, yoi).fuse(x, y, xy);
    expect_same_buffer<int>(reference_realize(h, {3, 3}), h.realize({3, 3}));
}

// A RoundUp split of a fused loop computes a few points past the region, so the outer piece
// runs one row further: the input needs that row, and no more.
TEST(Pipeline, ARoundUpSplitOfAFusedLoopReadsOneRowPastItsRegion) {
    auto build = [](int rows) {
        Buffer<int> in = ramp_buffer({5, rows}, "fused_round_in");
        Func g("fused_round_g"), h("fused_round_h");
        Var x("x"), y("y"), xy("xy"), o("o"), i("i");
        g(x, y) = in(x, y) * 3;
        h(x, y) = g(x, y) - 1;
        g.compute_at(h, y).fuse(x, y, xy).split(xy, o, i, 4, TailStrategy::RoundUp);
        return h;
    };
    Func h = build(5);
    expect_same_buffer<int>(reference_realize(h, {5, 4}), h.realize({5, 4}));
    EXPECT_THAT(test::error_of<RuntimeError>([&] {
                    build(4).realize({5, 4});
                }),
                HasSubstr("buffer 'fused_round_in' dimension 1: the schedule needs [0, 4] but the "
                          "buffer covers [0, 3]"));
}

// A ShiftInwards split of a fused loop shorter than its factor starts before the region.
TEST(Pipeline, AShiftInwardsSplitOfAShortFusedLoopMatchesTheReference) {
    Buffer<int> in({9, 7}, "fused_shift_in");
    in.set_min({-2, -2});
    int k = 0;
    in.for_each_offset([&](int64_t offset) { in.data()[offset] = (k++ * 5) % 11; });
    Func g("fused_shift_g"), h("fused_shift_h");
    Var x("x"), y("y"), xy("xy"), o("o"), i("i");
    g(x, y) = in(x, y) + in(x - 1, y);
    h(x, y) = g(x, y) * 2;
    g.compute_at(h, x).fuse(x, y, xy).split(xy, o, i, 3, TailStrategy::ShiftInwards);
    expect_same_buffer<int>(reference_realize(h, {5, 4}), h.realize({5, 4}));
}

// rfactor without a name names the intermediate after the Func, not from a process-wide
// counter, so that a rebuilt pipeline has the same Funcs.
TEST(Pipeline, RfactorWithoutANameNamesTheIntermediateAfterTheFunc) {
    auto build = [] {
        Buffer<int> in = ramp_buffer({8, 6}, "rf_default_in");
        Func f("rf_default_f");
        Var x("x");
        RDom r({{0, 8}, {0, 6}}, "rf_default_r");
        f(x) = 0;
        f(x) += in(r.x, r.y) * (x + 1);
        return std::make_pair(f, r);
    };
    auto [f, r] = build();
    Func intm = f.update(0).rfactor(r.y, Var("u"));
    EXPECT_EQ(intm.name(), "rf_default_f_intm");
    intm.compute_root();
    expect_same_buffer<int>(reference_realize(f, {3}), f.realize({3}));
    auto [g, r2] = build();
    EXPECT_EQ(g.update(0).rfactor(r2.y, Var("u")).name(), "rf_default_f_intm");
}

// rfactor of the outer part of a split RVar, as in Halide: the intermediate reduces over the
// inner part, in parallel over the outer one, for an RDom that does not start at 0 and a second
// RVar left in the intermediate.
TEST(Pipeline, RfactorOfASplitRVarMatchesTheReference) {
    Buffer<int> in = ramp_buffer({40, 7}, "rf_split_in");
    Func f("rf_split_f");
    Var x("x"), u("u");
    RVar ro("ro"), ri("ri");
    RDom r({{3, 36}, {0, 2}}, "rf_split_r");
    f(x) = 1;
    f(x) += in(r.x, r.y + x) * (r.x % 5 - 2);
    Func intm = f.update(0).split(r.x, ro, ri, 6).rfactor(ro, u);
    intm.compute_root();
    intm.update(0).parallel(u);
    expect_same_buffer<int>(reference_realize(f, {5}), f.realize({5}));
    EXPECT_THAT(to_string(Pipeline(f).lower().body), HasSubstr("parallel"));
}

// rfactor({}) of a matmul written as an update of its output: the intermediate holds a tile of
// sums, computed per tile of the output with the reduction outside its pure loops (a register
// tile), and the output's update adds the tile in; rfactor of both RVars of a 2-D reduction at
// once makes them two pure variables of the intermediate.
TEST(Pipeline, RfactorOfNoRVarComputesTheWholeReductionPerTileOfTheOutput) {
    Buffer<int> a = ramp_buffer({37, 20}, "rf_none_a"), b = ramp_buffer({16, 37}, "rf_none_b", 3);
    Func c("rf_none_c");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    RDom k(0, 37, "rf_none_k");
    c(x, y) = 0;
    c(x, y) += a(k, y) * b(x, k);
    Func sum = c.update(0).rfactor({});
    c.bound(x, 0, 16).bound(y, 0, 20);
    EXPECT_EQ(sum.name(), "rf_none_c_intm");
    c.update(0).tile(x, y, xo, yo, xi, yi, 8, 4).vectorize(xi, 4);
    sum.compute_at(c, xo).vectorize(x, 4).unroll(y);
    sum.update(0).reorder(x, y, k).vectorize(x, 4).unroll(y);
    expect_same_buffer<int>(reference_realize(c, {16, 20}), c.realize({16, 20}));
    std::string text = to_string(Pipeline(c).lower().body);
    // The output's update has no loop of its own over k: only the intermediate reduces.
    EXPECT_THAT(text, HasSubstr("for (rf_none_c_intm.s1.rf_none_k.x"));
    EXPECT_THAT(text, testing::Not(HasSubstr("for (rf_none_c.s1.rf_none_k")));

    Buffer<int> in = ramp_buffer({8, 6}, "rf_two_in");
    Func f("rf_two_f");
    Var u("u"), v("v");
    RDom r({{0, 8}, {0, 6}}, "rf_two_r");
    f(x) = 5;
    f(x) = max(f(x), in(r.x, r.y) * (x + 1) - r.x * r.y);
    Func intm = f.update(0).rfactor({{r.y, u}, {r.x, v}});
    EXPECT_EQ(intm.args(), (std::vector<std::string>{"x", "u", "v"}));
    intm.compute_root().parallel(u);
    expect_same_buffer<int>(reference_realize(f, {3}), f.realize({3}));
}

// rfactor of an update written as fma(a, b, f(x)), as conv2d's is: the intermediate keeps the
// fused multiply-add (a register tile of sums then compiles to FMAs), and the merge into f is a
// plain sum. Small integers in the input keep every sum exact, so the result equals the
// reference evaluator's whatever the order of the sums.
TEST(Pipeline, RfactorOfAnFmaUpdateKeepsTheFmaInTheIntermediate) {
    Buffer<float> in({12, 4}, "rf_fma_in");
    for (int y = 0; y < 4; y++) {
        for (int x = 0; x < 12; x++)
            in(x, y) = float((x * 5 + y * 3) % 7 - 3);
    }
    Func f("rf_fma_f");
    Var x("x"), u("u");
    RDom r({{0, 12}, {0, 4}}, "rf_fma_r");
    f(x) = 0.5f;
    f(x) = fma(in(r.x, r.y), cast<float>(x + r.y), f(x));
    Func intm = f.update(0).rfactor(r.y, u);
    intm.compute_root();
    expect_same_buffer<float>(reference_realize(f, {6}), f.realize({6}));
    std::string text = to_string(Pipeline(f).lower().body);
    // The intermediate's store is an fma; the output's adds the intermediate in.
    bool intm_fma = false, merged = false;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        intm_fma = intm_fma || (line.find("rf_fma_f_intm[") != std::string::npos &&
                                line.find("] = fma(") != std::string::npos);
        merged = merged || line.find("+ rf_fma_f_intm[") != std::string::npos;
    }
    EXPECT_TRUE(intm_fma) << text;
    EXPECT_TRUE(merged) << text;
}

TEST(PipelineErrors, FailedChecksReturnTheirOwnErrorCodes) {
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
