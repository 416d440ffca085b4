// The OpenCL device interface. libOpenCL.so.1 (the ICD loader) is opened with dlopen on first use
// and the ~20 entry points kiln needs are looked up into a table, so the runtime links no OpenCL
// library and needs no OpenCL headers: the types and constants below are the Khronos values.
// One context and one in-order queue serve the whole process; programs are cached per source text
// and kernels per (program, name) in fixed tables, because a build costs hundreds of milliseconds
// (PoCL runs its own LLVM). One mutex guards the state; clSetKernelArg and clEnqueueNDRangeKernel
// run under it, because a cl_kernel's arguments are shared by every thread that launches it.
#include "runtime/kiln_device_internal.h"
#include "runtime/kiln_lock.h"
#include "runtime/kiln_runtime.h"

#include <dlfcn.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// The OpenCL names are spelled as in CL/cl.h.
// NOLINTBEGIN(readability-identifier-naming)
namespace {

using namespace kiln_runtime_internal;

/* ---- The OpenCL subset (values from the Khronos CL/cl.h) ------------------------------------ */

using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_ulong = uint64_t;
using cl_bool = cl_uint;
using cl_bitfield = cl_ulong;
using cl_device_type = cl_bitfield;
using cl_mem_flags = cl_bitfield;
using cl_command_queue_properties = cl_bitfield;
using cl_platform_info = cl_uint;
using cl_device_info = cl_uint;
using cl_program_build_info = cl_uint;
using cl_kernel_work_group_info = cl_uint;
using cl_mem_info = cl_uint;
using cl_profiling_info = cl_uint;
using cl_context_properties = intptr_t;

using cl_platform_id = struct _cl_platform_id *;
using cl_device_id = struct _cl_device_id *;
using cl_context = struct _cl_context *;
using cl_command_queue = struct _cl_command_queue *;
using cl_mem = struct _cl_mem *;
using cl_program = struct _cl_program *;
using cl_kernel = struct _cl_kernel *;
using cl_event = struct _cl_event *;

constexpr cl_int CL_SUCCESS = 0;
constexpr cl_int CL_PLATFORM_NOT_FOUND_KHR = -1001;
constexpr cl_bool CL_TRUE = 1;
constexpr cl_device_type CL_DEVICE_TYPE_GPU = 1 << 2;
constexpr cl_command_queue_properties CL_QUEUE_PROFILING_ENABLE = 1 << 1;
constexpr cl_profiling_info CL_PROFILING_COMMAND_END = 0x1283;
constexpr cl_device_type CL_DEVICE_TYPE_ALL = 0xFFFFFFFF;
constexpr cl_mem_flags CL_MEM_READ_WRITE = 1 << 0;
constexpr cl_device_info CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS = 0x1003;
constexpr cl_device_info CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004;
constexpr cl_device_info CL_DEVICE_MAX_WORK_ITEM_SIZES = 0x1005;
constexpr cl_device_info CL_DEVICE_LOCAL_MEM_SIZE = 0x1023;
constexpr cl_device_info CL_DEVICE_NAME = 0x102B;
constexpr cl_device_info CL_DRIVER_VERSION = 0x102D;
constexpr cl_device_info CL_DEVICE_VERSION = 0x102F;
constexpr cl_device_info CL_DEVICE_EXTENSIONS = 0x1030;
constexpr cl_device_info CL_DEVICE_SINGLE_FP_CONFIG = 0x101B;
constexpr cl_ulong CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT = 1 << 7;
constexpr cl_context_properties CL_CONTEXT_PLATFORM = 0x1084;
constexpr cl_mem_info CL_MEM_SIZE = 0x1102;
constexpr cl_mem_info CL_MEM_CONTEXT = 0x1106;
constexpr cl_program_build_info CL_PROGRAM_BUILD_LOG = 0x1183;
constexpr cl_kernel_work_group_info CL_KERNEL_WORK_GROUP_SIZE = 0x11B0;

using ContextCallback = void (*)(const char *, const void *, size_t, void *);
using BuildCallback = void (*)(cl_program, void *);

// Every entry point kiln uses: name, return type, parameters.
#define KILN_OPENCL_FUNCTIONS(X)                                                                   \
    X(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))                            \
    X(clGetDeviceIDs, cl_int,                                                                      \
      (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *))                        \
    X(clGetDeviceInfo, cl_int, (cl_device_id, cl_device_info, size_t, void *, size_t *))           \
    X(clCreateContext, cl_context,                                                                 \
      (const cl_context_properties *, cl_uint, const cl_device_id *, ContextCallback, void *,      \
       cl_int *))                                                                                  \
    X(clReleaseContext, cl_int, (cl_context))                                                      \
    X(clCreateCommandQueue, cl_command_queue,                                                      \
      (cl_context, cl_device_id, cl_command_queue_properties, cl_int *))                           \
    X(clReleaseCommandQueue, cl_int, (cl_command_queue))                                           \
    X(clCreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void *, cl_int *))                \
    X(clReleaseMemObject, cl_int, (cl_mem))                                                        \
    X(clGetMemObjectInfo, cl_int, (cl_mem, cl_mem_info, size_t, void *, size_t *))                 \
    X(clEnqueueWriteBuffer, cl_int,                                                                \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint, const cl_event *, \
       cl_event *))                                                                                \
    X(clEnqueueReadBuffer, cl_int,                                                                 \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *,       \
       cl_event *))                                                                                \
    X(clCreateProgramWithSource, cl_program,                                                       \
      (cl_context, cl_uint, const char **, const size_t *, cl_int *))                              \
    X(clBuildProgram, cl_int,                                                                      \
      (cl_program, cl_uint, const cl_device_id *, const char *, BuildCallback, void *))            \
    X(clGetProgramBuildInfo, cl_int,                                                               \
      (cl_program, cl_device_id, cl_program_build_info, size_t, void *, size_t *))                 \
    X(clReleaseProgram, cl_int, (cl_program))                                                      \
    X(clCreateKernel, cl_kernel, (cl_program, const char *, cl_int *))                             \
    X(clReleaseKernel, cl_int, (cl_kernel))                                                        \
    X(clSetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void *))                          \
    X(clGetKernelWorkGroupInfo, cl_int,                                                            \
      (cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *, size_t *))              \
    X(clEnqueueNDRangeKernel, cl_int,                                                              \
      (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *,       \
       cl_uint, const cl_event *, cl_event *))                                                     \
    X(clFinish, cl_int, (cl_command_queue))                                                        \
    X(clEnqueueMarkerWithWaitList, cl_int,                                                         \
      (cl_command_queue, cl_uint, const cl_event *, cl_event *))                                   \
    X(clWaitForEvents, cl_int, (cl_uint, const cl_event *))                                        \
    X(clGetEventProfilingInfo, cl_int, (cl_event, cl_profiling_info, size_t, void *, size_t *))    \
    X(clReleaseEvent, cl_int, (cl_event))

struct Functions {
// NOLINTNEXTLINE(bugprone-macro-parentheses): params is a parameter list
#define KILN_DECLARE(name, result, params) result(*name) params;
    KILN_OPENCL_FUNCTIONS(KILN_DECLARE)
#undef KILN_DECLARE
};

const char *cl_error_name(cl_int code) {
    switch (code) {
#define KILN_CASE(name, value)                                                                     \
    case value:                                                                                    \
        return #name;
        KILN_CASE(CL_SUCCESS, 0)
        KILN_CASE(CL_DEVICE_NOT_FOUND, -1)
        KILN_CASE(CL_DEVICE_NOT_AVAILABLE, -2)
        KILN_CASE(CL_COMPILER_NOT_AVAILABLE, -3)
        KILN_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE, -4)
        KILN_CASE(CL_OUT_OF_RESOURCES, -5)
        KILN_CASE(CL_OUT_OF_HOST_MEMORY, -6)
        KILN_CASE(CL_PROFILING_INFO_NOT_AVAILABLE, -7)
        KILN_CASE(CL_MEM_COPY_OVERLAP, -8)
        KILN_CASE(CL_IMAGE_FORMAT_MISMATCH, -9)
        KILN_CASE(CL_IMAGE_FORMAT_NOT_SUPPORTED, -10)
        KILN_CASE(CL_BUILD_PROGRAM_FAILURE, -11)
        KILN_CASE(CL_MAP_FAILURE, -12)
        KILN_CASE(CL_MISALIGNED_SUB_BUFFER_OFFSET, -13)
        KILN_CASE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, -14)
        KILN_CASE(CL_COMPILE_PROGRAM_FAILURE, -15)
        KILN_CASE(CL_LINKER_NOT_AVAILABLE, -16)
        KILN_CASE(CL_LINK_PROGRAM_FAILURE, -17)
        KILN_CASE(CL_DEVICE_PARTITION_FAILED, -18)
        KILN_CASE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, -19)
        KILN_CASE(CL_INVALID_VALUE, -30)
        KILN_CASE(CL_INVALID_DEVICE_TYPE, -31)
        KILN_CASE(CL_INVALID_PLATFORM, -32)
        KILN_CASE(CL_INVALID_DEVICE, -33)
        KILN_CASE(CL_INVALID_CONTEXT, -34)
        KILN_CASE(CL_INVALID_QUEUE_PROPERTIES, -35)
        KILN_CASE(CL_INVALID_COMMAND_QUEUE, -36)
        KILN_CASE(CL_INVALID_HOST_PTR, -37)
        KILN_CASE(CL_INVALID_MEM_OBJECT, -38)
        KILN_CASE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, -39)
        KILN_CASE(CL_INVALID_IMAGE_SIZE, -40)
        KILN_CASE(CL_INVALID_SAMPLER, -41)
        KILN_CASE(CL_INVALID_BINARY, -42)
        KILN_CASE(CL_INVALID_BUILD_OPTIONS, -43)
        KILN_CASE(CL_INVALID_PROGRAM, -44)
        KILN_CASE(CL_INVALID_PROGRAM_EXECUTABLE, -45)
        KILN_CASE(CL_INVALID_KERNEL_NAME, -46)
        KILN_CASE(CL_INVALID_KERNEL_DEFINITION, -47)
        KILN_CASE(CL_INVALID_KERNEL, -48)
        KILN_CASE(CL_INVALID_ARG_INDEX, -49)
        KILN_CASE(CL_INVALID_ARG_VALUE, -50)
        KILN_CASE(CL_INVALID_ARG_SIZE, -51)
        KILN_CASE(CL_INVALID_KERNEL_ARGS, -52)
        KILN_CASE(CL_INVALID_WORK_DIMENSION, -53)
        KILN_CASE(CL_INVALID_WORK_GROUP_SIZE, -54)
        KILN_CASE(CL_INVALID_WORK_ITEM_SIZE, -55)
        KILN_CASE(CL_INVALID_GLOBAL_OFFSET, -56)
        KILN_CASE(CL_INVALID_EVENT_WAIT_LIST, -57)
        KILN_CASE(CL_INVALID_EVENT, -58)
        KILN_CASE(CL_INVALID_OPERATION, -59)
        KILN_CASE(CL_INVALID_GL_OBJECT, -60)
        KILN_CASE(CL_INVALID_BUFFER_SIZE, -61)
        KILN_CASE(CL_INVALID_MIP_LEVEL, -62)
        KILN_CASE(CL_INVALID_GLOBAL_WORK_SIZE, -63)
        KILN_CASE(CL_INVALID_PROPERTY, -64)
        KILN_CASE(CL_INVALID_IMAGE_DESCRIPTOR, -65)
        KILN_CASE(CL_INVALID_COMPILER_OPTIONS, -66)
        KILN_CASE(CL_INVALID_LINKER_OPTIONS, -67)
        KILN_CASE(CL_INVALID_DEVICE_PARTITION_COUNT, -68)
        KILN_CASE(CL_INVALID_PIPE_SIZE, -69)
        KILN_CASE(CL_INVALID_DEVICE_QUEUE, -70)
        KILN_CASE(CL_INVALID_SPEC_ID, -71)
        KILN_CASE(CL_MAX_SIZE_RESTRICTION_EXCEEDED, -72)
        KILN_CASE(CL_PLATFORM_NOT_FOUND_KHR, -1001)
#undef KILN_CASE
    default:
        return "unknown OpenCL error";
    }
}

/* ---- State ---------------------------------------------------------------------------------- */

constexpr int max_platforms = 16;
constexpr int max_devices = 16;
constexpr int max_programs = 256;
constexpr int max_kernels = 256;

struct Program {
    cl_program program;
    CachedBytes source;
    uint64_t last_use;
};

struct Kernel {
    cl_kernel kernel;
    int program; // index into State::programs
    char name[max_kernel_name];
    size_t work_group_size; // CL_KERNEL_WORK_GROUP_SIZE
    uint64_t last_use;
};

struct State {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    void *library = nullptr;
    char library_name[256] = {};
    Functions cl = {};
    // A missing driver or device is remembered (until release) so later calls fail fast.
    int failure_code = 0;
    char failure[512] = {};
    cl_platform_id platform = nullptr;
    cl_device_id device = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
    char device_name[256] = {};
    bool has_fp64 = false;
    // float division and sqrt correctly rounded, as lang/IR.h defines them (needs a build option)
    bool correctly_rounded_divide_sqrt = false;
    size_t max_work_group_size = 0;
    size_t max_work_item_sizes[3] = {};
    cl_ulong local_mem_size = 0;
    Program programs[max_programs] = {};
    Kernel kernels[max_kernels] = {};
    uint64_t clock = 0;
    cl_event timer_mark = nullptr; // the marker of timer_start, until timer_stop
};

// Constant-initialized and never destroyed: buffers may be freed from other static destructors,
// and the driver is never unloaded (PoCL does not survive being loaded twice).
State state;

extern const kiln_device_interface_t opencl_interface;

// Records an API failure: "clEnqueueNDRangeKernel failed: CL_INVALID_WORK_GROUP_SIZE (-54)".
int call_failed(int code, const char *call, cl_int err, const char *context = "") {
    return kiln_error(code, "%s failed%s: %s (%d)", call, context, cl_error_name(err), err);
}

/* ---- Loading the driver and choosing the device (mutex held) -------------------------------- */

int load_library(State &s) {
    if (s.library) return kiln_success;
    // KILN_OPENCL_LIBRARY names another ICD loader or driver (and lets tests simulate none).
    const char *custom = std::getenv("KILN_OPENCL_LIBRARY");
    const char *names[2] = {"libOpenCL.so.1", "libOpenCL.so"};
    int count = 2;
    if (custom && *custom) {
        names[0] = custom;
        count = 1;
    }
    char first_error[256] = "";
    void *library = nullptr;
    for (int i = 0; i < count && !library; i++)
        library = kiln_internal_open_library(names[i], i == 0 ? first_error : nullptr,
                                             sizeof(first_error));
    if (!library)
        return kiln_error(kiln_error_no_device,
                          "no OpenCL driver: cannot load %s%s (%s); install an OpenCL ICD loader "
                          "and a driver (PoCL on a CPU), or set KILN_OPENCL_LIBRARY",
                          names[0], count == 2 ? " or libOpenCL.so" : "", first_error);
    Functions cl = {};
    const char *missing = nullptr;
#define KILN_RESOLVE(name, result, params) resolve(library, #name, &cl.name, &missing);
    KILN_OPENCL_FUNCTIONS(KILN_RESOLVE)
#undef KILN_RESOLVE
    if (missing) {
        dlclose(library);
        return kiln_error(kiln_error_no_device, "the OpenCL library %s has no function %s",
                          names[0], missing);
    }
    s.cl = cl;
    s.library = library;
    std::snprintf(s.library_name, sizeof(s.library_name), "%s", names[0]);
    return kiln_success;
}

bool device_name_of(State &s, cl_device_id d, char *out, size_t capacity) {
    out[0] = '\0';
    if (s.cl.clGetDeviceInfo(d, CL_DEVICE_NAME, capacity, out, nullptr) != CL_SUCCESS) return false;
    out[capacity - 1] = '\0';
    return true;
}

// KILN_OPENCL_DEVICE=<text>: the first device (of any type) whose name contains text.
int find_named_device(State &s, cl_platform_id *platforms, cl_uint platform_count,
                      const char *wanted) {
    char names[512] = "";
    size_t used = 0;
    for (cl_uint p = 0; p < platform_count; p++) {
        cl_device_id devices[max_devices];
        cl_uint n = 0;
        if (s.cl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, max_devices, devices, &n) !=
            CL_SUCCESS)
            continue;
        for (cl_uint i = 0; i < n && i < cl_uint(max_devices); i++) {
            char name[256];
            if (!device_name_of(s, devices[i], name, sizeof(name))) continue;
            if (std::strstr(name, wanted)) {
                s.platform = platforms[p];
                s.device = devices[i];
                return kiln_success;
            }
            if (used < sizeof(names)) {
                int written = std::snprintf(names + used, sizeof(names) - used, "%s'%s'",
                                            used ? ", " : "", name);
                if (written > 0) used += size_t(written);
            }
        }
    }
    return kiln_error(kiln_error_no_device,
                      "KILN_OPENCL_DEVICE='%s' matches no OpenCL device; the devices are: %s",
                      wanted, used ? names : "(none)");
}

// The first GPU of the first platform that has one, else the first device of any type.
int find_default_device(State &s, cl_platform_id *platforms, cl_uint platform_count) {
    const cl_device_type types[2] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ALL};
    for (cl_device_type type : types) {
        for (cl_uint p = 0; p < platform_count; p++) {
            cl_uint n = 0;
            cl_int err = s.cl.clGetDeviceIDs(platforms[p], type, 1, &s.device, &n);
            if (err == CL_SUCCESS && n > 0) {
                s.platform = platforms[p];
                return kiln_success;
            }
        }
    }
    return kiln_error(kiln_error_no_device,
                      "no OpenCL device found on %u platform%s (driver library %s)", platform_count,
                      platform_count == 1 ? "" : "s", s.library_name);
}

int choose_device(State &s) {
    cl_platform_id platforms[max_platforms];
    cl_uint platform_count = 0;
    cl_int err = s.cl.clGetPlatformIDs(max_platforms, platforms, &platform_count);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && platform_count == 0))
        return kiln_error(kiln_error_no_device,
                          "no OpenCL platform found: %s loaded but lists no driver (is one, such "
                          "as PoCL, installed in /etc/OpenCL/vendors?)",
                          s.library_name);
    if (err != CL_SUCCESS) return call_failed(kiln_error_no_device, "clGetPlatformIDs", err);
    if (platform_count > cl_uint(max_platforms)) platform_count = max_platforms;
    const char *wanted = std::getenv("KILN_OPENCL_DEVICE");
    if (wanted && *wanted) return find_named_device(s, platforms, platform_count, wanted);
    return find_default_device(s, platforms, platform_count);
}

int query_device(State &s) {
    device_name_of(s, s.device, s.device_name, sizeof(s.device_name));
    cl_int err = s.cl.clGetDeviceInfo(s.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(size_t),
                                      &s.max_work_group_size, nullptr);
    if (err != CL_SUCCESS)
        return call_failed(kiln_error_device_run, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)",
                           err);
    err = s.cl.clGetDeviceInfo(s.device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(cl_ulong),
                               &s.local_mem_size, nullptr);
    if (err != CL_SUCCESS)
        return call_failed(kiln_error_device_run, "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)", err);
    cl_uint dimensions = 0;
    size_t sizes[16] = {};
    err = s.cl.clGetDeviceInfo(s.device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof(dimensions),
                               &dimensions, nullptr);
    if (err == CL_SUCCESS && dimensions > 16) dimensions = 16;
    if (err == CL_SUCCESS)
        err = s.cl.clGetDeviceInfo(s.device, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                                   sizeof(size_t) * dimensions, sizes, nullptr);
    if (err != CL_SUCCESS)
        return call_failed(kiln_error_device_run, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_ITEM_SIZES)",
                           err);
    for (cl_uint i = 0; i < 3; i++)
        s.max_work_item_sizes[i] = i < dimensions ? sizes[i] : 1;
    size_t extensions_size = 0;
    s.has_fp64 = false;
    if (s.cl.clGetDeviceInfo(s.device, CL_DEVICE_EXTENSIONS, 0, nullptr, &extensions_size) ==
            CL_SUCCESS &&
        extensions_size > 0) {
        char *extensions = static_cast<char *>(std::malloc(extensions_size + 1));
        if (extensions && s.cl.clGetDeviceInfo(s.device, CL_DEVICE_EXTENSIONS, extensions_size,
                                               extensions, nullptr) == CL_SUCCESS) {
            extensions[extensions_size] = '\0';
            s.has_fp64 = std::strstr(extensions, "cl_khr_fp64") != nullptr;
        }
        std::free(extensions);
    }
    cl_ulong fp_config = 0;
    s.correctly_rounded_divide_sqrt =
        s.cl.clGetDeviceInfo(s.device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fp_config), &fp_config,
                             nullptr) == CL_SUCCESS &&
        (fp_config & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    return kiln_success;
}

// Loads the driver and creates the context and queue, once (until release).
int ensure_initialized(State &s) {
    if (s.queue) return kiln_success;
    if (s.failure_code) return kiln_error(s.failure_code, "%s", s.failure);
    if (int code = load_library(s)) return remember_failure(s, code);
    if (int code = choose_device(s)) {
        return code == kiln_error_no_device ? remember_failure(s, code) : code;
    }
    if (int code = query_device(s)) return code;
    cl_int err = CL_SUCCESS;
    const cl_context_properties properties[3] = {
        CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(s.platform), 0};
    s.context = s.cl.clCreateContext(properties, 1, &s.device, nullptr, nullptr, &err);
    if (!s.context || err != CL_SUCCESS) {
        s.context = nullptr;
        return call_failed(kiln_error_device_run, "clCreateContext", err);
    }
    // Profiling costs a timestamp per command; the timer's markers need it.
    s.queue = s.cl.clCreateCommandQueue(s.context, s.device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (!s.queue || err != CL_SUCCESS) {
        s.queue = nullptr;
        s.cl.clReleaseContext(s.context);
        s.context = nullptr;
        return call_failed(kiln_error_device_run, "clCreateCommandQueue", err);
    }
    return kiln_success;
}

/* ---- Programs and kernels (mutex held) ------------------------------------------------------ */

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// Parses the digits at text[i..]; returns the index after them (i when there are none).
size_t parse_number(const char *text, size_t i, size_t end, long *value) {
    long v = 0;
    size_t j = i;
    while (j < end && is_digit(text[j]) && v < 100000000) {
        v = v * 10 + (text[j] - '0');
        j++;
    }
    *value = v;
    return j;
}

// Whether text[i] (a ':') starts a source location ":LINE:COL:", or ":LINE:" right after a '>'
// ("<source>:12:"); sets *line.
bool location_at(const char *text, size_t i, size_t end, long *line) {
    if (text[i] != ':' || i + 1 >= end || !is_digit(text[i + 1])) return false;
    size_t j = parse_number(text, i + 1, end, line);
    if (j >= end || text[j] != ':') return false;
    if (i > 0 && text[i - 1] == '>') return true;
    long column = 0;
    size_t k = parse_number(text, j + 1, end, &column);
    return k > j + 1 && k < end && text[k] == ':';
}

// The build log with the compiler's temporary file names ("/tmp/.../tempfile_x.cl:3:10:")
// replaced by "<kernel source>", so messages are stable. Caller frees.
char *rewrite_log(const char *log, size_t length) {
    // Each location is at least ":1:1:", so a replacement grows the text by at most 3 times.
    char *out = static_cast<char *>(std::malloc(length * 4 + 64));
    if (!out) return nullptr;
    static const char replacement[] = "<kernel source>";
    size_t o = 0, token_start = 0;
    for (size_t i = 0; i < length; i++) {
        char c = log[i];
        long line = 0;
        if (location_at(log, i, length, &line) && o > token_start) {
            o = token_start;
            std::memcpy(out + o, replacement, sizeof(replacement) - 1);
            o += sizeof(replacement) - 1;
        }
        out[o++] = c;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\'' || c == '"' || c == '(')
            token_start = o;
    }
    out[o] = '\0';
    return out;
}

// The distinct lines (up to 4) the log points at.
LogLines log_lines(const char *log) {
    LogLines found = {};
    size_t log_length = std::strlen(log);
    for (size_t i = 0; i < log_length && !found.full(); i++) {
        long line = 0;
        if (location_at(log, i, log_length, &line)) found.add(line);
    }
    return found;
}

int build_failed(State &s, cl_program program, cl_int err, const char *source, size_t source_size,
                 const char *kernel_name) {
    size_t log_size = 0;
    char *log = nullptr;
    if (s.cl.clGetProgramBuildInfo(program, s.device, CL_PROGRAM_BUILD_LOG, 0, nullptr,
                                   &log_size) == CL_SUCCESS &&
        log_size > 0) {
        log = static_cast<char *>(std::malloc(log_size + 1));
        if (log && s.cl.clGetProgramBuildInfo(program, s.device, CL_PROGRAM_BUILD_LOG, log_size,
                                              log, nullptr) != CL_SUCCESS)
            log_size = 0;
        if (log) log[log_size] = '\0';
    }
    char *rewritten = log ? rewrite_log(log, std::strlen(log)) : nullptr;
    const char *shown = rewritten ? rewritten : (log ? log : "");
    char lines[512];
    kiln_internal_quote_lines(log_lines(shown), source, source_size, "<kernel source>", lines,
                              sizeof(lines));
    int code = kiln_error(kiln_error_device_compile,
                          "the OpenCL program of kernel '%s' failed to build on '%s' "
                          "(clBuildProgram: %s (%d))\n%sbuild log:\n%s",
                          kernel_name, s.device_name, cl_error_name(err), err, lines,
                          *shown ? shown : "(empty)");
    std::free(rewritten);
    std::free(log);
    return code;
}

void release_kernel(State &s, int i) {
    if (s.kernels[i].kernel) s.cl.clReleaseKernel(s.kernels[i].kernel);
    s.kernels[i] = Kernel{};
}

void release_program(State &s, int i) {
    for (int k = 0; k < max_kernels; k++) {
        if (s.kernels[k].kernel && s.kernels[k].program == i) release_kernel(s, k);
    }
    if (s.programs[i].program) s.cl.clReleaseProgram(s.programs[i].program);
    std::free(s.programs[i].source.bytes);
    s.programs[i] = Program{};
}

bool program_used(const Program &p) {
    return p.program != nullptr;
}

bool kernel_used(const Kernel &k) {
    return k.kernel != nullptr;
}

int find_program(State &s, const char *source, size_t size, const char *kernel_name, int *index) {
    uint64_t hash = kiln_internal_fnv1a(source, size);
    *index = find_entry(s.programs, &s.clock, [&](const Program &p) {
        return program_used(p) && kiln_internal_same_bytes(p.source, hash, source, size);
    });
    if (*index >= 0) return kiln_success;
    // Devices with cl_khr_fp64 get it enabled, so kernels may use double without the pragma;
    // "#line 1" keeps the line numbers of the log those of the caller's source.
    static const char fp64_prefix[] = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#line 1\n";
    bool prefix = s.has_fp64;
    const char *strings[2] = {fp64_prefix, source};
    size_t lengths[2] = {sizeof(fp64_prefix) - 1, size};
    cl_int err = CL_SUCCESS;
    cl_program program = s.cl.clCreateProgramWithSource(
        s.context, prefix ? 2 : 1, strings + (prefix ? 0 : 1), lengths + (prefix ? 0 : 1), &err);
    if (!program || err != CL_SUCCESS)
        return call_failed(kiln_error_device_run, "clCreateProgramWithSource", err);
    const char *options =
        s.correctly_rounded_divide_sqrt ? "-cl-fp32-correctly-rounded-divide-sqrt" : "";
    err = s.cl.clBuildProgram(program, 1, &s.device, options, nullptr, nullptr);
    if (err != CL_SUCCESS) {
        int code = build_failed(s, program, err, source, size, kernel_name);
        s.cl.clReleaseProgram(program);
        return code;
    }
    char *copy = kiln_internal_copy_bytes(source, size);
    if (!copy) {
        s.cl.clReleaseProgram(program);
        return kiln_error(kiln_error_out_of_memory, "opencl: out of memory caching a program");
    }
    int i = free_slot(s, s.programs, program_used, release_program);
    s.programs[i] = Program{program, {hash, size, copy}, ++s.clock};
    *index = i;
    return kiln_success;
}

int find_kernel(State &s, const char *source, size_t size, const char *name, Kernel **out) {
    size_t name_length = 0;
    if (int code = kiln_internal_check_kernel_name("opencl", name, &name_length)) return code;
    int program = 0;
    if (int code = find_program(s, source, size, name, &program)) return code;
    int found = find_entry(s.kernels, &s.clock, [&](const Kernel &k) {
        return kernel_used(k) && k.program == program && std::strcmp(k.name, name) == 0;
    });
    if (found >= 0) {
        *out = &s.kernels[found];
        return kiln_success;
    }
    cl_int err = CL_SUCCESS;
    cl_kernel kernel = s.cl.clCreateKernel(s.programs[program].program, name, &err);
    if (!kernel || err != CL_SUCCESS) {
        char context[max_kernel_name + 32];
        std::snprintf(context, sizeof(context), " for kernel '%s'", name);
        return call_failed(kiln_error_device_run, "clCreateKernel", err, context);
    }
    size_t work_group_size = 0;
    err = s.cl.clGetKernelWorkGroupInfo(kernel, s.device, CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof(work_group_size), &work_group_size, nullptr);
    if (err != CL_SUCCESS) {
        s.cl.clReleaseKernel(kernel);
        return call_failed(kiln_error_device_run,
                           "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)", err);
    }
    int i = free_slot(s, s.kernels, kernel_used, release_kernel);
    Kernel &k = s.kernels[i];
    k.kernel = kernel;
    k.program = program;
    std::memcpy(k.name, name, name_length + 1);
    k.work_group_size = work_group_size;
    k.last_use = ++s.clock;
    *out = &k;
    return kiln_success;
}

/* ---- Buffers -------------------------------------------------------------------------------- */

cl_mem mem_of(const kiln_buffer_t *b) {
    // The descriptor stores device handles as integers, as Halide's does.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    return reinterpret_cast<cl_mem>(static_cast<uintptr_t>(b->device));
}

// A mem object made in a context released since (or another program's context) cannot be used
// with the current queue; say so instead of reporting CL_INVALID_CONTEXT.
int check_context(State &s, const char *what, cl_mem mem, cl_context context) {
    cl_context owner = nullptr;
    cl_int err = s.cl.clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof(cl_context), &owner, nullptr);
    if (err != CL_SUCCESS) return call_failed(kiln_error_device_run, "clGetMemObjectInfo", err);
    if (owner != context)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer's cl_mem belongs to another OpenCL context (one released "
                          "by the interface's release(), or not kiln's); free the device copy and "
                          "copy the buffer to the device again",
                          what);
    return kiln_success;
}

// Checks a buffer for a copy and returns the queue and the byte count (0: nothing to copy).
int prepare_copy(const char *fn, kiln_buffer_t *b, cl_command_queue *queue, size_t *bytes) {
    if (int code = kiln_internal_check_copy(fn, b, &opencl_interface, "an OpenCL buffer", false))
        return code;
    State &s = state;
    cl_context context;
    {
        Lock lock(s.mutex);
        if (int code = ensure_initialized(s)) return code;
        *queue = s.queue;
        context = s.context;
    }
    *bytes = kiln_buffer_size_in_bytes(b);
    if (*bytes == 0) return kiln_success;
    if (int code = check_context(s, fn, mem_of(b), context)) return code;
    size_t held = 0;
    cl_int err = s.cl.clGetMemObjectInfo(mem_of(b), CL_MEM_SIZE, sizeof(held), &held, nullptr);
    if (err != CL_SUCCESS) return call_failed(kiln_error_device_run, "clGetMemObjectInfo", err);
    if (held < *bytes)
        return kiln_error(kiln_error_device_memory,
                          "%s: the buffer spans %zu bytes but its device copy holds %zu", fn,
                          *bytes, held);
    return kiln_success;
}

// Copies the buffer's elements between host and device. A dense buffer is one blocking copy of
// its span. Otherwise only the elements move, one contiguous run at a time: the gaps between rows
// may belong to another buffer (a crop of a larger image), and copying them back would overwrite
// it with whatever the device holds there.
int copy_elements(cl_command_queue queue, kiln_buffer_t *b, size_t span, bool to_device) {
    State &s = state;
    const char *call = to_device ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer";
    auto enqueue = [&](cl_bool blocking, size_t offset, size_t bytes) {
        return to_device ? s.cl.clEnqueueWriteBuffer(queue, mem_of(b), blocking, offset, bytes,
                                                     b->host + offset, 0, nullptr, nullptr)
                         : s.cl.clEnqueueReadBuffer(queue, mem_of(b), blocking, offset, bytes,
                                                    b->host + offset, 0, nullptr, nullptr);
    };
    if (kiln_internal_is_dense(b, span)) {
        cl_int err = enqueue(CL_TRUE, 0, span);
        if (err != CL_SUCCESS) return call_failed(kiln_error_device_run, call, err);
        return kiln_success;
    }
    if (b->dimensions > max_copy_dimensions)
        return kiln_error(kiln_error_bad_dimensions,
                          "opencl: a buffer with %d dimensions cannot be copied (at most %d)",
                          b->dimensions, max_copy_dimensions);
    // Runs are queued without waiting, then finished.
    int code = for_each_run(b, span, [&](size_t offset, size_t bytes) {
        cl_int err = enqueue(0, offset, bytes);
        if (err == CL_SUCCESS) return int(kiln_success);
        s.cl.clFinish(queue); // the queued runs still read or write the host memory
        return call_failed(kiln_error_device_run, call, err);
    });
    if (code) return code;
    cl_int err = s.cl.clFinish(queue);
    if (err != CL_SUCCESS) return call_failed(kiln_error_device_run, "clFinish", err);
    return kiln_success;
}

/* ---- The interface -------------------------------------------------------------------------- */

int opencl_device_malloc(kiln_buffer_t *b) {
    if (int code = kiln_internal_check_malloc("opencl device_malloc", b, false)) return code;
    State &s = state;
    cl_context context;
    {
        Lock lock(s.mutex);
        if (int code = ensure_initialized(s)) return code;
        context = s.context;
    }
    size_t bytes = kiln_buffer_size_in_bytes(b);
    cl_int err = CL_SUCCESS;
    // An empty buffer still gets a (1-byte) cl_mem, so it can be passed to a kernel.
    cl_mem mem = s.cl.clCreateBuffer(context, CL_MEM_READ_WRITE, bytes ? bytes : 1, nullptr, &err);
    if (!mem || err != CL_SUCCESS) {
        char context_text[64];
        std::snprintf(context_text, sizeof(context_text), " for %zu bytes", bytes);
        return call_failed(kiln_error_device_memory, "clCreateBuffer", err, context_text);
    }
    b->device = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(mem));
    b->device_interface = &opencl_interface;
    return kiln_success;
}

int opencl_device_free(kiln_buffer_t *b) {
    if (int code = kiln_internal_check_free("opencl device_free", b, &opencl_interface))
        return code;
    if (!b->device) {
        b->device_interface = nullptr;
        b->flags &= ~uint64_t(kiln_buffer_flag_device_dirty);
        return kiln_success;
    }
    State &s = state;
    {
        // A cl_mem only exists if the library was loaded; the context may have been released.
        Lock lock(s.mutex);
        if (!s.library) {
            if (int code = load_library(s)) return code;
        }
    }
    cl_int err = s.cl.clReleaseMemObject(mem_of(b));
    b->device = 0;
    b->device_interface = nullptr;
    b->flags &= ~uint64_t(kiln_buffer_flag_device_dirty);
    if (err != CL_SUCCESS) return call_failed(kiln_error_device_run, "clReleaseMemObject", err);
    return kiln_success;
}

int opencl_copy_to_device(kiln_buffer_t *b) {
    cl_command_queue queue = nullptr;
    size_t bytes = 0;
    if (int code = prepare_copy("opencl copy_to_device", b, &queue, &bytes)) return code;
    if (bytes == 0) return kiln_success;
    return copy_elements(queue, b, bytes, true);
}

int opencl_copy_to_host(kiln_buffer_t *b) {
    cl_command_queue queue = nullptr;
    size_t bytes = 0;
    if (int code = prepare_copy("opencl copy_to_host", b, &queue, &bytes)) return code;
    if (bytes == 0) return kiln_success;
    return copy_elements(queue, b, bytes, false);
}

int opencl_run(const char *source, size_t source_size, const char *kernel_name,
               const int32_t blocks[3], const int32_t threads[3], int32_t num_args, void **args,
               const size_t *arg_sizes, const int8_t *arg_is_buffer) {
    bool empty = false;
    if (int code = kiln_internal_check_launch("opencl run", source, kernel_name, blocks, threads,
                                              num_args, args, arg_sizes, arg_is_buffer, &empty))
        return code;
    if (empty) return kiln_success;
    size_t global[3], local[3];
    for (int i = 0; i < 3; i++) {
        local[i] = size_t(threads[i]);
        global[i] = size_t(blocks[i]) * size_t(threads[i]);
    }
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    Kernel *kernel = nullptr;
    if (int code = find_kernel(s, source, source_size, kernel_name, &kernel)) return code;
    size_t per_block = local[0] * local[1] * local[2];
    if (per_block > kernel->work_group_size)
        return kiln_error(kiln_error_device_run,
                          "kernel '%s' asks for %zu threads per block (%zu x %zu x %zu) but '%s' "
                          "allows at most %zu for it (CL_KERNEL_WORK_GROUP_SIZE)",
                          kernel_name, per_block, local[0], local[1], local[2], s.device_name,
                          kernel->work_group_size);
    for (int i = 0; i < 3; i++) {
        if (local[i] > s.max_work_item_sizes[i])
            return kiln_error(kiln_error_device_run,
                              "kernel '%s' asks for %zu threads in dimension %d of a block but "
                              "'%s' allows at most %zu (CL_DEVICE_MAX_WORK_ITEM_SIZES)",
                              kernel_name, local[i], i, s.device_name, s.max_work_item_sizes[i]);
    }
    for (int32_t i = 0; i < num_args; i++) {
        cl_int err;
        if (arg_is_buffer[i]) {
            const kiln_buffer_t *b = nullptr;
            if (int code =
                    kiln_internal_buffer_argument(kernel_name, i, args[i], &opencl_interface,
                                                  "the buffer has no OpenCL device copy", &b))
                return code;
            cl_mem mem = mem_of(b);
            char what[max_kernel_name + 48];
            std::snprintf(what, sizeof(what), "kernel '%s' argument %d", kernel_name, i);
            if (int code = check_context(s, what, mem, s.context)) return code;
            err = s.cl.clSetKernelArg(kernel->kernel, cl_uint(i), sizeof(cl_mem), &mem);
        } else {
            // A null value with a size reserves that much __local memory.
            err = s.cl.clSetKernelArg(kernel->kernel, cl_uint(i), arg_sizes[i], args[i]);
        }
        if (err != CL_SUCCESS) {
            char context[max_kernel_name + 48];
            std::snprintf(context, sizeof(context), " for kernel '%s' argument %d", kernel_name, i);
            return call_failed(kiln_error_device_run, "clSetKernelArg", err, context);
        }
    }
    cl_int err = s.cl.clEnqueueNDRangeKernel(s.queue, kernel->kernel, 3, nullptr, global, local, 0,
                                             nullptr, nullptr);
    if (err != CL_SUCCESS) {
        char context[max_kernel_name + 96];
        std::snprintf(context, sizeof(context),
                      " for kernel '%s' (global %zu x %zu x %zu, local %zu x %zu x %zu)",
                      kernel_name, global[0], global[1], global[2], local[0], local[1], local[2]);
        return call_failed(kiln_error_device_run, "clEnqueueNDRangeKernel", err, context);
    }
    return kiln_success;
}

int opencl_synchronize(void) {
    State &s = state;
    cl_command_queue queue;
    {
        Lock lock(s.mutex);
        queue = s.queue;
    }
    if (!queue) return kiln_success; // nothing was ever queued
    cl_int err = s.cl.clFinish(queue);
    if (err != CL_SUCCESS) return call_failed(kiln_error_device_run, "clFinish", err);
    return kiln_success;
}

int opencl_release(void) {
    State &s = state;
    Lock lock(s.mutex);
    for (int i = 0; i < max_programs; i++) {
        if (s.programs[i].program) release_program(s, i);
    }
    if (s.timer_mark) s.cl.clReleaseEvent(s.timer_mark);
    s.timer_mark = nullptr;
    if (s.queue) {
        s.cl.clFinish(s.queue);
        s.cl.clReleaseCommandQueue(s.queue);
    }
    if (s.context) s.cl.clReleaseContext(s.context);
    s.queue = nullptr;
    s.context = nullptr;
    s.platform = nullptr;
    s.device = nullptr;
    s.failure_code = 0;
    s.failure[0] = '\0';
    return kiln_success;
}

int opencl_device_limits(int64_t *max_threads_per_block, int64_t *shared_memory_bytes) {
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    if (max_threads_per_block) *max_threads_per_block = int64_t(s.max_work_group_size);
    if (shared_memory_bytes) *shared_memory_bytes = int64_t(s.local_mem_size);
    return kiln_success;
}

int opencl_device_description(char *out, size_t size) {
    if (!out || size == 0) return kiln_error(kiln_error_generic, "device_description: no room");
    out[0] = '\0';
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    char name[256] = "", version[256] = "", driver[256] = "";
    device_name_of(s, s.device, name, sizeof(name));
    if (s.cl.clGetDeviceInfo(s.device, CL_DEVICE_VERSION, sizeof(version), version, nullptr) !=
        CL_SUCCESS)
        version[0] = '\0';
    if (s.cl.clGetDeviceInfo(s.device, CL_DRIVER_VERSION, sizeof(driver), driver, nullptr) !=
        CL_SUCCESS)
        driver[0] = '\0';
    version[sizeof(version) - 1] = driver[sizeof(driver) - 1] = '\0';
    std::snprintf(out, size, "%s; %s; driver %s", name, version, driver);
    return kiln_success;
}

// The device time of a marker: when the queue reached it (its end; a marker does nothing).
int marker_time(State &s, cl_event marker, cl_ulong *ns) {
    cl_int err = s.cl.clGetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof(cl_ulong),
                                              ns, nullptr);
    if (err != CL_SUCCESS)
        return call_failed(kiln_error_device_run,
                           "clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)", err);
    return kiln_success;
}

int opencl_timer_start(void) {
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    if (s.timer_mark) s.cl.clReleaseEvent(s.timer_mark);
    s.timer_mark = nullptr;
    cl_int err = s.cl.clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &s.timer_mark);
    if (err != CL_SUCCESS) {
        s.timer_mark = nullptr;
        return call_failed(kiln_error_device_run, "clEnqueueMarkerWithWaitList", err);
    }
    return kiln_success;
}

int opencl_timer_stop(double *ms) {
    if (!ms) return kiln_error(kiln_error_internal, "opencl timer_stop: ms is null");
    State &s = state;
    cl_event start = nullptr, stop = nullptr;
    {
        Lock lock(s.mutex);
        if (!s.timer_mark)
            return kiln_error(kiln_error_generic,
                              "opencl timer_stop: no timer was started (timer_start)");
        start = s.timer_mark;
        s.timer_mark = nullptr;
        cl_int err = s.cl.clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &stop);
        if (err != CL_SUCCESS) {
            s.cl.clReleaseEvent(start);
            return call_failed(kiln_error_device_run, "clEnqueueMarkerWithWaitList", err);
        }
    }
    // Waiting outside the lock lets other threads queue work meanwhile, as synchronize does.
    cl_int err = s.cl.clWaitForEvents(1, &stop);
    cl_ulong begin_ns = 0, end_ns = 0;
    int code = err == CL_SUCCESS ? kiln_success
                                 : call_failed(kiln_error_device_run, "clWaitForEvents", err);
    if (!code) code = marker_time(s, start, &begin_ns);
    if (!code) code = marker_time(s, stop, &end_ns);
    s.cl.clReleaseEvent(start);
    s.cl.clReleaseEvent(stop);
    if (code) return code;
    *ms = end_ns > begin_ns ? double(end_ns - begin_ns) * 1e-6 : 0.0;
    return kiln_success;
}

const kiln_device_interface_t opencl_interface = {
    "opencl",
    opencl_device_malloc,
    opencl_device_free,
    opencl_copy_to_device,
    opencl_copy_to_host,
    opencl_run,
    opencl_synchronize,
    opencl_release,
    opencl_device_limits,
    opencl_device_description,
    opencl_timer_start,
    opencl_timer_stop,
};

} // namespace
// NOLINTEND(readability-identifier-naming)

extern "C" const kiln_device_interface_t *kiln_opencl_device_interface(void) {
    return &opencl_interface;
}
