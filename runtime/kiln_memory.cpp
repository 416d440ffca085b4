// Aligned allocation that reuses freed blocks. A fresh large block costs a page fault per page on
// first touch (about 200 ms for 64 MiB on the development machines) while a reused block is
// already mapped, so freed blocks are cached by size class and handed out again. A 64-byte header
// before each block records its size class, so kiln_free needs no lookup. The cache is a fixed
// table of intrusive free lists, one per size class: no C++ library, no allocation of its own.
#include "runtime/kiln_lock.h"
#include "runtime/kiln_runtime.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

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
    Header *next; // the next cached block of the same class
    uint32_t magic;
};
static_assert(sizeof(Header) <= header_bytes, "the block header must fit before the block");

// 64 classes of 64-byte steps up to small_limit, then 4 classes per power of two.
constexpr int small_classes = int(small_limit / alignment);
constexpr int class_count = small_classes + 4 * 64;

struct Cache {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    Header *free_blocks[class_count] = {};
    uint64_t allocations = 0, cache_hits = 0, bytes_live = 0, bytes_cached = 0; // atomics
};

// Constant-initialized and never destroyed: kiln_free may run from other static destructors, and
// cached blocks stay reachable so leak checkers do not report them.
Cache the_cache;

Cache &cache() {
    return the_cache;
}

uint64_t atomic_add(uint64_t &counter, int64_t delta) {
    return __atomic_add_fetch(&counter, uint64_t(delta), __ATOMIC_RELAXED);
}

uint64_t atomic_load(const uint64_t &counter) {
    return __atomic_load_n(&counter, __ATOMIC_RELAXED);
}

using kiln_runtime_internal::Lock;

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

// The free-list index of a capacity returned by size_class.
int class_index(size_t capacity) {
    if (capacity <= small_limit) return int(capacity / alignment) - 1;
    int top_bit = 63 - __builtin_clzll(static_cast<unsigned long long>(capacity));
    size_t step = size_t(1) << (top_bit - 2);
    // capacity is 4..7 steps of its power of two (8 steps rounds up into the next power).
    int quarter = int(capacity / step) - 4;
    return small_classes + 4 * top_bit + quarter;
}

uint8_t *user_pointer(Header *h) {
    return reinterpret_cast<uint8_t *>(h) + header_bytes;
}

Header *take_cached(Cache &c, size_t capacity) {
    Header *h;
    {
        Lock lock(c.mutex);
        Header *&head = c.free_blocks[class_index(capacity)];
        h = head;
        if (!h) return nullptr;
        head = h->next;
        c.bytes_cached -= capacity;
    }
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
        atomic_add(c.cache_hits, 1);
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
    h->next = nullptr;
    atomic_add(c.allocations, 1);
    atomic_add(c.bytes_live, int64_t(capacity));
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
    atomic_add(c.bytes_live, -int64_t(capacity));
    {
        Lock lock(c.mutex);
        if (c.bytes_cached + capacity <= cache_limit_bytes) {
            Header *&head = c.free_blocks[class_index(capacity)];
            h->next = head;
            head = h;
            c.bytes_cached += capacity;
            ASAN_POISON_MEMORY_REGION(p, capacity);
            return;
        }
    }
    std::free(h);
}

void kiln_release_cached_memory(void) {
    Cache &c = cache();
    Header *lists[class_count];
    {
        Lock lock(c.mutex);
        for (int i = 0; i < class_count; i++) {
            lists[i] = c.free_blocks[i];
            c.free_blocks[i] = nullptr;
        }
        c.bytes_cached = 0;
    }
    for (Header *h : lists) {
        while (h) {
            ASAN_UNPOISON_MEMORY_REGION(user_pointer(h), h->capacity);
            Header *next = h->next;
            std::free(h);
            h = next;
        }
    }
}

void kiln_get_memory_stats(kiln_memory_stats_t *stats) {
    if (!stats) return;
    Cache &c = cache();
    stats->allocations = atomic_load(c.allocations);
    stats->cache_hits = atomic_load(c.cache_hits);
    stats->bytes_live = atomic_load(c.bytes_live);
    Lock lock(c.mutex);
    stats->bytes_cached = c.bytes_cached;
}

} // extern "C"
