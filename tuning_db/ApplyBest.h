// Applying the best stored schedule to a pipeline (target kiln_tuning_db_apply, which links the
// scheduler; kiln_tuning_db itself does not).
//
//   auto db = tuning_db::Database::open_existing("tuning_db/kiln.db");
//   bool tuned = tuning_db::apply_best_or_default(db, workload, target, {out});
//   // tuned == false: nothing stored for this target, a warning went to stderr and `out` keeps
//   // its default schedule.
#pragma once

#include <iostream>
#include <optional>
#include <vector>

#include "lang/Func.h"
#include "schedule/ScheduleTrace.h"
#include "tuning_db/TuningDB.h"

namespace kiln::tuning_db {

/// The best stored schedule of the workload on the target, parsed; empty when none is stored.
/// Raises CompileError (from ScheduleTrace::parse) when the stored trace is malformed.
std::optional<ScheduleTrace> best_trace(const Database &db, const WorkloadKey &workload,
                                        const TargetKey &target);

/// Applies the best stored schedule to the pipeline and returns true; when nothing is stored for
/// this workload on this target, leaves the default schedule, writes one warning line to `warn`
/// (naming the workload, the target and the database file, and saying whether other targets have
/// results) and returns false. Errors from ScheduleTrace::apply (e.g. another algorithm hash)
/// propagate as CompileError.
bool apply_best_or_default(const Database &db, const WorkloadKey &workload, const TargetKey &target,
                           const std::vector<Func> &outputs, std::ostream &warn = std::cerr);

} // namespace kiln::tuning_db
