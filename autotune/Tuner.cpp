#include "autotune/Tuner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "autotune/CostModel.h"
#include "autotune/Features.h"
#include "autotune/Runner.h"
#include "autotune/Strategy.h"
#include "autotune/WorkerPool.h"
#include "codegen/Target.h"
#include "driver/Pipeline.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"
#include "schedule/ScheduleTrace.h"

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif
#ifndef KILN_LLVM_VERSION_STRING
#define KILN_LLVM_VERSION_STRING "unknown"
#endif

namespace kiln::autotune {

using tuning_db::Status;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

tuning_db::TargetKey host_target_key(int threads) {
    return target_key(Target::host(), threads);
}

tuning_db::TargetKey target_key(const Target &t, int threads,
                                const std::string &device_description) {
    tuning_db::TargetKey k;
    k.cpu_model = t.cpu;
    k.features = t.features;
    if (t.has_gpu()) {
        k.cpu_model += std::string(" + ") + gpu_api_name(t.gpu) + ": " + device_description;
        k.features += std::string(",gpu=") + gpu_api_name(t.gpu);
    }
    k.threads = threads;
    k.compiler = std::string("kiln ") + KILN_VERSION_STRING + " / LLVM " + KILN_LLVM_VERSION_STRING;
    return k;
}

Target tune_target(const std::string &text) {
    if (text.empty()) return Target::host();
    try {
        return Target::parse(text);
    } catch (const CompileError &e) {
        throw CompileError(std::string("--target: ") + e.what());
    }
}

GpuDevice open_gpu_device(const Target &target) {
    std::string api = gpu_api_name(target.gpu);
    auto fail = [&](const std::string &what) {
        return RuntimeError("--target with gpu=" + api + ": " + what + ": " +
                            kiln_last_error_message() +
                            " (tune for the CPU with --target host, or run where the " + api +
                            " driver and a device are installed)");
    };
    const kiln_device_interface_t *iface = kiln_device_interface(int(target.gpu));
    if (!iface) throw fail("no " + api + " device interface");
    char buf[512] = {};
    if (iface->device_description(buf, sizeof buf) != 0)
        throw fail("cannot open the " + api + " device");
    GpuDevice d;
    d.description = buf;
    int64_t threads = 0, shared = 0;
    if (iface->device_limits(&threads, &shared) != 0)
        throw fail("cannot read the " + api + " device's limits");
    if (threads > 0) d.limits.max_threads_per_block = threads;
    if (shared > 0) d.limits.shared_memory_bytes = shared;
    return d;
}

tuning_db::WorkloadKey workload_key(const apps::Operator &op, const std::vector<int64_t> &shape) {
    apps::OperatorInstance inst = op.make(shape);
    char hash[32];
    std::snprintf(hash, sizeof hash, "0x%016llx",
                  (unsigned long long)algorithm_hash({inst.output}));
    std::string types;
    for (const ImageParam &p : inst.inputs)
        types += p.type().to_string() + ",";
    types += "->" + inst.output.output_type().to_string();
    return {op.name, hash, apps::shape_to_string(shape), types};
}

int64_t physical_memory_bytes() {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return 0;
    return int64_t(pages) * int64_t(page);
}

int default_threads() {
    return std::max(1u, std::thread::hardware_concurrency());
}

bool is_transient_failure(Status s) {
    return s == Status::timeout || s == Status::crash || s == Status::runtime_error;
}

std::string format_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    char buf[32];
    int64_t t = std::llround(s);
    if (t >= 3600)
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(t / 3600),
                      (long long)(t / 60 % 60));
    else if (t >= 60)
        std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
    else
        std::snprintf(buf, sizeof buf, "%llds", (long long)t);
    return buf;
}

namespace {

/// This process's start time in clock ticks since boot (/proc/self/stat field 22), which with the
/// pid identifies a live process even after pid reuse.
int64_t process_start_ticks(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; i++) {
        if (i == 22) return std::stoll(field);
    }
    return -1;
}

std::string host_name() {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

/// The seed of run `run_id` tuned with --seed `seed`: run 1 uses the seed as given, later runs
/// another one each, so that runs with one --seed explore different configs.
uint64_t run_seed(uint64_t seed, int64_t run_id) {
    return seed + uint64_t(run_id - 1) * 0x9E3779B97F4A7C15ull;
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

/// The shape to tune: the given one, or the operator's default when none is given.
std::vector<int64_t> checked_shape(const apps::Operator &op, const std::vector<int64_t> &shape) {
    if (shape.empty()) return op.default_shape;
    if (shape.size() != op.shape_names.size()) {
        std::string names;
        for (const std::string &n : op.shape_names)
            names += (names.empty() ? "" : "x") + n;
        throw CompileError("operator '" + op.name + "' takes " +
                           std::to_string(op.shape_names.size()) + " shape values (" + names +
                           "), got " + std::to_string(shape.size()));
    }
    return shape;
}

std::string gib_text(int64_t bytes) {
    char buf[32];
    double gib = double(bytes) / double(int64_t(1) << 30);
    std::snprintf(buf, sizeof buf, gib >= 100 ? "%.0f GiB" : "%.3g GiB", gib);
    return buf;
}

} // namespace

int64_t tuning_memory_bytes(const apps::Operator &op, const std::vector<int64_t> &shape, int jobs) {
    const int64_t copies_per_worker = op.reference ? 2 : 3;
    return apps::buffer_bytes(op, shape) * (1 + int64_t(std::max(jobs, 1)) * copies_per_worker);
}

namespace {

/// The shape, once the job's buffers (tuning_memory_bytes) are known to fit in this machine's
/// physical memory; before anything is allocated or opened. What the operator refuses in
/// building itself (a shape value out of its range, a generator's unknown parameter) is raised
/// from here too, so also before the database is opened.
std::vector<int64_t> fitting_shape(const apps::Operator &op, const std::vector<int64_t> &shape,
                                   int jobs) {
    int64_t buffers = apps::buffer_bytes(op, shape);
    int64_t need = tuning_memory_bytes(op, shape, jobs);
    int64_t have = physical_memory_bytes();
    if (have > 0 && need > have)
        throw CompileError("--shape " + apps::shape_to_string(shape) + ": tuning " + op.name +
                           " needs " + gib_text(need) + " (" + gib_text(buffers) +
                           " of input and output buffers, held by the tuner and " +
                           (op.reference ? "twice" : "three times") + " by each of the " +
                           std::to_string(jobs) + " worker processes), more than the " +
                           gib_text(have) +
                           " of physical memory of this machine; tune a smaller --shape or use "
                           "fewer --jobs here, or tune on a machine with more memory");
    return shape;
}

/// What the database holds for one config on the tuned workload and target.
struct Attempts {
    bool ok = false;       ///< an ok measurement
    bool final = false;    ///< a deterministic failure (compile_error, wrong_answer)
    int transient = 0;     ///< timeouts, crashes and runtime errors, over every run
    std::set<int64_t> ids; ///< the measurements counted
    int64_t latest_id = 0; ///< the newest of them
    Status latest = Status::ok;
    /// Not to be measured again by any run.
    bool settled() const { return ok || final || transient >= max_transient_attempts; }
    void add(int64_t id, Status s) {
        if (!ids.insert(id).second) return;
        if (s == Status::ok)
            ok = true;
        else if (is_transient_failure(s))
            transient++;
        else
            final = true;
        if (id > latest_id) {
            latest_id = id;
            latest = s;
        }
    }
};

class Tuner {
public:
    Tuner(const TuneOptions &o, std::ostream &out, std::ostream &err)
        : opt(o), out(out), err(err), op(apps::find_operator(o.op)),
          shape(fitting_shape(op, checked_shape(op, o.shape), o.jobs)),
          target(tune_target(o.target)),
          device(target.has_gpu() ? open_gpu_device(target) : GpuDevice{}),
          space(space_for(op, shape, o.space, target, &device.limits)),
          db(tuning_db::Database::open(o.db_path)), strategy(make_strategy(o.strategy, o.seed)) {
        threads = opt.threads > 0 ? opt.threads : default_threads();
        worker_path = opt.worker_path.empty() ? default_worker_path() : opt.worker_path;
        workload = workload_key(op, shape);
        space.set_salt(workload.algorithm_hash + "/" + workload.shape);
        target_id = db.target_id(target_key(target, threads, device.description));
        if (target.has_gpu() && opt.progress)
            err << "target: " << gpu_api_name(target.gpu) << " device " << device.description
                << " (" << device.limits.max_threads_per_block << " threads, "
                << device.limits.shared_memory_bytes << " bytes of shared memory per block)\n";
        workload_id = db.workload_id(workload);
    }

    TuneResult run();

private:
    // --- the strategy's view --------------------------------------------------------------------
    /// In flight, measured by this invocation, or settled by the database: a config whose
    /// transient failures are fewer than max_transient_attempts is not known, so it is retried
    /// (once per invocation, under this invocation's limits).
    bool known(const std::string &hash) {
        if (in_flight.count(hash) || tried.count(hash)) return true;
        return settled(hash);
    }

    /// Whether the database settles the config (Attempts::settled). One indexed lookup; the
    /// attempts are counted again from the history when another process recorded one since.
    bool settled(const std::string &hash) {
        auto it = attempts.find(hash);
        if (it != attempts.end() && it->second.settled()) return true;
        std::optional<tuning_db::Measurement> m = db.find_measurement(workload_id, target_id, hash);
        if (!m) return false;
        if (m->status == Status::ok) {
            attempts[hash].ok = true;
            return true;
        }
        if (it == attempts.end() || !it->second.ids.count(m->id)) {
            load_attempts();
            it = attempts.find(hash);
        }
        return it != attempts.end() && it->second.settled();
    }

    /// Counts every measurement of the workload on the target, per config.
    void load_attempts() {
        attempts.clear();
        for (const tuning_db::Measurement &m : db.history(workload_id, target_id))
            attempts[m.config_hash].add(m.id, m.status);
    }

    // --- budget ---------------------------------------------------------------------------------
    double elapsed() const {
        return seconds_since(start) + (opt.budget_across_runs ? elapsed_before : 0);
    }
    int64_t trials_counted() const {
        return result.trials + (opt.budget_across_runs ? trials_before_budget : 0);
    }
    int64_t search_in_flight() const {
        int64_t n = 0;
        for (const Candidate &c : queue)
            n += c.kind == Candidate::Kind::search;
        for (const Slot &s : pool->slots())
            n += s.state != Slot::State::idle && s.cand.kind == Candidate::Kind::search;
        return n;
    }
    bool time_left() const { return opt.time_s <= 0 || elapsed() < opt.time_s; }
    bool may_start_search() const {
        if (stopping() || !time_left() || exhausted) return false;
        return opt.trials <= 0 || trials_counted() + search_in_flight() < opt.trials;
    }
    bool stopping() const { return opt.stop && opt.stop->load(); }

    // --- recording ------------------------------------------------------------------------------
    void record(const Candidate &c, Status status, const std::vector<double> &times, double median,
                double spread, double compile_ms, const std::string &error);
    void refill();
    void add_search_candidate(const Config &c);
    void start_builds();
    void start_measure();
    void handle_line(Slot &s, const std::string &line);
    void handle_death(Slot &s);
    void handle_timeout(Slot &s);
    void drive(bool search);
    double run_deadline_s() const {
        if (best_ms) return std::max(opt.timeout_s, 20.0 * *best_ms / 1000.0);
        return std::max(opt.timeout_s, opt.first_timeout_s);
    }
    void progress(bool final_line = false);
    /// Whether `err` is a terminal: only then may lines start with "\r\033[K" (return, clear the
    /// line) to overwrite the progress line. A pipe or a file gets plain lines.
    bool err_is_terminal() const { return (&err == &std::cerr || &err == &std::clog) && isatty(2); }
    /// The run row's state: the strategy's state and the process running it, so a second tuner
    /// does not resume a run that is still being tuned.
    json run_state() const {
        return {
            {"strategy", strategy->state()},
            {"owner",
             {{"pid", getpid()}, {"start", process_start_ticks(getpid())}, {"host", host_name()}}}};
    }
    void baselines();
    Candidate baseline(Candidate::Kind kind);
    /// Claims the latest run of the strategy (resume) or creates a new one; sets run_id.
    void resume_or_start_run();
    /// --budget-across-runs: the trials and time of the strategy's earlier runs.
    void count_earlier_runs();
    void remeasure_best();
    /// Re-measures a config recorded in the database (the closing round).
    void queue_remeasure(const tuning_db::BestConfig &b);
    /// The closing round's last step: the crowned config and the hand schedule, re-measured in
    /// pairs until the closing times of both settle (closing_times_settled); a crowned hand
    /// schedule against the best other config within closing_tolerance of it.
    void settle_against_hand();
    /// The summary on `out`: counts, the best config and its speedups, how to resume.
    void print_summary(const std::optional<tuning_db::BestConfig> &b);

    const TuneOptions &opt;
    std::ostream &out, &err;
    const apps::Operator &op;
    std::vector<int64_t> shape;
    Target target;
    GpuDevice device; ///< empty for a CPU target
    SearchSpace space;
    tuning_db::Database db;
    std::unique_ptr<Strategy> strategy;
    int threads = 1;
    std::string worker_path;
    tuning_db::WorkloadKey workload;
    int64_t target_id = 0, workload_id = 0, run_id = 0;
    int64_t trials_before = 0, trials_before_budget = 0;
    double elapsed_before = 0;
    Clock::time_point start = Clock::now(), last_progress = Clock::now() - std::chrono::hours(1);
    ProposalContext ctx{space, nullptr, nullptr};

    std::set<std::string> in_flight;
    std::set<std::string> tried;              ///< recorded by this invocation: not again
    std::map<std::string, Attempts> attempts; ///< the database's measurements, per config hash
    FeatureCache features{op, shape, space};
    std::deque<Candidate> queue;
    std::optional<WorkerPool> pool; ///< started by run()
    bool exhausted = false;
    int empty_proposals = 0;
    std::optional<double> best_ms;
    /// The closing re-measurements of this run's closing round (remeasure_best; an earlier
    /// invocation's too when the run was resumed in it), per config hash, in
    /// order: the best and the hand schedule timed one after the other, under the same
    /// conditions.
    std::map<std::string, std::vector<double>> closing_ms;
    std::string hand_hash; ///< set by remeasure_best when the hand schedule applies
    std::optional<Candidate> hand_remeasure; ///< the hand schedule as a closing candidate
    /// This invocation's ok search trials: (trial number over the run, time), in order.
    std::vector<std::pair<int64_t, double>> search_times;
    TrainingRows prior; ///< other workloads' features on this target (the model strategy's)
    TuneResult result;
};

void Tuner::record(const Candidate &c, Status status, const std::vector<double> &times,
                   double median, double spread, double compile_ms, const std::string &error) {
    int64_t config_id = db.config_id(c.hash, c.config_json, c.trace_json);
    tuning_db::MeasurementRecord m;
    m.run_id = run_id;
    m.workload_id = workload_id;
    m.target_id = target_id;
    m.config_id = config_id;
    m.status = status;
    m.times_ms = times;
    m.median_ms = median;
    m.spread_ms = spread;
    m.compile_ms = compile_ms;
    m.error = error;
    m.closing = c.kind == Candidate::Kind::remeasure;
    int64_t id = db.record_measurement(m);
    in_flight.erase(c.hash);
    tried.insert(c.hash);
    attempts[c.hash].add(id, status);
    result.recorded++;
    result.per_status[tuning_db::to_string(status)]++;
    bool ok = status == Status::ok;
    if (ok && (!best_ms || median < *best_ms)) best_ms = median;
    if (c.kind == Candidate::Kind::default_schedule && ok) result.default_ms = median;
    if (c.kind == Candidate::Kind::hand_schedule && ok) result.hand_ms = median;
    if (c.kind == Candidate::Kind::remeasure && ok) closing_ms[c.hash].push_back(median);
    if (c.kind == Candidate::Kind::search) {
        result.trials++;
        if (ok && (!result.best_search_ms || median < *result.best_search_ms))
            result.best_search_ms = median;
        if (ok) search_times.emplace_back(trials_before + result.trials, median);
        if (c.config) strategy->observe(ctx, *c.config, Outcome{status, median});
        // The cost model's training data across runs: the features of each ok config.
        if (ok && c.config) {
            if (std::optional<std::vector<float>> f = features(*c.config))
                db.record_features(workload_id, target_id, config_id, feature_version(), *f);
        }
    }
    db.update_run_state(run_id, run_state().dump(), trials_before + result.trials,
                        elapsed_before + seconds_since(start));
    if (!ok && opt.progress) {
        std::string e = error.substr(0, 160);
        std::replace(e.begin(), e.end(), '\n', ' ');
        err << (err_is_terminal() ? "\r\033[K" : "") << tuning_db::to_string(status) << " (config "
            << c.hash << "): " << e << "\n";
    }
}

void Tuner::add_search_candidate(const Config &c) {
    Candidate cand;
    cand.config = c;
    cand.hash = space.hash(c);
    cand.config_json = space.to_json(c).dump();
    in_flight.insert(cand.hash);
    // Rejected before any worker sees it: a schedule that does not apply, or one whose lowered
    // code fails a check (an input read outside its buffer, say) at this shape whatever the data.
    std::optional<std::string> failed;
    try {
        cand.trace_json = space.trace(op, shape, c).to_json_string(-1);
        if (!target.has_gpu()) failed = features.failed_check(c);
        if (failed) failed = "rejected before measuring: at this shape, " + *failed;
    } catch (const CompileError &e) {
        failed = e.what();
    }
    if (failed) {
        result.rejected++;
        record(cand, Status::compile_error, {}, 0, 0, 0, *failed);
        return;
    }
    queue.push_back(std::move(cand));
}

void Tuner::refill() {
    while (int(queue.size()) < opt.jobs && may_start_search()) {
        int want = opt.jobs - int(queue.size());
        if (opt.trials > 0)
            want = int(std::min<int64_t>(want, opt.trials - trials_counted() - search_in_flight()));
        if (want <= 0) return;
        std::vector<Config> batch = strategy->propose(ctx, want);
        if (batch.empty()) {
            if (++empty_proposals >= 3) exhausted = true;
            return;
        }
        empty_proposals = 0;
        for (const Config &c : batch) {
            if (known(space.hash(c))) continue; // a strategy bug would otherwise measure twice
            add_search_candidate(c);
        }
    }
}

void Tuner::start_builds() {
    if (pool->timing()) return; // no compile starts while a candidate is timed
    for (Slot &s : pool->slots()) {
        if (s.state != Slot::State::idle || queue.empty()) continue;
        s.cand = std::move(queue.front());
        queue.pop_front();
        json req = {{"cmd", "build"},     {"op", op.name},
                    {"shape", shape},     {"trace", json::parse(s.cand.trace_json)},
                    {"threads", threads}, {"target", target.to_string()}};
        if (!s.worker->send(req)) {
            // The worker died while idle: start another and try again later.
            queue.push_front(std::move(s.cand));
            pool->replace(s);
            continue;
        }
        s.state = Slot::State::building;
        s.set_deadline(Slot::Phase::compiling, opt.compile_timeout_s);
    }
}

void Tuner::start_measure() {
    Slot *next = pool->next_to_measure();
    if (!next) return;
    if (!time_left() && next->cand.kind == Candidate::Kind::search) {
        // Out of time: a search candidate built in time is dropped, not measured. Left built,
        // it would hold its slot as the earliest built, which next_to_measure returns first, and
        // the re-measurements after the search would wait on it (a layernorm run hung there).
        in_flight.erase(next->cand.hash);
        next->worker->kill();
        pool->replace(*next);
        return;
    }
    json req = {
        {"cmd", "measure"}, {"min_time_ms", opt.min_time_ms}, {"warmup", 1}, {"max_repeats", 200}};
    if (!next->worker->send(req)) {
        handle_death(*next);
        return;
    }
    next->state = Slot::State::measuring;
    next->set_deadline(Slot::Phase::first_run, run_deadline_s());
}

void Tuner::handle_line(Slot &s, const std::string &line) {
    json j;
    try {
        j = json::parse(line);
    } catch (const json::exception &) {
        return; // not a protocol line
    }
    if (j.contains("event")) {
        std::string ev = j["event"].get<std::string>();
        if (ev == "ran") {
            s.first_ms = j.value("first_ms", 0.0);
            s.set_deadline(Slot::Phase::checking, opt.compile_timeout_s);
        } else if (ev == "checked") {
            // The worker times for up to 4 x min_time_ms while its samples do not settle.
            s.set_deadline(Slot::Phase::timing,
                           2 * (4 * opt.min_time_ms + 10 * s.first_ms) / 1000.0 + 5);
            pool->pause_builders(); // nothing compiles while the candidate is timed
        }
        return;
    }
    std::string status = j.value("status", "runtime_error");
    if (s.state == Slot::State::building) {
        if (status == "built") {
            pool->mark_built(s);
            s.compile_ms = j.value("compile_ms", 0.0);
            return;
        }
        // compile_error, or runtime_error when a GPU kernel failed its first (warm-up) run.
        Status st = Status::compile_error;
        try {
            st = tuning_db::status_from_string(status);
        } catch (const std::exception &) {
        }
        record(s.cand, st, {}, 0, 0, 0, j.value("error", ""));
        s.state = Slot::State::idle;
        return;
    }
    if (s.state != Slot::State::measuring) return;
    if (status == "ok") {
        record(s.cand, Status::ok, j.value("times_ms", std::vector<double>{}),
               j.value("median_ms", 0.0), j.value("spread_ms", 0.0), s.compile_ms, "");
    } else {
        Status st = Status::runtime_error;
        try {
            st = tuning_db::status_from_string(status);
        } catch (const std::exception &) {
        }
        record(s.cand, st, {}, 0, 0, s.compile_ms, j.value("error", ""));
    }
    s.state = Slot::State::idle;
}

void Tuner::handle_death(Slot &s) {
    std::string why = s.worker->death_description();
    bool measuring = s.state == Slot::State::measuring, building = s.state == Slot::State::building;
    if (measuring || building) {
        // The tuner kills a worker only on a deadline (recorded as a timeout, not here): a
        // SIGKILL seen here came from outside. A crash is transient either way: retried later.
        if (s.worker->died_by_signal() && why.rfind("worker killed by signal 9 ", 0) == 0)
            why.insert(why.find(')') + 1, " from outside the tuner (the OOM killer or a kill)");
        record(s.cand, Status::crash, {}, 0, 0, s.compile_ms,
               why + (building ? " while compiling" : " while running the candidate"));
    } else if (s.state == Slot::State::built) {
        queue.push_front(std::move(s.cand)); // not the candidate's fault as far as we know
    }
    pool->replace(s);
}

void Tuner::handle_timeout(Slot &s) {
    s.worker->kill();
    char buf[240];
    std::snprintf(buf, sizeof buf, "no answer while %s within %.3g s", Slot::phase_name(s.phase),
                  s.limit_s);
    std::string msg = buf;
    if (s.phase == Slot::Phase::first_run)
        msg += " (the limit is max(--timeout, 20 x the best time), or --first-timeout before any "
               "candidate succeeded)";
    record(s.cand, Status::timeout, {}, 0, 0, s.compile_ms, msg);
    pool->replace(s);
}

void Tuner::drive(bool search) {
    for (;;) {
        if (stopping()) return;
        if (search) refill();
        if (!pool->timing()) pool->resume_builders();
        start_builds();
        start_measure();
        bool measuring = pool->any(Slot::State::measuring);
        bool built = pool->any(Slot::State::built);
        if (!pool->any_busy() && !(built && (time_left() || !search)) && queue.empty() &&
            (!search || !may_start_search()))
            return;
        if (!time_left() && search && !measuring) {
            // Out of time: the measurement in progress has finished; drop the rest.
            for (Slot &s : pool->slots()) {
                if (s.state == Slot::State::building || s.state == Slot::State::built) {
                    in_flight.erase(s.cand.hash);
                    s.worker->kill();
                    pool->replace(s);
                }
            }
            for (const Candidate &c : queue)
                in_flight.erase(c.hash);
            queue.clear();
            return;
        }
        pool->wait([this](Slot &s, const std::string &line) { handle_line(s, line); },
                   [this](Slot &s) { handle_death(s); }, [this](Slot &s) { handle_timeout(s); });
        progress();
    }
}

void Tuner::progress(bool final_line) {
    if (!opt.progress) return;
    bool tty = err_is_terminal();
    if (!final_line && seconds_since(last_progress) < (tty ? 0.5 : 30.0)) return;
    last_progress = Clock::now();
    std::ostringstream s;
    int64_t failures = 0;
    for (const auto &[name, n] : result.per_status)
        failures += name == "ok" ? 0 : n;
    s << "[" << op.name << " " << apps::shape_to_string(shape) << " " << opt.strategy << "] trials "
      << trials_counted();
    if (opt.trials > 0) s << "/" << opt.trials;
    s << " | failed " << failures;
    if (best_ms) {
        char buf[96];
        double rate = op.work(shape) / (*best_ms * 1e-3) * 1e-9;
        std::snprintf(buf, sizeof buf, " | best %.4g ms %.1f %s", *best_ms, rate,
                      op.work_unit.c_str());
        s << buf;
    }
    double el = elapsed();
    s << " | " << format_duration(seconds_since(start));
    double eta = INFINITY;
    if (opt.trials > 0 && result.trials > 0)
        eta = seconds_since(start) / double(result.trials) * double(opt.trials - trials_counted());
    if (opt.time_s > 0) eta = std::min(eta, std::max(0.0, opt.time_s - el));
    if (std::isfinite(eta)) s << ", ETA " << format_duration(eta);
    if (tty)
        err << "\r\033[K" << s.str() << (final_line ? "\n" : "") << std::flush;
    else
        err << s.str() << "\n" << std::flush;
}

Candidate Tuner::baseline(Candidate::Kind kind) {
    Candidate c;
    c.kind = kind;
    std::string name = kind == Candidate::Kind::default_schedule ? "default" : "hand";
    c.config_json = json{{"baseline", name}}.dump();
    apps::OperatorInstance inst = op.make(shape);
    if (kind == Candidate::Kind::hand_schedule) op.hand_schedule(inst, target);
    c.trace_json = ScheduleTrace::capture({inst.output}).to_json_string(-1);
    c.hash = hex_digest("baseline:" + name + ":" + workload.shape + ":" + c.trace_json);
    return c;
}

void Tuner::baselines() {
    for (auto kind : {Candidate::Kind::default_schedule, Candidate::Kind::hand_schedule}) {
        // The default schedule has no GPU loops: on a GPU target it would be a CPU kernel, and
        // could become the target's best record (and emitted kernel) at small shapes.
        if (target.has_gpu() && kind == Candidate::Kind::default_schedule) continue;
        Candidate c;
        try {
            c = baseline(kind);
        } catch (const CompileError &e) {
            err << "warning: the " << (kind == Candidate::Kind::hand_schedule ? "hand" : "default")
                << " schedule of '" << op.name << "' does not apply: " << e.what() << "\n";
            continue;
        }
        auto m = db.find_measurement(workload_id, target_id, c.hash);
        if (m && m->status == Status::ok) {
            (kind == Candidate::Kind::default_schedule ? result.default_ms : result.hand_ms) =
                m->median_ms;
            if (!best_ms || m->median_ms < *best_ms) best_ms = m->median_ms;
            continue;
        }
        // Measured again after a transient failure (under this invocation's limits), unless it
        // failed deterministically or max_transient_attempts times.
        if (settled(c.hash)) {
            const Attempts &a = attempts[c.hash];
            if (opt.progress)
                err << "the " << (kind == Candidate::Kind::hand_schedule ? "hand" : "default")
                    << " schedule is not measured again: "
                    << (a.final ? std::string("it failed with ") + tuning_db::to_string(a.latest)
                                : "it failed " + std::to_string(a.transient) +
                                      " times (timeout, crash or runtime_error)")
                    << " on this target\n";
            continue;
        }
        in_flight.insert(c.hash);
        queue.push_back(std::move(c));
    }
}

void Tuner::resume_or_start_run() {
    std::optional<tuning_db::RunRecord> previous;
    if (opt.resume) previous = db.latest_run(workload_id, target_id, opt.strategy);
    json previous_state;
    if (previous) {
        try {
            previous_state = json::parse(previous->state_json);
        } catch (const json::exception &) {
            previous_state = json::object();
        }
    }
    // Taking the run over is an atomic claim in the database: of two tuners resuming it at once,
    // exactly one gets it; the other starts its own run.
    std::optional<tuning_db::RunOwner> taken_by;
    int64_t taken_run = 0;
    if (previous) {
        tuning_db::RunClaim claim = db.claim_run(previous->id);
        if (!claim.claimed) {
            if (!claim.finished) taken_by = claim.holder.value_or(tuning_db::RunOwner{});
            taken_run = previous->id;
            previous.reset();
        }
    }
    if (previous) {
        run_id = previous->id;
        trials_before = previous->trials_done;
        elapsed_before = previous->elapsed_s;
        try {
            strategy->restore(previous_state.is_object() && previous_state.contains("strategy")
                                  ? previous_state["strategy"]
                                  : previous_state);
        } catch (const std::exception &e) {
            throw RuntimeError("cannot resume run " + std::to_string(run_id) + " of '" +
                               opt.strategy + "' in " + opt.db_path + ": " + e.what() +
                               "; rerun with --no-resume to start a fresh run");
        }
        result.resumed = true;
        err << "resuming run " << run_id << " (" << trials_before << " trials done)\n";
    } else {
        run_id = db.create_run(workload_id, target_id, opt.strategy, int64_t(opt.seed), opt.trials,
                               opt.time_s, run_state().dump());
        // Seeded by run: two runs with one --seed must not propose (and measure) the same
        // configs. Run 1 keeps the seed as given.
        strategy = make_strategy(opt.strategy, run_seed(opt.seed, run_id));
        db.update_run_state(run_id, run_state().dump(), 0, 0);
        if (taken_run)
            err << "run " << taken_run
                << (taken_by ? " is being resumed by pid " + std::to_string(taken_by->pid)
                             : std::string(" was finished meanwhile"))
                << "; starting run " << run_id << "\n";
    }
}

void Tuner::count_earlier_runs() {
    for (const tuning_db::RunRecord &r : db.runs(workload_id, target_id)) {
        if (r.strategy != opt.strategy) continue;
        trials_before_budget += r.trials_done;
        if (r.id != run_id) elapsed_before += r.elapsed_s;
    }
}

/// Re-measures the best configs: a lucky measurement should not win. The hand schedule is
/// measured again with them, so the summary compares the best with it by measurements taken under
/// the same conditions: its first one, at the start of the run, shares the machine with the first
/// builds and the cold start of the workers (99.7 against 79.9 ms at matmul 2048³, 2 threads).
void Tuner::remeasure_best() {
    // A resumed run's closing round may have begun in an earlier invocation: those times belong
    // to the round as the database ranks it (the run's closing measurements after the latest one
    // outside closing rounds), so the pairs below weigh them too.
    for (const tuning_db::Measurement &m : db.history(workload_id, target_id)) {
        if (m.status != Status::ok) continue;
        if (!m.closing) {
            closing_ms.clear();
        } else if (m.run_id == run_id) {
            closing_ms[m.config_hash].push_back(m.median_ms);
        }
    }
    std::vector<tuning_db::BestConfig> top = db.top_k(workload_id, target_id, opt.remeasure);
    std::optional<Candidate> hand;
    if (opt.baselines && result.hand_ms) {
        try {
            hand = baseline(Candidate::Kind::hand_schedule);
            hand->kind = Candidate::Kind::remeasure;
            hand_hash = hand->hash;
            hand_remeasure = hand;
        } catch (const CompileError &) {
            // The hand schedule was measured, so it applies; nothing to compare otherwise.
        }
        for (const tuning_db::BestConfig &b : top)
            if (hand && b.config.hash == hand->hash) hand.reset(); // re-measured as one of them
    }
    if (hand) queue.push_back(*hand);
    for (const tuning_db::BestConfig &b : top)
        queue_remeasure(b);
    drive(false);
    settle_against_hand();
}

void Tuner::queue_remeasure(const tuning_db::BestConfig &b) {
    Candidate c;
    c.kind = Candidate::Kind::remeasure;
    c.hash = b.config.hash;
    c.config_json = b.config.config_json;
    c.trace_json = b.config.trace_json;
    queue.push_back(std::move(c));
}

// One closing measurement each can mislead: a softmax run crowned a generated config 1.36x the
// hand schedule because the hand's one closing measurement took 11.2 ms against its usual 8.5
// (the machine slowed for that second). So the two are measured again in pairs, back to back
// (the bench's interleaving), until the closing times of both settle, at most --remeasure more
// pairs. The hand's extra measurements count in its median, so they can also give it the crown
// back; then there is nothing left to compare. Settled times that put the hand ahead of the
// crowned config are measured again too (conv2d 256 -> 256 14², 1 thread: a config crowned on
// a fast search measurement measured 2.289 ms at the close against the hand's 2.216): either
// the crown moves or the summary's ratio below 1 stands on more measurements.
//
// A crowned hand schedule is challenged the same way by the best other config when that one is
// within closing_tolerance of it: the hand's crown may stand on a lucky measurement too, and
// losing a real win is the other way the closing round can be wrong.
//
// The crown stands on closing times. The closing round is this run's own (db.best with run_id):
// its contenders, the configs it timed, rank first by their closing times only (BestConfig), so
// a config timed once during the search cannot take the crown from them when the machine runs
// slower at the end than it did then (softmax 4096², 2 threads, on the AMD EPYC: the top
// configs' closing times 8.8-9.0 ms against 5.3-5.4 in the search; ranked by medians over all
// their measurements, the crown walked down the table to configs timed once).
void Tuner::settle_against_hand() {
    if (!hand_remeasure) return;
    for (int pairs = 0; pairs < opt.remeasure && !stopping(); pairs++) {
        std::vector<tuning_db::BestConfig> top = db.top_k(workload_id, target_id, 2, run_id);
        std::optional<std::string> next = next_closing_pair(top, hand_hash, closing_ms);
        if (!next) return;
        for (const tuning_db::BestConfig &b : top)
            if (b.config.hash == *next) queue_remeasure(b);
        queue.push_back(*hand_remeasure);
        drive(false);
    }
}

void Tuner::print_summary(const std::optional<tuning_db::BestConfig> &b) {
    out << "run " << run_id << (result.resumed ? " (resumed)" : "") << ": " << result.recorded
        << " measurements recorded in " << format_duration(result.elapsed_s) << " (";
    bool first = true;
    for (const auto &[name, n] : result.per_status) {
        out << (first ? "" : ", ") << name << " " << n;
        first = false;
    }
    out << ")\n";
    if (result.prior_rows > 0)
        out << "the model started from " << result.prior_rows << " measured configs of "
            << result.prior_workloads << " other workloads on this target\n";
    if (result.cost_model) out << cost_model_summary(*result.cost_model);
    if (result.rejected > 0)
        out << result.rejected
            << " of the search configs were rejected before measuring (compile_error: the schedule "
               "does not apply, or a check of its code fails at this shape)\n";
    if (result.best_ms) {
        char buf[400];
        double rate = op.work(shape) / (*result.best_ms * 1e-3) * 1e-9;
        std::snprintf(buf, sizeof buf, "best: %.4g ms (%.1f %s) for %s %s\n", *result.best_ms, rate,
                      op.work_unit.c_str(), op.name.c_str(), apps::shape_to_string(shape).c_str());
        out << buf;
        if (b->measurements > 1) {
            // Re-measured: its time is the median of its ok measurements, those of the closing
            // round when it is a contender of one (tuning_db::BestConfig).
            std::snprintf(buf, sizeof buf, "the median of %lld measurements%s, %.4g .. %.4g ms",
                          (long long)b->measurements,
                          b->closing_run_id ? " in the closing round" : "", b->min_ms, b->max_ms);
            out << buf;
            if (b->unstable()) {
                std::snprintf(buf, sizeof buf,
                              ": unstable, more than %gx apart (a busy machine? measure again "
                              "with kiln tune on a quiet one)",
                              tuning_db::unstable_ratio);
                out << buf;
            }
            out << "\n";
        }
        out << "config: " << result.best_config_json << "\n";
        auto speedup = [&](const char *what, const std::optional<double> &ms) {
            if (!ms) {
                out << "speedup over the " << what << " schedule: not measured\n";
                return;
            }
            std::snprintf(buf, sizeof buf, "speedup over the %s schedule (%.4g ms): %.2fx\n", what,
                          *ms, *ms / *result.best_ms);
            out << buf;
        };
        speedup("default", result.default_ms);
        if (result.best_search_ms && result.hand_first_ms) {
            // How far the search got on its own, by first measurements, as the search saw them.
            if (result.trials_to_hand) {
                std::snprintf(buf, sizeof buf,
                              "the search reached the hand schedule's first time (%.4g ms) at "
                              "trial %lld; its best first time %.4g ms (%.2fx)\n",
                              *result.hand_first_ms, (long long)*result.trials_to_hand,
                              *result.best_search_ms,
                              *result.hand_first_ms / *result.best_search_ms);
            } else {
                std::snprintf(buf, sizeof buf,
                              "the search did not reach the hand schedule's first time (%.4g ms); "
                              "its best first time %.4g ms (%.2fx)\n",
                              *result.hand_first_ms, *result.best_search_ms,
                              *result.hand_first_ms / *result.best_search_ms);
            }
            out << buf;
        }
        if (!hand_hash.empty() && b->config.hash == hand_hash) {
            // Nothing to compare: one config, whose time is the best's (its closing median).
            out << "speedup over the hand schedule: 1.00x (the hand schedule is the best)\n";
        } else if (result.closing_best_ms && result.closing_hand_ms) {
            // Both timed at the end, one after the other: the fair comparison (remeasure_best).
            std::snprintf(buf, sizeof buf,
                          "speedup over the hand schedule, both re-measured at the end (hand %.4g "
                          "ms, best %.4g ms, medians of %d and %d measurements): %.2fx\n",
                          *result.closing_hand_ms, *result.closing_best_ms,
                          result.closing_hand_measurements, result.closing_best_measurements,
                          *result.closing_hand_ms / *result.closing_best_ms);
            out << buf;
        } else {
            speedup("hand", result.hand_ms);
        }
        out << "schedule as C++:\n" << result.best_cpp;
    } else {
        out << "no candidate ran correctly yet\n";
    }
    if (result.interrupted) {
        out << "stopped; every finished measurement is saved in " << opt.db_path
            << ". Resume with the same command (kiln tune "
            << (opt.command_operand.empty() ? op.name : opt.command_operand) << " --shape "
            << apps::shape_to_string(shape) << " --strategy " << opt.strategy
            << (target.has_gpu() ? " --target " + opt.target : std::string()) << " --db "
            << opt.db_path << " ...); --no-resume starts over\n";
    }
}

TuneResult Tuner::run() {
    ctx.known = [this](const std::string &h) { return known(h); };
    ctx.features = [this](const Config &c) { return features(c); };
    resume_or_start_run();
    result.run_id = run_id;
    if (opt.budget_across_runs) count_earlier_runs();
    if (auto b = db.best(workload_id, target_id)) best_ms = b->median_ms;
    if (opt.strategy == "model" || opt.strategy == "bandit") { // bandit has a model arm
        prior = training_rows(db.feature_rows(target_id, feature_version()), workload_id);
        if (!prior.empty()) ctx.prior = &prior;
        result.prior_rows = int64_t(prior.rows.size());
        result.prior_workloads = prior.workloads;
    }
    load_attempts();

    pool.emplace(worker_path, opt.worker_args, opt.jobs);
    if (opt.baselines) baselines();
    drive(true);

    // Against the hand schedule's first time: the closing round below may replace hand_ms.
    result.hand_first_ms = result.hand_ms;
    if (result.hand_ms) {
        for (const auto &[trial, ms] : search_times) {
            if (ms > *result.hand_ms) continue;
            result.trials_to_hand = trial;
            break;
        }
    }
    if (!stopping() && opt.remeasure > 0) remeasure_best();
    progress(true);
    pool->stop();
    result.elapsed_s = seconds_since(start);
    result.interrupted = stopping();
    if (!result.interrupted && opt.finish_run) db.finish_run(run_id);
    if (result.trials > 0 && opt.save_cost_model) {
        // Saving the model is a by-product: its failure loses nothing measured, so it warns.
        try {
            result.cost_model = update_saved_model(db, target_id);
        } catch (const std::exception &e) {
            err << "warning: the cost model was not saved: " << e.what() << "\n";
        }
    }

    // The crown of this run's closing round, which stands now that the run is finished (a
    // stopped run's does not: then, as for `kiln db best`, the medians over all measurements).
    std::optional<tuning_db::BestConfig> b =
        db.best(workload_id, target_id, result.interrupted ? 0 : run_id);
    if (b) take_best(*b, result);
    auto closing = [&](const std::string &hash, int &count) -> std::optional<double> {
        auto it = closing_ms.find(hash);
        if (it == closing_ms.end() || it->second.empty()) return std::nullopt;
        count = int(it->second.size());
        return median_of(it->second);
    };
    if (b && !hand_hash.empty())
        result.closing_hand_ms = closing(hand_hash, result.closing_hand_measurements);
    if (result.closing_hand_ms) {
        result.closing_best_ms = closing(b->config.hash, result.closing_best_measurements);
        // The hand schedule's time is its closing one beside a closing time of the best, unless
        // it is the best (take_best). Without one, its first time stays: the best's times are
        // from the search, and the closing round may have run slower.
        if (b->config.hash != hand_hash && result.closing_best_ms) {
            result.hand_ms = result.closing_hand_ms;
        }
    }

    print_summary(b);
    return result;
}

} // namespace

namespace {

std::string number_text(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

void require_positive_seconds(const char *name, double v) {
    if (!(v > 0) || !std::isfinite(v))
        throw CompileError(std::string(name) + " " + number_text(v) +
                           ": a positive number of seconds");
}

} // namespace

void validate(const TuneOptions &o) {
    if (o.trials < 0)
        throw CompileError("--trials " + std::to_string(o.trials) +
                           ": 0 (no limit) or a positive number of trials");
    if (!(o.time_s >= 0) || !std::isfinite(o.time_s))
        throw CompileError("--time " + number_text(o.time_s) +
                           ": a positive duration, e.g. 90s, 30m or 8h");
    int max_threads = 4 * default_threads();
    if (o.threads < 0 || o.threads > max_threads)
        throw CompileError("--threads " + std::to_string(o.threads) + ": 0 (all " +
                           std::to_string(default_threads()) + " hardware threads) or 1.." +
                           std::to_string(max_threads) + " (4 x hardware threads)");
    require_positive_seconds("--timeout", o.timeout_s);
    require_positive_seconds("--first-timeout", o.first_timeout_s);
    require_positive_seconds("--compile-timeout", o.compile_timeout_s);
    if (!(o.min_time_ms > 0) || !std::isfinite(o.min_time_ms))
        throw CompileError("--min-time-ms " + number_text(o.min_time_ms) +
                           ": a positive number of milliseconds");
    if (o.remeasure < 0)
        throw CompileError("--remeasure " + std::to_string(o.remeasure) +
                           ": 0 (none) or a positive number of configs");
    if (o.jobs < 1 || o.jobs > max_threads)
        throw CompileError("--jobs " + std::to_string(o.jobs) + ": 1.." +
                           std::to_string(max_threads) +
                           " worker processes (4 x hardware threads)");
    const std::vector<std::string> &names = strategy_names();
    if (std::find(names.begin(), names.end(), o.strategy) == names.end()) {
        std::string list;
        for (const std::string &n : names)
            list += (list.empty() ? "" : ", ") + n;
        throw CompileError("--strategy " + o.strategy + ": unknown strategy '" + o.strategy +
                           "'; choose one of: " + list);
    }
    if (!o.worker_path.empty()) {
        struct stat st;
        std::string why;
        if (stat(o.worker_path.c_str(), &st) != 0)
            why = std::strerror(errno);
        else if (!S_ISREG(st.st_mode))
            why = "not a regular file";
        else if (access(o.worker_path.c_str(), X_OK) != 0)
            why = "not executable";
        if (!why.empty())
            throw RuntimeError("--worker " + o.worker_path +
                               ": the path of an executable kiln-worker (" + why +
                               "); build the kiln-worker target or set KILN_WORKER to its path");
    }
}

double median_of(std::vector<double> ms) {
    std::sort(ms.begin(), ms.end());
    size_t n = ms.size();
    return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

bool closing_times_settled(const std::vector<double> &ms) {
    if (ms.size() < 2) return false;
    double mid = median_of(ms);
    size_t near = 0;
    for (double t : ms)
        near += std::abs(t - mid) <= closing_tolerance * mid;
    return 2 * near > ms.size();
}

bool closing_pair_settled(const std::vector<double> &best_ms, const std::vector<double> &hand_ms) {
    return closing_times_settled(best_ms) && closing_times_settled(hand_ms) &&
           median_of(best_ms) <= median_of(hand_ms);
}

std::optional<std::string>
next_closing_pair(const std::vector<tuning_db::BestConfig> &top, const std::string &hand_hash,
                  const std::map<std::string, std::vector<double>> &closing_ms) {
    if (top.empty()) return std::nullopt;
    auto times = [&](const std::string &hash) {
        auto it = closing_ms.find(hash);
        return it == closing_ms.end() ? std::vector<double>() : it->second;
    };
    const tuning_db::BestConfig &crown = top.front();
    if (crown.config.hash != hand_hash) {
        if (closing_pair_settled(times(crown.config.hash), times(hand_hash))) return std::nullopt;
        return crown.config.hash;
    }
    if (top.size() < 2) return std::nullopt;
    const tuning_db::BestConfig &rival = top[1];
    if (rival.median_ms > crown.median_ms * (1 + closing_tolerance)) return std::nullopt;
    if (closing_pair_settled(times(hand_hash), times(rival.config.hash))) return std::nullopt;
    return rival.config.hash;
}

void take_best(const tuning_db::BestConfig &best, TuneResult &result) {
    result.best_ms = best.median_ms;
    if (best.config.config_json == json{{"baseline", "hand"}}.dump())
        result.hand_ms = best.median_ms;
    if (best.config.config_json == json{{"baseline", "default"}}.dump())
        result.default_ms = best.median_ms;
    result.best_config_json = best.config.config_json;
    result.best_trace_json = best.config.trace_json;
    try {
        result.best_cpp = ScheduleTrace::parse(best.config.trace_json).to_cpp();
    } catch (const CompileError &e) {
        result.best_cpp = std::string("// cannot print the trace: ") + e.what() + "\n";
    }
}

TuneResult tune(const TuneOptions &options, std::ostream &out, std::ostream &err) {
    validate(options);
    apps::register_builtin_operators();
    Tuner t(options, out, err);
    return t.run();
}

} // namespace kiln::autotune
