// Aligned allocation that reuses freed blocks. A fresh large block costs a page fault per page on
// first touch (about 200 ms for 64 MiB on the development machines) while a reused block is
// already mapped, so freed blocks are cached by size class and handed out again. A 64-byte header
// before each block records its size class, so kiln_free needs no lookup.
#include "runtime/kiln_runtime.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

namespace {

constexpr size_t alignment = 64;
// A whole alignment unit, so the pointer after the header keeps the block's alignment.
constexpr size_t header_bytes = alignment;
constexpr size_t small_limit = 4096;
constexpr uint64_t cache_limit_bytes = uint64_t(1) << 30;
constexpr uint32_t live_magic = 0x6b696c6e;
constexpr uint32_t cached_magic = 0x66726565;

struct Header {
    size_t capacity;
    uint32_t magic;
};
static_assert(sizeof(Header) <= header_bytes, "the block header must fit before the block");

struct Cache {
    std::mutex mutex;
    std::unordered_map<size_t, std::vector<Header *>> free_blocks;
    std::atomic<uint64_t> allocations{0}, cache_hits{0}, bytes_live{0}, bytes_cached{0};
};

// Never destroyed: kiln_free may run from other static destructors, and cached blocks must stay
// reachable so leak checkers do not report them.
Cache &cache() {
    static Cache *c = new Cache;
    return *c;
}

// Small requests round up to a multiple of 64 bytes. Larger ones round up to a quarter of their
// power of two: at most 25% waste, and few enough classes that a freed block is found again when
// a pipeline reruns with nearby sizes. Returns 0 when the request cannot be represented.
size_t size_class(size_t bytes) {
    if (bytes > SIZE_MAX / 4) return 0;
    if (bytes <= small_limit)
        return bytes == 0 ? alignment : (bytes + alignment - 1) & ~(alignment - 1);
    int top_bit = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes));
    size_t step = size_t(1) << (top_bit - 2);
    return (bytes + step - 1) & ~(step - 1);
}

uint8_t *user_pointer(Header *h) {
    return reinterpret_cast<uint8_t *>(h) + header_bytes;
}

Header *take_cached(Cache &c, size_t capacity) {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free_blocks.find(capacity);
    if (it == c.free_blocks.end() || it->second.empty()) return nullptr;
    Header *h = it->second.back();
    it->second.pop_back();
    c.bytes_cached -= capacity;
    ASAN_UNPOISON_MEMORY_REGION(user_pointer(h), capacity);
    return h;
}

Header *allocate_fresh(size_t capacity) {
    return static_cast<Header *>(std::aligned_alloc(alignment, header_bytes + capacity));
}

} // namespace

extern "C" {

void *kiln_malloc(size_t bytes) {
    size_t capacity = size_class(bytes);
    if (capacity == 0) {
        kiln_error(kiln_error_out_of_memory, "kiln_malloc: cannot allocate %zu bytes", bytes);
        return nullptr;
    }
    Cache &c = cache();
    Header *h = take_cached(c, capacity);
    if (h) {
        c.cache_hits++;
    } else {
        h = allocate_fresh(capacity);
        if (!h) {
            // Blocks of other sizes sitting in the cache may be what the OS is missing.
            kiln_release_cached_memory();
            h = allocate_fresh(capacity);
        }
        if (!h) {
            kiln_error(kiln_error_out_of_memory, "kiln_malloc: out of memory allocating %zu bytes",
                       bytes);
            return nullptr;
        }
        h->capacity = capacity;
    }
    h->magic = live_magic;
    c.allocations++;
    c.bytes_live += capacity;
    return user_pointer(h);
}

void kiln_free(void *p) {
    if (!p) return;
    Header *h = reinterpret_cast<Header *>(static_cast<uint8_t *>(p) - header_bytes);
    if (h->magic != live_magic) {
        // Continuing would hand the same block to two owners; stop while the cause is visible.
        std::fprintf(stderr,
                     "kiln_free: %p is not a live block from kiln_malloc (freed twice, or "
                     "allocated elsewhere)\n",
                     p);
        std::abort();
    }
    h->magic = cached_magic;
    Cache &c = cache();
    size_t capacity = h->capacity;
    c.bytes_live -= capacity;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        if (c.bytes_cached + capacity <= cache_limit_bytes) {
            try {
                c.free_blocks[capacity].push_back(h);
                c.bytes_cached += capacity;
                ASAN_POISON_MEMORY_REGION(p, capacity);
                return;
            } catch (...) {
                // No room to remember the block: give it back to the OS instead.
            }
        }
    }
    std::free(h);
}

void kiln_release_cached_memory(void) {
    Cache &c = cache();
    std::unordered_map<size_t, std::vector<Header *>> blocks;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        blocks.swap(c.free_blocks);
        c.bytes_cached = 0;
    }
    for (auto &[capacity, list] : blocks) {
        for (Header *h : list) {
            ASAN_UNPOISON_MEMORY_REGION(user_pointer(h), capacity);
            std::free(h);
        }
    }
}

void kiln_get_memory_stats(kiln_memory_stats_t *stats) {
    if (!stats) return;
    Cache &c = cache();
    stats->allocations = c.allocations;
    stats->cache_hits = c.cache_hits;
    stats->bytes_live = c.bytes_live;
    stats->bytes_cached = c.bytes_cached;
}

} // extern "C"
