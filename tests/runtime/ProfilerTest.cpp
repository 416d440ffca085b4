#include "runtime/kiln_runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

TEST(Profiler, RecordsAccumulateCallsAndNanoseconds) {
    kiln_profiler_reset();
    kiln_profiler_record("blur_x", 100);
    kiln_profiler_record("blur_x", 250);
    uint64_t calls = 0, total = 0;
    kiln_profiler_query("blur_x", &calls, &total);
    EXPECT_EQ(calls, 2u);
    EXPECT_EQ(total, 350u);
}

TEST(Profiler, AnUnrecordedCounterReadsAsZero) {
    kiln_profiler_reset();
    uint64_t calls = 7, total = 7;
    kiln_profiler_query("never", &calls, &total);
    EXPECT_EQ(calls, 0u);
    EXPECT_EQ(total, 0u);
}

TEST(Profiler, ResetForgetsEveryCounter) {
    kiln_profiler_record("blur_y", 5);
    kiln_profiler_reset();
    uint64_t calls = 1;
    kiln_profiler_query("blur_y", &calls, nullptr);
    EXPECT_EQ(calls, 0u);
}

TEST(Profiler, ConcurrentRecordsAreAllCounted) {
    kiln_profiler_reset();
    std::vector<std::thread> threads;
    threads.reserve(8);
    for (int t = 0; t < 8; t++) {
        threads.emplace_back([] {
            for (int i = 0; i < 1000; i++)
                kiln_profiler_record("stage", 3);
        });
    }
    for (auto &t : threads)
        t.join();
    uint64_t calls = 0, total = 0;
    kiln_profiler_query("stage", &calls, &total);
    EXPECT_EQ(calls, 8000u);
    EXPECT_EQ(total, 24000u);
}

TEST(Profiler, TheReportListsTheLargestTotalFirst) {
    kiln_profiler_reset();
    kiln_profiler_record("small", 1000);
    kiln_profiler_record("large", 3000000);
    kiln_profiler_record("large", 1000000);
    char *text = nullptr;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    kiln_profiler_report(out);
    std::fclose(out);
    std::string report(text, size);
    std::free(text);
    EXPECT_EQ(report,
              "counter                               calls       total ms        mean us\n"
              "large                                     2          4.000       2000.000\n"
              "small                                     1          0.001          1.000\n");
}

TEST(Profiler, TheClockIsMonotonicAndInNanoseconds) {
    uint64_t start = kiln_current_time_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    uint64_t end = kiln_current_time_ns();
    EXPECT_GE(end - start, 5000000u);
    EXPECT_LT(end - start, 5000000000u);
}
