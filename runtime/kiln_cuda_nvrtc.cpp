// NVRTC at run time, for CUDA kernels that reach the runtime as source (or a bundle without an
// image for the device): libnvrtc is opened with dlopen on first use (the runtime cannot link the
// compiler's codegen/NVRTC.cpp, nor the C++ library it uses), and what it produces is kept in an
// on-disk cache, because a compile costs a few hundred milliseconds per kernel and process. The
// options are the compiler's (codegen/NVRTC.cpp), so a kernel means the same whether it was
// compiled ahead of time or here.
#include "runtime/kiln_device_internal.h"
#include "runtime/kiln_lock.h"
#include "runtime/kiln_runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// NOLINTBEGIN(readability-identifier-naming): NVRTC's names
namespace {

using namespace kiln_runtime_internal;

using nvrtcResult = int;
using nvrtcProgram = struct kiln_runtime_nvrtc_program *;
constexpr nvrtcResult NVRTC_SUCCESS = 0;

#define KILN_NVRTC_FUNCTIONS(X)                                                                    \
    X(nvrtcVersion, nvrtcResult, (int *, int *))                                                   \
    X(nvrtcGetErrorString, const char *, (nvrtcResult))                                            \
    X(nvrtcCreateProgram, nvrtcResult,                                                             \
      (nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *)) \
    X(nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram *))                                          \
    X(nvrtcCompileProgram, nvrtcResult, (nvrtcProgram, int, const char *const *))                  \
    X(nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram, size_t *))                               \
    X(nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram, char *))                                     \
    X(nvrtcGetPTXSize, nvrtcResult, (nvrtcProgram, size_t *))                                      \
    X(nvrtcGetPTX, nvrtcResult, (nvrtcProgram, char *))                                            \
    X(nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram, size_t *))                                    \
    X(nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram, char *))

struct Functions {
// NOLINTNEXTLINE(bugprone-macro-parentheses): params is a parameter list
#define KILN_DECLARE(name, result, params) result(*name) params;
    KILN_NVRTC_FUNCTIONS(KILN_DECLARE)
#undef KILN_DECLARE
};

struct State {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    void *library = nullptr; // kept loaded for the life of the process
    char library_name[256] = {};
    Functions nvrtc = {};
    int major = 0, minor = 0;
};

State state;

// The program name NVRTC puts in its log ("kiln.cu(12): error: ...").
constexpr char program_name[] = "kiln.cu";

int load_nvrtc(State &s) {
    if (s.library) return kiln_success;
    const char *custom = std::getenv("KILN_NVRTC");
    static const char *const names[] = {"libnvrtc.so.13",
                                        "libnvrtc.so.12",
                                        "libnvrtc.so",
                                        "/usr/local/cuda/lib64/libnvrtc.so.13",
                                        "/usr/local/cuda/lib64/libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so"};
    void *library = nullptr;
    const char *loaded = nullptr;
    char first_error[256] = "";
    if (custom && *custom) {
        char why[1024]; // error messages are cut at 1023 bytes anyway
        library = kiln_internal_open_library(custom, why, sizeof(why));
        loaded = custom;
        if (!library)
            return kiln_error(kiln_error_no_device,
                              "cuda: cannot load NVRTC from KILN_NVRTC=%s (%s)", custom, why);
    }
    for (size_t i = 0; !library && i < sizeof(names) / sizeof(names[0]); i++) {
        library = kiln_internal_open_library(names[i], i == 0 ? first_error : nullptr,
                                             sizeof(first_error));
        loaded = names[i];
    }
    if (!library)
        return kiln_error(kiln_error_no_device,
                          "cuda: cannot load NVRTC (libnvrtc.so.13, .so.12 or .so, on the library "
                          "path or in /usr/local/cuda/lib64): %s; install the CUDA toolkit's "
                          "NVRTC or set KILN_NVRTC",
                          first_error);
    Functions f = {};
    const char *missing = nullptr;
#define KILN_RESOLVE(name, result, params) resolve(library, #name, &f.name, &missing);
    KILN_NVRTC_FUNCTIONS(KILN_RESOLVE)
#undef KILN_RESOLVE
    if (missing) {
        dlclose(library);
        return kiln_error(kiln_error_no_device, "cuda: the NVRTC library %s has no function %s",
                          loaded, missing);
    }
    if (f.nvrtcVersion(&s.major, &s.minor) != NVRTC_SUCCESS) s.major = s.minor = 0;
    s.nvrtc = f;
    s.library = library;
    std::snprintf(s.library_name, sizeof(s.library_name), "%s", loaded);
    return kiln_success;
}

/* ---- The disk cache ------------------------------------------------------------------------- */

// mkdir -p; false when the folder cannot be made.
bool make_directories(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

// The cache folder (created), or false when there is none to use.
bool cache_directory(char *out, size_t size) {
    const char *kiln = std::getenv("KILN_CACHE_DIR");
    const char *xdg = std::getenv("XDG_CACHE_HOME");
    const char *home = std::getenv("HOME");
    int n = -1;
    if (kiln && *kiln)
        n = std::snprintf(out, size, "%s/cuda", kiln);
    else if (xdg && *xdg)
        n = std::snprintf(out, size, "%s/kiln/cuda", xdg);
    else if (home && *home)
        n = std::snprintf(out, size, "%s/.cache/kiln/cuda", home);
    if (n <= 0 || size_t(n) >= size) return false;
    return make_directories(out);
}

bool cache_file(char *out, size_t size, const char *source, size_t source_size, int arch,
                int want_cubin, int major, int minor) {
    char dir[3072];
    if (!cache_directory(dir, sizeof(dir))) return false;
    uint64_t h = kiln_internal_fnv1a(source, source_size);
    const int key[4] = {arch, want_cubin, major, minor};
    h = kiln_internal_fnv1a(key, sizeof(key), h);
    h = kiln_internal_fnv1a(&source_size, sizeof(source_size), h);
    int n = std::snprintf(out, size, "%s/%016llx-sm_%d-nvrtc%d.%d.%s", dir,
                          static_cast<unsigned long long>(h), arch, major, minor,
                          want_cubin ? "cubin" : "ptx");
    return n > 0 && size_t(n) < size;
}

// Reads a whole cached file into malloc'd memory; false when it is missing or unreadable.
bool read_cached(const char *path, void **image, size_t *image_size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return false;
    }
    size_t size = size_t(st.st_size);
    char *data = static_cast<char *>(std::malloc(size));
    size_t done = 0;
    while (data && done < size) {
        ssize_t got = read(fd, data + done, size - done);
        if (got <= 0) break;
        done += size_t(got);
    }
    close(fd);
    if (!data || done != size) {
        std::free(data);
        return false;
    }
    *image = data;
    *image_size = size;
    return true;
}

// Writes to a temporary file in the same folder and renames it, so a reader never sees half a
// file; any failure leaves the cache as it was.
void write_cached(const char *path, const void *image, size_t size) {
    char temp[4096];
    int n = std::snprintf(temp, sizeof(temp), "%s.tmp-XXXXXX", path);
    if (n <= 0 || size_t(n) >= sizeof(temp)) return;
    int fd = mkstemp(temp);
    if (fd < 0) return;
    const char *data = static_cast<const char *>(image);
    size_t done = 0;
    while (done < size) {
        ssize_t wrote = write(fd, data + done, size - done);
        if (wrote <= 0) break;
        done += size_t(wrote);
    }
    bool ok = done == size && fchmod(fd, 0644) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(temp, path) != 0) unlink(temp);
}

/* ---- Compiling ------------------------------------------------------------------------------ */

// The distinct lines (up to 4) the log names as "kiln.cu(N)".
LogLines log_lines(const char *log) {
    LogLines found = {};
    size_t prefix = sizeof(program_name) - 1;
    for (const char *p = std::strstr(log, program_name); p && !found.full();
         p = std::strstr(p + 1, program_name)) {
        if (p[prefix] != '(') continue;
        char *end = nullptr;
        long line = std::strtol(p + prefix + 1, &end, 10);
        if (end && *end == ')') found.add(line);
    }
    return found;
}

int compile_failed(State &s, nvrtcProgram program, nvrtcResult r, const char *source,
                   size_t source_size, const char *arch_option) {
    size_t log_size = 0;
    char *log = nullptr;
    if (s.nvrtc.nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 0) {
        log = static_cast<char *>(std::malloc(log_size + 1));
        if (log && s.nvrtc.nvrtcGetProgramLog(program, log) != NVRTC_SUCCESS) log[0] = '\0';
        if (log) log[log_size] = '\0';
    }
    const char *shown = log ? log : "";
    char lines[600];
    kiln_internal_quote_lines(log_lines(shown), source, source_size, "  kiln.cu", lines,
                              sizeof(lines));
    int code = kiln_error(
        kiln_error_device_compile,
        "cuda: nvrtc could not compile the kernel source for %s (%s)\n%s%slog:\n%s",
        arch_option + sizeof("--gpu-architecture=") - 1, s.nvrtc.nvrtcGetErrorString(r),
        *lines ? "the offending source line(s):\n" : "", lines, *shown ? shown : "(empty)");
    std::free(log);
    return code;
}

int compile(State &s, const char *source, size_t source_size, int arch, int want_cubin,
            void **image, size_t *image_size) {
    // NVRTC wants a NUL-terminated string.
    char *text = static_cast<char *>(std::malloc(source_size + 1));
    if (!text) return kiln_error(kiln_error_out_of_memory, "cuda: out of memory copying a source");
    std::memcpy(text, source, source_size);
    text[source_size] = '\0';
    nvrtcProgram program = nullptr;
    nvrtcResult r = s.nvrtc.nvrtcCreateProgram(&program, text, program_name, 0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS) {
        std::free(text);
        return kiln_error(kiln_error_device_compile, "cuda: nvrtcCreateProgram failed: %s",
                          s.nvrtc.nvrtcGetErrorString(r));
    }
    char arch_option[64];
    std::snprintf(arch_option, sizeof(arch_option), "--gpu-architecture=%s_%d",
                  want_cubin ? "sm" : "compute", arch);
    // The options of codegen/NVRTC.cpp: lang/IR.h's float semantics (no contraction, IEEE
    // division and square root, denormals kept).
    const char *options[] = {arch_option,   "--std=c++17",     "--fmad=false",
                             "--ftz=false", "--prec-div=true", "--prec-sqrt=true"};
    r = s.nvrtc.nvrtcCompileProgram(program, int(sizeof(options) / sizeof(options[0])), options);
    int code = kiln_success;
    if (r != NVRTC_SUCCESS) {
        code = compile_failed(s, program, r, text, source_size, arch_option);
    } else {
        size_t size = 0;
        r = want_cubin ? s.nvrtc.nvrtcGetCUBINSize(program, &size)
                       : s.nvrtc.nvrtcGetPTXSize(program, &size);
        char *data =
            r == NVRTC_SUCCESS && size > 0 ? static_cast<char *>(std::malloc(size)) : nullptr;
        if (data)
            r = want_cubin ? s.nvrtc.nvrtcGetCUBIN(program, data)
                           : s.nvrtc.nvrtcGetPTX(program, data);
        if (!data || r != NVRTC_SUCCESS) {
            std::free(data);
            code = kiln_error(kiln_error_device_compile, "cuda: nvrtc returned no %s for %s (%s)",
                              want_cubin ? "cubin" : "PTX", arch_option,
                              s.nvrtc.nvrtcGetErrorString(r));
        } else {
            *image = data;
            *image_size = size;
        }
    }
    s.nvrtc.nvrtcDestroyProgram(&program);
    std::free(text);
    return code;
}

} // namespace
// NOLINTEND(readability-identifier-naming)

extern "C" int kiln_cuda_compile(const char *source, size_t source_size, int arch, int want_cubin,
                                 void **image, size_t *image_size) {
    const char *fn = "kiln_cuda_compile";
    if (!source || !image || !image_size)
        return kiln_error(kiln_error_internal, "%s: null source, image or image_size", fn);
    if (arch < 10 || arch > 9999)
        return kiln_error(kiln_error_generic,
                          "%s: architecture %d is not a compute capability major * 10 + minor "
                          "(e.g. 90 for sm_90)",
                          fn, arch);
    *image = nullptr;
    *image_size = 0;
    State &s = state;
    int major, minor;
    {
        Lock lock(s.mutex);
        if (int code = load_nvrtc(s)) return code;
        major = s.major;
        minor = s.minor;
    }
    char path[4096];
    bool cached =
        cache_file(path, sizeof(path), source, source_size, arch, want_cubin != 0, major, minor);
    if (cached && read_cached(path, image, image_size)) return kiln_success;
    // NVRTC is thread-safe; the functions were resolved once and never change.
    if (int code = compile(s, source, source_size, arch, want_cubin != 0, image, image_size))
        return code;
    if (cached) write_cached(path, *image, *image_size);
    return kiln_success;
}
