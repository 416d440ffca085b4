// Ahead-of-time compilation: a lowered pipeline written out as files a C or C++ program links,
// with no LLVM and no kiln compiler at run time (only the C runtime, libkiln_runtime.a).
//
//   Pipeline p(out);
//   p.compile_to_static_library("/tmp/k", "brighten");   // brighten.a + brighten.h
//   p.compile_to(OutputSet::in_directory("/tmp/k", "brighten"), "brighten"); // every kind
//
// The header declares `int brighten(kiln_buffer_t *in, ..., <scalar params>, kiln_buffer_t *out)`
// (inputs in the order given, see with_argument_order; then outputs) and
// `int brighten_argv(void **)`.
// It compiles as C99 and C++ and includes only kiln_runtime.h (and <stdbool.h> in C when a
// parameter is bool). The entry point returns 0 (kiln_success) or a kiln_error_code_t, with
// kiln_last_error_message() saying why. Buffers a pipeline uses directly (a Buffer in the
// algorithm, not an ImageParam) become input arguments too: a kernel embeds no data.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/Target.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

/// The files ahead-of-time compilation can write.
enum class OutputKind {
    Object,        ///< ELF relocatable object, ".o"
    StaticLibrary, ///< ar archive holding the object, ".a"
    CHeader,       ///< C99/C++ header declaring the entry points, ".h"
    Assembly,      ///< ".s"
    LLVMIR,        ///< optimized LLVM IR text, ".ll"
    LoweredStmt,   ///< the lowered loop nest as text, ".stmt"
    Metadata,      ///< JSON: name, target, signature, arguments, ".json"
    OpenCLSource,  ///< the GPU kernels as OpenCL C, ".cl" (written for gpu=opencl targets)
    CUDASource,    ///< the GPU kernels as CUDA C, ".cu" (written for gpu=cuda targets)
};

/// Every kind, in declaration order.
std::vector<OutputKind> all_output_kinds();
/// The file suffix of a kind: ".o", ".a", ".h", ".s", ".ll", ".stmt", ".json", ".cl", ".cu".
std::string output_suffix(OutputKind k);
/// The command-line name of a kind: object, static_library, c_header, assembly, llvm_ir,
/// lowered_stmt, metadata, opencl_source, cuda_source.
std::string output_kind_name(OutputKind k);
/// Parses output_kind_name(); CompileError listing the known names otherwise.
OutputKind parse_output_kind(const std::string &name);
/// Parses a comma-separated list of names ("object,c_header"), each kind once, in the order
/// first named; CompileError for an unknown name or an empty list.
std::vector<OutputKind> parse_output_kinds(const std::string &names);

/// Which files to write: one path per kind.
struct OutputSet {
    std::map<OutputKind, std::string> paths;

    /// dir/base + suffix for each kind (every kind when none is given).
    static OutputSet in_directory(const std::string &dir, const std::string &base,
                                  const std::vector<OutputKind> &kinds = all_output_kinds());
    bool has(OutputKind k) const { return paths.count(k) != 0; }
    /// The path for k; CompileError when the set has none.
    const std::string &path(OutputKind k) const;
};

/// f with its inputs (buffer inputs and scalar params) in the order named, then its outputs in
/// their order. Without an order, inputs come as lowering lists them: ImageParams and Params in
/// the order the program declared them, then Buffers used directly (by first use). CompileError
/// when a name is not an input of f (listing them), is given twice, or an input is left out.
LoweredFunc with_argument_order(LoweredFunc f, const std::vector<std::string> &inputs);

/// Writes the requested files for f (already lowered under its entry-point name) compiled for t,
/// creating missing parent directories. CompileError when f.name is not a C identifier or an
/// argument has no C type; RuntimeError when a file cannot be written. The LLVM module is built
/// once and shared by the object, library, assembly and IR outputs.
void compile_lowered_to(const LoweredFunc &f, const Target &t, const OutputSet &outputs);

/// A multi-target kernel (codegen/MultiTarget.h): one static library with f compiled for each
/// target, the first listed preferred, and a dispatcher named f.name that picks, at each call,
/// the first variant whose CPU features this CPU has, else the last (list the most portable
/// target last: it must run on every machine you ship to). Writes the static library, the C
/// header (the same signature, and the variants), metadata and the lowered statement; other
/// kinds are a CompileError (compile one target for objects, assembly or IR), as is an empty
/// list. One target is compile_lowered_to(f, t, outputs).
void compile_lowered_to(const LoweredFunc &f, const std::vector<Target> &targets,
                        const OutputSet &outputs);
/// The same with f lowered once per target (variants[i] for targets[i], e.g. a generator run
/// with each target): CompileError unless all have the same name and C signature.
void compile_lowered_to(const std::vector<LoweredFunc> &variants,
                        const std::vector<Target> &targets, const OutputSet &outputs);

/// A kernel specialized per output shape (codegen/MultiTarget.h): variants[i] scheduled for the
/// output extents shapes[i], and a last, generic variant for any other shape, in one static
/// library whose entry point f.name picks by the output buffer's extents at each call. notes[i]
/// (one per variant) says in the header where that variant's schedule came from. Writes the
/// static library, header, metadata and lowered statements (every variant's); other kinds are a
/// CompileError, as are variants with different signatures.
void compile_shape_dispatched(const std::vector<LoweredFunc> &variants,
                              const std::vector<std::vector<int64_t>> &shapes,
                              const std::vector<std::string> &notes, const Target &t,
                              const OutputSet &outputs);
/// The same for several targets: a multi-target kernel whose variants are shape-dispatched.
/// variants[i] and notes[i] (shapes.size() + 1 each) are targets[i]'s; each call picks the
/// target by CPU features as a multi-target kernel does (KILN_FORCE_TARGET,
/// kiln_last_target_variant), then the schedule by the output's extents.
void compile_shape_dispatched(const std::vector<std::vector<LoweredFunc>> &variants,
                              const std::vector<std::vector<int64_t>> &shapes,
                              const std::vector<std::vector<std::string>> &notes,
                              const std::vector<Target> &targets, const OutputSet &outputs);

/// The C header text for f (see the top of this file); `guard_name` names the include guard
/// (f.name when empty). With several targets it lists the variants of a multi-target kernel.
std::string c_header_text(const LoweredFunc &f, const Target &t,
                          const std::string &guard_name = "");
std::string c_header_text(const LoweredFunc &f, const std::vector<Target> &targets,
                          const std::string &guard_name = "");
/// The C prototype of the typed entry point, without the final semicolon.
std::string c_signature(const LoweredFunc &f);
/// JSON describing f: name, target, signature and each argument (name, C name, kind, direction,
/// type, dimensions).
std::string metadata_json(const LoweredFunc &f, const Target &t);
/// The lowered loop nest, prefixed by the signature, as text.
std::string lowered_stmt_text(const LoweredFunc &f);

/// CompileError unless name is a C identifier that is not a C or C++ keyword; `what` says what
/// the name is for in the message (e.g. "function name").
void check_c_identifier(const std::string &name, const std::string &what);
/// The identifier an argument has in the header: its name with every character that cannot be
/// in a C identifier replaced by '_' (and a '_' prefix when it starts with a digit or is a
/// keyword).
std::string c_argument_name(const std::string &name);

} // namespace kiln
