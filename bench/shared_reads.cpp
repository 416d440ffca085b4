// What two cores reading the same lines cost: the probe behind the hand schedules' private tasks
// (matmul's b_tasks, conv2d's row_tasks, docs/OPERATORS.md). Two threads, one per core, each sum
// a buffer from their caches many times, in three ways:
//   shared   both read one buffer the main thread wrote
//   private  each reads a buffer of its own that it wrote itself
//   main     each reads a buffer of its own that the main thread wrote (tells line sharing apart
//            from where the pages were first touched)
// and one thread alone for reference. Prints GB/s per thread, interleaved rounds, as JSON lines.
//
//   kiln_bench_shared_reads [--kib 32,256,1024,1800] [--rounds 2] [--bytes-per-run 200000000]
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Buffer {
    float *data = nullptr;
    size_t floats = 0;
    explicit Buffer(size_t bytes) : floats(bytes / sizeof(float)) {
        data = static_cast<float *>(std::aligned_alloc(64, floats * sizeof(float)));
        if (!data) {
            std::fprintf(stderr, "shared_reads: out of memory\n");
            std::exit(1);
        }
        for (size_t i = 0; i < floats; i++)
            data[i] = 1.0f;
    }
    ~Buffer() { std::free(data); }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
};

// Four independent sums of whole vectors (zmm where the CPU has AVX-512, as the kernels use):
// bound by the loads, not by the adds' latency.
#ifdef __AVX512F__
float sum(const float *p, size_t n) {
    __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a = _mm512_add_ps(a, _mm512_load_ps(p + i));
        b = _mm512_add_ps(b, _mm512_load_ps(p + i + 16));
        c = _mm512_add_ps(c, _mm512_load_ps(p + i + 32));
        d = _mm512_add_ps(d, _mm512_load_ps(p + i + 48));
    }
    float lanes[16];
    _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
    float t = 0;
    for (float v : lanes)
        t += v;
    return t;
}
#else
float sum(const float *p, size_t n) {
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a = _mm256_add_ps(a, _mm256_load_ps(p + i));
        b = _mm256_add_ps(b, _mm256_load_ps(p + i + 8));
        c = _mm256_add_ps(c, _mm256_load_ps(p + i + 16));
        d = _mm256_add_ps(d, _mm256_load_ps(p + i + 24));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    float t = 0;
    for (float v : lanes)
        t += v;
    return t;
}
#endif

void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Seconds each of `threads` threads took for `reps` sums of its buffer; buffer(i) gives thread
// i's (nullptr: a buffer of its own, written by the thread).
std::vector<double> run(int threads, size_t bytes, int reps, float *(*buffer)(int, void *),
                        void *ctx) {
    std::vector<double> seconds(size_t(threads), 0.0);
    std::atomic<int> ready{0};
    auto body = [&](int id) {
        pin(id);
        float *p = buffer(id, ctx);
        Buffer own(p ? 64 : bytes);
        if (!p) p = own.data;
        ready++;
        while (ready.load() < threads) {
        }
        volatile float sink = 0;
        auto start = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; r++)
            sink = sink + sum(p, bytes / sizeof(float));
        seconds[size_t(id)] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::vector<std::thread> others;
    for (int i = 1; i < threads; i++)
        others.emplace_back(body, i);
    body(0);
    for (std::thread &t : others)
        t.join();
    return seconds;
}

std::vector<size_t> parse_list(const char *text) {
    std::vector<size_t> out;
    std::string s(text);
    size_t start = 0;
    while (start <= s.size()) {
        size_t comma = s.find(',', start);
        std::string item =
            s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        char *end = nullptr;
        unsigned long v = std::strtoul(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v == 0) {
            std::fprintf(stderr, "shared_reads: --kib wants positive integers, got '%s'\n", text);
            std::exit(2);
        }
        out.push_back(size_t(v));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

struct Context {
    float *shared;
    float *main_owned[2];
};

} // namespace

int main(int argc, char **argv) {
    std::vector<size_t> kib = {32, 256, 1024, 1800};
    int rounds = 2;
    double bytes_per_run = 2e8;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--kib" && i + 1 < argc) {
            kib = parse_list(argv[++i]);
        } else if (a == "--rounds" && i + 1 < argc) {
            rounds = std::atoi(argv[++i]);
        } else if (a == "--bytes-per-run" && i + 1 < argc) {
            bytes_per_run = std::atof(argv[++i]);
        } else {
            std::fprintf(stderr,
                         "usage: kiln_bench_shared_reads [--kib 32,256,1024,1800] [--rounds N] "
                         "[--bytes-per-run B]\n");
            return 2;
        }
    }
    if (std::thread::hardware_concurrency() < 2) {
        std::fprintf(stderr, "shared_reads: needs two cores\n");
        return 1;
    }
    for (int round = 0; round < rounds; round++) {
        for (size_t k : kib) {
            const size_t bytes = k * 1024 / 256 * 256;
            const int reps = std::max(1, int(bytes_per_run / double(bytes)));
            Buffer shared(bytes), first(bytes), second(bytes);
            Context ctx{shared.data, {first.data, second.data}};
            struct Mode {
                const char *name;
                int threads;
                float *(*buffer)(int, void *);
            };
            const Mode modes[] = {
                {"alone", 1, [](int, void *c) { return static_cast<Context *>(c)->shared; }},
                {"shared", 2, [](int, void *c) { return static_cast<Context *>(c)->shared; }},
                {"private", 2, [](int, void *) -> float * { return nullptr; }},
                {"main", 2,
                 [](int id, void *c) { return static_cast<Context *>(c)->main_owned[id]; }},
            };
            for (const Mode &m : modes) {
                std::vector<double> s = run(m.threads, bytes, reps, m.buffer, &ctx);
                std::printf("{\"round\":%d,\"kib\":%zu,\"mode\":\"%s\"", round, k, m.name);
                for (size_t t = 0; t < s.size(); t++)
                    std::printf(",\"gbps_%zu\":%.1f", t, double(bytes) * reps / s[t] / 1e9);
                std::printf("}\n");
            }
        }
    }
    return 0;
}
