// The controls of the fake CUDA driver (FakeCudaDriver.cpp), a shared library that implements the
// subset of the driver API kiln's CUDA interface uses on host memory, so the interface is tested
// without a GPU. A test loads it with KILN_CUDA_DRIVER=<path> and dlopens the same path (the same
// handle) to configure and inspect it through the functions below, resolved with dlsym.
#pragma once

#include <cstddef>
#include <cstdint>

struct FakeCudaCounters {
    int inits;
    int primary_retains, primary_releases;
    int stream_creates, stream_destroys, stream_syncs;
    int allocs, frees; // cuMemAlloc / cuMemFree (fake_cuda_alloc is not counted)
    int copies_to_device, copies_to_host;
    int module_loads, module_unloads, function_lookups;
    int launches;
    int event_records;
};

constexpr int fake_cuda_max_args = 16;

struct FakeCudaLaunch {
    char name[256];
    unsigned grid[3], block[3], shared_bytes;
    void *stream;  // the CUstream it was launched on
    void *context; // the context current on the launching thread
    int arg_count; // as set by fake_cuda_set_arg_sizes
    unsigned char args[fake_cuda_max_args][16];
};

extern "C" {
/// Forgets everything (memory included) and restores the defaults: 1 device "NVIDIA H200" of
/// compute capability 9.0, every call succeeds. Call only after kiln's release().
using FakeCudaReset = void (*)();
/// Devices and their compute capability.
using FakeCudaSetDevices = void (*)(int count, int major, int minor);
/// Results the calls of cuInit and cuLaunchKernel return from now on, and the next call of
/// cuModuleLoadData (0: success).
using FakeCudaSetResult = void (*)(int result);
/// How far each launch advances the device clock that events record (initially
/// $KILN_FAKE_CUDA_LAUNCH_MS, else 0).
using FakeCudaSetLaunchMs = void (*)(double ms);
/// The byte sizes of the kernel arguments cuLaunchKernel copies from kernelParams.
using FakeCudaSetArgSizes = void (*)(const size_t *sizes, int count);
using FakeCudaCountersFn = const FakeCudaCounters *(*)();
/// The last launch; false when there was none.
using FakeCudaLastLaunch = bool (*)(FakeCudaLaunch *out);
/// The bytes of the last image cuModuleLoadData got (up to its NUL); returns their count.
using FakeCudaLastImage = size_t (*)(char *out, size_t capacity);
/// The stream of the last copy.
using FakeCudaLastCopyStream = void *(*)();
/// A context of device 0 other than the primary one, and a stream in it.
using FakeCudaCreateContext = void *(*)();
using FakeCudaCreateStream = void *(*)(void *context);
/// Device memory that kiln did not allocate (freed by fake_cuda_reset).
using FakeCudaAlloc = uint64_t (*)(size_t bytes);
/// Device allocations not yet freed (those of fake_cuda_alloc included).
using FakeCudaLiveAllocations = int (*)();
}
