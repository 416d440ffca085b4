// The CUDA device interface on the driver API. libcuda.so.1 (or KILN_CUDA_DRIVER) is opened with
// dlopen on first use and the entry points kiln needs (the _v2 ones where they exist) are looked
// up into a table, so the runtime links no CUDA library and needs no CUDA header: the types and
// constants below are the values of cuda.h. kiln uses the primary context of one device (or a
// context the program hands it, kiln_cuda_set_context) and one stream it creates per context (or
// the program's, kiln_cuda_set_stream). Modules are cached per (source or bundle, context) and
// functions per (module, name) in fixed tables. One mutex guards the state and is held through
// every driver call, with the context pushed on the calling thread for the duration.
#include "runtime/kiln_cuda_bundle.h"
#include "runtime/kiln_device_internal.h"
#include "runtime/kiln_lock.h"
#include "runtime/kiln_runtime.h"

#include <dlfcn.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// The CUDA names are spelled as in cuda.h.
// NOLINTBEGIN(readability-identifier-naming)
namespace {

using namespace kiln_runtime_internal;

/* ---- The driver API subset (values from cuda.h) --------------------------------------------- */

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr unsigned CU_EVENT_DEFAULT = 0;

// Every entry point kiln uses: the name kiln calls it by, the exported symbol, return type and
// parameters.
#define KILN_CUDA_FUNCTIONS(X)                                                                     \
    X(cuInit, "cuInit", CUresult, (unsigned))                                                      \
    X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int *))                                 \
    X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult, const char **))                       \
    X(cuGetErrorString, "cuGetErrorString", CUresult, (CUresult, const char **))                   \
    X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int *))                                     \
    X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice *, int))                                     \
    X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char *, int, CUdevice))                       \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int *, int, CUdevice))              \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext *, CUdevice))     \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice))             \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", CUresult, (CUcontext))                              \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", CUresult, (CUcontext *))                              \
    X(cuCtxGetDevice, "cuCtxGetDevice", CUresult, (CUdevice *))                                    \
    X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream *, unsigned))                          \
    X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream))                                 \
    X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream))                            \
    X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr *, size_t))                              \
    X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                                          \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult,                                         \
      (CUdeviceptr, const void *, size_t, CUstream))                                               \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult,                                         \
      (void *, CUdeviceptr, size_t, CUstream))                                                     \
    X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule *, const void *))                  \
    X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule))                                      \
    X(cuModuleGetFunction, "cuModuleGetFunction", CUresult,                                        \
      (CUfunction *, CUmodule, const char *))                                                      \
    X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                                  \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
       void **, void **))                                                                          \
    X(cuEventCreate, "cuEventCreate", CUresult, (CUevent *, unsigned))                             \
    X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent))                                    \
    X(cuEventRecord, "cuEventRecord", CUresult, (CUevent, CUstream))                               \
    X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent))                               \
    X(cuEventElapsedTime, "cuEventElapsedTime", CUresult, (float *, CUevent, CUevent))

struct Functions {
// NOLINTNEXTLINE(bugprone-macro-parentheses): params is a parameter list
#define KILN_DECLARE(name, symbol, result, params) result(*name) params;
    KILN_CUDA_FUNCTIONS(KILN_DECLARE)
#undef KILN_DECLARE
};

/* ---- State ---------------------------------------------------------------------------------- */

constexpr int max_contexts = 16;
constexpr int max_modules = 128;
constexpr int max_functions = 256;

// A context kiln uses (the primary one, or one from kiln_cuda_set_context) and what kiln keeps
// per context: the device's properties and kiln's own stream.
struct Context {
    CUcontext context;
    CUdevice device;
    CUstream stream; // kiln's own
    int arch;        // major * 10 + minor
    int max_threads_per_block;
    int shared_memory_per_block;
    char name[256];
};

struct Module {
    CUmodule module;
    CUcontext context;
    CachedBytes source; // the CUDA source or bundle
    uint64_t last_use;
};

struct Function {
    CUfunction function;
    int module; // index into State::modules
    char name[max_kernel_name];
    uint64_t last_use;
};

struct State {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    void *library = nullptr;
    char library_name[512] = {};
    Functions cu = {};
    // A missing driver or device is remembered (until release) so later calls fail fast.
    int failure_code = 0;
    char failure[768] = {};
    bool initialized = false;
    int driver_version = 0;
    CUdevice device = 0;
    CUcontext primary = nullptr; // retained
    Context contexts[max_contexts] = {};
    int current = -1;               // index into contexts
    CUstream user_stream = nullptr; // kiln_cuda_set_stream
    CUevent timer_start = nullptr, timer_stop = nullptr;
    CUcontext timer_context = nullptr;
    bool timer_running = false;
    Module modules[max_modules] = {};
    Function functions[max_functions] = {};
    uint64_t clock = 0;
};

// Constant-initialized and never destroyed: buffers may be freed from other static destructors.
State state;

extern const kiln_device_interface_t cuda_interface;

// Names of the errors a driver that cannot name them (the toolkit's stub libcuda) is likely to
// return, from cuda.h.
struct KnownError {
    CUresult code;
    const char *name, *text;
};
constexpr KnownError known_errors[] = {
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "the loaded CUDA driver is a stub library, not a real driver"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "the driver is older than the CUDA runtime"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda "
     "driver combination"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

// "cuLaunchKernel failed for kernel 'k': CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure
// (719)"
int call_failed(State &s, int code, const char *call, CUresult err, const char *context = "") {
    const char *name = nullptr, *text = nullptr;
    if (s.cu.cuGetErrorName && s.cu.cuGetErrorName(err, &name) != CUDA_SUCCESS) name = nullptr;
    if (s.cu.cuGetErrorString && s.cu.cuGetErrorString(err, &text) != CUDA_SUCCESS) text = nullptr;
    for (const KnownError &e : known_errors) {
        if (e.code != err) continue;
        if (!name) name = e.name;
        if (!text) text = e.text;
    }
    return kiln_error(code, "%s failed%s: %s: %s (%d)", call, context,
                      name ? name : "unknown CUDA error", text ? text : "no description", err);
}

/* ---- Loading the driver and choosing the device (mutex held) -------------------------------- */

const char *driver_path() {
    const char *custom = std::getenv("KILN_CUDA_DRIVER");
    return custom && *custom ? custom : "libcuda.so.1";
}

int load_library(State &s) {
    // KILN_CUDA_DRIVER names another driver (tests load a fake one); a different path after
    // release() replaces the library, which is only ever the case in tests.
    const char *path = driver_path();
    if (s.library && std::strcmp(s.library_name, path) == 0) return kiln_success;
    if (s.library) {
        dlclose(s.library);
        s.library = nullptr;
        s.cu = Functions{};
    }
    char why[1024]; // error messages are cut at 1023 bytes anyway
    void *library = kiln_internal_open_library(path, why, sizeof(why));
    if (!library)
        return kiln_error(kiln_error_no_device,
                          "no CUDA driver: cannot load %s (%s); install the NVIDIA driver, or set "
                          "KILN_CUDA_DRIVER to the path of libcuda.so.1",
                          path, why);
    Functions cu = {};
    const char *missing = nullptr;
#define KILN_RESOLVE(name, symbol, result, params) resolve(library, symbol, &cu.name, &missing);
    KILN_CUDA_FUNCTIONS(KILN_RESOLVE)
#undef KILN_RESOLVE
    if (missing) {
        dlclose(library);
        return kiln_error(kiln_error_no_device, "the CUDA driver %s has no function %s", path,
                          missing);
    }
    s.cu = cu;
    s.library = library;
    std::snprintf(s.library_name, sizeof(s.library_name), "%s", path);
    return kiln_success;
}

// Pushes a context on the calling thread for a scope, and pops it after.
class ContextScope {
public:
    ContextScope(State &s, CUcontext context) : s(s) {
        result = s.cu.cuCtxPushCurrent(context);
        pushed = result == CUDA_SUCCESS;
    }
    ~ContextScope() {
        CUcontext ignored = nullptr;
        if (pushed) s.cu.cuCtxPopCurrent(&ignored);
    }
    ContextScope(const ContextScope &) = delete;
    ContextScope &operator=(const ContextScope &) = delete;
    CUresult result;

private:
    State &s;
    bool pushed;
};

// The entry of context c, created (properties queried, a stream made) on first use.
int context_entry(State &s, CUcontext c, int *index) {
    int free_index = -1;
    for (int i = 0; i < max_contexts; i++) {
        if (s.contexts[i].context == c) {
            *index = i;
            return kiln_success;
        }
        if (!s.contexts[i].context && free_index < 0) free_index = i;
    }
    if (free_index < 0)
        return kiln_error(kiln_error_device_run,
                          "cuda: kiln keeps at most %d contexts; call release() to forget them",
                          max_contexts);
    ContextScope scope(s, c);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    Context e = {};
    e.context = c;
    CUresult err = s.cu.cuCtxGetDevice(&e.device);
    if (err != CUDA_SUCCESS) return call_failed(s, kiln_error_device_run, "cuCtxGetDevice", err);
    int major = 0, minor = 0;
    struct {
        int attribute;
        int *value;
        const char *name;
    } queries[4] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major, "COMPUTE_CAPABILITY_MAJOR"},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor, "COMPUTE_CAPABILITY_MINOR"},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &e.max_threads_per_block,
         "MAX_THREADS_PER_BLOCK"},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &e.shared_memory_per_block,
         "MAX_SHARED_MEMORY_PER_BLOCK"}};
    for (auto &q : queries) {
        err = s.cu.cuDeviceGetAttribute(q.value, q.attribute, e.device);
        if (err != CUDA_SUCCESS) {
            char what[96];
            std::snprintf(what, sizeof(what), " (CU_DEVICE_ATTRIBUTE_%s)", q.name);
            return call_failed(s, kiln_error_device_run, "cuDeviceGetAttribute", err, what);
        }
    }
    e.arch = major * 10 + minor;
    if (s.cu.cuDeviceGetName(e.name, int(sizeof(e.name)), e.device) != CUDA_SUCCESS)
        std::snprintf(e.name, sizeof(e.name), "CUDA device %d", e.device);
    e.name[sizeof(e.name) - 1] = '\0';
    err = s.cu.cuStreamCreate(&e.stream, CU_STREAM_NON_BLOCKING);
    if (err != CUDA_SUCCESS) return call_failed(s, kiln_error_device_run, "cuStreamCreate", err);
    s.contexts[free_index] = e;
    *index = free_index;
    return kiln_success;
}

// Loads the driver, picks the device and retains its primary context, once (until release).
int ensure_initialized(State &s) {
    if (s.initialized) return kiln_success;
    if (s.failure_code) return kiln_error(s.failure_code, "%s", s.failure);
    if (int code = load_library(s)) return remember_failure(s, code);
    CUresult err = s.cu.cuInit(0);
    if (err != CUDA_SUCCESS) {
        char context[600];
        std::snprintf(context, sizeof(context), " (CUDA driver %s)", s.library_name);
        return remember_failure(s, call_failed(s, kiln_error_no_device, "cuInit", err, context));
    }
    if (s.cu.cuDriverGetVersion(&s.driver_version) != CUDA_SUCCESS) s.driver_version = 0;
    int count = 0;
    err = s.cu.cuDeviceGetCount(&count);
    if (err != CUDA_SUCCESS)
        return remember_failure(s, call_failed(s, kiln_error_no_device, "cuDeviceGetCount", err));
    if (count <= 0)
        return remember_failure(s, kiln_error(kiln_error_no_device,
                                              "no CUDA device: the driver %s (version %d) "
                                              "reports none",
                                              s.library_name, s.driver_version));
    int ordinal = 0;
    const char *wanted = std::getenv("KILN_CUDA_DEVICE");
    if (wanted && *wanted) {
        char *end = nullptr;
        long value = std::strtol(wanted, &end, 10);
        if (*end != '\0' || value < 0 || value >= count)
            return remember_failure(
                s, kiln_error(kiln_error_no_device,
                              "KILN_CUDA_DEVICE='%s' is not a CUDA device ordinal: there %s %d "
                              "device%s (0 to %d)",
                              wanted, count == 1 ? "is" : "are", count, count == 1 ? "" : "s",
                              count - 1));
        ordinal = int(value);
    }
    err = s.cu.cuDeviceGet(&s.device, ordinal);
    if (err != CUDA_SUCCESS) return call_failed(s, kiln_error_no_device, "cuDeviceGet", err);
    err = s.cu.cuDevicePrimaryCtxRetain(&s.primary, s.device);
    if (err != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuDevicePrimaryCtxRetain", err);
    int index = -1;
    if (int code = context_entry(s, s.primary, &index)) {
        s.cu.cuDevicePrimaryCtxRelease(s.device);
        s.primary = nullptr;
        return code;
    }
    s.current = index;
    s.initialized = true;
    return kiln_success;
}

Context &current(State &s) {
    return s.contexts[s.current];
}

CUstream current_stream(State &s) {
    return s.user_stream ? s.user_stream : current(s).stream;
}

/* ---- Images and modules (mutex held) -------------------------------------------------------- */

void release_function(State &s, int i) {
    s.functions[i] = Function{};
}

void release_module(State &s, int i) {
    for (int k = 0; k < max_functions; k++) {
        if (s.functions[k].function && s.functions[k].module == i) release_function(s, k);
    }
    Module &m = s.modules[i];
    if (m.module) {
        ContextScope scope(s, m.context);
        if (scope.result == CUDA_SUCCESS) s.cu.cuModuleUnload(m.module);
    }
    std::free(m.source.bytes);
    m = Module{};
}

bool module_used(const Module &m) {
    return m.module != nullptr;
}

bool function_used(const Function &f) {
    return f.function != nullptr;
}

// A failed NVRTC compile, with the kernel and the device it was for.
int compile_failed(int code, const char *kernel_name, const Context &c) {
    char message[1024];
    std::snprintf(message, sizeof(message), "%s", kiln_last_error_message());
    return kiln_error(code, "kernel '%s' for '%s' (sm_%d): %s", kernel_name, c.name, c.arch,
                      message);
}

// Loads the image chosen for the current context's device (the current context is pushed).
int load_module(State &s, const char *source, size_t size, const char *kernel_name, CUmodule *out) {
    const Context &c = current(s);
    const char *image = source;
    size_t image_size = size;
    int kind = kiln_cuda_image_source;
    if (kiln_internal_is_cuda_bundle(source, size)) {
        kiln_cuda_bundle_entry_t e;
        if (int code =
                kiln_internal_choose_cuda_image(source, size, c.arch, c.name, kernel_name, &e))
            return code;
        image = source + e.offset;
        image_size = size_t(e.size);
        kind = int(e.kind);
    }
    const char *source_text = image;
    size_t source_size = image_size;
    void *compiled = nullptr;
    char *text = nullptr;
    if (kind == kiln_cuda_image_source) {
        if (int code = kiln_cuda_compile(image, image_size, c.arch, 0, &compiled, &image_size))
            return compile_failed(code, kernel_name, c);
        image = static_cast<const char *>(compiled);
    } else if (kind == kiln_cuda_image_ptx) {
        // cuModuleLoadData reads PTX up to its NUL, which a bundle need not store.
        text = static_cast<char *>(std::malloc(image_size + 1));
        if (!text) return kiln_error(kiln_error_out_of_memory, "cuda: out of memory copying PTX");
        std::memcpy(text, image, image_size);
        text[image_size] = '\0';
        image = text;
    }
    CUresult err = s.cu.cuModuleLoadData(out, image);
    std::free(compiled);
    std::free(text);
    const char *loaded = kind == kiln_cuda_image_source
                             ? "PTX from NVRTC"
                             : kiln_internal_cuda_image_kind_name(uint32_t(kind));
    if (err == CUDA_ERROR_UNSUPPORTED_PTX_VERSION && kind == kiln_cuda_image_source) {
        // NVRTC's PTX is newer than the driver can compile: a cubin needs no driver JIT.
        void *cubin = nullptr;
        size_t cubin_size = 0;
        if (int code = kiln_cuda_compile(source_text, source_size, c.arch, 1, &cubin, &cubin_size))
            return compile_failed(code, kernel_name, c);
        err = s.cu.cuModuleLoadData(out, cubin);
        std::free(cubin);
        loaded = "cubin from NVRTC";
    }
    if (err != CUDA_SUCCESS) {
        char context[max_kernel_name + 64];
        std::snprintf(context, sizeof(context), " for kernel '%s' (%s for sm_%d)", kernel_name,
                      loaded, c.arch);
        return call_failed(s, kiln_error_device_compile, "cuModuleLoadData", err, context);
    }
    return kiln_success;
}

int find_module(State &s, const char *source, size_t size, const char *kernel_name, int *index) {
    uint64_t hash = kiln_internal_fnv1a(source, size);
    CUcontext context = current(s).context;
    *index = find_entry(s.modules, &s.clock, [&](const Module &m) {
        return module_used(m) && m.context == context &&
               kiln_internal_same_bytes(m.source, hash, source, size);
    });
    if (*index >= 0) return kiln_success;
    char *copy = kiln_internal_copy_bytes(source, size);
    if (!copy) return kiln_error(kiln_error_out_of_memory, "cuda: out of memory caching a module");
    CUmodule module = nullptr;
    if (int code = load_module(s, source, size, kernel_name, &module)) {
        std::free(copy);
        return code;
    }
    int i = free_slot(s, s.modules, module_used, release_module);
    s.modules[i] = Module{module, context, {hash, size, copy}, ++s.clock};
    *index = i;
    return kiln_success;
}

int find_function(State &s, const char *source, size_t size, const char *name, CUfunction *out) {
    size_t name_length = 0;
    if (int code = kiln_internal_check_kernel_name("cuda", name, &name_length)) return code;
    int module = 0;
    if (int code = find_module(s, source, size, name, &module)) return code;
    int found = find_entry(s.functions, &s.clock, [&](const Function &f) {
        return function_used(f) && f.module == module && std::strcmp(f.name, name) == 0;
    });
    if (found >= 0) {
        *out = s.functions[found].function;
        return kiln_success;
    }
    CUfunction function = nullptr;
    CUresult err = s.cu.cuModuleGetFunction(&function, s.modules[module].module, name);
    if (err != CUDA_SUCCESS) {
        char context[max_kernel_name + 32];
        std::snprintf(context, sizeof(context), " for kernel '%s'", name);
        return call_failed(s, kiln_error_device_run, "cuModuleGetFunction", err, context);
    }
    int i = free_slot(s, s.functions, function_used, release_function);
    Function &f = s.functions[i];
    f.function = function;
    f.module = module;
    std::memcpy(f.name, name, name_length + 1);
    f.last_use = ++s.clock;
    *out = function;
    return kiln_success;
}

/* ---- Buffers -------------------------------------------------------------------------------- */

int synchronize_stream(State &s, CUstream stream) {
    CUresult err = s.cu.cuStreamSynchronize(stream);
    if (err != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuStreamSynchronize", err);
    return kiln_success;
}

// Host -> device: one async copy per run of elements (the device bytes between runs may belong to
// another tensor when the pointer was wrapped), then a wait for the stream.
int copy_to_device_runs(State &s, kiln_buffer_t *b, size_t span, CUstream stream) {
    int code = for_each_run(b, span, [&](size_t offset, size_t bytes) {
        // CUdeviceptr and the buffer's uint64_t device handle are both 64 bits: nothing is lost.
        // NOLINTNEXTLINE(bugprone-misplaced-widening-cast)
        CUresult err = s.cu.cuMemcpyHtoDAsync(CUdeviceptr(b->device + offset), b->host + offset,
                                              bytes, stream);
        if (err != CUDA_SUCCESS)
            return call_failed(s, kiln_error_device_run, "cuMemcpyHtoDAsync", err);
        return int(kiln_success);
    });
    // Queued copies still read the host memory: wait for them even after a failure.
    int wait = synchronize_stream(s, stream);
    return code ? code : wait;
}

// Device -> host: a dense buffer lands in place; otherwise the span comes into a temporary and
// only the elements are scattered, so host bytes between rows (another buffer's) stay untouched.
int copy_to_host_runs(State &s, kiln_buffer_t *b, size_t span, CUstream stream) {
    bool dense = kiln_internal_is_dense(b, span);
    uint8_t *target = dense ? b->host : static_cast<uint8_t *>(std::malloc(span));
    if (!target)
        return kiln_error(kiln_error_out_of_memory,
                          "cuda copy_to_host: out of memory for a %zu-byte staging copy", span);
    CUresult err = s.cu.cuMemcpyDtoHAsync(target, CUdeviceptr(b->device), span, stream);
    int code = err == CUDA_SUCCESS
                   ? kiln_success
                   : call_failed(s, kiln_error_device_run, "cuMemcpyDtoHAsync", err);
    int wait = synchronize_stream(s, stream);
    if (!code) code = wait;
    if (!code && !dense) {
        for_each_run(b, span, [&](size_t offset, size_t bytes) {
            std::memcpy(b->host + offset, target + offset, bytes);
            return int(kiln_success);
        });
    }
    if (!dense) std::free(target);
    return code;
}

int copy(kiln_buffer_t *b, bool to_device) {
    const char *fn = to_device ? "cuda copy_to_device" : "cuda copy_to_host";
    if (int code = kiln_internal_check_copy(fn, b, &cuda_interface, "a CUDA buffer", true))
        return code;
    size_t span = kiln_buffer_size_in_bytes(b);
    if (span == 0) return kiln_success;
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    ContextScope scope(s, current(s).context);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    CUstream stream = current_stream(s);
    return to_device ? copy_to_device_runs(s, b, span, stream)
                     : copy_to_host_runs(s, b, span, stream);
}

/* ---- The interface -------------------------------------------------------------------------- */

int cuda_device_malloc(kiln_buffer_t *b) {
    if (int code = kiln_internal_check_malloc("cuda device_malloc", b, true)) return code;
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    ContextScope scope(s, current(s).context);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    size_t bytes = kiln_buffer_size_in_bytes(b);
    CUdeviceptr pointer = 0;
    // An empty buffer still gets a byte, so it can be passed to a kernel.
    CUresult err = s.cu.cuMemAlloc(&pointer, bytes ? bytes : 1);
    if (err != CUDA_SUCCESS || !pointer) {
        char context[64];
        std::snprintf(context, sizeof(context), " for %zu bytes", bytes);
        return call_failed(s, kiln_error_device_memory, "cuMemAlloc", err, context);
    }
    b->device = pointer;
    b->device_interface = &cuda_interface;
    b->flags &= ~uint64_t(kiln_buffer_flag_device_not_owned);
    return kiln_success;
}

void forget_device(kiln_buffer_t *b) {
    b->device = 0;
    b->device_interface = nullptr;
    b->flags &= ~uint64_t(kiln_buffer_flag_device_dirty | kiln_buffer_flag_device_not_owned);
}

int cuda_device_free(kiln_buffer_t *b) {
    if (int code = kiln_internal_check_free("cuda device_free", b, &cuda_interface)) return code;
    // A handle without an interface, or a wrapped one, is not kiln's to free.
    if (!b->device || !b->device_interface || (b->flags & kiln_buffer_flag_device_not_owned)) {
        forget_device(b);
        return kiln_success;
    }
    State &s = state;
    Lock lock(s.mutex);
    // cuMemFree needs the driver and a context; after release() that means initializing again.
    if (int code = ensure_initialized(s)) return code;
    ContextScope scope(s, current(s).context);
    CUdeviceptr pointer = CUdeviceptr(b->device);
    forget_device(b);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    CUresult err = s.cu.cuMemFree(pointer);
    if (err != CUDA_SUCCESS) return call_failed(s, kiln_error_device_run, "cuMemFree", err);
    return kiln_success;
}

int cuda_copy_to_device(kiln_buffer_t *b) {
    return copy(b, true);
}

int cuda_copy_to_host(kiln_buffer_t *b) {
    return copy(b, false);
}

int cuda_run(const char *source, size_t source_size, const char *kernel_name,
             const int32_t blocks[3], const int32_t threads[3], int32_t num_args, void **args,
             const size_t *arg_sizes, const int8_t *arg_is_buffer) {
    const char *fn = "cuda run";
    bool empty = false;
    if (int code = kiln_internal_check_launch(fn, source, kernel_name, blocks, threads, num_args,
                                              args, arg_sizes, arg_is_buffer, &empty))
        return code;
    if (empty) return kiln_success;
    int64_t per_block = int64_t(threads[0]) * threads[1] * threads[2];
    // The argument values: a buffer's CUdeviceptr is passed by value, a scalar as it is.
    CUdeviceptr *pointers =
        static_cast<CUdeviceptr *>(std::malloc(sizeof(CUdeviceptr) * size_t(num_args + 1)));
    void **params = static_cast<void **>(std::malloc(sizeof(void *) * size_t(num_args + 1)));
    struct Free {
        void *a, *b;
        ~Free() {
            std::free(a);
            std::free(b);
        }
    } release_arrays{pointers, params};
    if (!pointers || !params)
        return kiln_error(kiln_error_out_of_memory, "%s: out of memory for %d arguments", fn,
                          num_args);
    for (int32_t i = 0; i < num_args; i++) {
        if (arg_is_buffer[i]) {
            const kiln_buffer_t *b = nullptr;
            if (int code = kiln_internal_buffer_argument(
                    kernel_name, i, args[i], &cuda_interface,
                    "the buffer has no CUDA device copy (copy it to the "
                    "device on the CUDA interface first)",
                    &b))
                return code;
            pointers[i] = CUdeviceptr(b->device);
            params[i] = &pointers[i];
        } else {
            if (!args[i])
                return kiln_error(kiln_error_internal,
                                  "kernel '%s' argument %d: a null scalar (dynamic shared memory "
                                  "of %zu bytes) is not supported by the CUDA interface; kernels "
                                  "declare shared memory statically",
                                  kernel_name, i, arg_sizes[i]);
            params[i] = args[i];
        }
    }
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    const Context &c = current(s);
    if (per_block > c.max_threads_per_block)
        return kiln_error(kiln_error_device_run,
                          "kernel '%s' asks for %lld threads per block (%d x %d x %d) but '%s' "
                          "allows at most %d",
                          kernel_name, static_cast<long long>(per_block), threads[0], threads[1],
                          threads[2], c.name, c.max_threads_per_block);
    ContextScope scope(s, c.context);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    CUfunction function = nullptr;
    if (int code = find_function(s, source, source_size, kernel_name, &function)) return code;
    CUresult err =
        s.cu.cuLaunchKernel(function, unsigned(blocks[0]), unsigned(blocks[1]), unsigned(blocks[2]),
                            unsigned(threads[0]), unsigned(threads[1]), unsigned(threads[2]), 0,
                            current_stream(s), params, nullptr);
    if (err != CUDA_SUCCESS) {
        char context[max_kernel_name + 96];
        std::snprintf(context, sizeof(context),
                      " for kernel '%s' (blocks %d x %d x %d, threads %d x %d x %d)", kernel_name,
                      blocks[0], blocks[1], blocks[2], threads[0], threads[1], threads[2]);
        return call_failed(s, kiln_error_device_run, "cuLaunchKernel", err, context);
    }
    return kiln_success;
}

int cuda_synchronize(void) {
    State &s = state;
    Lock lock(s.mutex);
    if (!s.initialized) return kiln_success; // nothing was ever queued
    ContextScope scope(s, current(s).context);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    return synchronize_stream(s, current_stream(s));
}

void destroy_timer(State &s) {
    if (s.timer_start || s.timer_stop) {
        ContextScope scope(s, s.timer_context);
        if (s.timer_start) s.cu.cuEventDestroy(s.timer_start);
        if (s.timer_stop) s.cu.cuEventDestroy(s.timer_stop);
    }
    s.timer_start = s.timer_stop = nullptr;
    s.timer_context = nullptr;
    s.timer_running = false;
}

int cuda_release(void) {
    State &s = state;
    Lock lock(s.mutex);
    if (s.initialized) {
        destroy_timer(s);
        for (int i = 0; i < max_modules; i++) {
            if (s.modules[i].module) release_module(s, i);
        }
        for (Context &c : s.contexts) {
            if (!c.context) continue;
            ContextScope scope(s, c.context);
            if (scope.result == CUDA_SUCCESS && c.stream) {
                s.cu.cuStreamSynchronize(c.stream);
                s.cu.cuStreamDestroy(c.stream);
            }
            c = Context{};
        }
        if (s.primary) s.cu.cuDevicePrimaryCtxRelease(s.device);
    }
    s.primary = nullptr;
    s.current = -1;
    s.user_stream = nullptr;
    s.initialized = false;
    s.failure_code = 0;
    s.failure[0] = '\0';
    return kiln_success;
}

int cuda_device_limits(int64_t *max_threads_per_block, int64_t *shared_memory_bytes) {
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    if (max_threads_per_block) *max_threads_per_block = current(s).max_threads_per_block;
    if (shared_memory_bytes) *shared_memory_bytes = current(s).shared_memory_per_block;
    return kiln_success;
}

int cuda_device_description(char *out, size_t size) {
    if (!out || size == 0) return kiln_error(kiln_error_generic, "device_description: no room");
    out[0] = '\0';
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    const Context &c = current(s);
    std::snprintf(out, size, "%s; sm_%d; driver %d", c.name, c.arch, s.driver_version);
    return kiln_success;
}

int cuda_timer_start(void) {
    return kiln_cuda_timer_start();
}

int cuda_timer_stop(double *ms) {
    if (!ms) return kiln_error(kiln_error_internal, "cuda timer_stop: ms is null");
    float elapsed = 0;
    int code = kiln_cuda_timer_stop(&elapsed);
    if (code == kiln_success) *ms = double(elapsed);
    return code;
}

const kiln_device_interface_t cuda_interface = {
    "cuda",
    cuda_device_malloc,
    cuda_device_free,
    cuda_copy_to_device,
    cuda_copy_to_host,
    cuda_run,
    cuda_synchronize,
    cuda_release,
    cuda_device_limits,
    cuda_device_description,
    cuda_timer_start,
    cuda_timer_stop,
};

} // namespace
// NOLINTEND(readability-identifier-naming)

extern "C" {

const kiln_device_interface_t *kiln_cuda_device_interface(void) {
    return &cuda_interface;
}

int kiln_cuda_set_context(void *cu_context) {
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    CUcontext c = cu_context ? static_cast<CUcontext>(cu_context) : s.primary;
    int index = -1;
    if (int code = context_entry(s, c, &index)) return code;
    s.current = index;
    s.user_stream = nullptr;
    return kiln_success;
}

int kiln_cuda_set_stream(void *cu_stream) {
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    s.user_stream = static_cast<CUstream>(cu_stream);
    return kiln_success;
}

void *kiln_cuda_stream(void) {
    State &s = state;
    Lock lock(s.mutex);
    if (ensure_initialized(s)) return nullptr;
    return current_stream(s);
}

int kiln_cuda_wrap_device_pointer(kiln_buffer_t *b, uint64_t cu_deviceptr) {
    const char *fn = "kiln_cuda_wrap_device_pointer";
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (!cu_deviceptr)
        return kiln_error(kiln_error_buffer_argument_null, "%s: the device pointer is 0", fn);
    if (b->device)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer already has a device copy; free or detach it first", fn);
    if (int code = kiln_internal_check_strides(fn, b, true)) return code;
    b->device = cu_deviceptr;
    b->device_interface = &cuda_interface;
    b->flags |= kiln_buffer_flag_device_not_owned;
    return kiln_success;
}

int kiln_cuda_detach_device_pointer(kiln_buffer_t *b) {
    const char *fn = "kiln_cuda_detach_device_pointer";
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (!b->device) return kiln_success;
    if (b->device_interface != &cuda_interface || !(b->flags & kiln_buffer_flag_device_not_owned))
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer's device copy is not a wrapped CUDA pointer (interface "
                          "'%s'%s); free it with kiln_buffer_device_free",
                          fn, kiln_internal_interface_name(b, "none"),
                          b->device_interface == &cuda_interface ? ", owned by kiln" : "");
    forget_device(b);
    return kiln_success;
}

int kiln_cuda_timer_start(void) {
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    CUcontext context = current(s).context;
    if (s.timer_context != context) destroy_timer(s);
    ContextScope scope(s, context);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    if (!s.timer_start) {
        s.timer_context = context;
        CUresult err = s.cu.cuEventCreate(&s.timer_start, CU_EVENT_DEFAULT);
        if (err == CUDA_SUCCESS) err = s.cu.cuEventCreate(&s.timer_stop, CU_EVENT_DEFAULT);
        if (err != CUDA_SUCCESS) {
            int code = call_failed(s, kiln_error_device_run, "cuEventCreate", err);
            destroy_timer(s);
            return code;
        }
    }
    CUresult err = s.cu.cuEventRecord(s.timer_start, current_stream(s));
    if (err != CUDA_SUCCESS) return call_failed(s, kiln_error_device_run, "cuEventRecord", err);
    s.timer_running = true;
    return kiln_success;
}

int kiln_cuda_timer_stop(float *ms) {
    const char *fn = "kiln_cuda_timer_stop";
    if (!ms) return kiln_error(kiln_error_internal, "%s: ms is null", fn);
    State &s = state;
    Lock lock(s.mutex);
    if (int code = ensure_initialized(s)) return code;
    if (!s.timer_running)
        return kiln_error(kiln_error_generic, "%s: no timer was started (kiln_cuda_timer_start)",
                          fn);
    if (s.timer_context != current(s).context)
        return kiln_error(kiln_error_generic,
                          "%s: the timer was started in another CUDA context "
                          "(kiln_cuda_set_context was called in between)",
                          fn);
    s.timer_running = false;
    ContextScope scope(s, s.timer_context);
    if (scope.result != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuCtxPushCurrent", scope.result);
    CUresult err = s.cu.cuEventRecord(s.timer_stop, current_stream(s));
    if (err != CUDA_SUCCESS) return call_failed(s, kiln_error_device_run, "cuEventRecord", err);
    err = s.cu.cuEventSynchronize(s.timer_stop);
    if (err != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuEventSynchronize", err);
    err = s.cu.cuEventElapsedTime(ms, s.timer_start, s.timer_stop);
    if (err != CUDA_SUCCESS)
        return call_failed(s, kiln_error_device_run, "cuEventElapsedTime", err);
    return kiln_success;
}

} // extern "C"
