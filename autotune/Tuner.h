// The tuner loop behind `kiln tune`: a strategy proposes configs of the operator's search space;
// `jobs` worker processes (autotune/Runner.h) build candidates in parallel while one of them, at
// most, measures; every result is committed to the tuning database before the next measurement
// starts, and the strategy's state is saved with it, so `kill -9` loses at most the candidate in
// flight and a resumed run neither repeats nor loses a measurement.
//
// Statuses (tuning_db::Status): ok; compile_error (the trace does not apply, lower or compile);
// runtime_error (the kernel returned an error); crash (the worker died of a signal or exited);
// timeout (no answer before the deadline: max(--timeout, 20 x best median) for the first run,
// generous limits for compiling and for the reference); wrong_answer (the first run's output is
// off the operator's reference by more than its tolerance). After a crash or a timeout the worker
// is replaced and the job goes on.
//
// Resume (on by default): the latest unfinished run of the same workload, target and strategy is
// continued: its strategy state is restored. Whether or not it resumes, a config is not measured
// again once the database holds, for this workload and target (from any run), an ok measurement,
// a deterministic failure (compile_error, wrong_answer) or max_transient_attempts transient ones
// (timeout, crash, runtime_error); a config with fewer transient failures is measured again, under
// this invocation's limits, when the strategy proposes it (the baselines: at every start). One
// invocation measures a config at most once (re-measurements of the best aside). With
// budget_across_runs the trial budget counts the trials of the resumed run too.
#pragma once

#include <atomic>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "autotune/SearchSpace.h"
#include "autotune/Templates.h"
#include "tuning_db/TuningDB.h"

namespace kiln::autotune {

/// How many transient failures (timeout, crash, runtime_error) of one config on one workload and
/// target, counted over every run, make the tuner stop trying it. The target key names the kiln
/// and LLVM versions, so a new version tries every config again.
constexpr int max_transient_attempts = 3;

/// Whether a failure may go away on another try (timeout, crash, runtime_error: a loaded machine,
/// a worker killed from outside, a short limit) rather than being a property of the config on
/// this kiln version (compile_error, wrong_answer). False for ok.
bool is_transient_failure(tuning_db::Status s);

/// This machine as a tuning target, with the threads kernels run with.
tuning_db::TargetKey host_target_key(int threads);

/// The target of `--target` (Target::parse): "host" (or empty: this CPU), "host-opencl",
/// "host-cuda" (this CPU with GPU kernels for that API), either followed by ";key=value...", or
/// a full Target string. Raises CompileError, starting "--target: ", for anything else.
Target tune_target(const std::string &text);

/// The device a GPU target's kernels run on, from its device interface.
struct GpuDevice {
    std::string description; ///< device_description(): "<name>; <version>; driver <version>"
    GpuLimits limits;        ///< device_limits()
};
/// Opens the device of target.gpu through kiln_device_interface. Raises RuntimeError quoting
/// kiln_last_error_message() when there is no interface, driver or device for that API.
GpuDevice open_gpu_device(const Target &target);

/// The tuning target key of `target` with `threads` host threads: host_target_key's for a CPU
/// target; for a GPU target its cpu_model also names the API and the device
/// ("znver4 + opencl: <device description>") and its features end in ",gpu=<api>", so records
/// of GPU kernels and of CPU kernels (and of two devices) never mix.
tuning_db::TargetKey target_key(const Target &target, int threads,
                                const std::string &device_description = "");
/// The workload key of an operator at a shape (its algorithm hash from a fresh instance).
tuning_db::WorkloadKey workload_key(const apps::Operator &op, const std::vector<int64_t> &shape);
/// This machine's physical memory in bytes (sysconf), 0 when unknown. tune() refuses a shape
/// whose buffers need more (tuning_memory_bytes), naming both figures, before anything is
/// allocated or the database is opened.
int64_t physical_memory_bytes();
/// What a tuning job holds of an operator's buffers at a shape, at most, with `jobs` worker
/// processes: apps::buffer_bytes (inputs and output) once in the tuner, which builds instances
/// to lower candidates, and in each worker twice for an operator with a hand-written reference
/// (the candidate's buffers and the reference's output) or three times for one checked by the
/// reference evaluator (the candidate's, and two input sets with their outputs).
int64_t tuning_memory_bytes(const apps::Operator &op, const std::vector<int64_t> &shape, int jobs);
/// The number of threads kernels use when none is asked for: the machine's hardware threads.
int default_threads();
/// A duration for people: "42s", "3m07s", "8h02m"; "?" for a negative or non-finite one.
std::string format_duration(double seconds);

struct TuneOptions {
    std::string op;
    std::vector<int64_t> shape; ///< empty: the operator's default shape
    std::string db_path = "tuning_db/kiln.db";
    std::string strategy = "bandit";
    std::string space = "template"; ///< "template" (hand-written when there is one) or "auto"
    /// "host", "host-opencl", "host-cuda" or a Target string (tune_target): every candidate, the
    /// baselines and the target key are for it. A GPU target needs its device at start (an error
    /// quoting the runtime otherwise) and a GPU template (space "template").
    std::string target = "host";
    int64_t trials = 0; ///< search trials; 0 = no limit
    double time_s = 0;  ///< wall-clock limit; 0 = no limit
    int jobs = 2;       ///< worker processes (candidates built in parallel)
    int threads = 0;    ///< threads each kernel runs with; 0 = default_threads()
    uint64_t seed = 1;
    bool resume = true;
    bool budget_across_runs = false;
    bool baselines = true;       ///< measure the default and the hand schedule first
    int remeasure = 3;           ///< the top configs measured again at the end
    double min_time_ms = 100;    ///< measuring time per candidate
    double timeout_s = 1;        ///< floor of the run deadline (max with 20 x best)
    double first_timeout_s = 10; ///< run deadline before any ok measurement
    double compile_timeout_s = 300;
    std::string worker_path; ///< empty: default_worker_path()
    /// The worker's arguments: {"--kiln-worker"} when the worker is a generator executable.
    std::vector<std::string> worker_args;
    /// What follows `kiln tune` in the resume hint printed when stopped; empty: the operator's
    /// name ("--generator ./gens brighten --param gain=2" for a generator).
    std::string command_operand;
    bool progress = true; ///< the live progress line on `err`
    /// Whether the run is marked finished when its budget is spent (a multi-task job keeps each
    /// task's run open between its rounds and finishes them at its end: autotune/TaskScheduler.h).
    bool finish_run = true;
    /// Whether the end of the run trains and saves the cost model (update_saved_model); a
    /// multi-task job saves it once, at its end.
    bool save_cost_model = true;
    /// Set from a signal handler to stop cleanly (committed work is kept; resume continues).
    const std::atomic<bool> *stop = nullptr;
};

struct TuneResult {
    int64_t run_id = 0;
    bool resumed = false;
    bool interrupted = false;
    int64_t trials = 0;   ///< search measurements recorded by this invocation
    int64_t recorded = 0; ///< every measurement recorded (baselines and re-measurements too)
    int64_t skipped = 0;  ///< proposals already in the database, not measured again
    /// Search configs recorded as compile_error without a worker: their schedule does not apply,
    /// or (CPU targets) a check of the lowered code fails at this shape before any loop runs.
    int64_t rejected = 0;
    std::map<std::string, int64_t> per_status;
    /// This invocation's search against the hand schedule's first time (its baseline
    /// measurement, from this run or an earlier one): the fastest search config's first time,
    /// and the trial (counted over the run, resumes included) whose config first measured at or
    /// under the hand's time (hand_first_ms); unset when no search config did, or there is no
    /// hand time.
    std::optional<double> best_search_ms, hand_first_ms;
    std::optional<int64_t> trials_to_hand;
    std::optional<double> best_ms;
    std::string best_config_json, best_trace_json, best_cpp;
    /// The baselines' times. A re-measured hand schedule's is its closing re-measurement when
    /// the best was re-measured too (else its first, from the same period as the best's), unless
    /// it is the best, whose time is the best's (tuning_db::BestConfig: its closing median)
    /// (take_best).
    std::optional<double> default_ms, hand_ms;
    /// The best config's and the hand schedule's closing times (--remeasure > 0): the medians of
    /// their re-measurements at the end of the run, taken in pairs, one after the other, until
    /// each settles (closing_times_settled); the summary's speedup over the hand schedule is
    /// their ratio when both exist. Unset when either was not re-measured (a stopped run, no
    /// hand schedule, --remeasure 0, or re-measurements that failed).
    std::optional<double> closing_best_ms, closing_hand_ms;
    /// How many closing measurements each of the two has (0 when unset).
    int closing_best_measurements = 0, closing_hand_measurements = 0;
    double elapsed_s = 0;
    /// What the database knew of other workloads on the target when the run started (the model
    /// strategy's prior training rows, loaded by `model` and by `bandit`, which has a model arm).
    int64_t prior_rows = 0, prior_workloads = 0;
    /// The cost model saved beside the database at the end of the run (autotune/CostModel.h:
    /// update_saved_model); empty when the run measured nothing new or the database holds fewer
    /// than 2 feature rows for the target.
    std::optional<tuning_db::CostModelRecord> cost_model;
};

/// Sets result's best (time, config, trace) from the database's best config. A baseline that is
/// the best was re-measured: its time is the best's median (tuning_db::BestConfig), not
/// its first measurement, so the summary does not call the hand schedule slower than itself.
void take_best(const tuning_db::BestConfig &best, TuneResult &result);

/// Whether a config's closing re-measurements agree enough to compare it with another by their
/// median: at least two, and more than half of them within closing_tolerance of the median. One
/// disturbed measurement among agreeing ones is outvoted; two that disagree are not settled.
constexpr double closing_tolerance = 0.05;
bool closing_times_settled(const std::vector<double> &ms);

/// Whether the closing round may stop measuring the crowned config and the hand schedule in
/// pairs: the closing times of both settled, and they agree with the crown (the best's closing
/// median is not above the hand's; the crown is by the run's closing times in the database, which
/// for a resumed run include its earlier invocations', so the two can disagree). When the hand
/// schedule is crowned, the pairs are the hand schedule (`best_ms`) and the best other config
/// within closing_tolerance of it
/// (`hand_ms`): the challenger.
bool closing_pair_settled(const std::vector<double> &best_ms, const std::vector<double> &hand_ms);

/// The closing round's next pair: the config to measure again beside the hand schedule, or none
/// when the pair has settled (closing_pair_settled). `top` are the two best configs as the run's
/// own closing round ranks them (Database::top_k with the run), `closing_ms` the closing times of
/// this invocation by config hash. The crowned config when it is not the hand schedule; a crowned
/// hand schedule's runner-up when that one is within closing_tolerance of it.
std::optional<std::string>
next_closing_pair(const std::vector<tuning_db::BestConfig> &top, const std::string &hand_hash,
                  const std::map<std::string, std::vector<double>> &closing_ms);

/// The median of `ms` (the mean of the middle two for an even count); `ms` is not empty.
double median_of(std::vector<double> ms);

/// Refuses nonsensical options before anything is opened or started: trials >= 0, time_s >= 0,
/// threads 0 (default) or 1..4 x hardware threads, timeouts and min_time_ms positive and finite,
/// remeasure >= 0, jobs 1..4 x hardware threads, a known strategy, and a given worker_path that is
/// an executable file. Each error is one line "--option VALUE: <accepted range>" (CompileError;
/// RuntimeError for the worker). tune() calls it first.
void validate(const TuneOptions &options);

/// Runs the tuner. Progress and warnings go to `err`, the final summary to `out`. Raises
/// CompileError/RuntimeError for bad options (unknown operator, strategy or shape, a database
/// that cannot be opened).
TuneResult tune(const TuneOptions &options, std::ostream &out = std::cout,
                std::ostream &err = std::cerr);

} // namespace kiln::autotune
