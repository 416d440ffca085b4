// Device buffers with Halide's dirty-bit protocol, and the checks around kernel launches, for any
// kiln_device_interface_t. The interfaces themselves (kiln_opencl.cpp) only move bytes and run
// kernels; deciding when a copy is needed happens here, once, so every backend agrees.
#include "runtime/kiln_runtime.h"

#include <cstdio>

namespace {

int64_t copies_to_device = 0; // atomics
int64_t copies_to_host = 0;

void count(int64_t &counter) {
    __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

const char *interface_name(const kiln_device_interface_t *iface) {
    return iface && iface->name ? iface->name : "<unnamed>";
}

bool has_bit(const kiln_buffer_t *b, uint64_t bit) {
    return b && (b->flags & bit) != 0;
}

void set_bit(kiln_buffer_t *b, uint64_t bit, int on) {
    if (!b) return;
    if (on)
        b->flags |= bit;
    else
        b->flags &= ~bit;
}

int check_interface(const char *fn, const kiln_device_interface_t *iface) {
    if (!iface)
        return kiln_error(kiln_error_device_unavailable, "%s: the device interface is null", fn);
    return kiln_success;
}

int both_dirty_error(const char *fn, const kiln_buffer_t *b) {
    return kiln_error(kiln_error_generic,
                      "%s: both the host and the device copy of the buffer changed (host_dirty and "
                      "device_dirty are both set on '%s'); one of them would be lost",
                      fn, interface_name(b->device_interface));
}

} // namespace

extern "C" {

int kiln_buffer_device_malloc(kiln_buffer_t *b, const kiln_device_interface_t *iface) {
    const char *fn = "kiln_buffer_device_malloc";
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (int code = check_interface(fn, iface)) return code;
    if (b->device) {
        if (b->device_interface == iface) return kiln_success;
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer already has a device copy on '%s', not on '%s'; free it "
                          "first (kiln_buffer_copy_to_host, then kiln_buffer_device_free)",
                          fn, interface_name(b->device_interface), interface_name(iface));
    }
    return iface->device_malloc(b);
}

int kiln_buffer_prepare_output(kiln_buffer_t *b, const kiln_device_interface_t *iface) {
    if (kiln_buffer_host_dirty(b)) return kiln_buffer_copy_to_device(b, iface);
    return kiln_buffer_device_malloc(b, iface);
}

int kiln_buffer_copy_to_device(kiln_buffer_t *b, const kiln_device_interface_t *iface) {
    const char *fn = "kiln_buffer_copy_to_device";
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (int code = check_interface(fn, iface)) return code;
    if (kiln_buffer_host_dirty(b) && kiln_buffer_device_dirty(b)) return both_dirty_error(fn, b);
    bool had_device = b->device != 0;
    if (had_device && b->device_interface != iface)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the buffer has a device copy on '%s', not on '%s'; copy it to the "
                          "host and free it first",
                          fn, interface_name(b->device_interface), interface_name(iface));
    if (!had_device) {
        if (int code = iface->device_malloc(b)) return code;
    }
    if ((!had_device && b->host) || kiln_buffer_host_dirty(b)) {
        if (!b->host)
            return kiln_error(kiln_error_buffer_argument_null,
                              "%s: host_dirty is set but the buffer has no host memory", fn);
        if (int code = iface->copy_to_device(b)) {
            // A fresh device copy that never received the host's bytes must not look current.
            if (!had_device) {
                char message[1024];
                std::snprintf(message, sizeof(message), "%s", kiln_last_error_message());
                iface->device_free(b);
                kiln_error(code, "%s", message);
            }
            return code;
        }
        count(copies_to_device);
    }
    kiln_buffer_set_host_dirty(b, 0);
    return kiln_success;
}

int kiln_buffer_copy_to_host(kiln_buffer_t *b) {
    const char *fn = "kiln_buffer_copy_to_host";
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "%s: the buffer is null", fn);
    if (!kiln_buffer_device_dirty(b)) return kiln_success;
    if (kiln_buffer_host_dirty(b)) return both_dirty_error(fn, b);
    if (!b->device || !b->device_interface)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: device_dirty is set but the buffer has no device copy%s", fn,
                          b->device ? " with an interface (device_interface is null)" : "");
    if (!b->host)
        return kiln_error(kiln_error_buffer_argument_null,
                          "%s: the buffer has no host memory to copy into (host is null); point "
                          "host at %zu bytes first",
                          fn, kiln_buffer_size_in_bytes(b));
    if (int code = b->device_interface->copy_to_host(b)) return code;
    count(copies_to_host);
    kiln_buffer_set_device_dirty(b, 0);
    return kiln_success;
}

int kiln_buffer_device_free(kiln_buffer_t *b) {
    if (!b || !b->device) return kiln_success;
    if (!b->device_interface || (b->flags & kiln_buffer_flag_device_not_owned)) {
        // A handle kiln did not allocate and must not free (a CUDA tensor from DLPack, a wrapped
        // CUDA pointer).
        b->device = 0;
        b->device_interface = nullptr;
        b->flags &= ~uint64_t(kiln_buffer_flag_device_dirty | kiln_buffer_flag_device_not_owned);
        return kiln_success;
    }
    return b->device_interface->device_free(b);
}

int kiln_buffer_device_sync(kiln_buffer_t *b) {
    if (!b || !b->device_interface) return kiln_success;
    return b->device_interface->synchronize();
}

void kiln_buffer_set_host_dirty(kiln_buffer_t *b, int dirty) {
    set_bit(b, kiln_buffer_flag_host_dirty, dirty);
}

void kiln_buffer_set_device_dirty(kiln_buffer_t *b, int dirty) {
    set_bit(b, kiln_buffer_flag_device_dirty, dirty);
}

int kiln_buffer_host_dirty(const kiln_buffer_t *b) {
    return has_bit(b, kiln_buffer_flag_host_dirty) ? 1 : 0;
}

int kiln_buffer_device_dirty(const kiln_buffer_t *b) {
    return has_bit(b, kiln_buffer_flag_device_dirty) ? 1 : 0;
}

int kiln_device_launch(const kiln_device_interface_t *iface, const char *source, size_t source_size,
                       const char *kernel_name, const int32_t blocks[3], const int32_t threads[3],
                       int32_t num_args, void **args, const size_t *arg_sizes,
                       const int8_t *arg_is_buffer) {
    const char *fn = "kiln_device_launch";
    if (int code = check_interface(fn, iface)) return code;
    const char *kernel = kernel_name ? kernel_name : "<unnamed>";
    if (!kernel_name || !source)
        return kiln_error(kiln_error_internal, "%s: kernel '%s' has a null %s", fn, kernel,
                          source ? "name" : "source");
    if (!blocks || !threads)
        return kiln_error(kiln_error_internal, "%s: kernel '%s': the %s array is null", fn, kernel,
                          blocks ? "threads" : "blocks");
    bool empty = false;
    for (int i = 0; i < 3; i++) {
        if (threads[i] < 1)
            return kiln_error(kiln_error_internal,
                              "%s: kernel '%s': threads[%d] is %d; every block size must be >= 1",
                              fn, kernel, i, threads[i]);
        if (blocks[i] < 0)
            return kiln_error(kiln_error_internal,
                              "%s: kernel '%s': blocks[%d] is %d; block counts must be >= 0", fn,
                              kernel, i, blocks[i]);
        empty = empty || blocks[i] == 0;
    }
    if (num_args < 0 || (num_args > 0 && (!args || !arg_sizes || !arg_is_buffer)))
        return kiln_error(kiln_error_internal,
                          "%s: kernel '%s': %d arguments with a null args, arg_sizes or "
                          "arg_is_buffer array",
                          fn, kernel, num_args);
    for (int32_t i = 0; i < num_args; i++) {
        if (!arg_is_buffer[i]) continue;
        const kiln_buffer_t *b = args[i] ? *static_cast<kiln_buffer_t *const *>(args[i]) : nullptr;
        if (!b)
            return kiln_error(kiln_error_buffer_argument_null,
                              "%s: kernel '%s' argument %d is a null buffer", fn, kernel, i);
        if (!b->device)
            return kiln_error(kiln_error_device_unavailable,
                              "%s: kernel '%s' argument %d is a buffer without a device copy; "
                              "call kiln_buffer_copy_to_device (or kiln_buffer_device_malloc) "
                              "with the '%s' interface first",
                              fn, kernel, i, interface_name(iface));
        if (b->device_interface != iface)
            return kiln_error(kiln_error_device_unavailable,
                              "%s: kernel '%s' argument %d is a buffer whose device copy is on "
                              "'%s', but the kernel runs on '%s'",
                              fn, kernel, i,
                              b->device_interface ? interface_name(b->device_interface)
                                                  : "no interface",
                              interface_name(iface));
    }
    if (empty) return kiln_success;
    return iface->run(source, source_size, kernel_name, blocks, threads, num_args, args, arg_sizes,
                      arg_is_buffer);
}

kiln_buffer_t *kiln_device_buffer_wrap(void *host, int64_t bytes) {
    if (bytes < 0 || bytes > INT32_MAX) {
        kiln_error(kiln_error_bad_dimensions,
                   "kiln_device_buffer_wrap: %lld bytes; a wrapped allocation holds 0 to %d bytes",
                   static_cast<long long>(bytes), INT32_MAX);
        return nullptr;
    }
    // The descriptor and its one dimension share a block.
    void *block = kiln_malloc(sizeof(kiln_buffer_t) + sizeof(kiln_dimension_t));
    if (!block) return nullptr;
    kiln_buffer_t *b = static_cast<kiln_buffer_t *>(block);
    kiln_dimension_t *dim = reinterpret_cast<kiln_dimension_t *>(b + 1);
    *dim = kiln_dimension_t{0, static_cast<int32_t>(bytes), 1, 0};
    *b = kiln_buffer_t{};
    b->host = static_cast<uint8_t *>(host);
    b->type = kiln_type_t{kiln_type_uint, 8, 1};
    b->dimensions = 1;
    b->dim = dim;
    return b;
}

void kiln_device_buffer_release(kiln_buffer_t *b) {
    if (!b) return;
    kiln_buffer_device_free(b);
    kiln_free(b);
}

void kiln_device_copy_counts(int64_t *to_device, int64_t *to_host) {
    if (to_device) *to_device = __atomic_load_n(&copies_to_device, __ATOMIC_RELAXED);
    if (to_host) *to_host = __atomic_load_n(&copies_to_host, __ATOMIC_RELAXED);
}

void kiln_device_reset_copy_counts(void) {
    __atomic_store_n(&copies_to_device, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&copies_to_host, 0, __ATOMIC_RELAXED);
}

} // extern "C"
