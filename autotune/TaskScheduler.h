// Multi-task tuning jobs: one job over many operators and shapes (`kiln tune --tasks tasks.json
// --time 8h`), measurement time going where the weighted sum of the tasks' best times drops most
// (the gradient task scheduler of Ansor), a round of a few trials at a time.
//
//   tasks.json: [{"op": "matmul", "shape": "1024x1024x1024", "weight": 2},
//                {"op": "softmax"}]                      (or {"tasks": [...]})
//
// `shape` defaults to the operator's, `weight` (how often a program runs the task per end-to-end
// run, so what its time counts for) to 1. Every other option (strategy, space, target, jobs,
// threads, seed, ...) is the job's, for every task.
//
// The job is its tasks' tuning runs: each task has one run, kept open between its rounds (each
// round resumes it), so a job stopped by Ctrl-C or killed is resumed by the same command: what it
// has spent (trials, seconds) and each task's progress curve are read back from the database, and
// `--trials` and `--time` are the whole job's budget, across resumes. When the budget is spent
// the job finishes every task's run, saves the cost model once and prints the morning summary:
// per task its best time, its speedup over the default and the hand schedules, and the trials it
// was given.
#pragma once

#include <cstdint>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/Tuner.h"

namespace kiln::autotune {

/// One workload of a job.
struct TuneTask {
    std::string op;
    std::vector<int64_t> shape; ///< empty: the operator's default shape
    double weight = 1;
};

/// Reads a tasks document: an array of task objects, or an object whose "tasks" is one. Each
/// task has "op" (a registered operator), optionally "shape" ("1024x1024x1024", or an array of
/// integers) and "weight" (a positive number). Raises CompileError naming the task's index and
/// the field for anything else (an unknown field too, so a typo does not pass silently), and
/// for an empty list or a workload listed twice.
std::vector<TuneTask> parse_tasks(const nlohmann::json &document);
/// parse_tasks of a file; raises CompileError naming the file when it cannot be read or parsed.
std::vector<TuneTask> load_tasks(const std::string &path);

/// What the scheduler knows of a task.
struct TaskProgress {
    double weight = 1;
    /// The task's best time (ms) after each of its measurements so far; +infinity before its
    /// first ok one. Empty for a task not tuned yet.
    std::vector<double> best_after;
    bool exhausted = false; ///< its space has nothing left to propose: never chosen again
};

/// The task the next round goes to. Tasks without a measurement come first, in order (each gets
/// one round to learn where it stands). Then, with probability epsilon, a random task; else the
/// task i with the most negative gradient of the job's objective sum_i weight_i * best_i:
///   gradient_i = weight_i * (alpha * backward_i + (1 - alpha) * forward_i)
/// where backward_i is the change of best_i per measurement over its last `window` measurements
/// (what the last round bought) and forward_i = -best_i / measurements_i (an optimistic guess of
/// what the next one buys). Ansor weighs the optimistic term more (alpha 0.2) but bounds it by
/// what similar tasks reached; kiln has no such bound, and the unbounded term keeps feeding a
/// heavy task that has converged, so alpha is 0.8: mostly what the last round bought, the
/// optimistic term only to come back to a task that stalled. A task that has no ok time after
/// its first round scores 0. Ties go to the lower index. Returns -1 when every task is
/// exhausted.
int choose_task(const std::vector<TaskProgress> &tasks, std::mt19937_64 &rng, int window = 16,
                double alpha = 0.8, double epsilon = 0.05);

/// One task's part of a job.
struct TaskResult {
    TuneTask task;
    int64_t run_id = 0;
    int64_t rounds = 0;            ///< rounds of this invocation
    int64_t trials = 0;            ///< search trials of its run, over every invocation
    std::optional<double> best_ms; ///< the best over the task's every run (Database::best)
    /// The hand schedule's time is its closing one when the job's closing round re-measured it
    /// beside the best; the default schedule's is its first.
    std::optional<double> default_ms, hand_ms;
    bool closing = false; ///< the job's closing round measured this task (--remeasure > 0)
};

struct JobResult {
    std::vector<TaskResult> tasks;
    int64_t rounds = 0;       ///< rounds run by this invocation
    int64_t trials = 0;       ///< search trials of the job, over every invocation
    double elapsed_s = 0;     ///< tuning seconds of the job, over every invocation
    bool resumed = false;     ///< some task's run was resumed
    bool interrupted = false; ///< stopped (options.stop) before the budget was spent
    std::optional<tuning_db::CostModelRecord> cost_model; ///< saved at the job's end
};

/// Runs the job: `options` as for tune() (its op and shape ignored; trials and time_s the job's
/// budget, at least one of them set), rounds of `round_trials` search trials. Progress (a line
/// per round) goes to `err`, the summary to `out`. Raises what tune() raises for a bad option
/// or task, before any measurement where it can (every task's operator and shape are checked
/// first).
JobResult tune_tasks(const TuneOptions &options, const std::vector<TuneTask> &tasks,
                     int round_trials = 16, std::ostream &out = std::cout,
                     std::ostream &err = std::cerr);

} // namespace kiln::autotune
