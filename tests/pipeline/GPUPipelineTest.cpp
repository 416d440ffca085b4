// GPU schedules end to end: pipelines with gpu_blocks/gpu_threads loops and shared memory run
// as OpenCL kernels (PoCL here) and agree with the reference evaluator; their kernels also
// compile as CUDA C (NVRTC + ptxas for sm_90); host/device copies follow the dirty bits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <functional>

#include "tests/lang/ErrorOf.h"
#include "tests/pipeline/GPUTestUtil.h"
#include "tests/runtime/fake_cuda/FakeCudaDriver.h"

// PoCL's own LLVM keeps about 2 MB after its first kernel compile, on its worker thread: not
// kiln's leak. The suppression covers only the OpenCL implementation's libraries.
extern "C" const char *__lsan_default_suppressions() { // NOLINT: the sanitizer's name
    return "leak:libpocl.so\n"
           "leak:libpocl-devices-\n"
           "leak:libLLVM-15.so\n"
           "leak:libclang-cpp.so.15\n";
}

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename T>
void expect_near_buffer(const Buffer<T> &want, const Buffer<T> &got, double tolerance = 0) {
    ASSERT_EQ(want.dimensions(), got.dimensions());
    int reported = 0;
    std::vector<int> at(want.dimensions());
    for (int d = 0; d < want.dimensions(); d++) {
        ASSERT_EQ(want.dim(d).extent, got.dim(d).extent) << "dimension " << d;
        at[d] = want.dim(d).min;
    }
    for (int64_t n = 0; n < want.number_of_elements(); n++) {
        double w = double(*reinterpret_cast<T *>(want.address_of(at)));
        double g = double(*reinterpret_cast<T *>(got.address_of(at)));
        bool ok = tolerance == 0 ? w == g : std::fabs(w - g) <= tolerance * (1 + std::fabs(w));
        if (!ok && reported++ < 5) {
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

template <typename T>
Buffer<T> pattern(const std::vector<int> &extents, const std::string &name, int seed = 1) {
    Buffer<T> b(extents, name);
    uint32_t k = uint32_t(seed);
    T *p = b.data();
    b.for_each_offset([&](int64_t offset) {
        k = (k * 1103515245u + 12345u) & 0x7fffffffu;
        p[offset] = T((k >> 8) % 97) / T(std::is_floating_point_v<T> ? 8 : 1);
    });
    return b;
}

/// Each case runs on every GPU API: OpenCL (PoCL here) and CUDA, each skipped with the reason
/// where this machine cannot run it (CUDA needs libcuda.so.1 and a device).
class GPUPipeline : public ::testing::TestWithParam<GpuApi> {
protected:
    void SetUp() override {
        std::string why = gpu_unavailable(GetParam());
        if (!why.empty()) GTEST_SKIP() << "no " << gpu_api_name(GetParam()) << " device: " << why;
    }
    Target target() const { return Target::host().with_gpu(GetParam()); }
};

TEST_P(GPUPipeline, BlurWithASharedMemoryStageEqualsTheReference) {
    const int W = 45, H = 29; // not multiples of the tile: guards and shifted tiles
    Buffer<float> in = pattern<float>({W + 2, H + 2}, "gpu_blur_in");
    Func blur_x("gpu_blur_x"), blur_y("gpu_blur_y");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    blur_x(x, y) = (in(x, y) + in(x + 1, y) + in(x + 2, y)) / 3.f;
    blur_y(x, y) = (blur_x(x, y) + blur_x(x, y + 1) + blur_x(x, y + 2)) / 3.f;
    Buffer<float> want = reference_realize(blur_y, {W, H});
    blur_y.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
    blur_x.compute_at(blur_y, xo).store_in(MemoryType::GPUShared).gpu_threads(x, y);
    Pipeline p(blur_y);
    Buffer<float> got = p.realize({W, H}, target());
    expect_near_buffer(want, got);

    CompiledPipeline c = p.compile_jit(target());
    ASSERT_EQ(c.lowered().kernels.size(), 1u);
    const DeviceKernel &k = c.lowered().kernels[0];
    EXPECT_EQ(k.threads[0], 16);
    EXPECT_EQ(k.threads[1], 10); // blur_x's tile is two rows taller than blur_y's
    EXPECT_EQ(k.shared_bytes, 16 * 10 * 4);
    const bool opencl = GetParam() == GpuApi::OpenCL;
    EXPECT_THAT(c.device_source(), HasSubstr(opencl ? "__local float" : "__shared__ float"));
    EXPECT_THAT(c.device_source(),
                HasSubstr(opencl ? "barrier(CLK_LOCAL_MEM_FENCE)" : "__syncthreads()"));
    expect_valid_cuda(p);
}

/// The matmul of the GPU tests, 37 x 43 x 29 (no tile divides it): C(j, i) = prod(j, i), the
/// sums over k of As(k, i) * Bs(j, k), As and Bs copies of A and B that a schedule may stage; and
/// the reference evaluator's result.
struct GpuMatmul {
    explicit GpuMatmul(const std::string &prefix)
        : A(pattern<float>({K, M}, prefix + "_A", 3)), B(pattern<float>({N, K}, prefix + "_B", 5)),
          k(0, K, "k"), As(prefix + "_As"), Bs(prefix + "_Bs"), prod(prefix + "_prod"),
          C(prefix + "_C") {
        Var j("j"), i("i"), kk("kk");
        As(kk, i) = A(kk, i);
        Bs(j, kk) = B(j, kk);
        prod(j, i) = 0.f;
        prod(j, i) += As(k, i) * Bs(j, k);
        C(j, i) = prod(j, i);
        want = reference_realize(C, {N, M});
    }
    /// Stages the K step ko of A and B in shared memory (copied by all threads of the block),
    /// then runs on `target` and compares C with the reference.
    Pipeline stage_inputs_and_check(const RVar &ko, const Target &target) {
        Var j("j"), i("i"), kk("kk");
        As.compute_at(prod, ko).store_in(MemoryType::GPUShared).gpu_threads(kk, i);
        Bs.compute_at(prod, ko).store_in(MemoryType::GPUShared).gpu_threads(j, kk);
        Pipeline p(C);
        Buffer<float> got = p.realize({N, M}, target);
        expect_near_buffer(want, got, 1e-5);
        return p;
    }
    static constexpr int M = 37, N = 43, K = 29;
    Buffer<float> A, B;
    RDom k;
    Func As, Bs, prod, C;
    Buffer<float> want;
};

TEST_P(GPUPipeline, MatmulWithSharedTilesAndSeveralOutputsPerThread) {
    GpuMatmul mm("gpu_mm");
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii"), jt("jt"), it("it"), jr("jr"),
        ir("ir");
    RVar ko("ko"), ki("ki");
    // A 16 x 16 output tile per block, 8 x 8 threads, 2 x 2 outputs per thread.
    mm.C.gpu_tile(j, i, jo, io, ji, ii, 16, 16);
    mm.prod.compute_at(mm.C, jo).store_in(MemoryType::GPUShared);
    mm.prod.split(j, jt, jr, 2).split(i, it, ir, 2).reorder(jr, ir, jt, it).gpu_threads(jt, it);
    mm.prod.update(0)
        .split(mm.k, ko, ki, 8)
        .split(j, jt, jr, 2)
        .split(i, it, ir, 2)
        .reorder(ki, jr, ir, jt, it, ko)
        .gpu_threads(jt, it);
    Pipeline p = mm.stage_inputs_and_check(ko, target());
    EXPECT_EQ(p.compile_jit(target()).lowered().kernels.size(), 1u);
    expect_valid_cuda(p);
}

// The same matmul with the block's sums in registers: prod at block level in MemoryType::Register
// is lifted into a private array per thread (its 2 x 2 sums, unrolled: four floats indexed by
// constants), since every stage touches prod through the same thread tiles; shared memory holds
// only the staged tiles of A and B.
TEST_P(GPUPipeline, MatmulWithSumsInRegistersAndSharedTiles) {
    GpuMatmul mm("gpu_rg");
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii"), jt("jt"), it("it"), jr("jr"),
        ir("ir");
    RVar ko("ko"), ki("ki");
    // A 16 x 16 output tile per block, 8 x 8 threads, 2 x 2 outputs per thread in every stage.
    mm.C.tile(j, i, jo, io, ji, ii, 16, 16)
        .split(ji, jt, jr, 2)
        .split(ii, it, ir, 2)
        .reorder(jr, ir, jt, it, jo, io)
        .unroll(jr)
        .unroll(ir)
        .gpu_blocks(jo, io)
        .gpu_threads(jt, it);
    mm.prod.compute_at(mm.C, jo).store_in(MemoryType::Register);
    mm.prod.split(j, jt, jr, 2)
        .split(i, it, ir, 2)
        .reorder(jr, ir, jt, it)
        .unroll(jr)
        .unroll(ir)
        .gpu_threads(jt, it);
    mm.prod.update(0)
        .split(mm.k, ko, ki, 8)
        .split(j, jt, jr, 2)
        .split(i, it, ir, 2)
        .reorder(jr, ir, ki, jt, it, ko)
        .unroll(jr)
        .unroll(ir)
        .gpu_threads(jt, it);
    Pipeline p = mm.stage_inputs_and_check(ko, target());
    CompiledPipeline c = p.compile_jit(target());
    ASSERT_EQ(c.lowered().kernels.size(), 1u);
    EXPECT_EQ(c.lowered().kernels[0].shared_bytes, (8 * 16 + 16 * 8) * 4);
    EXPECT_THAT(c.device_source(), HasSubstr("float gpu_rg_prod[4];"));
    EXPECT_THAT(c.device_source(), Not(HasSubstr("local float gpu_rg_prod")));
    EXPECT_THAT(c.device_source(), Not(HasSubstr("__shared__ float gpu_rg_prod")));
    expect_valid_cuda(p);
}

// Four outputs per thread along x, vectorized: whole-vector loads and stores of global and
// shared memory (OpenCL vload4/vstore4; CUDA float4 through helpers that check the alignment),
// with a width that is not a multiple of 4 (shifted tiles) and inputs offset by one element
// (loads that are not 16-byte aligned).
TEST_P(GPUPipeline, VectorizedThreadLoopsLoadAndStoreWholeVectors) {
    const int W = 42, H = 13, K = 9;
    Buffer<float> A = pattern<float>({K, H}, "gpu_vec_A", 3);
    Buffer<float> B = pattern<float>({W + 1, K}, "gpu_vec_B", 5);
    Var x("x"), y("y"), kv("kv"), xo("xo"), yo("yo"), xi("xi"), yi("yi"), xt("xt"), xr("xr");
    RDom k(0, K, "k");
    Func Bs("gpu_vec_Bs"), prod("gpu_vec_prod"), C("gpu_vec_C");
    Bs(x, kv) = B(x + 1, kv);
    prod(x, y) = 0.f;
    prod(x, y) += A(k, y) * Bs(x, k);
    C(x, y) = prod(x, y) * 2.f;
    Buffer<float> want = reference_realize(C, {W, H});

    C.gpu_tile(x, y, xo, yo, xi, yi, 16, 4)
        .split(xi, xt, xr, 4)
        .reorder(xr, xt, yi, xo, yo)
        .gpu_threads(xt, yi)
        .vectorize(xr);
    prod.compute_at(C, xo).store_in(MemoryType::GPUShared);
    prod.split(x, xt, xr, 4).reorder(xr, xt, y).gpu_threads(xt, y).vectorize(xr);
    prod.update(0).split(x, xt, xr, 4).reorder(xr, xt, y, k).gpu_threads(xt, y).vectorize(xr);
    Bs.compute_at(prod, k).store_in(MemoryType::GPUShared);
    Bs.split(x, xt, xr, 4).reorder(xr, xt, kv).gpu_threads(xt, kv).vectorize(xr);
    Pipeline p(C);
    Buffer<float> got = p.realize({W, H}, target());
    expect_near_buffer(want, got, 1e-5);
    CompiledPipeline c = p.compile_jit(target());
    std::string opencl = print_device_source(c.lowered().kernels, GpuApi::OpenCL);
    std::string cuda = print_device_source(c.lowered().kernels, GpuApi::CUDA);
    EXPECT_THAT(opencl, HasSubstr("vload4(0, "));
    EXPECT_THAT(opencl, HasSubstr("vstore4("));
    EXPECT_THAT(cuda, HasSubstr("float4"));
    EXPECT_THAT(cuda, HasSubstr("kiln_load_f32x4("));
    EXPECT_THAT(cuda, HasSubstr("kiln_store_f32x4("));
    expect_valid_cuda(p);
}

// An update split inside a block (several outputs per thread) that reads its inputs directly:
// the inputs are needed over the block's tile only. (Bounds of the split's loops were bounded
// term by term, as if the tile's two ends moved independently with the block, and the buffer
// checks asked for 3 more tiles of B than exist.)
TEST_P(GPUPipeline, UpdateSplitInsideABlockNeedsOnlyTheTilesOfItsInputs) {
    const int N = 64, M = 48, K = 20;
    Buffer<float> A = pattern<float>({K, M}, "gpu_us_A", 3);
    Buffer<float> B = pattern<float>({N, K}, "gpu_us_B", 5);
    Func prod("gpu_us_prod"), C("gpu_us_C");
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii"), jt("jt"), jr("jr");
    RDom k(0, K, "k");
    prod(j, i) = 0.f;
    prod(j, i) += A(k, i) * B(j, k);
    C(j, i) = prod(j, i);
    Buffer<float> want = reference_realize(C, {N, M});
    C.gpu_tile(j, i, jo, io, ji, ii, 16, 16);
    prod.compute_at(C, jo).gpu_threads(j, i);
    prod.update(0).split(j, jt, jr, 2).reorder(k, jr, jt, i).gpu_threads(jt, i);
    Pipeline p(C);
    expect_near_buffer(want, Buffer<float>(p.realize({N, M}, target())));
    expect_valid_cuda(p);
}

// RDom::where inside a kernel: each thread's sum over the lower triangle of its tile keeps its
// guard (loops in kernels are not trimmed) and gives the reference's result.
TEST_P(GPUPipeline, AnUpdateOverAPredicatedDomainPerThread) {
    const int N = 40, M = 24, K = 17;
    Buffer<float> A = pattern<float>({K, M}, "gpu_where_A", 3);
    Func tri("gpu_where_tri");
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii");
    RDom k(0, K, "k");
    k.where(k <= j % K && (k + i) % 3 != 0);
    tri(j, i) = 0.f;
    tri(j, i) += A(k, i) * cast<float>(j + 1);
    Buffer<float> want = reference_realize(tri, {N, M});
    tri.gpu_tile(j, i, jo, io, ji, ii, 8, 8);
    tri.update(0).gpu_tile(j, i, jo, io, ji, ii, 8, 8);
    Pipeline p(tri);
    expect_near_buffer(want, Buffer<float>(p.realize({N, M}, target())));
    expect_valid_cuda(p);
}

TEST_P(GPUPipeline, SoftmaxRowsWithABlockPerRow) {
    const int W = 50, H = 7;
    Buffer<float> in = pattern<float>({W, H}, "gpu_softmax_in", 7);
    Var x("x"), y("y");
    RDom r(0, W, "r");
    Func row_max("gpu_row_max"), e("gpu_exp"), row_sum("gpu_row_sum"), out("gpu_softmax");
    row_max(y) = -1e30f;
    row_max(y) = max(row_max(y), in(r, y));
    e(x, y) = exp(in(x, y) - row_max(y));
    row_sum(y) = 0.f;
    row_sum(y) += e(r, y);
    out(x, y) = e(x, y) / row_sum(y);
    Buffer<float> want = reference_realize(out, {W, H});
    // A block per row; the row's max and sum are computed once per block into shared memory
    // (thread 0, the block-level rule), then every thread normalizes its columns.
    Var xo("xo"), xi("xi");
    out.bound(x, 0, W)
        .split(x, xo, xi, 64, TailStrategy::GuardWithIf)
        .reorder(xi, xo, y)
        .gpu_blocks(y)
        .gpu_threads(xi);
    row_max.compute_at(out, y);
    row_sum.compute_at(out, y);
    e.compute_at(out, y).gpu_threads(x);
    Pipeline p(out);
    Buffer<float> got = p.realize({W, H}, target());
    expect_near_buffer(want, got, 1e-5);
    expect_valid_cuda(p);
}

TEST_P(GPUPipeline, UpdateStagesAndOddSizesUseGuards) {
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    Func f("gpu_update_f");
    f(x, y) = x * 3 + y;
    f(x, y) = f(x, y) * 2 - x;
    Buffer<int> want = reference_realize(f, {23, 11});
    f.gpu_tile(x, y, xo, yo, xi, yi, 8, 4);
    f.update(0).gpu_tile(x, y, xo, yo, xi, yi, 8, 4, TailStrategy::GuardWithIf);
    Pipeline p(f);
    Buffer<int> got = p.realize({23, 11}, target());
    expect_near_buffer(want, got);
    EXPECT_EQ(p.compile_jit(target()).lowered().kernels.size(), 2u);
    expect_valid_cuda(p);
}

TEST_P(GPUPipeline, ChainGPUHostGPUCopiesEachBufferOnce) {
    Buffer<float> in = pattern<float>({64, 8}, "gpu_chain_in");
    Var x("x"), y("y"), xo("xo"), xi("xi");
    Func a("gpu_chain_a"), b("gpu_chain_b"), c("gpu_chain_c");
    a(x, y) = in(x, y) * 2.f;
    b(x, y) = a(x, y) + 1.f; // on the host
    c(x, y) = b(x, y) * b(x, y);
    Buffer<float> want = reference_realize(c, {64, 8});
    a.compute_root().gpu_tile(x, xo, xi, 16);
    b.compute_root();
    c.gpu_tile(x, xo, xi, 16);
    Pipeline p(c);
    CompiledPipeline compiled = p.compile_jit(target());
    EXPECT_EQ(compiled.lowered().kernels.size(), 2u);
    Buffer<float> got({64, 8}, "gpu_chain_out");
    kiln_device_reset_copy_counts();
    compiled.run({got});
    int64_t to_device = 0, to_host = 0;
    kiln_device_copy_counts(&to_device, &to_host);
    // in and b go to the device; a comes back for the host stage; c stays on the device.
    EXPECT_EQ(to_device, 2);
    EXPECT_EQ(to_host, 1);
    EXPECT_TRUE(got.device_dirty());
    got.copy_to_host();
    kiln_device_copy_counts(&to_device, &to_host);
    EXPECT_EQ(to_host, 2);
    EXPECT_FALSE(got.device_dirty());
    expect_near_buffer(want, got);

    // Running again: the input's device copy is current, so only b goes to the device.
    kiln_device_reset_copy_counts();
    compiled.run({got});
    kiln_device_copy_counts(&to_device, &to_host);
    EXPECT_EQ(to_device, 1);
    EXPECT_EQ(to_host, 1);
    expect_valid_cuda(p);
}

TEST_P(GPUPipeline, TwoGPUStagesCopyNothingBetweenThem) {
    Buffer<float> in = pattern<float>({40}, "gpu_two_in");
    Var x("x"), xo("xo"), xi("xi");
    Func a("gpu_two_a"), b("gpu_two_b");
    a(x) = in(x) + 1.f;
    b(x) = a(x) * 3.f;
    a.compute_root().gpu_tile(x, xo, xi, 8);
    b.gpu_tile(x, xo, xi, 8);
    Buffer<float> want = reference_realize(b, {40});
    Buffer<float> got({40}, "gpu_two_out");
    kiln_device_reset_copy_counts();
    Pipeline(b).realize({got}, target());
    int64_t to_device = 0, to_host = 0;
    kiln_device_copy_counts(&to_device, &to_host);
    EXPECT_EQ(to_device, 1); // the input
    EXPECT_EQ(to_host, 1);   // the output, once, by realize()
    expect_near_buffer(want, got);
}

TEST_P(GPUPipeline, ModifiedInputsAreCopiedAgain) {
    Buffer<int> in({16}, "gpu_modified_in");
    for (int i = 0; i < 16; i++)
        in(i) = i;
    Var x("x"), xo("xo"), xi("xi");
    Func f("gpu_modified_f");
    f(x) = in(x)*10;
    f.gpu_tile(x, xo, xi, 4);
    Pipeline p(f);
    Buffer<int> first = p.realize(std::vector<int>{16}, target());
    EXPECT_EQ(first(5), 50);
    in(5) = 7; // element access marks the host copy dirty
    Buffer<int> second = p.realize(std::vector<int>{16}, target());
    EXPECT_EQ(second(5), 70);
    // An output read and written on the host between runs is overwritten on the device again.
    second(3) = -1;
    p.realize({second}, target());
    EXPECT_EQ(second(3), 30);
    EXPECT_EQ(second(5), 70);
}

TEST_P(GPUPipeline, TuplesAndSmallIntegerAndDoubleTypes) {
    Buffer<uint8_t> in8 = pattern<uint8_t>({33, 9}, "gpu_types_u8");
    Buffer<int16_t> in16 = pattern<int16_t>({33, 9}, "gpu_types_i16", 4);
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    Func t("gpu_tuple");
    t(x, y) = Tuple({cast<uint8_t>(in8(x, y) * 3 + 200), // wraps
                     cast<int16_t>(in16(x, y) * -7 / 3),
                     cast<double>(in16(x, y)) / 7.0 + cast<double>(in8(x, y))});
    std::vector<BufferBase> want = reference_realize_all(t, {33, 9});
    t.gpu_tile(x, y, xo, yo, xi, yi, 8, 8);
    Buffer<uint8_t> g0({33, 9});
    Buffer<int16_t> g1({33, 9});
    Buffer<double> g2({33, 9});
    Pipeline p(t);
    p.realize({g0, g1, g2}, target());
    expect_near_buffer(Buffer<uint8_t>(want[0]), g0);
    expect_near_buffer(Buffer<int16_t>(want[1]), g1);
    expect_near_buffer(Buffer<double>(want[2]), g2, 1e-15);
    expect_valid_cuda(p);
}

// A Tuple Func computed per block in MemoryType::Register: its values are lets before its
// stores, and a consumer's reads of it are lets before the consumer's stores. Each thread keeps
// its own element of both buffers (gpu_rtup_p.0 and gpu_rtup_p.1) and the result matches the
// reference; read at a neighbour's element, the Func is refused, naming the buffer. (The
// lifting once skipped accesses inside let values: the reads kept their block-level index into
// the one-element array, and every value was wrong; found by the GPU schedule fuzzer.)
TEST_P(GPUPipeline, ATupleInRegistersAtBlockLevelKeepsEachThreadsElements) {
    Buffer<int> in = pattern<int>({29, 13}, "gpu_rtup_in");
    auto build = [&](const std::string &name, bool neighbours, Func *out) {
        Func p(name + "_p");
        *out = Func(name + "_out");
        Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
        p(x, y) = Tuple({in(x, y) * 2 + x, cast<float>(in(x, y)) * 0.5f - 0.25f});
        if (neighbours)
            (*out)(x, y) = Tuple({p(x, y)[0] + p(x + 1, y)[0], p(x, y + 1)[1] * 3.0f});
        else
            (*out)(x, y) = Tuple({p(x, y)[0] + y, p(x, y)[1] * 3.0f - p(x, y)[0]});
        out->bound(x, 0, 28).bound(y, 0, 12).gpu_tile(x, y, xo, yo, xi, yi, 7, 4);
        p.compute_at(*out, xo).store_in(MemoryType::Register).gpu_threads(x, y);
    };
    Func out;
    build("gpu_rtup", false, &out);
    std::vector<BufferBase> want = reference_realize_all(out, {28, 12});
    Buffer<int> g0({28, 12});
    Buffer<float> g1({28, 12});
    Pipeline p(out);
    // In the kernel every access of both buffers, loads in lets included, is each thread's
    // element 0.
    const std::string text = p.lowered_text();
    const std::string kernel = text.substr(std::min(text.find("== kernel"), text.size()));
    EXPECT_THAT(kernel, HasSubstr("allocate gpu_rtup_p.1[float32 * 1] in register"));
    for (const std::string &b : {std::string("gpu_rtup_p.0["), std::string("gpu_rtup_p.1[")}) {
        int all = 0, own = 0;
        for (size_t at = kernel.find(b); at != std::string::npos; at = kernel.find(b, at + 1)) {
            if (at >= 9 && kernel.compare(at - 9, 9, "allocate ") == 0) continue;
            all++;
            own += kernel.compare(at + b.size(), 2, "0]") == 0;
        }
        EXPECT_GE(all, 2) << kernel;
        EXPECT_EQ(own, all) << kernel;
    }
    p.realize({g0, g1}, target());
    expect_near_buffer(Buffer<int>(want[0]), g0);
    expect_near_buffer(Buffer<float>(want[1]), g1);
    expect_valid_cuda(p);

    Func bad;
    build("gpu_rtup_nb", true, &bad);
    EXPECT_THAT(test::error_of([&] { Pipeline(bad).compile_jit(target()); }),
                HasSubstr("store_in(Register): 'gpu_rtup_nb_p."));
}

TEST_P(GPUPipeline, SingleThreadStageRunsOnTheDevice) {
    Buffer<int> in = pattern<int>({20}, "gpu_single_in");
    Func total("gpu_single_total");
    RDom r(0, 20, "r");
    total() = 0;
    total() += in(r);
    total.update(0).gpu_single_thread();
    total.gpu_single_thread();
    Buffer<int> want = reference_realize(total, {});
    Pipeline p(total);
    Buffer<int> got = p.realize(std::vector<int>{}, target());
    EXPECT_EQ(got(), want());
    EXPECT_EQ(p.compile_jit(target()).lowered().kernels.size(), 2u);
    expect_valid_cuda(p);
}

TEST_P(GPUPipeline, ThreadLoopsOfPrivateProducers) {
    // A producer computed per thread lives in thread-private memory.
    Buffer<float> in = pattern<float>({30, 12}, "gpu_private_in");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    Func p1("gpu_private_p"), out("gpu_private_out");
    p1(x, y) = in(x, y) * in(x, y);
    out(x, y) = p1(x, y) + p1(x + 1, y);
    Buffer<float> want = reference_realize(out, {29, 12});
    out.gpu_tile(x, y, xo, yo, xi, yi, 8, 4);
    p1.compute_at(out, xi);
    Pipeline p(out);
    expect_near_buffer(want, Buffer<float>(p.realize({29, 12}, target())));
    expect_valid_cuda(p);
}

INSTANTIATE_TEST_SUITE_P(On, GPUPipeline, ::testing::Values(GpuApi::OpenCL, GpuApi::CUDA),
                         [](const ::testing::TestParamInfo<GpuApi> &info) {
                             return std::string(info.param == GpuApi::CUDA ? "CUDA" : "OpenCL");
                         });

// ---- CUDA host code against the fake driver -------------------------------------------------

// A JIT-compiled CUDA pipeline on the fake driver (runtime/fake_cuda: host memory, launches
// recorded, nothing computed): the host code copies the input, compiles the printed CUDA C with
// NVRTC for the device's compute capability (8.6 here), loads it once and launches the kernel
// with the schedule's grid and block; a second run launches again without loading again.
TEST(GPUPipelineFakeCUDA, HostCodeLaunchesTheKernelWithItsGridAndBlock) {
    if (gpu_unavailable(GpuApi::CUDA).empty())
        GTEST_SKIP() << "a real CUDA device is present; the fake driver would replace it";
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC cannot be loaded: " << why;
    void *fake = dlopen(KILN_TEST_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake, nullptr) << dlerror();
    auto get = [&](const char *name) { return dlsym(fake, name); };
    reinterpret_cast<FakeCudaReset>(get("fake_cuda_reset"))();
    reinterpret_cast<FakeCudaSetDevices>(get("fake_cuda_set_devices"))(1, 8, 6);
    setenv("KILN_CUDA_DRIVER", KILN_TEST_FAKE_CUDA_DRIVER, 1);
    kiln_cuda_device_interface()->release(); // forgets the failure to find a real driver
    const kiln_device_interface_t *cuda = kiln_device_interface(int(GpuApi::CUDA));
    ASSERT_NE(cuda, nullptr) << kiln_last_error_message();
    {
        Buffer<float> in = pattern<float>({37, 11}, "gpu_fake_in");
        Func out("gpu_fake_out");
        Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
        out(x, y) = in(x, y) * 2.0f + 1.0f;
        out.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
        CompiledPipeline p = Pipeline(out).compile_jit(Target::host().with_gpu(GpuApi::CUDA));
        Buffer<float> result({37, 11}, "gpu_fake_result");
        ASSERT_EQ(p.run({result}), 0) << kiln_last_error_message();
        ASSERT_EQ(p.run({result}), 0) << kiln_last_error_message();
        const FakeCudaCounters &c =
            *reinterpret_cast<FakeCudaCountersFn>(get("fake_cuda_counters"))();
        EXPECT_EQ(c.launches, 2);
        EXPECT_EQ(c.module_loads, 1);
        EXPECT_EQ(c.copies_to_device, 1) << "the input is copied once, the output never";
        FakeCudaLaunch l = {};
        ASSERT_TRUE(reinterpret_cast<FakeCudaLastLaunch>(get("fake_cuda_last_launch"))(&l));
        EXPECT_EQ(std::string(l.name), p.lowered().kernels.at(0).name);
        EXPECT_EQ((std::vector<unsigned>{l.grid[0], l.grid[1], l.grid[2]}),
                  (std::vector<unsigned>{3, 2, 1}));
        EXPECT_EQ((std::vector<unsigned>{l.block[0], l.block[1], l.block[2]}),
                  (std::vector<unsigned>{16, 8, 1}));
        std::vector<char> image(1 << 20);
        size_t n = reinterpret_cast<FakeCudaLastImage>(get("fake_cuda_last_image"))(image.data(),
                                                                                    image.size());
        std::string ptx(image.data(), n);
        EXPECT_NE(ptx.find(".target sm_86"), std::string::npos) << ptx.substr(0, 400);
        EXPECT_NE(ptx.find(l.name), std::string::npos);
        result.device_free();
        in.device_free();
    }
    EXPECT_EQ(cuda->release(), 0);
    unsetenv("KILN_CUDA_DRIVER"); // the next use looks for the real driver again
    reinterpret_cast<FakeCudaReset>(get("fake_cuda_reset"))();
}

// ---- Errors --------------------------------------------------------------------------------

TEST(GPUScheduleErrors, ThreadsWithoutBlocks) {
    Func f("gpu_err_threads");
    Var x("x");
    f(x) = x;
    f.gpu_threads(x);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("gpu_threads: loop 'x' of 'gpu_err_threads' is not inside a "
                          "gpu_blocks loop; bind an outer loop"));
}

TEST(GPUScheduleErrors, MoreThanThreeBlockDimensions) {
    Func f("gpu_err_blocks4");
    Var x("x"), y("y"), z("z"), w("w");
    f(x, y, z, w) = x + y + z + w;
    f.gpu_blocks(x, y, z).gpu_blocks(w);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("has 4 nested gpu_blocks loops"));
}

TEST(GPUScheduleErrors, MoreThanThreeThreadDimensions) {
    Func f("gpu_err_threads4");
    Var x("x"), y("y"), z("z"), w("w"), v("v");
    f(x, y, z, w, v) = x + y + z + w + v;
    f.bound(x, 0, 2).bound(y, 0, 2).bound(z, 0, 2).bound(w, 0, 2);
    f.gpu_blocks(v).gpu_threads(x, y, z).gpu_threads(w);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("a block has at most 3 thread dimensions"));
}

TEST(GPUScheduleErrors, TooManyThreadsPerBlock) {
    Func f("gpu_err_many");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    f(x, y) = x + y;
    f.gpu_tile(x, y, xo, yo, xi, yi, 64, 32);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("64 x 32 x 1 = 2048 threads per block, more than the 1024"));
}

TEST(GPUScheduleErrors, TooMuchSharedMemory) {
    Buffer<float> in({20100}, "gpu_err_big_in");
    Func p("gpu_err_big_p"), g("gpu_err_big_g");
    Var x("x"), xo("xo"), xi("xi");
    RDom r(0, 20000, "r");
    p(x) = in(x)*2.f;
    g(x) = 0.f;
    g(x) += p(x + r);
    g.update(0).gpu_tile(x, xo, xi, 32, TailStrategy::GuardWithIf);
    g.gpu_tile(x, xo, xi, 32);
    p.compute_at(g, xo);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr("bytes of shared memory per block (gpu_err_big_p 80124), more than "
                          "the 49152"));
}

TEST(GPUScheduleErrors, SharedMemoryOfUnknownSize) {
    Buffer<float> in({200}, "gpu_err_dyn_in");
    Param<int> offset("gpu_err_offset");
    Func p("gpu_err_dyn_p"), g("gpu_err_dyn_g");
    Var x("x"), xo("xo"), xi("xi");
    p(x) = in(x)*2.f;
    g(x) = p(x) + p(x + offset);
    g.gpu_tile(x, xo, xi, 16);
    p.compute_at(g, xo);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr("GPU shared memory: the size of 'gpu_err_dyn_p' in the kernel of "
                          "'gpu_err_dyn_g' is"));
}

TEST(GPUScheduleErrors, ThreadLoopOfUnknownExtent) {
    Func f("gpu_err_extent");
    Var x("x"), y("y");
    f(x, y) = x * y;
    f.gpu_blocks(y).gpu_threads(x);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("gpu_threads: the extent of loop 'x' of 'gpu_err_extent' is"));
}

TEST(GPUScheduleErrors, ParallelInsideAKernel) {
    Func f("gpu_err_parallel");
    Var x("x"), xo("xo"), xi("xi"), xt("xt"), xs("xs");
    f(x) = x;
    f.split(x, xo, xi, 64)
        .split(xi, xt, xs, 4)
        .reorder(xs, xt, xo)
        .gpu_blocks(xo)
        .gpu_threads(xt)
        .parallel(xs);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("parallel: loop 'xs' of 'gpu_err_parallel' is inside the GPU kernel"));
}

TEST(GPUScheduleErrors, BlocksInsideAParallelLoop) {
    Func f("gpu_err_in_parallel");
    Var x("x"), y("y"), xo("xo"), xi("xi");
    f(x, y) = x + y;
    f.gpu_tile(x, xo, xi, 8).parallel(y);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("gpu_blocks: loop 'xo' of 'gpu_err_in_parallel' is inside the parallel "
                          "loop 'y'"));
}

TEST(GPUScheduleErrors, VectorizedLoopAroundGPULoops) {
    Func f("gpu_err_vector");
    Var x("x"), y("y"), xo("xo"), xi("xi");
    f(x, y) = x + y;
    f.bound(y, 0, 4).gpu_tile(x, xo, xi, 8).vectorize(y);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(opencl_target()); }),
                HasSubstr("gpu_blocks: loop 'xo' of 'gpu_err_vector' is inside the vectorized "
                          "loop 'y'"));
}

TEST(GPUScheduleErrors, GPUScheduleOnATargetWithoutGPU) {
    Func f("gpu_err_cpu_target");
    Var x("x"), xo("xo"), xi("xi");
    f(x) = x;
    f.gpu_tile(x, xo, xi, 8);
    EXPECT_THAT(test::error_of([&] { Pipeline(f).compile_jit(Target::host()); }),
                HasSubstr("'gpu_err_cpu_target' has loops bound to gpu_blocks/gpu_threads "
                          "(kernel gpu_err_cpu_target_kernel0), but the target has no GPU API"));
}

TEST(GPUScheduleErrors, SharedMemoryOutsideAKernel) {
    Func p("gpu_err_host_shared"), g("gpu_err_host_g");
    Var x("x");
    p(x) = x * 2;
    g(x) = p(x) + 1;
    p.compute_root().store_in(MemoryType::GPUShared);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr("store_in(GPUShared): 'gpu_err_host_shared' is not computed inside a "
                          "GPU kernel"));
}

/// The CompileError of g(x) = read(p, x) in blocks of 8 threads, with p(x) = x * 2 computed per
/// block in MemoryType::Register (on the threads when p_on_threads); the Funcs are named
/// <name>_p and <name>_g.
std::string block_register_error(const std::string &name,
                                 const std::function<Expr(const Func &, const Var &)> &read,
                                 bool p_on_threads) {
    Func p(name + "_p"), g(name + "_g");
    Var x("x"), xo("xo"), xi("xi");
    p(x) = x * 2;
    g(x) = read(p, x);
    g.gpu_tile(x, xo, xi, 8);
    p.compute_at(g, xo).store_in(MemoryType::Register);
    if (p_on_threads) p.gpu_threads(x);
    return test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); });
}

// Register storage at block level is private to each thread: every thread must touch only its
// own elements, through the same thread strides in every stage. g's thread x reads p(x) and
// p(x + 1).
TEST(GPUScheduleErrors, RegisterStorageAtBlockLevel) {
    auto error_of = [](const std::string &name, bool p_on_threads) {
        return block_register_error(
            name, [](const Func &p, const Var &x) { return p(x) + p(x + 1); }, p_on_threads);
    };
    const std::string rule = "is stored at block level in the GPU kernel of '";
    const std::string own = "', where each thread keeps the elements it touches in its own "
                            "registers, but ";
    // p written by thread 0 alone (no thread loop), read by every thread.
    const std::string one = error_of("gpu_err_reg", false);
    EXPECT_THAT(one, HasSubstr("store_in(Register): 'gpu_err_reg_p' " + rule + "gpu_err_reg_g" +
                               own + "the part of its index"));
    EXPECT_THAT(one, HasSubstr("that one thread moves through"));
    // p on threads: thread t reads what thread t + 1 writes.
    const std::string two = error_of("gpu_err_regs", true);
    EXPECT_THAT(two, HasSubstr("store_in(Register): 'gpu_err_regs_p' " + rule + "gpu_err_regs_g" +
                               own + "two threads of the block touch its element 1"));
    EXPECT_THAT(two, HasSubstr("compute it at a gpu_threads loop, or store it in "
                               "MemoryType::GPUShared"));
}

/// The start of every CompileError of a block-level Func `p` in MemoryType::Register that the
/// threads of `g`'s kernel cannot keep in their own registers (schedule/GPURegisters.cpp); the
/// reason follows.
std::string register_error(const std::string &p, const std::string &g) {
    return "store_in(Register): '" + p + "' is stored at block level in the GPU kernel of '" + g +
           "', where each thread keeps the elements it touches in its own registers, but ";
}

// Each thread of p's stage walks a column of 20000 rows (p(x, 0) to p(x, 19999)): more than
// the 16384 elements a thread may keep.
TEST(GPUScheduleErrors, RegisterStorageOfTooManyElementsPerThread) {
    Func p("gpu_err_reg_many_p"), g("gpu_err_reg_many_g");
    Var x("x"), y("y"), xo("xo"), xi("xi");
    p(x, y) = x + y;
    g(x) = p(x, 0) + p(x, 19999);
    g.gpu_tile(x, xo, xi, 8);
    p.compute_at(g, xo).store_in(MemoryType::Register).gpu_threads(x);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr(register_error("gpu_err_reg_many_p", "gpu_err_reg_many_g") +
                          "each thread would keep more than 16384 elements of it"));
}

// An 8 x 4 block whose threads all read p(x): p's index does not move with thread y, so the
// four threads of a column would need the same elements.
TEST(GPUScheduleErrors, RegisterStorageSharedByTheThreadsOfADimension) {
    Func p("gpu_err_reg_col_p"), g("gpu_err_reg_col_g");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    p(x) = x * 2;
    g(x, y) = p(x) + y;
    g.gpu_tile(x, y, xo, yo, xi, yi, 8, 4);
    p.compute_at(g, xo).store_in(MemoryType::Register).gpu_threads(x);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr(register_error("gpu_err_reg_col_p", "gpu_err_reg_col_g") +
                          "threads that differ only in thread dimension y touch the same elements "
                          "of it (index gpu_thread_id(0))"));
}

// g reads q(x / 3, y), so p's rows (and q's) are 3 or 4 elements long depending on the block:
// p's stride in thread y changes from block to block with no constant bound that the lifting
// sees (the thread loops' extents, 20, come from interval bounds).
TEST(GPUScheduleErrors, RegisterStorageWithAThreadStrideOfNoConstantBound) {
    Func p("gpu_err_reg_row_p"), q("gpu_err_reg_row_q"), g("gpu_err_reg_row_g");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    p(x, y) = x + y;
    q(x, y) = p(x, y) * 2;
    g(x, y) = q(x / 3, y);
    g.bound(x, 0, 60).bound(y, 0, 8).gpu_tile(x, y, xo, yo, xi, yi, 8, 4);
    q.compute_at(g, xo).store_in(MemoryType::GPUShared).gpu_threads(x, y);
    p.compute_at(g, xo).store_in(MemoryType::Register).gpu_threads(x, y);
    const std::string e = test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); });
    EXPECT_THAT(e, HasSubstr(register_error("gpu_err_reg_row_p", "gpu_err_reg_row_g") +
                             "its stride in thread dimension y, ((((min((gpu_block_id(0) * 8), "
                             "52) + 1) / 3) - (min((gpu_block_id(0) * 8), 52) / 3)) + 3) (index "));
    EXPECT_THAT(e, HasSubstr("), has no constant bound; "));
}

// Four lanes per thread reading p(x / 2): a vector index that is not a ramp.
TEST(GPUScheduleErrors, RegisterStorageReadThroughAVectorGather) {
    Func p("gpu_err_reg_gather_p"), g("gpu_err_reg_gather_g");
    Var x("x"), y("y"), xt("xt"), xv("xv");
    p(x) = x * 2;
    g(x, y) = p(x / 2) + y;
    g.bound(x, 0, 32).split(x, xt, xv, 4).vectorize(xv).gpu_threads(xt).gpu_blocks(y);
    p.compute_at(g, y).store_in(MemoryType::Register).gpu_threads(x);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr(register_error("gpu_err_reg_gather_p", "gpu_err_reg_gather_g") +
                          "its vector index (ramp((gpu_thread_id(0) * 4), 1, 4) / x4(2)) is not a "
                          "ramp"));
}

// Four lanes per thread reading p(x * clamp(s, 1, 2)): a ramp whose stride is the parameter.
TEST(GPUScheduleErrors, RegisterStorageReadThroughAVectorOfVariableStride) {
    Param<int> s("gpu_err_reg_lanes_s");
    Func p("gpu_err_reg_lanes_p"), g("gpu_err_reg_lanes_g");
    Var x("x"), y("y"), xt("xt"), xv("xv");
    p(x) = x * 2;
    g(x, y) = p(x * clamp(s, 1, 2)) + y;
    g.bound(x, 0, 32).split(x, xt, xv, 4).vectorize(xv).gpu_threads(xt).gpu_blocks(y);
    p.compute_at(g, y).store_in(MemoryType::Register).gpu_threads(x);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr(register_error("gpu_err_reg_lanes_p", "gpu_err_reg_lanes_g") +
                          "its vector index ramp(((max(min(gpu_err_reg_lanes_s, 2), 1) * "
                          "gpu_thread_id(0)) * 4), max(min(gpu_err_reg_lanes_s, 2), 1), 4) has "
                          "no constant stride"));
}

// g's thread x reads p(x % 8): an index that is not linear in the thread id.
TEST(GPUScheduleErrors, RegisterStorageWithAnIndexNotLinearInTheThreads) {
    const std::string e = block_register_error(
        "gpu_err_reg_mod", [](const Func &p, const Var &x) { return p(x % 8); }, true);
    EXPECT_THAT(
        e, HasSubstr(register_error("gpu_err_reg_mod_p", "gpu_err_reg_mod_g") + "its index ("));
    EXPECT_THAT(e, HasSubstr(" + gpu_thread_id(0)) % 8) is not linear in the thread ids; "));
}

// g's thread x reads p(x * (y + 1)) in a serial loop over y inside the block: the index's
// stride in the thread id is y + 1.
TEST(GPUScheduleErrors, RegisterStorageWithAThreadStrideThatChangesInALoop) {
    Func p("gpu_err_reg_loop_p"), g("gpu_err_reg_loop_g");
    Var x("x"), y("y"), z("z");
    p(x) = x * 2;
    g(x, y, z) = p(x * (y + 1)) + z;
    g.bound(x, 0, 8).bound(y, 0, 4).gpu_blocks(z).gpu_threads(x);
    p.compute_at(g, z).store_in(MemoryType::Register).gpu_threads(x);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr(register_error("gpu_err_reg_loop_p", "gpu_err_reg_loop_g") +
                          "its index ((gpu_err_reg_loop_g.s0.y + 1) * gpu_thread_id(0)) moves "
                          "with the thread ids by (gpu_err_reg_loop_g.s0.y + 1), which changes "
                          "with the loop over gpu_err_reg_loop_g.s0.y"));
}

// p's thread x writes p(x), g's thread x reads p(2 * x): two different thread strides.
TEST(GPUScheduleErrors, RegisterStorageReadWithAnotherThreadStride) {
    EXPECT_THAT(
        block_register_error(
            "gpu_err_reg_twice", [](const Func &p, const Var &x) { return p(2 * x); }, true),
        HasSubstr(register_error("gpu_err_reg_twice_p", "gpu_err_reg_twice_g") +
                  "its index (gpu_thread_id(0) * 2) moves with the thread ids differently "
                  "from index gpu_thread_id(0); "));
}

TEST(GPUScheduleErrors, SharedStorageInsideAThreadLoop) {
    Func p("gpu_err_thr_p"), g("gpu_err_thr_g");
    Var x("x"), xo("xo"), xi("xi");
    p(x) = x * 2;
    g(x) = p(x) + p(x + 1);
    g.gpu_tile(x, xo, xi, 8);
    p.compute_at(g, xi).store_in(MemoryType::GPUShared);
    EXPECT_THAT(test::error_of([&] { Pipeline(g).compile_jit(opencl_target()); }),
                HasSubstr("store_in(GPUShared): 'gpu_err_thr_p' is stored inside a gpu_threads "
                          "loop"));
}

} // namespace
} // namespace kiln
