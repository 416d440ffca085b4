// Multi-target kernels: the CPU's features (cpuid, once) and the choice of a kernel's variant.
#include "runtime/kiln_runtime.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "runtime/kiln_lock.h"

namespace {

const char *const feature_names[] = {KILN_CPU_FEATURE_NAMES};
static_assert(sizeof(feature_names) / sizeof(feature_names[0]) == KILN_CPU_FEATURE_COUNT,
              "KILN_CPU_FEATURE_COUNT must count KILN_CPU_FEATURE_NAMES");

int feature_bit(const char *name) {
    for (int i = 0; i < KILN_CPU_FEATURE_COUNT; i++) {
        if (std::strcmp(feature_names[i], name) == 0) return i;
    }
    return -1;
}

#if defined(__x86_64__) || defined(__i386__)
uint64_t detect_features() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    uint64_t mask = 0;
    auto set = [&](const char *name, bool on) {
        if (on) mask |= uint64_t(1) << feature_bit(name);
    };
    unsigned c1 = c;
    set("sse3", c1 & (1u << 0));
    set("pclmul", c1 & (1u << 1));
    set("ssse3", c1 & (1u << 9));
    set("cx16", c1 & (1u << 13));
    set("sse4.1", c1 & (1u << 19));
    set("sse4.2", c1 & (1u << 20));
    set("movbe", c1 & (1u << 22));
    set("popcnt", c1 & (1u << 23));
    set("aes", c1 & (1u << 25));
    set("xsave", c1 & (1u << 26));
    // The registers of AVX (YMM) and AVX-512 (ZMM, opmasks) are usable only when the operating
    // system saves them: XCR0 says which it does.
    bool ymm = false, zmm = false;
    if (c1 & (1u << 27)) { // osxsave
        unsigned lo = 0, hi = 0;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ymm = (lo & 0x6u) == 0x6u;
        zmm = ymm && (lo & 0xe0u) == 0xe0u;
    }
    set("avx", ymm && (c1 & (1u << 28)));
    set("fma", ymm && (c1 & (1u << 12)));
    set("f16c", ymm && (c1 & (1u << 29)));
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        set("bmi", b & (1u << 3));
        set("avx2", ymm && (b & (1u << 5)));
        set("bmi2", b & (1u << 8));
        set("adx", b & (1u << 19));
        set("sha", b & (1u << 29));
        set("avx512f", zmm && (b & (1u << 16)));
        set("avx512dq", zmm && (b & (1u << 17)));
        set("avx512ifma", zmm && (b & (1u << 21)));
        set("avx512cd", zmm && (b & (1u << 28)));
        set("avx512bw", zmm && (b & (1u << 30)));
        set("avx512vl", zmm && (b & (1u << 31)));
        set("avx512vbmi", zmm && (c & (1u << 1)));
        set("avx512vbmi2", zmm && (c & (1u << 6)));
        set("gfni", c & (1u << 8));
        set("vaes", ymm && (c & (1u << 9)));
        set("vpclmulqdq", ymm && (c & (1u << 10)));
        set("avx512vnni", zmm && (c & (1u << 11)));
        set("avx512bitalg", zmm && (c & (1u << 12)));
        set("avx512vpopcntdq", zmm && (c & (1u << 14)));
        set("avx512fp16", zmm && (d & (1u << 23)));
        unsigned max_subleaf = a;
        if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            set("avxvnni", ymm && (a & (1u << 4)));
            set("avx512bf16", zmm && (a & (1u << 5)));
        }
    }
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) set("lzcnt", c & (1u << 5));
    return mask;
}
#else
uint64_t detect_features() {
    return 0;
}
#endif

// The override: 0 = KILN_FORCE_TARGET not read yet, 1 = none, 2 = forced_name.
int override_state = 0;
char forced_name[128];
pthread_mutex_t override_mutex = PTHREAD_MUTEX_INITIALIZER;
thread_local const char *last_variant = "";

// Called with override_mutex held; the state is also read without it (the common case, no
// override, then takes no lock).
void set_override(const char *name) {
    if (!name) {
        __atomic_store_n(&override_state, 1, __ATOMIC_RELEASE);
        return;
    }
    std::snprintf(forced_name, sizeof(forced_name), "%s", name);
    __atomic_store_n(&override_state, 2, __ATOMIC_RELEASE);
}

// Whether text names variant i: its name, or its index in decimal.
bool names_variant(const char *text, int i, const kiln_target_variant_t &v) {
    if (std::strcmp(text, v.name) == 0) return true;
    char index[16];
    std::snprintf(index, sizeof(index), "%d", i);
    return std::strcmp(text, index) == 0;
}

} // namespace

extern "C" {

uint64_t kiln_cpu_features(void) {
    // Racing first calls compute the same value.
    static uint64_t features = 0;
    static int known = 0;
    if (!__atomic_load_n(&known, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&features, detect_features(), __ATOMIC_RELAXED);
        __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&features, __ATOMIC_RELAXED);
}

void kiln_force_target(const char *name) {
    kiln_runtime_internal::Lock lock(override_mutex);
    set_override(name);
}

int kiln_select_target_variant(const char *kernel, int count,
                               const kiln_target_variant_t *variants) {
    if (count <= 0 || !variants) {
        return kiln_error(kiln_error_internal, "multi-target kernel '%s' has no variants", kernel);
    }
    uint64_t cpu = kiln_cpu_features();
    char forced[sizeof(forced_name)] = "";
    if (__atomic_load_n(&override_state, __ATOMIC_ACQUIRE) != 1) {
        kiln_runtime_internal::Lock lock(override_mutex);
        if (override_state == 0) {
            const char *env = std::getenv("KILN_FORCE_TARGET");
            set_override(env && *env ? env : nullptr);
        }
        if (override_state == 2) std::memcpy(forced, forced_name, sizeof(forced));
    }
    if (!forced[0]) {
        int chosen = count - 1;
        for (int i = 0; i < count - 1 && chosen == count - 1; i++) {
            if ((variants[i].required_features & ~cpu) == 0) chosen = i;
        }
        last_variant = variants[chosen].name;
        return chosen;
    }
    for (int i = 0; i < count; i++) {
        if (!names_variant(forced, i, variants[i])) continue;
        uint64_t missing = variants[i].required_features & ~cpu;
        if (missing) {
            // A bit past the list comes from a newer kiln: this runtime cannot test it.
            int bit = __builtin_ctzll(missing);
            char unknown[48];
            std::snprintf(unknown, sizeof(unknown), "bit %d, unknown to this runtime", bit);
            return kiln_error(kiln_error_generic,
                              "kernel '%s': the forced target variant '%s' needs the CPU feature "
                              "'%s', which this CPU lacks; force another variant or none",
                              kernel, variants[i].name,
                              bit < KILN_CPU_FEATURE_COUNT ? feature_names[bit] : unknown);
        }
        last_variant = variants[i].name;
        return i;
    }
    char known[512] = "";
    for (int i = 0; i < count; i++) {
        size_t n = std::strlen(known);
        std::snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "", variants[i].name);
    }
    return kiln_error(kiln_error_generic,
                      "kernel '%s' has no target variant '%s' (forced by KILN_FORCE_TARGET or "
                      "kiln_force_target; its variants: %s, or their indices 0 to %d)",
                      kernel, forced, known, count - 1);
}

const char *kiln_last_target_variant(void) {
    return last_variant;
}

} // extern "C"
