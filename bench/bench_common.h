// The reference side of kiln's side-by-side benchmarks: what every bench_<impl> executable shares.
//
// Protocol (kiln_bench follows it too):
//   bench_<impl> --list   one supported workload a line: "name shape-names default-shape"
//   bench_<impl> --info   library version, kernel or target
//   bench_<impl> --workload NAME --shape AxBxC --threads T --reps R [--min-time S]
//     prints one JSON line per measurement:
//     {"impl":"openblas","workload":"matmul","shape":"1024x1024x1024","threads":2,"median_ms":..,
//      "min_ms":..,"reps":..,"work":..,"unit":"GF/s","rate":..,"checked":true,"max_rel_err":..,
//      "cpu_ms":..}   (cpu_ms: median CPU time of the process per run, all threads; optional)
//
// Every result is checked against a plain-loop reference computed once in the process (double
// accumulation), on the first (warm-up) run and again on one more run after the timed ones; the
// output is filled with NaN before each checked run, so an implementation that writes nothing
// fails the check. Timing: after the warm-up, repeats until R runs, or until at least 0.5 s and
// 3 runs (or 5 s in all); the median and minimum are reported.
//
// Workloads (the semantics of kiln's apps/, row-major, x the innermost dimension):
//   matmul   MxNxK  C[i][j] = sum_k A[i][k] * B[k][j]; A is MxK, B is KxN.  work: 2MNK flops
//   matmul_u8s8 MxNxK  the same in integers: A uint8, B int8, C int32 (exact). B is given plain;
//            each implementation packs it into its own layout once, untimed (constant weights).
//            work: 2MNK integer operations
//   matmul_bf16 MxNxK  the same in bfloat16 (A, B) summed in float32 (C); inputs in [-1, 1]
//            rounded to bfloat16, B given plain and packed once, untimed.  work: 2MNK flops
//   conv2d   NxCxHxWxK, batch N = 1 only (apps' C_in x C_out x H x W is C x K x H x W). NCHW:
//            out[k][y][x] = sum_{c,ry,rx} w[k][c][ry][rx] * in[c][y+ry-1][x+rx-1], zero
//            padding 1, stride 1, 3x3 kernel, OIHW weights.  work: 18 C K H W flops
//   blur     WxH  Halide's apps/blur without a border: a W x H input gives (W-2) x (H-2)
//            outputs, blur_x(x,y) = ((in(x,y) + in(x+1,y)) + in(x+2,y)) * (1.f/3.f) in float,
//            blur_y(x,y) likewise over y..y+2.  work: bytes of the input + bytes of the output
//   blur_u16 WxH  the same on uint16 (inputs below 2^14, sums in uint16), division by 3.
//   softmax  MxN  out[i][j] = exp(in[i][j] - max_j in[i][.]) / sum_j exp(in[i][j] - max), over
//            M rows of N contiguous floats.  work: bytes in + bytes out
//   layernorm MxN out[i][j] = (in[i][j] - mean_i) / sqrt(var_i + 1e-5) * gamma[j] + beta[j], the
//            mean and (biased) variance over row i's N contiguous floats (apps/LayerNorm.cpp).
//            work: bytes in + bytes out (gamma and beta stay in cache)
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace benchref {

// ---------------------------------------------------------------------------------------------
// Errors: a bench executable reports a usage error on stderr and exits 2.

[[noreturn]] inline void fail(const std::string &impl, const std::string &message) {
    std::fprintf(stderr, "bench_%s: %s\n", impl.c_str(), message.c_str());
    std::exit(2);
}

// ---------------------------------------------------------------------------------------------
// Workloads.

struct WorkloadInfo {
    std::string name;
    std::vector<std::string> shape_names;
    std::vector<int64_t> default_shape;
    std::string unit; // "GF/s", "GOP/s" (integer operations) or "GB/s"
    /// Largest accepted max |got - ref| / max(1, |ref|), against a double-accumulation reference.
    double tolerance;
};

inline const std::vector<WorkloadInfo> &workloads() {
    // Tolerances: matmul and conv2d sum up to K (or 9C) float products of values in [-1, 1);
    // blocked float sums differ from the double reference by ~sqrt(K) ulps of a result of size
    // ~sqrt(K), far below 1e-3. blur: the reference does the same float operations in the same
    // order, so results are equal up to contraction; 1e-6 allows an ulp on values below 1. softmax
    // outputs lie in (0, 1], compared absolutely; a library's vector exp is a few ulp off and its
    // row sum reassociated, a few 1e-8 here, while a wrong row max or sum is off by far more than
    // 1e-5. blur_u16 is exact integer arithmetic. layernorm: outputs of a few units; a float mean
    // and variance are ~sqrt(N) ulps off the double ones (apps' tolerance), a wrong one 1e-2.
    static const std::vector<WorkloadInfo> list = {
        {"matmul", {"M", "N", "K"}, {1024, 1024, 1024}, "GF/s", 1e-3},
        {"matmul_u8s8", {"M", "N", "K"}, {1024, 1024, 1024}, "GOP/s", 0.0},
        {"matmul_bf16", {"M", "N", "K"}, {1024, 1024, 1024}, "GF/s", 1e-3},
        {"conv2d", {"N", "C", "H", "W", "K"}, {1, 64, 56, 56, 64}, "GF/s", 1e-3},
        {"blur", {"W", "H"}, {4096, 4096}, "GB/s", 1e-6},
        {"blur_u16", {"W", "H"}, {4096, 4096}, "GB/s", 0.0},
        {"softmax", {"M", "N"}, {4096, 4096}, "GB/s", 1e-5},
        {"layernorm", {"M", "N"}, {4096, 4096}, "GB/s", 1e-4},
    };
    return list;
}

inline const WorkloadInfo *find_workload(const std::string &name) {
    for (const WorkloadInfo &w : workloads()) {
        if (w.name == name) return &w;
    }
    return nullptr;
}

inline std::string shape_to_string(const std::vector<int64_t> &shape) {
    std::string s;
    for (size_t i = 0; i < shape.size(); i++) {
        if (i) s += "x";
        s += std::to_string(shape[i]);
    }
    return s;
}

inline std::string join_names(const std::vector<std::string> &names) {
    std::string s;
    for (size_t i = 0; i < names.size(); i++)
        s += (i ? "x" : "") + names[i];
    return s;
}

/// Parses "1024x1024x512" (or with commas); empty gives the default shape.
inline std::vector<int64_t> parse_shape(const std::string &impl, const WorkloadInfo &w,
                                        const std::string &text) {
    if (text.empty()) return w.default_shape;
    std::vector<int64_t> shape;
    std::string cur;
    auto flush = [&]() {
        char *end = nullptr;
        long long v = std::strtoll(cur.c_str(), &end, 10);
        if (cur.empty() || *end != '\0' || v <= 0 || v > (1LL << 30)) {
            fail(impl, "--shape '" + text + "': '" + cur + "' is not a positive integer; " +
                           w.name + " takes " + join_names(w.shape_names) + ", e.g. " +
                           shape_to_string(w.default_shape));
        }
        shape.push_back(v);
        cur.clear();
    };
    for (char ch : text) {
        if (ch == 'x' || ch == 'X' || ch == ',') {
            flush();
        } else {
            cur += ch;
        }
    }
    flush();
    if (shape.size() != w.shape_names.size()) {
        fail(impl, "--shape '" + text + "' has " + std::to_string(shape.size()) + " values but " +
                       w.name + " takes " + std::to_string(w.shape_names.size()) + " (" +
                       join_names(w.shape_names) + "), e.g. " + shape_to_string(w.default_shape));
    }
    if (w.name == "conv2d" && shape[0] != 1) {
        fail(impl, "--shape '" + text +
                       "': conv2d is benchmarked at batch N = 1 only, e.g. 1x64x56x56x64");
    }
    if ((w.name == "blur" || w.name == "blur_u16") && (shape[0] < 3 || shape[1] < 3)) {
        fail(impl, "--shape '" + text + "': " + w.name + " needs an input of at least 3x3");
    }
    return shape;
}

/// Work per run: flops for GF/s workloads, bytes read plus written for GB/s ones.
inline double work_of(const std::string &name, const std::vector<int64_t> &s) {
    if (name == "matmul" || name == "matmul_u8s8" || name == "matmul_bf16")
        return 2.0 * s[0] * s[1] * s[2];
    if (name == "conv2d") return 18.0 * s[0] * s[1] * s[2] * s[3] * s[4];
    if (name == "blur") return 4.0 * (double(s[0]) * s[1] + double(s[0] - 2) * (s[1] - 2));
    if (name == "blur_u16") return 2.0 * (double(s[0]) * s[1] + double(s[0] - 2) * (s[1] - 2));
    if (name == "softmax" || name == "layernorm") return 2.0 * s[0] * s[1] * 4.0;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Buffers and deterministic inputs.

/// 64-byte aligned, zero-initialized-on-demand storage.
template <typename T>
struct Array {
    T *ptr = nullptr;
    size_t n = 0;
    Array() = default;
    explicit Array(size_t count) : n(count) {
        size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
        ptr = static_cast<T *>(std::aligned_alloc(64, bytes ? bytes : 64));
        if (!ptr) {
            std::fprintf(stderr, "bench: out of memory allocating %zu bytes\n", bytes);
            std::exit(2);
        }
    }
    Array(const Array &) = delete;
    Array &operator=(const Array &) = delete;
    Array(Array &&o) noexcept : ptr(o.ptr), n(o.n) { o.ptr = nullptr, o.n = 0; }
    Array &operator=(Array &&o) noexcept {
        std::swap(ptr, o.ptr);
        std::swap(n, o.n);
        return *this;
    }
    ~Array() { std::free(ptr); }
    T *data() { return ptr; }
    const T *data() const { return ptr; }
    size_t size() const { return n; }
    T &operator[](size_t i) { return ptr[i]; }
    const T &operator[](size_t i) const { return ptr[i]; }
};

/// splitmix64: a fixed seed per tensor gives the same inputs in every process.
inline uint64_t splitmix(uint64_t &state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

inline Array<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
    Array<float> a(n);
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        double u = double(splitmix(st) >> 11) * 0x1.0p-53;
        a[i] = float(lo + (hi - lo) * u);
    }
    return a;
}

/// Uniform in [0, 2^14): three of them add without wrapping in uint16.
inline Array<uint16_t> random_u16(size_t n, uint64_t seed) {
    Array<uint16_t> a(n);
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++)
        a[i] = uint16_t(splitmix(st) >> 50);
    return a;
}

/// Uniform bytes: uint8 in [0, 255], or int8 in [-128, 127].
template <typename T>
inline Array<T> random_bytes(size_t n, uint64_t seed) {
    Array<T> a(n);
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++)
        a[i] = T(uint8_t(splitmix(st) >> 56));
    return a;
}

// ---------------------------------------------------------------------------------------------
// Plain-loop references (single thread, double accumulation).

/// C[i][j] = sum_k A[i][k] * B[k][j] in int32 (exact; A uint8 M x K, B int8 K x N, row-major).
inline Array<int32_t> reference_matmul_u8s8(const uint8_t *A, const int8_t *B, int M, int N,
                                            int K) {
    Array<int32_t> C(size_t(M) * N);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            int32_t s = 0;
            for (int k = 0; k < K; k++)
                s += int32_t(A[size_t(i) * K + k]) * int32_t(B[size_t(k) * N + j]);
            C[size_t(i) * N + j] = s;
        }
    }
    return C;
}

/// C (MxN) = A (MxK) * B (KxN), row-major; i-k-j order over rows of C in double.
inline Array<float> reference_matmul(const float *A, const float *B, int M, int N, int K) {
    Array<float> C(size_t(M) * N);
    std::vector<double> row(N);
    for (int i = 0; i < M; i++) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int k = 0; k < K; k++) {
            const double a = A[size_t(i) * K + k];
            const float *b = B + size_t(k) * N;
            for (int j = 0; j < N; j++)
                row[j] += a * double(b[j]);
        }
        for (int j = 0; j < N; j++)
            C[size_t(i) * N + j] = float(row[j]);
    }
    return C;
}

/// out (K x H x W) = conv3x3(in (C x H x W), w (K x C x 3 x 3)), zero padding 1, batch 1.
inline Array<float> reference_conv2d(const float *in, const float *w, int C, int H, int W, int K) {
    Array<float> out(size_t(K) * H * W);
    std::vector<double> acc(size_t(H) * W);
    for (int k = 0; k < K; k++) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int c = 0; c < C; c++) {
            for (int ry = 0; ry < 3; ry++) {
                for (int rx = 0; rx < 3; rx++) {
                    const double wv = w[((size_t(k) * C + c) * 3 + ry) * 3 + rx];
                    for (int y = 0; y < H; y++) {
                        int iy = y + ry - 1;
                        if (iy < 0 || iy >= H) continue;
                        const float *irow = in + (size_t(c) * H + iy) * W;
                        double *orow = acc.data() + size_t(y) * W;
                        for (int x = 0; x < W; x++) {
                            int ix = x + rx - 1;
                            if (ix < 0 || ix >= W) continue;
                            orow[x] += wv * double(irow[ix]);
                        }
                    }
                }
            }
        }
        for (size_t i = 0; i < acc.size(); i++)
            out[size_t(k) * H * W + i] = float(acc[i]);
    }
    return out;
}

/// blur as in apps/blur (no border): (W-2) x (H-2) outputs, the same float operations in the
/// same order as kiln's reference. T is float or uint16_t (sums wrap in uint16 as in kiln; the
/// inputs are small enough that they never do).
template <typename T>
T third(T v) {
    if constexpr (std::is_floating_point_v<T>) {
        return v * (1.f / 3.f);
    } else {
        return T(v / 3);
    }
}

template <typename T>
Array<T> reference_blur(const T *in, int W, int H) {
    const int OW = W - 2, OH = H - 2;
    std::vector<T> bx(size_t(OW) * H);
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < OW; x++) {
            const T *p = in + size_t(y) * W + x;
            bx[size_t(y) * OW + x] = third(T(T(p[0] + p[1]) + p[2]));
        }
    }
    Array<T> out(size_t(OW) * OH);
    for (int y = 0; y < OH; y++) {
        for (int x = 0; x < OW; x++) {
            const T *p = bx.data() + size_t(y) * OW + x;
            out[size_t(y) * OW + x] = third(T(T(p[0] + p[OW]) + p[2 * size_t(OW)]));
        }
    }
    return out;
}

/// Row softmax over W contiguous values, max subtracted, in double.
inline Array<float> reference_softmax(const float *in, int W, int H) {
    Array<float> out(size_t(W) * H);
    for (int y = 0; y < H; y++) {
        const float *r = in + size_t(y) * W;
        double m = -INFINITY;
        for (int x = 0; x < W; x++)
            m = std::max(m, double(r[x]));
        double s = 0;
        for (int x = 0; x < W; x++)
            s += std::exp(double(r[x]) - m);
        for (int x = 0; x < W; x++)
            out[size_t(y) * W + x] = float(std::exp(double(r[x]) - m) / s);
    }
    return out;
}

/// Row layer normalisation over W contiguous values (biased variance, epsilon 1e-5), in double.
inline Array<float> reference_layernorm(const float *in, const float *gamma, const float *beta,
                                        int W, int H) {
    Array<float> out(size_t(W) * H);
    for (int y = 0; y < H; y++) {
        const float *r = in + size_t(y) * W;
        double s = 0;
        for (int x = 0; x < W; x++)
            s += r[x];
        const double mean = s / W;
        double sq = 0;
        for (int x = 0; x < W; x++)
            sq += (r[x] - mean) * (r[x] - mean);
        const double rstd = 1.0 / std::sqrt(sq / W + 1e-5);
        for (int x = 0; x < W; x++)
            out[size_t(y) * W + x] = float((r[x] - mean) * rstd * gamma[x] + beta[x]);
    }
    return out;
}

/// max |got - ref| / max(1, |ref|) (apps::max_relative_error); +inf for a NaN.
template <typename T>
double max_rel_err(const T *got, const T *ref, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double g = double(got[i]), r = double(ref[i]);
        double e = std::fabs(g - r) / std::max(1.0, std::fabs(r));
        if (!(e == e)) return INFINITY;
        worst = std::max(worst, e);
    }
    return worst;
}

// ---------------------------------------------------------------------------------------------
// A workload's inputs, reference and the output an implementation writes (plain layouts).

struct Problem {
    std::string workload;
    std::vector<int64_t> shape;
    Array<float> a, b, ref, out;       // float workloads: a, b inputs (b unused for 1-input ones)
    Array<float> c;                    // a third input: layernorm's beta (b is its gamma)
    Array<uint16_t> a16, ref16, out16; // blur_u16
    Array<uint8_t> a8;                 // matmul_u8s8: A (M x K), B (K x N, plain row-major)
    Array<int8_t> b8;
    Array<int32_t> ref32, out32;
    Array<uint16_t> abf, bbf; // matmul_bf16: A and B as bfloat16 bits (plain), C in out
    size_t out_count() const {
        return workload == "blur_u16"      ? out16.size()
               : workload == "matmul_u8s8" ? out32.size()
                                           : out.size();
    }
};

/// Makes inputs (fixed seeds) and the reference for one workload and shape.
inline Problem make_problem(const std::string &workload, const std::vector<int64_t> &s) {
    Problem p;
    p.workload = workload;
    p.shape = s;
    if (workload == "matmul") {
        int M = int(s[0]), N = int(s[1]), K = int(s[2]);
        p.a = random_floats(size_t(M) * K, 1, -1, 1);
        p.b = random_floats(size_t(K) * N, 2, -1, 1);
        p.ref = reference_matmul(p.a.data(), p.b.data(), M, N, K);
        p.out = Array<float>(size_t(M) * N);
    } else if (workload == "matmul_u8s8") {
        int M = int(s[0]), N = int(s[1]), K = int(s[2]);
        p.a8 = random_bytes<uint8_t>(size_t(M) * K, 1);
        p.b8 = random_bytes<int8_t>(size_t(K) * N, 2);
        p.ref32 = reference_matmul_u8s8(p.a8.data(), p.b8.data(), M, N, K);
        p.out32 = Array<int32_t>(size_t(M) * N);
    } else if (workload == "matmul_bf16") {
        int M = int(s[0]), N = int(s[1]), K = int(s[2]);
        Array<float> a = random_floats(size_t(M) * K, 1, -1, 1),
                     b = random_floats(size_t(K) * N, 2, -1, 1);
        p.abf = Array<uint16_t>(a.size());
        p.bbf = Array<uint16_t>(b.size());
        // Round to bfloat16 (nearest even); the reference multiplies the rounded values.
        auto round = [](float f, uint16_t &bits) {
            uint32_t u;
            std::memcpy(&u, &f, 4);
            bits = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
            u = uint32_t(bits) << 16;
            std::memcpy(&f, &u, 4);
            return f;
        };
        for (size_t i = 0; i < a.size(); i++)
            a[i] = round(a[i], p.abf[i]);
        for (size_t i = 0; i < b.size(); i++)
            b[i] = round(b[i], p.bbf[i]);
        p.ref = reference_matmul(a.data(), b.data(), M, N, K);
        p.out = Array<float>(size_t(M) * N);
    } else if (workload == "conv2d") {
        int C = int(s[1]), H = int(s[2]), W = int(s[3]), K = int(s[4]);
        p.a = random_floats(size_t(C) * H * W, 1, -1, 1);
        p.b = random_floats(size_t(K) * C * 9, 2, -1, 1);
        p.ref = reference_conv2d(p.a.data(), p.b.data(), C, H, W, K);
        p.out = Array<float>(size_t(K) * H * W);
    } else if (workload == "blur") {
        int W = int(s[0]), H = int(s[1]);
        p.a = random_floats(size_t(W) * H, 1, 0, 1);
        p.ref = reference_blur<float>(p.a.data(), W, H);
        p.out = Array<float>(size_t(W - 2) * (H - 2));
    } else if (workload == "blur_u16") {
        int W = int(s[0]), H = int(s[1]);
        p.a16 = random_u16(size_t(W) * H, 1);
        p.ref16 = reference_blur<uint16_t>(p.a16.data(), W, H);
        p.out16 = Array<uint16_t>(size_t(W - 2) * (H - 2));
    } else if (workload == "softmax") {
        int H = int(s[0]), W = int(s[1]);
        p.a = random_floats(size_t(W) * H, 1, -8, 8);
        p.ref = reference_softmax(p.a.data(), W, H);
        p.out = Array<float>(size_t(W) * H);
    } else if (workload == "layernorm") {
        int H = int(s[0]), W = int(s[1]);
        p.a = random_floats(size_t(W) * H, 1, -4, 6);
        p.b = random_floats(size_t(W), 2, 0.5f, 1.5f);
        p.c = random_floats(size_t(W), 3, -1, 1);
        p.ref = reference_layernorm(p.a.data(), p.b.data(), p.c.data(), W, H);
        p.out = Array<float>(size_t(W) * H);
    }
    return p;
}

/// Fills the plain output with NaN (float) or a pattern (u16) so a run that writes nothing fails.
inline void poison_output(Problem &p) {
    if (p.workload == "blur_u16") {
        for (size_t i = 0; i < p.out16.size(); i++)
            p.out16[i] = uint16_t(0xBEEF + i);
    } else if (p.workload == "matmul_u8s8") {
        for (size_t i = 0; i < p.out32.size(); i++)
            p.out32[i] = int32_t(0x7EADBEEF - i);
    } else {
        for (size_t i = 0; i < p.out.size(); i++)
            p.out[i] = std::numeric_limits<float>::quiet_NaN();
    }
}

inline double check_output(const Problem &p) {
    if (p.workload == "blur_u16")
        return max_rel_err(p.out16.data(), p.ref16.data(), p.out16.size());
    if (p.workload == "matmul_u8s8")
        return max_rel_err(p.out32.data(), p.ref32.data(), p.out32.size());
    return max_rel_err(p.out.data(), p.ref.data(), p.out.size());
}

// ---------------------------------------------------------------------------------------------
// Command line and the measurement loop.

struct Options {
    std::string workload;
    std::string shape_text;
    std::vector<int64_t> shape;
    int threads = 1;
    int reps = 50;
    double min_time_s = 0.5;
    bool list = false;
    bool info = false;
};

inline Options parse_args(const std::string &impl, int argc, char **argv) {
    Options o;
    auto need = [&](int &i) -> std::string {
        if (i + 1 >= argc) fail(impl, std::string(argv[i]) + " needs a value");
        return argv[++i];
    };
    auto to_int = [&](const std::string &flag, const std::string &v, int lo) {
        char *end = nullptr;
        long x = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || x < lo || x > 1 << 20) {
            fail(impl, flag + " '" + v + "' must be an integer >= " + std::to_string(lo));
        }
        return int(x);
    };
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--workload")
            o.workload = need(i);
        else if (a == "--shape")
            o.shape_text = need(i);
        else if (a == "--threads")
            o.threads = to_int(a, need(i), 1);
        else if (a == "--reps")
            o.reps = to_int(a, need(i), 1);
        else if (a == "--min-time")
            o.min_time_s = std::atof(need(i).c_str());
        else if (a == "--list")
            o.list = true;
        else if (a == "--info")
            o.info = true;
        else if (a == "--help" || a == "-h") {
            std::printf("usage: bench_%s --workload NAME [--shape AxBxC] [--threads T] [--reps R] "
                        "[--min-time S] | --list | --info\n",
                        impl.c_str());
            std::exit(0);
        } else {
            fail(impl, "unknown argument '" + a + "'; try --help");
        }
    }
    if (!o.list && !o.info) {
        if (o.workload.empty()) fail(impl, "--workload is required (or --list); try --help");
        const WorkloadInfo *w = find_workload(o.workload);
        if (!w) {
            std::string names;
            for (const WorkloadInfo &x : workloads())
                names += (names.empty() ? "" : ", ") + x.name;
            fail(impl, "unknown workload '" + o.workload + "'; known: " + names);
        }
        o.shape = parse_shape(impl, *w, o.shape_text);
    }
    return o;
}

struct Timing {
    double median_ms = 0, min_ms = 0;
    int reps = 0;
    /// Median CPU time of the whole process per run (all threads): on a machine shared with
    /// other work, a single-threaded run's CPU time is far steadier than its wall time.
    double cpu_median_ms = 0;
};

inline double process_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

inline double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Times `run` (already warmed up): repeats until `reps` runs, or >= min_time_s and >= 3 runs,
/// or 5 s in all.
inline Timing time_runs(const std::function<void()> &run, int reps, double min_time_s) {
    using clock = std::chrono::steady_clock;
    std::vector<double> ms, cpu;
    auto start = clock::now();
    for (;;) {
        double c0 = process_cpu_ms();
        auto t0 = clock::now();
        run();
        auto t1 = clock::now();
        cpu.push_back(process_cpu_ms() - c0);
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        double total = std::chrono::duration<double>(t1 - start).count();
        if (int(ms.size()) >= reps) break;
        if (total >= min_time_s && ms.size() >= 3) break;
        if (total >= 5.0) break;
    }
    Timing t;
    t.reps = int(ms.size());
    t.min_ms = *std::min_element(ms.begin(), ms.end());
    t.median_ms = median_of(ms);
    t.cpu_median_ms = median_of(cpu);
    return t;
}

inline std::string json_escape(const std::string &s) {
    std::string r;
    for (char c : s) {
        if (c == '"' || c == '\\') r += '\\';
        if (c == '\n') {
            r += "\\n";
            continue;
        }
        r += c;
    }
    return r;
}

/// One implementation of one workload: `prepare` (untimed: layouts, plans, compilation) is
/// called once, `run` computes into the problem's output (or an internal buffer), `finish`
/// (untimed) copies an internal result back to the plain output for checking.
struct Kernel {
    std::function<void()> run;
    std::function<void()> finish = [] {};
    std::string note; // e.g. "blocked layout chosen by oneDNN, reorders untimed"
};

/// Runs the check-then-time protocol and prints the JSON line. Returns 0, or 1 if unchecked.
inline int measure_and_print(const std::string &impl, const Options &o, Problem &p, Kernel &k) {
    poison_output(p);
    k.run(); // warm-up and the checked run
    k.finish();
    double err1 = check_output(p);
    const WorkloadInfo &w = *find_workload(o.workload);
    Timing t = time_runs(k.run, o.reps, o.min_time_s);
    poison_output(p); // checked again after the timed runs (state a kernel keeps across runs)
    k.run();
    k.finish();
    double err2 = check_output(p);
    double err = std::max(err1, err2);
    bool checked = err <= w.tolerance;
    double work = work_of(o.workload, o.shape);
    double rate = work / (t.median_ms * 1e6);
    std::ostringstream js;
    js.precision(6);
    js << "{\"impl\":\"" << impl << "\",\"workload\":\"" << o.workload << "\",\"shape\":\""
       << shape_to_string(o.shape) << "\",\"threads\":" << o.threads
       << ",\"median_ms\":" << t.median_ms << ",\"min_ms\":" << t.min_ms << ",\"reps\":" << t.reps
       << ",\"work\":" << work << ",\"unit\":\"" << w.unit << "\",\"rate\":" << rate
       << ",\"checked\":" << (checked ? "true" : "false")
       << ",\"max_rel_err\":" << (std::isfinite(err) ? err : 1e300)
       << ",\"cpu_ms\":" << t.cpu_median_ms;
    if (!k.note.empty()) js << ",\"note\":\"" << json_escape(k.note) << "\"";
    js << "}";
    std::printf("%s\n", js.str().c_str());
    std::fflush(stdout);
    if (!checked) {
        std::fprintf(
            stderr, "bench_%s: %s %s: wrong result, max relative error %g > tolerance %g\n",
            impl.c_str(), o.workload.c_str(), shape_to_string(o.shape).c_str(), err, w.tolerance);
        return 1;
    }
    return 0;
}

/// --list: one supported workload a line, "name shape-names default-shape".
inline void print_list(const std::vector<std::string> &supported) {
    for (const std::string &n : supported) {
        const WorkloadInfo *w = find_workload(n);
        std::printf("%s %s %s\n", n.c_str(), join_names(w->shape_names).c_str(),
                    shape_to_string(w->default_shape).c_str());
    }
}

inline void require_supported(const std::string &impl, const Options &o,
                              const std::vector<std::string> &supported) {
    if (std::find(supported.begin(), supported.end(), o.workload) == supported.end()) {
        std::string names;
        for (const std::string &n : supported)
            names += (names.empty() ? "" : ", ") + n;
        fail(impl, "workload '" + o.workload +
                       "' is not implemented here; this executable runs: " + names);
    }
}

} // namespace benchref
