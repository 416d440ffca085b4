// Printed OpenCL run on the first OpenCL device (PoCL's CPU device here) through a test-only
// harness (tests/codegen/DeviceTestUtil.h), against expected values: a 1-D kernel, shared memory
// with a barrier, and vector code (dense loads and stores, gathers, predicated stores, a vector
// store that reads what it overwrites). Each test skips, saying why, without an OpenCL device.
#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "codegen/CodeGenDevice.h"
#include "lang/IROperator.h"
#include "tests/codegen/DeviceTestUtil.h"

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

#if KILN_TEST_OPENCL

using test::buffer_argument;
using test::gpu_barrier;
using test::gpu_block_id;
using test::gpu_thread_id;
using test::OpenCLRunner;
using test::scalar_argument;

Expr var(const std::string &name, Type t = Int(32)) {
    return Variable::make(t, name);
}

/// Builds the printed OpenCL of one kernel and runs it over `blocks` blocks; buffers are given in
/// argument order (scalars as OpenCLRunner::Arg bytes) and read back into the vectors.
class KernelRun {
public:
    explicit KernelRun(const DeviceKernel &k) : kernel(k) {
        std::string why;
        runner = OpenCLRunner::get(&why);
        if (!runner) skip_reason = "no OpenCL device: " + why;
        source = print_device_source({k}, GpuApi::OpenCL);
    }
    OpenCLRunner *runner = nullptr;
    std::string skip_reason, source;

    template <typename T>
    void buffer(std::vector<T> *data) {
        cl_mem m = runner->buffer(data->size() * sizeof(T), data->data());
        args.push_back(OpenCLRunner::buffer_arg(m));
        readback.push_back([this, m, data] {
            runner->read(m, data->size() * sizeof(T), data->data());
            clReleaseMemObject(m);
        });
    }
    template <typename T>
    void scalar(T v) {
        args.push_back(OpenCLRunner::scalar(v));
    }

    ::testing::AssertionResult launch(std::vector<int> blocks) {
        std::string error;
        cl_program p = runner->build(source, &error);
        if (!p) {
            return ::testing::AssertionFailure() << error << "\nsource:\n"
                                                 << test::numbered(source);
        }
        bool ok = runner->launch(p, kernel, blocks, args, &error);
        clReleaseProgram(p);
        for (auto &r : readback)
            r();
        if (!ok) return ::testing::AssertionFailure() << error << "\nsource:\n" << source;
        return ::testing::AssertionSuccess();
    }

private:
    DeviceKernel kernel;
    std::vector<OpenCLRunner::Arg> args;
    std::vector<std::function<void()>> readback;
};

#define SKIP_WITHOUT_DEVICE(run)                                                                   \
    if (!(run).runner) GTEST_SKIP() << (run).skip_reason

TEST(CodeGenDeviceOpenCL, OneDimensionalKernelWithGuard) {
    DeviceKernel k;
    k.name = "saxpy";
    k.args = {buffer_argument("x", Float(32), false), buffer_argument("y", Float(32), true),
              scalar_argument("a", Float(32)), scalar_argument("n", Int(32))};
    Expr i = var("i");
    Expr value =
        var("a", Float(32)) * Load::make(Float(32), "x", i) + Load::make(Float(32), "y", i);
    k.body = LetStmt::make("i", gpu_block_id(0) * 16 + gpu_thread_id(0),
                           IfThenElse::make(i < var("n"), Store::make("y", value, i)));
    k.threads[0] = 16;
    KernelRun run(k);
    SKIP_WITHOUT_DEVICE(run);
    std::vector<float> x(64), y(64, 1.0f);
    std::iota(x.begin(), x.end(), 0.0f);
    run.buffer(&x);
    run.buffer(&y);
    run.scalar(2.0f);
    run.scalar(int32_t(50));
    ASSERT_TRUE(run.launch({4}));
    for (int j = 0; j < 64; j++)
        EXPECT_EQ(y[j], j < 50 ? 2.0f * j + 1.0f : 1.0f) << "at " << j;
}

TEST(CodeGenDeviceOpenCL, SharedMemoryReverseWithBarrier) {
    DeviceKernel k;
    k.name = "reverse_tiles";
    k.args = {buffer_argument("in", Int(32), false), buffer_argument("out", Int(32), true)};
    Expr t = gpu_thread_id(0), base = gpu_block_id(0) * 32;
    Stmt fill = Store::make("tile", Load::make(Int(32), "in", base + t), t);
    Stmt drain = Store::make("out", Load::make(Int(32), "tile", 31 - t), base + t);
    k.body = Allocate::make("tile", Int(32), MemoryType::GPUShared, {Expr(32)}, Expr(),
                            Block::make({fill, gpu_barrier(), drain}));
    k.threads[0] = 32;
    KernelRun run(k);
    SKIP_WITHOUT_DEVICE(run);
    std::vector<int32_t> in(96), out(96, -1);
    std::iota(in.begin(), in.end(), 0);
    run.buffer(&in);
    run.buffer(&out);
    ASSERT_TRUE(run.launch({3}));
    for (int j = 0; j < 96; j++)
        EXPECT_EQ(out[j], (j / 32) * 32 + 31 - j % 32) << "at " << j;
}

TEST(CodeGenDeviceOpenCL, TwoDimensionalBlocksAndThreads) {
    DeviceKernel k;
    k.name = "transpose";
    k.args = {buffer_argument("in", UInt(16), false), buffer_argument("out", UInt(16), true)};
    Expr x = gpu_block_id(0) * 4 + gpu_thread_id(0), y = gpu_block_id(1) * 2 + gpu_thread_id(1);
    k.body = Store::make(
        "out", Load::make(UInt(16), "in", y * 8 + x) * make_const(UInt(16), int64_t(3)), x * 6 + y);
    k.block_dims = k.thread_dims = 2;
    k.threads[0] = 4;
    k.threads[1] = 2;
    KernelRun run(k);
    SKIP_WITHOUT_DEVICE(run);
    std::vector<uint16_t> in(48), out(48);
    std::iota(in.begin(), in.end(), uint16_t(40000));
    run.buffer(&in);
    run.buffer(&out);
    ASSERT_TRUE(run.launch({2, 3}));
    for (int yy = 0; yy < 6; yy++) {
        for (int xx = 0; xx < 8; xx++) {
            EXPECT_EQ(out[xx * 6 + yy], uint16_t(in[yy * 8 + xx] * 3u)) << xx << ", " << yy;
        }
    }
}

// Vector code: out[ramp(4 i, 1, 4)] = in[ramp(4 i, 1, 4)] * 2 + in[ramp(i, 3, 4)] (a gather),
// stored only where the lane's index < n (a predicated store).
TEST(CodeGenDeviceOpenCL, DenseGatherAndPredicatedVectorAccesses) {
    DeviceKernel k;
    k.name = "vectors";
    k.args = {buffer_argument("in", Float(32), false), buffer_argument("out", Float(32), true),
              scalar_argument("n", Int(32))};
    Expr i = var("i");
    Expr dense = Ramp::make(i * 4, 1, 4);
    Expr value = Load::make(Float(32, 4), "in", dense) * Broadcast::make(Expr(2.0f), 4) +
                 Load::make(Float(32, 4), "in", Ramp::make(i, 3, 4));
    Expr predicate = dense < Broadcast::make(var("n"), 4);
    k.body = LetStmt::make(
        "i", gpu_thread_id(0),
        LetStmt::make("dense", dense,
                      Store::make("out", value, var("dense", Int(32, 4)), predicate)));
    k.threads[0] = 8;
    KernelRun run(k);
    SKIP_WITHOUT_DEVICE(run);
    std::vector<float> in(64), out(32, -1.0f);
    std::iota(in.begin(), in.end(), 0.0f);
    run.buffer(&in);
    run.buffer(&out);
    run.scalar(int32_t(30));
    ASSERT_TRUE(run.launch({1}));
    for (int j = 0; j < 32; j++) {
        int t = j / 4, lane = j % 4;
        float want = j < 30 ? in[j] * 2.0f + in[t + 3 * lane] : -1.0f;
        EXPECT_EQ(out[j], want) << "at " << j;
    }
}

// A vector store reads all its lanes before writing any: out[ramp(0, 1, 4)] = out[ramp(1, 1, 4)]
// must shift by one, not smear the first value over the vector.
TEST(CodeGenDeviceOpenCL, VectorStoreReadsBeforeItWrites) {
    DeviceKernel k;
    k.name = "shift";
    k.args = {buffer_argument("data", Int(16), true)};
    Expr read = Load::make(Int(16, 4), "data", Ramp::make(Expr(1), 1, 4));
    k.body = Store::make("data", read + Broadcast::make(make_const(Int(16), int64_t(1)), 4),
                         Ramp::make(Expr(0), 1, 4));
    KernelRun run(k);
    SKIP_WITHOUT_DEVICE(run);
    std::vector<int16_t> data = {10, 20, 30, 40, 32767, 60};
    run.buffer(&data);
    ASSERT_TRUE(run.launch({1}));
    EXPECT_EQ(data, (std::vector<int16_t>{21, 31, 41, -32768, 32767, 60}));
}

// A private array, a serial loop and a vector let of bools.
TEST(CodeGenDeviceOpenCL, PrivateArrayLoopAndBoolVectors) {
    DeviceKernel k;
    k.name = "private_array";
    k.args = {buffer_argument("out", Bool(), true)};
    Expr j = var("j"), t = gpu_thread_id(0);
    Stmt fill = For::make("j", 0, 4, ForType::Serial, Store::make("acc", j * t, j));
    Expr loaded = Load::make(Int(32, 4), "acc", Ramp::make(Expr(0), 1, 4));
    Stmt store = LetStmt::make(
        "odd", Mod::make(loaded, Broadcast::make(Expr(2), 4)) == Broadcast::make(Expr(1), 4),
        Store::make("out", var("odd", Bool(4)), Ramp::make(t * 4, 1, 4)));
    k.body = Allocate::make("acc", Int(32), MemoryType::Register, {Expr(4)}, Expr(),
                            Block::make(fill, store));
    k.threads[0] = 4;
    KernelRun run(k);
    SKIP_WITHOUT_DEVICE(run);
    std::vector<uint8_t> out(16, 7);
    run.buffer(&out);
    ASSERT_TRUE(run.launch({1}));
    for (int i = 0; i < 16; i++)
        EXPECT_EQ(out[i], ((i / 4) * (i % 4)) % 2) << "at " << i;
}

#else

TEST(CodeGenDeviceOpenCL, NeedsOpenCL) {
    GTEST_SKIP() << "kiln was configured without OpenCL (find_package(OpenCL) failed)";
}

#endif

} // namespace
} // namespace kiln
