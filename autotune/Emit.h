// `kiln compile`: the best schedule the tuning database holds for an operator on this machine,
// applied to a fresh instance and compiled ahead of time (codegen/AOT.h) into an object file, a
// static library and a C header, or any other output kinds asked for (assembly, LLVM IR, the
// lowered loop nest, ...). Without a tuned schedule for this target, the hand schedule is used
// and a warning says so.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "codegen/AOT.h"

namespace kiln::autotune {

struct EmitOptions {
    std::string op;
    std::vector<int64_t> shape; ///< empty: the operator's default shape
    std::string db_path = "tuning_db/kiln.db";
    std::string out_dir;
    std::string function_name; ///< empty: the operator's name
    int threads = 0;           ///< selects the target's records: 0 = default_threads()
    /// "host", "host-opencl", "host-cuda" or a Target string (autotune::tune_target): selects
    /// the records (a GPU target's key names its device, so the device must be present) and is
    /// the target of the emitted object; for a GPU target the object embeds the kernels' source
    /// (codegen/AOT.h), compiled by the runtime's device interface at the first call.
    std::string target = "host";
    /// The files to write, in this order (`kiln compile --emit`; parse_output_kind's names).
    std::vector<OutputKind> kinds = {OutputKind::Object, OutputKind::StaticLibrary,
                                     OutputKind::CHeader};
};

struct EmitResult {
    bool tuned = false;             ///< false: the hand schedule was used
    double tuned_ms = 0;            ///< the best recorded time, when tuned
    std::vector<std::string> files; ///< written, in the order of EmitOptions::kinds
};

/// Raises CompileError for an unknown operator or a bad shape, RuntimeError when a file cannot be
/// written. Warnings go to `err`.
EmitResult emit_best(const EmitOptions &options, std::ostream &err = std::cerr);

} // namespace kiln::autotune
