// Timing: a monotonic clock and named counters of calls and nanoseconds. Counters are few and
// updated once per pipeline or stage call, so one mutex and a fixed table are enough; the runtime
// stays free of the C++ library, so a C program links it with libc and OpenMP alone.
#include "runtime/kiln_lock.h"
#include "runtime/kiln_runtime.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

constexpr int max_counters = 256;
constexpr size_t max_name = 64;

struct Counter {
    char name[max_name];
    uint64_t calls;
    uint64_t total_ns;
};

struct Profile {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    int count = 0;
    Counter counters[max_counters] = {};
};

// Constant-initialized and never destroyed, so a pipeline may still record from a static
// destructor.
Profile the_profile;

using kiln_runtime_internal::Lock;

// Names longer than the table's slots are compared on their first max_name - 1 characters.
Counter *find(Profile &p, const char *name) {
    for (int i = 0; i < p.count; i++) {
        if (std::strncmp(p.counters[i].name, name, max_name - 1) == 0) return &p.counters[i];
    }
    return nullptr;
}

int by_total_descending(const void *a, const void *b) {
    uint64_t ta = static_cast<const Counter *>(a)->total_ns;
    uint64_t tb = static_cast<const Counter *>(b)->total_ns;
    return ta < tb ? 1 : ta > tb ? -1 : 0;
}

} // namespace

extern "C" {

uint64_t kiln_current_time_ns(void) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void kiln_profiler_record(const char *name, uint64_t ns) {
    if (!name) return;
    Profile &p = the_profile;
    Lock lock(p.mutex);
    Counter *c = find(p, name);
    if (!c) {
        // A full table drops new names: profiling is best effort, the pipeline goes on.
        if (p.count == max_counters) return;
        c = &p.counters[p.count++];
        *c = Counter{};
        std::snprintf(c->name, sizeof(c->name), "%s", name);
    }
    c->calls++;
    c->total_ns += ns;
}

void kiln_profiler_query(const char *name, uint64_t *calls, uint64_t *total_ns) {
    Counter found = {};
    if (name) {
        Profile &p = the_profile;
        Lock lock(p.mutex);
        if (const Counter *c = find(p, name)) found = *c;
    }
    if (calls) *calls = found.calls;
    if (total_ns) *total_ns = found.total_ns;
}

void kiln_profiler_report(FILE *out) {
    if (!out) return;
    static Counter rows[max_counters]; // guarded by report_mutex; too big for a small stack
    static pthread_mutex_t report_mutex = PTHREAD_MUTEX_INITIALIZER;
    Lock report_lock(report_mutex);
    int n;
    {
        Profile &p = the_profile;
        Lock lock(p.mutex);
        n = p.count;
        std::memcpy(rows, p.counters, sizeof(Counter) * size_t(n));
    }
    std::qsort(rows, size_t(n), sizeof(Counter), by_total_descending);
    std::fprintf(out, "%-32s %10s %14s %14s\n", "counter", "calls", "total ms", "mean us");
    for (int i = 0; i < n; i++) {
        const Counter &c = rows[i];
        double mean_us = c.calls ? double(c.total_ns) / double(c.calls) / 1e3 : 0.0;
        std::fprintf(out, "%-32s %10llu %14.3f %14.3f\n", c.name,
                     static_cast<unsigned long long>(c.calls), double(c.total_ns) / 1e6, mean_us);
    }
}

void kiln_profiler_reset(void) {
    Profile &p = the_profile;
    Lock lock(p.mutex);
    p.count = 0;
}

} // extern "C"
