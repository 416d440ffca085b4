// Test-only device harness for the device code generator's tests: building DeviceKernels by
// hand, running printed OpenCL on the first OpenCL device (PoCL's CPU device here) through the
// OpenCL API directly (not kiln's runtime), and assembling PTX with ptxas.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "lang/IR.h"
#include "lang/IROperator.h"
#include "schedule/LoweredFunc.h"

#if KILN_TEST_OPENCL
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#endif

namespace kiln::test {

inline Expr gpu_block_id(int d) {
    return Call::make(Int(32), intrinsic::gpu_block_id, {Expr(d)}, Call::Intrinsic);
}
inline Expr gpu_thread_id(int d) {
    return Call::make(Int(32), intrinsic::gpu_thread_id, {Expr(d)}, Call::Intrinsic);
}
inline Stmt gpu_barrier() {
    return Evaluate::make(Call::make(Int(32), intrinsic::gpu_barrier, {}, Call::Intrinsic));
}
inline DeviceArgument buffer_argument(const std::string &name, Type t, bool written) {
    DeviceArgument a;
    a.name = name;
    a.is_buffer = true;
    a.type = t;
    a.read = !written;
    a.written = written;
    return a;
}
inline DeviceArgument scalar_argument(const std::string &name, Type t) {
    DeviceArgument a;
    a.name = name;
    a.type = t;
    return a;
}

/// A temporary folder, removed with its contents when the object dies.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string &prefix) {
        std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX"));
        std::vector<char> buf(pattern.begin(), pattern.end());
        buf.push_back('\0');
        path = mkdtemp(buf.data());
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

/// The ptxas to assemble PTX with: CMake's CUDA toolkit bin folder, else PATH; empty with
/// *why_not when there is none.
inline std::string find_ptxas(std::string *why_not) {
    std::vector<std::filesystem::path> candidates;
#ifdef KILN_TEST_CUDA_BIN_DIR
    candidates.push_back(std::filesystem::path(KILN_TEST_CUDA_BIN_DIR) / "ptxas");
#endif
    if (const char *path = std::getenv("PATH")) {
        std::string p = path;
        for (size_t start = 0; start <= p.size();) {
            size_t end = p.find(':', start);
            if (end == std::string::npos) end = p.size();
            if (end > start)
                candidates.push_back(std::filesystem::path(p.substr(start, end - start)) / "ptxas");
            start = end + 1;
        }
    }
    for (const auto &c : candidates) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(c, ec)) return c.string();
    }
    *why_not = "no ptxas in the CUDA toolkit's bin folder or on PATH";
    return "";
}

/// Assembles PTX for sm_90 with ptxas; false with its output in *log when it fails.
inline bool ptxas_assembles(const std::string &ptxas, const std::string &ptx, std::string *log) {
    TempDir dir("kiln_ptxas_");
    std::string file = (dir.path / "kernel.ptx").string();
    std::ofstream(file) << ptx;
    std::string command = "'" + ptxas + "' -arch=sm_90 '" + file + "' -o /dev/null 2>&1";
    FILE *pipe = popen(command.c_str(), "r");
    if (!pipe) {
        *log = "cannot run " + command;
        return false;
    }
    char buf[512];
    log->clear();
    while (size_t n = fread(buf, 1, sizeof(buf), pipe))
        log->append(buf, n);
    return pclose(pipe) == 0;
}

/// The source with line numbers, for failure messages.
inline std::string numbered(const std::string &source) {
    std::string out;
    int n = 1;
    size_t start = 0;
    while (start < source.size()) {
        size_t end = source.find('\n', start);
        if (end == std::string::npos) end = source.size();
        char prefix[16];
        std::snprintf(prefix, sizeof(prefix), "%4d | ", n++);
        out += prefix + source.substr(start, end - start) + "\n";
        start = end + 1;
    }
    return out;
}

#if KILN_TEST_OPENCL

/// One OpenCL device, context and queue for the whole test program, with POCL_CACHE_DIR pointing
/// at a fresh temporary folder.
class OpenCLRunner {
public:
    /// The shared runner, or null with *why_not when no OpenCL device is available.
    static OpenCLRunner *get(std::string *why_not) {
        static std::unique_ptr<OpenCLRunner> runner = make(&failure());
        if (!runner) *why_not = failure();
        return runner.get();
    }

    ~OpenCLRunner() {
        if (queue) clReleaseCommandQueue(queue);
        if (context) clReleaseContext(context);
    }

    /// A program built from source with the options kiln's semantics need; null with the build
    /// log in *error when it does not build.
    cl_program build(const std::string &source, std::string *error) {
        const char *text = source.c_str();
        cl_int err;
        cl_program p = clCreateProgramWithSource(context, 1, &text, nullptr, &err);
        if (err != CL_SUCCESS) {
            *error = "clCreateProgramWithSource: " + std::to_string(err);
            return nullptr;
        }
        err = clBuildProgram(p, 1, &device, "-cl-fp32-correctly-rounded-divide-sqrt", nullptr,
                             nullptr);
        if (err != CL_SUCCESS) {
            size_t size = 0;
            clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
            std::string log(size, '\0');
            clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
            *error = "clBuildProgram " + std::to_string(err) + ":\n" + log;
            clReleaseProgram(p);
            return nullptr;
        }
        return p;
    }

    /// A device buffer of `bytes` bytes, initialized from `data` when given.
    cl_mem buffer(size_t bytes, const void *data) {
        cl_int err;
        cl_mem m =
            clCreateBuffer(context, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 1), nullptr, &err);
        EXPECT_EQ(err, CL_SUCCESS) << "clCreateBuffer";
        if (data && bytes) {
            err = clEnqueueWriteBuffer(queue, m, CL_TRUE, 0, bytes, data, 0, nullptr, nullptr);
            EXPECT_EQ(err, CL_SUCCESS) << "clEnqueueWriteBuffer";
        }
        return m;
    }
    void read(cl_mem m, size_t bytes, void *out) {
        cl_int err = clEnqueueReadBuffer(queue, m, CL_TRUE, 0, bytes, out, 0, nullptr, nullptr);
        EXPECT_EQ(err, CL_SUCCESS) << "clEnqueueReadBuffer";
    }

    /// One kernel argument: a buffer or the bytes of a scalar.
    struct Arg {
        cl_mem buffer = nullptr;
        std::vector<uint8_t> bytes;
    };
    template <typename T>
    static Arg scalar(T v) {
        Arg a;
        a.bytes.resize(sizeof(T));
        std::memcpy(a.bytes.data(), &v, sizeof(T));
        return a;
    }
    static Arg buffer_arg(cl_mem m) {
        Arg a;
        a.buffer = m;
        return a;
    }

    /// Launches kernel `name` of p over `blocks` blocks of k.threads threads and waits; false
    /// with a message in *error on failure.
    bool launch(cl_program p, const DeviceKernel &k, const std::vector<int> &blocks,
                const std::vector<Arg> &args, std::string *error) {
        cl_int err;
        cl_kernel kernel = clCreateKernel(p, k.name.c_str(), &err);
        if (err != CL_SUCCESS) {
            *error = "clCreateKernel(" + k.name + "): " + std::to_string(err);
            return false;
        }
        for (size_t i = 0; i < args.size() && err == CL_SUCCESS; i++) {
            if (args[i].buffer) {
                err = clSetKernelArg(kernel, cl_uint(i), sizeof(cl_mem), &args[i].buffer);
            } else {
                err =
                    clSetKernelArg(kernel, cl_uint(i), args[i].bytes.size(), args[i].bytes.data());
            }
            if (err != CL_SUCCESS)
                *error = "clSetKernelArg " + std::to_string(i) + ": " + std::to_string(err);
        }
        size_t global[3], local[3];
        for (int d = 0; d < 3; d++) {
            local[d] = size_t(k.threads[d]);
            global[d] = local[d] * size_t(d < int(blocks.size()) ? blocks[d] : 1);
        }
        if (err == CL_SUCCESS) {
            err = clEnqueueNDRangeKernel(queue, kernel, 3, nullptr, global, local, 0, nullptr,
                                         nullptr);
            if (err != CL_SUCCESS) *error = "clEnqueueNDRangeKernel: " + std::to_string(err);
        }
        if (err == CL_SUCCESS) {
            err = clFinish(queue);
            if (err != CL_SUCCESS) *error = "clFinish: " + std::to_string(err);
        }
        clReleaseKernel(kernel);
        return err == CL_SUCCESS;
    }

private:
    cl_device_id device = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
    std::unique_ptr<TempDir> cache;

    static std::string &failure() {
        static std::string s;
        return s;
    }

    static std::unique_ptr<OpenCLRunner> make(std::string *why_not) {
        auto r = std::make_unique<OpenCLRunner>();
        // PoCL reads its cache folder when the platform starts: a fresh one per test program.
        r->cache = std::make_unique<TempDir>("kiln_pocl_cache_");
        setenv("POCL_CACHE_DIR", r->cache->path.c_str(), 1);
        cl_uint platforms = 0;
        cl_platform_id platform[8];
        if (clGetPlatformIDs(8, platform, &platforms) != CL_SUCCESS || platforms == 0) {
            *why_not = "no OpenCL platform (is PoCL installed?)";
            return nullptr;
        }
        for (cl_uint i = 0; i < platforms && !r->device; i++) {
            cl_uint n = 0;
            if (clGetDeviceIDs(platform[i], CL_DEVICE_TYPE_ALL, 1, &r->device, &n) != CL_SUCCESS)
                r->device = nullptr;
        }
        if (!r->device) {
            *why_not = "no OpenCL device";
            return nullptr;
        }
        cl_int err;
        r->context = clCreateContext(nullptr, 1, &r->device, nullptr, nullptr, &err);
        if (err != CL_SUCCESS) {
            *why_not = "clCreateContext: " + std::to_string(err);
            return nullptr;
        }
        r->queue = clCreateCommandQueue(r->context, r->device, 0, &err);
        if (err != CL_SUCCESS) {
            *why_not = "clCreateCommandQueue: " + std::to_string(err);
            return nullptr;
        }
        return r;
    }
};

#endif // KILN_TEST_OPENCL

} // namespace kiln::test
