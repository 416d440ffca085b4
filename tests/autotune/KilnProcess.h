// Helpers of the tuner tests that run `kiln` as a process and read what it recorded: rows of the
// database per workload, spawning and waiting, reading a log.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tuning_db/TuningDB.h"

extern char **environ;

namespace kiln::autotune_test {

struct Rows {
    int64_t total = 0;
    std::map<std::string, int64_t> per_status;
    std::map<std::string, int64_t> per_config; ///< config hash -> rows
};

inline Rows rows_of(const std::string &db_path, const std::string &op, const std::string &shape,
                    int64_t run_id = 0) {
    auto db = tuning_db::Database::open_existing(db_path);
    Rows r;
    for (const auto &w : db.workloads_matching(op, shape)) {
        for (const auto &t : db.targets()) {
            for (const auto &m : db.history(w.id, t.id, run_id)) {
                r.total++;
                r.per_status[tuning_db::to_string(m.status)]++;
                r.per_config[m.config_hash]++;
            }
        }
    }
    return r;
}

/// Starts `kiln` with the arguments, stdout and stderr to `log`; returns the pid.
inline pid_t spawn_kiln(const std::vector<std::string> &args, const std::string &log) {
    std::vector<std::string> all{KILN_CLI_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char *> argv;
    for (auto &a : all)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, all[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot start " << all[0];
    return pid;
}

inline int wait_exit(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

inline std::string read_file(const std::string &path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Waits until the database holds at least n measurements of the workload (120 s at most: a
/// sanitizer build on a loaded machine is slow; this is a deadline, not a timing gate).
inline bool wait_for_rows(const std::string &db, const std::string &op, const std::string &shape,
                          int64_t n) {
    for (int i = 0; i < 2400; i++) {
        if (std::filesystem::exists(db)) {
            try {
                if (rows_of(db, op, shape).total >= n) return true;
            } catch (const std::exception &) {
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

} // namespace kiln::autotune_test
