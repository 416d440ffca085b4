// layernorm: each row of a float32 matrix in(x, y) (x the column, extent N; y the row, extent M)
// is normalised to zero mean and unit variance, then scaled and shifted per column:
//   out(x, y) = (in(x, y) - mean(y)) / sqrt(var(y) + 1e-5) * gamma(x) + beta(x)
// The variance is computed in a second pass over the centred values (stable for large means).
#include <cmath>

#include "apps/Builtin.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

constexpr int reduction_lanes = 64; // four zmm accumulators
constexpr float epsilon = 1e-5f;

OperatorInstance make_layernorm(const std::vector<int64_t> &shape) {
    int M = shape_extent("layernorm", "M", shape[0]);
    int N = shape_extent("layernorm", "N", shape[1]);
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam in(Float(32), 2, "in"), gamma(Float(32), 1, "gamma"), beta(Float(32), 1, "beta");
    Var x("x"), y("y");
    RowReduction sum = row_reduction(
        "row_sum", [&](const Expr &cx, const Expr &cy) { return in(cx, cy); }, N, reduction_lanes,
        false);
    Func mean("mean"), rstd("rstd"), out("layernorm");
    mean(y) = sum.total(y) * (1.f / float(N));
    RowReduction sq = row_reduction(
        "row_sq",
        [&](const Expr &cx, const Expr &cy) {
            Expr d = in(cx, cy) - mean(cy);
            return d * d;
        },
        N, reduction_lanes, false);
    rstd(y) = 1.f / sqrt(sq.total(y) * (1.f / float(N)) + epsilon);
    out(x, y) = (in(x, y) - mean(y)) * rstd(y) * gamma(x) + beta(x);
    inst.inputs = {in, gamma, beta};
    inst.input_data = {random_buffer(Float(32), {N, M}, "in", 21, -4, 6),
                       random_buffer(Float(32), {N}, "gamma", 22, 0.5, 1.5),
                       random_buffer(Float(32), {N}, "beta", 23, -1, 1)};
    inst.output = out;
    inst.output_extents = {N, M};
    inst.stages = {sum.partial, sum.total, mean, sq.partial, sq.total, rstd};
    return inst;
}

// Tasks of 16 rows (row_tasks), each row's 16 KB in L1 for the three passes (sum, centred
// squares, output). The reductions keep four zmm accumulators.
void schedule_layernorm(OperatorInstance &inst, GeneratorContext &ctx) {
    const Target &target = ctx.target();
    if (target.has_gpu())
        return schedule_row_reductions_gpu(inst, {0, 3}, {1, 2, 4, 5}, -1, row_threads_knob(ctx));
    int N = int(inst.shape[1]);
    int vec = std::max(1, target.vector_bits / 32);
    Func out = inst.output;
    Var x("x"), l("l");
    out.bound(x, 0, N).vectorize(x, std::min(vec, N)); // constant row loops
    // Outputs larger than the caches are streamed past them (no read for ownership of the
    // lines written): 4096 x 4096, 2 threads, 6.9 -> 4.5 ms.
    stream_large_output(out, int64_t(4) * N * inst.shape[0]);
    Var y = row_tasks(out, inst.shape[0]);
    const char *rvars[] = {"row_sum_b.x", "row_sq_b.x"};
    int which = 0;
    for (int s : {0, 3}) {
        Func p = inst.stages[size_t(s)];
        p.compute_at(out, y).vectorize(l, vec);
        const char *b = rvars[which++];
        if (p.num_updates() == 0) continue; // N < 64: no full block
        p.update(0).reorder(l, VarOrRVar(b, true)).vectorize(l, vec).unroll(l);
    }
    for (int s : {1, 2, 4, 5}) {
        inst.stages[size_t(s)].compute_at(out, y);
    }
}

BufferBase reference_layernorm(const OperatorInstance &inst) {
    int M = int(inst.shape[0]), N = int(inst.shape[1]);
    const float *in = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
    const float *gamma = reinterpret_cast<const float *>(inst.input_data[1].raw_data());
    const float *beta = reinterpret_cast<const float *>(inst.input_data[2].raw_data());
    BufferBase out(Float(32), {N, M}, "layernorm");
    float *o = reinterpret_cast<float *>(out.raw_data());
    for (int y = 0; y < M; y++) {
        const float *row = in + size_t(y) * N;
        double s = 0;
        for (int x = 0; x < N; x++)
            s += row[x];
        double mean = s / N, sq = 0;
        for (int x = 0; x < N; x++)
            sq += (row[x] - mean) * (row[x] - mean);
        double rstd = 1.0 / std::sqrt(sq / N + double(epsilon));
        for (int x = 0; x < N; x++) {
            o[size_t(y) * N + x] = float((row[x] - mean) * rstd * gamma[x] + beta[x]);
        }
    }
    return out;
}

} // namespace

Operator layernorm_operator() {
    Operator op;
    op.name = "layernorm";
    op.description = "per-row mean/variance normalisation with gamma and beta, float32";
    op.shape_names = {"M", "N"};
    op.default_shape = {4096, 4096};
    op.make = make_layernorm;
    op.reference = reference_layernorm;
    // One read and one write of the matrix (gamma and beta are small and stay in cache).
    op.work = [](const std::vector<int64_t> &s) { return 2.0 * 4.0 * double(s[0]) * double(s[1]); };
    op.work_unit = "GB/s";
    // Outputs are O(1) (normalised values in a few standard deviations, times gamma ~ 1).
    // The float mean and variance differ from the double reference by ~sqrt(N) * eps relative
    // (~4e-6 at N = 4096), the rest is a handful of float roundings: errors of ~1e-5 on values
    // up to ~3, so 1e-4 has margin while a wrong mean, variance or column is off by 1e-2 or more.
    op.tolerance = 1e-4;
    define_by_generator(op, schedule_layernorm);
    return op;
}

} // namespace kiln::apps
