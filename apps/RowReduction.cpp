#include <limits>
#include <string>

#include "apps/Builtin.h"
#include "lang/IROperator.h"

namespace kiln::apps {

RowReduction row_reduction(const std::string &name, const std::function<Expr(Expr, Expr)> &value,
                           int n, int lanes, bool is_max) {
    Var l("l"), y("y");
    Func partial(name + "_partial"), total(name);
    // The lowest finite float rather than -infinity: every input of the operators is finite.
    Expr init = is_max ? Expr(std::numeric_limits<float>::lowest()) : Expr(0.f);
    auto combine = [&](const Expr &a, const Expr &b) { return is_max ? max(a, b) : a + b; };
    int blocks = n / lanes;
    partial(l, y) = init;
    if (blocks > 0) {
        RDom b(0, blocks, name + "_b");
        partial(l, y) = combine(partial(l, y), value(l + lanes * b, y));
    }
    RDom r(0, lanes, name + "_r");
    total(y) = init;
    total(y) = combine(total(y), partial(r, y));
    if (n % lanes) {
        RDom t(blocks * lanes, n % lanes, name + "_t");
        total(y) = combine(total(y), value(t, y));
    }
    return {partial, total};
}

} // namespace kiln::apps

namespace kiln::apps {

void schedule_row_reductions_gpu(OperatorInstance &inst, const std::vector<int> &partials,
                                 const std::vector<int> &totals, int row_stage, int threads) {
    int N = int(inst.shape[1]);
    Func out = inst.output;
    Var x("x"), y("y"), l("l"), xo("xo"), xi("xi");
    // The row length is known: constant loop extents and a constant shared row buffer.
    out.bound(x, 0, N)
        .split(x, xo, xi, threads, TailStrategy::GuardWithIf)
        .reorder(xi, xo, y)
        .gpu_blocks(y)
        .gpu_threads(xi);
    for (int p : partials) {
        Func f = inst.stages[size_t(p)];
        f.compute_at(out, y).store_in(MemoryType::GPUShared).gpu_threads(l);
        // The update's loops: the block RVar (serial, inside each thread) then l.
        if (f.num_updates() > 0) f.update(0).gpu_threads(l);
    }
    for (int t : totals)
        inst.stages[size_t(t)].compute_at(out, y);
    if (row_stage < 0) return;
    Func e = inst.stages[size_t(row_stage)];
    if (int64_t(N) * 4 > int64_t(32) * 1024) return; // inlined: recomputed where it is read
    // Thread xi computes x = xi, xi + threads, ...: neighbouring threads, neighbouring columns.
    e.compute_at(out, y)
        .store_in(MemoryType::GPUShared)
        .split(x, xo, xi, threads, TailStrategy::GuardWithIf)
        .reorder(xo, xi)
        .gpu_threads(xi);
}

int row_threads_knob(GeneratorContext &ctx) {
    const int threads = int(ctx.knob("threads", hand_first(128, powers_of_two(32, 1024))));
    ctx.constraint("threads <= device limit (" + std::to_string(ctx.gpu_max_threads_per_block()) +
                       ")",
                   threads <= ctx.gpu_max_threads_per_block());
    return threads;
}

Var row_tasks(Func out, int64_t rows) {
    Var y("y"), yo("yo"), yi("yi");
    out.split(y, yo, yi, halved_to_fit(16, rows)).parallel(yo);
    return yi;
}

} // namespace kiln::apps
