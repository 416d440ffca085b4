// The CUDA interface (runtime/kiln_cuda.cpp) without a GPU: against a missing driver, the toolkit's
// stub libcuda (cuInit fails), and a fake driver (fake_cuda/FakeCudaDriver.cpp) that keeps device
// memory on the host and records launches; NVRTC (kiln_cuda_compile) for real where the toolkit is
// installed; and one real-GPU test that skips, saying why, without libcuda.so.1 and a device.
// The interface's state is process-wide: every test starts from release() and a reset fake.
#include "fake_cuda/FakeCudaDriver.h"
#include "runtime/kiln_dlpack.h"
#include "runtime/kiln_runtime.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const kiln_device_interface_t *cuda() {
    return kiln_cuda_device_interface();
}

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

std::string message() {
    return kiln_last_error_message();
}

// Every cache write of kiln_cuda_compile goes to a fresh folder, removed at exit.
class CacheEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        // A death test's child process inherits its parent's folder and never tears down.
        const char *inherited = std::getenv("KILN_CACHE_DIR");
        if (inherited && std::strncmp(inherited, prefix, sizeof(prefix) - 1) == 0) return;
        char pattern[] = "/tmp/kiln_cuda_cache_XXXXXX";
        if (mkdtemp(pattern)) {
            dir = pattern;
            setenv("KILN_CACHE_DIR", pattern, 1);
        }
    }
    void TearDown() override {
        cuda()->release();
        std::error_code ignored;
        if (!dir.empty()) fs::remove_all(dir, ignored);
    }

private:
    static constexpr char prefix[] = "/tmp/kiln_cuda_cache_";
    std::string dir;
};

[[maybe_unused]] ::testing::Environment *const cache_environment =
    ::testing::AddGlobalTestEnvironment(new CacheEnvironment);

// Points KILN_CUDA_DRIVER at path (unset for nullptr) for a scope, with a fresh interface state.
class DriverOverride {
public:
    explicit DriverOverride(const char *path) {
        const char *old = std::getenv("KILN_CUDA_DRIVER");
        had = old != nullptr;
        if (old) previous = old;
        if (path)
            setenv("KILN_CUDA_DRIVER", path, 1);
        else
            unsetenv("KILN_CUDA_DRIVER");
        cuda()->release();
    }
    ~DriverOverride() {
        cuda()->release();
        if (had)
            setenv("KILN_CUDA_DRIVER", previous.c_str(), 1);
        else
            unsetenv("KILN_CUDA_DRIVER");
    }
    DriverOverride(const DriverOverride &) = delete;
    DriverOverride &operator=(const DriverOverride &) = delete;

private:
    bool had = false;
    std::string previous;
};

// A float buffer of the given extents (dense unless strides are given) over its own host memory.
struct TestBuffer {
    std::vector<float> data;
    std::vector<kiln_dimension_t> dims;
    kiln_buffer_t b = {};

    TestBuffer(std::vector<int> extents, std::vector<int> strides = {}) {
        int stride = 1;
        size_t span = 1;
        for (size_t i = 0; i < extents.size(); i++) {
            int s = strides.empty() ? stride : strides[i];
            dims.push_back({0, extents[i], s, 0});
            span += size_t(extents[i] - 1) * size_t(s);
            stride *= extents[i];
        }
        data.assign(span, 0.0f);
        b.host = reinterpret_cast<uint8_t *>(data.data());
        b.type = {kiln_type_float, 32, 1};
        b.dimensions = int(dims.size());
        b.dim = dims.data();
    }
    ~TestBuffer() { kiln_buffer_device_free(&b); }
    TestBuffer(const TestBuffer &) = delete;
    TestBuffer &operator=(const TestBuffer &) = delete;
    float *device() { return reinterpret_cast<float *>(static_cast<uintptr_t>(b.device)); }
};

struct Image {
    uint32_t kind, arch;
    std::string bytes;
};

// A KILNCUB1 bundle (layout in kiln_runtime.h).
std::string bundle(const std::vector<Image> &images) {
    std::string out = KILN_CUDA_BUNDLE_MAGIC;
    uint32_t header[2] = {uint32_t(images.size()), 0};
    out.append(reinterpret_cast<const char *>(header), sizeof(header));
    uint64_t offset = out.size() + images.size() * sizeof(kiln_cuda_bundle_entry_t);
    for (const Image &i : images) {
        kiln_cuda_bundle_entry_t e = {i.kind, i.arch, offset, i.bytes.size()};
        out.append(reinterpret_cast<const char *>(&e), sizeof(e));
        offset += i.bytes.size();
    }
    for (const Image &i : images)
        out += i.bytes;
    return out;
}

std::string fake_ptx(int arch) {
    return ".version 8.0\n.target sm_" + std::to_string(arch) + "\n// fake ptx\n";
}

// A stand-in cubin: text the fake reads up to its NUL (a real cubin is an ELF image).
std::string cubin_text(int arch) {
    return "fake cubin for sm_" + std::to_string(arch);
}

std::string fake_cubin(int arch) {
    return cubin_text(arch) + '\0';
}

/* ---- No driver, and the toolkit's stub -------------------------------------------------- */

TEST(CUDA, AMissingDriverIsNoDeviceNamingThePath) {
    DriverOverride driver("/nonexistent/libcuda.so.1");
    EXPECT_EQ(kiln_device_interface(kiln_gpu_api_cuda), nullptr);
    EXPECT_TRUE(contains(message(), "no CUDA driver: cannot load /nonexistent/libcuda.so.1 ("))
        << message();
    EXPECT_TRUE(contains(message(), "KILN_CUDA_DRIVER")) << message();
    // The interface itself says the same, with the no_device code, and keeps saying it.
    int64_t threads = 0;
    EXPECT_EQ(cuda()->device_limits(&threads, nullptr), kiln_error_no_device);
    EXPECT_TRUE(contains(message(), "/nonexistent/libcuda.so.1")) << message();
    TestBuffer b({4});
    EXPECT_EQ(cuda()->device_malloc(&b.b), kiln_error_no_device);
    EXPECT_EQ(b.b.device, 0u);
    EXPECT_EQ(kiln_cuda_stream(), nullptr);
    EXPECT_EQ(cuda()->synchronize(), kiln_success); // nothing was queued
}

TEST(CUDA, TheToolkitStubDriverIsNoDeviceWithTheDriversMessage) {
    const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (!fs::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
    DriverOverride driver(stub);
    EXPECT_EQ(kiln_device_interface(kiln_gpu_api_cuda), nullptr);
    EXPECT_EQ(cuda()->device_limits(nullptr, nullptr), kiln_error_no_device);
    // The stub cannot name its own error; kiln knows the name.
    EXPECT_TRUE(contains(message(), "cuInit failed (CUDA driver " + std::string(stub) +
                                        "): CUDA_ERROR_STUB_LIBRARY: the loaded CUDA driver is a "
                                        "stub library, not a real driver (34)"))
        << message();
}

/* ---- The fake driver ------------------------------------------------------------------------ */

class CUDAFake : public ::testing::Test {
protected:
    static void *library;

    template <typename F>
    static F get(const char *name) {
        return reinterpret_cast<F>(dlsym(library, name));
    }

    void SetUp() override {
        if (!library) library = dlopen(KILN_TEST_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(library, nullptr) << dlerror();
        unsetenv("KILN_CUDA_DEVICE");
        driver = std::make_unique<DriverOverride>(KILN_TEST_FAKE_CUDA_DRIVER);
        get<FakeCudaReset>("fake_cuda_reset")();
        set_arg_sizes({});
    }

    void TearDown() override {
        cuda()->release();
        // release() gives back everything kiln made: streams, modules, the primary context.
        const FakeCudaCounters &c = counters();
        EXPECT_EQ(c.stream_creates, c.stream_destroys);
        EXPECT_EQ(c.primary_retains, c.primary_releases);
        EXPECT_EQ(c.module_loads - (module_load_failures), c.module_unloads);
        driver.reset();
        get<FakeCudaReset>("fake_cuda_reset")();
        unsetenv("KILN_CUDA_DEVICE");
    }

    const FakeCudaCounters &counters() { return *get<FakeCudaCountersFn>("fake_cuda_counters")(); }
    void set_devices(int count, int major, int minor) {
        get<FakeCudaSetDevices>("fake_cuda_set_devices")(count, major, minor);
    }
    void set_arg_sizes(const std::vector<size_t> &sizes) {
        get<FakeCudaSetArgSizes>("fake_cuda_set_arg_sizes")(sizes.data(), int(sizes.size()));
    }
    FakeCudaLaunch last_launch() {
        FakeCudaLaunch l = {};
        EXPECT_TRUE(get<FakeCudaLastLaunch>("fake_cuda_last_launch")(&l)) << "no launch recorded";
        return l;
    }
    std::string last_image() {
        std::vector<char> text(1 << 20);
        size_t n = get<FakeCudaLastImage>("fake_cuda_last_image")(text.data(), text.size());
        return std::string(text.data(), n);
    }

    // Launches kernel "k" of source with the given buffers and one int scalar.
    int launch(const std::string &source, std::vector<kiln_buffer_t *> buffers, int32_t scalar,
               const char *name = "k", std::vector<int32_t> blocks = {2, 3, 1},
               std::vector<int32_t> threads = {32, 4, 1}) {
        std::vector<void *> args;
        std::vector<size_t> sizes;
        std::vector<int8_t> is_buffer;
        for (kiln_buffer_t *&b : buffers) {
            args.push_back(&b);
            sizes.push_back(sizeof(kiln_buffer_t *));
            is_buffer.push_back(1);
        }
        args.push_back(&scalar);
        sizes.push_back(sizeof(scalar));
        is_buffer.push_back(0);
        return kiln_device_launch(cuda(), source.data(), source.size(), name, blocks.data(),
                                  threads.data(), int32_t(args.size()), args.data(), sizes.data(),
                                  is_buffer.data());
    }

    int module_load_failures = 0;
    std::unique_ptr<DriverOverride> driver;
};

void *CUDAFake::library = nullptr;

TEST_F(CUDAFake, TheSelectorHandsOutTheCUDAInterface) {
    const kiln_device_interface_t *iface = kiln_device_interface(kiln_gpu_api_cuda);
    ASSERT_EQ(iface, cuda()) << message();
    EXPECT_STREQ(iface->name, "cuda");
    EXPECT_EQ(counters().inits, 1);
    EXPECT_EQ(counters().primary_retains, 1);
    EXPECT_EQ(counters().stream_creates, 1);
}

TEST_F(CUDAFake, DescribesTheDeviceAndItsLimits) {
    char text[256];
    ASSERT_EQ(cuda()->device_description(text, sizeof(text)), kiln_success) << message();
    EXPECT_STREQ(text, "NVIDIA H200; sm_90; driver 13000");
    char small[8];
    ASSERT_EQ(cuda()->device_description(small, sizeof(small)), kiln_success);
    EXPECT_STREQ(small, "NVIDIA ");
    int64_t threads = 0, shared = 0;
    ASSERT_EQ(cuda()->device_limits(&threads, &shared), kiln_success);
    EXPECT_EQ(threads, 1024);
    EXPECT_EQ(shared, 49152);
}

TEST_F(CUDAFake, NoDevicesIsNoDevice) {
    set_devices(0, 9, 0);
    EXPECT_EQ(kiln_device_interface(kiln_gpu_api_cuda), nullptr);
    EXPECT_TRUE(contains(message(), "no CUDA device: the driver " +
                                        std::string(KILN_TEST_FAKE_CUDA_DRIVER) +
                                        " (version 13000) reports none"))
        << message();
}

TEST_F(CUDAFake, AFailingCuInitIsNoDeviceWithTheDriversErrorNameAndString) {
    get<FakeCudaSetResult>("fake_cuda_set_init_result")(100);
    EXPECT_EQ(kiln_device_interface(kiln_gpu_api_cuda), nullptr);
    EXPECT_TRUE(contains(message(), "cuInit failed (CUDA driver " +
                                        std::string(KILN_TEST_FAKE_CUDA_DRIVER) +
                                        "): CUDA_ERROR_NO_DEVICE: no CUDA-capable device is "
                                        "detected (100)"))
        << message();
    // Remembered until release(): cuInit is not called again.
    EXPECT_EQ(cuda()->device_limits(nullptr, nullptr), kiln_error_no_device);
    EXPECT_EQ(counters().inits, 1);
}

TEST_F(CUDAFake, KILN_CUDA_DEVICEOutOfRangeIsNoDevice) {
    setenv("KILN_CUDA_DEVICE", "2", 1);
    EXPECT_EQ(cuda()->device_limits(nullptr, nullptr), kiln_error_no_device);
    EXPECT_TRUE(contains(message(), "KILN_CUDA_DEVICE='2' is not a CUDA device ordinal: there is "
                                    "1 device (0 to 0)"))
        << message();
}

TEST_F(CUDAFake, MallocAndCopiesRoundTripWithDirtyBits) {
    TestBuffer b({5, 3});
    for (size_t i = 0; i < b.data.size(); i++)
        b.data[i] = float(i);
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    EXPECT_EQ(b.b.device_interface, cuda());
    EXPECT_EQ(counters().allocs, 1);
    EXPECT_EQ(counters().copies_to_device, 1); // dense: one copy
    EXPECT_FALSE(kiln_buffer_host_dirty(&b.b));
    EXPECT_EQ(b.device()[7], 7.0f);
    // Nothing changed: no copy either way.
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success);
    ASSERT_EQ(kiln_buffer_copy_to_host(&b.b), kiln_success);
    EXPECT_EQ(counters().copies_to_device, 1);
    EXPECT_EQ(counters().copies_to_host, 0);
    // "A kernel" writes the device copy.
    for (int i = 0; i < 15; i++)
        b.device()[i] = 100.0f + float(i);
    kiln_buffer_set_device_dirty(&b.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&b.b), kiln_success) << message();
    EXPECT_EQ(counters().copies_to_host, 1);
    EXPECT_FALSE(kiln_buffer_device_dirty(&b.b));
    for (int i = 0; i < 15; i++)
        EXPECT_EQ(b.data[size_t(i)], 100.0f + float(i));
    // The host changes: the next copy_to_device copies again.
    b.data[0] = -1.0f;
    kiln_buffer_set_host_dirty(&b.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success);
    EXPECT_EQ(counters().copies_to_device, 2);
    EXPECT_EQ(b.device()[0], -1.0f);
    ASSERT_EQ(kiln_buffer_device_free(&b.b), kiln_success);
    EXPECT_EQ(b.b.device, 0u);
    EXPECT_EQ(counters().frees, 1);
    EXPECT_EQ(get<FakeCudaLiveAllocations>("fake_cuda_live_allocations")(), 0);
}

TEST_F(CUDAFake, StridedCopiesNeverTouchTheBytesBetweenRows) {
    // 3 x 4 floats with rows 5 apart: 2 floats of gap after each row but the last.
    TestBuffer b({3, 4}, {1, 5});
    const float gap = -7.0f;
    for (float &v : b.data)
        v = gap;
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 3; x++)
            b.data[size_t(y * 5 + x)] = float(y * 10 + x);
    ASSERT_EQ(cuda()->device_malloc(&b.b), kiln_success) << message();
    ASSERT_EQ(kiln_buffer_size_in_bytes(&b.b), 18u * 4u);
    for (int i = 0; i < 18; i++)
        b.device()[i] = 555.0f; // what the device holds between rows must stay
    ASSERT_EQ(cuda()->copy_to_device(&b.b), kiln_success) << message();
    EXPECT_EQ(counters().copies_to_device, 4); // one per row
    for (int i = 0; i < 18; i++) {
        bool element = i % 5 < 3;
        EXPECT_EQ(b.device()[i], element ? float(i / 5 * 10 + i % 5) : 555.0f) << "device " << i;
    }
    for (int i = 0; i < 18; i++)
        b.device()[i] = 1000.0f + float(i);
    ASSERT_EQ(cuda()->copy_to_host(&b.b), kiln_success) << message();
    for (int i = 0; i < 18; i++) {
        bool element = i % 5 < 3;
        EXPECT_EQ(b.data[size_t(i)], element ? 1000.0f + float(i) : gap) << "host " << i;
    }
}

TEST_F(CUDAFake, NegativeStridesAreRejected) {
    TestBuffer b({4});
    b.dims[0].stride = -1;
    b.b.host += 3 * sizeof(float);
    EXPECT_EQ(cuda()->device_malloc(&b.b), kiln_error_bad_stride);
    EXPECT_TRUE(contains(message(), "dimension 0 of the buffer has stride -1")) << message();
}

TEST_F(CUDAFake, ALaunchRecordsGridBlockStreamAndArguments) {
    TestBuffer in({64}), out({64});
    ASSERT_EQ(kiln_buffer_copy_to_device(&in.b, cuda()), kiln_success) << message();
    ASSERT_EQ(kiln_buffer_device_malloc(&out.b, cuda()), kiln_success) << message();
    set_arg_sizes({8, 8, 4});
    ASSERT_EQ(
        launch(bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}}), {&in.b, &out.b}, 42, "scale"),
        kiln_success)
        << message();
    FakeCudaLaunch l = last_launch();
    EXPECT_STREQ(l.name, "scale");
    EXPECT_EQ(l.grid[0], 2u);
    EXPECT_EQ(l.grid[1], 3u);
    EXPECT_EQ(l.grid[2], 1u);
    EXPECT_EQ(l.block[0], 32u);
    EXPECT_EQ(l.block[1], 4u);
    EXPECT_EQ(l.block[2], 1u);
    EXPECT_EQ(l.shared_bytes, 0u);
    EXPECT_EQ(l.stream, kiln_cuda_stream());
    EXPECT_NE(l.stream, nullptr);
    uint64_t pointer0 = 0, pointer1 = 0;
    int32_t scalar = 0;
    std::memcpy(&pointer0, l.args[0], 8);
    std::memcpy(&pointer1, l.args[1], 8);
    std::memcpy(&scalar, l.args[2], 4);
    EXPECT_EQ(pointer0, in.b.device);
    EXPECT_EQ(pointer1, out.b.device);
    EXPECT_EQ(scalar, 42);
    EXPECT_EQ(last_image(), fake_ptx(90));
}

TEST_F(CUDAFake, TheModuleIsLoadedOnceForTwoLaunches) {
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string source = bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}});
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    ASSERT_EQ(launch(source, {&b.b}, 2), kiln_success) << message();
    EXPECT_EQ(counters().module_loads, 1);
    EXPECT_EQ(counters().function_lookups, 1);
    EXPECT_EQ(counters().launches, 2);
    // Another kernel of the same module: one more function, no more modules.
    ASSERT_EQ(launch(source, {&b.b}, 3, "other"), kiln_success) << message();
    EXPECT_EQ(counters().module_loads, 1);
    EXPECT_EQ(counters().function_lookups, 2);
    // After release() the module is loaded again.
    ASSERT_EQ(kiln_buffer_device_free(&b.b), kiln_success);
    cuda()->release();
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    EXPECT_EQ(counters().module_loads, 2);
}

TEST_F(CUDAFake, ABundlePrefersTheCubinOfTheDevicesArchitecture) {
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string source =
        bundle({{kiln_cuda_image_source, 0, "extern \"C\" __global__ void k(float *p, int n) {}"},
                {kiln_cuda_image_ptx, 80, fake_ptx(80)},
                {kiln_cuda_image_cubin, 80, fake_cubin(80)},
                {kiln_cuda_image_ptx, 90, fake_ptx(90)},
                {kiln_cuda_image_cubin, 90, fake_cubin(90)},
                {kiln_cuda_image_cubin, 100, fake_cubin(100)}});
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    EXPECT_EQ(last_image(), cubin_text(90));
}

TEST_F(CUDAFake, ABundleFallsBackToTheHighestPTXNotNewerThanTheDevice) {
    set_devices(1, 8, 9); // sm_89: no cubin of major 8 <= 89, PTX 86 is the best
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string source = bundle({{kiln_cuda_image_ptx, 75, fake_ptx(75)},
                                 {kiln_cuda_image_cubin, 90, fake_cubin(90)},
                                 {kiln_cuda_image_cubin, 75, fake_cubin(75)},
                                 {kiln_cuda_image_ptx, 86, fake_ptx(86)},
                                 {kiln_cuda_image_ptx, 90, fake_ptx(90)}});
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    EXPECT_EQ(last_image(), fake_ptx(86));
    // A cubin of the same major version and an older minor one runs on the device.
    std::string with_cubin = bundle(
        {{kiln_cuda_image_ptx, 86, fake_ptx(86)}, {kiln_cuda_image_cubin, 80, fake_cubin(80)}});
    ASSERT_EQ(launch(with_cubin, {&b.b}, 1), kiln_success) << message();
    EXPECT_EQ(last_image(), cubin_text(80));
}

TEST_F(CUDAFake, ABundleWithOnlyNewerImagesAndNoSourceNamesTheArchitectures) {
    set_devices(1, 8, 0);
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string source = bundle(
        {{kiln_cuda_image_ptx, 90, fake_ptx(90)}, {kiln_cuda_image_cubin, 90, fake_cubin(90)}});
    EXPECT_EQ(launch(source, {&b.b}, 1), kiln_error_device_compile);
    EXPECT_TRUE(contains(message(), "kernel 'k': the CUDA bundle has no image for the device "
                                    "'NVIDIA H200' (sm_80) and no source to compile: it holds "
                                    "ptx sm_90, cubin sm_90"))
        << message();
    EXPECT_EQ(counters().module_loads, 0);
}

TEST_F(CUDAFake, MalformedBundlesAreErrorsNotCrashes) {
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string good = bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}});
    std::vector<std::pair<std::string, std::string>> cases;
    cases.push_back({good.substr(0, 10), "fewer than its 16-byte header"});
    std::string many = good;
    uint32_t huge = 1000000;
    std::memcpy(&many[8], &huge, 4);
    cases.push_back({many, "it claims 1000000 entries"});
    std::string none = good;
    uint32_t zero = 0;
    std::memcpy(&none[8], &zero, 4);
    cases.push_back({none, "it claims 0 entries"});
    std::string outside = good;
    uint64_t far = 1ull << 62;
    std::memcpy(&outside[16 + 8], &far, 8); // entry 0's offset
    cases.push_back({outside, "entry 0 (kind 1, arch 90, offset 4611686018427387904"});
    std::string too_long = good;
    uint64_t size = ~0ull;
    std::memcpy(&too_long[16 + 16], &size, 8); // entry 0's size
    cases.push_back({too_long, "lies outside its"});
    std::string kind = good;
    uint32_t seven = 7;
    std::memcpy(&kind[16], &seven, 4);
    cases.push_back({kind, "entry 0 (kind 7"});
    for (const auto &[source, expected] : cases) {
        EXPECT_EQ(launch(source, {&b.b}, 1), kiln_error_device_compile) << expected;
        EXPECT_TRUE(contains(message(), "the CUDA bundle")) << message();
        EXPECT_TRUE(contains(message(), expected)) << message();
    }
    EXPECT_EQ(counters().module_loads, 0);
    EXPECT_EQ(counters().launches, 0);
}

TEST_F(CUDAFake, PlainSourceIsCompiledByNVRTCForTheDevice) {
    void *probe = nullptr;
    size_t probe_size = 0;
    const char trivial[] = "extern \"C\" __global__ void probe() {}";
    int code = kiln_cuda_compile(trivial, sizeof(trivial) - 1, 86, 0, &probe, &probe_size);
    std::free(probe);
    if (code == kiln_error_no_device) GTEST_SKIP() << "no NVRTC: " << message();
    ASSERT_EQ(code, kiln_success) << message();
    set_devices(1, 8, 6);
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string source = "extern \"C\" __global__ void k(float *p, int n) {\n"
                         "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "    if (i < n) p[i] = p[i] * 2.0f;\n"
                         "}\n";
    ASSERT_EQ(launch(source, {&b.b}, 16), kiln_success) << message();
    std::string ptx = last_image();
    EXPECT_TRUE(contains(ptx, ".target sm_86")) << ptx.substr(0, 400);
    EXPECT_TRUE(contains(ptx, ".entry k(")) << ptx.substr(0, 400);
    // A source that does not compile: the error names the kernel, the device and the bad line.
    std::string bad = "extern \"C\" __global__ void k(float *p, int n) {\n"
                      "    p[0] = undeclared_thing;\n"
                      "}\n";
    EXPECT_EQ(launch(bad, {&b.b}, 16), kiln_error_device_compile);
    EXPECT_TRUE(contains(message(), "kernel 'k' for 'NVIDIA H200' (sm_86): cuda: nvrtc could not "
                                    "compile"))
        << message();
    EXPECT_TRUE(contains(message(), "kiln.cu:2:     p[0] = undeclared_thing;")) << message();
}

TEST_F(CUDAFake, PTXTooNewForTheDriverFallsBackToACubinFromNVRTC) {
    void *probe = nullptr;
    size_t probe_size = 0;
    const char trivial[] = "extern \"C\" __global__ void probe() {}";
    int code = kiln_cuda_compile(trivial, sizeof(trivial) - 1, 90, 1, &probe, &probe_size);
    std::free(probe);
    if (code == kiln_error_no_device) GTEST_SKIP() << "no NVRTC: " << message();
    ASSERT_EQ(code, kiln_success) << message();
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    get<FakeCudaSetResult>("fake_cuda_set_module_load_result")(222); // UNSUPPORTED_PTX_VERSION
    module_load_failures = 1;
    std::string source = "extern \"C\" __global__ void k(float *p, int n) { p[0] = float(n); }\n";
    ASSERT_EQ(launch(source, {&b.b}, 16), kiln_success) << message();
    EXPECT_EQ(counters().module_loads, 2);
    EXPECT_EQ(last_image().substr(0, 4), "\x7f"
                                         "ELF");
}

TEST_F(CUDAFake, AFailingModuleLoadIsACompileErrorWithTheDriversName) {
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    get<FakeCudaSetResult>("fake_cuda_set_module_load_result")(218);
    module_load_failures = 1;
    EXPECT_EQ(launch(bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}}), {&b.b}, 1),
              kiln_error_device_compile);
    EXPECT_TRUE(contains(message(), "cuModuleLoadData failed for kernel 'k' (ptx for sm_90): "
                                    "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed (218)"))
        << message();
}

TEST_F(CUDAFake, AnInjectedLaunchFailureIsDeviceRunWithTheErrorName) {
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    get<FakeCudaSetResult>("fake_cuda_set_launch_result")(719);
    EXPECT_EQ(launch(bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}}), {&b.b}, 1, "blur"),
              kiln_error_device_run);
    EXPECT_TRUE(contains(message(), "cuLaunchKernel failed for kernel 'blur' (blocks 2 x 3 x 1, "
                                    "threads 32 x 4 x 1): CUDA_ERROR_LAUNCH_FAILED: unspecified "
                                    "launch failure (719)"))
        << message();
}

TEST_F(CUDAFake, TooManyThreadsPerBlockIsAnErrorBeforeLaunching) {
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    EXPECT_EQ(launch(bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}}), {&b.b}, 1, "k", {1, 1, 1},
                     {64, 32, 1}),
              kiln_error_device_run);
    EXPECT_TRUE(contains(message(), "kernel 'k' asks for 2048 threads per block (64 x 32 x 1) but "
                                    "'NVIDIA H200' allows at most 1024"))
        << message();
    EXPECT_EQ(counters().launches, 0);
}

TEST_F(CUDAFake, ABufferWithoutACUDADeviceCopyIsRejectedNamingKernelAndArgument) {
    TestBuffer b({16});
    b.b.device = 0x1234; // never dereferenced: the interface is checked first
    b.b.device_interface = kiln_opencl_device_interface();
    kiln_buffer_t *pointer = &b.b;
    void *args[1] = {&pointer};
    size_t sizes[1] = {sizeof(pointer)};
    int8_t is_buffer[1] = {1};
    int32_t blocks[3] = {1, 1, 1}, threads[3] = {1, 1, 1};
    std::string source = bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}});
    EXPECT_EQ(cuda()->run(source.data(), source.size(), "gather", blocks, threads, 1, args, sizes,
                          is_buffer),
              kiln_error_device_unavailable);
    EXPECT_TRUE(contains(message(), "kernel 'gather' argument 0: the buffer has no CUDA device "
                                    "copy"))
        << message();
    b.b.device = 0;
    b.b.device_interface = nullptr;
    // A null scalar (OpenCL's dynamic local memory) is not supported.
    void *null_args[1] = {nullptr};
    int8_t scalar[1] = {0};
    EXPECT_EQ(cuda()->run(source.data(), source.size(), "gather", blocks, threads, 1, null_args,
                          sizes, scalar),
              kiln_error_internal);
    EXPECT_TRUE(contains(message(), "kernels declare shared memory statically")) << message();
}

TEST_F(CUDAFake, SetStreamAndSetContextAreUsedByLaunchesAndCopies) {
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    void *own = kiln_cuda_stream();
    ASSERT_NE(own, nullptr);
    EXPECT_EQ(get<FakeCudaLastCopyStream>("fake_cuda_last_copy_stream")(), own);
    std::string source = bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}});
    // The program's stream.
    void *user_stream = get<FakeCudaCreateStream>("fake_cuda_create_stream")(nullptr);
    ASSERT_EQ(kiln_cuda_set_stream(user_stream), kiln_success);
    EXPECT_EQ(kiln_cuda_stream(), user_stream);
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    EXPECT_EQ(last_launch().stream, user_stream);
    kiln_buffer_set_device_dirty(&b.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&b.b), kiln_success) << message();
    EXPECT_EQ(get<FakeCudaLastCopyStream>("fake_cuda_last_copy_stream")(), user_stream);
    ASSERT_EQ(kiln_cuda_set_stream(nullptr), kiln_success);
    EXPECT_EQ(kiln_cuda_stream(), own);
    void *primary = last_launch().context;
    // The program's context: kiln makes its own stream there and loads the module again.
    void *user_context = get<FakeCudaCreateContext>("fake_cuda_create_context")();
    ASSERT_EQ(kiln_cuda_set_context(user_context), kiln_success) << message();
    void *context_stream = kiln_cuda_stream();
    EXPECT_NE(context_stream, own);
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    EXPECT_EQ(last_launch().context, user_context);
    EXPECT_EQ(last_launch().stream, context_stream);
    EXPECT_EQ(counters().module_loads, 2);
    kiln_buffer_set_host_dirty(&b.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    EXPECT_EQ(get<FakeCudaLastCopyStream>("fake_cuda_last_copy_stream")(), context_stream);
    // Back to the primary context and its stream; its module is still cached.
    ASSERT_EQ(kiln_cuda_set_context(nullptr), kiln_success);
    EXPECT_EQ(kiln_cuda_stream(), own);
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    EXPECT_EQ(last_launch().context, primary);
    EXPECT_EQ(counters().module_loads, 2);
}

TEST_F(CUDAFake, AWrappedDevicePointerIsUsedButNeverFreed) {
    uint64_t pointer = get<FakeCudaAlloc>("fake_cuda_alloc")(16 * sizeof(float));
    TestBuffer b({16});
    ASSERT_EQ(kiln_cuda_wrap_device_pointer(&b.b, pointer), kiln_success) << message();
    EXPECT_EQ(b.b.device, pointer);
    EXPECT_EQ(b.b.device_interface, cuda());
    EXPECT_TRUE(b.b.flags & kiln_buffer_flag_device_not_owned);
    b.data[3] = 3.5f;
    kiln_buffer_set_host_dirty(&b.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    EXPECT_EQ(b.device()[3], 3.5f);
    set_arg_sizes({8, 4});
    ASSERT_EQ(launch(bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}}), {&b.b}, 1), kiln_success)
        << message();
    uint64_t passed = 0;
    std::memcpy(&passed, last_launch().args[0], 8);
    EXPECT_EQ(passed, pointer);
    // device_free forgets it; the memory is still the program's.
    ASSERT_EQ(kiln_buffer_device_free(&b.b), kiln_success);
    EXPECT_EQ(b.b.device, 0u);
    EXPECT_EQ(b.b.device_interface, nullptr);
    EXPECT_FALSE(b.b.flags & kiln_buffer_flag_device_not_owned);
    EXPECT_EQ(counters().frees, 0);
    EXPECT_EQ(get<FakeCudaLiveAllocations>("fake_cuda_live_allocations")(), 1);
    // So does the interface's own device_free, and detach.
    ASSERT_EQ(kiln_cuda_wrap_device_pointer(&b.b, pointer), kiln_success);
    ASSERT_EQ(cuda()->device_free(&b.b), kiln_success);
    ASSERT_EQ(kiln_cuda_wrap_device_pointer(&b.b, pointer), kiln_success);
    kiln_buffer_set_device_dirty(&b.b, 1);
    ASSERT_EQ(kiln_cuda_detach_device_pointer(&b.b), kiln_success);
    EXPECT_EQ(b.b.device, 0u);
    EXPECT_FALSE(kiln_buffer_device_dirty(&b.b));
    EXPECT_EQ(counters().frees, 0);
    // Detaching a copy kiln owns is an error (it would leak); wrapping over one too.
    ASSERT_EQ(cuda()->device_malloc(&b.b), kiln_success);
    EXPECT_EQ(kiln_cuda_detach_device_pointer(&b.b), kiln_error_device_unavailable);
    EXPECT_TRUE(contains(message(), "not a wrapped CUDA pointer (interface 'cuda', owned by kiln)"))
        << message();
    EXPECT_EQ(kiln_cuda_wrap_device_pointer(&b.b, pointer), kiln_error_device_unavailable);
    EXPECT_EQ(kiln_cuda_wrap_device_pointer(&b.b, 0), kiln_error_buffer_argument_null);
    ASSERT_EQ(kiln_buffer_device_free(&b.b), kiln_success);
    EXPECT_EQ(counters().frees, 1);
}

TEST_F(CUDAFake, TheTimerRecordsEventsOnTheCurrentStream) {
    float ms = 0;
    EXPECT_EQ(kiln_cuda_timer_stop(&ms), kiln_error_generic);
    EXPECT_TRUE(contains(message(), "no timer was started")) << message();
    // The fake's device clock moves 0.75 ms per launch: two launches between the events.
    get<FakeCudaSetLaunchMs>("fake_cuda_set_launch_ms")(0.75);
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string source = bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}});
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    ASSERT_EQ(kiln_cuda_timer_start(), kiln_success) << message();
    ASSERT_EQ(launch(source, {&b.b}, 1), kiln_success) << message();
    ASSERT_EQ(launch(source, {&b.b}, 2), kiln_success) << message();
    ASSERT_EQ(kiln_cuda_timer_stop(&ms), kiln_success) << message();
    EXPECT_EQ(ms, 1.5f);
    EXPECT_EQ(counters().event_records, 2);
    // Started in one context, stopped in another: an error, not a wrong number.
    ASSERT_EQ(kiln_cuda_timer_start(), kiln_success);
    ASSERT_EQ(kiln_cuda_set_context(get<FakeCudaCreateContext>("fake_cuda_create_context")()),
              kiln_success);
    EXPECT_EQ(kiln_cuda_timer_stop(&ms), kiln_error_generic);
    EXPECT_TRUE(contains(message(), "started in another CUDA context")) << message();
}

TEST_F(CUDAFake, TheInterfaceTimerIsTheEventTimer) {
    double ms = -1;
    EXPECT_EQ(cuda()->timer_stop(&ms), kiln_error_generic);
    EXPECT_TRUE(contains(message(), "kiln_cuda_timer_stop: no timer was started")) << message();
    get<FakeCudaSetLaunchMs>("fake_cuda_set_launch_ms")(0.25);
    TestBuffer b({16});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    std::string source = bundle({{kiln_cuda_image_ptx, 90, fake_ptx(90)}});
    ASSERT_EQ(cuda()->timer_start(), kiln_success) << message();
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(launch(source, {&b.b}, i), kiln_success) << message();
    ASSERT_EQ(cuda()->timer_stop(&ms), kiln_success) << message();
    EXPECT_EQ(ms, 0.75);
    EXPECT_EQ(counters().event_records, 2);
    // Nothing launched in between: no device time.
    ASSERT_EQ(cuda()->timer_start(), kiln_success) << message();
    ASSERT_EQ(cuda()->timer_stop(&ms), kiln_success) << message();
    EXPECT_EQ(ms, 0.0);
}

TEST_F(CUDAFake, SynchronizeWaitsForTheCurrentStream) {
    ASSERT_EQ(cuda()->device_limits(nullptr, nullptr), kiln_success);
    int before = counters().stream_syncs;
    ASSERT_EQ(cuda()->synchronize(), kiln_success);
    EXPECT_EQ(counters().stream_syncs, before + 1);
}

TEST_F(CUDAFake, ACUDATensorFromDLPackIsWrappedOnTheCUDAInterface) {
    uint64_t pointer = get<FakeCudaAlloc>("fake_cuda_alloc")(64);
    int64_t shape[2] = {2, 8};
    DLTensor t = {};
    t.data = reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
    t.device = {kDLCUDA, 0};
    t.ndim = 2;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    kiln_buffer_t b;
    kiln_dimension_t dims[2];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t, &b, dims, 2), kiln_success) << message();
    EXPECT_EQ(b.device, pointer);
    EXPECT_EQ(b.device_interface, cuda());
    EXPECT_EQ(b.flags, uint64_t(kiln_buffer_flag_device_dirty | kiln_buffer_flag_device_not_owned));
    // Its data comes back to the host through the interface.
    std::vector<float> host(16, 0.0f);
    reinterpret_cast<float *>(static_cast<uintptr_t>(pointer))[9] = 9.25f;
    b.host = reinterpret_cast<uint8_t *>(host.data());
    ASSERT_EQ(kiln_buffer_copy_to_host(&b), kiln_success) << message();
    EXPECT_EQ(host[9], 9.25f);
    // And goes back to DLPack as a CUDA tensor.
    DLTensor back = {};
    int64_t back_shape[2], back_strides[2];
    ASSERT_EQ(kiln_buffer_to_dltensor(&b, &back, back_shape, back_strides, 2), kiln_success);
    EXPECT_EQ(back.device.device_type, kDLCUDA);
    EXPECT_EQ(back.data, t.data);
    // Freeing forgets it: the exporter owns the memory.
    ASSERT_EQ(kiln_buffer_device_free(&b), kiln_success);
    EXPECT_EQ(counters().frees, 0);
    // A tensor on another device than kiln's is rejected.
    t.device = {kDLCUDA, 1};
    EXPECT_EQ(kiln_buffer_from_dltensor(&t, &b, dims, 2), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_from_dltensor: the CUDA tensor is on device 1; kiln uses CUDA "
                 "device 0 (KILN_CUDA_DEVICE)");
}

TEST_F(CUDAFake, ABufferKilnAllocatedGoesToDLPackAsACUDATensor) {
    TestBuffer b({4, 2});
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, cuda()), kiln_success) << message();
    DLTensor t = {};
    int64_t shape[2], strides[2];
    ASSERT_EQ(kiln_buffer_to_dltensor(&b.b, &t, shape, strides, 2), kiln_success) << message();
    EXPECT_EQ(t.device.device_type, kDLCUDA);
    EXPECT_EQ(t.device.device_id, 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data), b.b.device);
    EXPECT_EQ(shape[0], 2);
    EXPECT_EQ(shape[1], 4);
}

/* ---- NVRTC ---------------------------------------------------------------------------------- */

const char add_source[] = "extern \"C\" __global__ void add(const float *a, const float *b,\n"
                          "                                  float *c, int n) {\n"
                          "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                          "    if (i < n) c[i] = a[i] + b[i];\n"
                          "}\n";

class CUDACompile : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/kiln_cuda_compile_XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir = pattern;
        const char *old = std::getenv("KILN_CACHE_DIR");
        previous = old ? old : "";
        setenv("KILN_CACHE_DIR", dir.c_str(), 1);
        void *probe = nullptr;
        size_t size = 0;
        int code = kiln_cuda_compile(add_source, sizeof(add_source) - 1, 90, 0, &probe, &size);
        std::free(probe);
        if (code == kiln_error_no_device) GTEST_SKIP() << "no NVRTC: " << message();
        ASSERT_EQ(code, kiln_success) << message();
        fs::remove_all(dir + "/cuda");
    }
    void TearDown() override {
        if (previous.empty())
            unsetenv("KILN_CACHE_DIR");
        else
            setenv("KILN_CACHE_DIR", previous.c_str(), 1);
        std::error_code ignored;
        fs::remove_all(dir, ignored);
    }
    std::vector<fs::path> cache_files() {
        std::vector<fs::path> files;
        std::error_code ignored;
        for (const auto &e : fs::directory_iterator(dir + "/cuda", ignored))
            files.push_back(e.path());
        return files;
    }
    std::string dir, previous;
};

std::string run_command(const std::string &command, int *status) {
    std::string output;
    FILE *pipe = popen((command + " 2>&1").c_str(), "r");
    if (!pipe) {
        *status = -1;
        return "popen failed";
    }
    char line[512];
    while (fgets(line, sizeof(line), pipe))
        output += line;
    *status = pclose(pipe);
    return output;
}

TEST_F(CUDACompile, PTXForSm90TargetsSm90AndAssemblesWithPtxas) {
    void *image = nullptr;
    size_t size = 0;
    ASSERT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 90, 0, &image, &size),
              kiln_success)
        << message();
    std::string ptx(static_cast<const char *>(image), size);
    std::free(image);
    ASSERT_GT(size, 0u);
    EXPECT_EQ(ptx.back(), '\0'); // NUL-terminated for cuModuleLoadData
    EXPECT_TRUE(contains(ptx, ".target sm_90")) << ptx.substr(0, 300);
    EXPECT_TRUE(contains(ptx, ".entry add(")) << ptx.substr(0, 600);
    // kiln's options: IEEE rounding stated on the add, which is never contracted into an fma.
    EXPECT_TRUE(contains(ptx, "add.rn.f32")) << ptx;
#ifdef KILN_TEST_CUDA_BIN_DIR
    std::string ptxas = std::string(KILN_TEST_CUDA_BIN_DIR) + "/ptxas";
    if (!fs::exists(ptxas)) GTEST_SKIP() << "no ptxas at " << ptxas << " to assemble the PTX";
    std::string file = dir + "/add.ptx";
    std::ofstream(file) << ptx.c_str();
    int status = 0;
    std::string out =
        run_command(ptxas + " -arch=sm_90 " + file + " -o " + dir + "/add.cubin", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_TRUE(fs::exists(dir + "/add.cubin"));
#else
    GTEST_SKIP() << "built without the CUDA toolkit: no ptxas to assemble the PTX";
#endif
}

TEST_F(CUDACompile, ACubinIsAnELFImage) {
    void *image = nullptr;
    size_t size = 0;
    ASSERT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 90, 1, &image, &size),
              kiln_success)
        << message();
    ASSERT_GT(size, 4u);
    EXPECT_EQ(std::memcmp(image,
                          "\x7f"
                          "ELF",
                          4),
              0);
    std::free(image);
}

TEST_F(CUDACompile, TheDiskCacheServesASecondCall) {
    void *first = nullptr;
    size_t first_size = 0;
    ASSERT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 90, 0, &first, &first_size),
              kiln_success)
        << message();
    std::string first_bytes(static_cast<const char *>(first), first_size);
    std::free(first);
    std::vector<fs::path> files = cache_files();
    ASSERT_EQ(files.size(), 1u) << "one cache file, no temporary left behind";
    EXPECT_EQ(files[0].extension(), ".ptx");
    EXPECT_EQ(fs::file_size(files[0]), first_size);
    // The same call returns the same bytes; to prove they come from the file, change it.
    void *second = nullptr;
    size_t second_size = 0;
    ASSERT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 90, 0, &second, &second_size),
              kiln_success);
    EXPECT_EQ(std::string(static_cast<const char *>(second), second_size), first_bytes);
    std::free(second);
    std::string marked = first_bytes;
    marked.replace(0, 10, "// cached ");
    std::ofstream(files[0], std::ios::binary) << marked;
    ASSERT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 90, 0, &second, &second_size),
              kiln_success);
    EXPECT_EQ(std::string(static_cast<const char *>(second), second_size), marked);
    std::free(second);
    // Another architecture or kind is another entry.
    ASSERT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 80, 0, &second, &second_size),
              kiln_success);
    std::free(second);
    EXPECT_EQ(cache_files().size(), 2u);
}

TEST_F(CUDACompile, AnUnwritableCacheIsSkipped) {
    setenv("KILN_CACHE_DIR", "/proc/kiln-cannot-write-here", 1);
    void *image = nullptr;
    size_t size = 0;
    ASSERT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 90, 0, &image, &size),
              kiln_success)
        << message();
    std::free(image);
}

TEST_F(CUDACompile, ASyntaxErrorQuotesTheBadLine) {
    const char bad[] = "extern \"C\" __global__ void f(float *p) {\n"
                       "    p[0] = 1.0f\n"
                       "    p[1] = 2.0f;\n"
                       "}\n";
    void *image = nullptr;
    size_t size = 0;
    EXPECT_EQ(kiln_cuda_compile(bad, sizeof(bad) - 1, 90, 0, &image, &size),
              kiln_error_device_compile);
    EXPECT_EQ(image, nullptr);
    std::string m = message();
    EXPECT_TRUE(contains(m, "cuda: nvrtc could not compile the kernel source for compute_90 "
                            "(NVRTC_ERROR_COMPILATION)"))
        << m;
    EXPECT_TRUE(contains(m, "kiln.cu:3:     p[1] = 2.0f;")) << m;
    EXPECT_TRUE(contains(m, "error")) << m;
    EXPECT_TRUE(cache_files().empty());
}

TEST_F(CUDACompile, ABadArchitectureIsAnError) {
    void *image = nullptr;
    size_t size = 0;
    EXPECT_EQ(kiln_cuda_compile(add_source, sizeof(add_source) - 1, 9, 0, &image, &size),
              kiln_error_generic);
    EXPECT_TRUE(contains(message(), "architecture 9 is not a compute capability")) << message();
}

/* ---- A real GPU ----------------------------------------------------------------------------- */

TEST(CUDAGPU, AddsTwoVectorsOnARealDevice) {
    DriverOverride driver(nullptr); // libcuda.so.1 itself
    const kiln_device_interface_t *iface = kiln_device_interface(kiln_gpu_api_cuda);
    if (!iface) GTEST_SKIP() << "no CUDA GPU: " << message();
    const int n = 1000;
    TestBuffer a({n}), b({n}), c({n});
    for (int i = 0; i < n; i++) {
        a.data[size_t(i)] = float(i);
        b.data[size_t(i)] = 0.5f * float(i);
    }
    ASSERT_EQ(kiln_buffer_copy_to_device(&a.b, iface), kiln_success) << message();
    ASSERT_EQ(kiln_buffer_copy_to_device(&b.b, iface), kiln_success) << message();
    ASSERT_EQ(kiln_buffer_prepare_output(&c.b, iface), kiln_success) << message();
    kiln_buffer_t *pa = &a.b, *pb = &b.b, *pc = &c.b;
    int32_t count = n;
    void *args[4] = {&pa, &pb, &pc, &count};
    size_t sizes[4] = {sizeof(pa), sizeof(pb), sizeof(pc), sizeof(count)};
    int8_t is_buffer[4] = {1, 1, 1, 0};
    int32_t blocks[3] = {(n + 127) / 128, 1, 1}, threads[3] = {128, 1, 1};
    ASSERT_EQ(kiln_cuda_timer_start(), kiln_success) << message();
    ASSERT_EQ(kiln_device_launch(iface, add_source, sizeof(add_source) - 1, "add", blocks, threads,
                                 4, args, sizes, is_buffer),
              kiln_success)
        << message();
    float ms = -1;
    ASSERT_EQ(kiln_cuda_timer_stop(&ms), kiln_success) << message();
    EXPECT_GE(ms, 0.0f);
    kiln_buffer_set_device_dirty(&c.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&c.b), kiln_success) << message();
    for (int i = 0; i < n; i++)
        ASSERT_EQ(c.data[size_t(i)], 1.5f * float(i)) << "element " << i;
    char text[256];
    ASSERT_EQ(iface->device_description(text, sizeof(text)), kiln_success);
    EXPECT_TRUE(contains(text, "; sm_")) << text;
    ASSERT_EQ(kiln_buffer_device_free(&a.b), kiln_success);
    ASSERT_EQ(kiln_buffer_device_free(&b.b), kiln_success);
    ASSERT_EQ(kiln_buffer_device_free(&c.b), kiln_success);
}

} // namespace
