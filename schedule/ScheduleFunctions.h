// Builds the loop nest of a pipeline from its schedule: each stage's loops after splits, fuses
// and reorders (with the original variables as lets of the loop variables, and GuardWithIf tails
// as `if (likely(x <= x.loop_max))`), Funcs inlined where scheduled inline, and every other Func
// produced at its compute level and realized at its store level. Region symbols `f.<x>.min` and
// `f.<x>.max` are left free for bounds inference to define.
// Requires: validated Func schedules. Guarantees: Provide/Realize/Call IR with unique loop names.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lang/Function.h"
#include "schedule/Schedule.h"

namespace kiln {

/// Everything lowering knows about a pipeline.
struct PipelineEnv {
    std::map<std::string, FunctionPtr> funcs;
    std::map<std::string, FuncSchedule> schedules;
    std::vector<std::string> outputs;
    std::vector<std::string> order; ///< realization order of the Funcs that are not inlined
};

/// Collects the Funcs, builds their schedules and the realization order.
PipelineEnv make_pipeline_env(const std::vector<FunctionPtr> &outputs);

/// The names of the region a stage computes: `f.x.min` and `f.x.max` for pure variable x.
std::string region_min_name(const std::string &func, const std::string &var);
std::string region_max_name(const std::string &func, const std::string &var);

/// An expression with every call to an inlined Func replaced by its definition.
Expr inline_calls(const Expr &e, const PipelineEnv &env);

Stmt schedule_functions(const PipelineEnv &env);

/// The pieces of a fused loop are built clamped to their own loop ranges (`min(piece,
/// piece.loop_max)`), clamps that never change the value but tell bounds inference that each
/// piece stays inside its own loop.
/// Once bounds are inferred and checked, this removes the clamps (they would cost a min per
/// iteration).
Stmt strip_fuse_clamps(const Stmt &s, const PipelineEnv &env);

} // namespace kiln
