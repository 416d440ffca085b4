// The schedule of each Func, interpreted from its recorded directives (lang/Directive.h): the
// loop dimensions of every stage after splits, fuses and reorders, and where the Func is computed
// and stored. Building it validates every stage-level directive and raises CompileError naming
// the Func, the primitive and the legal choices.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lang/Directive.h"
#include "lang/Function.h"

namespace kiln {

/// One loop of a stage, as the user names it and as the IR names it.
struct LoopDim {
    std::string name; ///< the name in directives ("x", "xi", "r.x")
    std::string var;  ///< the unique loop variable in the IR ("f.s0.x", "f.s0.xi")
    ForType for_type = ForType::Serial;
    bool is_rvar = false;
    /// The original dimensions (pure Vars or RVars, by name) this loop iterates over: one for an
    /// original loop, copied to both loops of a split, the union of both for a fuse. Parallel and
    /// vectorize legality is decided on this set, not on the loop's name.
    std::set<std::string> originals;
    /// For a GPUBlock or GPUThread loop, the GPU dimension it runs over: 0 (x) for the first
    /// variable of its gpu_blocks or gpu_threads call, 1 (y) for the second, 2 (z) for the third;
    /// -1 for other loops.
    int gpu_dim = -1;
};

/// A split or fuse, in the order applied, on IR variable names.
struct LoopSplit {
    enum Kind { Split, Fuse } kind = Split;
    std::string old_var, outer, inner; ///< for Fuse, old_var is the fused variable
    int64_t factor = 1;
    TailStrategy tail = TailStrategy::Auto; ///< resolved: never Auto after building
};

/// A prefetch directive of a stage, its loops resolved (schedule/InjectPrefetch.h lowers it).
struct StagePrefetch {
    std::string what;             ///< the Func or ImageParam prefetched
    std::string at, from;         ///< the loops as the user names them
    std::string at_var, from_var; ///< and as the IR names them
    int64_t offset = 1;
    PrefetchBoundStrategy strategy = PrefetchBoundStrategy::GuardWithIf;
};

struct StageSchedule {
    std::vector<LoopDim> dims; ///< innermost first
    std::vector<LoopSplit> splits;
    /// The IR variable of each original dimension (pure Var or RVar), by its name.
    std::map<std::string, std::string> original_vars;
    /// gpu_single_thread(): the stage runs on the GPU in one thread.
    bool gpu_single_thread = false;
    std::vector<StagePrefetch> prefetches;
};

/// A loop of a consumer stage at which a Func is computed or stored; empty func means root.
struct LoopLevel {
    std::string func;
    std::string var; ///< the user name of the loop
    bool is_root() const { return func.empty(); }
    bool is_inline = false;
};

struct FuncSchedule {
    std::vector<StageSchedule> stages; ///< pure definition first, then each update
    LoopLevel compute_level, store_level;
    std::vector<std::string> storage_order; ///< pure variables, innermost first
    MemoryType memory_type = MemoryType::Auto;
    bool nontemporal = false; ///< store_nontemporal
    struct Bound {
        std::string var;
        int64_t min, extent;
    };
    std::vector<Bound> bounds;
};

/// The IR name of the loop variable of an original dimension of a stage.
std::string stage_var_name(const std::string &func, int stage, const std::string &var);

/// Interprets a Func's directives. `is_output` selects the default tail strategies. Raises
/// CompileError for a directive that does not fit the loop nest.
FuncSchedule build_func_schedule(const FunctionContents &f, bool is_output);

/// The loop names of a stage, innermost first, for error messages ("x, y").
std::string loop_names(const StageSchedule &s);

} // namespace kiln
