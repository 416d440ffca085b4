// bench_halide: Halide 14 (Debian's libhalide14) versions of the workloads with hand schedules
// modeled on Halide's own apps, JIT-compiled for the host target at startup (compile time is not
// measured). Threads: HL_NUM_THREADS, set before Halide's thread pool starts.
//   matmul   register-blocked: 3 vectors x 8 rows of C in registers, the K x 48 panel of B copied
//            per column panel (as in Halide's linear_algebra / matrix_multiplication schedules).
//   conv2d   apps/conv_layer's CPU schedule (4 x 5 tile of vector accumulators). That schedule
//            needs channels innermost, so, as for oneDNN, the NCHW input and OIHW weights are
//            rearranged (input zero-padded to (C, W+2, H+2), channels innermost; weights to
//            (K, 3, 3, C), K innermost) once OUTSIDE the timed region, and the (K, W, H) output is
//            rearranged back to NCHW for the check, also untimed.
//   blur     apps/blur's algorithm and CPU schedule: strips of rows in parallel, blur_x slid down
//   blur_u16 each strip (sliding window), vectorized along x.
//   softmax  Halide 21's schedule (its Python package's apps): tasks of 16 rows; per row,
//            vectorized max and sum (rfactor into four vector accumulators), exp stored per row.
//   layernorm the same structure: tasks of 16 rows, the row sum and the sum of centred squares
//            rfactored into vector accumulators, the output vectorized.
// Protocol and workloads: bench_common.h.
#include <Halide.h>

#include "bench/bench_common.h"

using namespace benchref;
using namespace Halide;

namespace {

/// Whether /proc/cpuinfo lists a CPU flag.
bool cpu_has_flag(const std::string &flag) {
    FILE *f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, "flags", 5) != 0) continue;
        std::istringstream ss(line);
        std::string w;
        while (ss >> w)
            found |= w == flag;
        break;
    }
    std::fclose(f);
    return found;
}

/// The host target. Halide 14 reports AMD Zen 4 as avx512_sapphirerapids, which lets it emit
/// AVX-VNNI (VEX) instructions that Zen 4 lacks (an illegal instruction in the u16 blur), so that
/// feature is dropped when the CPU does not list avx_vnni.
Target host_target() {
    Target t = get_host_target();
    if (t.has_feature(Target::AVX512_SapphireRapids) && !cpu_has_flag("avx_vnni")) {
        t = t.without_feature(Target::AVX512_SapphireRapids);
    }
    return t;
}

int vector_lanes(const Target &t, int bytes) {
    return t.natural_vector_size(bytes == 4 ? Float(32) : UInt(16));
}

Kernel make_matmul(Problem &p, const Target &t) {
    const int M = int(p.shape[0]), N = int(p.shape[1]), K = int(p.shape[2]);
    const int vec = vector_lanes(t, 4);
    auto A = std::make_shared<Buffer<float>>(p.a.data(), K, M);   // A(k, i) = A[i][k]
    auto B = std::make_shared<Buffer<float>>(p.b.data(), N, K);   // B(j, k) = B[k][j]
    auto C = std::make_shared<Buffer<float>>(p.out.data(), N, M); // C(j, i) = C[i][j]

    Var x("x"), y("y");
    RDom k(0, K, "k");
    Func Bp("B_panel"), prod("prod"), out("C");
    Bp(x, y) = (*B)(x, y);
    prod(x, y) = 0.f;
    prod(x, y) += (*A)(k, y) * Bp(x, k);
    out(x, y) = prod(x, y);

    const int tile_x = std::min(3 * vec, N), tile_y = std::min(8, M);
    const int lanes = std::min(vec, tile_x);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    out.tile(x, y, xo, yo, xi, yi, tile_x, tile_y)
        .reorder(xi, yi, yo, xo)
        .vectorize(xi, lanes)
        .unroll(yi)
        .parallel(xo);
    Bp.compute_at(out, xo).vectorize(x, lanes);
    prod.compute_at(out, yo).vectorize(x, lanes).unroll(x).unroll(y);
    prod.update().reorder(x, y, k).vectorize(x, lanes).unroll(x).unroll(y);

    auto pipe = std::make_shared<Pipeline>(out);
    pipe->compile_jit(t);
    Kernel kern;
    kern.run = [pipe, A, B, C] { pipe->realize(*C); };
    kern.note =
        "tile " + std::to_string(tile_x) + "x" + std::to_string(tile_y) + ", packed B panel";
    return kern;
}

Kernel make_conv2d(Problem &p, const Target &t) {
    const int C = int(p.shape[1]), H = int(p.shape[2]), W = int(p.shape[3]), K = int(p.shape[4]);
    const int vec = vector_lanes(t, 4);
    // Untimed layout changes (see the file comment).
    auto in_t = std::make_shared<Buffer<float>>(C, W + 2, H + 2);
    in_t->fill(0.f);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                (*in_t)(c, x + 1, y + 1) = p.a[(size_t(c) * H + y) * W + x];
    auto w_t = std::make_shared<Buffer<float>>(K, 3, 3, C);
    for (int k = 0; k < K; k++)
        for (int c = 0; c < C; c++)
            for (int ry = 0; ry < 3; ry++)
                for (int rx = 0; rx < 3; rx++)
                    (*w_t)(k, rx, ry, c) = p.b[((size_t(k) * C + c) * 3 + ry) * 3 + rx];
    auto out_t = std::make_shared<Buffer<float>>(K, W, H);

    ImageParam input(Float(32), 3, "input"), filter(Float(32), 4, "filter");
    Var x("x"), y("y"), c("c");
    Func conv("conv"), out("out");
    RDom r(0, C, 0, 3, 0, 3);
    conv(c, x, y) = 0.f;
    conv(c, x, y) += filter(c, r.y, r.z, r.x) * input(r.x, x + r.y, y + r.z);
    out(c, x, y) = conv(c, x, y);

    out.bound(c, 0, K).bound(x, 0, W).bound(y, 0, H);
    input.dim(0).set_bounds(0, C).set_stride(1);
    input.dim(1).set_bounds(0, W + 2).set_stride(C);
    input.dim(2).set_bounds(0, H + 2).set_stride(C * (W + 2));
    filter.dim(0).set_bounds(0, K).set_stride(1);
    filter.dim(1).set_bounds(0, 3).set_stride(K);
    filter.dim(2).set_bounds(0, 3).set_stride(K * 3);
    filter.dim(3).set_bounds(0, C).set_stride(K * 9);

    // apps/conv_layer, CPU with 32 vector registers: a 4 x 5 tile of accumulators.
    int tile_w = 4, tile_h = 5;
    while (tile_w > 1 && vec * tile_w > K)
        tile_w /= 2;
    tile_h = std::min(tile_h, W);
    const int lanes = std::min(vec, K);
    Var co("co"), ci("ci"), xo("xo"), xi("xi");
    out.split(c, co, ci, lanes * tile_w)
        .split(x, xo, xi, tile_h)
        .reorder(ci, xi, xo, y, co)
        .vectorize(ci, lanes)
        .unroll(ci)
        .unroll(xi)
        .parallel(y)
        .parallel(co);
    conv.compute_at(out, xo)
        .vectorize(c, lanes)
        .unroll(c)
        .unroll(x)
        .unroll(y)
        .update()
        .reorder(c, x, y, r.x, r.y, r.z)
        .vectorize(c, lanes)
        .unroll(c)
        .unroll(x)
        .unroll(y)
        .unroll(r.x, 2);
    filter.in().compute_at(conv, r.x).vectorize(_0, lanes).unroll(_0).unroll(_3);
    input.in().compute_at(conv, x).unroll(_0);

    input.set(*in_t);
    filter.set(*w_t);
    auto pipe = std::make_shared<Pipeline>(out);
    pipe->compile_jit(t);
    Kernel kern;
    kern.run = [pipe, out_t, in_t, w_t] { pipe->realize(*out_t); };
    float *dst = p.out.data();
    kern.finish = [out_t, dst, K, H, W] {
        for (int k = 0; k < K; k++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    dst[(size_t(k) * H + y) * W + x] = (*out_t)(k, x, y);
    };
    kern.note = "conv_layer schedule, channels-innermost layouts, rearrangement untimed";
    return kern;
}

template <typename T>
Kernel make_blur(const T *in_data, T *out_data, int W, int H, const Target &t) {
    const bool is_u16 = std::is_same_v<T, uint16_t>;
    const int vec = vector_lanes(t, int(sizeof(T)));
    const int OW = W - 2, OH = H - 2;
    auto in = std::make_shared<Buffer<T>>(const_cast<T *>(in_data), W, H);
    auto outb = std::make_shared<Buffer<T>>(out_data, OW, OH);
    ImageParam input(type_of<T>(), 2, "input");
    Var x("x"), y("y");
    Func bx("blur_x"), by("blur_y");
    // apps/blur's algorithm (no border), with kiln's arithmetic: float sums times 1/3, uint16
    // sums divided by 3.
    auto third = [&](Expr e) { return is_u16 ? e / cast<uint16_t>(3) : e * (1.f / 3.f); };
    bx(x, y) = third(input(x, y) + input(x + 1, y) + input(x + 2, y));
    by(x, y) = third(bx(x, y) + bx(x, y + 1) + bx(x, y + 2));
    // apps/blur's CPU schedule (strips of rows, blur_x slid down each strip), at this CPU's
    // vector width.
    const int strip = std::min(32, OH);
    Var yi("yi");
    by.split(y, y, yi, strip).parallel(y).vectorize(x, std::min(vec, OW));
    bx.store_at(by, y).compute_at(by, yi).vectorize(x, std::min(vec, OW));
    input.set(*in);
    auto pipe = std::make_shared<Pipeline>(by);
    pipe->compile_jit(t);
    Kernel kern;
    kern.run = [pipe, in, outb] { pipe->realize(*outb); };
    kern.note = "apps/blur schedule, strips of " + std::to_string(strip) + " rows";
    return kern;
}

/// Splits a row reduction's update into 4 * lanes partial results (rfactor) kept in four vector
/// accumulators, computed at `at` of `consumer`.
void vectorize_reduction(Func f, const RDom &r, Func consumer, const Var &at, int lanes) {
    Var u("u");
    RVar ro("ro"), ri("ri");
    Func partial = f.update().split(r.x, ro, ri, 4 * lanes).rfactor(ri, u);
    partial.compute_at(consumer, at).vectorize(u, lanes).unroll(u);
    partial.update().vectorize(u, lanes).unroll(u);
}

/// Halide 21's softmax and layernorm schedules: tasks of 16 rows, each row's reductions in vector
/// accumulators (when the row splits into four vectors).
constexpr int rows_per_task = 16;

Kernel make_softmax(Problem &p, const Target &t) {
    const int M = int(p.shape[0]), N = int(p.shape[1]);
    const int vec = vector_lanes(t, 4);
    auto in = std::make_shared<Buffer<float>>(p.a.data(), N, M);
    auto outb = std::make_shared<Buffer<float>>(p.out.data(), N, M);
    ImageParam input(Float(32), 2, "input");
    Var x("x"), y("y"), yo("yo"), yi("yi");
    RDom r(0, N, "r");
    Func mx("mx"), e("e"), sum("sum"), out("softmax");
    mx(y) = Float(32).min();
    mx(y) = max(mx(y), input(r, y));
    e(x, y) = exp(input(x, y) - mx(y));
    sum(y) = 0.f;
    sum(y) += e(r, y);
    out(x, y) = e(x, y) * (1.f / sum(y));

    const int lanes = std::min(vec, N);
    out.split(y, yo, yi, rows_per_task, TailStrategy::GuardWithIf).parallel(yo).vectorize(x, lanes);
    e.compute_at(out, yi).vectorize(x, lanes);
    mx.compute_at(out, yi);
    sum.compute_at(out, yi);
    if (N % (4 * lanes) == 0) {
        vectorize_reduction(mx, r, out, yi, lanes);
        vectorize_reduction(sum, r, out, yi, lanes);
    }
    input.set(*in);
    auto pipe = std::make_shared<Pipeline>(out);
    pipe->compile_jit(t);
    Kernel kern;
    kern.run = [pipe, in, outb] { pipe->realize(*outb); };
    kern.note = "tasks of 16 rows, rfactor vector reductions";
    return kern;
}

Kernel make_layernorm(Problem &p, const Target &t) {
    const int M = int(p.shape[0]), N = int(p.shape[1]);
    const int vec = vector_lanes(t, 4);
    auto in = std::make_shared<Buffer<float>>(p.a.data(), N, M);
    auto g = std::make_shared<Buffer<float>>(p.b.data(), N);
    auto b = std::make_shared<Buffer<float>>(p.c.data(), N);
    auto outb = std::make_shared<Buffer<float>>(p.out.data(), N, M);
    ImageParam input(Float(32), 2, "input"), gamma(Float(32), 1, "gamma"),
        beta(Float(32), 1, "beta");
    Var x("x"), y("y"), yo("yo"), yi("yi");
    RDom r(0, N, "r");
    Func sum("sum"), mean("mean"), sq("sq"), rstd("rstd"), out("layernorm");
    sum(y) = 0.f;
    sum(y) += input(r, y);
    mean(y) = sum(y) * (1.f / float(N));
    sq(y) = 0.f;
    Expr d = input(r, y) - mean(y);
    sq(y) += d * d;
    rstd(y) = 1.f / sqrt(sq(y) * (1.f / float(N)) + 1e-5f);
    out(x, y) = (input(x, y) - mean(y)) * rstd(y) * gamma(x) + beta(x);

    const int lanes = std::min(vec, N);
    out.split(y, yo, yi, rows_per_task, TailStrategy::GuardWithIf).parallel(yo).vectorize(x, lanes);
    for (Func f : {sum, mean, sq, rstd})
        f.compute_at(out, yi);
    if (N % (4 * lanes) == 0) {
        vectorize_reduction(sum, r, out, yi, lanes);
        vectorize_reduction(sq, r, out, yi, lanes);
    }
    input.set(*in);
    gamma.set(*g);
    beta.set(*b);
    auto pipe = std::make_shared<Pipeline>(out);
    pipe->compile_jit(t);
    Kernel kern;
    kern.run = [pipe, in, g, b, outb] { pipe->realize(*outb); };
    kern.note = "tasks of 16 rows, rfactor vector reductions";
    return kern;
}

} // namespace

int main(int argc, char **argv) {
    const std::string impl = "halide";
    const std::vector<std::string> supported = {"matmul",   "conv2d",  "blur",
                                                "blur_u16", "softmax", "layernorm"};
    Options o = parse_args(impl, argc, argv);
    if (o.info) {
        std::printf("Halide 14 (Debian libhalide14), host target %s\n",
                    host_target().to_string().c_str());
        return 0;
    }
    if (o.list) {
        print_list(supported);
        return 0;
    }
    require_supported(impl, o, supported);
    // Halide's JIT runtime reads HL_NUM_THREADS when its thread pool starts (first parallel run).
    setenv("HL_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
    Problem p = make_problem(o.workload, o.shape);
    const Target t = host_target();
    Kernel k;
    try {
        if (o.workload == "matmul")
            k = make_matmul(p, t);
        else if (o.workload == "conv2d")
            k = make_conv2d(p, t);
        else if (o.workload == "blur")
            k = make_blur<float>(p.a.data(), p.out.data(), int(o.shape[0]), int(o.shape[1]), t);
        else if (o.workload == "blur_u16")
            k = make_blur<uint16_t>(p.a16.data(), p.out16.data(), int(o.shape[0]), int(o.shape[1]),
                                    t);
        else if (o.workload == "softmax")
            k = make_softmax(p, t);
        else
            k = make_layernorm(p, t);
    } catch (const Halide::Error &e) {
        fail(impl, std::string("Halide error: ") + e.what());
    }
    return measure_and_print(impl, o, p, k);
}
