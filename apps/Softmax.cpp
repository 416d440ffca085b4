// softmax: each row of a float32 matrix in(x, y) (x the column, extent N; y the row, extent M)
// becomes exp(in - max of the row) / sum of those exponentials. Subtracting the row's maximum
// keeps exp in range (numerically stable).
#include <cmath>

#include "apps/Builtin.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

constexpr int reduction_lanes = 64; // four zmm accumulators

OperatorInstance make_softmax(const std::vector<int64_t> &shape) {
    int M = shape_extent("softmax", "M", shape[0]);
    int N = shape_extent("softmax", "N", shape[1]);
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam in(Float(32), 2, "in");
    Var x("x"), y("y");
    RowReduction mx = row_reduction(
        "row_max", [&](const Expr &cx, const Expr &cy) { return in(cx, cy); }, N, reduction_lanes,
        true);
    Func e("e"), out("softmax");
    e(x, y) = exp(in(x, y) - mx.total(y));
    RowReduction total = row_reduction(
        "row_sum", [&](const Expr &cx, const Expr &cy) { return e(cx, cy); }, N, reduction_lanes,
        false);
    Func inv("inv");
    inv(y) = 1.f / total.total(y);
    out(x, y) = e(x, y) * inv(y);
    inst.inputs = {in};
    inst.input_data = {random_buffer(Float(32), {N, M}, "in", 11, -8, 8)};
    inst.output = out;
    inst.output_extents = {N, M};
    inst.stages = {mx.partial, mx.total, e, total.partial, total.total, inv};
    return inst;
}

// Tasks of 16 rows (row_tasks); each row (16 KB at N = 4096) stays in L1 while it is read for the
// maximum, exponentiated once into a row buffer, summed, and scaled. Reductions keep four
// independent vector accumulators (64 lanes) to hide the add latency.
void schedule_softmax(OperatorInstance &inst, GeneratorContext &ctx) {
    const Target &target = ctx.target();
    if (target.has_gpu())
        return schedule_row_reductions_gpu(inst, {0, 3}, {1, 4, 5}, 2, row_threads_knob(ctx));
    int N = int(inst.shape[1]);
    int vec = std::max(1, target.vector_bits / 32);
    Func out = inst.output;
    Func mx_partial = inst.stages[0], mx = inst.stages[1], e = inst.stages[2];
    Func sum_partial = inst.stages[3], sum = inst.stages[4], inv = inst.stages[5];
    Var x("x"), l("l");
    int lanes = std::min(vec, N);
    // The row length is known: constant loop extents, and the row of exponentials (16 KB at
    // N = 4096) lives on the stack instead of being allocated per row.
    out.bound(x, 0, N).vectorize(x, lanes);
    stream_large_output(out, int64_t(4) * N * inst.shape[0]);
    Var y = row_tasks(out, inst.shape[0]);
    for (Func p : {mx_partial, sum_partial}) {
        p.compute_at(out, y).vectorize(l, vec);
        if (p.num_updates() == 0) continue; // N < 64: no full block
        std::string b = p.name() == mx_partial.name() ? "row_max_b.x" : "row_sum_b.x";
        p.update(0).reorder(l, VarOrRVar(b, true)).vectorize(l, vec).unroll(l);
    }
    mx.compute_at(out, y);
    sum.compute_at(out, y);
    inv.compute_at(out, y);
    e.compute_at(out, y).vectorize(x, lanes);
}

BufferBase reference_softmax(const OperatorInstance &inst) {
    int M = int(inst.shape[0]), N = int(inst.shape[1]);
    const float *in = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
    BufferBase out(Float(32), {N, M}, "softmax");
    float *o = reinterpret_cast<float *>(out.raw_data());
    for (int y = 0; y < M; y++) {
        const float *row = in + size_t(y) * N;
        float m = row[0];
        for (int x = 1; x < N; x++)
            m = std::max(m, row[x]);
        double s = 0;
        for (int x = 0; x < N; x++)
            s += std::exp(double(row[x]) - m);
        for (int x = 0; x < N; x++)
            o[size_t(y) * N + x] = float(std::exp(double(row[x]) - m) / s);
    }
    return out;
}

} // namespace

Operator softmax_operator() {
    Operator op;
    op.name = "softmax";
    op.description = "numerically stable softmax of each row of a float32 matrix";
    op.shape_names = {"M", "N"};
    op.default_shape = {4096, 4096};
    op.make = make_softmax;
    op.reference = reference_softmax;
    // One read and one write of the matrix.
    op.work = [](const std::vector<int64_t> &s) { return 2.0 * 4.0 * double(s[0]) * double(s[1]); };
    op.work_unit = "GB/s";
    // Outputs lie in (0, 1] and max_relative_error compares them absolutely (|b| < 1). kiln's
    // exp is within a few ulp (codegen/VectorMath.h) and the row sum is a float sum in another
    // order than the double reference (64 lane partials of N / 64 terms): a relative error of a
    // few 1e-7 on outputs of at most ~0.05 at these inputs, so a few 1e-8 absolute. 1e-6 leaves
    // margin, yet an output off by more than ~0.5% of a typical value (1/N) ... 1/37 fails.
    op.tolerance = 1e-6;
    define_by_generator(op, schedule_softmax);
    return op;
}

} // namespace kiln::apps
