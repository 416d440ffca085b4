// The pieces the device interfaces share (see kiln_device_internal.h).
#include "runtime/kiln_device_internal.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace kiln_runtime_internal {

/* ---- Loading a library ---------------------------------------------------------------------- */

void *kiln_internal_open_library(const char *path, char *why, size_t why_size) {
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library && why) {
        const char *error = dlerror();
        std::snprintf(why, why_size, "%s", error ? error : "unknown reason");
    }
    return library;
}

void *kiln_internal_find_symbol(void *library, const char *symbol) {
    return dlsym(library, symbol);
}

/* ---- Caches of programs and kernels --------------------------------------------------------- */

uint64_t kiln_internal_fnv1a(const void *data, size_t size, uint64_t h) {
    const uint8_t *bytes = static_cast<const uint8_t *>(data);
    for (size_t i = 0; i < size; i++) {
        h ^= bytes[i];
        h *= 1099511628211ull;
    }
    return h;
}

bool kiln_internal_same_bytes(const CachedBytes &key, uint64_t hash, const char *data,
                              size_t size) {
    return key.hash == hash && key.size == size && std::memcmp(key.bytes, data, size) == 0;
}

char *kiln_internal_copy_bytes(const char *data, size_t size) {
    char *copy = static_cast<char *>(std::malloc(size ? size : 1));
    if (copy) std::memcpy(copy, data, size);
    return copy;
}

int kiln_internal_check_kernel_name(const char *api, const char *name, size_t *length) {
    *length = std::strlen(name);
    if (*length >= max_kernel_name)
        return kiln_error(kiln_error_internal,
                          "%s: kernel name '%.40s...' has %zu bytes; at most %zu are supported",
                          api, name, *length, max_kernel_name - 1);
    return kiln_success;
}

/* ---- Buffers -------------------------------------------------------------------------------- */

const char *kiln_internal_interface_name(const kiln_buffer_t *b, const char *fallback) {
    return b->device_interface && b->device_interface->name ? b->device_interface->name : fallback;
}

int kiln_internal_check_strides(const char *fn, const kiln_buffer_t *b, bool limit_dimensions) {
    if (b->dimensions > 0 && !b->dim)
        return kiln_error(kiln_error_bad_dimensions,
                          "%s: the buffer has %d dimensions but a null dim array", fn,
                          b->dimensions);
    if (limit_dimensions && b->dimensions > max_copy_dimensions)
        return kiln_error(kiln_error_bad_dimensions,
                          "%s: a buffer with %d dimensions cannot be copied (at most %d)", fn,
                          b->dimensions, max_copy_dimensions);
    for (int i = 0; i < b->dimensions; i++) {
        if (b->dim[i].stride < 0 && b->dim[i].extent > 1)
            return kiln_error(kiln_error_bad_stride,
                              "%s: dimension %d of the buffer has stride %d; device copies need "
                              "non-negative strides",
                              fn, i, b->dim[i].stride);
    }
    return kiln_success;
}

int kiln_internal_check_malloc(const char *fn, const kiln_buffer_t *b, bool limit_dimensions) {
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (b->device)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer already has a device copy; free it first", fn);
    return kiln_internal_check_strides(fn, b, limit_dimensions);
}

int kiln_internal_check_copy(const char *fn, const kiln_buffer_t *b,
                             const kiln_device_interface_t *interface, const char *kind,
                             bool limit_dimensions) {
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (!b->host)
        return kiln_error(kiln_error_buffer_argument_null,
                          "%s: the buffer has no host memory (host is null)", fn);
    if (!b->device)
        return kiln_error(kiln_error_device_unavailable, "%s: the buffer has no device copy", fn);
    if (b->device_interface != interface)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer's device copy is not %s (interface '%s')", fn, kind,
                          kiln_internal_interface_name(b, "none"));
    return kiln_internal_check_strides(fn, b, limit_dimensions);
}

int kiln_internal_check_free(const char *fn, const kiln_buffer_t *b,
                             const kiln_device_interface_t *interface) {
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (b->device && b->device_interface && b->device_interface != interface)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer's device copy belongs to interface '%s'", fn,
                          kiln_internal_interface_name(b, "<unnamed>"));
    return kiln_success;
}

Runs kiln_internal_plan_runs(const kiln_buffer_t *b, size_t span) {
    Runs runs = {};
    runs.element_bytes = size_t((b->type.bits + 7) / 8) * b->type.lanes;
    int64_t run_elements = 1;
    while (runs.first_outer < b->dimensions) {
        const kiln_dimension_t &d = b->dim[runs.first_outer];
        if (d.extent != 1 && d.stride != run_elements) break;
        run_elements *= d.extent;
        runs.first_outer++;
    }
    runs.run_bytes = size_t(run_elements) * runs.element_bytes;
    runs.dense = runs.first_outer == b->dimensions || runs.run_bytes == span;
    return runs;
}

bool kiln_internal_is_dense(const kiln_buffer_t *b, size_t span) {
    return kiln_internal_plan_runs(b, span).dense;
}

/* ---- Launches ------------------------------------------------------------------------------- */

int kiln_internal_check_launch(const char *fn, const char *source, const char *kernel_name,
                               const int32_t blocks[3], const int32_t threads[3], int32_t num_args,
                               void **args, const size_t *arg_sizes, const int8_t *arg_is_buffer,
                               bool *empty) {
    *empty = false;
    if (!source || !kernel_name || !blocks || !threads)
        return kiln_error(kiln_error_internal, "%s: null source, kernel name, blocks or threads",
                          fn);
    if (num_args < 0 || (num_args > 0 && (!args || !arg_sizes || !arg_is_buffer)))
        return kiln_error(kiln_error_internal,
                          "%s: kernel '%s': %d arguments with a null args, arg_sizes or "
                          "arg_is_buffer array",
                          fn, kernel_name, num_args);
    for (int i = 0; i < 3; i++) {
        if (threads[i] < 1 || blocks[i] < 0)
            return kiln_error(kiln_error_internal,
                              "%s: kernel '%s': blocks[%d] = %d and threads[%d] = %d; blocks must "
                              "be >= 0 and threads >= 1",
                              fn, kernel_name, i, blocks[i], i, threads[i]);
        if (blocks[i] == 0) {
            *empty = true;
            return kiln_success;
        }
    }
    return kiln_success;
}

int kiln_internal_buffer_argument(const char *kernel_name, int32_t i, void *arg,
                                  const kiln_device_interface_t *interface, const char *no_copy,
                                  const kiln_buffer_t **out) {
    const kiln_buffer_t *b = arg ? *static_cast<kiln_buffer_t *const *>(arg) : nullptr;
    if (!b || !b->device || b->device_interface != interface)
        return kiln_error(kiln_error_device_unavailable, "kernel '%s' argument %d: %s", kernel_name,
                          i, !b ? "the buffer is null" : no_copy);
    *out = b;
    return kiln_success;
}

/* ---- Compiler logs -------------------------------------------------------------------------- */

void kiln_internal_quote_lines(const LogLines &lines, const char *source, size_t source_size,
                               const char *prefix, char *out, size_t capacity) {
    out[0] = '\0';
    size_t used = 0;
    for (int k = 0; k < lines.count; k++) {
        long current = 1;
        size_t start = 0;
        while (start < source_size && current < lines.lines[k]) {
            if (source[start] == '\n') current++;
            start++;
        }
        if (current != lines.lines[k]) continue;
        size_t end = start;
        while (end < source_size && source[end] != '\n' && source[end] != '\r')
            end++;
        int length = int(end - start > 200 ? 200 : end - start);
        int written = std::snprintf(out + used, capacity - used, "%s:%ld: %.*s\n", prefix,
                                    lines.lines[k], length, source + start);
        if (written < 0) break;
        used += size_t(written);
        if (used >= capacity) return;
    }
}

} // namespace kiln_runtime_internal
