// What the device interfaces (kiln_opencl.cpp, kiln_cuda.cpp, kiln_cuda_nvrtc.cpp) share, written
// once: loading a driver with dlopen, the checks of a buffer and of a launch, the runs of a strided
// host <-> device copy, the caches' hash and LRU slot, and quoting the source lines a compiler log
// names. Internal to the runtime, like kiln_lock.h: C-like C++ whose templates instantiate nothing
// from the C++ library, so the runtime still links with libc alone. The functions have C linkage
// (hence the kiln_internal_ prefix): a call between the runtime's files must not leave a mangled
// C++ name among the library's undefined symbols, which the AOT test reads to prove just that.
#pragma once

#include "runtime/kiln_runtime.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace kiln_runtime_internal {

/* ---- Loading a library ---------------------------------------------------------------------- */

/// dlopen(path, RTLD_NOW | RTLD_LOCAL); on failure writes dlerror's text (or "unknown reason") to
/// why, when why is not null.
extern "C" void *kiln_internal_open_library(const char *path, char *why, size_t why_size);

/// dlsym (declared here so that the template below needs no <dlfcn.h>).
extern "C" void *kiln_internal_find_symbol(void *library, const char *symbol);

/// Looks symbol up in library into *function; the first symbol that is missing goes to *missing.
template <typename Function>
void resolve(void *library, const char *symbol, Function *function, const char **missing) {
    *function = reinterpret_cast<Function>(kiln_internal_find_symbol(library, symbol));
    if (!*function && !*missing) *missing = symbol;
}

/// Remembers the last error (s.failure_code, s.failure) so that later calls fail fast; returns
/// code.
template <typename State>
int remember_failure(State &s, int code) {
    s.failure_code = code;
    std::snprintf(s.failure, sizeof(s.failure), "%s", kiln_last_error_message());
    return code;
}

/* ---- Caches of programs and kernels --------------------------------------------------------- */

/// FNV-1a of size bytes, continuing from h (chain calls to hash several pieces).
extern "C" uint64_t kiln_internal_fnv1a(const void *data, size_t size,
                                        uint64_t h = 14695981039346656037ull);

/// The bytes a cached program or module was made from.
struct CachedBytes {
    uint64_t hash; // kiln_internal_fnv1a of the bytes
    size_t size;
    char *bytes; // a copy (malloc), compared on lookup so a hash collision cannot mix entries
};

/// Whether key holds the size bytes of data, whose kiln_internal_fnv1a is hash.
extern "C" bool kiln_internal_same_bytes(const CachedBytes &key, uint64_t hash, const char *data,
                                         size_t size);

/// A malloc'd copy of data (at least one byte), or null when out of memory.
extern "C" char *kiln_internal_copy_bytes(const char *data, size_t size);

/// The longest kernel name the caches keep, with its NUL.
constexpr size_t max_kernel_name = 256;

/// kiln_error_internal ("<api>: kernel name ... at most 255 are supported") when name is too
/// long for the caches; sets *length.
extern "C" int kiln_internal_check_kernel_name(const char *api, const char *name, size_t *length);

/// The first entry of table that match accepts, marked as just used (last_use = ++*clock); -1
/// when there is none.
template <typename Entry, int N, typename Match>
int find_entry(Entry (&table)[N], uint64_t *clock, Match match) {
    for (int i = 0; i < N; i++) {
        if (!match(table[i])) continue;
        table[i].last_use = ++*clock;
        return i;
    }
    return -1;
}

/// A free slot of table, or the least recently used one (lowest last_use) after release(s, slot)
/// emptied it. Tables of hundreds of entries hold far more kernels than a process runs at once;
/// evicting costs only a rebuild.
template <typename State, typename Entry, int N>
int free_slot(State &s, Entry (&table)[N], bool (*used)(const Entry &),
              void (*release)(State &, int)) {
    int oldest = 0;
    for (int i = 0; i < N; i++) {
        if (!used(table[i])) return i;
        if (table[i].last_use < table[oldest].last_use) oldest = i;
    }
    release(s, oldest);
    return oldest;
}

/* ---- Buffers -------------------------------------------------------------------------------- */

/// The most dimensions of a buffer whose elements are copied run by run.
constexpr int max_copy_dimensions = 64;

/// The name of b's device interface, or fallback when it has none or the name is null.
extern "C" const char *kiln_internal_interface_name(const kiln_buffer_t *b, const char *fallback);

/// A device copy is the bytes from b->host on, so every stride must be non-negative; with
/// limit_dimensions, b may also have at most max_copy_dimensions dimensions.
extern "C" int kiln_internal_check_strides(const char *fn, const kiln_buffer_t *b,
                                           bool limit_dimensions);

/// device_malloc's checks: b is not null and has no device copy yet, then
/// kiln_internal_check_strides.
extern "C" int kiln_internal_check_malloc(const char *fn, const kiln_buffer_t *b,
                                          bool limit_dimensions);

/// The checks of a copy: b is not null, has host memory and a device copy on interface (described
/// in the error as `kind`, "a CUDA buffer"), then kiln_internal_check_strides.
extern "C" int kiln_internal_check_copy(const char *fn, const kiln_buffer_t *b,
                                        const kiln_device_interface_t *interface, const char *kind,
                                        bool limit_dimensions);

/// device_free's check: b is not null and its device copy, if any, is not another interface's.
extern "C" int kiln_internal_check_free(const char *fn, const kiln_buffer_t *b,
                                        const kiln_device_interface_t *interface);

/// How b's elements lie in the span bytes of its device copy: the innermost dimensions that are
/// dense together form a run of run_bytes; the dimensions from first_outer on repeat it.
struct Runs {
    size_t element_bytes;
    size_t run_bytes;
    int first_outer;
    bool dense; // one run of the whole span
};

extern "C" Runs kiln_internal_plan_runs(const kiln_buffer_t *b, size_t span);

/// Whether b's elements are one contiguous run of its span bytes.
extern "C" bool kiln_internal_is_dense(const kiln_buffer_t *b, size_t span);

/// Calls visit(byte_offset, bytes) for each contiguous run of b's elements, in the order of an
/// odometer over the outer dimensions, and returns the first nonzero result (else kiln_success); a
/// dense buffer is one run of its whole span. b has at most max_copy_dimensions dimensions.
template <typename Visit>
int for_each_run(const kiln_buffer_t *b, size_t span, Visit visit) {
    Runs runs = kiln_internal_plan_runs(b, span);
    if (runs.dense) return visit(size_t(0), span);
    int32_t index[max_copy_dimensions] = {};
    while (true) {
        int64_t offset = 0;
        for (int d = runs.first_outer; d < b->dimensions; d++)
            offset += int64_t(index[d]) * b->dim[d].stride;
        if (int code = visit(size_t(offset) * runs.element_bytes, runs.run_bytes)) return code;
        int d = runs.first_outer;
        while (d < b->dimensions && ++index[d] == b->dim[d].extent) {
            index[d] = 0;
            d++;
        }
        if (d == b->dimensions) return kiln_success;
    }
}

/* ---- Launches ------------------------------------------------------------------------------- */

/// run()'s checks of its arguments (kiln_error_internal). Sets *empty when a dimension has no
/// blocks, in which case there is nothing to run and the dimensions after it are not checked.
extern "C" int kiln_internal_check_launch(const char *fn, const char *source,
                                          const char *kernel_name, const int32_t blocks[3],
                                          const int32_t threads[3], int32_t num_args, void **args,
                                          const size_t *arg_sizes, const int8_t *arg_is_buffer,
                                          bool *empty);

/// The buffer that buffer argument i (arg, a kiln_buffer_t **) points at, which must have a device
/// copy on interface; else kiln_error_device_unavailable saying "the buffer is null" or no_copy.
extern "C" int kiln_internal_buffer_argument(const char *kernel_name, int32_t i, void *arg,
                                             const kiln_device_interface_t *interface,
                                             const char *no_copy, const kiln_buffer_t **out);

/* ---- Compiler logs -------------------------------------------------------------------------- */

/// The distinct source lines (>= 1) a compiler log names, in the order it names them; at most 4.
struct LogLines {
    long lines[4];
    int count;
    bool full() const { return count == 4; }
    void add(long line) {
        if (line < 1 || full()) return;
        for (int k = 0; k < count; k++) {
            if (lines[k] == line) return;
        }
        lines[count++] = line;
    }
};

/// Writes "<prefix>:N: <line N of source>\n" for each line (its first 200 characters; source need
/// not end with a NUL) into out, NUL-terminated and cut at capacity bytes. The lines come before
/// the log in an error, because messages are cut at 1023 bytes.
extern "C" void kiln_internal_quote_lines(const LogLines &lines, const char *source,
                                          size_t source_size, const char *prefix, char *out,
                                          size_t capacity);

} // namespace kiln_runtime_internal
