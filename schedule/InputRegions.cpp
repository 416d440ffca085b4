#include "schedule/InputRegions.h"

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/Simplify.h"
#include "schedule/AddBufferChecks.h"
#include "schedule/BoundsInference.h"
#include "schedule/BoxesTouched.h"
#include "schedule/ScheduleFunctions.h"

namespace kiln {

namespace {

/// Stands for an input's own shape while its region is unknown: coordinates clamped to the
/// input's bounds then reach as far as the unclamped ones (|coordinate| stays below 2^28).
constexpr int64_t unknown_extent = int64_t(1) << 30;
constexpr int64_t far_away = int64_t(1) << 28;

/// The box's bounds as constants, given values for the free symbols; empty when a bound is not
/// constant or lies far away (it depends on the input's own shape).
std::optional<std::pair<int64_t, int64_t>> constant_bounds(const Interval &i,
                                                           const std::map<std::string, Expr> &at) {
    if (!i.is_bounded()) return std::nullopt;
    std::optional<int64_t> lo = as_const_int(simplify(substitute(at, i.min)));
    std::optional<int64_t> hi = as_const_int(simplify(substitute(at, i.max)));
    if (!lo || !hi || *lo < -far_away || *hi > far_away || *hi < *lo) return std::nullopt;
    return std::make_pair(*lo, *hi);
}

} // namespace

std::vector<LoweredArgument> pipeline_inputs(const std::vector<Func> &outputs) {
    std::vector<FunctionPtr> funcs;
    for (const Func &f : outputs)
        funcs.push_back(f.function());
    PipelineEnv env = make_pipeline_env(funcs);
    Stmt s = bounds_inference(schedule_functions(env), env);
    std::vector<LoweredArgument> args;
    for (const LoweredArgument &a : collect_arguments(s, env)) {
        if (!a.is_output) args.push_back(a);
    }
    return args;
}

std::vector<InputRegion> input_regions(const std::vector<Func> &outputs,
                                       const std::vector<int64_t> &extents,
                                       const std::vector<int64_t> &mins) {
    std::vector<FunctionPtr> funcs;
    for (const Func &f : outputs)
        funcs.push_back(f.function());
    PipelineEnv env = make_pipeline_env(funcs);
    Stmt s = bounds_inference(schedule_functions(env), env);
    std::vector<LoweredArgument> args = collect_arguments(s, env);

    // The outputs' region and the scalars' values.
    std::map<std::string, Expr> fixed;
    for (const std::string &o : env.outputs) {
        const FunctionContents &f = *env.funcs.at(o);
        if (size_t(f.dimensions()) != extents.size())
            user_error("input_regions: output '", o, "' has ", f.dimensions(),
                       " dimensions, but the region has ", extents.size());
        for (size_t v = 0; v < f.output_types.size(); v++) {
            std::string buf = buffer_name(f, int(v));
            for (size_t d = 0; d < extents.size(); d++) {
                fixed[buffer_min_name(buf, int(d))] = Expr(int32_t(mins.empty() ? 0 : mins[d]));
                fixed[buffer_extent_name(buf, int(d))] = Expr(int32_t(extents[d]));
            }
        }
    }
    std::set<std::string> images;
    for (const LoweredArgument &a : args) {
        if (a.is_output) continue;
        if (a.kind == LoweredArgument::Scalar) {
            if (!a.param || !a.param->scalar_value.defined())
                user_error("param '", a.name,
                           "' has no value; give it one (Param<T>(name, value) or set())");
            fixed[a.name] = a.param->scalar_value;
        } else if (a.param) {
            images.insert(a.name);
            // An estimated dimension is what it says, for this image's reads and the others'.
            for (const auto &[d, est] : a.param->estimates) {
                fixed[buffer_min_name(a.name, d)] = Expr(int32_t(est.first));
                fixed[buffer_extent_name(a.name, d)] = Expr(int32_t(est.second));
            }
        }
    }
    std::map<std::string, Box> boxes = boxes_touched(s, images, {});

    std::vector<InputRegion> result;
    for (const LoweredArgument &a : args) {
        if (a.is_output || (a.kind == LoweredArgument::Buffer && !a.param)) continue;
        InputRegion r;
        r.argument = a;
        if (a.kind == LoweredArgument::Buffer) {
            const Box &box = boxes[a.name];
            for (int d = 0; d < a.dimensions; d++) {
                auto estimate = a.param->estimates.find(d);
                if (estimate != a.param->estimates.end()) {
                    r.mins.push_back(estimate->second.first);
                    r.extents.push_back(estimate->second.second);
                    continue;
                }
                // First without the input's own shape (it is what we are computing); then, for a
                // read that depends on it (a flip: in(in.width() - 1 - x)), with the input as
                // large as the output in that dimension, if the read then stays inside.
                std::map<std::string, Expr> at = fixed;
                for (int e = 0; e < a.dimensions; e++) {
                    if (a.param->estimates.count(e)) continue;
                    at[buffer_min_name(a.name, e)] = Expr(int32_t(-unknown_extent / 2));
                    at[buffer_extent_name(a.name, e)] = Expr(int32_t(unknown_extent));
                }
                std::optional<std::pair<int64_t, int64_t>> b;
                if (size_t(d) < box.size()) b = constant_bounds(box[d], at);
                if (!b && size_t(d) < box.size() && size_t(d) < extents.size()) {
                    for (int e = 0; e < a.dimensions; e++) {
                        if (a.param->estimates.count(e)) continue;
                        int64_t guess = size_t(e) < extents.size() ? extents[e] : 1;
                        at[buffer_min_name(a.name, e)] = Expr(int32_t(0));
                        at[buffer_extent_name(a.name, e)] = Expr(int32_t(guess));
                    }
                    b = constant_bounds(box[d], at);
                    if (b && (b->first < 0 || b->second >= extents[d])) b.reset();
                }
                if (size_t(d) >= box.size()) b = std::make_pair(int64_t(0), int64_t(0));
                if (!b) {
                    user_error("cannot size input '", a.name, "' in dimension ", d,
                               ": the pipeline reads it at ",
                               box[d].is_bounded() ? "coordinates that depend on its own size"
                                                   : "coordinates that depend on data",
                               " (", box[d],
                               "); clamp the coordinates to constants or to the output's region");
                }
                r.mins.push_back(b->first);
                r.extents.push_back(b->second - b->first + 1);
            }
        }
        result.push_back(std::move(r));
    }
    return result;
}

} // namespace kiln
