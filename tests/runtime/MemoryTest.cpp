#include "runtime/kiln_runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

kiln_memory_stats_t stats() {
    kiln_memory_stats_t s;
    kiln_get_memory_stats(&s);
    return s;
}

} // namespace

TEST(Memory, BlocksAreAlignedTo64Bytes) {
    for (size_t bytes : {size_t(1), size_t(63), size_t(65), size_t(4095), size_t(4097),
                         size_t(100000), size_t(1) << 20}) {
        void *p = kiln_malloc(bytes);
        ASSERT_NE(p, nullptr) << bytes;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
        std::memset(p, 0xab, bytes);
        kiln_free(p);
    }
}

TEST(Memory, ZeroBytesGiveAUsableBlockRatherThanNull) {
    void *p = kiln_malloc(0);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    kiln_free(p);
}

TEST(Memory, AFreedBlockIsHandedOutAgainForTheSameSize) {
    void *first = kiln_malloc(1 << 20);
    ASSERT_NE(first, nullptr);
    kiln_free(first);
    uint64_t hits_before = stats().cache_hits;
    void *second = kiln_malloc(1 << 20);
    EXPECT_EQ(second, first);
    EXPECT_EQ(stats().cache_hits, hits_before + 1);
    kiln_free(second);
}

TEST(Memory, ASlightlySmallerRequestReusesTheSameSizeClass) {
    void *first = kiln_malloc((1 << 20) + 1000);
    ASSERT_NE(first, nullptr);
    kiln_free(first);
    void *second = kiln_malloc((1 << 20) + 10);
    EXPECT_EQ(second, first);
    kiln_free(second);
}

TEST(Memory, ALarge64MiBBlockIsReused) {
    const size_t bytes = size_t(64) << 20;
    void *first = kiln_malloc(bytes);
    ASSERT_NE(first, nullptr);
    static_cast<uint8_t *>(first)[bytes - 1] = 1;
    kiln_free(first);
    uint64_t hits_before = stats().cache_hits;
    void *second = kiln_malloc(bytes);
    EXPECT_EQ(second, first);
    EXPECT_EQ(stats().cache_hits, hits_before + 1);
    kiln_free(second);
}

TEST(Memory, StatsCountLiveAndCachedBytesBySizeClass) {
    kiln_release_cached_memory();
    kiln_memory_stats_t before = stats();
    void *p = kiln_malloc(100); // rounds up to 128
    kiln_memory_stats_t during = stats();
    EXPECT_EQ(during.allocations, before.allocations + 1);
    EXPECT_EQ(during.bytes_live, before.bytes_live + 128);
    kiln_free(p);
    kiln_memory_stats_t after = stats();
    EXPECT_EQ(after.bytes_live, before.bytes_live);
    EXPECT_EQ(after.bytes_cached, before.bytes_cached + 128);
}

TEST(Memory, ReleasingTheCacheEmptiesItAndStopsReuse) {
    void *p = kiln_malloc(3 << 20);
    kiln_free(p);
    EXPECT_GT(stats().bytes_cached, 0u);
    kiln_release_cached_memory();
    EXPECT_EQ(stats().bytes_cached, 0u);
    uint64_t hits_before = stats().cache_hits;
    void *q = kiln_malloc(3 << 20);
    EXPECT_EQ(stats().cache_hits, hits_before);
    kiln_free(q);
}

TEST(Memory, BlocksLargerThanTheCacheLimitGoBackToTheOS) {
    kiln_release_cached_memory();
    void *p = kiln_malloc(size_t(3) << 29); // 1.5 GiB of untouched address space
    ASSERT_NE(p, nullptr);
    kiln_free(p);
    EXPECT_EQ(stats().bytes_cached, 0u);
}

TEST(Memory, FreeingNullDoesNothing) {
    kiln_memory_stats_t before = stats();
    kiln_free(nullptr);
    EXPECT_EQ(stats().bytes_live, before.bytes_live);
    EXPECT_EQ(stats().bytes_cached, before.bytes_cached);
}

TEST(Memory, AnImpossibleRequestReturnsNullWithAMessage) {
    void *p = kiln_malloc(SIZE_MAX - 10);
    EXPECT_EQ(p, nullptr);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_malloc: cannot allocate 18446744073709551605 bytes");
}

TEST(Memory, ConcurrentAllocationsNeverShareABlock) {
    const uint64_t live_before = stats().bytes_live;
    auto worker = [](int seed, bool *ok) {
        std::mt19937 rng(seed);
        std::vector<std::pair<uint8_t *, size_t>> held;
        for (int step = 0; step < 2000; step++) {
            if (held.size() < 8 && rng() % 2 == 0) {
                size_t bytes = 1 + rng() % 20000;
                auto *p = static_cast<uint8_t *>(kiln_malloc(bytes));
                if (!p) *ok = false;
                if (!p) return;
                std::memset(p, seed, bytes);
                held.emplace_back(p, bytes);
            } else if (!held.empty()) {
                auto [p, bytes] = held.back();
                held.pop_back();
                for (size_t i = 0; i < bytes; i++) {
                    if (p[i] != uint8_t(seed)) *ok = false;
                }
                kiln_free(p);
            }
        }
        for (auto [p, bytes] : held)
            kiln_free(p);
    };
    const int threads = 8;
    bool ok[threads];
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) {
        ok[t] = true;
        pool.emplace_back(worker, t + 1, &ok[t]);
    }
    for (auto &t : pool)
        t.join();
    for (int t = 0; t < threads; t++)
        EXPECT_TRUE(ok[t]) << "thread " << t;
    EXPECT_EQ(stats().bytes_live, live_before);
}

TEST(MemoryDeathTest, FreeingABlockTwiceAbortsWithAMessage) {
    // Other tests in the executable start OpenMP and std::threads; a plain fork would be unsafe.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    void *p = kiln_malloc(256);
    kiln_free(p);
    EXPECT_DEATH(kiln_free(p), "kiln_free: 0x[0-9a-f]+ is not a live block from kiln_malloc "
                               "\\(freed twice, or allocated elsewhere\\)");
}
