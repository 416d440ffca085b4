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

namespace kiln::apps {
struct Operator;
struct OperatorInstance;
} // namespace kiln::apps

namespace kiln::autotune {

/// What apply_best found: the schedule applied, or why there was none.
struct TunedSchedule {
    bool found = false;
    int64_t config_id = 0;    ///< the database's config row, when found
    double median_ms = 0;     ///< its recorded time, when found
    int64_t measurements = 0; ///< how many ok measurements that time is the median of
    std::string why;          ///< when not found: what is missing, e.g. "tuning.db has no ok
                              ///< measurement of matmul 64x64x64 ... on <cpu> threads=2 ..."
};

/// Applies to `inst` (made from `op` at `shape`, not yet scheduled) the best schedule the
/// database at `db_path` holds for that operator and shape on `target` with `threads` threads:
/// what `kiln compile` emits and what `kiln_bench --db` runs. Leaves `inst` unscheduled and says
/// why when the database does not exist or holds no ok measurement for that key. A GPU target's
/// key names its device, which must then be present.
TunedSchedule apply_best(const std::string &db_path, const apps::Operator &op,
                         const std::vector<int64_t> &shape, const Target &target, int threads,
                         apps::OperatorInstance &inst);

struct EmitOptions {
    std::string op;
    std::vector<int64_t> shape; ///< empty: the operator's default shape
    std::string db_path = "tuning_db/kiln.db";
    std::string out_dir;
    std::string function_name; ///< empty: the operator's name
    int threads = 0; ///< selects the target's records: 0 = default_threads(); without one, the
                     ///< thread count the hand schedule plans for (unless the target names one)
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
