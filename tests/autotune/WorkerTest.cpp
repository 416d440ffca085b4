// The worker's timing of GPU candidates (autotune/Worker.h): real kiln-worker processes asked
// to build and measure, on OpenCL (PoCL here: the samples come from the device's profiling
// markers) and on the fake CUDA driver (tests/runtime/fake_cuda, whose device clock only launches
// move: the times the worker reports are the fake's event times, not the host's).
#include <gtest/gtest.h>

#include <poll.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/Operator.h"
#include "autotune/Runner.h"
#include "autotune/Tuner.h"
#include "autotune/Worker.h"
#include "codegen/Target.h"
#include "lang/Error.h"
#include "schedule/LoweredFunc.h"
#include "schedule/ScheduleTrace.h"

// (PoCL's leak suppressions for this executable are in GPUTuneTest.cpp.)

using namespace kiln;
using namespace kiln::autotune;
using json = nlohmann::json;

namespace {

/// The next JSON line from the worker, waiting up to 120 s; null when it died or said nothing.
json next_message(WorkerProcess &w) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (;;) {
        if (auto line = w.next_line()) return json::parse(*line);
        if (std::chrono::steady_clock::now() > deadline) return nullptr;
        pollfd p{w.read_fd(), POLLIN, 0};
        if (poll(&p, 1, 1000) > 0 && !w.pump()) {
            if (auto line = w.next_line()) return json::parse(*line);
            return nullptr;
        }
    }
}

struct Measured {
    json built, ran, result;
};

/// Builds the hand schedule of op for target in a fresh worker and measures it.
Measured build_and_measure(const std::string &op_name, const std::vector<int64_t> &shape,
                           const std::string &target) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator(op_name);
    apps::OperatorInstance inst = op.make(shape);
    op.hand_schedule(inst, tune_target(target));
    json trace = json::parse(ScheduleTrace::capture({inst.output}).to_json_string(-1));

    WorkerProcess w(KILN_WORKER_PATH);
    Measured m;
    w.send({{"cmd", "build"},
            {"op", op_name},
            {"shape", shape},
            {"trace", trace},
            {"threads", 1},
            {"target", tune_target(target).to_string()}});
    m.built = next_message(w);
    if (m.built.is_null() || m.built.value("status", "") != "built") return m;
    w.send({{"cmd", "measure"}, {"min_time_ms", 5}, {"warmup", 1}, {"max_repeats", 20}});
    for (;;) {
        json j = next_message(w);
        if (j.is_null() || j.contains("status")) {
            m.result = j;
            break;
        }
        if (j.value("event", "") == "ran") m.ran = j;
    }
    w.send({{"cmd", "quit"}});
    return m;
}

/// The kernels one run of op's hand schedule for target launches.
size_t kernel_count(const std::string &op_name, const std::vector<int64_t> &shape,
                    const std::string &target) {
    const apps::Operator &op = apps::find_operator(op_name);
    apps::OperatorInstance inst = op.make(shape);
    op.hand_schedule(inst, tune_target(target));
    return inst.pipeline().lower().kernels.size();
}

TEST(Worker, TimingSettlesWhenTheSamplesAgree) {
    EXPECT_FALSE(timing_settled({}));
    EXPECT_FALSE(timing_settled({1.0, 1.0})); // fewer than 3
    EXPECT_TRUE(timing_settled({1.0, 1.0, 1.0}));
    EXPECT_TRUE(timing_settled({1.00, 1.01, 0.99, 1.02, 1.00}));
    // One preempted sample among agreeing ones does not unsettle them (interquartile range).
    EXPECT_TRUE(timing_settled({1.0, 1.0, 1.01, 1.0, 0.99, 1.0, 1.0, 9.0}));
    // Samples that keep disagreeing (a busy machine) do.
    EXPECT_FALSE(timing_settled({1.0, 2.0, 1.0, 2.0, 1.0, 2.0}));
    EXPECT_FALSE(timing_settled({1.0, 1.1, 1.2, 1.3, 1.4}));
    EXPECT_TRUE(timing_settled({1.0, 1.1, 1.2, 1.3, 1.4}, 0.25));
}

TEST(Worker, ACPUMeasurementSaysWhetherItsSamplesSettled) {
    apps::register_builtin_operators();
    Measured m = build_and_measure("blur", {66, 42}, "host");
    ASSERT_EQ(m.built.value("status", ""), "built") << m.built.dump();
    ASSERT_EQ(m.result.value("status", ""), "ok") << m.result.dump();
    ASSERT_TRUE(m.result.contains("settled")) << m.result.dump();
    std::vector<double> times = m.result.at("times_ms").get<std::vector<double>>();
    EXPECT_EQ(m.result["settled"].get<bool>(), timing_settled(times)) << m.result.dump();
}

TEST(Worker, OpenCLSamplesAreDeviceTimesFromProfilingMarkers) {
    try {
        open_gpu_device(tune_target("host-opencl"));
    } catch (const RuntimeError &e) {
        GTEST_SKIP() << "no OpenCL device: " << e.what();
    }
    char dir[] = "/tmp/kiln_pocl_cache_XXXXXX";
    if (mkdtemp(dir)) setenv("POCL_CACHE_DIR", dir, 1);
    Measured m = build_and_measure("blur", {66, 42}, "host-opencl");
    ASSERT_EQ(m.built.value("status", ""), "built") << m.built.dump();
    ASSERT_EQ(m.result.value("status", ""), "ok") << m.result.dump();
    EXPECT_EQ(m.result.value("clock", ""), "device") << m.result.dump();
    std::vector<double> times = m.result.at("times_ms").get<std::vector<double>>();
    ASSERT_GE(times.size(), 3u);
    for (double t : times) {
        EXPECT_GT(t, 0.0) << m.result.dump();
        EXPECT_LT(t, 1000.0) << m.result.dump();
    }
    // The first run's device time lies inside its wall-clock time.
    ASSERT_TRUE(m.ran.contains("first_device_ms")) << m.ran.dump();
    double device_ms = m.ran["first_device_ms"].get<double>();
    EXPECT_GT(device_ms, 0.0) << m.ran.dump();
    EXPECT_LE(device_ms, m.ran.at("first_ms").get<double>()) << m.ran.dump();
}

TEST(Worker, CUDARunsAreTimedWithTheDriversEvents) {
    // A worker on the fake driver, whose device clock moves 2.5 ms per launch and nothing else:
    // the worker's device time of a run is then exactly 2.5 ms per kernel it launches.
    setenv("KILN_CUDA_DRIVER", KILN_TEST_FAKE_CUDA_DRIVER, 1);
    setenv("KILN_FAKE_CUDA_LAUNCH_MS", "2.5", 1);
    Measured m = build_and_measure("blur", {66, 42}, "host-cuda");
    unsetenv("KILN_CUDA_DRIVER");
    unsetenv("KILN_FAKE_CUDA_LAUNCH_MS");
    std::string built_error = m.built.value("error", "");
    if (built_error.find("NVRTC") != std::string::npos &&
        built_error.find("cannot load") != std::string::npos)
        GTEST_SKIP() << "no NVRTC to compile the kernels: " << built_error;
    ASSERT_EQ(m.built.value("status", ""), "built") << m.built.dump();
    ASSERT_FALSE(m.ran.is_null()) << m.result.dump();
    size_t kernels = kernel_count("blur", {66, 42}, "host-cuda");
    ASSERT_GE(kernels, 1u);
    EXPECT_EQ(m.ran.at("first_device_ms").get<double>(), 2.5 * double(kernels)) << m.ran.dump();
    // The fake runs no kernel, so the output is whatever the fake's memory held: the check
    // against the reference decides, not the timing.
    std::string status = m.result.value("status", "");
    EXPECT_TRUE(status == "wrong_answer" || status == "ok") << m.result.dump();
    if (status == "ok") {
        EXPECT_EQ(m.result.value("clock", ""), "device");
        for (double t : m.result.at("times_ms").get<std::vector<double>>())
            EXPECT_EQ(t, 2.5 * double(kernels));
    }
}

} // namespace
