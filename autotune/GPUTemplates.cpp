// The GPU templates (autotune/Templates.h, gpu_template_space): for a target with a GPU API, each
// operator's space is the GPU hand schedule (apps/*.cpp, schedule_*_gpu) with its numbers and
// choices as knobs, so the hand schedule is one point of the space. Constraints keep every point
// inside the device's limits (threads per block, shared memory per block; kiln's own portable
// limits, 1024 threads and 48 KiB, too) and inside the output's extents (ShiftInwards tiles).
#include <algorithm>

#include "apps/Builtin.h"
#include "autotune/Templates.h"
#include "lang/Error.h"

namespace kiln::autotune {

namespace {

// Capitalised as the Var it stands for.
VarOrRVar V(const std::string &n) { // NOLINT(readability-identifier-naming)
    return VarOrRVar(n, false);
}

int64_t max_threads(const GpuLimits &l) {
    return std::min<int64_t>(l.max_threads_per_block, 1024);
}

int64_t max_shared(const GpuLimits &l) {
    return std::min<int64_t>(l.shared_memory_bytes, int64_t(48) * 1024);
}

std::string limit_text(const char *what, int64_t v) {
    return std::string(what) + " (" + std::to_string(v) + ")";
}

// matmul: a block computes a tile_j x tile_i tile of C, each thread an out_j x out_i group of
// outputs; prod, the block's sums, lives in shared memory; the K loop steps by k_step, and with
// b_shared the block first copies the k_step x tile_j panel of B (B_panel) into shared memory at
// each step, out_j values per thread (else B is read from global memory). A is always read from
// global memory: the algorithm has no stage of A to stage. With vec = 4 each thread's out_j
// columns are vectorized in groups of 4: the copy of B's panel, the sums and the output move
// float4 at a time (vload4/vstore4 in OpenCL, aligned float4 accesses in CUDA); the update then
// runs its K step outside a thread's rows.
SearchSpace matmul_gpu_template(const std::vector<int64_t> &shape, const GpuLimits &limits) {
    const int64_t M = shape[0], N = shape[1], K = shape[2];
    const int64_t threads = max_threads(limits), shared = max_shared(limits);
    SearchSpace s("matmul_gpu");
    s.add_powers_of_two("tile_j", 4, 128);
    s.add_powers_of_two("tile_i", 1, 128);
    s.add_powers_of_two("out_j", 1, 8);
    s.add_powers_of_two("out_i", 1, 8);
    s.add_powers_of_two("k_step", 2, 64);
    s.add_bool("b_shared");
    s.add_integers("vec", {1, 4});
    s.add_constraint("tile_j <= N and tile_i <= M", [M, N](const ConfigView &c) {
        return c.i("tile_j") <= std::max<int64_t>(N, 4) && c.i("tile_i") <= M;
    });
    s.add_constraint("out_j <= tile_j and out_i <= tile_i", [](const ConfigView &c) {
        return c.i("out_j") <= c.i("tile_j") && c.i("out_i") <= c.i("tile_i");
    });
    s.add_constraint("out_j % vec == 0",
                     [](const ConfigView &c) { return c.i("out_j") % c.i("vec") == 0; });
    s.add_constraint("k_step <= K",
                     [K](const ConfigView &c) { return c.i("k_step") <= std::max<int64_t>(K, 2); });
    s.add_constraint(limit_text("threads per block <= device limit", threads),
                     [threads](const ConfigView &c) {
                         int64_t y = c.i("tile_i") / c.i("out_i");
                         if (c.b("b_shared")) y = std::max(y, c.i("k_step"));
                         return c.i("tile_j") / c.i("out_j") * y <= threads;
                     });
    s.add_constraint(limit_text("shared memory per block <= device limit", shared),
                     [shared](const ConfigView &c) {
                         int64_t bytes = c.i("tile_j") * c.i("tile_i") * 4;
                         if (c.b("b_shared")) bytes += c.i("tile_j") * c.i("k_step") * 4;
                         return bytes <= shared;
                     });
    s.set_apply([](apps::OperatorInstance &inst, const ConfigView &c) {
        Func C = inst.output, B_panel = inst.stages.at(0), prod = inst.stages.at(1);
        VarOrRVar ko("k.x_o", true), ki("k.x_i", true);
        int out_j = int(c.i("out_j")), out_i = int(c.i("out_i")), vec = int(c.i("vec"));
        // With vec > 1, jr (a thread's out_j columns) splits into jr (groups) and jv (the
        // vectorized lanes of a group), innermost.
        auto columns = [&](Stage s, const VarOrRVar &j) -> Stage {
            s.split(j, V("jt"), V("jr"), out_j);
            if (vec > 1) s.split(V("jr"), V("jr"), V("jv"), vec);
            return s;
        };
        auto vectorize = [&](Stage s) {
            if (vec > 1) s.vectorize(V("jv"));
        };
        C.tile(V("j"), V("i"), V("jo"), V("io"), V("ji"), V("ii"), int(c.i("tile_j")),
               int(c.i("tile_i")));
        Stage c_stage = columns(Stage(C.function(), 0), V("ji"));
        c_stage.split(V("ii"), V("it"), V("ir"), out_i);
        if (vec > 1)
            c_stage.reorder(V("jv"), V("jr"), V("ir"), V("jt"), V("it"), V("jo"), V("io"));
        else
            c_stage.reorder(V("jr"), V("ir"), V("jt"), V("it"), V("jo"), V("io"));
        c_stage.gpu_blocks(V("jo"), V("io")).gpu_threads(V("jt"), V("it"));
        vectorize(c_stage);
        prod.compute_at(C, V("jo")).store_in(MemoryType::GPUShared);
        Stage pure = columns(Stage(prod.function(), 0), V("j"));
        pure.split(V("i"), V("it"), V("ir"), out_i);
        if (vec > 1)
            pure.reorder(V("jv"), V("jr"), V("ir"), V("jt"), V("it"));
        else
            pure.reorder(V("jr"), V("ir"), V("jt"), V("it"));
        pure.gpu_threads(V("jt"), V("it"));
        vectorize(pure);
        Stage update = prod.update(0);
        update.split(VarOrRVar("k.x", true), ko, ki, int(c.i("k_step")));
        columns(update, V("j")).split(V("i"), V("it"), V("ir"), out_i);
        if (vec > 1)
            update.reorder(V("jv"), V("jr"), V("ir"), ki, V("jt"), V("it"), ko);
        else
            update.reorder(ki, V("jr"), V("ir"), V("jt"), V("it"), ko);
        update.gpu_threads(V("jt"), V("it"));
        vectorize(update);
        if (c.b("b_shared")) {
            B_panel.compute_at(prod, ko).store_in(MemoryType::GPUShared);
            Stage copy = columns(Stage(B_panel.function(), 0), V("j"));
            if (vec > 1)
                copy.reorder(V("jv"), V("jr"), V("jt"), V("kv"));
            else
                copy.reorder(V("jr"), V("jt"), V("kv"));
            copy.gpu_threads(V("jt"), V("kv"));
            vectorize(copy);
        }
    });
    return s;
}

// blur and blur_u16: a block per tile_x x tile_y tile of the output, a thread per output; with
// blur_x_at "shared" the block first computes its tile of blur_x (two rows taller) into shared
// memory, a thread per point; "inline" recomputes blur_x in each output's thread.
SearchSpace blur_gpu_template(const apps::Operator &op, const std::vector<int64_t> &shape,
                              const GpuLimits &limits) {
    const int64_t W = shape[0] - 2, H = shape[1] - 2;
    const int64_t threads = max_threads(limits), shared = max_shared(limits);
    const int64_t bytes = op.name == "blur_u16" ? 2 : 4;
    SearchSpace s(op.name + "_gpu");
    s.add_powers_of_two("tile_x", 4, 256);
    s.add_powers_of_two("tile_y", 1, 64);
    s.add_choice("blur_x_at", {"shared", "inline"});
    s.add_constraint("tile_x <= W and tile_y <= H", [W, H](const ConfigView &c) {
        return c.i("tile_x") <= std::max<int64_t>(W, 4) && c.i("tile_y") <= std::max<int64_t>(H, 1);
    });
    s.add_constraint(limit_text("threads per block <= device limit", threads),
                     [threads](const ConfigView &c) {
                         int64_t rows = c.i("tile_y") + (c.s("blur_x_at") == "shared" ? 2 : 0);
                         return c.i("tile_x") * rows <= threads;
                     });
    s.add_constraint(limit_text("shared memory per block <= device limit", shared),
                     [shared, bytes](const ConfigView &c) {
                         return c.s("blur_x_at") != "shared" ||
                                c.i("tile_x") * (c.i("tile_y") + 2) * bytes <= shared;
                     });
    s.set_apply([](apps::OperatorInstance &inst, const ConfigView &c) {
        Func blur_y = inst.output, blur_x = inst.stages.at(0);
        blur_y.gpu_tile(V("x"), V("y"), V("xo"), V("yo"), V("xi"), V("yi"), int(c.i("tile_x")),
                        int(c.i("tile_y")));
        if (c.s("blur_x_at") == "shared")
            blur_x.compute_at(blur_y, V("xo"))
                .store_in(MemoryType::GPUShared)
                .gpu_threads(V("x"), V("y"));
    });
    return s;
}

// softmax and layernorm: a block per row with `threads` threads across it; each reduction's 64
// partial results (apps/Builtin.h, row_reduction) are a cross-thread step through shared memory,
// combined at block level (apps::schedule_row_reductions_gpu).
SearchSpace row_gpu_template(const apps::Operator &op, const GpuLimits &limits) {
    const int64_t threads = max_threads(limits);
    SearchSpace s(op.name + "_gpu");
    s.add_powers_of_two("threads", 32, 1024);
    s.add_constraint(limit_text("threads <= device limit", threads),
                     [threads](const ConfigView &c) { return c.i("threads") <= threads; });
    bool softmax = op.name == "softmax";
    s.set_apply([softmax](apps::OperatorInstance &inst, const ConfigView &c) {
        int t = int(c.i("threads"));
        if (softmax)
            apps::schedule_row_reductions_gpu(inst, {0, 3}, {1, 4, 5}, 2, t);
        else
            apps::schedule_row_reductions_gpu(inst, {0, 3}, {1, 2, 4, 5}, -1, t);
    });
    return s;
}

// conv2d: a block per tile_x x tile_y pixels and tile_co output channels, a thread per pixel
// holding its tile_co sums in a private array (conv computed per thread); the padded input and
// the weights are read from global memory (the reduction's loops stay in the algorithm's
// order: the update's RVars may not be reordered). unroll_co unrolls the channel loop, so the
// sums can live in registers.
SearchSpace conv2d_gpu_template(const std::vector<int64_t> &shape, const GpuLimits &limits) {
    const int64_t CO = shape[1], H = shape[2], W = shape[3];
    const int64_t threads = max_threads(limits);
    SearchSpace s("conv2d_gpu");
    s.add_powers_of_two("tile_x", 1, 64);
    s.add_powers_of_two("tile_y", 1, 32);
    s.add_powers_of_two("tile_co", 1, 32);
    s.add_bool("unroll_co");
    s.add_constraint("tile_x <= W, tile_y <= H and tile_co <= C_out",
                     [W, H, CO](const ConfigView &c) {
                         return c.i("tile_x") <= W && c.i("tile_y") <= H && c.i("tile_co") <= CO;
                     });
    s.add_constraint(
        limit_text("threads per block <= device limit", threads),
        [threads](const ConfigView &c) { return c.i("tile_x") * c.i("tile_y") <= threads; });
    s.set_apply([](apps::OperatorInstance &inst, const ConfigView &c) {
        Func out = inst.output, conv = inst.stages.at(2);
        out.split(V("x"), V("xo"), V("xi"), int(c.i("tile_x")))
            .split(V("y"), V("yo"), V("yi"), int(c.i("tile_y")))
            .split(V("co"), V("coo"), V("coi"), int(c.i("tile_co")))
            .reorder(V("coi"), V("xi"), V("yi"), V("xo"), V("yo"), V("coo"))
            .gpu_blocks(V("xo"), V("yo"), V("coo"))
            .gpu_threads(V("xi"), V("yi"));
        conv.compute_at(out, V("xi"));
        Stage up = conv.update(0).reorder(V("co"), V("x"), V("y"), VarOrRVar("r.x", true),
                                          VarOrRVar("r.y", true), VarOrRVar("r.z", true));
        if (c.b("unroll_co")) {
            conv.unroll(V("co"));
            up.unroll(V("co"));
        }
    });
    return s;
}

} // namespace

std::optional<SearchSpace> gpu_template_space(const apps::Operator &op,
                                              const std::vector<int64_t> &shape,
                                              const GpuLimits &limits) {
    if (op.name == "matmul") return matmul_gpu_template(shape, limits);
    if (op.name == "blur" || op.name == "blur_u16") return blur_gpu_template(op, shape, limits);
    if (op.name == "softmax" || op.name == "layernorm") return row_gpu_template(op, limits);
    if (op.name == "conv2d") return conv2d_gpu_template(shape, limits);
    return std::nullopt;
}

} // namespace kiln::autotune
