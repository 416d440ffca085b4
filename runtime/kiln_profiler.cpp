// Timing: a monotonic clock and named counters of calls and nanoseconds. Counters are few and
// updated once per pipeline or stage call, so one mutex is enough.
#include "runtime/kiln_runtime.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Counter {
    uint64_t calls = 0;
    uint64_t total_ns = 0;
};

struct Profile {
    std::mutex mutex;
    std::map<std::string, Counter> counters;
};

// Never destroyed, so a pipeline may still record from a static destructor.
Profile &profile() {
    static Profile *p = new Profile;
    return *p;
}

} // namespace

extern "C" {

uint64_t kiln_current_time_ns(void) {
    auto now = std::chrono::steady_clock::now().time_since_epoch();
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

void kiln_profiler_record(const char *name, uint64_t ns) {
    if (!name) return;
    Profile &p = profile();
    try {
        std::lock_guard<std::mutex> lock(p.mutex);
        Counter &c = p.counters[name];
        c.calls++;
        c.total_ns += ns;
    } catch (...) {
        // Out of memory for a new counter: profiling is best effort, the pipeline goes on.
    }
}

void kiln_profiler_query(const char *name, uint64_t *calls, uint64_t *total_ns) {
    Counter found;
    if (name) {
        Profile &p = profile();
        std::lock_guard<std::mutex> lock(p.mutex);
        auto it = p.counters.find(name);
        if (it != p.counters.end()) found = it->second;
    }
    if (calls) *calls = found.calls;
    if (total_ns) *total_ns = found.total_ns;
}

void kiln_profiler_report(FILE *out) {
    if (!out) return;
    try {
        std::vector<std::pair<std::string, Counter>> rows;
        {
            Profile &p = profile();
            std::lock_guard<std::mutex> lock(p.mutex);
            rows.assign(p.counters.begin(), p.counters.end());
        }
        std::stable_sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
            return a.second.total_ns > b.second.total_ns;
        });
        std::fprintf(out, "%-32s %10s %14s %14s\n", "counter", "calls", "total ms", "mean us");
        for (const auto &[name, c] : rows) {
            double mean_us = c.calls ? double(c.total_ns) / double(c.calls) / 1e3 : 0.0;
            std::fprintf(out, "%-32s %10llu %14.3f %14.3f\n", name.c_str(),
                         static_cast<unsigned long long>(c.calls), double(c.total_ns) / 1e6,
                         mean_us);
        }
    } catch (...) {
        // No memory to copy the counters: a missing report must not take the program down.
    }
}

void kiln_profiler_reset(void) {
    Profile &p = profile();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.counters.clear();
}

} // extern "C"
