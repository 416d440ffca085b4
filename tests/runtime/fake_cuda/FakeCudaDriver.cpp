// A fake CUDA driver (libcuda's API subset that runtime/kiln_cuda.cpp uses) on host memory: device
// pointers are malloc'd blocks, copies are memcpy, modules remember the image they were given and
// launches record what they were asked to run without running anything. Failure injection and
// inspection go through the fake_cuda_* functions (FakeCudaDriver.h). The device has a clock that
// only launches advance, each by the launch duration (fake_cuda_set_launch_ms, initially
// $KILN_FAKE_CUDA_LAUNCH_MS or 0, so a worker process can be given one); an event records the
// clock, and cuEventElapsedTime is the difference.
#include "FakeCudaDriver.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

// NOLINTBEGIN(readability-identifier-naming): the driver API's names
namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;

struct Context {
    int device;
};
struct Stream {
    Context *context;
};
struct Module {
    Context *context;
    std::string image;
};
struct Function {
    Module *module;
    std::string name;
};
struct Event {
    Stream *stream;
    double time_ms; // the device clock when it was recorded
};
struct Allocation {
    CUdeviceptr pointer;
    size_t size;
};

struct Fake {
    std::mutex mutex;
    int device_count = 1, major = 9, minor = 0;
    int init_result = 0, module_load_result = 0, launch_result = 0;
    bool initialized = false;
    Context primary[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
    std::vector<Context *> contexts;
    std::vector<Stream *> streams;
    std::vector<Module *> modules;
    std::vector<Function *> functions;
    std::vector<Event *> events;
    std::vector<Allocation> allocations;
    std::vector<size_t> arg_sizes;
    FakeCudaCounters counters = {};
    FakeCudaLaunch last_launch = {};
    bool launched = false;
    std::string last_image;
    void *last_copy_stream = nullptr;
    double clock_ms = 0, launch_ms = 0;

    void clear() {
        for (Context *c : contexts)
            delete c;
        for (Stream *s : streams)
            delete s;
        for (Module *m : modules)
            delete m;
        for (Function *f : functions)
            delete f;
        for (Event *e : events)
            delete e;
        for (Allocation &a : allocations)
            std::free(reinterpret_cast<void *>(a.pointer));
        contexts.clear();
        streams.clear();
        modules.clear();
        functions.clear();
        events.clear();
        allocations.clear();
        arg_sizes.clear();
        device_count = 1;
        major = 9;
        minor = 0;
        init_result = module_load_result = launch_result = 0;
        initialized = false;
        counters = {};
        last_launch = {};
        launched = false;
        last_image.clear();
        last_copy_stream = nullptr;
        clock_ms = 0;
        const char *launch = std::getenv("KILN_FAKE_CUDA_LAUNCH_MS");
        launch_ms = launch ? std::atof(launch) : 0;
    }
    Fake() { clear(); }
    ~Fake() { clear(); }
};

Fake &fake() {
    static Fake f;
    return f;
}

thread_local Context *context_stack[16];
thread_local int context_depth = 0;

Context *current_context() {
    return context_depth > 0 ? context_stack[context_depth - 1] : nullptr;
}

// Whether [pointer, pointer + size) lies in one allocation.
bool in_allocation(Fake &f, CUdeviceptr pointer, size_t size) {
    for (const Allocation &a : f.allocations) {
        if (pointer >= a.pointer && pointer - a.pointer <= a.size &&
            size <= a.size - (pointer - a.pointer))
            return true;
    }
    return false;
}

struct ErrorText {
    CUresult code;
    const char *name, *text;
};
const ErrorText errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
};

const ErrorText *find_error(CUresult code) {
    for (const ErrorText &e : errors) {
        if (e.code == code) return &e;
    }
    return nullptr;
}

} // namespace

extern "C" {

/* ---- Controls ------------------------------------------------------------------------------- */

void fake_cuda_reset() {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.clear();
}

void fake_cuda_set_devices(int count, int major, int minor) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.device_count = count;
    f.major = major;
    f.minor = minor;
}

void fake_cuda_set_init_result(int result) {
    fake().init_result = result;
}

void fake_cuda_set_module_load_result(int result) {
    fake().module_load_result = result;
}

void fake_cuda_set_launch_result(int result) {
    fake().launch_result = result;
}

void fake_cuda_set_launch_ms(double ms) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.launch_ms = ms;
}

void fake_cuda_set_arg_sizes(const size_t *sizes, int count) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.arg_sizes.assign(sizes, sizes + count);
}

const FakeCudaCounters *fake_cuda_counters() {
    return &fake().counters;
}

bool fake_cuda_last_launch(FakeCudaLaunch *out) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    *out = f.last_launch;
    return f.launched;
}

size_t fake_cuda_last_image(char *out, size_t capacity) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    size_t n = f.last_image.size() < capacity ? f.last_image.size() : capacity;
    std::memcpy(out, f.last_image.data(), n);
    return n;
}

void *fake_cuda_last_copy_stream() {
    return fake().last_copy_stream;
}

void *fake_cuda_create_context() {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.contexts.push_back(new Context{0});
    return f.contexts.back();
}

void *fake_cuda_create_stream(void *context) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.streams.push_back(new Stream{static_cast<Context *>(context)});
    return f.streams.back();
}

uint64_t fake_cuda_alloc(size_t bytes) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    void *p = std::calloc(bytes ? bytes : 1, 1);
    f.allocations.push_back({reinterpret_cast<CUdeviceptr>(p), bytes});
    return reinterpret_cast<CUdeviceptr>(p);
}

int fake_cuda_live_allocations() {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    return int(f.allocations.size());
}

/* ---- The driver API ------------------------------------------------------------------------- */

CUresult cuInit(unsigned) {
    Fake &f = fake();
    f.counters.inits++;
    if (f.init_result) return f.init_result;
    f.initialized = true;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
    *version = 13000;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult code, const char **name) {
    const ErrorText *e = find_error(code);
    *name = e ? e->name : nullptr;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult code, const char **text) {
    const ErrorText *e = find_error(code);
    *text = e ? e->text : nullptr;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *count) {
    if (!fake().initialized) return CUDA_ERROR_NOT_INITIALIZED;
    *count = fake().device_count;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (ordinal < 0 || ordinal >= fake().device_count || ordinal >= 8)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice) {
    std::strncpy(name, "NVIDIA H200", size_t(length));
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice) {
    Fake &f = fake();
    switch (attribute) {
    case 1: // MAX_THREADS_PER_BLOCK
        *value = 1024;
        return CUDA_SUCCESS;
    case 8: // MAX_SHARED_MEMORY_PER_BLOCK
        *value = 49152;
        return CUDA_SUCCESS;
    case 75:
        *value = f.major;
        return CUDA_SUCCESS;
    case 76:
        *value = f.minor;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuDevicePrimaryCtxRetain(void **context, CUdevice device) {
    Fake &f = fake();
    if (device < 0 || device >= 8) return CUDA_ERROR_INVALID_DEVICE;
    f.counters.primary_retains++;
    *context = &f.primary[device];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) {
    fake().counters.primary_releases++;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(void *context) {
    if (!context || context_depth == 16) return CUDA_ERROR_INVALID_CONTEXT;
    context_stack[context_depth++] = static_cast<Context *>(context);
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(void **context) {
    if (context_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    Context *c = context_stack[--context_depth];
    if (context) *context = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
    Context *c = current_context();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->device;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(void **stream, unsigned) {
    Fake &f = fake();
    Context *c = current_context();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> lock(f.mutex);
    f.streams.push_back(new Stream{c});
    f.counters.stream_creates++;
    *stream = f.streams.back();
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(void *stream) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    for (size_t i = 0; i < f.streams.size(); i++) {
        if (f.streams[i] == stream) {
            delete f.streams[i];
            f.streams.erase(f.streams.begin() + long(i));
            f.counters.stream_destroys++;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuStreamSynchronize(void *) {
    fake().counters.stream_syncs++;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
    Fake &f = fake();
    if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    void *p = std::malloc(bytes);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> lock(f.mutex);
    f.allocations.push_back({reinterpret_cast<CUdeviceptr>(p), bytes});
    f.counters.allocs++;
    *pointer = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
    Fake &f = fake();
    if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> lock(f.mutex);
    for (size_t i = 0; i < f.allocations.size(); i++) {
        if (f.allocations[i].pointer == pointer) {
            std::free(reinterpret_cast<void *>(pointer));
            f.allocations.erase(f.allocations.begin() + long(i));
            f.counters.frees++;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, void *stream) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (!in_allocation(f, dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
    f.counters.copies_to_device++;
    f.last_copy_stream = stream;
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, void *stream) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (!in_allocation(f, src, bytes)) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
    f.counters.copies_to_host++;
    f.last_copy_stream = stream;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(void **module, const void *image) {
    Fake &f = fake();
    Context *c = current_context();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> lock(f.mutex);
    // Test images are text (PTX, or stand-in cubins), so their end is their NUL.
    const char *text = static_cast<const char *>(image);
    f.last_image.assign(text, strnlen(text, 1 << 20));
    f.counters.module_loads++;
    if (int result = f.module_load_result) {
        f.module_load_result = 0; // the next load only
        return result;
    }
    f.modules.push_back(new Module{c, f.last_image});
    *module = f.modules.back();
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(void *module) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    for (size_t i = 0; i < f.modules.size(); i++) {
        if (f.modules[i] == module) {
            delete f.modules[i];
            f.modules.erase(f.modules.begin() + long(i));
            f.counters.module_unloads++;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.functions.push_back(new Function{static_cast<Module *>(module), name});
    f.counters.function_lookups++;
    *function = f.functions.back();
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (extra) return CUDA_ERROR_INVALID_VALUE;
    if (f.launch_result) return f.launch_result;
    FakeCudaLaunch &l = f.last_launch;
    l = {};
    std::strncpy(l.name, static_cast<Function *>(function)->name.c_str(), sizeof(l.name) - 1);
    l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
    l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
    l.shared_bytes = shared;
    l.stream = stream;
    l.context = current_context();
    l.arg_count = int(f.arg_sizes.size());
    for (int i = 0; i < l.arg_count && i < fake_cuda_max_args; i++) {
        size_t n = f.arg_sizes[size_t(i)] < 16 ? f.arg_sizes[size_t(i)] : 16;
        std::memcpy(l.args[i], params[i], n);
    }
    f.launched = true;
    f.counters.launches++;
    f.clock_ms += f.launch_ms;
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(void **event, unsigned) {
    Fake &f = fake();
    if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> lock(f.mutex);
    f.events.push_back(new Event{nullptr, 0});
    *event = f.events.back();
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(void *event) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    for (size_t i = 0; i < f.events.size(); i++) {
        if (f.events[i] == event) {
            delete f.events[i];
            f.events.erase(f.events.begin() + long(i));
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventRecord(void *event, void *stream) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    static_cast<Event *>(event)->stream = static_cast<Stream *>(stream);
    static_cast<Event *>(event)->time_ms = f.clock_ms;
    f.counters.event_records++;
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(void *) {
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *ms, void *start, void *stop) {
    Fake &f = fake();
    std::lock_guard<std::mutex> lock(f.mutex);
    *ms = float(static_cast<Event *>(stop)->time_ms - static_cast<Event *>(start)->time_ms);
    return CUDA_SUCCESS;
}

} // extern "C"
// NOLINTEND(readability-identifier-naming)
