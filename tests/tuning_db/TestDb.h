// Helpers for the tuning database tests: a scratch directory and a database filled with a small,
// known set of rows.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "tuning_db/TuningDB.h"

namespace kiln::tuning_db::test {

/// A fresh directory under the system temp dir, removed with everything in it on destruction.
class ScratchDir {
public:
    ScratchDir() {
        static std::atomic<int> counter{0};
        dir_ =
            std::filesystem::temp_directory_path() /
            ("kiln-tuning-db-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    std::string file(const std::string &name) const { return (dir_ / name).string(); }

private:
    std::filesystem::path dir_;
};

inline TargetKey test_target(int threads = 4) {
    return {"testcpu", "+avx2,+fma", threads, "kiln 0.1.0 / LLVM 19"};
}

inline WorkloadKey test_workload(const std::string &op = "matmul",
                                 const std::string &shape = "64x64x64") {
    return {op, "0x00000000000000ab", shape, "float32"};
}

/// A config whose trace is a valid (empty) ScheduleTrace JSON for algorithm hash 0xab.
inline int64_t test_config(Database &db, int i) {
    std::string hash = "cfg" + std::to_string(i);
    return db.config_id(hash, "{\"tile\":" + std::to_string(i) + "}",
                        "{\"schema_version\":1,\"algorithm_hash\":\"0x00000000000000ab\","
                        "\"directives\":[]}");
}

inline MeasurementRecord ok_measurement(int64_t run, int64_t w, int64_t t, int64_t c, double ms) {
    MeasurementRecord m;
    m.run_id = run;
    m.workload_id = w;
    m.target_id = t;
    m.config_id = c;
    m.status = Status::ok;
    m.times_ms = {ms * 1.01, ms, ms * 0.99}; // median ms, as the worker computes it
    m.median_ms = ms;
    m.spread_ms = ms * 0.02;
    m.compile_ms = 12.5;
    return m;
}

inline MeasurementRecord failed_measurement(int64_t run, int64_t w, int64_t t, int64_t c, Status s,
                                            const std::string &error) {
    MeasurementRecord m;
    m.run_id = run;
    m.workload_id = w;
    m.target_id = t;
    m.config_id = c;
    m.status = s;
    m.error = error;
    return m;
}

} // namespace kiln::tuning_db::test
