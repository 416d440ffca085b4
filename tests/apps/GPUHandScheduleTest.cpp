// Each operator's GPU hand schedule (hand_schedule with a target whose gpu is OpenCL) runs on
// this machine's OpenCL device (PoCL here) at small and odd shapes against the operator's
// plain-loop reference, and its kernels compile as CUDA C (NVRTC + ptxas for sm_90). On a machine
// with an NVIDIA GPU the same schedules also run there. Skipped, with the reason printed, without
// an OpenCL device, a CUDA device or the CUDA toolkit.
#include <gtest/gtest.h>

#include "apps/Operator.h"
#include "tests/pipeline/GPUTestUtil.h"

// PoCL's own LLVM keeps about 2 MB after its first kernel compile, on its worker thread: not
// kiln's leak. The suppression covers only the OpenCL implementation's libraries.
extern "C" const char *__lsan_default_suppressions() { // NOLINT: the sanitizer's name
    return "leak:libpocl.so\n"
           "leak:libpocl-devices-\n"
           "leak:libLLVM-15.so\n"
           "leak:libclang-cpp.so.15\n";
}

namespace kiln::apps {
namespace {

struct Case {
    std::string op;
    std::vector<int64_t> shape;
};

std::string case_name(const testing::TestParamInfo<Case> &info) {
    return info.param.op + "_" + shape_to_string(info.param.shape);
}

class GPUHandSchedules : public testing::TestWithParam<Case> {};

TEST_P(GPUHandSchedules, RunOnOpenCLAndMatchTheReference) {
    KILN_REQUIRE_OPENCL();
    const Operator &op = find_operator(GetParam().op);
    OperatorInstance inst = op.make(GetParam().shape);
    op.hand_schedule(inst, opencl_target());
    CompiledPipeline compiled = inst.pipeline().compile_jit(opencl_target());
    EXPECT_FALSE(compiled.lowered().kernels.empty()) << op.name << ": no GPU kernel";
    BufferBase out = inst.realize(opencl_target());
    double err = max_relative_error(out, op.reference(inst));
    EXPECT_LE(err, op.tolerance) << op.name << " at " << shape_to_string(inst.shape);
}

/// Runs op's GPU hand schedule on the CUDA device at shape and compares with the reference.
void expect_cuda_matches_reference(const Operator &op, const std::vector<int64_t> &shape) {
    const Target cuda = Target::host().with_gpu(GpuApi::CUDA);
    OperatorInstance inst = op.make(shape);
    op.hand_schedule(inst, cuda);
    BufferBase out = inst.realize(cuda);
    EXPECT_LE(max_relative_error(out, op.reference(inst)), op.tolerance)
        << op.name << " at " << shape_to_string(inst.shape);
}

TEST_P(GPUHandSchedules, RunOnCUDAAndMatchTheReference) {
    KILN_REQUIRE_GPU(GpuApi::CUDA);
    expect_cuda_matches_reference(find_operator(GetParam().op), GetParam().shape);
}

TEST_P(GPUHandSchedules, CompileAsCUDA) {
    const Operator &op = find_operator(GetParam().op);
    OperatorInstance inst = op.make(GetParam().shape);
    op.hand_schedule(inst, Target::host().with_gpu(GpuApi::CUDA));
    expect_valid_cuda(inst.pipeline());
}

INSTANTIATE_TEST_SUITE_P(
    Apps, GPUHandSchedules,
    testing::Values(Case{"matmul_u8s8", {40, 48, 72}}, Case{"matmul_bf16", {40, 48, 72}},
                    Case{"conv2d", {4, 16, 8, 16}}, Case{"conv2d", {3, 5, 7, 11}},
                    Case{"conv2d_packed", {20, 40, 5, 9}}, Case{"conv2d_nhwc", {20, 40, 5, 9}},
                    Case{"conv2d_pack", {20, 40}}, Case{"blur", {66, 42}}, Case{"blur", {37, 23}},
                    Case{"blur_u16", {37, 23}}, Case{"softmax", {8, 200}}, Case{"softmax", {7, 37}},
                    Case{"layernorm", {8, 200}}, Case{"layernorm", {7, 37}}),
    case_name);

// matmul's schedule lowers to one kernel with its shared tile of B (every GPU rule of
// schedule/OffloadGPULoops holds) and each thread's 8 x 8 sums in registers, and runs (below).
// Its buffers are named A, B and C, which the device printer must rename (all-capitals names are
// reserved there).
TEST(GPUHandSchedules, MatmulLowersToOneKernelWithSharedTiles) {
    const Operator &op = find_operator("matmul");
    for (std::vector<int64_t> shape : {std::vector<int64_t>{64, 64, 64}, {37, 53, 29}}) {
        OperatorInstance inst = op.make(shape);
        op.hand_schedule(inst, opencl_target());
        LoweredFunc f = inst.pipeline().lower();
        ASSERT_EQ(f.kernels.size(), 1u) << shape_to_string(shape);
        // 8 x 8 outputs per thread of a 128 x 128 tile (halved to 64 x 64 at 64 x 64 and to
        // 32 x 32 at 37 x 53).
        int tile = shape[0] == 64 ? 64 : 32;
        EXPECT_EQ(f.kernels[0].threads[0], tile / 8);
        EXPECT_EQ(f.kernels[0].threads[1], 16); // B_panel's K step of 16 rows
        // B_panel's 16 x tile K step; prod is no shared memory but 64 floats per thread.
        EXPECT_EQ(f.kernels[0].shared_bytes, tile * 16 * 4);
        const std::string cu = print_device_source(f.kernels, GpuApi::CUDA);
        EXPECT_NE(cu.find("    float prod[64];"), std::string::npos) << cu;
    }
}

TEST(GPUHandSchedules, MatmulRunsOnOpenCLAndMatchesTheReference) {
    KILN_REQUIRE_OPENCL();
    KILN_SKIP_UNDER_LSAN_POCL_EXIT_CRASH();
    const Operator &op = find_operator("matmul");
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{64, 64, 64}, {37, 53, 29}, {1, 1, 1}, {130, 7, 17}}) {
        OperatorInstance inst = op.make(shape);
        op.hand_schedule(inst, opencl_target());
        BufferBase out = inst.realize(opencl_target());
        EXPECT_LE(max_relative_error(out, op.reference(inst)), op.tolerance);
        expect_valid_cuda(inst.pipeline());
    }
}

// On an NVIDIA GPU: the matmul hand schedule at tile multiples, odd shapes and a size where the
// grid has many blocks.
TEST(GPUHandSchedules, MatmulRunsOnCUDAAndMatchesTheReference) {
    KILN_REQUIRE_GPU(GpuApi::CUDA);
    const Operator &op = find_operator("matmul");
    for (const std::vector<int64_t> &shape : {std::vector<int64_t>{64, 64, 64},
                                              {37, 53, 29},
                                              {257, 129, 300},
                                              {512, 512, 512},
                                              {1, 1, 1},
                                              {130, 7, 17}})
        expect_cuda_matches_reference(op, shape);
}

} // namespace
} // namespace kiln::apps
