#include "runtime/kiln_runtime.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {

// Restores the default thread count after each test, so tests do not depend on their order.
class ParallelFor : public ::testing::Test {
protected:
    void TearDown() override {
        unsetenv("KILN_NUM_THREADS");
        kiln_set_num_threads(0);
    }
};

struct Counts {
    int min;
    std::vector<std::atomic<int>> hits;
};

int count_index(void *, int index, uint8_t *closure) {
    auto *counts = reinterpret_cast<Counts *>(closure);
    counts->hits[index - counts->min]++;
    return kiln_success;
}

int fail_on_multiples_of_seven_plus_three(void *user_context, int index, uint8_t *) {
    static_cast<std::atomic<int> *>(user_context)->fetch_add(1);
    if (index % 7 != 3) return kiln_success;
    return kiln_error(kiln_error_assertion_failed, "task %d failed", index);
}

int record_team_size(void *user_context, int, uint8_t *) {
    auto *sizes = static_cast<std::vector<int> *>(user_context);
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    sizes->push_back(omp_get_num_threads());
    return kiln_success;
}

int record_thread_after_a_pause(void *user_context, int, uint8_t *) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    auto *ids = static_cast<std::set<std::thread::id> *>(user_context);
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    ids->insert(std::this_thread::get_id());
    return kiln_success;
}

struct Grid {
    std::atomic<int> cells[8][16];
};

int inner_row(void *user_context, int x, uint8_t *closure) {
    int y = *reinterpret_cast<int *>(closure);
    static_cast<Grid *>(user_context)->cells[y][x]++;
    return kiln_success;
}

int outer_row(void *user_context, int y, uint8_t *) {
    return kiln_parallel_for(user_context, inner_row, 0, 16, reinterpret_cast<uint8_t *>(&y));
}

int record_thread_number(void *user_context, int index, uint8_t *) {
    static_cast<std::vector<int> *>(user_context)->at(size_t(index)) = omp_get_thread_num();
    return kiln_success;
}

} // namespace

// Thousands of short tasks (a row each) are claimed in chunks, at least 16 per thread, not one
// index at a time: every run of consecutive indices one thread ran is a whole number of chunks
// (4096 / (16 x 2) = 128 indices), except the last, which ends the range.
TEST_F(ParallelFor, ManyShortTasksAreClaimedInChunks) {
    kiln_set_num_threads(2);
    std::vector<int> owner(4096, -1);
    ASSERT_EQ(kiln_parallel_for(&owner, record_thread_number, 0, 4096, nullptr), kiln_success);
    size_t start = 0;
    for (size_t i = 1; i <= owner.size(); i++) {
        if (i < owner.size() && owner[i] == owner[start]) continue;
        if (i < owner.size()) {
            EXPECT_EQ((i - start) % 128, 0u) << "a run of indices " << start << " to " << i - 1;
        }
        start = i;
    }
    for (int o : owner)
        EXPECT_GE(o, 0);
}

TEST_F(ParallelFor, CoversEachIndexExactlyOnce) {
    kiln_set_num_threads(4);
    Counts counts{-5, std::vector<std::atomic<int>>(1000)};
    int result =
        kiln_parallel_for(nullptr, count_index, -5, 1000, reinterpret_cast<uint8_t *>(&counts));
    EXPECT_EQ(result, kiln_success);
    for (int i = 0; i < 1000; i++)
        EXPECT_EQ(counts.hits[i].load(), 1) << "index " << i - 5;
}

TEST_F(ParallelFor, AnEmptyRangeRunsNoTask) {
    std::atomic<int> calls{0};
    EXPECT_EQ(kiln_parallel_for(&calls, fail_on_multiples_of_seven_plus_three, 3, 0, nullptr),
              kiln_success);
    EXPECT_EQ(calls.load(), 0);
}

TEST_F(ParallelFor, ReturnsTheCodeAndMessageOfTheLowestFailingIndex) {
    kiln_set_num_threads(4);
    kiln_clear_error();
    std::atomic<int> calls{0};
    int result = kiln_parallel_for(&calls, fail_on_multiples_of_seven_plus_three, 0, 200, nullptr);
    EXPECT_EQ(result, kiln_error_assertion_failed);
    EXPECT_STREQ(kiln_last_error_message(), "task 3 failed");
}

TEST_F(ParallelFor, RunsEveryTaskEvenAfterOneFails) {
    kiln_set_num_threads(4);
    std::atomic<int> calls{0};
    kiln_parallel_for(&calls, fail_on_multiples_of_seven_plus_three, 0, 200, nullptr);
    EXPECT_EQ(calls.load(), 200);
}

TEST_F(ParallelFor, ASingleThreadStopsAtTheFirstFailure) {
    kiln_set_num_threads(1);
    std::atomic<int> calls{0};
    int result = kiln_parallel_for(&calls, fail_on_multiples_of_seven_plus_three, 0, 200, nullptr);
    EXPECT_EQ(result, kiln_error_assertion_failed);
    EXPECT_STREQ(kiln_last_error_message(), "task 3 failed");
    EXPECT_EQ(calls.load(), 4);
}

TEST_F(ParallelFor, NestedCallsFromATaskRunEveryInnerIndex) {
    kiln_set_num_threads(4);
    Grid grid{};
    EXPECT_EQ(kiln_parallel_for(&grid, outer_row, 0, 8, nullptr), kiln_success);
    for (int y = 0; y < 8; y++) {
        for (int x = 0; x < 16; x++)
            EXPECT_EQ(grid.cells[y][x].load(), 1) << x << ", " << y;
    }
}

TEST_F(ParallelFor, UsesTheRequestedNumberOfThreads) {
    kiln_set_num_threads(3);
    EXPECT_EQ(kiln_get_num_threads(), 3);
    std::vector<int> sizes;
    kiln_parallel_for(&sizes, record_team_size, 0, 50, nullptr);
    ASSERT_EQ(sizes.size(), 50u);
    for (int size : sizes)
        EXPECT_EQ(size, 3);
}

TEST_F(ParallelFor, SpreadsTasksOverSeveralThreads) {
    kiln_set_num_threads(4);
    std::set<std::thread::id> ids;
    kiln_parallel_for(&ids, record_thread_after_a_pause, 0, 64, nullptr);
    EXPECT_GT(ids.size(), 1u);
}

TEST_F(ParallelFor, ZeroRestoresTheDefaultFromTheEnvironment) {
    setenv("KILN_NUM_THREADS", "5", 1);
    kiln_set_num_threads(2);
    kiln_set_num_threads(0);
    EXPECT_EQ(kiln_get_num_threads(), 5);
}

TEST_F(ParallelFor, AMalformedEnvironmentValueFallsBackToOpenMP) {
    setenv("KILN_NUM_THREADS", "four", 1);
    kiln_set_num_threads(0);
    EXPECT_EQ(kiln_get_num_threads(), omp_get_max_threads());
    setenv("KILN_NUM_THREADS", "-2", 1);
    kiln_set_num_threads(0);
    EXPECT_EQ(kiln_get_num_threads(), omp_get_max_threads());
}

TEST_F(ParallelFor, ANullTaskFunctionIsAnInternalError) {
    EXPECT_EQ(kiln_parallel_for(nullptr, nullptr, 0, 4, nullptr), kiln_error_internal);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_parallel_for: the task function is null");
}

TEST_F(ParallelFor, ARangePastIntMaxIsAnInternalError) {
    EXPECT_EQ(kiln_parallel_for(nullptr, count_index, 2147483600, 100, nullptr),
              kiln_error_internal);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_parallel_for: the range [2147483600, 2147483600 + 100) overflows int");
}
