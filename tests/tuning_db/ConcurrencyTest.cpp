// Real processes on one database file: concurrent writers, and a writer killed with SIGKILL.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

#include "lang/Error.h"
#include "tests/tuning_db/TestDb.h"
#include "tuning_db/TuningDB.h"

namespace kiln::tuning_db {
namespace {

using test::ok_measurement;
using test::ScratchDir;
using test::test_config;
using test::test_target;
using test::test_workload;

/// In a forked child: runs f, reports an exception on stderr, and exits without returning to
/// GoogleTest (status 0 on success, 2 on an exception).
template <typename F>
[[noreturn]] void child(F &&f) {
    int status = 0;
    try {
        f();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "child %d: %s\n", int(getpid()), e.what());
        status = 2;
    }
    std::fflush(stderr);
    _exit(status);
}

TEST(TuningDBConcurrency, TwoProcessesWriteInterleavedMeasurementsWithoutLockErrors) {
    ScratchDir dir;
    std::string path = dir.file("shared.db");
    constexpr int kWriters = 2, kPerWriter = 200;
    int64_t w, t, c0;
    {
        Database db = Database::open(path);
        w = db.workload_id(test_workload());
        t = db.target_id(test_target());
        c0 = test_config(db, 0);
    }
    std::vector<pid_t> pids;
    for (int k = 0; k < kWriters; k++) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            child([&] {
                Database db = Database::open(path); // each process its own connection
                int64_t run = db.create_run(w, t, "writer" + std::to_string(k), k, 0, 0, "{}");
                for (int i = 0; i < kPerWriter; i++) {
                    // New keys too, so both processes also race on get-or-create.
                    int64_t c = i % 10 == 0 ? test_config(db, 1000 + i) : c0;
                    MeasurementRecord m = ok_measurement(run, w, t, c, 1.0 + k + i * 1e-3);
                    m.error = "writer " + std::to_string(k) + " #" + std::to_string(i);
                    db.record_measurement(m);
                    if (i % 50 == 0) db.update_run_state(run, "{}", i + 1, 0.1 * i);
                }
            });
        }
        pids.push_back(pid);
    }
    for (pid_t pid : pids) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status)) << "writer killed by signal " << WTERMSIG(status);
        EXPECT_EQ(WEXITSTATUS(status), 0) << "a writer failed; its error is on stderr above";
    }

    Database db = Database::open(path);
    std::vector<Measurement> h = db.history(w, t);
    ASSERT_EQ(h.size(), size_t(kWriters * kPerWriter));
    std::set<std::string> seen;
    for (const Measurement &m : h)
        seen.insert(m.error);
    for (int k = 0; k < kWriters; k++) {
        for (int i = 0; i < kPerWriter; i++)
            EXPECT_TRUE(seen.count("writer " + std::to_string(k) + " #" + std::to_string(i)))
                << "missing writer " << k << " measurement " << i;
    }
    // Every writer's configs were created once each.
    EXPECT_EQ(db.statistics().configs, 1 + kPerWriter / 10);
    EXPECT_EQ(db.integrity_check(), "ok");
}

TEST(TuningDBConcurrency, AWriterKilledMidwayLosesNothingItCommitted) {
    ScratchDir dir;
    std::string path = dir.file("crash.db");
    int64_t w, t, c;
    {
        Database db = Database::open(path);
        w = db.workload_id(test_workload());
        t = db.target_id(test_target());
        c = test_config(db, 0);
    }
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    constexpr int kMax = 100000, kKillAfter = 40;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        child([&] {
            Database db = Database::open(path);
            int64_t run = db.create_run(w, t, "random", 1, kMax, 0, "{}");
            for (int i = 0; i < kMax; i++) {
                db.record_measurement(ok_measurement(run, w, t, c, 1.0 + i));
                // Report the commit after record_measurement returned.
                int32_t n = i + 1;
                if (write(fds[1], &n, sizeof n) != sizeof n) return;
            }
        });
    }
    close(fds[1]);
    int32_t committed = 0, n = 0;
    while (committed < kKillAfter && read(fds[0], &n, sizeof n) == sizeof n)
        committed = n;
    kill(pid, SIGKILL); // the child is somewhere inside its next measurement
    // Commits reported before the kill landed (the pipe may hold a few more).
    while (read(fds[0], &n, sizeof n) == sizeof n)
        committed = n;
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status));
    ASSERT_EQ(committed >= kKillAfter, true);

    Database db = Database::open(path);
    EXPECT_EQ(db.integrity_check(), "ok");
    std::vector<Measurement> h = db.history(w, t);
    // All committed rows are there, plus at most the one in flight.
    ASSERT_GE(h.size(), size_t(committed));
    EXPECT_LE(h.size(), size_t(committed) + 1);
    for (size_t i = 0; i < h.size(); i++)
        EXPECT_DOUBLE_EQ(h[i].median_ms, 1.0 + double(i)) << "row " << i;
    // The database still takes writes after the crash.
    db.record_measurement(ok_measurement(0, w, t, c, 0.5));
    EXPECT_DOUBLE_EQ(db.best(w, t)->measurement.median_ms, 0.5);
}

} // namespace
} // namespace kiln::tuning_db
