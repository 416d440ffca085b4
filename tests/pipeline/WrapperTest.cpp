// in() wrappers end to end: realized through the JIT, every schedule of a wrapper gives the
// reference evaluator's result (a wrapper per tile, vectorized; a global wrapper; an ImageParam
// packed per column panel of a matmul, which the lowered code allocates per panel; an input
// staged per GPU block in shared memory), unscheduled wrappers change nothing, and a trace with
// wrappers replays to the same code and result.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln.h"
#include "lang/IRVisitor.h"
#include "tests/pipeline/GPUTestUtil.h"

namespace kiln {
namespace {

template <typename T>
void expect_same_buffer(const Buffer<T> &want, const Buffer<T> &got) {
    ASSERT_EQ(want.dimensions(), 2);
    ASSERT_EQ(got.dimensions(), 2);
    ASSERT_EQ(want.dim(0).extent, got.dim(0).extent);
    ASSERT_EQ(want.dim(1).extent, got.dim(1).extent);
    int reported = 0;
    for (int y = 0; y < want.dim(1).extent; y++) {
        for (int x = 0; x < want.dim(0).extent; x++) {
            if (want(x, y) != got(x, y) && reported++ < 5)
                ADD_FAILURE() << "at (" << x << ", " << y << "): want " << want(x, y) << ", got "
                              << got(x, y);
        }
    }
}

Buffer<int> ramp(const std::vector<int> &extents, const std::string &name, int seed) {
    Buffer<int> b(extents, name);
    int k = seed;
    b.for_each_offset([&](int64_t offset) { b.data()[offset] = (k++ * 37 + 11) % 19 - 9; });
    return b;
}

/// A stencil f of the input read by g (through a wrapper, in the tests) and by h.
struct Stencil {
    ImageParam in{Int(32), 2, "wrap_in"};
    Func f{"wrap_f"}, g{"wrap_g"}, h{"wrap_h"}, out{"wrap_out"};
    Stencil() {
        Var x("x"), y("y");
        f(x, y) = in(x, y) * 3 + in(x + 1, y + 1);
        g(x, y) = f(x, y) + f(x + 1, y) * 2 + f(x, y + 1);
        h(x, y) = f(x + 2, y) - x;
        out(x, y) = g(x, y) * 5 + h(x, y);
        in.set(ramp({40, 30}, "wrap_in_data", 3));
    }
};

/// Per producer in the lowered code, the buffers its loops load from; the allocations, each
/// with the loops around it.
class LoweredCode : public IRVisitor {
public:
    std::map<std::string, std::set<std::string>> reads;
    std::map<std::string, std::vector<std::string>> allocated_inside;

private:
    std::vector<std::string> producing, loops;
    using IRVisitor::visit;
    void visit(const ProducerConsumer *op) override {
        if (op->is_producer) producing.push_back(op->name);
        IRVisitor::visit(op);
        if (op->is_producer) producing.pop_back();
    }
    void visit(const For *op) override {
        loops.push_back(op->name);
        IRVisitor::visit(op);
        loops.pop_back();
    }
    void visit(const Load *op) override {
        IRVisitor::visit(op);
        if (!producing.empty()) reads[producing.back()].insert(op->name);
    }
    void visit(const Allocate *op) override {
        allocated_inside[op->name] = loops;
        IRVisitor::visit(op);
    }
};

LoweredCode lowered_code(const Func &output) {
    LoweredCode c;
    c.include(Pipeline(output).lower("wrappers").body);
    return c;
}

TEST(Wrapper, AWrapperComputedPerTileAndVectorizedGivesTheReferenceResult) {
    Stencil s;
    Buffer<int> want = reference_realize(s.out, {33, 21});
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    s.f.compute_root();
    s.out.tile(x, y, xo, yo, xi, yi, 16, 8).vectorize(xi, 8);
    s.g.compute_at(s.out, xo).vectorize(x, 8);
    Func fg = s.f.in(s.g);
    fg.compute_at(s.out, xo).vectorize(x, 8);
    LoweredCode code = lowered_code(s.out);
    EXPECT_EQ(code.reads["wrap_g"], std::set<std::string>{"wrap_f_in_wrap_g"});
    EXPECT_EQ(code.reads["wrap_f_in_wrap_g"], std::set<std::string>{"wrap_f"});
    // h is inlined into out, which still reads f itself.
    EXPECT_TRUE(code.reads["wrap_out"].count("wrap_f"));
    EXPECT_FALSE(code.reads["wrap_out"].count("wrap_f_in_wrap_g"));
    ASSERT_TRUE(code.allocated_inside.count("wrap_f_in_wrap_g"));
    EXPECT_EQ(code.allocated_inside["wrap_f_in_wrap_g"].back(), "wrap_out.s0.xo");
    Buffer<int> got = Pipeline(s.out).realize({33, 21});
    expect_same_buffer(want, got);
}

TEST(Wrapper, UnscheduledWrappersComputeWhatThePipelineDid) {
    Stencil plain, wrapped;
    Buffer<int> want = Pipeline(plain.out).realize({20, 12});
    wrapped.f.in(wrapped.g);
    wrapped.f.in();
    wrapped.in.in();
    wrapped.in.in(wrapped.f);
    Buffer<int> got = Pipeline(wrapped.out).realize({20, 12});
    expect_same_buffer(want, got);
    expect_same_buffer<int>(reference_realize(wrapped.out, {20, 12}), got);
}

TEST(Wrapper, AGlobalWrapperIsReadByEveryConsumer) {
    Stencil s;
    Buffer<int> want = reference_realize(s.out, {25, 14});
    Var x("x"), y("y");
    s.g.compute_root();
    s.h.compute_root();
    s.f.compute_root();
    Func all = s.f.in();
    all.compute_root().vectorize(x, 4).parallel(y);
    LoweredCode code = lowered_code(s.out);
    EXPECT_EQ(code.reads["wrap_g"], std::set<std::string>{"wrap_f_in"});
    EXPECT_EQ(code.reads["wrap_h"], std::set<std::string>{"wrap_f_in"});
    EXPECT_EQ(code.reads["wrap_f_in"], std::set<std::string>{"wrap_f"});
    Buffer<int> got = Pipeline(s.out).realize({25, 14});
    expect_same_buffer(want, got);
}

TEST(Wrapper, AWrapperOfAnImageParamForOneConsumerLeavesTheOthersReadingTheImage) {
    Stencil s;
    Buffer<int> want = reference_realize(s.out, {18, 9});
    Var x("x"), y("y");
    s.f.compute_root();
    s.h.compute_root();
    Func in_f = s.in.in(s.f);
    in_f.compute_at(s.f, y).vectorize(_0, 4);
    EXPECT_EQ(in_f.name(), "wrap_in_in_wrap_f");
    LoweredCode code = lowered_code(s.out);
    EXPECT_EQ(code.reads["wrap_f"], std::set<std::string>{"wrap_in_in_wrap_f"});
    EXPECT_EQ(code.reads["wrap_in_in_wrap_f"], std::set<std::string>{"wrap_in"});
    Buffer<int> got = Pipeline(s.out).realize({18, 9});
    expect_same_buffer(want, got);
}

/// C = A * B as in apps/Matmul.cpp, without a copy of B in the algorithm: prod sums over k, C
/// reads prod.
struct MatMul {
    ImageParam A{Int(32), 2, "wrap_A"}, B{Int(32), 2, "wrap_B"};
    Func prod{"wrap_prod"}, C{"wrap_C"};
    RDom k{0, 20, "k"};
    MatMul() {
        Var j("j"), i("i");
        prod(j, i) = 0;
        prod(j, i) += A(k, i) * B(j, k);
        C(j, i) = prod(j, i);
        A.set(ramp({20, 10}, "wrap_A_data", 1));
        B.set(ramp({40, 20}, "wrap_B_data", 2));
    }
};

/// Panels of 16 columns of C (the last one shifted inwards, 40 = 2.5 panels), prod per panel,
/// and the K x 16 panel of B that prod reads packed per panel.
void schedule_panels(MatMul &m) {
    Var j("j"), i("i"), jo("jo"), ji("ji");
    m.C.split(j, jo, ji, 16).reorder(ji, i, jo).vectorize(ji, 8);
    m.prod.compute_at(m.C, jo).vectorize(j, 8);
    m.prod.update(0).vectorize(j, 8);
    Func Bp = m.B.in();
    Bp.compute_at(m.C, jo).vectorize(_0, 8);
}

TEST(Wrapper, AnImageParamWrapperPacksAMatmulPanelPerColumnPanel) {
    MatMul m;
    Buffer<int> want = reference_realize(m.C, {40, 10});
    schedule_panels(m);
    LoweredCode code = lowered_code(m.C);
    ASSERT_TRUE(code.allocated_inside.count("wrap_B_in")) << Pipeline(m.C).lowered_text();
    // One panel per column panel of C.
    EXPECT_EQ(code.allocated_inside["wrap_B_in"], std::vector<std::string>{"wrap_C.s0.jo"});
    EXPECT_EQ(code.reads["wrap_prod"], (std::set<std::string>{"wrap_A", "wrap_B_in", "wrap_prod"}));
    EXPECT_EQ(code.reads["wrap_B_in"], std::set<std::string>{"wrap_B"});
    Buffer<int> got = Pipeline(m.C).realize({40, 10});
    expect_same_buffer(want, got);
}

TEST(Wrapper, ATraceWithWrappersReplaysToTheSameCodeAndResult) {
    MatMul original;
    schedule_panels(original);
    Func packed_a = original.A.in(original.prod);
    packed_a.compute_at(original.prod, Var("i")).reorder_storage(_1, _0);
    ScheduleTrace trace =
        ScheduleTrace::parse(ScheduleTrace::capture({original.C}).to_json_string());
    MatMul fresh;
    trace.apply({fresh.C});
    EXPECT_EQ(Pipeline(fresh.C).lowered_text(), Pipeline(original.C).lowered_text());
    Buffer<int> want = reference_realize(original.C, {40, 10});
    expect_same_buffer<int>(want, Pipeline(original.C).realize({40, 10}));
    expect_same_buffer<int>(want, Pipeline(fresh.C).realize({40, 10}));

    remove_schedule({fresh.C});
    EXPECT_TRUE(fresh.B.get_contents()->wrappers.empty());
    expect_same_buffer<int>(want, Pipeline(fresh.C).realize({40, 10}));
}

/// Each case runs on every GPU API, skipped with the reason where this machine cannot run it.
class WrapperGPU : public ::testing::TestWithParam<GpuApi> {
protected:
    void SetUp() override {
        std::string why = gpu_unavailable(GetParam());
        if (!why.empty()) GTEST_SKIP() << "no " << gpu_api_name(GetParam()) << " device: " << why;
    }
    Target target() const { return Target::host().with_gpu(GetParam()); }
};

TEST_P(WrapperGPU, AnInputStagedPerBlockInSharedMemoryGivesTheReferenceResult) {
    const int W = 45, H = 29; // not multiples of the tile
    ImageParam in(Int(32), 2, "wrap_gpu_in");
    in.set(ramp({W + 2, H + 2}, "wrap_gpu_in_data", 5));
    Func blur_x("wrap_gpu_blur_x"), blur_y("wrap_gpu_blur_y");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    blur_x(x, y) = in(x, y) + in(x + 1, y) * 2 + in(x + 2, y);
    blur_y(x, y) = blur_x(x, y) + blur_x(x, y + 1) * 3 + blur_x(x, y + 2);
    Buffer<int> want = reference_realize(blur_y, {W, H});
    blur_y.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
    blur_x.compute_at(blur_y, xo).store_in(MemoryType::GPUShared).gpu_threads(x, y);
    Func tile = in.in(); // the block's 18 x 10 tile of the input, read by blur_x
    tile.compute_at(blur_y, xo).store_in(MemoryType::GPUShared).gpu_threads(_0, _1);
    Pipeline p(blur_y);
    expect_same_buffer<int>(want, p.realize({W, H}, target()));
    CompiledPipeline c = p.compile_jit(target());
    ASSERT_EQ(c.lowered().kernels.size(), 1u);
    EXPECT_EQ(c.lowered().kernels[0].threads[0], 18);
    EXPECT_EQ(c.lowered().kernels[0].threads[1], 10);
    expect_valid_cuda(p);
}

INSTANTIATE_TEST_SUITE_P(On, WrapperGPU, ::testing::Values(GpuApi::OpenCL, GpuApi::CUDA),
                         [](const ::testing::TestParamInfo<GpuApi> &info) {
                             return std::string(info.param == GpuApi::CUDA ? "CUDA" : "OpenCL");
                         });

} // namespace
} // namespace kiln
