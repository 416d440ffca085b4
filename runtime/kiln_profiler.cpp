// Timing: a monotonic clock and named counters of calls and nanoseconds. Counters are few and
// updated once per pipeline or stage call, so one mutex and a fixed table are enough; the runtime
// stays free of the C++ library, so a C program links it with libc and OpenMP alone.
//
// Per-Func profiles of pipelines compiled with Target::profile (codegen/InjectProfiling.h): each
// thread holds the Func it computes and when it started; a switch adds the time since then to
// that Func's total (an atomic add, no lock) and makes another Func current. Pipelines are
// registered on their first call, by the string of names their code carries, in a fixed table.
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

constexpr int max_pipelines = 64;
constexpr int max_funcs = 64;
constexpr size_t max_func_name = 48;

struct PipelineProfile {
    const char *names; // the string of the module that last entered it (atomic)
    char name[max_name];
    char text[max_funcs * max_func_name]; // the names string, compared on entry
    int funcs;
    char func[max_funcs][max_func_name];
    uint64_t ns[max_funcs]; // atomic
    uint64_t calls;         // atomic
};

struct FuncProfiles {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    int count = 0; // atomic reads; written under the mutex
    bool at_exit = false;
    PipelineProfile pipelines[max_pipelines] = {};
};

FuncProfiles the_funcs;

struct ThreadState {
    PipelineProfile *pipeline;
    int current; // the Func this thread computes, -1: none
    uint64_t last;
};

thread_local ThreadState this_thread = {nullptr, -1, 0};

int pipeline_count() {
    return __atomic_load_n(&the_funcs.count, __ATOMIC_ACQUIRE);
}

PipelineProfile *by_pointer(const char *names) {
    const int n = pipeline_count();
    for (int i = 0; i < n; i++) {
        PipelineProfile &p = the_funcs.pipelines[i];
        if (__atomic_load_n(&p.names, __ATOMIC_ACQUIRE) == names) return &p;
    }
    return nullptr;
}

void report_func_profiles(FILE *out);

void report_at_exit() {
    report_func_profiles(stderr);
}

// The pipeline whose names string is `names` (its name, then its Funcs, one per line), found by
// content and registered on its first call; nullptr when the table is full.
PipelineProfile *enter(const char *names) {
    PipelineProfile *p = by_pointer(names);
    if (p && std::strncmp(p->text, names, sizeof(p->text) - 1) == 0) return p;
    FuncProfiles &f = the_funcs;
    Lock lock(f.mutex);
    for (int i = 0; i < f.count; i++) {
        if (std::strncmp(f.pipelines[i].text, names, sizeof(f.pipelines[i].text) - 1) == 0) {
            __atomic_store_n(&f.pipelines[i].names, names, __ATOMIC_RELEASE);
            return &f.pipelines[i];
        }
    }
    if (f.count == max_pipelines) return nullptr;
    p = &f.pipelines[f.count];
    std::snprintf(p->text, sizeof(p->text), "%s", names);
    p->funcs = 0;
    const char *line = names;
    for (int i = -1; *line && p->funcs < max_funcs; i++) {
        size_t len = std::strcspn(line, "\n");
        char *dest = i < 0 ? p->name : p->func[p->funcs++];
        const size_t room = i < 0 ? sizeof(p->name) : max_func_name;
        std::snprintf(dest, room, "%.*s", int(len), line);
        line += len + (line[len] == '\n' ? 1 : 0);
    }
    std::memset(p->ns, 0, sizeof(p->ns));
    p->calls = 0;
    __atomic_store_n(&p->names, names, __ATOMIC_RELEASE);
    __atomic_store_n(&f.count, f.count + 1, __ATOMIC_RELEASE);
    if (!f.at_exit) {
        f.at_exit = true;
        const char *env = std::getenv("KILN_PROFILE_AT_EXIT");
        if (!env || std::strcmp(env, "0") != 0) std::atexit(report_at_exit);
    }
    return p;
}

void report_func_profiles(FILE *out) {
    const int n = pipeline_count();
    for (int i = 0; i < n; i++) {
        const PipelineProfile &p = the_funcs.pipelines[i];
        const uint64_t calls = __atomic_load_n(&p.calls, __ATOMIC_RELAXED);
        if (calls == 0) continue;
        uint64_t ns[max_funcs], total = 0;
        int order[max_funcs];
        for (int k = 0; k < p.funcs; k++) {
            ns[k] = __atomic_load_n(&p.ns[k], __ATOMIC_RELAXED);
            total += ns[k];
            order[k] = k;
        }
        // Largest first (a handful of Funcs: insertion sort).
        for (int a = 1; a < p.funcs; a++) {
            for (int b = a; b > 0 && ns[order[b]] > ns[order[b - 1]]; b--) {
                int t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
        }
        std::fprintf(out,
                     "kiln profile of %s: %llu calls, %.3f ms of thread time (%.3f ms per call)\n",
                     p.name, static_cast<unsigned long long>(calls), double(total) / 1e6,
                     double(total) / 1e6 / double(calls));
        std::fprintf(out, "  %-32s %12s %14s %7s\n", "func", "total ms", "per call ms", "%");
        for (int k = 0; k < p.funcs; k++) {
            const int f = order[k];
            std::fprintf(out, "  %-32s %12.3f %14.4f %6.1f%%\n", p.func[f], double(ns[f]) / 1e6,
                         double(ns[f]) / 1e6 / double(calls),
                         total ? 100.0 * double(ns[f]) / double(total) : 0.0);
        }
    }
}

} // namespace

extern "C" {

int32_t kiln_profiler_switch(const char *names, int32_t id, int32_t mode) {
    const uint64_t now = kiln_current_time_ns();
    ThreadState &t = this_thread;
    if (mode == 1) {
        // A call of the pipeline: whatever this thread held before does not go on.
        PipelineProfile *p = enter(names);
        if (p) __atomic_fetch_add(&p->calls, 1, __ATOMIC_RELAXED);
        t = ThreadState{p, p && id >= 0 && id < p->funcs ? id : -1, now};
        return -1;
    }
    PipelineProfile *p =
        t.pipeline && __atomic_load_n(&t.pipeline->names, __ATOMIC_ACQUIRE) == names
            ? t.pipeline
            : by_pointer(names);
    int32_t previous = -1;
    if (p && t.pipeline == p) {
        previous = t.current;
        if (t.current >= 0) __atomic_fetch_add(&p->ns[t.current], now - t.last, __ATOMIC_RELAXED);
    }
    t = ThreadState{p, p && id >= 0 && id < p->funcs ? id : -1, now};
    return previous;
}

int kiln_profiler_func_query(const char *pipeline, const char *func, uint64_t *calls,
                             uint64_t *total_ns) {
    uint64_t c = 0, ns = 0;
    int found = 0;
    const int n = pipeline_count();
    for (int i = 0; pipeline && func && i < n; i++) {
        const PipelineProfile &p = the_funcs.pipelines[i];
        if (std::strncmp(p.name, pipeline, max_name - 1) != 0) continue;
        for (int k = 0; k < p.funcs; k++) {
            if (std::strncmp(p.func[k], func, max_func_name - 1) != 0) continue;
            found = 1;
            c += __atomic_load_n(&p.calls, __ATOMIC_RELAXED);
            ns += __atomic_load_n(&p.ns[k], __ATOMIC_RELAXED);
        }
    }
    if (calls) *calls = c;
    if (total_ns) *total_ns = ns;
    return found;
}

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
    report_func_profiles(out);
    if (n == 0 && pipeline_count() > 0) return; // only per-Func profiles
    std::fprintf(out, "%-32s %10s %14s %14s\n", "counter", "calls", "total ms", "mean us");
    for (int i = 0; i < n; i++) {
        const Counter &c = rows[i];
        double mean_us = c.calls ? double(c.total_ns) / double(c.calls) / 1e3 : 0.0;
        std::fprintf(out, "%-32s %10llu %14.3f %14.3f\n", c.name,
                     static_cast<unsigned long long>(c.calls), double(c.total_ns) / 1e6, mean_us);
    }
}

void kiln_profiler_reset(void) {
    {
        Profile &p = the_profile;
        Lock lock(p.mutex);
        p.count = 0;
    }
    // Pipelines stay registered (their code may be running); their figures start again.
    FuncProfiles &f = the_funcs;
    Lock lock(f.mutex);
    for (int i = 0; i < f.count; i++) {
        PipelineProfile &p = f.pipelines[i];
        __atomic_store_n(&p.calls, 0, __ATOMIC_RELAXED);
        for (int k = 0; k < max_funcs; k++)
            __atomic_store_n(&p.ns[k], 0, __ATOMIC_RELAXED);
    }
}

} // extern "C"
