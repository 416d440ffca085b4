// The tuning database: every measurement the autotuner makes, in SQLite.
//
//   auto db = tuning_db::Database::open("tuning_db/kiln.db");          // creates or migrates
//   int64_t t = db.target_id(target), w = db.workload_id(workload);
//   int64_t c = db.config_id(hash, config_json, trace_json);
//   db.record_measurement({run, w, t, c, Status::ok, {1.2, 1.1, 1.3}, 1.2, 0.2, 35.0, ""});
//   std::optional<BestConfig> best = db.best(w, t);
//
// Guarantees:
//  - WAL journal, busy timeout of 30 s, and every write inside BEGIN IMMEDIATE with a bounded
//    retry loop on SQLITE_BUSY, so two processes writing one file never fail with "database is
//    locked" (unless one holds the write lock for minutes).
//  - record_measurement (and every other write) commits before returning: `kill -9` of the
//    writer loses at most the measurement in flight.
//  - The schema carries a version (table schema_version). Older versions are migrated on open; a
//    newer one is refused with an error naming the file and both versions.
//  - Errors from SQLite become kiln::RuntimeError with the SQLite message and the file path.
//  - A Database object (one connection with its cached prepared statements) is for one thread at
//    a time; open one per thread or process. Many processes may share the file.
//
// This module depends on SQLite and nlohmann_json only (lang/Error.h for the error type); it does
// not need LLVM or the scheduler. Applying a stored schedule lives in tuning_db/ApplyBest.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::tuning_db {

/// What happened to one candidate.
enum class Status { ok, compile_error, runtime_error, crash, timeout, wrong_answer };

/// "ok", "compile_error", "runtime_error", "crash", "timeout", "wrong_answer".
const char *to_string(Status s);
/// The inverse of to_string; raises RuntimeError listing the known names for an unknown one.
Status status_from_string(const std::string &name);

/// The machine and compiler a measurement was made with.
struct TargetKey {
    std::string cpu_model; ///< e.g. "znver4" or the CPU brand string
    std::string features;  ///< e.g. "+avx2,+fma,..." (any stable spelling)
    int threads = 1;       ///< worker threads the kernel ran with
    std::string compiler;  ///< kiln version + LLVM version, e.g. "kiln 0.1.0 / LLVM 19.1.7"

    /// "cpu_model threads=N compiler" (features left out: too long), for messages and listings.
    std::string to_string() const;
    bool operator==(const TargetKey &) const = default;
};

/// What was tuned: an operator at one shape and types, for one version of its algorithm.
struct WorkloadKey {
    std::string op;             ///< operator name, e.g. "matmul"
    std::string algorithm_hash; ///< kiln::algorithm_hash as hex, e.g. "0x0123456789abcdef"
    std::string shape;          ///< e.g. "1024x1024x1024"
    std::string types;          ///< e.g. "float32"

    /// "op shape types (algorithm_hash)", for messages and listings.
    std::string to_string() const;
    bool operator==(const WorkloadKey &) const = default;
};

/// One measurement to record. The timestamp is set by the database.
struct MeasurementRecord {
    int64_t run_id = 0; ///< a tuning run from create_run, or 0 for a measurement made outside one
    int64_t workload_id = 0;
    int64_t target_id = 0;
    int64_t config_id = 0;
    Status status = Status::ok;
    std::vector<double> times_ms; ///< every repeat, in order
    double median_ms = 0;
    double spread_ms = 0; ///< e.g. max - min or an interquartile range, as the measurer defines it
    double compile_ms = 0;
    std::string error; ///< compiler/runtime message for a failed candidate, empty when ok
    /// Taken in the run's closing round (kiln tune --remeasure): the top configs and the hand
    /// schedule timed again, one after another, at the end of the run. See BestConfig.
    bool closing = false;
};

/// A stored configuration: knob values and the schedule trace they produce.
struct ConfigRecord {
    int64_t id = 0;
    std::string hash;
    std::string config_json; ///< knob values, as given to config_id
    std::string trace_json;  ///< kiln::ScheduleTrace::to_json_string(), as given to config_id
};

/// A stored measurement.
struct Measurement {
    int64_t id = 0;
    int64_t run_id = 0;   ///< 0 when made outside a run
    std::string run_uuid; ///< empty when made outside a run
    int64_t workload_id = 0;
    int64_t target_id = 0;
    int64_t config_id = 0;
    std::string config_hash;
    Status status = Status::ok;
    std::vector<double> times_ms;
    double median_ms = 0;
    double spread_ms = 0;
    double compile_ms = 0;
    std::string error;
    int64_t timestamp_us = 0; ///< microseconds since the Unix epoch
    bool closing = false;     ///< taken in its run's closing round (MeasurementRecord::closing)
};

/// A config whose ok measurements disagree by more than this factor (slowest median over fastest)
/// is flagged unstable: its time depends on the moment it was measured.
constexpr double unstable_ratio = 2;

/// A config ranked by its ok measurements on a workload and target. Its time is the median of
/// its ok measurements' medians, so one lucky (or unlucky) measurement does not decide; which
/// measurements count depends on the closing round:
///  - Times taken at different moments are not comparable (the machine's speed drifts), and a
///    run's closing round exists to time its top configs and the hand schedule one after another.
///    The latest closing round **stands** when its run is finished and no ok measurement of the
///    workload on the target was taken after the round began, other than the round's own. While
///    one stands, the configs it timed (its contenders) rank first, each by the median of its
///    measurements in that round only; every other config follows, by its median over all its ok
///    measurements.
///  - Otherwise every config ranks by its median over all its ok measurements.
struct BestConfig {
    /// The middle one of the measurements counted (the lower middle for an even count).
    Measurement measurement;
    ConfigRecord config;
    double median_ms = 0;     ///< the median of the counted measurements' medians: its time
    double min_ms = 0;        ///< the fastest of them
    double max_ms = 0;        ///< the slowest of them
    int64_t measurements = 0; ///< how many measurements count
    /// The run whose standing closing round timed this config (its time is from that round
    /// only), or 0: not a contender of a standing round.
    int64_t closing_run_id = 0;
    /// max_ms > unstable_ratio x min_ms: the measurements disagree.
    bool unstable() const { return max_ms > unstable_ratio * min_ms; }
};

/// A tuning run: one strategy's search of one workload on one target, resumable.
struct RunRecord {
    int64_t id = 0;
    std::string uuid; ///< random, unique across databases (export/import key)
    int64_t workload_id = 0;
    int64_t target_id = 0;
    std::string strategy;
    int64_t seed = 0;
    int64_t budget_trials = 0; ///< 0 = unlimited
    double budget_seconds = 0; ///< 0 = unlimited
    double elapsed_s = 0;
    int64_t trials_done = 0;
    std::string state_json; ///< the strategy's state, enough to resume
    int64_t started_us = 0, updated_us = 0;
    std::optional<int64_t> finished_us; ///< set by finish_run
};

/// The process tuning a run: pid, host name and the process's start time (clock ticks since
/// boot), which together name one process even after its pid is reused.
struct RunOwner {
    int64_t pid = 0;
    std::string host;
    int64_t start = -1;
    /// The calling process.
    static RunOwner this_process();
    /// Whether this process still runs: same host, a process with this pid and this start time.
    /// A process on another host counts as gone.
    bool alive() const;
};

/// What claim_run found and did.
struct RunClaim {
    bool claimed = false;           ///< the run is now owned by the caller
    bool finished = false;          ///< the run is finished (never claimed)
    std::optional<RunOwner> holder; ///< the owner before the claim (the live one when refused)
};

/// A target as stored.
struct TargetRecord {
    int64_t id = 0;
    TargetKey key;
};

/// A workload as stored, with a summary of its measurements (over all targets).
struct WorkloadRecord {
    int64_t id = 0;
    WorkloadKey key;
    int64_t measurements = 0;
    int64_t ok_measurements = 0;
    std::optional<double> best_ms; ///< the best config's time (Database::best), fastest target
};

/// One point of a run's progress curve: the best ok median after `trial` measurements.
struct ProgressPoint {
    int64_t trial = 0;             ///< 1-based index of the measurement within the run
    double elapsed_s = 0;          ///< seconds from the run's start to the measurement
    std::optional<double> best_ms; ///< empty until the first ok measurement
};

/// Counts over a selection of the database (see Database::statistics).
struct Statistics {
    int64_t measurements = 0;
    std::map<std::string, int64_t> per_status; ///< status name -> count (only statuses seen)
    int64_t configs = 0;                       ///< distinct configs measured
    int64_t runs = 0;
    int64_t trials = 0; ///< sum of trials_done over the runs
    std::optional<double> best_ms;
    struct PerStrategy {
        std::string strategy;
        int64_t runs = 0;
        int64_t trials = 0;       ///< sum of trials_done
        int64_t measurements = 0; ///< measurements recorded by runs of this strategy
        std::optional<double> best_ms;
    };
    std::vector<PerStrategy> per_strategy; ///< sorted by strategy name
};

/// Which part of the database statistics/export look at; an empty field means "all".
struct Filter {
    std::optional<int64_t> workload_id;
    std::optional<int64_t> target_id;
    std::optional<std::string> op; ///< operator name
};

/// A config's loop-nest features on a workload and target, with its median over the ok
/// measurements there: a training row of the cost model (Database::feature_rows).
struct FeatureRow {
    int64_t workload_id = 0;
    int64_t config_id = 0;
    std::vector<float> features;
    double median_ms = 0;
};

/// A cost model trained on a target's feature rows (autotune/CostModel.h), saved as `file`
/// beside the database. `evaluation` says how well it ranked workloads held out of its training
/// (per workload: rows and Kendall tau; their mean), as the tuner measured when it saved it.
struct CostModelRecord {
    int64_t id = 0;
    int64_t target_id = 0;
    std::string version; ///< the feature set's version
    int64_t trained_us = 0;
    int64_t rows = 0, workloads = 0;
    std::string file;
    nlohmann::json evaluation = nlohmann::json::object();
};

/// What import_json added (rows already present are skipped and counted as such).
struct ImportSummary {
    int64_t targets_added = 0, workloads_added = 0, configs_added = 0, runs_added = 0;
    int64_t measurements_added = 0, measurements_skipped = 0;
    int64_t features_added = 0; ///< the cost model's training rows (Database::record_features)
};

class Database {
public:
    /// The schema version this build writes. Older databases are migrated on open.
    static constexpr int schema_version = 6;
    /// The export format version (export_json's "format_version").
    static constexpr int export_format_version = 1;

    /// Opens (creating it and its schema when missing) the database at `path`. Raises
    /// RuntimeError naming the file for a file that is not SQLite, not a kiln tuning database, or
    /// has a newer schema version than this build knows.
    static Database open(const std::string &path);
    /// Like open, but raises RuntimeError (naming the file, suggesting `kiln tune`) when the
    /// file does not exist instead of creating it. For read-only tools such as `kiln db`.
    /// It opens without creating, converting or migrating anything: no WAL switch, no schema; a
    /// 0-byte file, a foreign SQLite file or another schema version is refused unchanged.
    static Database open_existing(const std::string &path);

    Database(Database &&) noexcept;
    Database &operator=(Database &&) noexcept;
    ~Database();
    Database(const Database &) = delete;
    Database &operator=(const Database &) = delete;

    const std::string &path() const;

    // --- keys: get-or-create, each in its own committed transaction ---------------------------
    int64_t target_id(const TargetKey &key);
    int64_t workload_id(const WorkloadKey &key);
    /// The config with this hash, inserting it when new. A second call with the same hash and
    /// different JSON raises RuntimeError (a hash collision or a bug in the caller's hashing).
    int64_t config_id(const std::string &config_hash, const std::string &config_json,
                      const std::string &trace_json);
    /// Lookups that never create.
    std::optional<int64_t> find_target(const TargetKey &key) const;
    std::optional<int64_t> find_workload(const WorkloadKey &key) const;
    std::optional<ConfigRecord> find_config(const std::string &config_hash) const;
    /// Raises RuntimeError naming the id when there is no such row.
    ConfigRecord config(int64_t config_id) const;
    TargetRecord target(int64_t target_id) const;
    WorkloadRecord workload(int64_t workload_id) const;
    std::vector<TargetRecord> targets() const;
    /// All workloads with their summaries, sorted by operator, then shape, then id.
    std::vector<WorkloadRecord> workloads() const;
    /// Workloads of operator `op` (and shape `shape` when not empty).
    std::vector<WorkloadRecord> workloads_matching(const std::string &op,
                                                   const std::string &shape = "") const;

    // --- measurements ---------------------------------------------------------------------------
    /// Records one measurement in one transaction, committed before returning. Returns its id.
    /// Raises RuntimeError for ids that do not exist (naming them) or a run of another workload.
    int64_t record_measurement(const MeasurementRecord &m);
    /// The measurement already stored for this config on this workload and target: the fastest
    /// ok one if any, else the latest. A resumed run uses it to skip configs it already has.
    std::optional<Measurement> find_measurement(int64_t workload_id, int64_t target_id,
                                                const std::string &config_hash) const;
    /// The best config: the first of top_k.
    std::optional<BestConfig> best(int64_t workload_id, int64_t target_id,
                                   int64_t closing_run = 0) const;
    /// The k best ok configs, one entry per config, best first: the contenders of the standing
    /// closing round by their times in it, then the others by their medians (BestConfig), the
    /// earliest measured first on ties. closing_run: a run whose closing round is under way
    /// (the tuner's own, not finished yet) stands as if it were finished.
    std::vector<BestConfig> top_k(int64_t workload_id, int64_t target_id, int k,
                                  int64_t closing_run = 0) const;
    /// Every measurement of the workload on the target (all runs when run_id is 0), oldest first.
    std::vector<Measurement> history(int64_t workload_id, int64_t target_id,
                                     int64_t run_id = 0) const;
    Statistics statistics(const Filter &filter = {}) const;

    /// Apply-the-best support: the trace JSON of the best config, without creating any key.
    /// Empty when the workload or target is unknown or has no ok measurement.
    std::optional<std::string> best_trace_json(const WorkloadKey &workload,
                                               const TargetKey &target) const;

    // --- the cost model's data (tuning_db/CostModels.cpp) ----------------------------------------
    /// Stores (or replaces) a config's features on a workload and target, for the feature set
    /// `version`. Raises for ids that do not exist, or a non-finite value.
    void record_features(int64_t workload_id, int64_t target_id, int64_t config_id,
                         const std::string &version, const std::vector<float> &features);
    /// The training rows of a target for a feature-set version: every config with stored
    /// features and at least one ok measurement on that workload and target, with its median.
    /// Ordered by workload, then config. Empty for a file older than schema version 5.
    std::vector<FeatureRow> feature_rows(int64_t target_id, const std::string &version) const;
    /// Records a saved model; returns its id.
    int64_t record_cost_model(const CostModelRecord &model);
    /// The latest saved model of each target (all targets when target_id is 0), by target id.
    std::vector<CostModelRecord> cost_models(int64_t target_id = 0) const;

    // --- tuning runs ----------------------------------------------------------------------------
    /// Creates a run owned by the calling process (RunOwner::this_process()).
    int64_t create_run(int64_t workload_id, int64_t target_id, const std::string &strategy,
                       int64_t seed, int64_t budget_trials, double budget_seconds,
                       const std::string &state_json);
    /// Taking over an unfinished run, atomically: in one write transaction, reads the run's owner
    /// and makes `me` the owner when there is none, it is `me`, or it is no longer alive
    /// (RunOwner::alive). Of two processes claiming one run at once exactly one gets it; the
    /// other gets claimed == false and the winner as holder. A finished run is never claimed.
    /// Raises for an unknown run.
    RunClaim claim_run(int64_t run_id, const RunOwner &me = RunOwner::this_process());
    /// Saves the strategy state (committed before returning). Raises for an unknown run.
    /// Incremental: the state's record lists (tuning_db/RunState.h) are stored one row per
    /// element, and only the elements after the longest unchanged prefix are written, so a
    /// commit writes what is new, not the whole state. run() and export give the state whole.
    void update_run_state(int64_t run_id, const std::string &state_json, int64_t trials_done,
                          double elapsed_s);
    /// Marks the run finished (a finished run is not offered for resume).
    void finish_run(int64_t run_id);
    std::optional<RunRecord> run(int64_t run_id) const;
    /// The most recently started unfinished run of this strategy, to resume; empty when none.
    std::optional<RunRecord> latest_run(int64_t workload_id, int64_t target_id,
                                        const std::string &strategy) const;
    /// Runs of a workload on a target (all targets when target_id is 0), oldest first.
    std::vector<RunRecord> runs(int64_t workload_id, int64_t target_id = 0) const;
    /// The run's best-so-far curve, one point per measurement of the run.
    std::vector<ProgressPoint> progress(int64_t run_id) const;

    // --- export / import ------------------------------------------------------------------------
    /// Everything selected by the filter, as one JSON document (see docs: format_version 1).
    nlohmann::json export_json(const Filter &filter = {}) const;
    /// Adds the document's rows, in one transaction. Idempotent: targets, workloads, configs and
    /// runs are matched by their keys (config hash, run uuid), and measurements by (workload,
    /// target, config, run uuid, timestamp), so importing the same file twice adds nothing.
    /// Raises RuntimeError naming the field for a malformed document (nothing is added then).
    ImportSummary import_json(const nlohmann::json &document);

    /// SQLite's PRAGMA integrity_check: "ok" for a healthy file.
    std::string integrity_check() const;

    struct Impl; ///< the connection and its prepared statements (tuning_db/DatabaseImpl.h)

private:
    explicit Database(std::unique_ptr<Impl> impl);
    static Database open_database(const std::string &path, bool read_only);
    std::unique_ptr<Impl> impl_;
};

} // namespace kiln::tuning_db
