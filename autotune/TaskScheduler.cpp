#include "autotune/TaskScheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "apps/Operator.h"
#include "autotune/CostModel.h"
#include "lang/Error.h"
#include "tuning_db/TuningDB.h"

namespace kiln::autotune {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string task_name(const TuneTask &t) {
    return t.op + " " + apps::shape_to_string(t.shape);
}

} // namespace

std::vector<TuneTask> parse_tasks(const nlohmann::json &document) {
    apps::register_builtin_operators();
    const nlohmann::json &list =
        document.is_object() && document.contains("tasks") ? document["tasks"] : document;
    if (!list.is_array() || list.empty())
        throw CompileError("the tasks must be a non-empty array of objects like {\"op\": "
                           "\"matmul\", \"shape\": \"1024x1024x1024\", \"weight\": 1}, or an "
                           "object whose \"tasks\" is one");
    std::vector<TuneTask> tasks;
    std::set<std::string> seen;
    for (size_t i = 0; i < list.size(); i++) {
        const nlohmann::json &t = list[i];
        const std::string where = "task " + std::to_string(i + 1);
        if (!t.is_object()) throw CompileError(where + " is not an object: " + t.dump());
        for (const auto &[key, value] : t.items()) {
            if (key != "op" && key != "shape" && key != "weight")
                throw CompileError(where + ": unknown field '" + key +
                                   "'; a task has \"op\", \"shape\" and \"weight\"");
        }
        if (!t.contains("op") || !t["op"].is_string())
            throw CompileError(where + ": \"op\" must name an operator, e.g. \"matmul\"");
        TuneTask task;
        task.op = t["op"].get<std::string>();
        const apps::Operator &op = apps::find_operator(task.op);
        std::string shape_text;
        if (t.contains("shape")) {
            const nlohmann::json &s = t["shape"];
            if (s.is_string()) {
                shape_text = s.get<std::string>();
            } else if (s.is_array() && !s.empty() &&
                       std::all_of(s.begin(), s.end(),
                                   [](const nlohmann::json &v) { return v.is_number_integer(); })) {
                for (const nlohmann::json &v : s)
                    shape_text +=
                        (shape_text.empty() ? "" : "x") + std::to_string(v.get<int64_t>());
            } else {
                throw CompileError(where +
                                   ": \"shape\" must be a string like \"1024x1024\" or an "
                                   "array of integers, not " +
                                   s.dump());
            }
        }
        try {
            task.shape = apps::parse_shape(op, shape_text);
        } catch (const CompileError &e) {
            throw CompileError(where + ": " + e.what());
        }
        if (t.contains("weight")) {
            const nlohmann::json &w = t["weight"];
            if (!w.is_number() || !(w.get<double>() > 0) || !std::isfinite(w.get<double>()))
                throw CompileError(where + ": \"weight\" must be a positive number, not " +
                                   w.dump());
            task.weight = w.get<double>();
        }
        if (!seen.insert(task_name(task)).second)
            throw CompileError(where + ": " + task_name(task) +
                               " is listed twice; give it one task with the sum of the weights");
        tasks.push_back(std::move(task));
    }
    return tasks;
}

std::vector<TuneTask> load_tasks(const std::string &path) {
    std::ifstream f(path);
    if (!f) throw CompileError("--tasks " + path + ": cannot read the file");
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception &e) {
        throw CompileError("--tasks " + path + ": not JSON: " + e.what());
    }
    try {
        return parse_tasks(doc);
    } catch (const CompileError &e) {
        throw CompileError("--tasks " + path + ": " + e.what());
    }
}

int choose_task(const std::vector<TaskProgress> &tasks, std::mt19937_64 &rng, int window,
                double alpha, double epsilon) {
    std::vector<int> open;
    for (size_t i = 0; i < tasks.size(); i++) {
        if (!tasks[i].exhausted) open.push_back(int(i));
    }
    if (open.empty()) return -1;
    for (int i : open) {
        if (tasks[size_t(i)].best_after.empty()) return i; // not tuned yet: one round first
    }
    // The draw is made every time, so that the sequence of choices depends only on the seed.
    const double draw = std::uniform_real_distribution<double>(0, 1)(rng);
    const size_t pick = std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng);
    if (draw < epsilon) return open[pick];

    int best = open[0];
    double best_gradient = kInf;
    for (int i : open) {
        const TaskProgress &t = tasks[size_t(i)];
        const size_t n = t.best_after.size();
        const double now = t.best_after.back();
        double gradient = 0;
        if (std::isfinite(now)) {
            const double forward = -now / double(n);
            const size_t back = std::min<size_t>(size_t(std::max(window, 1)), n - 1);
            double backward = forward;
            if (back > 0 && std::isfinite(t.best_after[n - 1 - back]))
                backward = (now - t.best_after[n - 1 - back]) / double(back);
            gradient = t.weight * (alpha * backward + (1 - alpha) * forward);
        }
        if (gradient < best_gradient) {
            best_gradient = gradient;
            best = i;
        }
    }
    return best;
}

namespace {

/// A task of the job and what is known of it.
struct JobTask {
    TuneTask task;
    tuning_db::WorkloadKey workload;
    TaskProgress progress;
    TaskResult result;
    double elapsed_s = 0; ///< the tuning seconds of its run, over every invocation
};

/// The best time after each measurement of the run.
std::vector<double> best_curve(const tuning_db::Database &db, int64_t run_id) {
    std::vector<double> curve;
    for (const tuning_db::ProgressPoint &p : db.progress(run_id))
        curve.push_back(p.best_ms.value_or(kInf));
    return curve;
}

std::string ms_text(const std::optional<double> &ms) {
    if (!ms) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g ms", *ms);
    return buf;
}

std::string ratio_text(const std::optional<double> &slow, const std::optional<double> &fast) {
    if (!slow || !fast || *fast <= 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", *slow / *fast);
    return buf;
}

void print_job_summary(const JobResult &job, const TuneOptions &o, std::ostream &out) {
    out << "job: " << job.tasks.size() << " tasks, " << job.trials << " trials in "
        << format_duration(job.elapsed_s) << " of tuning (" << job.rounds
        << " rounds in this invocation" << (job.resumed ? ", resumed" : "") << ")\n";
    size_t name_width = 4;
    for (const TaskResult &t : job.tasks)
        name_width = std::max(name_width, task_name(t.task).size());
    char line[512];
    auto row = [&](const std::string &name, const std::string &weight, const std::string &trials,
                   const std::string &best, const std::string &def, const std::string &hand,
                   const std::string &vs_def, const std::string &vs_hand) {
        std::snprintf(line, sizeof line, "%-*s  %6s  %6s  %12s  %12s  %12s  %10s  %8s\n",
                      int(name_width), name.c_str(), weight.c_str(), trials.c_str(), best.c_str(),
                      def.c_str(), hand.c_str(), vs_def.c_str(), vs_hand.c_str());
        out << line;
    };
    row("task", "weight", "trials", "best", "default", "hand", "vs default", "vs hand");
    double weighted = 0;
    bool all_measured = true;
    for (const TaskResult &t : job.tasks) {
        char weight[32];
        std::snprintf(weight, sizeof weight, "%g", t.task.weight);
        row(task_name(t.task), weight, std::to_string(t.trials), ms_text(t.best_ms),
            ms_text(t.default_ms), ms_text(t.hand_ms), ratio_text(t.default_ms, t.best_ms),
            ratio_text(t.hand_ms, t.best_ms));
        if (t.best_ms)
            weighted += t.task.weight * *t.best_ms;
        else
            all_measured = false;
    }
    std::snprintf(line, sizeof line, "weighted time (sum of weight x best): %.4g ms%s\n", weighted,
                  all_measured ? "" : " (tasks without a time left out)");
    out << line;
    if (std::any_of(job.tasks.begin(), job.tasks.end(),
                    [](const TaskResult &t) { return t.closing; })) {
        out << "best and hand: from each task's closing round (its top " << o.remeasure
            << " configs and the hand schedule timed again at the end of the job)\n";
    }
    if (job.cost_model) out << cost_model_summary(*job.cost_model);
    if (job.interrupted)
        out << "stopped; every finished measurement is saved in " << o.db_path
            << ". Resume with the same command (kiln tune "
            << (o.command_operand.empty() ? std::string("--tasks FILE") : o.command_operand)
            << " --db " << o.db_path << " ...); --no-resume starts the job over\n";
}

} // namespace

JobResult tune_tasks(const TuneOptions &o, const std::vector<TuneTask> &tasks, int round_trials,
                     std::ostream &out, std::ostream &err) {
    using Clock = std::chrono::steady_clock;
    validate(o);
    if (round_trials < 1)
        throw CompileError("--round-trials " + std::to_string(round_trials) +
                           ": 1 or more trials per round");
    if (o.trials <= 0 && o.time_s <= 0)
        throw CompileError("a job over several tasks needs a budget: --trials N (over all "
                           "tasks) or --time T, e.g. --time 8h");
    if (tasks.empty()) throw CompileError("a job needs at least one task");
    apps::register_builtin_operators();

    // Every task's operator and shape are checked before anything is measured.
    std::vector<JobTask> job;
    for (const TuneTask &t : tasks) {
        const apps::Operator &op = apps::find_operator(t.op);
        JobTask j;
        j.task = t;
        if (j.task.shape.empty()) j.task.shape = op.default_shape;
        j.workload = workload_key(op, j.task.shape);
        j.progress.weight = t.weight;
        j.result.task = j.task;
        job.push_back(std::move(j));
    }
    const Target target = tune_target(o.target);
    const int threads = o.threads > 0 ? o.threads : default_threads();
    const tuning_db::TargetKey job_target =
        target_key(target, threads, target.has_gpu() ? open_gpu_device(target).description : "");

    JobResult result;
    // What the job has spent before: each task's open run of this strategy (resume).
    {
        tuning_db::Database db = tuning_db::Database::open(o.db_path);
        std::optional<int64_t> t = db.find_target(job_target);
        for (JobTask &j : job) {
            std::optional<int64_t> w = db.find_workload(j.workload);
            if (!o.resume || !t || !w) continue;
            std::optional<tuning_db::RunRecord> run = db.latest_run(*w, *t, o.strategy);
            if (!run) continue;
            j.result.run_id = run->id;
            j.result.trials = run->trials_done;
            j.elapsed_s = run->elapsed_s;
            j.progress.best_after = best_curve(db, run->id);
            result.resumed = true;
        }
    }
    auto spent_trials = [&] {
        int64_t n = 0;
        for (const JobTask &j : job)
            n += j.result.trials;
        return n;
    };
    auto spent_seconds = [&] {
        double s = 0;
        for (const JobTask &j : job)
            s += j.elapsed_s;
        return s;
    };
    if (result.resumed)
        err << "resuming the job: " << spent_trials() << " trials in "
            << format_duration(spent_seconds()) << " spent\n";

    std::mt19937_64 rng(o.seed);
    const Clock::time_point start = Clock::now();
    while (true) {
        if (o.stop && o.stop->load()) {
            result.interrupted = true;
            break;
        }
        const int64_t trials_left = o.trials > 0 ? o.trials - spent_trials() : round_trials;
        const double seconds_left = o.time_s > 0 ? o.time_s - spent_seconds() : kInf;
        if (trials_left <= 0 || seconds_left <= 0) break;
        std::vector<TaskProgress> progress;
        for (const JobTask &j : job)
            progress.push_back(j.progress);
        const int chosen = choose_task(progress, rng, round_trials); // window: the last round
        if (chosen < 0) break; // every task's space is exhausted
        JobTask &j = job[size_t(chosen)];

        TuneOptions r = o;
        r.op = j.task.op;
        r.shape = j.task.shape;
        r.trials = std::min<int64_t>(round_trials, trials_left);
        r.time_s = std::isfinite(seconds_left) ? seconds_left : 0;
        r.resume = o.resume || j.result.rounds > 0;
        r.budget_across_runs = false;
        r.remeasure = 0;
        r.finish_run = false;
        r.save_cost_model = false;
        r.progress = false;
        std::ostringstream round_out, round_err;
        TuneResult tr = tune(r, round_out, round_err);
        // The round's warnings and failures, without its "resuming run" line.
        std::istringstream lines(round_err.str());
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("resuming run ", 0) != 0) err << line << "\n";
        }

        result.rounds++;
        j.result.rounds++;
        j.result.run_id = tr.run_id;
        if (tr.default_ms) j.result.default_ms = tr.default_ms;
        if (tr.hand_ms) j.result.hand_ms = tr.hand_ms;
        {
            tuning_db::Database db = tuning_db::Database::open_existing(o.db_path);
            if (std::optional<tuning_db::RunRecord> run = db.run(tr.run_id)) {
                j.result.trials = run->trials_done;
                j.elapsed_s = run->elapsed_s;
            }
            j.progress.best_after = best_curve(db, tr.run_id);
        }
        if (j.progress.best_after.empty()) j.progress.best_after.push_back(kInf);
        // Nothing new to propose (and not for lack of budget): this task is done.
        if (tr.trials == 0 && !tr.interrupted && tr.recorded == 0 &&
            (o.time_s <= 0 || o.time_s - spent_seconds() > 0))
            j.progress.exhausted = true;

        double weighted = 0;
        for (const JobTask &k : job) {
            if (!k.progress.best_after.empty() && std::isfinite(k.progress.best_after.back()))
                weighted += k.task.weight * k.progress.best_after.back();
        }
        char buf[160];
        std::snprintf(buf, sizeof buf, " +%lld trials, best %s; job: %lld trials, weighted %.4g ms",
                      (long long)tr.trials, ms_text(tr.best_ms).c_str(), (long long)spent_trials(),
                      weighted);
        err << "round " << result.rounds << " ("
            << format_duration(std::chrono::duration<double>(Clock::now() - start).count())
            << "): " << task_name(j.task) << buf << "\n";
        if (tr.interrupted) {
            result.interrupted = true;
            break;
        }
    }

    // Each task's closing round, once the budget is spent: its top configs and its hand schedule
    // measured again one after another, as a single-operator run ends (Tuner::remeasure_best),
    // so that the crown and the summary's speedups stand on times taken under the same
    // conditions, not on search times hours apart. A tune() of the task's run with its budget
    // spent (budget_across_runs, 1 trial) searches nothing, re-measures, and finishes the run.
    if (!result.interrupted && o.remeasure > 0) {
        for (JobTask &j : job) {
            if (o.stop && o.stop->load()) {
                result.interrupted = true;
                break;
            }
            if (!j.result.run_id || j.result.trials < 1) continue;
            TuneOptions r = o;
            r.op = j.task.op;
            r.shape = j.task.shape;
            r.trials = 1;
            r.time_s = 0;
            r.resume = true;
            r.budget_across_runs = true;
            r.save_cost_model = false;
            r.progress = false;
            std::ostringstream closing_out, closing_err;
            TuneResult tr = tune(r, closing_out, closing_err);
            if (tr.interrupted) {
                result.interrupted = true;
                break;
            }
            j.result.closing = tr.closing_best_ms.has_value() || tr.closing_hand_ms.has_value();
            // The hand schedule's closing time, beside the best's (TuneResult::hand_ms).
            if (tr.hand_ms) j.result.hand_ms = tr.hand_ms;
            err << "closing round: " << task_name(j.task) << ", best " << ms_text(tr.best_ms)
                << ", hand " << ms_text(tr.hand_ms) << "\n";
        }
    }

    tuning_db::Database db = tuning_db::Database::open(o.db_path);
    std::optional<int64_t> t = db.find_target(job_target);
    for (JobTask &j : job) {
        if (!result.interrupted && j.result.run_id) db.finish_run(j.result.run_id);
        std::optional<int64_t> w = db.find_workload(j.workload);
        if (t && w) {
            if (std::optional<tuning_db::BestConfig> b = db.best(*w, *t))
                j.result.best_ms = b->median_ms;
        }
        result.tasks.push_back(j.result);
    }
    result.trials = spent_trials();
    result.elapsed_s = spent_seconds();
    if (t && result.rounds > 0) {
        try {
            result.cost_model = update_saved_model(db, *t);
        } catch (const std::exception &e) {
            err << "warning: the cost model was not saved: " << e.what() << "\n";
        }
    }
    print_job_summary(result, o, out);
    return result;
}

} // namespace kiln::autotune
