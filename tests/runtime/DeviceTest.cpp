// The dirty-bit protocol and launch checks of runtime/kiln_device.cpp, against a fake device whose
// "device memory" is malloc'd host memory and whose calls are counted.
#include "runtime/kiln_runtime.h"

#include <cstdio>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct FakeDevice {
    int mallocs = 0, frees = 0, to_device = 0, to_host = 0, runs = 0, syncs = 0;
    bool fail_copies = false;
    // What the last run received.
    std::string kernel;
    int32_t blocks[3] = {}, threads[3] = {};
    int32_t num_args = -1;
};

FakeDevice fake;

uint8_t *device_memory(const kiln_buffer_t *b) {
    return reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(b->device)); // NOLINT
}

const kiln_device_interface_t *fake_interface();
const kiln_device_interface_t *other_interface();

int fake_malloc(kiln_buffer_t *b) {
    fake.mallocs++;
    size_t bytes = kiln_buffer_size_in_bytes(b);
    void *memory = std::calloc(bytes ? bytes : 1, 1);
    b->device = reinterpret_cast<uintptr_t>(memory);
    b->device_interface = fake_interface();
    return kiln_success;
}

int other_malloc(kiln_buffer_t *b) {
    int code = fake_malloc(b);
    b->device_interface = other_interface();
    return code;
}

int fake_free(kiln_buffer_t *b) {
    fake.frees++;
    std::free(device_memory(b));
    b->device = 0;
    b->device_interface = nullptr;
    kiln_buffer_set_device_dirty(b, 0);
    return kiln_success;
}

int fake_copy_to_device(kiln_buffer_t *b) {
    if (fake.fail_copies) return kiln_error(kiln_error_device_run, "fake copy failed");
    fake.to_device++;
    std::memcpy(device_memory(b), b->host, kiln_buffer_size_in_bytes(b));
    return kiln_success;
}

int fake_copy_to_host(kiln_buffer_t *b) {
    fake.to_host++;
    std::memcpy(b->host, device_memory(b), kiln_buffer_size_in_bytes(b));
    return kiln_success;
}

int fake_run(const char *, size_t, const char *kernel_name, const int32_t blocks[3],
             const int32_t threads[3], int32_t num_args, void **, const size_t *, const int8_t *) {
    fake.runs++;
    fake.kernel = kernel_name;
    for (int i = 0; i < 3; i++) {
        fake.blocks[i] = blocks[i];
        fake.threads[i] = threads[i];
    }
    fake.num_args = num_args;
    return kiln_success;
}

int fake_synchronize() {
    fake.syncs++;
    return kiln_success;
}

int fake_release() {
    return kiln_success;
}

int fake_description(char *out, size_t size) {
    std::snprintf(out, size, "fake device; 1.0; driver 1");
    return kiln_success;
}

int fake_limits(int64_t *threads, int64_t *shared) {
    if (threads) *threads = 1024;
    if (shared) *shared = int64_t(48) * 1024;
    return kiln_success;
}

int fake_timer_start() {
    return kiln_success;
}

int fake_timer_stop(double *ms) {
    *ms = 0;
    return kiln_success;
}

const kiln_device_interface_t fake_table = {
    "fake",           fake_malloc,      fake_free,    fake_copy_to_device, fake_copy_to_host,
    fake_run,         fake_synchronize, fake_release, fake_limits,         fake_description,
    fake_timer_start, fake_timer_stop,
};
const kiln_device_interface_t other_table = {
    "other",           other_malloc,     fake_free,        fake_copy_to_device,
    fake_copy_to_host, fake_run,         fake_synchronize, fake_release,
    fake_limits,       fake_description, fake_timer_start, fake_timer_stop,
};

const kiln_device_interface_t *fake_interface() {
    return &fake_table;
}

const kiln_device_interface_t *other_interface() {
    return &other_table;
}

// A 2-D float buffer with mins (3, -1) and a padded row (stride 6) over its own memory.
struct HostBuffer {
    std::vector<float> data = std::vector<float>(18);
    kiln_dimension_t dims[2] = {{3, 5, 1, 0}, {-1, 3, 6, 0}};
    kiln_buffer_t b{};
    HostBuffer() {
        for (size_t i = 0; i < data.size(); i++)
            data[i] = float(i);
        b.host = reinterpret_cast<uint8_t *>(data.data());
        b.type = {kiln_type_float, 32, 1};
        b.dimensions = 2;
        b.dim = dims;
    }
    ~HostBuffer() { kiln_buffer_device_free(&b); }
    float device_value(size_t i) const {
        float v;
        std::memcpy(&v, device_memory(&b) + i * sizeof(float), sizeof(float));
        return v;
    }
};

struct Counts {
    int64_t to_device, to_host;
};

Counts counts() {
    Counts c;
    kiln_device_copy_counts(&c.to_device, &c.to_host);
    return c;
}

class Device : public ::testing::Test {
protected:
    void SetUp() override {
        fake = FakeDevice{};
        kiln_device_reset_copy_counts();
    }
};

} // namespace

TEST_F(Device, TheFirstCopyToDeviceAllocatesAndCopiesTheSpannedBytes) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    EXPECT_EQ(h.b.device_interface, fake_interface());
    EXPECT_NE(h.b.device, 0u);
    EXPECT_EQ(fake.mallocs, 1);
    EXPECT_EQ(counts().to_device, 1);
    EXPECT_EQ(counts().to_host, 0);
    // 2 full rows of 6 and a last row of 5: the device copy starts at the element at the mins.
    EXPECT_EQ(kiln_buffer_size_in_bytes(&h.b), 17u * 4u);
    for (size_t i = 0; i < 17; i++)
        EXPECT_EQ(h.device_value(i), float(i));
}

TEST_F(Device, ACleanBufferIsNotCopiedAgain) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    ASSERT_EQ(kiln_buffer_copy_to_host(&h.b), kiln_success);
    EXPECT_EQ(fake.mallocs, 1);
    EXPECT_EQ(counts().to_device, 1);
    EXPECT_EQ(counts().to_host, 0);
}

TEST_F(Device, AHostDirtyBufferIsCopiedAgainAndBecomesClean) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    h.data[2] = 100.f;
    kiln_buffer_set_host_dirty(&h.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    EXPECT_EQ(counts().to_device, 2);
    EXPECT_EQ(h.device_value(2), 100.f);
    EXPECT_EQ(kiln_buffer_host_dirty(&h.b), 0);
    EXPECT_EQ(fake.mallocs, 1);
}

TEST_F(Device, ADeviceDirtyBufferIsCopiedBackOnce) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    float changed = -7.f;
    std::memcpy(device_memory(&h.b) + 4 * sizeof(float), &changed, sizeof(float));
    kiln_buffer_set_device_dirty(&h.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_host(&h.b), kiln_success);
    EXPECT_EQ(h.data[4], -7.f);
    EXPECT_EQ(kiln_buffer_device_dirty(&h.b), 0);
    ASSERT_EQ(kiln_buffer_copy_to_host(&h.b), kiln_success);
    EXPECT_EQ(counts().to_host, 1);
    EXPECT_EQ(fake.to_host, 1);
}

TEST_F(Device, ADeviceDirtyBufferIsNotCopiedToTheDevice) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    kiln_buffer_set_device_dirty(&h.b, 1);
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    EXPECT_EQ(counts().to_device, 1);
    EXPECT_EQ(kiln_buffer_device_dirty(&h.b), 1);
}

TEST_F(Device, BothCopiesChangedIsAnError) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    kiln_buffer_set_host_dirty(&h.b, 1);
    kiln_buffer_set_device_dirty(&h.b, 1);
    EXPECT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_error_generic);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_copy_to_device: both the host and the device copy of the buffer "
                 "changed (host_dirty and device_dirty are both set on 'fake'); one of them would "
                 "be lost");
    EXPECT_EQ(kiln_buffer_copy_to_host(&h.b), kiln_error_generic);
    EXPECT_NE(std::string(kiln_last_error_message()).find("kiln_buffer_copy_to_host: both"),
              std::string::npos);
    EXPECT_EQ(counts().to_device, 1);
    EXPECT_EQ(counts().to_host, 0);
}

TEST_F(Device, ADeviceCopyOnAnotherInterfaceIsAnError) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_device_malloc(&h.b, fake_interface()), kiln_success);
    ASSERT_EQ(kiln_buffer_device_malloc(&h.b, fake_interface()), kiln_success);
    EXPECT_EQ(fake.mallocs, 1);
    EXPECT_EQ(kiln_buffer_device_malloc(&h.b, other_interface()), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_device_malloc: the buffer already has a device copy on 'fake', not "
                 "on 'other'; free it first (kiln_buffer_copy_to_host, then "
                 "kiln_buffer_device_free)");
    EXPECT_EQ(kiln_buffer_copy_to_device(&h.b, other_interface()), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_copy_to_device: the buffer has a device copy on 'fake', not on "
                 "'other'; copy it to the host and free it first");
}

TEST_F(Device, DeviceMallocAloneCopiesNothing) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_device_malloc(&h.b, fake_interface()), kiln_success);
    EXPECT_EQ(fake.to_device, 0);
    EXPECT_EQ(counts().to_device, 0);
}

TEST_F(Device, DeviceFreeCopiesNothingAndClearsTheDeviceState) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    kiln_buffer_set_device_dirty(&h.b, 1);
    ASSERT_EQ(kiln_buffer_device_free(&h.b), kiln_success);
    EXPECT_EQ(h.b.device, 0u);
    EXPECT_EQ(h.b.device_interface, nullptr);
    EXPECT_EQ(kiln_buffer_device_dirty(&h.b), 0);
    EXPECT_EQ(fake.frees, 1);
    EXPECT_EQ(counts().to_host, 0);
    ASSERT_EQ(kiln_buffer_device_free(&h.b), kiln_success);
    EXPECT_EQ(fake.frees, 1);
}

TEST_F(Device, AHandleWithoutAnInterfaceIsForgottenByDeviceFree) {
    HostBuffer h;
    h.b.device = 0x1234;
    kiln_buffer_set_device_dirty(&h.b, 1);
    ASSERT_EQ(kiln_buffer_device_free(&h.b), kiln_success);
    EXPECT_EQ(h.b.device, 0u);
    EXPECT_EQ(kiln_buffer_device_dirty(&h.b), 0);
}

TEST_F(Device, AFailedFirstCopyLeavesNoDeviceCopy) {
    HostBuffer h;
    fake.fail_copies = true;
    EXPECT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_error_device_run);
    EXPECT_STREQ(kiln_last_error_message(), "fake copy failed");
    EXPECT_EQ(h.b.device, 0u);
    EXPECT_EQ(fake.frees, 1);
    EXPECT_EQ(counts().to_device, 0);
}

TEST_F(Device, CopyingBackWithoutHostMemoryIsAnError) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    kiln_buffer_set_device_dirty(&h.b, 1);
    uint8_t *host = h.b.host;
    h.b.host = nullptr;
    EXPECT_EQ(kiln_buffer_copy_to_host(&h.b), kiln_error_buffer_argument_null);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_copy_to_host: the buffer has no host memory to copy into (host is "
                 "null); point host at 68 bytes first");
    h.b.host = host;
}

TEST_F(Device, SyncWaitsOnTheBuffersInterface) {
    HostBuffer h;
    EXPECT_EQ(kiln_buffer_device_sync(&h.b), kiln_success);
    EXPECT_EQ(fake.syncs, 0);
    ASSERT_EQ(kiln_buffer_device_malloc(&h.b, fake_interface()), kiln_success);
    EXPECT_EQ(kiln_buffer_device_sync(&h.b), kiln_success);
    EXPECT_EQ(fake.syncs, 1);
}

TEST_F(Device, DirtyBitsAreSetAndClearedIndependently) {
    kiln_buffer_t b{};
    kiln_buffer_set_host_dirty(&b, 1);
    EXPECT_EQ(b.flags, uint64_t(kiln_buffer_flag_host_dirty));
    kiln_buffer_set_device_dirty(&b, 5);
    EXPECT_EQ(kiln_buffer_host_dirty(&b), 1);
    EXPECT_EQ(kiln_buffer_device_dirty(&b), 1);
    kiln_buffer_set_host_dirty(&b, 0);
    EXPECT_EQ(b.flags, uint64_t(kiln_buffer_flag_device_dirty));
    EXPECT_EQ(kiln_buffer_host_dirty(nullptr), 0);
}

namespace {

// A launch of kernel "k" with one buffer argument and one int.
struct Launch {
    kiln_buffer_t *buffer;
    int32_t n = 5;
    void *args[2];
    size_t sizes[2] = {sizeof(kiln_buffer_t *), sizeof(int32_t)};
    int8_t is_buffer[2] = {1, 0};
    int32_t blocks[3] = {4, 2, 1};
    int32_t threads[3] = {32, 1, 1};
    explicit Launch(kiln_buffer_t *b) : buffer(b) {
        args[0] = &buffer;
        args[1] = &n;
    }
    int run(const kiln_device_interface_t *iface) {
        static const char source[] = "kernel source";
        return kiln_device_launch(iface, source, sizeof(source) - 1, "k", blocks, threads, 2, args,
                                  sizes, is_buffer);
    }
};

} // namespace

TEST_F(Device, ALaunchPassesItsArgumentsToRun) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    Launch launch(&h.b);
    ASSERT_EQ(launch.run(fake_interface()), kiln_success);
    EXPECT_EQ(fake.runs, 1);
    EXPECT_EQ(fake.kernel, "k");
    EXPECT_EQ(fake.blocks[0], 4);
    EXPECT_EQ(fake.blocks[1], 2);
    EXPECT_EQ(fake.threads[0], 32);
    EXPECT_EQ(fake.num_args, 2);
}

TEST_F(Device, AZeroBlockLaunchRunsNothing) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, fake_interface()), kiln_success);
    Launch launch(&h.b);
    launch.blocks[1] = 0;
    EXPECT_EQ(launch.run(fake_interface()), kiln_success);
    EXPECT_EQ(fake.runs, 0);
}

TEST_F(Device, ALaunchWithABufferWithoutADeviceCopyNamesTheArgument) {
    HostBuffer h;
    Launch launch(&h.b);
    EXPECT_EQ(launch.run(fake_interface()), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_device_launch: kernel 'k' argument 0 is a buffer without a device copy; "
                 "call kiln_buffer_copy_to_device (or kiln_buffer_device_malloc) with the 'fake' "
                 "interface first");
    EXPECT_EQ(fake.runs, 0);
}

TEST_F(Device, ALaunchWithABufferOnAnotherInterfaceIsAnError) {
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_copy_to_device(&h.b, other_interface()), kiln_success);
    Launch launch(&h.b);
    EXPECT_EQ(launch.run(fake_interface()), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_device_launch: kernel 'k' argument 0 is a buffer whose device copy is on "
                 "'other', but the kernel runs on 'fake'");
}

TEST_F(Device, ALaunchWithANullBufferOrBadBlocksIsAnError) {
    Launch launch(nullptr);
    EXPECT_EQ(launch.run(fake_interface()), kiln_error_buffer_argument_null);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_device_launch: kernel 'k' argument 0 is a null "
                                            "buffer");
    HostBuffer h;
    ASSERT_EQ(kiln_buffer_device_malloc(&h.b, fake_interface()), kiln_success);
    Launch bad(&h.b);
    bad.threads[2] = 0;
    EXPECT_EQ(bad.run(fake_interface()), kiln_error_internal);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_device_launch: kernel 'k': threads[2] is 0; every block size must be >= 1");
    bad.threads[2] = 1;
    bad.blocks[0] = -1;
    EXPECT_EQ(bad.run(fake_interface()), kiln_error_internal);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_device_launch: kernel 'k': blocks[0] is -1; block counts must be >= 0");
    EXPECT_EQ(fake.runs, 0);
}

TEST_F(Device, AWrappedAllocationIsA1DByteBufferFreedByRelease) {
    kiln_memory_stats_t before;
    kiln_get_memory_stats(&before);
    std::vector<uint8_t> memory(100, 7);
    kiln_buffer_t *b = kiln_device_buffer_wrap(memory.data(), 100);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->host, memory.data());
    EXPECT_EQ(b->dimensions, 1);
    EXPECT_EQ(b->dim[0].min, 0);
    EXPECT_EQ(b->dim[0].extent, 100);
    EXPECT_EQ(b->dim[0].stride, 1);
    EXPECT_EQ(b->type.code, kiln_type_uint);
    EXPECT_EQ(b->type.bits, 8);
    EXPECT_EQ(b->type.lanes, 1);
    EXPECT_EQ(b->flags, 0u);
    EXPECT_EQ(b->device, 0u);
    EXPECT_EQ(kiln_buffer_size_in_bytes(b), 100u);
    ASSERT_EQ(kiln_buffer_copy_to_device(b, fake_interface()), kiln_success);
    EXPECT_EQ(device_memory(b)[99], 7);
    kiln_device_buffer_release(b);
    EXPECT_EQ(fake.frees, 1);
    kiln_memory_stats_t after;
    kiln_get_memory_stats(&after);
    EXPECT_EQ(after.bytes_live, before.bytes_live);
    kiln_device_buffer_release(nullptr);
}

TEST_F(Device, AWrappedAllocationNeedsAByteCountThatFits) {
    EXPECT_EQ(kiln_device_buffer_wrap(nullptr, -1), nullptr);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_device_buffer_wrap: -1 bytes; a wrapped allocation holds 0 to 2147483647 "
                 "bytes");
    kiln_buffer_t *empty = kiln_device_buffer_wrap(nullptr, 0);
    ASSERT_NE(empty, nullptr);
    EXPECT_EQ(kiln_buffer_size_in_bytes(empty), 0u);
    kiln_device_buffer_release(empty);
}

TEST_F(Device, ANullInterfaceIsAnError) {
    HostBuffer h;
    EXPECT_EQ(kiln_buffer_copy_to_device(&h.b, nullptr), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_copy_to_device: the device interface is null");
}

TEST(DeviceErrors, NewCodesFollowTheExistingOnes) {
    EXPECT_EQ(kiln_error_no_device, -12);
    EXPECT_EQ(kiln_error_device_compile, -13);
    EXPECT_EQ(kiln_error_device_run, -14);
    EXPECT_EQ(kiln_error_device_memory, -15);
    EXPECT_EQ(kiln_error_device_unavailable, -9);
}
