#include "tuning_db/ApplyBest.h"

namespace kiln::tuning_db {

std::optional<ScheduleTrace> best_trace(const Database &db, const WorkloadKey &workload,
                                        const TargetKey &target) {
    std::optional<std::string> text = db.best_trace_json(workload, target);
    if (!text) return std::nullopt;
    return ScheduleTrace::parse(*text);
}

bool apply_best_or_default(const Database &db, const WorkloadKey &workload, const TargetKey &target,
                           const std::vector<Func> &outputs, std::ostream &warn) {
    std::optional<ScheduleTrace> trace = best_trace(db, workload, target);
    if (trace) {
        trace->apply(outputs);
        return true;
    }
    // Say whether other targets have results: the usual cause is another machine or thread count.
    std::string elsewhere;
    if (std::optional<int64_t> w = db.find_workload(workload)) {
        for (const TargetRecord &t : db.targets()) {
            if (t.key == target || !db.best(*w, t.id)) continue;
            elsewhere += (elsewhere.empty() ? "" : "; ") + t.key.to_string();
        }
    }
    warn << "kiln: warning: no tuned schedule for " << workload.to_string() << " on "
         << target.to_string() << " in tuning database '" << db.path()
         << "'; using the default schedule ("
         << (elsewhere.empty() ? "run `kiln tune " + workload.op + "` on this machine"
                               : "results exist for other targets: " + elsewhere)
         << ")\n";
    return false;
}

} // namespace kiln::tuning_db
