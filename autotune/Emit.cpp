#include "autotune/Emit.h"

#include <filesystem>

#include "apps/Operator.h"
#include "autotune/Tuner.h"
#include "codegen/AOT.h"
#include "codegen/Target.h"
#include "driver/Pipeline.h"
#include "lang/Error.h"
#include "schedule/ScheduleTrace.h"
#include "tuning_db/TuningDB.h"

namespace kiln::autotune {

TunedSchedule apply_best(const std::string &db_path, const apps::Operator &op,
                         const std::vector<int64_t> &shape, const Target &target, int threads,
                         apps::OperatorInstance &inst) {
    TunedSchedule r;
    if (!std::filesystem::exists(db_path)) {
        r.why = "the database " + db_path + " does not exist";
        return r;
    }
    tuning_db::WorkloadKey wk = workload_key(op, shape);
    tuning_db::TargetKey tk =
        target_key(target, threads, target.has_gpu() ? open_gpu_device(target).description : "");
    tuning_db::Database db = tuning_db::Database::open_existing(db_path);
    auto w = db.find_workload(wk);
    auto t = db.find_target(tk);
    std::optional<tuning_db::BestConfig> best;
    if (w && t) best = db.best(*w, *t);
    if (!best) {
        r.why = db_path + " has no ok measurement of " + wk.to_string() + " on " + tk.to_string();
        return r;
    }
    ScheduleTrace::parse(best->config.trace_json).apply({inst.output});
    r.found = true;
    r.config_id = best->config.id;
    r.median_ms = best->median_ms;
    r.measurements = best->measurements;
    return r;
}

EmitResult emit_best(const EmitOptions &opt, std::ostream &err) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator(opt.op);
    std::vector<int64_t> shape = opt.shape.empty() ? op.default_shape : opt.shape;
    std::string name = opt.function_name.empty() ? op.name : opt.function_name;
    check_c_identifier(name, "function name");
    int threads = opt.threads > 0 ? opt.threads : default_threads();
    Target target = tune_target(opt.target);

    EmitResult result;
    apps::OperatorInstance inst = op.make(shape);
    TunedSchedule best = apply_best(opt.db_path, op, shape, target, threads, inst);
    result.tuned = best.found;
    result.tuned_ms = best.median_ms;
    std::string why = best.why;
    if (!result.tuned) {
        err << "warning: " << why << "; emitting the hand schedule (run `kiln tune " << op.name
            << " --shape " << apps::shape_to_string(shape)
            << (target.has_gpu() ? " --target " + opt.target : std::string()) << "` to tune it)\n";
        // Without a record, the hand schedule plans its tasks for the thread count asked for,
        // where the target does not name one (Target::threads).
        Target planned = target;
        if (planned.threads == 0 && opt.threads > 0) planned.threads = opt.threads;
        op.hand_schedule(inst, planned);
    }
    if (opt.kinds.empty()) user_error("kiln compile: no output kind to emit");
    OutputSet outputs = OutputSet::in_directory(opt.out_dir, name, opt.kinds);
    // The operator's own input order (e.g. matmul(A, B, C)), whatever the schedule reads first.
    std::vector<std::string> argument_order;
    for (const ImageParam &in : inst.inputs)
        argument_order.push_back(in.name());
    inst.pipeline().compile_to(outputs, name, target, argument_order);
    for (OutputKind k : opt.kinds)
        result.files.push_back(outputs.path(k));
    return result;
}

} // namespace kiln::autotune
