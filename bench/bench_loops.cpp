// bench_loops: every workload as the plain C++ loops a careful programmer writes without a library
// (compiled -O3 -march=native; threads with an OpenMP `parallel for` over rows or output channels).
// Protocol and workloads: bench_common.h.
#include <omp.h>

#include "bench/bench_common.h"

using namespace benchref;

namespace {

// i-k-j order: the inner loop runs along rows of B and C, so the compiler vectorizes it.
void matmul(const float *__restrict A, const float *__restrict B, float *__restrict C, int M, int N,
            int K) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        float *__restrict c = C + size_t(i) * N;
        for (int j = 0; j < N; j++)
            c[j] = 0.f;
        for (int k = 0; k < K; k++) {
            const float a = A[size_t(i) * K + k];
            const float *__restrict b = B + size_t(k) * N;
            for (int j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

// Direct NCHW convolution: per output channel, accumulate shifted input planes.
void conv2d(const float *__restrict in, const float *__restrict w, float *__restrict out, int C,
            int H, int W, int K) {
#pragma omp parallel for schedule(static)
    for (int k = 0; k < K; k++) {
        float *__restrict o = out + size_t(k) * H * W;
        for (size_t i = 0; i < size_t(H) * W; i++)
            o[i] = 0.f;
        for (int c = 0; c < C; c++) {
            const float *__restrict plane = in + size_t(c) * H * W;
            for (int ry = 0; ry < 3; ry++) {
                for (int rx = 0; rx < 3; rx++) {
                    const float wv = w[((size_t(k) * C + c) * 3 + ry) * 3 + rx];
                    int y0 = std::max(0, 1 - ry), y1 = std::min(H, H + 1 - ry);
                    int x0 = std::max(0, 1 - rx), x1 = std::min(W, W + 1 - rx);
                    for (int y = y0; y < y1; y++) {
                        const float *__restrict irow = plane + size_t(y + ry - 1) * W + (rx - 1);
                        float *__restrict orow = o + size_t(y) * W;
                        for (int x = x0; x < x1; x++)
                            orow[x] += wv * irow[x];
                    }
                }
            }
        }
    }
}

// Separable blur without a border ((W-2) x (H-2) outputs): each thread owns a band of output
// rows and keeps the last three rows of blur_x in a ring, so blur_x is computed once per input
// row of the band (plus two rows at the band's top). T is float or uint16_t.
template <typename T>
void blur(const T *__restrict in, T *__restrict out, int W, int H) {
    const int OW = W - 2, OH = H - 2;
    const int nt = omp_get_max_threads();
#pragma omp parallel num_threads(nt)
    {
        std::vector<T> rows(size_t(3) * OW);
        auto blur_x_row = [&](int y, T *__restrict dst) {
            const T *__restrict r = in + size_t(y) * W;
            for (int x = 0; x < OW; x++)
                dst[x] = third(T(T(r[x] + r[x + 1]) + r[x + 2]));
        };
        const int tid = omp_get_thread_num();
        const int y_begin = int(int64_t(OH) * tid / nt), y_end = int(int64_t(OH) * (tid + 1) / nt);
        if (y_begin < y_end) {
            blur_x_row(y_begin, &rows[0]);
            blur_x_row(y_begin + 1, &rows[size_t(OW)]);
            for (int y = y_begin; y < y_end; y++) {
                const T *__restrict r0 = &rows[size_t((y - y_begin) % 3) * OW];
                const T *__restrict r1 = &rows[size_t((y - y_begin + 1) % 3) * OW];
                T *__restrict r2 = &rows[size_t((y - y_begin + 2) % 3) * OW];
                blur_x_row(y + 2, r2);
                T *__restrict o = out + size_t(y) * OW;
                for (int x = 0; x < OW; x++)
                    o[x] = third(T(T(r0[x] + r1[x]) + r2[x]));
            }
        }
    }
}

void softmax(const float *__restrict in, float *__restrict out, int W, int H) {
#pragma omp parallel for schedule(static)
    for (int y = 0; y < H; y++) {
        const float *__restrict r = in + size_t(y) * W;
        float *__restrict o = out + size_t(y) * W;
        float m = -INFINITY;
        for (int x = 0; x < W; x++)
            m = std::max(m, r[x]);
        float s = 0.f;
        for (int x = 0; x < W; x++) {
            o[x] = std::exp(r[x] - m);
            s += o[x];
        }
        const float inv = 1.f / s;
        for (int x = 0; x < W; x++)
            o[x] *= inv;
    }
}

void layernorm(const float *__restrict in, const float *__restrict gamma,
               const float *__restrict beta, float *__restrict out, int W, int H) {
#pragma omp parallel for schedule(static)
    for (int y = 0; y < H; y++) {
        const float *__restrict r = in + size_t(y) * W;
        float *__restrict o = out + size_t(y) * W;
        float s = 0.f;
        for (int x = 0; x < W; x++)
            s += r[x];
        const float mean = s / float(W);
        float sq = 0.f;
        for (int x = 0; x < W; x++)
            sq += (r[x] - mean) * (r[x] - mean);
        const float rstd = 1.f / std::sqrt(sq / float(W) + 1e-5f);
        for (int x = 0; x < W; x++)
            o[x] = (r[x] - mean) * rstd * gamma[x] + beta[x];
    }
}

} // namespace

int main(int argc, char **argv) {
    const std::string impl = "loops";
    const std::vector<std::string> supported = {"matmul",   "conv2d",  "blur",
                                                "blur_u16", "softmax", "layernorm"};
    Options o = parse_args(impl, argc, argv);
    if (o.info) {
        std::printf("plain C++ loops, OpenMP %d, compiled -O3 -march=native\n", _OPENMP);
        return 0;
    }
    if (o.list) {
        print_list(supported);
        return 0;
    }
    require_supported(impl, o, supported);
    omp_set_num_threads(o.threads);
    Problem p = make_problem(o.workload, o.shape);
    const auto &s = o.shape;
    Kernel k;
    if (o.workload == "matmul") {
        k.run = [&] {
            matmul(p.a.data(), p.b.data(), p.out.data(), int(s[0]), int(s[1]), int(s[2]));
        };
    } else if (o.workload == "conv2d") {
        k.run = [&] {
            conv2d(p.a.data(), p.b.data(), p.out.data(), int(s[1]), int(s[2]), int(s[3]),
                   int(s[4]));
        };
    } else if (o.workload == "blur") {
        k.run = [&] { blur<float>(p.a.data(), p.out.data(), int(s[0]), int(s[1])); };
    } else if (o.workload == "blur_u16") {
        k.run = [&] { blur<uint16_t>(p.a16.data(), p.out16.data(), int(s[0]), int(s[1])); };
    } else if (o.workload == "softmax") {
        k.run = [&] { softmax(p.a.data(), p.out.data(), int(s[1]), int(s[0])); };
    } else {
        k.run = [&] {
            layernorm(p.a.data(), p.b.data(), p.c.data(), p.out.data(), int(s[1]), int(s[0]));
        };
    }
    return measure_and_print(impl, o, p, k);
}
