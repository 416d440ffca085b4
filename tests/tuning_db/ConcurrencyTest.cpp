// Real processes on one database file: concurrent writers, and a writer killed with SIGKILL.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <vector>

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
    // The database still takes writes after the crash (a config of its own: a config's time is
    // the median of its measurements).
    db.record_measurement(ok_measurement(0, w, t, test_config(db, 99), 0.5));
    EXPECT_DOUBLE_EQ(db.best(w, t)->median_ms, 0.5);
}

/// A run created by a forked child that has exited since: its owner is gone.
int64_t run_of_a_dead_process(const std::string &path, int64_t w, int64_t t, pid_t *owner) {
    pid_t pid = fork();
    if (pid == 0) {
        child([&] {
            Database db = Database::open(path);
            int64_t run = db.create_run(w, t, "random", 1, 0, 0, "{}");
            if (run <= 0) throw std::runtime_error("no run");
        });
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    *owner = pid;
    Database db = Database::open(path);
    return db.runs(w, t).back().id;
}

TEST(TuningDBConcurrency, ClaimTakesARunWhoseOwnerIsGoneAndRefusesALiveOnesRun) {
    ScratchDir dir;
    std::string path = dir.file("claim.db");
    Database db = Database::open(path);
    int64_t w = db.workload_id(test_workload());
    int64_t t = db.target_id(test_target());
    int64_t mine = db.create_run(w, t, "random", 1, 0, 0, "{}");

    // The creator owns its run; claiming it again is a no-op success.
    RunClaim again = db.claim_run(mine);
    EXPECT_TRUE(again.claimed);
    ASSERT_TRUE(again.holder);
    EXPECT_EQ(again.holder->pid, int64_t(getpid()));

    // Another process cannot take a run whose owner (this process) is alive.
    pid_t parent = getpid();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        child([&] {
            Database other = Database::open(path);
            RunClaim c = other.claim_run(mine);
            if (c.claimed) throw std::runtime_error("took a live owner's run");
            if (!c.holder || c.holder->pid != int64_t(parent))
                throw std::runtime_error("holder is not the parent");
        });
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    // A run whose owner process has exited is taken over, and then refused to others.
    pid_t dead = 0;
    int64_t orphan = run_of_a_dead_process(path, w, t, &dead);
    RunClaim c = db.claim_run(orphan);
    EXPECT_TRUE(c.claimed);
    ASSERT_TRUE(c.holder);
    EXPECT_EQ(c.holder->pid, int64_t(dead));
    EXPECT_EQ(db.claim_run(orphan).holder->pid, int64_t(getpid()));

    // An owner on another host cannot be checked from here: it counts as gone.
    RunOwner elsewhere{int64_t(getpid()), "another-host.invalid", 12345};
    EXPECT_TRUE(db.claim_run(orphan, elsewhere).claimed == false); // this process is alive
    pid_t dead2 = 0;
    int64_t orphan2 = run_of_a_dead_process(path, w, t, &dead2);
    EXPECT_TRUE(db.claim_run(orphan2, elsewhere).claimed);
    EXPECT_TRUE(db.claim_run(orphan2).claimed);

    // A finished run is never claimed; an unknown one is an error naming it.
    db.finish_run(mine);
    RunClaim done = db.claim_run(mine);
    EXPECT_FALSE(done.claimed);
    EXPECT_TRUE(done.finished);
    try {
        db.claim_run(999);
        ADD_FAILURE() << "no error";
    } catch (const RuntimeError &e) {
        EXPECT_NE(std::string(e.what()).find("claim_run: no tuning run with id 999"),
                  std::string::npos)
            << e.what();
    }
}

TEST(TuningDBConcurrency, OfProcessesClaimingOneRunAtOnceExactlyOneGetsIt) {
    ScratchDir dir;
    std::string path = dir.file("race.db");
    int64_t w, t;
    {
        Database db = Database::open(path);
        w = db.workload_id(test_workload());
        t = db.target_id(test_target());
    }
    pid_t dead = 0;
    int64_t run = run_of_a_dead_process(path, w, t, &dead);

    constexpr int kClaimers = 4;
    int go[2], results[2], done[2];
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(results), 0);
    ASSERT_EQ(pipe(done), 0);
    std::vector<pid_t> pids;
    for (int k = 0; k < kClaimers; k++) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            child([&] {
                close(go[1]);
                close(results[0]);
                close(done[1]);
                Database db = Database::open(path);
                char byte = 0;
                if (read(go[0], &byte, 1) != 0) throw std::runtime_error("go pipe");
                int32_t claimed = db.claim_run(run).claimed ? 1 : 0;
                int32_t report[2] = {int32_t(getpid()), claimed};
                if (write(results[1], report, sizeof report) != sizeof report)
                    throw std::runtime_error("results pipe");
                // Stay alive until every claimer has tried: a winner that exits is gone, and its
                // run may then rightly be taken over.
                if (read(done[0], &byte, 1) != 0) throw std::runtime_error("done pipe");
            });
        }
        pids.push_back(pid);
    }
    close(go[0]);
    close(results[1]);
    close(done[0]);
    close(go[1]); // all claimers start at once
    int winners = 0;
    pid_t winner = 0;
    int32_t report[2];
    for (int k = 0; k < kClaimers; k++) {
        ASSERT_EQ(read(results[0], report, sizeof report), ssize_t(sizeof report));
        if (report[1]) {
            winners++;
            winner = report[0];
        }
    }
    close(results[0]);
    close(done[1]);
    for (pid_t pid : pids) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(winners, 1);
    // The database names the winner as the owner (gone now, so this claim takes it over).
    Database db = Database::open(path);
    RunClaim c = db.claim_run(run);
    EXPECT_TRUE(c.claimed);
    ASSERT_TRUE(c.holder);
    EXPECT_EQ(c.holder->pid, int64_t(winner));
}

} // namespace
} // namespace kiln::tuning_db
