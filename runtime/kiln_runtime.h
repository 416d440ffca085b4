/* The C ABI that generated kernels and their users link: buffer descriptors, errors, aligned
 * allocation with a cache of freed blocks, parallel loops on OpenMP, profiler counters, and device
 * (GPU) buffers and kernel launches. Plain C99; depends on nothing but libc (dlopen included) and
 * OpenMP. Device drivers (libOpenCL.so.1) are loaded at run time, never linked. */
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
    kiln_type_bool = 3,
    /// bfloat16: the upper half of a float32, 16 bits per lane.
    kiln_type_bfloat = 4
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
    kiln_buffer_flag_device_dirty = 2,
    /// The device copy is borrowed (kiln_cuda_wrap_device_pointer): device_free only forgets it.
    kiln_buffer_flag_device_not_owned = 4
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
    kiln_error_internal = -11,
    /// No device driver or no device: the message names the library that failed to load, or says
    /// that no device was found.
    kiln_error_no_device = -12,
    /// A device kernel failed to build: the message holds the source lines the build log points
    /// at ("<kernel source>:12: ...") and the build log.
    kiln_error_device_compile = -13,
    /// A device API call failed: the message names the call and the driver's error name
    /// ("clEnqueueNDRangeKernel failed: CL_INVALID_WORK_GROUP_SIZE (-54)").
    kiln_error_device_run = -14,
    /// Device memory could not be allocated.
    kiln_error_device_memory = -15
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

/* ---- Matrix units -------------------------------------------------------------------------- */

/// Asks the operating system for the AMX tile registers (once per process; later calls return
/// the first answer). Pipelines with tensorized loops call it at entry. Returns kiln_success, or
/// kiln_error_device_unavailable with the reason.
int kiln_amx_request(void);

/* ---- Time and profiling --------------------------------------------------------------------- */

/// Nanoseconds on a monotonic clock with an arbitrary origin.
uint64_t kiln_current_time_ns(void);

/// Adds one call taking ns nanoseconds to the counter called name (thread-safe).
void kiln_profiler_record(const char *name, uint64_t ns);

/// Reads the counter called name; both outputs are 0 when it was never recorded. Either output
/// pointer may be NULL.
void kiln_profiler_query(const char *name, uint64_t *calls, uint64_t *total_ns);

/// Prints the per-Func profile of every profiled pipeline that ran (below), then every counter,
/// largest total first, as a table (left out when there are profiles and no counters).
void kiln_profiler_report(FILE *out);

/// Forgets every counter and zeroes every per-Func profile.
void kiln_profiler_reset(void);

/// Per-Func profiles of pipelines compiled for a target with profile=1 ("host-profile"): the
/// thread time each Func's own code took (its producers' excluded), summed over all threads and
/// calls, "(overhead)" for what lies outside every Func. Reads the figures of `func` in the
/// pipeline named `pipeline` (summed over modules of that name); returns 0 when there is none.
/// Either output pointer may be NULL. A process that ran a profiled pipeline prints the profiles
/// to stderr at exit unless KILN_PROFILE_AT_EXIT=0 is set. The tables hold 64 pipelines of 64
/// Funcs each (names cut at 47 characters); a pipeline or Func beyond that is not counted.
int kiln_profiler_func_query(const char *pipeline, const char *func, uint64_t *calls,
                             uint64_t *total_ns);

/// Called by the code of a profiled pipeline: makes Func `id` of the pipeline described by
/// `names` (its name, then its Funcs by id, one per line) current in this thread and returns the
/// one it replaced (-1: none); mode 1 starts a call, 2 ends it, 0 switches.
int32_t kiln_profiler_switch(const char *names, int32_t id, int32_t mode);

/* ---- Devices -------------------------------------------------------------------------------- */

/// A device API (OpenCL now, CUDA later) as a table of functions, in the manner of Halide's
/// halide_device_interface_t. Every function returns kiln_success or an error code with a message
/// (kiln_last_error_message). The first call that needs the driver loads it and creates the
/// process-wide context and queue; when there is no driver or no device, that call (and every
/// later one) returns kiln_error_no_device. The buffer functions below (kiln_buffer_copy_to_device
/// & co.) keep the dirty bits; these raw functions do not, except where noted.
typedef struct kiln_device_interface_t {
    /// "opencl" (later "cuda").
    const char *name;
    /// Allocates b->device for kiln_buffer_size_in_bytes(b) bytes (at least 1) and sets
    /// b->device_interface. The device copy holds those bytes starting at b->host (the element at
    /// the mins), so a kernel indexes it as the host does; negative strides are an error. Fails if
    /// b already has a device copy.
    int (*device_malloc)(kiln_buffer_t *b);
    /// Frees b's device copy (if any), sets b->device = 0 and b->device_interface = NULL, and
    /// clears the device_dirty bit. Copies nothing.
    int (*device_free)(kiln_buffer_t *b);
    /// Copies b's elements host -> device; both copies must exist. A dense buffer is copied as
    /// one block; otherwise only the elements are, so bytes between rows (which may belong to
    /// another buffer) are never written. Blocking: waits for queued kernels first (the queue is
    /// in order).
    int (*copy_to_device)(kiln_buffer_t *b);
    /// Copies b's elements device -> host; blocking, as copy_to_device.
    int (*copy_to_host)(kiln_buffer_t *b);
    /// Compiles (once per source text; programs and kernels are cached) and enqueues kernel
    /// kernel_name of source (a whole program, source_size bytes, NUL not required). The global
    /// size is blocks[i] * threads[i] and the work-group (block) size threads[i], i = 0, 1, 2.
    /// args[i] points at argument i's value: for a buffer (arg_is_buffer[i] != 0) at a
    /// kiln_buffer_t * whose device copy is passed (OpenCL: its cl_mem); else at a scalar of
    /// arg_sizes[i] bytes. A non-buffer argument with args[i] == NULL reserves arg_sizes[i] bytes
    /// of local (shared) memory for a `__local` pointer parameter. Does not wait for the kernel.
    int (*run)(const char *source, size_t source_size, const char *kernel_name,
               const int32_t blocks[3], const int32_t threads[3], int32_t num_args, void **args,
               const size_t *arg_sizes, const int8_t *arg_is_buffer);
    /// Waits for all queued work.
    int (*synchronize)(void);
    /// Frees the cached programs and kernels, the queue and the context; safe to call twice, and
    /// the next call that needs the device creates them again. Device copies allocated before can
    /// then only be freed (copies and launches with them are errors that say so): free them
    /// first. Must not run concurrently with other calls through the interface.
    int (*release)(void);
    /// Limits of the device the interface uses: the most threads (work-items) per block
    /// (work-group) and the bytes of shared (local) memory per block. Either pointer may be NULL.
    int (*device_limits)(int64_t *max_threads_per_block, int64_t *shared_memory_bytes);
    /// A one-line description of the device the interface uses, for tuning-database target keys
    /// and reports: "<device name>; <version or compute capability>; driver <version>" (OpenCL:
    /// "pthread-cpu-...; OpenCL 3.0 PoCL ...; driver 3.1"; CUDA: "NVIDIA H200; sm_90; driver
    /// 13000"). Writes at most size bytes, NUL-terminated (truncated if longer).
    int (*device_description)(char *out, size_t size);
    /// Starts the device timer: marks the queue (stream), so that timer_stop measures the work
    /// queued after this call on the device's own clock (OpenCL: a marker on a profiling queue;
    /// CUDA: an event, as kiln_cuda_timer_start). A second start restarts the timer.
    int (*timer_start)(void);
    /// Marks the queue again, waits for that mark and writes the device's milliseconds between
    /// the two marks to *ms: the time the device took for the work queued in between, gaps where
    /// it waited for the host included. An error (kiln_error_generic) without a started timer.
    int (*timer_stop)(double *ms);
} kiln_device_interface_t;

/// The OpenCL interface (name "opencl"). Never NULL and loads nothing: libOpenCL.so.1 (else
/// libOpenCL.so) is opened by the first call through the table. The device is the first GPU of the
/// first platform that has one, else the first device of any type; KILN_OPENCL_DEVICE=<text>
/// picks the first device whose name contains text; KILN_OPENCL_LIBRARY=<path> loads another
/// library. Programs are built without options; on a device with cl_khr_fp64 the extension is
/// enabled for every program, so kernels may use double without the pragma. The queue has
/// profiling enabled, for the timer.
const kiln_device_interface_t *kiln_opencl_device_interface(void);

/// GPU APIs, numbered as kiln::GpuApi (codegen/Target.h).
typedef enum kiln_gpu_api_t {
    kiln_gpu_api_none = 0,
    kiln_gpu_api_cuda = 1,
    kiln_gpu_api_opencl = 2
} kiln_gpu_api_t;

/// A CUDA kernel bundle: what generated host code for a gpu=cuda target passes to run() as the
/// kernel "source". Text that does not start with the magic is plain CUDA C source. Layout
/// (little-endian): the 8 bytes of KILN_CUDA_BUNDLE_MAGIC (no NUL), uint32 count, uint32 0, then
/// count kiln_cuda_bundle_entry_t, then the images; each entry's offset counts from the start of
/// the bundle. An ahead-of-time kernel holds PTX (and a cubin where NVRTC made one) for each
/// architecture it was built for, plus the CUDA C source, so a device of a newer architecture can
/// still compile it at run time.
#define KILN_CUDA_BUNDLE_MAGIC "KILNCUB1"
typedef enum kiln_cuda_image_kind_t {
    kiln_cuda_image_source = 0, ///< CUDA C source (arch 0)
    kiln_cuda_image_ptx = 1,    ///< PTX for compute capability arch (90 = sm_90)
    kiln_cuda_image_cubin = 2   ///< a cubin for sm_<arch>
} kiln_cuda_image_kind_t;
typedef struct kiln_cuda_bundle_entry_t {
    uint32_t kind; ///< a kiln_cuda_image_kind_t
    uint32_t arch; ///< major * 10 + minor; 0 for source
    uint64_t offset;
    uint64_t size;
} kiln_cuda_bundle_entry_t;

/// The device interface of a GPU API (a kiln_gpu_api_t): kiln_opencl_device_interface() for
/// OpenCL; for CUDA kiln_cuda_device_interface() if its driver loads, cuInit succeeds and there is
/// a device, else NULL with a kiln_error_no_device message naming the driver library and the
/// reason; NULL with kiln_error_no_device for anything else. (Defined in kiln_device_select.cpp.)
const kiln_device_interface_t *kiln_device_interface(int api);

/// Gives b a device copy on iface (uninitialized). No-op if b already has a device copy on iface;
/// an error if it has one on another interface.
int kiln_buffer_device_malloc(kiln_buffer_t *b, const kiln_device_interface_t *iface);

/// Gives b a device copy for a kernel that writes it without reading it: copies the host data
/// first only when it is newer (host_dirty, so what the kernel does not overwrite stays), else
/// only allocates (kiln_buffer_device_malloc).
int kiln_buffer_prepare_output(kiln_buffer_t *b, const kiln_device_interface_t *iface);

/// Makes b's device copy on iface current: allocates it if needed, copies host -> device if b had
/// no device copy (and has host memory) or its host_dirty bit is set, and clears host_dirty. An
/// error if both dirty bits are set (both copies changed) or b has a device copy on another
/// interface.
int kiln_buffer_copy_to_device(kiln_buffer_t *b, const kiln_device_interface_t *iface);

/// Makes b's host copy current: if device_dirty is set, copies device -> host and clears it; else
/// does nothing. An error if both dirty bits are set, or device_dirty is set and b has no host
/// memory or no device copy.
int kiln_buffer_copy_to_host(kiln_buffer_t *b);

/// Frees b's device copy, if any, copying nothing (see device_free). A device handle without an
/// interface (a CUDA tensor from DLPack without a CUDA driver) or one kiln does not own
/// (kiln_buffer_flag_device_not_owned) is only forgotten.
int kiln_buffer_device_free(kiln_buffer_t *b);

/// Waits for the queued work of b's device interface; kiln_success if b has none.
int kiln_buffer_device_sync(kiln_buffer_t *b);

/// Sets (dirty != 0) or clears a dirty bit of b->flags.
void kiln_buffer_set_host_dirty(kiln_buffer_t *b, int dirty);
void kiln_buffer_set_device_dirty(kiln_buffer_t *b, int dirty);

/// 1 if the dirty bit is set, else 0 (also for NULL).
int kiln_buffer_host_dirty(const kiln_buffer_t *b);
int kiln_buffer_device_dirty(const kiln_buffer_t *b);

/// Launches a kernel for generated host code: checks the arguments (threads >= 1, blocks >= 0,
/// every buffer argument has a device copy on iface), then calls iface->run with the same
/// arguments. Any blocks[i] == 0 means an empty launch: nothing runs and kiln_success is
/// returned. A buffer argument without a device copy is kiln_error_device_unavailable.
int kiln_device_launch(const kiln_device_interface_t *iface, const char *source, size_t source_size,
                       const char *kernel_name, const int32_t blocks[3], const int32_t threads[3],
                       int32_t num_args, void **args, const size_t *arg_sizes,
                       const int8_t *arg_is_buffer);

/// A 1-D uint8 buffer of bytes bytes (0 <= bytes <= INT32_MAX) over host (which may be NULL), for
/// an intermediate allocation of a pipeline that kernels touch: min 0, stride 1, flags 0, no
/// device copy. The descriptor comes from kiln_malloc; NULL (with a message) on failure.
kiln_buffer_t *kiln_device_buffer_wrap(void *host, int64_t bytes);

/// Frees b's device copy (if any) and the descriptor from kiln_device_buffer_wrap, not the host
/// memory. NULL is ignored.
void kiln_device_buffer_release(kiln_buffer_t *b);

/// Process-wide counts of the copies kiln_buffer_copy_to_device (host -> device) and
/// kiln_buffer_copy_to_host (device -> host) performed. Either pointer may be NULL.
void kiln_device_copy_counts(int64_t *to_device, int64_t *to_host);

/// Sets both copy counts to 0.
void kiln_device_reset_copy_counts(void);

/* ---- CUDA ------------------------------------------------------------------------------------ */

/// The CUDA interface (name "cuda"). Never NULL and loads nothing: the first call through the table
/// opens the driver API, libcuda.so.1 (or the path in KILN_CUDA_DRIVER), with dlopen, calls cuInit
/// and retains the primary context of device KILN_CUDA_DEVICE (default 0); kiln creates one stream
/// per context it uses. run() takes plain CUDA C source (compiled once with NVRTC for the device's
/// architecture, see kiln_cuda_compile) or a KILN_CUDA_BUNDLE_MAGIC bundle, from which it loads a
/// cubin of the device's major version and an architecture <= the device's, else the PTX of the
/// highest architecture <= the device's (the driver compiles it forward), else the bundle's source
/// with NVRTC; modules are cached per (bundle or source, context). Kernels declare their shared
/// memory statically: a null scalar argument (OpenCL's dynamic local memory) is an error.
const kiln_device_interface_t *kiln_cuda_device_interface(void);

/// Makes kiln use cu_context (a CUcontext of the caller's) for everything that follows: memory,
/// copies, modules and launches, on a stream kiln creates for it; NULL returns to the primary
/// context. Also resets the stream to kiln's own stream of that context (call kiln_cuda_set_stream
/// after). Process-wide. Device copies made in one context stay usable in another only where the
/// driver allows it (unified addressing). kiln_error_no_device when there is no driver.
int kiln_cuda_set_context(void *cu_context);

/// Makes launches, copies and synchronize() use cu_stream (a CUstream of the current context);
/// NULL returns to kiln's own stream. Process-wide; the caller keeps ownership of the stream.
int kiln_cuda_set_stream(void *cu_stream);

/// The CUstream that launches and copies use now (the caller's or kiln's own); NULL (with a
/// message) when there is no driver or device.
void *kiln_cuda_stream(void);

/// Gives b the device copy cu_deviceptr (a CUdeviceptr of the caller's, holding
/// kiln_buffer_size_in_bytes(b) bytes from the element at the mins) on the CUDA interface without
/// owning it: b gets kiln_buffer_flag_device_not_owned, and device_free only forgets it. An error
/// if b already has a device copy or cu_deviceptr is 0. Dirty bits are left as they are.
int kiln_cuda_wrap_device_pointer(kiln_buffer_t *b, uint64_t cu_deviceptr);

/// Forgets a device copy given by kiln_cuda_wrap_device_pointer (b->device = 0, no interface,
/// device_dirty and device_not_owned cleared) and frees nothing. An error if b's device copy is
/// not a wrapped CUDA pointer; kiln_success if b has no device copy.
int kiln_cuda_detach_device_pointer(kiln_buffer_t *b);

/// Records a start event on the current stream (for kiln_cuda_timer_stop).
int kiln_cuda_timer_start(void);

/// Records a stop event on the current stream, waits for it and writes the milliseconds since
/// kiln_cuda_timer_start to *ms. An error without a started timer, or if the context changed.
int kiln_cuda_timer_stop(float *ms);

/// Compiles CUDA C source (source_size bytes, NUL not required) with NVRTC, loaded at run time
/// (KILN_NVRTC=<path>, else libnvrtc.so.13, .so.12, .so, on the library path and then in
/// /usr/local/cuda/lib64), for compute capability arch (90 = sm_90): a cubin for sm_<arch> if
/// want_cubin, else PTX for compute_<arch> (NUL-terminated, the NUL counted in image_size). The
/// options are kiln's (C++17, no fused multiply-add, IEEE division and square root, denormals
/// kept). *image is malloc'd; free it with free(). Results are cached on disk in
/// $KILN_CACHE_DIR/cuda, else $XDG_CACHE_HOME/kiln/cuda, else $HOME/.cache/kiln/cuda, keyed by the
/// source, arch, kind and NVRTC version (a cache that cannot be written is skipped). Errors:
/// kiln_error_no_device without NVRTC; kiln_error_device_compile with the source lines the log
/// names and NVRTC's log.
int kiln_cuda_compile(const char *source, size_t source_size, int arch, int want_cubin,
                      void **image, size_t *image_size);

/* ---- Multi-target kernels ------------------------------------------------------------------ */

/// The CPU features a variant of a multi-target kernel may require, as LLVM names them; a
/// feature's bit in a mask is its position in this list (sse3 is bit 0). x86-64 only: on other
/// CPUs kiln_cpu_features() is 0. The code generator uses no feature outside the list (AMX and
/// the like), so these are the ones that decide whether a variant runs.
#define KILN_CPU_FEATURE_NAMES                                                                     \
    "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "movbe", "xsave", "lzcnt", "bmi",       \
        "bmi2", "adx", "aes", "pclmul", "sha", "avx", "avx2", "fma", "f16c", "vaes", "vpclmulqdq", \
        "gfni", "avxvnni", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl",              \
        "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg",                   \
        "avx512vpopcntdq", "avx512bf16", "avx512fp16"
/// How many names KILN_CPU_FEATURE_NAMES holds.
#define KILN_CPU_FEATURE_COUNT 36

/// The features of the CPU this process runs on (bits as in KILN_CPU_FEATURE_NAMES), read with
/// cpuid once; AVX and AVX-512 features count only when the operating system saves their
/// registers (xgetbv).
uint64_t kiln_cpu_features(void);

/// One variant of a multi-target kernel: its name (the CPU name of its target, e.g. "x86-64-v3")
/// and the features it requires.
typedef struct kiln_target_variant_t {
    const char *name;
    uint64_t required_features;
} kiln_target_variant_t;

/// Which variant of kernel a multi-target entry point runs; called by the entry point on each
/// call (a loop over a few masks). Without an override: the first variant, in the order the
/// targets were listed, whose required features this CPU has; if none has them, the last
/// (list the most portable target last). The override, kiln_force_target() or else the
/// environment variable KILN_FORCE_TARGET (read at the first call), names a variant by name or
/// by index (0 is the first listed); an override that names no variant of kernel, or a variant
/// whose features this CPU lacks, is an error (-1, with a message) rather than a crash. A
/// required bit past KILN_CPU_FEATURE_COUNT (a kernel from a newer kiln) counts as lacking.
int kiln_select_target_variant(const char *kernel, int count,
                               const kiln_target_variant_t *variants);

/// Makes every multi-target kernel of this process run the variant named (a name or an index,
/// as KILN_FORCE_TARGET; copied), or with NULL choose by CPU features again, ignoring
/// KILN_FORCE_TARGET from then on. For tests and benchmarks.
void kiln_force_target(const char *name);

/// The name of the variant that this thread's latest call of a multi-target kernel chose, or ""
/// before the first such call.
const char *kiln_last_target_variant(void);

/// Which variant of a shape-dispatched kernel (one schedule per tuned output shape, then a
/// generic one) runs for this output buffer: the first i < count - 1 whose `dimensions` extents
/// (extents[i * dimensions + d]) equal the output's, else count - 1 (the generic variant, which
/// also reports a null or malformed buffer). Called by the kernel's entry point on each call.
int kiln_select_shape_variant(const kiln_buffer_t *output, int count, int dimensions,
                              const int64_t *extents, const char *const *names);

/// The name of the variant ("4096x4096", "generic") that this thread's latest call of a
/// shape-dispatched kernel chose, or "" before the first such call.
const char *kiln_last_shape_variant(void);

// NOLINTEND(readability-identifier-naming)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_RUNTIME_H */
