// The OpenCL interface on a real driver (PoCL's CPU device here). Every test skips, printing why,
// when the first call through the interface finds no driver or no device.
#include "runtime/kiln_dlpack.h"
#include "runtime/kiln_runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

// PoCL caches compiled kernels on disk; each test process gets a fresh folder, removed at exit, so
// runs neither share nor grow a cache. Set before the first OpenCL call of the process.
class PoclCacheEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        char pattern[] = "/tmp/kiln_pocl_cache_XXXXXX";
        if (mkdtemp(pattern)) {
            dir = pattern;
            setenv("POCL_CACHE_DIR", pattern, 1);
        }
    }
    void TearDown() override {
        kiln_opencl_device_interface()->release();
        std::error_code ignored;
        if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
    }

private:
    std::string dir;
};

[[maybe_unused]] ::testing::Environment *const pocl_cache =
    ::testing::AddGlobalTestEnvironment(new PoclCacheEnvironment);

} // namespace

// PoCL compiles kernels with its own LLVM on its worker threads and keeps what it builds (about
// 2 MB per process) to the end, so LeakSanitizer reports it at exit. Those leaks are suppressed by
// the libraries they come from, for this test executable only (ASan reads this hook at start-up;
// outside a sanitizer build it is unused). Allocations inside PoCL on kiln's behalf (a cl_mem not
// released) are hidden too: the stacks are cut where PoCL has no frame pointers.
extern "C" const char *__lsan_default_suppressions() { // NOLINT: the sanitizer's name
    return "leak:libpocl.so\n"
           "leak:libpocl-devices-\n"
           "leak:libLLVM-15.so\n"
           "leak:libclang-cpp.so.15\n";
}

namespace {

const kiln_device_interface_t *cl() {
    return kiln_opencl_device_interface();
}

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

class OpenCL : public ::testing::Test {
protected:
    void SetUp() override {
        int code = cl()->device_limits(&max_threads, &shared_bytes);
        if (code == kiln_error_no_device)
            GTEST_SKIP() << "no OpenCL device: " << kiln_last_error_message();
        ASSERT_EQ(code, kiln_success) << kiln_last_error_message();
    }
    int64_t max_threads = 0, shared_bytes = 0;
};

TEST_F(OpenCL, DescribesTheDeviceItUses) {
    char text[512];
    ASSERT_EQ(cl()->device_description(text, sizeof(text)), kiln_success)
        << kiln_last_error_message();
    std::string d = text;
    // "<name>; <OpenCL version>; driver <version>"
    EXPECT_TRUE(contains(d, "; OpenCL ")) << d;
    EXPECT_TRUE(contains(d, "; driver ")) << d;
    EXPECT_GT(d.find(';'), 0u) << d;
    char tiny[8];
    ASSERT_EQ(cl()->device_description(tiny, sizeof(tiny)), kiln_success);
    EXPECT_EQ(std::strlen(tiny), 7u);
}

// A 1-D float buffer over its own memory.
struct FloatBuffer {
    std::vector<float> data;
    kiln_dimension_t dim;
    kiln_buffer_t b{};
    explicit FloatBuffer(int n, float first = 0, float step = 1) : data(n), dim{0, n, 1, 0} {
        for (int i = 0; i < n; i++)
            data[i] = first + step * float(i);
        b.host = reinterpret_cast<uint8_t *>(data.data());
        b.type = {kiln_type_float, 32, 1};
        b.dimensions = 1;
        b.dim = &dim;
    }
    ~FloatBuffer() { kiln_buffer_device_free(&b); }
    FloatBuffer(const FloatBuffer &) = delete;
    FloatBuffer &operator=(const FloatBuffer &) = delete;
};

// Arguments of a launch, built up one by one.
struct Args {
    std::vector<void *> values;
    std::vector<size_t> sizes;
    std::vector<int8_t> is_buffer;
    std::vector<kiln_buffer_t *> buffers = std::vector<kiln_buffer_t *>(16);
    std::vector<int32_t> ints = std::vector<int32_t>(16);
    Args &buffer(kiln_buffer_t *b) {
        buffers[values.size()] = b;
        values.push_back(&buffers[values.size()]);
        sizes.push_back(sizeof(kiln_buffer_t *));
        is_buffer.push_back(1);
        return *this;
    }
    Args &int32(int32_t v) {
        ints[values.size()] = v;
        values.push_back(&ints[values.size()]);
        sizes.push_back(sizeof(int32_t));
        is_buffer.push_back(0);
        return *this;
    }
    Args &local_bytes(size_t bytes) {
        values.push_back(nullptr);
        sizes.push_back(bytes);
        is_buffer.push_back(0);
        return *this;
    }
};

int launch(const std::string &source, const char *kernel, std::vector<int32_t> blocks,
           std::vector<int32_t> threads, Args &args) {
    return kiln_device_launch(cl(), source.data(), source.size(), kernel, blocks.data(),
                              threads.data(), int32_t(args.values.size()), args.values.data(),
                              args.sizes.data(), args.is_buffer.data());
}

const std::string add_source = R"CL(
__kernel void add(__global float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) a[i] += b[i];
}
__kernel void scale(__global float *a, int factor) {
    a[get_global_id(0)] *= factor;
}
)CL";

} // namespace

TEST_F(OpenCL, LimitsComeFromTheDevice) {
    EXPECT_GE(max_threads, 1);
    EXPECT_GE(shared_bytes, 1024);
    EXPECT_STREQ(cl()->name, "opencl");
}

TEST_F(OpenCL, ABufferRoundTripsThroughTheDevice) {
    // A 2-D buffer with mins and padded rows: the device copy holds the spanned bytes.
    std::vector<float> data(18);
    for (size_t i = 0; i < data.size(); i++)
        data[i] = float(i) * 0.5f;
    kiln_dimension_t dims[2] = {{3, 5, 1, 0}, {-1, 3, 6, 0}};
    kiln_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(data.data());
    b.type = {kiln_type_float, 32, 1};
    b.dimensions = 2;
    b.dim = dims;
    kiln_device_reset_copy_counts();
    ASSERT_EQ(kiln_buffer_copy_to_device(&b, cl()), kiln_success) << kiln_last_error_message();
    EXPECT_EQ(b.device_interface, cl());
    std::vector<float> original = data;
    std::fill(data.begin(), data.end(), -1.f);
    kiln_buffer_set_device_dirty(&b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&b), kiln_success) << kiln_last_error_message();
    for (size_t i = 0; i < data.size(); i++) {
        bool element = i % 6 < 5 && i / 6 < 3;
        EXPECT_EQ(data[i], element ? original[i] : -1.f) << i; // row padding is not copied
    }
    int64_t to_device = 0, to_host = 0;
    kiln_device_copy_counts(&to_device, &to_host);
    EXPECT_EQ(to_device, 1);
    EXPECT_EQ(to_host, 1);
    ASSERT_EQ(kiln_buffer_device_free(&b), kiln_success);
    EXPECT_EQ(b.device, 0u);
}

TEST_F(OpenCL, AnAddKernelRunsWithBlocksAndThreads) {
    const int n = 250; // not a multiple of the block: the kernel guards
    FloatBuffer a(n, 0, 1), b(n, 1000, 2);
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, cl()), kiln_success) << kiln_last_error_message();
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cl()), kiln_success) << kiln_last_error_message();
    Args args;
    args.buffer(&a.b).buffer(&b.b).int32(n);
    ASSERT_EQ(launch(add_source, "add", {4, 1, 1}, {64, 1, 1}, args), kiln_success)
        << kiln_last_error_message();
    kiln_buffer_set_device_dirty(&a.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&a.b), kiln_success) << kiln_last_error_message();
    for (int i = 0; i < n; i++)
        ASSERT_EQ(a.data[i], float(i) + 1000.f + 2.f * float(i)) << i;
    // A second kernel of the same (cached) program.
    Args scale;
    scale.buffer(&a.b).int32(3);
    ASSERT_EQ(launch(add_source, "scale", {5, 1, 1}, {50, 1, 1}, scale), kiln_success)
        << kiln_last_error_message();
    kiln_buffer_set_device_dirty(&a.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&a.b), kiln_success);
    EXPECT_EQ(a.data[10], 3.f * (10.f + 1000.f + 20.f));
}

TEST_F(OpenCL, TheTimerMeasuresQueuedKernelsOnTheDevicesClock) {
    double ms = -1;
    EXPECT_EQ(cl()->timer_stop(&ms), kiln_error_generic);
    EXPECT_STREQ(kiln_last_error_message(),
                 "opencl timer_stop: no timer was started (timer_start)");
    const int n = 1 << 18;
    FloatBuffer a(n, 0, 1), b(n, 1000, 2);
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, cl()), kiln_success) << kiln_last_error_message();
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cl()), kiln_success) << kiln_last_error_message();
    Args args;
    args.buffer(&a.b).buffer(&b.b).int32(n);
    // Built before timing.
    ASSERT_EQ(launch(add_source, "add", {n / 64, 1, 1}, {64, 1, 1}, args), kiln_success)
        << kiln_last_error_message();
    ASSERT_EQ(cl()->synchronize(), kiln_success);
    auto wall_start = std::chrono::steady_clock::now();
    ASSERT_EQ(cl()->timer_start(), kiln_success) << kiln_last_error_message();
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(launch(add_source, "add", {n / 64, 1, 1}, {64, 1, 1}, args), kiln_success)
            << kiln_last_error_message();
    ASSERT_EQ(cl()->timer_stop(&ms), kiln_success) << kiln_last_error_message();
    double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start)
            .count();
    // The device's clock, between the two markers: inside the host's interval, not zero.
    EXPECT_GT(ms, 0.0);
    EXPECT_LE(ms, wall_ms);
    // The markers waited for the kernels: the result is there without a synchronize.
    kiln_buffer_set_device_dirty(&a.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&a.b), kiln_success) << kiln_last_error_message();
    EXPECT_EQ(a.data[7], 7.f + 5.f * (1000.f + 14.f));
    // A stopped timer is not running any more.
    EXPECT_EQ(cl()->timer_stop(&ms), kiln_error_generic);
    // release() forgets a started timer.
    ASSERT_EQ(cl()->timer_start(), kiln_success) << kiln_last_error_message();
    ASSERT_EQ(kiln_buffer_device_free(&a.b), kiln_success);
    ASSERT_EQ(kiln_buffer_device_free(&b.b), kiln_success);
    ASSERT_EQ(cl()->release(), kiln_success);
    EXPECT_EQ(cl()->timer_stop(&ms), kiln_error_generic);
}

TEST_F(OpenCL, ATwoDimensionalLaunchIndexesLikeTheHost) {
    // A 2-D int buffer with mins (3, -1) and rows padded to 20 elements.
    const int width = 16, height = 12, stride = 20;
    std::vector<int32_t> data(size_t(stride) * height, -1);
    kiln_dimension_t dims[2] = {{3, width, 1, 0}, {-1, height, stride, 0}};
    kiln_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(data.data());
    b.type = {kiln_type_int, 32, 1};
    b.dimensions = 2;
    b.dim = dims;
    ASSERT_EQ(kiln_buffer_device_malloc(&b, cl()), kiln_success) << kiln_last_error_message();
    const std::string source = R"CL(
__kernel void coordinates(__global int *out, int min_x, int min_y, int stride) {
    int x = get_global_id(0), y = get_global_id(1);
    out[x + y * stride] = (x + min_x) * 1000 + (y + min_y);
}
)CL";
    Args args;
    args.buffer(&b).int32(3).int32(-1).int32(stride);
    ASSERT_EQ(launch(source, "coordinates", {2, 3, 1}, {8, 4, 1}, args), kiln_success)
        << kiln_last_error_message();
    kiln_buffer_set_device_dirty(&b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&b), kiln_success) << kiln_last_error_message();
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++)
            ASSERT_EQ(data[x + y * stride], (x + 3) * 1000 + (y - 1)) << x << ", " << y;
    }
    // The bytes between rows are not the buffer's (they could be another buffer's): untouched.
    for (int y = 0; y < height; y++) {
        for (int x = width; x < stride; x++)
            ASSERT_EQ(data[x + y * stride], -1) << x << ", " << y;
    }
    kiln_buffer_device_free(&b);
}

TEST_F(OpenCL, LocalMemoryAndBarriersReduceEachBlock) {
    const std::string source = R"CL(
__kernel void block_sum(__global const float *in, __global float *out) {
    __local float partial[64];
    int l = get_local_id(0);
    partial[l] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 32; s > 0; s >>= 1) {
        if (l < s) partial[l] += partial[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) out[get_group_id(0)] = partial[0];
}
// Reverses each block through local memory sized by the caller.
__kernel void block_reverse(__global const float *in, __global float *out, __local float *tmp) {
    int l = get_local_id(0), n = get_local_size(0);
    tmp[l] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = tmp[n - 1 - l];
}
)CL";
    const int blocks = 8;
    FloatBuffer in(64 * blocks, 0, 1), sums(blocks), reversed(64 * blocks);
    ASSERT_EQ(kiln_buffer_copy_to_device(&in.b, cl()), kiln_success) << kiln_last_error_message();
    ASSERT_EQ(kiln_buffer_device_malloc(&sums.b, cl()), kiln_success);
    ASSERT_EQ(kiln_buffer_device_malloc(&reversed.b, cl()), kiln_success);
    Args sum_args;
    sum_args.buffer(&in.b).buffer(&sums.b);
    ASSERT_EQ(launch(source, "block_sum", {blocks, 1, 1}, {64, 1, 1}, sum_args), kiln_success)
        << kiln_last_error_message();
    Args reverse_args;
    reverse_args.buffer(&in.b).buffer(&reversed.b).local_bytes(64 * sizeof(float));
    ASSERT_EQ(launch(source, "block_reverse", {blocks, 1, 1}, {64, 1, 1}, reverse_args),
              kiln_success)
        << kiln_last_error_message();
    ASSERT_EQ(cl()->synchronize(), kiln_success);
    kiln_buffer_set_device_dirty(&sums.b, 1);
    kiln_buffer_set_device_dirty(&reversed.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&sums.b), kiln_success);
    ASSERT_EQ(kiln_buffer_copy_to_host(&reversed.b), kiln_success);
    for (int g = 0; g < blocks; g++) {
        float expected = 0;
        for (int i = 0; i < 64; i++)
            expected += float(g * 64 + i);
        EXPECT_EQ(sums.data[g], expected) << g;
        for (int l = 0; l < 64; l++)
            ASSERT_EQ(reversed.data[g * 64 + l], float(g * 64 + 63 - l)) << g << ", " << l;
    }
}

TEST_F(OpenCL, DoubleKernelsBuild) {
    const std::string source = R"CL(
__kernel void twice(__global double *a) { a[get_global_id(0)] *= 2.0; }
)CL";
    std::vector<double> data = {1.5, -2.25, 1e300, 3.0};
    kiln_dimension_t dim = {0, 4, 1, 0};
    kiln_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(data.data());
    b.type = {kiln_type_float, 64, 1};
    b.dimensions = 1;
    b.dim = &dim;
    ASSERT_EQ(kiln_buffer_copy_to_device(&b, cl()), kiln_success) << kiln_last_error_message();
    Args args;
    args.buffer(&b);
    ASSERT_EQ(launch(source, "twice", {1, 1, 1}, {4, 1, 1}, args), kiln_success)
        << kiln_last_error_message();
    kiln_buffer_set_device_dirty(&b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&b), kiln_success);
    EXPECT_EQ(data[0], 3.0);
    EXPECT_EQ(data[1], -4.5);
    EXPECT_EQ(data[2], 2e300);
    kiln_buffer_device_free(&b);
}

TEST_F(OpenCL, ABuildErrorShowsTheLogAndTheOffendingLine) {
    const std::string source = "__kernel void broken(__global float *a) {\n"
                               "    int i = get_global_id(0);\n"
                               "    a[i] = undefined_value + 1;\n"
                               "}\n";
    FloatBuffer a(4);
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, cl()), kiln_success);
    Args args;
    args.buffer(&a.b);
    EXPECT_EQ(launch(source, "broken", {1, 1, 1}, {4, 1, 1}, args), kiln_error_device_compile);
    std::string message = kiln_last_error_message();
    EXPECT_EQ(message.rfind("the OpenCL program of kernel 'broken' failed to build on '", 0), 0u)
        << message;
    EXPECT_TRUE(contains(message, "(clBuildProgram: CL_BUILD_PROGRAM_FAILURE (-11))\n")) << message;
    EXPECT_TRUE(contains(message, "\n<kernel source>:3:     a[i] = undefined_value + 1;\n"))
        << message;
    EXPECT_TRUE(contains(message, "\nbuild log:\n")) << message;
    EXPECT_TRUE(contains(message, "undefined_value")) << message;
    // The compiler's temporary file name is replaced, so the log points at the same line.
    EXPECT_TRUE(contains(message, "<kernel source>:3:")) << message;
    EXPECT_FALSE(contains(message, ".cl:3:")) << message;
    // A failed build is not cached: the same error comes back.
    EXPECT_EQ(launch(source, "broken", {1, 1, 1}, {4, 1, 1}, args), kiln_error_device_compile);
}

TEST_F(OpenCL, TooManyThreadsPerBlockNamesTheKernelAndTheLimit) {
    FloatBuffer a(16), b(16);
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, cl()), kiln_success);
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cl()), kiln_success);
    Args args;
    args.buffer(&a.b).buffer(&b.b).int32(16);
    // Twice the device's limit, split over two dimensions.
    int32_t x = 64, y = int32_t(2 * max_threads / 64);
    EXPECT_EQ(launch(add_source, "add", {1, 1, 1}, {x, y, 1}, args), kiln_error_device_run);
    std::string message = kiln_last_error_message();
    std::string expected = "kernel 'add' asks for " + std::to_string(x * y) +
                           " threads per block (64 x " + std::to_string(y) + " x 1) but '";
    EXPECT_EQ(message.rfind(expected, 0), 0u) << message;
    EXPECT_TRUE(contains(message, "(CL_KERNEL_WORK_GROUP_SIZE)")) << message;
}

TEST_F(OpenCL, AnUnknownKernelNameIsAnError) {
    FloatBuffer a(4);
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, cl()), kiln_success);
    Args args;
    args.buffer(&a.b).int32(2);
    EXPECT_EQ(launch(add_source, "no_such_kernel", {1, 1, 1}, {4, 1, 1}, args),
              kiln_error_device_run);
    EXPECT_STREQ(kiln_last_error_message(),
                 "clCreateKernel failed for kernel 'no_such_kernel': CL_INVALID_KERNEL_NAME (-46)");
}

TEST_F(OpenCL, ReleaseIsSafeTwiceAndTheDeviceComesBack) {
    ASSERT_EQ(cl()->release(), kiln_success);
    ASSERT_EQ(cl()->release(), kiln_success);
    EXPECT_EQ(cl()->synchronize(), kiln_success);
    FloatBuffer a(8, 1, 0), b(8, 2, 0);
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, cl()), kiln_success) << kiln_last_error_message();
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cl()), kiln_success) << kiln_last_error_message();
    Args args;
    args.buffer(&a.b).buffer(&b.b).int32(8);
    ASSERT_EQ(launch(add_source, "add", {1, 1, 1}, {8, 1, 1}, args), kiln_success)
        << kiln_last_error_message();
    kiln_buffer_set_device_dirty(&a.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&a.b), kiln_success) << kiln_last_error_message();
    EXPECT_EQ(a.data[7], 3.f);
    ASSERT_EQ(cl()->release(), kiln_success);
    // A device copy from before a release belongs to the released context: it can only be freed.
    kiln_buffer_set_device_dirty(&b.b, 1);
    EXPECT_EQ(kiln_buffer_copy_to_host(&b.b), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "opencl copy_to_host: the buffer's cl_mem belongs to another OpenCL context (one "
                 "released by the interface's release(), or not kiln's); free the device copy and "
                 "copy the buffer to the device again");
    EXPECT_EQ(kiln_buffer_device_free(&a.b), kiln_success);
    EXPECT_EQ(kiln_buffer_device_free(&b.b), kiln_success);
    ASSERT_EQ(cl()->release(), kiln_success);
}

TEST_F(OpenCL, NegativeStridesAreRejectedForDeviceCopies) {
    float data[4] = {};
    kiln_dimension_t dim = {0, 4, -1, 0};
    kiln_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(data + 3);
    b.type = {kiln_type_float, 32, 1};
    b.dimensions = 1;
    b.dim = &dim;
    EXPECT_EQ(kiln_buffer_copy_to_device(&b, cl()), kiln_error_bad_stride);
    EXPECT_STREQ(kiln_last_error_message(), "opencl device_malloc: dimension 0 of the buffer has "
                                            "stride -1; device copies need non-negative strides");
    EXPECT_EQ(b.device, 0u);
}

TEST_F(OpenCL, AnEmptyBufferGetsADeviceCopyAndCopiesNothing) {
    FloatBuffer empty(0);
    float unused = 0;
    empty.b.host = reinterpret_cast<uint8_t *>(&unused);
    ASSERT_EQ(kiln_buffer_copy_to_device(&empty.b, cl()), kiln_success)
        << kiln_last_error_message();
    EXPECT_NE(empty.b.device, 0u);
    kiln_buffer_set_device_dirty(&empty.b, 1);
    EXPECT_EQ(kiln_buffer_copy_to_host(&empty.b), kiln_success);
}

TEST_F(OpenCL, ACopyLargerThanTheDeviceCopyIsAnError) {
    FloatBuffer a(8);
    ASSERT_EQ(kiln_buffer_device_malloc(&a.b, cl()), kiln_success);
    a.dim.extent = 16; // the buffer grew after its device copy was made
    EXPECT_EQ(cl()->copy_to_device(&a.b), kiln_error_device_memory);
    EXPECT_STREQ(kiln_last_error_message(),
                 "opencl copy_to_device: the buffer spans 64 bytes but its device copy holds 32");
    a.dim.extent = 8;
}

TEST_F(OpenCL, ThreadsLaunchConcurrently) {
    const int threads = 4, n = 256, rounds = 25;
    std::vector<std::string> failures(threads);
    std::vector<std::thread> workers;
    workers.reserve(threads);
    for (int t = 0; t < threads; t++) {
        workers.emplace_back([t, &failures] {
            FloatBuffer a(n, 0, 0), b(n, float(t + 1), 0);
            if (kiln_buffer_copy_to_device(&a.b, cl()) || kiln_buffer_copy_to_device(&b.b, cl())) {
                failures[t] = kiln_last_error_message();
                return;
            }
            for (int r = 0; r < rounds; r++) {
                Args args;
                args.buffer(&a.b).buffer(&b.b).int32(n);
                if (launch(add_source, "add", {n / 32, 1, 1}, {32, 1, 1}, args)) {
                    failures[t] = kiln_last_error_message();
                    return;
                }
            }
            kiln_buffer_set_device_dirty(&a.b, 1);
            if (kiln_buffer_copy_to_host(&a.b)) {
                failures[t] = kiln_last_error_message();
                return;
            }
            for (int i = 0; i < n; i++) {
                if (a.data[i] != float(rounds * (t + 1))) {
                    failures[t] = "wrong value at " + std::to_string(i);
                    return;
                }
            }
        });
    }
    for (std::thread &w : workers)
        w.join();
    for (int t = 0; t < threads; t++)
        EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST_F(OpenCL, ADeviceBufferGoesThroughDLPackAsItsClMem) {
    FloatBuffer a(6, 1, 1);
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, cl()), kiln_success) << kiln_last_error_message();
    DLTensor t;
    int64_t shape[1], strides[1];
    ASSERT_EQ(kiln_buffer_to_dltensor(&a.b, &t, shape, strides, 1), kiln_success)
        << kiln_last_error_message();
    EXPECT_EQ(t.device.device_type, kDLOpenCL);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data), a.b.device);
    kiln_buffer_t imported;
    kiln_dimension_t dim;
    ASSERT_EQ(kiln_buffer_from_dltensor(&t, &imported, &dim, 1), kiln_success)
        << kiln_last_error_message();
    EXPECT_EQ(imported.device, a.b.device);
    EXPECT_EQ(imported.device_interface, cl());
    EXPECT_EQ(imported.host, nullptr);
    // The imported buffer reads the device data once given host memory.
    std::vector<float> host(6, 0.f);
    imported.host = reinterpret_cast<uint8_t *>(host.data());
    ASSERT_EQ(kiln_buffer_copy_to_host(&imported), kiln_success) << kiln_last_error_message();
    EXPECT_EQ(host[5], 6.f);
    imported.device = 0; // borrowed: the exporter frees it
}

TEST_F(OpenCL, ADeviceNameMatchingNoDeviceListsTheDevices) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            cl()->release(); // the fixture chose the default device; choose again
            setenv("KILN_OPENCL_DEVICE", "no such device", 1);
            int code = cl()->device_limits(nullptr, nullptr);
            std::fprintf(stderr, "%s\n", kiln_last_error_message());
            std::exit(code == kiln_error_no_device ? 0 : 1);
        },
        ::testing::ExitedWithCode(0),
        "KILN_OPENCL_DEVICE='no such device' matches no OpenCL device; the devices are: '");
}

// The missing-driver path, in a child process that points the loader at a library that does not
// exist (the parent may already have loaded the real one).
TEST(OpenCLNoDriver, AMissingLibraryIsNoDeviceNamingTheLibrary) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            setenv("KILN_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);
            int code = cl()->device_limits(nullptr, nullptr);
            std::fprintf(stderr, "%s\n", kiln_last_error_message());
            int again = cl()->device_limits(nullptr, nullptr);
            std::exit(code == kiln_error_no_device && again == kiln_error_no_device ? 0 : 1);
        },
        ::testing::ExitedWithCode(0),
        "no OpenCL driver: cannot load /nonexistent/libOpenCL.so.1 \\(.*\\); install an OpenCL "
        "ICD loader");
}
