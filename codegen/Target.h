// The machine a pipeline is compiled for: an LLVM triple, CPU and feature string, the natural
// vector width, and whether floating point may be relaxed. Its string form is stable, so it can
// key caches and tuning records.
#pragma once

#include <string>
#include <vector>

#include "lang/Type.h"

namespace kiln {

/// The GPU API that kernels (loops bound to gpu_blocks/gpu_threads) are compiled for.
enum class GpuApi { None, CUDA, OpenCL };
/// "none", "cuda", "opencl": the spelling of the target's text form.
const char *gpu_api_name(GpuApi api);
/// Parses gpu_api_name's spelling; false for anything else.
bool parse_gpu_api(const std::string &text, GpuApi *out);

struct Target {
    std::string triple;   ///< LLVM target triple, e.g. "x86_64-unknown-linux-gnu"
    std::string cpu;      ///< LLVM CPU name, e.g. "skylake-avx512"
    std::string features; ///< LLVM feature string, sorted: "+avx2,+avx512f,-sse4a,..."
    /// Allows reassociation, contraction into fused multiply-add and ignoring NaN and infinity.
    bool fast_math = false;
    /// The widest vector register in bits (512 with AVX-512, 256 with AVX, else 128).
    int vector_bits = 128;
    /// The API of GPU kernels; host code always runs on the CPU described above.
    GpuApi gpu = GpuApi::None;
    /// For gpu=cuda, ahead-of-time objects: the architectures whose PTX (and cubin) the object
    /// embeds, as major * 10 + minor (80 = sm_80). A JIT-compiled pipeline embeds only the CUDA C
    /// source and the runtime compiles it for the device it finds.
    std::vector<int> cuda_archs = default_cuda_archs();
    static std::vector<int> default_cuda_archs() { return {80, 90}; }
    /// Per-Func profiling (Halide's Target::Profile): the code records how long each thread
    /// computes each Func (codegen/InjectProfiling.h), kiln_profiler_report prints the table,
    /// and the runtime prints it to stderr at exit unless KILN_PROFILE_AT_EXIT=0. Costs two clock
    /// reads per produce of a Func and per parallel task.
    bool profile = false;
    /// The thread count the kernel is planned for (TVM's num-cores): hand schedules whose tasks
    /// each work on data of their own (matmul's b_tasks, conv2d's tasks) make that many. 0, the
    /// default: the runtime's thread count where the schedule is built (kiln_get_num_threads():
    /// KILN_NUM_THREADS, else the machine's cores). Set it when compiling ahead of time for a
    /// machine with another core count ("host;threads=64"). Parallel loops run on as many
    /// threads as the runtime has at run time whatever it says; it only shapes the tasks.
    int threads = 0;

    /// This target with GPU kernels compiled for api: `Target::host().with_gpu(GpuApi::OpenCL)`.
    Target with_gpu(GpuApi api) const {
        Target t = *this;
        t.gpu = api;
        return t;
    }
    bool has_gpu() const { return gpu != GpuApi::None; }

    /// The machine this process runs on.
    static Target host();

    /// Whether features enables the named feature, e.g. has_feature("avx512f").
    bool has_feature(const std::string &name) const;

    /// The feature a matrix-unit tile multiply (Stage::tensorize) of inputs of this type needs
    /// besides amx-tile: "amx-bf16" for bfloat16, "amx-int8" for 8-bit integers.
    static const char *matrix_unit_feature(Type input);
    /// Whether this is an x86 target whose matrix unit (AMX: amx-tile and matrix_unit_feature)
    /// multiplies tiles of this input type: what the code generator requires of a tensorized
    /// nest, and what the automatic search space asks before it offers tensorize.
    bool has_matrix_unit(Type input) const;

    /// The stable text form:
    /// "triple=...;cpu=...;features=...;vector_bits=512;fast_math=0", then ";gpu=cuda" or
    /// ";gpu=opencl" when the target has a GPU API (so CPU-only keys are what they always were),
    /// then ";cuda_archs=sm_80,sm_90" for gpu=cuda when the list is not the default, then
    /// ";profile=1" when profiling, then ";threads=N" when threads is set.
    std::string to_string() const;

    /// Parses the text form of to_string(); keys may come in any order and missing ones keep
    /// their defaults. Raises CompileError on an unknown key or a malformed value.
    static Target from_string(const std::string &text);

    /// The target a user names on a command line or in kiln_add_kernel: "host" (this machine,
    /// all its features), a CPU name LLVM knows for this machine's architecture (the x86-64
    /// levels "x86-64-v2", "x86-64-v3", "x86-64-v4", or "skylake-avx512", "znver4", ...: the
    /// host's triple with exactly that CPU's features, so the code runs on any machine that has
    /// them), either followed by "-cuda" or "-opencl" (GPU kernels), by "-profile" (profiling,
    /// "host-profile", "host-cuda-profile") and by ";key=value..." to change fields
    /// ("x86-64-v3-cuda;cuda_archs=sm_90", "host;threads=64"), or a full to_string() text. Raises
    /// CompileError for an unknown CPU (naming some known ones) and as from_string.
    static Target parse(const std::string &text);

    bool operator==(const Target &o) const = default;
};

} // namespace kiln
