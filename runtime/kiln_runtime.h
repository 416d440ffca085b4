/* The C ABI that generated kernels and their users link: buffer descriptors, errors, aligned
 * allocation with a cache of freed blocks, parallel loops on OpenMP, and profiler counters.
 * Plain C99; depends on nothing but libc, libstdc++ and OpenMP. */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// The C ABI spells its types in snake_case with _t, like libc and Halide's runtime.
// NOLINTBEGIN(readability-identifier-naming)

/* ---- Types and buffers ---------------------------------------------------------------------- */

/// The kind of number held by each lane of an element.
typedef enum kiln_type_code_t {
    kiln_type_int = 0,
    kiln_type_uint = 1,
    kiln_type_float = 2,
    kiln_type_bool = 3
} kiln_type_code_t;

/// An element type: code (a kiln_type_code_t), bits per lane (1 for bool, stored as one byte) and
/// lanes. An element occupies ((bits + 7) / 8) * lanes bytes.
typedef struct kiln_type_t {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} kiln_type_t;

/// One dimension of a buffer: coordinates min .. min + extent - 1, stride in elements (not bytes;
/// may be negative). flags are reserved and must be zero.
typedef struct kiln_dimension_t {
    int32_t min, extent, stride;
    uint32_t flags;
} kiln_dimension_t;

/// Bits of kiln_buffer_t.flags.
typedef enum kiln_buffer_flag_t {
    /// The host copy is newer than the device copy.
    kiln_buffer_flag_host_dirty = 1,
    /// The device copy is newer than the host copy.
    kiln_buffer_flag_device_dirty = 2
} kiln_buffer_flag_t;

struct kiln_device_interface_t;

/// A strided view of memory, as in Halide: dim[0] is the innermost (fastest varying) dimension and
/// host points at the element whose coordinates are the mins of all dimensions. The descriptor
/// does not own its memory.
typedef struct kiln_buffer_t {
    /// Device handle (0 when the buffer has no device copy).
    uint64_t device;
    const struct kiln_device_interface_t *device_interface;
    uint8_t *host;
    /// kiln_buffer_flag_t bits.
    uint64_t flags;
    kiln_type_t type;
    int32_t dimensions;
    kiln_dimension_t *dim;
    void *padding;
} kiln_buffer_t;

/// Bytes spanned from the lowest to the highest addressed element (negative strides included);
/// 0 for a null buffer or one with an empty dimension.
size_t kiln_buffer_size_in_bytes(const kiln_buffer_t *b);

/// Checks a buffer argument before a pipeline touches it: not null, the expected type and number of
/// dimensions, non-negative extents, a host pointer. Returns kiln_success or an error code, with a
/// message naming the buffer (see kiln_last_error_message).
int kiln_buffer_check(const kiln_buffer_t *b, const char *name, kiln_type_t expected_type,
                      int expected_dims);

/// Checks that dimension dim of a (checked) buffer covers the coordinates
/// [needed_min, needed_min + needed_extent - 1]; an empty needed range always fits. Returns
/// kiln_success, kiln_error_bad_dimensions or kiln_error_access_out_of_bounds.
int kiln_buffer_check_region(const kiln_buffer_t *b, const char *name, int dim, int32_t needed_min,
                             int32_t needed_extent);

/* ---- Errors --------------------------------------------------------------------------------- */

/// Codes returned by every fallible runtime function and by generated pipelines.
enum kiln_error_code_t {
    kiln_success = 0,
    kiln_error_generic = -1,
    kiln_error_out_of_memory = -2,
    kiln_error_buffer_argument_null = -3,
    kiln_error_bad_type = -4,
    kiln_error_bad_dimensions = -5,
    kiln_error_access_out_of_bounds = -6,
    kiln_error_bad_stride = -7,
    kiln_error_param_out_of_range = -8,
    kiln_error_device_unavailable = -9,
    kiln_error_assertion_failed = -10,
    kiln_error_internal = -11
};

/// Records a printf-formatted message as this thread's last error and returns code, so callers
/// can write `return kiln_error(kiln_error_bad_type, "...", ...);`. Messages longer than 1023
/// bytes are truncated.
int kiln_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/// This thread's last error message, or "" when none was recorded since the last clear. An error
/// raised inside a kiln_parallel_for task is handed to the thread that called kiln_parallel_for.
const char *kiln_last_error_message(void);

/// Forgets this thread's last error message.
void kiln_clear_error(void);

/// The enumerator name of an error code ("kiln_error_bad_type"), or "unknown error code".
const char *kiln_error_code_name(int code);

/* ---- Memory --------------------------------------------------------------------------------- */

/// Allocates bytes aligned to 64 bytes, reusing a cached freed block of the same size class when
/// there is one. Returns NULL (and records an out-of-memory error) on failure; never NULL for 0.
void *kiln_malloc(size_t bytes);

/// Returns a block from kiln_malloc to the cache (or to the OS when the cache is full). NULL is
/// ignored; a pointer not from kiln_malloc, or freed twice, aborts with a message.
void kiln_free(void *p);

/// Returns every cached block to the OS.
void kiln_release_cached_memory(void);

/// Allocator counters. Bytes are counted by size class (what the block really holds).
typedef struct kiln_memory_stats_t {
    /// Successful kiln_malloc calls.
    uint64_t allocations;
    /// kiln_malloc calls served from the cache.
    uint64_t cache_hits;
    /// Bytes in blocks handed out and not yet freed.
    uint64_t bytes_live;
    /// Bytes in freed blocks kept for reuse.
    uint64_t bytes_cached;
} kiln_memory_stats_t;

/// Reads the allocator counters.
void kiln_get_memory_stats(kiln_memory_stats_t *stats);

/* ---- Parallelism ---------------------------------------------------------------------------- */

/// One iteration of a parallel loop; returns kiln_success or an error code.
typedef int (*kiln_task_fn)(void *user_context, int index, uint8_t *closure);

/// Runs fn for every index in [min, min + extent) on the OpenMP thread team, each exactly once.
/// Returns kiln_success, or the code of the lowest-indexed failing task (all tasks still run).
/// A call made from inside a task runs its loop serially on the calling thread.
int kiln_parallel_for(void *user_context, kiln_task_fn fn, int min, int extent, uint8_t *closure);

/// Sets the number of threads kiln_parallel_for uses; n <= 0 restores the default, which is
/// KILN_NUM_THREADS from the environment when it is a positive integer, else OpenMP's default.
void kiln_set_num_threads(int n);

/// The number of threads kiln_parallel_for uses.
int kiln_get_num_threads(void);

/* ---- Time and profiling --------------------------------------------------------------------- */

/// Nanoseconds on a monotonic clock with an arbitrary origin.
uint64_t kiln_current_time_ns(void);

/// Adds one call taking ns nanoseconds to the counter called name (thread-safe).
void kiln_profiler_record(const char *name, uint64_t ns);

/// Reads the counter called name; both outputs are 0 when it was never recorded. Either output
/// pointer may be NULL.
void kiln_profiler_query(const char *name, uint64_t *calls, uint64_t *total_ns);

/// Prints every counter, largest total first, as a table.
void kiln_profiler_report(FILE *out);

/// Forgets every counter.
void kiln_profiler_reset(void);

// NOLINTEND(readability-identifier-naming)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_RUNTIME_H */
