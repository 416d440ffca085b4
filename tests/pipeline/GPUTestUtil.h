// Shared by the GPU pipeline tests: the OpenCL target on this machine's OpenCL implementation
// (PoCL, a CPU), a skip with the reason where there is none, and the CUDA check that every
// kernel a test runs also compiles as CUDA C with NVRTC and assembles with ptxas for sm_90.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "codegen/CodeGenDevice.h"
#include "codegen/NVRTC.h"
#include "kiln.h"
#include "runtime/kiln_runtime.h"

namespace kiln {

/// Points PoCL's kernel cache at a fresh folder of this process, so runs neither share nor grow
/// a cache.
inline void use_private_pocl_cache() {
    static bool done = [] {
        char dir[] = "/tmp/kiln_pocl_cache_XXXXXX";
        if (mkdtemp(dir)) setenv("POCL_CACHE_DIR", dir, 1);
        return true;
    }();
    (void)done;
}

/// Empty when an OpenCL device can run kernels here, else why not.
inline std::string opencl_unavailable() {
    use_private_pocl_cache();
    if (kiln_device_interface(int(GpuApi::OpenCL)) == nullptr) return kiln_last_error_message();
    int64_t threads = 0, shared = 0;
    const kiln_device_interface_t *iface = kiln_device_interface(int(GpuApi::OpenCL));
    if (iface->device_limits(&threads, &shared) != 0) return kiln_last_error_message();
    return "";
}

/// Empty when a device of api can run kernels here, else why not.
inline std::string gpu_unavailable(GpuApi api) {
    if (api == GpuApi::OpenCL) return opencl_unavailable();
    const kiln_device_interface_t *iface = kiln_device_interface(int(api));
    if (!iface) return kiln_last_error_message();
    int64_t threads = 0, shared = 0;
    if (iface->device_limits(&threads, &shared) != 0) return kiln_last_error_message();
    return "";
}

/// What a skipped test prints for api: "CUDA" or "OpenCL".
inline const char *gpu_display_name(GpuApi api) {
    return api == GpuApi::CUDA ? "CUDA" : api == GpuApi::OpenCL ? "OpenCL" : "GPU";
}

/// Skips the test, with the reason, where no device of api can run kernels.
#define KILN_REQUIRE_GPU(api)                                                                      \
    do {                                                                                           \
        const ::kiln::GpuApi required_api = (api);                                                 \
        std::string why = ::kiln::gpu_unavailable(required_api);                                   \
        if (!why.empty())                                                                          \
            GTEST_SKIP() << "no " << ::kiln::gpu_display_name(required_api)                        \
                         << " device to run kernels on: " << why;                                  \
    } while (0)

#define KILN_REQUIRE_OPENCL() KILN_REQUIRE_GPU(::kiln::GpuApi::OpenCL)

/// Skips a test under AddressSanitizer whose process, after the test passed, makes
/// LeakSanitizer's stop-the-world tracer crash at exit ("Tracer caught signal 11") while PoCL's
/// worker threads wind down; the release run covers the test.
#if defined(__SANITIZE_ADDRESS__)
#define KILN_SKIP_UNDER_LSAN_POCL_EXIT_CRASH()                                                     \
    GTEST_SKIP() << "under the sanitizers LeakSanitizer's tracer crashes at the exit of this "     \
                    "PoCL process (the test passes in the release run)"
#else
#define KILN_SKIP_UNDER_LSAN_POCL_EXIT_CRASH() (void)0
#endif

inline Target opencl_target() {
    return Target::host().with_gpu(GpuApi::OpenCL);
}

/// The ptxas of the CUDA toolkit, or empty.
inline std::string find_ptxas() {
#ifdef KILN_TEST_PTXAS
    if (access(KILN_TEST_PTXAS, X_OK) == 0) return KILN_TEST_PTXAS;
#endif
    for (const char *p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"}) {
        if (access(p, X_OK) == 0) return p;
    }
    return "";
}

/// Prints the pipeline's kernels as CUDA C, compiles them with NVRTC for sm_90 and assembles the
/// PTX with ptxas, failing the test on any error. Prints why it checked nothing where the toolkit
/// is missing (the OpenCL run of the same kernels is the test's main check).
inline void expect_valid_cuda(const Pipeline &p) {
    LoweredFunc f = p.lower();
    ASSERT_FALSE(f.kernels.empty()) << "the pipeline has no GPU kernels";
    std::string why;
    std::string ptxas = find_ptxas();
    if (!nvrtc_available(&why) || ptxas.empty()) {
        std::printf("[ note     ] CUDA check skipped: %s\n",
                    ptxas.empty() ? "no ptxas in the CUDA toolkit" : why.c_str());
        return;
    }
    std::string source = print_device_source(f.kernels, GpuApi::CUDA);
    std::string ptx;
    try {
        ptx = compile_cuda_to_ptx(source, "sm_90", f.name + ".cu");
    } catch (const CompileError &e) {
        FAIL() << "NVRTC rejected the CUDA source: " << e.what() << "\n" << source;
    }
    char path[] = "/tmp/kiln_ptx_XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    std::ofstream(path) << ptx;
    std::string cmd = ptxas + " -arch=sm_90 " + path + " -o /dev/null 2>&1";
    FILE *pipe = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (pipe && fgets(buf, sizeof buf, pipe))
        out += buf;
    int status = pipe ? pclose(pipe) : -1;
    std::remove(path);
    EXPECT_EQ(status, 0) << "ptxas rejected the PTX of " << f.name << ":\n"
                         << out << "\n"
                         << source;
}

} // namespace kiln
