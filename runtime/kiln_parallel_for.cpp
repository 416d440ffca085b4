// Parallel loops on OpenMP. Tasks record error messages in their own thread's storage, so the
// message of the failing task is carried back to the calling thread along with its code.
#include "runtime/kiln_runtime.h"

#include <omp.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

namespace {

// 0 means "not chosen yet": the default is computed on first use, after the environment is set.
int chosen_threads = 0; // read and written atomically

int load_chosen() {
    return __atomic_load_n(&chosen_threads, __ATOMIC_RELAXED);
}

void store_chosen(int n) {
    __atomic_store_n(&chosen_threads, n, __ATOMIC_RELAXED);
}

int default_threads() {
    if (const char *env = std::getenv("KILN_NUM_THREADS")) {
        char *end = nullptr;
        long n = std::strtol(env, &end, 10);
        if (end != env && *end == '\0' && n > 0 && n <= INT_MAX) return static_cast<int>(n);
    }
    return omp_get_max_threads();
}

// Serial loops stop at the first failure, which is also the lowest-indexed one.
int run_serially(void *user_context, kiln_task_fn fn, int min, int extent, uint8_t *closure) {
    for (int i = min; i < min + extent; i++) {
        int result = fn(user_context, i, closure);
        if (result != kiln_success) return result;
    }
    return kiln_success;
}

struct FirstFailure {
    bool failed = false;
    int index = 0;
    int code = kiln_success;
    // A fixed array: nothing inside the parallel region may throw.
    char message[1024] = "";
};

} // namespace

extern "C" {

void kiln_set_num_threads(int n) {
    store_chosen(n > 0 ? n : default_threads());
}

int kiln_get_num_threads(void) {
    int n = load_chosen();
    if (n > 0) return n;
    n = default_threads();
    store_chosen(n);
    return n;
}

int kiln_parallel_for(void *user_context, kiln_task_fn fn, int min, int extent, uint8_t *closure) {
    if (extent <= 0) return kiln_success;
    if (!fn) return kiln_error(kiln_error_internal, "kiln_parallel_for: the task function is null");
    if (static_cast<long long>(min) + extent > INT_MAX)
        return kiln_error(kiln_error_internal,
                          "kiln_parallel_for: the range [%d, %d + %d) overflows int", min, min,
                          extent);
    int threads = kiln_get_num_threads();
    // A nested call would otherwise oversubscribe the cores the outer loop already uses.
    if (extent == 1 || threads == 1 || omp_in_parallel())
        return run_serially(user_context, fn, min, extent, closure);

    // Keeping the lowest failing index (rather than the first to finish) makes the reported error
    // the same on every run.
    FirstFailure failure;
    // Dynamic scheduling balances tasks of unequal cost, but each claim of an iteration is an
    // atomic on a line both cores write: for thousands of short tasks (a row each) that costs
    // several percent. Claim chunks instead, at least 16 per thread, so the balance stays and
    // a loop of a few coarse tasks still hands them out one at a time.
    const int chunk = extent / (16 * threads) > 1 ? extent / (16 * threads) : 1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, chunk)
    for (int i = min; i < min + extent; i++) {
        int result = fn(user_context, i, closure);
        if (result != kiln_success) {
#pragma omp critical(kiln_parallel_for_failure)
            if (!failure.failed || i < failure.index) {
                failure.failed = true;
                failure.index = i;
                failure.code = result;
                std::snprintf(failure.message, sizeof(failure.message), "%s",
                              kiln_last_error_message());
            }
        }
    }
    if (!failure.failed) return kiln_success;
    return kiln_error(failure.code, "%s", failure.message);
}

} // extern "C"
