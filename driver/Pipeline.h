// Pipeline: the user-facing compiler. It lowers one or more output Funcs with their schedules,
// JIT-compiles them for a target (cached by a hash of the lowered code and the target, so
// realizing twice compiles once) and runs them on Buffers, binding Params and ImageParams from
// the values given with set(). Every level stays inspectable: the lowered loop nest, the LLVM IR
// and the assembly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/Target.h"
#include "lang/Buffer.h"
#include "lang/Func.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

class JITModule;
struct OutputSet;

/// A pipeline compiled in process.
class CompiledPipeline {
public:
    CompiledPipeline() = default;

    /// Runs on the given output buffers (one per output value, in order), with inputs and
    /// params bound with set(). Returns 0 or a kiln error code; see kiln_last_error_message().
    int run(const std::vector<BufferBase> &outputs) const;
    /// Like run(), but raises RuntimeError with the kiln message on failure.
    void realize_into(const std::vector<BufferBase> &outputs) const;

    const LoweredFunc &lowered() const;
    std::string llvm_ir() const;
    std::string assembly() const;
    /// The GPU kernels' source (CUDA C or OpenCL C, codegen/CodeGenDevice.h); empty for a
    /// pipeline without GPU loops.
    const std::string &device_source() const;
    double compile_time_ms() const;
    bool defined() const { return module != nullptr; }

private:
    friend class Pipeline;
    std::shared_ptr<const JITModule> module;
    std::shared_ptr<const LoweredFunc> func;
    std::shared_ptr<const std::string> source;
};

class Pipeline {
public:
    Pipeline(const Func &output) : outputs{output} {}
    explicit Pipeline(std::vector<Func> outputs) : outputs(std::move(outputs)) {}

    /// The output Funcs, in the order given.
    const std::vector<Func> &output_funcs() const { return outputs; }

    /// Lowers the pipeline as it is scheduled now.
    LoweredFunc lower(const std::string &name = "") const;
    /// The IR after each lowering pass, as text.
    std::string lowered_text(const std::string &name = "") const;

    /// Compiles (or fetches from the JIT cache) for the target.
    CompiledPipeline compile_jit(const Target &target = Target::host()) const;

    /// Ahead-of-time compilation (codegen/AOT.h): lowers under the
    /// entry-point name function_name (a C identifier) and writes each file of the set. The
    /// entry point takes the inputs (ImageParams and Params, by name) in argument_order, then the
    /// outputs; with no order, ImageParams and Params in the order they were declared, then
    /// Buffers used directly in the algorithm (by first use).
    void compile_to(const OutputSet &outputs, const std::string &function_name,
                    const Target &target = Target::host(),
                    const std::vector<std::string> &argument_order = {}) const;
    /// A multi-target kernel (codegen/AOT.h): the static library holds one variant per target
    /// and an entry point that runs, at each call, the first variant whose CPU features the
    /// running CPU has, else the last (list the most portable target last).
    void compile_to(const OutputSet &outputs, const std::string &function_name,
                    const std::vector<Target> &targets,
                    const std::vector<std::string> &argument_order = {}) const;
    /// dir/function_name.a and dir/function_name.h, for linking into a C or C++ program.
    void compile_to_static_library(const std::string &dir, const std::string &function_name,
                                   const Target &target = Target::host(),
                                   const std::vector<std::string> &argument_order = {}) const;
    /// dir/function_name.o and dir/function_name.h.
    void compile_to_file(const std::string &dir, const std::string &function_name,
                         const Target &target = Target::host(),
                         const std::vector<std::string> &argument_order = {}) const;

    /// Compiles if needed and evaluates the single-valued output over [0, extents).
    BufferBase realize(const std::vector<int> &extents,
                       const Target &target = Target::host()) const;
    /// Compiles if needed and evaluates into the given buffers (one per output value).
    void realize(const std::vector<BufferBase> &outputs,
                 const Target &target = Target::host()) const;

private:
    std::vector<Func> outputs;
};

/// JIT cache statistics, for tests and tools.
struct JITCacheStats {
    int64_t hits = 0, misses = 0;
    size_t entries = 0;
};
JITCacheStats jit_cache_stats();
void clear_jit_cache();

} // namespace kiln
