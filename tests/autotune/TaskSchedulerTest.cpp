// Multi-task jobs (autotune/TaskScheduler.h): the tasks file and its errors, the gradient
// scheduler's budget split on synthetic progress curves, and real jobs: the split of a job's
// trials, the morning summary, and a job killed with kill -9 resumed as one job.
#include "autotune/TaskScheduler.h"

#include <gtest/gtest.h>

#include <signal.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "lang/Error.h"
#include "tests/autotune/KilnProcess.h"
#include "tests/autotune/TempDir.h"
#include "tests/lang/ErrorOf.h"
#include "tuning_db/TuningDB.h"

using namespace kiln;
using namespace kiln::autotune;
using autotune_test::read_file;
using autotune_test::rows_of;
using autotune_test::spawn_kiln;
using autotune_test::TempDir;
using autotune_test::wait_exit;
using autotune_test::wait_for_rows;

namespace {

/// The CompileError message parse_tasks raises for the document ("(no error)" when none).
std::string tasks_error(const std::string &document) {
    return kiln::test::error_of([&] { parse_tasks(nlohmann::json::parse(document)); });
}

} // namespace

TEST(TaskScheduler, ATasksFileGivesOperatorsShapesAndWeights) {
    std::vector<TuneTask> t = parse_tasks(nlohmann::json::parse(
        R"({"tasks": [{"op": "matmul", "shape": "64x32x16", "weight": 2.5},
                      {"op": "blur", "shape": [66, 50]}, {"op": "softmax"}]})"));
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0].op, "matmul");
    EXPECT_EQ(t[0].shape, (std::vector<int64_t>{64, 32, 16}));
    EXPECT_EQ(t[0].weight, 2.5);
    EXPECT_EQ(t[1].shape, (std::vector<int64_t>{66, 50}));
    EXPECT_EQ(t[1].weight, 1.0);
    EXPECT_FALSE(t[2].shape.empty()); // the operator's default shape
    EXPECT_EQ(parse_tasks(nlohmann::json::parse(R"([{"op": "blur"}])")).size(), 1u);
}

TEST(TaskScheduler, ABadTasksFileIsRefusedNamingTheTaskAndTheField) {
    EXPECT_EQ(tasks_error("[]"),
              "the tasks must be a non-empty array of objects like {\"op\": \"matmul\", "
              "\"shape\": \"1024x1024x1024\", \"weight\": 1}, or an object whose \"tasks\" is "
              "one");
    EXPECT_EQ(tasks_error(R"([{"op": "blur"}, 3])"), "task 2 is not an object: 3");
    EXPECT_EQ(tasks_error(R"([{"op": "blur", "wieght": 2}])"),
              "task 1: unknown field 'wieght'; a task has \"op\", \"shape\" and \"weight\"");
    EXPECT_EQ(tasks_error(R"([{"shape": "4x4"}])"),
              "task 1: \"op\" must name an operator, e.g. \"matmul\"");
    EXPECT_NE(tasks_error(R"([{"op": "matmull"}])").find("matmull"), std::string::npos);
    EXPECT_EQ(tasks_error(R"([{"op": "blur", "shape": {"x": 4}}])"),
              "task 1: \"shape\" must be a string like \"1024x1024\" or an array of integers, "
              "not {\"x\":4}");
    EXPECT_EQ(tasks_error(R"([{"op": "blur", "shape": "64x48x3"}])").rfind("task 1: ", 0), 0u);
    EXPECT_EQ(tasks_error(R"([{"op": "blur", "weight": -1}])"),
              "task 1: \"weight\" must be a positive number, not -1");
    EXPECT_EQ(
        tasks_error(R"([{"op": "blur", "shape": "64x48"}, {"op": "blur", "shape": [64, 48]}])"),
        "task 2: blur 64x48 is listed twice; give it one task with the sum of the weights");
    TempDir dir;
    try {
        load_tasks(dir / "missing.json");
        ADD_FAILURE() << "no error";
    } catch (const CompileError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "--tasks " + dir / "missing.json" + ": cannot read the file");
    }
}

namespace {

/// A task whose best time after t measurements is given by a function.
struct SyntheticTask {
    double weight;
    std::function<double(int)> best_after;
};

/// Runs the scheduler for `rounds` rounds of `per_round` measurements; returns the rounds each
/// task got and the objective sum(weight * best) at the end.
std::pair<std::vector<int>, double> simulate(const std::vector<SyntheticTask> &tasks, int rounds,
                                             int per_round, bool round_robin = false) {
    std::vector<TaskProgress> progress(tasks.size());
    std::vector<int> given(tasks.size(), 0);
    std::mt19937_64 rng(5);
    for (int r = 0; r < rounds; r++) {
        int i = round_robin ? r % int(tasks.size()) : choose_task(progress, rng);
        EXPECT_GE(i, 0);
        given[size_t(i)]++;
        for (int m = 0; m < per_round; m++) {
            int t = int(progress[size_t(i)].best_after.size()) + 1;
            progress[size_t(i)].best_after.push_back(tasks[size_t(i)].best_after(t));
        }
        progress[size_t(i)].weight = tasks[size_t(i)].weight;
    }
    double objective = 0;
    for (size_t i = 0; i < tasks.size(); i++)
        objective += tasks[i].weight * progress[i].best_after.back();
    return {given, objective};
}

} // namespace

TEST(TaskScheduler, TimeGoesWhereTheWeightedTimeDropsMost) {
    // A: much to gain, slowly; B: at its best from the start; C: weighted 5, some to gain,
    // quickly. The best split of these 480 measurements (B's first round aside) gives a weighted
    // time of about 12.35; round robin gives 13.40 (a third of it to B, which has nothing to
    // gain), and the scheduler 12.63.
    // With Ansor's alpha of 0.2 it gave 13.82, feeding C long after C had converged.
    std::vector<SyntheticTask> tasks = {
        {1, [](int t) { return 1 + 9 * std::exp(-t / 80.0); }},
        {1, [](int) { return 1.0; }},
        {5, [](int t) { return 2 + 2 * std::exp(-t / 40.0); }},
    };
    auto [given, objective] = simulate(tasks, 60, 8);
    std::cout << "[ 60 rounds ] A " << given[0] << ", B " << given[1] << ", C " << given[2]
              << "; weighted time " << objective << "\n";
    EXPECT_LE(given[1], 6) << "the task with nothing to gain took time";
    EXPECT_GE(given[0], 15);
    EXPECT_GE(given[2], 15);
    auto [even, even_objective] = simulate(tasks, 60, 8, true);
    std::cout << "[ 60 rounds, round robin ] weighted time " << even_objective << "\n";
    EXPECT_LT(objective, even_objective);

    // Each task gets a round before any gets a second; exhausted tasks are never chosen.
    std::vector<TaskProgress> p(3);
    std::mt19937_64 rng(1);
    EXPECT_EQ(choose_task(p, rng), 0);
    p[0].best_after = {5.0};
    EXPECT_EQ(choose_task(p, rng), 1);
    p[1].exhausted = true;
    EXPECT_EQ(choose_task(p, rng), 2);
    p[2].exhausted = true;
    p[0].exhausted = true;
    EXPECT_EQ(choose_task(p, rng), -1);
}

namespace {

TuneOptions job_options(const std::string &db, int64_t trials) {
    TuneOptions o;
    o.db_path = db;
    o.strategy = "random";
    o.trials = trials;
    o.jobs = 2;
    o.threads = 1;
    o.min_time_ms = 5;
    o.progress = false;
    o.worker_path = KILN_WORKER_PATH;
    return o;
}

} // namespace

TEST(TaskScheduler, AJobSplitsItsTrialsAndSummarisesEachTask) {
    TempDir dir;
    std::vector<TuneTask> tasks = {{"blur", {64, 48}, 1}, {"softmax", {64, 16}, 2}};
    std::ostringstream out, err;
    JobResult r = tune_tasks(job_options(dir / "k.db", 20), tasks, 4, out, err);
    EXPECT_FALSE(r.interrupted);
    EXPECT_EQ(r.trials, 20) << err.str();
    EXPECT_EQ(r.rounds, 5) << err.str();
    ASSERT_EQ(r.tasks.size(), 2u);
    int64_t sum = 0;
    for (const TaskResult &t : r.tasks) {
        EXPECT_GE(t.rounds, 1);
        EXPECT_GE(t.trials, 4) << t.task.op;
        EXPECT_TRUE(t.best_ms) << t.task.op;
        EXPECT_TRUE(t.hand_ms) << t.task.op;
        sum += t.trials;
    }
    EXPECT_EQ(sum, 20);
    // Every task's run is finished, so the same command starts a new job. Each ended with a
    // closing round (--remeasure 3 by default): the task's best is one of its contenders.
    auto db = tuning_db::Database::open_existing(dir / "k.db");
    for (const TaskResult &t : r.tasks) {
        ASSERT_TRUE(db.run(t.run_id));
        EXPECT_TRUE(db.run(t.run_id)->finished_us) << t.task.op;
        EXPECT_TRUE(t.closing) << t.task.op;
        int closing = 0;
        for (const tuning_db::Measurement &m :
             db.history(db.run(t.run_id)->workload_id, db.run(t.run_id)->target_id, t.run_id))
            closing += m.closing;
        EXPECT_GE(closing, 3) << t.task.op; // the top 3 (the hand among them or beside them)
        std::optional<tuning_db::BestConfig> best =
            db.best(db.run(t.run_id)->workload_id, db.run(t.run_id)->target_id);
        ASSERT_TRUE(best) << t.task.op;
        EXPECT_EQ(best->closing_run_id, t.run_id) << t.task.op;
        ASSERT_TRUE(t.best_ms) << t.task.op;
        EXPECT_DOUBLE_EQ(*t.best_ms, best->median_ms) << t.task.op;
        EXPECT_NE(err.str().find("closing round: " + t.task.op), std::string::npos) << err.str();
    }
    EXPECT_NE(out.str().find("best and hand: from each task's closing round (its top 3 configs"),
              std::string::npos)
        << out.str();
    std::string summary = out.str();
    EXPECT_NE(summary.find("job: 2 tasks, 20 trials in "), std::string::npos) << summary;
    EXPECT_NE(summary.find("vs default"), std::string::npos) << summary;
    EXPECT_NE(summary.find("blur 64x48"), std::string::npos) << summary;
    EXPECT_NE(summary.find("softmax 64x16"), std::string::npos) << summary;
    EXPECT_NE(summary.find("weighted time (sum of weight x best): "), std::string::npos) << summary;
    EXPECT_NE(err.str().find("round 5 ("), std::string::npos) << err.str();
    EXPECT_TRUE(r.cost_model);

    // A job needs a budget, and a round at least one trial.
    try {
        tune_tasks(job_options(dir / "k.db", 0), tasks, 4, out, err);
        ADD_FAILURE() << "no error";
    } catch (const CompileError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "a job over several tasks needs a budget: --trials N (over all tasks) or "
                  "--time T, e.g. --time 8h");
    }
    try {
        tune_tasks(job_options(dir / "k.db", 8), tasks, 0, out, err);
        ADD_FAILURE() << "no error";
    } catch (const CompileError &e) {
        EXPECT_EQ(std::string(e.what()), "--round-trials 0: 1 or more trials per round");
    }
}

TEST(TaskScheduler, AJobKilledWithKillNineResumesAsOneJob) {
    TempDir dir;
    const std::string db = dir / "k.db", tasks = dir / "tasks.json";
    {
        std::ofstream f(tasks);
        f << R"([{"op": "blur", "shape": "64x48"}, {"op": "softmax", "shape": "64x16"}])";
    }
    const std::vector<std::string> args = {
        "tune", "--tasks",     tasks,    "--trials", "40", "--round-trials", "4", "--db",
        db,     "--strategy",  "random", "--jobs",   "2",  "--threads",      "1", "--min-time-ms",
        "5",    "--remeasure", "0",      "--quiet"};
    pid_t pid = spawn_kiln(args, dir / "log1");
    ASSERT_TRUE(wait_for_rows(db, "blur", "64x48", 6)) << read_file(dir / "log1");
    kill(pid, SIGKILL);
    wait_exit(pid);
    autotune_test::Rows blur = rows_of(db, "blur", "64x48"),
                        softmax = rows_of(db, "softmax", "64x16");

    pid = spawn_kiln(args, dir / "log2");
    EXPECT_EQ(wait_exit(pid), 0) << read_file(dir / "log2");
    std::string log = read_file(dir / "log2");
    EXPECT_NE(log.find("resuming the job: "), std::string::npos) << log;
    EXPECT_NE(log.find("job: 2 tasks, 40 trials in "), std::string::npos) << log;
    // Nothing measured before the kill is lost or measured again, and the job's 40 trials are
    // spent over both invocations: one run per task, resumed, holding all of them.
    autotune_test::Rows blur_after = rows_of(db, "blur", "64x48"),
                        softmax_after = rows_of(db, "softmax", "64x16");
    for (const auto &[hash, n] : blur.per_config)
        EXPECT_EQ(blur_after.per_config[hash], n) << "row of " << hash << " lost";
    for (const auto &[hash, n] : softmax.per_config)
        EXPECT_EQ(softmax_after.per_config[hash], n) << "row of " << hash << " lost";
    for (const auto &[hash, n] : blur_after.per_config)
        EXPECT_EQ(n, 1) << hash << " measured twice";
    auto d = tuning_db::Database::open_existing(db);
    int64_t trials = 0, runs = 0;
    for (const auto &w : d.workloads()) {
        for (const tuning_db::RunRecord &r : d.runs(w.id)) {
            trials += r.trials_done;
            runs++;
            EXPECT_TRUE(r.finished_us) << w.key.op;
        }
    }
    EXPECT_EQ(runs, 2);
    EXPECT_EQ(trials, 40);
    EXPECT_EQ(d.integrity_check(), "ok");
}

TEST(TaskScheduler, TheCommandLineRefusesAJobItCannotRunWithOneLine) {
    TempDir dir;
    const std::string tasks = dir / "tasks.json", db = dir / "k.db";
    {
        std::ofstream f(tasks);
        f << R"([{"op": "blur", "shape": "64x48", "weight": 0}])";
        std::ofstream(dir / "broken.json") << "[x";
    }
    std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"tune"},
         "kiln: kiln tune: name an operator (e.g. kiln tune matmul) or give a job of several "
         "with --tasks FILE\n"},
        {{"tune", "blur", "--tasks", tasks},
         "kiln: --tasks " + tasks + ": the tasks name the operators; drop 'blur'\n"},
        {{"tune", "--tasks", tasks, "--shape", "64x48"},
         "kiln: --tasks " + tasks + ": give each task its shape in the file; drop --shape\n"},
        {{"tune", "--tasks", tasks},
         "kiln: --tasks " + tasks + ": task 1: \"weight\" must be a positive number, not 0\n"},
        {{"tune", "--tasks", dir / "none.json"},
         "kiln: --tasks " + dir / "none.json" + ": cannot read the file\n"},
        {{"tune", "--tasks", dir / "broken.json"},
         "kiln: --tasks " + dir / "broken.json" +
             ": not JSON: [json.exception.parse_error.101] parse error at line 1, column 2: "
             "syntax error while parsing value - invalid literal; last read: '[x'\n"},
        {{"tune", "--tasks", tasks, "--simulate"},
         "kiln: --simulate replays one operator; drop --tasks\n"},
        {{"tune", "--tasks", tasks, "--generator", "/bin/true"},
         "kiln: --tasks " + tasks +
             ": a job's tasks are built-in operators; tune a generator with kiln tune "
             "--generator EXE NAME\n"},
    };
    for (const auto &[args, message] : cases) {
        std::vector<std::string> all = args;
        all.insert(all.end(), {"--db", db});
        pid_t pid = spawn_kiln(all, dir / "log");
        EXPECT_EQ(wait_exit(pid), 1) << message;
        EXPECT_EQ(read_file(dir / "log"), message);
        EXPECT_FALSE(std::filesystem::exists(db)) << message;
    }
}
