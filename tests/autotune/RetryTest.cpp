// Transient failures (timeout, crash, runtime_error) are measured again by later runs, at most
// autotune::max_transient_attempts times per config, workload and target; deterministic ones
// (compile_error, wrong_answer) are final. Real worker processes, test-only operators that hang
// or crash, a real database in a temporary directory.
#include <gtest/gtest.h>

#include "tests/autotune/TempDir.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "autotune/Tuner.h"
#include "tuning_db/TuningDB.h"

using namespace kiln;
using namespace kiln::autotune;

namespace {

using autotune_test::TempDir;

TuneOptions options(const std::string &op, std::vector<int64_t> shape, const std::string &db) {
    TuneOptions o;
    o.op = op;
    o.shape = std::move(shape);
    o.db_path = db;
    o.strategy = "grid"; // a fresh run proposes the space's first configs again
    o.trials = 1;
    o.jobs = 2;
    o.threads = 1;
    o.min_time_ms = 5;
    o.remeasure = 0;
    o.progress = false;
    o.worker_path = KILN_WORKER_PATH;
    return o;
}

/// The statuses of every measurement of each config, oldest first, keyed by "default", "hand"
/// (the baselines) or the config hash; only those of `run_id` when it is not 0.
std::map<std::string, std::vector<std::string>>
attempts(const std::string &db_path, const std::string &op, int64_t run_id = 0) {
    auto db = tuning_db::Database::open_existing(db_path);
    std::map<std::string, std::vector<std::string>> out;
    for (const auto &w : db.workloads_matching(op)) {
        for (const auto &t : db.targets()) {
            for (const auto &m : db.history(w.id, t.id, run_id)) {
                std::string key = m.config_hash;
                auto config = nlohmann::json::parse(db.config(m.config_id).config_json);
                if (config.contains("baseline")) key = config["baseline"].get<std::string>();
                out[key].push_back(tuning_db::to_string(m.status));
            }
        }
    }
    return out;
}

/// The kiln-worker processes that are children of this process.
std::vector<pid_t> worker_children() {
    std::vector<pid_t> out;
    for (const auto &e : std::filesystem::directory_iterator("/proc")) {
        std::string name = e.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream f(e.path() / "stat");
        std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        size_t close = text.rfind(')'), open = text.find('(');
        if (close == std::string::npos || open == std::string::npos) continue;
        std::istringstream rest(text.substr(close + 2));
        std::string state;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == getpid() && text.substr(open + 1, close - open - 1) == "kiln-worker")
            out.push_back(pid_t(std::stoi(name)));
    }
    return out;
}

} // namespace

TEST(TunerRetry, AWorkerKilledFromOutsideIsACrashSaidSoAndRetried) {
    TempDir dir;
    std::string db = dir / "k.db";
    // One worker, one candidate that runs for hours: the test kills the worker (as the OOM killer
    // would) while it builds or runs the candidate.
    TuneOptions o = options("test_hang", {4, 1 << 20}, db);
    o.jobs = 1;
    o.baselines = false;
    o.first_timeout_s = 120;
    o.timeout_s = 120;
    std::atomic<bool> stop{false};
    o.stop = &stop;
    std::ostringstream out, err;
    TuneResult r;
    std::thread t([&] { r = tune(o, out, err); });
    std::vector<pid_t> workers;
    for (int i = 0; i < 600 && workers.empty(); i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        workers = worker_children();
    }
    if (workers.size() != 1u) {
        stop = true;
        t.join();
        FAIL() << workers.size() << " worker processes";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500)); // the build request is sent
    kill(workers[0], SIGKILL);
    t.join();
    EXPECT_EQ(r.per_status["crash"], 1) << err.str();
    auto d = tuning_db::Database::open_existing(db);
    auto w = d.workloads_matching("test_hang");
    ASSERT_EQ(w.size(), 1u);
    auto h = d.history(w[0].id, d.targets()[0].id);
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0].error.rfind("worker killed by signal 9 (Killed) from outside the tuner (the OOM "
                               "killer or a kill) while ",
                               0),
              0u)
        << h[0].error;

    // Transient: the next run measures the config again (here it times out: every attempt is a
    // row).
    TuneOptions again = options("test_hang", {4, 1 << 20}, db);
    again.baselines = false;
    again.timeout_s = 0.2;
    again.first_timeout_s = 0.2;
    tune(again, out, err);
    auto after = attempts(db, "test_hang");
    EXPECT_EQ(after[h[0].config_hash], (std::vector<std::string>{"crash", "timeout"}));
}

TEST(TunerRetry, BaselinesThatTimedOutAreMeasuredByTheNextRun) {
    TempDir dir;
    std::string db = dir / "k.db";
    // R = 2048: about 17 million dependent float adds, tens of milliseconds per run: far over
    // 1 ms, far under the default limits.
    TuneOptions tiny = options("test_hang", {4, 2048}, db);
    tiny.timeout_s = 0.001;
    tiny.first_timeout_s = 0.001;
    std::ostringstream out1, err1;
    TuneResult a = tune(tiny, out1, err1);
    EXPECT_FALSE(a.default_ms);
    EXPECT_FALSE(a.hand_ms);
    auto after1 = attempts(db, "test_hang");
    EXPECT_EQ(after1["default"], std::vector<std::string>{"timeout"}) << err1.str();
    EXPECT_EQ(after1["hand"], std::vector<std::string>{"timeout"}) << err1.str();

    // A new run (--no-resume) with the default limits measures both baselines, and the summary
    // gives the speedups.
    TuneOptions normal = options("test_hang", {4, 2048}, db);
    normal.resume = false;
    std::ostringstream out2, err2;
    TuneResult b = tune(normal, out2, err2);
    EXPECT_NE(b.run_id, a.run_id);
    ASSERT_TRUE(b.default_ms) << out2.str() << err2.str();
    ASSERT_TRUE(b.hand_ms) << out2.str() << err2.str();
    EXPECT_NE(out2.str().find("speedup over the default schedule ("), std::string::npos)
        << out2.str();
    EXPECT_NE(out2.str().find("speedup over the hand schedule ("), std::string::npos) << out2.str();
    EXPECT_EQ(out2.str().find("not measured"), std::string::npos) << out2.str();
    auto after2 = attempts(db, "test_hang");
    // Every attempt is its own row.
    EXPECT_EQ(after2["default"], (std::vector<std::string>{"timeout", "ok"}));
    EXPECT_EQ(after2["hand"], (std::vector<std::string>{"timeout", "ok"}));
    // The search config that timed out in run 1 (grid: the space's first) is tried again too.
    for (const auto &[key, statuses] : after1) {
        if (key == "default" || key == "hand" || statuses != std::vector<std::string>{"timeout"})
            continue;
        EXPECT_EQ(after2[key].size(), 2u) << key;
    }

    // Measured ok: never again.
    std::ostringstream out3, err3;
    TuneResult c = tune(normal, out3, err3);
    EXPECT_TRUE(c.default_ms);
    EXPECT_TRUE(c.hand_ms);
    auto after3 = attempts(db, "test_hang");
    EXPECT_EQ(after3["default"].size(), 2u);
    EXPECT_EQ(after3["hand"].size(), 2u);
}

TEST(TunerRetry, ACrashingConfigIsTriedAtMostThreeTimesOverAllRuns) {
    ASSERT_EQ(max_transient_attempts, 3);
    TempDir dir;
    std::string db = dir / "k.db";
    std::vector<TuneResult> runs;
    for (int i = 0; i < 4; i++) {
        TuneOptions o = options("test_crash", {64, 64}, db);
        o.progress = i == 3; // the last run says why the baselines are not measured
        std::ostringstream out, err;
        runs.push_back(tune(o, out, err));
        // One invocation measures a config at most once.
        for (const auto &[key, statuses] : attempts(db, "test_crash", runs.back().run_id))
            EXPECT_EQ(statuses.size(), 1u) << "run " << i + 1 << ": " << key;
        if (i == 3) {
            EXPECT_NE(err.str().find("the default schedule is not measured again: it failed 3 "
                                     "times (timeout, crash or runtime_error) on this target"),
                      std::string::npos)
                << err.str();
            EXPECT_NE(err.str().find("the hand schedule is not measured again"), std::string::npos)
                << err.str();
        }
    }
    auto all = attempts(db, "test_crash");
    EXPECT_EQ(all["default"], (std::vector<std::string>{"crash", "crash", "crash"}));
    EXPECT_EQ(all["hand"], (std::vector<std::string>{"crash", "crash", "crash"}));
    // Runs 1 to 3 each measured the two baselines and the grid's first config; the 4th, none of
    // them: only a config not yet tried three times.
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(runs[size_t(i)].per_status["crash"], 3) << "run " << i + 1;
    EXPECT_EQ(runs[3].recorded, 1);
    int three = 0;
    for (const auto &[key, statuses] : all) {
        EXPECT_LE(statuses.size(), 3u) << key;
        three += statuses.size() == 3u;
    }
    EXPECT_EQ(three, 3); // default, hand and the grid's first config
}

TEST(TunerRetry, DeterministicFailuresAreFinal) {
    TempDir dir;
    std::string db = dir / "k.db";
    for (int i = 0; i < 2; i++) {
        std::ostringstream out, err;
        tune(options("test_wrong", {64, 64}, db), out, err);
    }
    auto all = attempts(db, "test_wrong");
    EXPECT_EQ(all["default"], std::vector<std::string>{"wrong_answer"});
    EXPECT_EQ(all["hand"], std::vector<std::string>{"wrong_answer"});
    for (const auto &[key, statuses] : all)
        EXPECT_EQ(statuses.size(), 1u) << key;
    EXPECT_EQ(all.size(), 4u); // 2 baselines and one grid config per run
}
