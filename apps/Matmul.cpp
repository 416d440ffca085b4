// matmul: C = A * B in float32, row-major. In kiln's x-first indexing a row-major matrix X[r][c]
// is X(c, r): A(k, i) is A[i][k] (dim 0 = k, extent K), B(j, k) is B[k][j] (dim 0 = j, extent N),
// and the output C(j, i) is C[i][j] (dim 0 = j, extent N; dim 1 = i, extent M).
#include <algorithm>
#include <cmath>

#include "apps/Builtin.h"
#include "lang/IROperator.h"
#include "runtime/kiln_runtime.h"

namespace kiln::apps {

namespace {

OperatorInstance make_matmul(const std::vector<int64_t> &shape) {
    int M = shape_extent("matmul", "M", shape[0]);
    int N = shape_extent("matmul", "N", shape[1]);
    int K = shape_extent("matmul", "K", shape[2]);
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam A(Float(32), 2, "A"), B(Float(32), 2, "B");
    Var j("j"), i("i"), kv("kv");
    RDom k(0, K, "k");
    // A is dense, K values per row (checked when the kernel runs): each of a tile's rows of A is
    // then a constant offset from one address. With the row pitch read at run time, LLVM
    // rebuilt the six row addresses with a chain of leas every k step (512^3 on the Intel Xeon,
    // interleaved: 1.80 -> 1.71 ms on one thread, 0.92 -> 0.88 on two; 1024^3 15.4 -> 14.1 and
    // 7.7 -> 6.9).
    A.dim(0).set_bounds(0, K);
    A.dim(1).set_stride(K);
    Func B_panel("B_panel"), prod("prod"), C("C");
    // A copy of B that a schedule can compute per panel of columns (packing, as BLAS does);
    // inlined, it is B itself.
    B_panel(j, kv) = B(j, kv);
    // One rounding per multiply-add (the fma intrinsic): FMA hardware where the target has it.
    prod(j, i) = 0.f;
    prod(j, i) = fma(A(k, i), B_panel(j, k), prod(j, i));
    C(j, i) = prod(j, i);
    // C is dense as well, N values per row: the tiles' stores index with the constant pitch
    // (one register fewer; no change measurable at 512^3 or 1000^3, the stores being once per
    // tile, outside the k loop).
    C.output_buffer().dim(0).set_bounds(0, N);
    C.output_buffer().dim(1).set_stride(N);
    inst.inputs = {A, B};
    inst.input_data = {random_buffer(Float(32), {K, M}, "A", 1, -1, 1),
                       random_buffer(Float(32), {N, K}, "B", 2, -1, 1)};
    inst.output = C;
    inst.output_extents = {N, M};
    inst.stages = {B_panel, prod};
    return inst;
}

// The register-blocked kernel, as in Halide's linear_algebra sgemm: each task owns a panel of
// 64 columns of C (AVX-512; 2 vectors elsewhere); it copies the K x 64 panel of B into a dense
// scratch buffer (B_panel, 256 KB at K = 1024: it stays in L2 and is read sequentially), then walks
// the rows in blocks of 6. A block is a 6 x 64 tile of C held in 24 zmm accumulators (prod,
// computed at the row block): for each k, four vector loads from B_panel, six broadcasts of A and
// 24 vfmadd231ps, k unrolled twice. Small shapes use smaller tiles so that the tiles fit inside
// the output. Without AVX-512 the tile is 8 rows x 2 vectors, and a narrow C (two such tiles
// wide) with K >= 1024 blocks K instead (schedule_matmul_k_blocked): tasks are row blocks of 8,
// prod holds both tiles of a row block, and each block of 256 values of k is walked over both
// tiles, so B's block stays in cache and A is read once.
// The GPU kernel (target.gpu != None), as knobs whose defaults are the hand schedule: a block
// computes a tile_j x tile_i (128 x 128) tile of C, each thread an out_j x out_i (8 x 8) group of
// outputs; prod, the block's tile of sums, is computed per block in MemoryType::Register, so each
// thread keeps its own out_j x out_i sums in registers (prod_registers, the default; unrolled
// loops, so every index is a constant), or lives in shared memory. The K loop steps by k_step
// (16); at each step the block's threads first copy the k_step x tile_j panel of B (B_panel,
// with b_shared, the default) into shared memory, and with a_shared the tile_i x k_step block of
// A too (A's wrapper A.in(prod)); then each thread walks the step's values of k, and for each of
// them multiplies its out_i values of A by its out_j values of B into its sums: the thread's
// tile is the innermost loop, so each value read is used out_j or out_i times (the outer
// product of Volkov and Demmel's sgemm). The sums' loops are rounded up, not guarded: prod's
// region is the block's tile, a multiple of a thread's group. A stays in global memory by
// default: the threads of a row of the block read the same values of A at once, which the L1
// cache serves. A thread's out_j columns are interleaved (interleave, the default): they lie
// tile_j / out_j columns apart, and neighbouring threads take neighbouring columns, so a warp's
// reads of B's panel hit 16 consecutive words (no bank conflict; a thread's 8 consecutive
// columns made every read of the panel a 4-way conflict), and its copy of the panel and its
// stores of C are coalesced. Measured on the H200 (bench/gpu_cuda.cpp --knobs, 2048^3 and
// 4096^3): 128 x 128 by 8 x 8 ran 0.82 and 6.3 ms, 64 x 64 by 4 x 4 1.00 and 7.8 ms, staging A 15%
// slower at 2048^3, vec = 4 half as fast, and k innermost per sum with a guard per multiply-add
// (this schedule before) 4.5 and 35 ms; on the H100, interleaved 0.68 and 5.3 ms against 0.83
// and 6.3 ms (0.51x cuBLAS from 0.42x), k_step 8 or 32, vec = 4, a_shared or 64-column tiles
// with it 9-53% slower. With vec = 4 each thread's out_j columns move in groups of 4:
// the copy of B's panel, the sums and the output move float4 at a time (vload4/vstore4 in
// OpenCL, aligned float4 accesses in CUDA). Small shapes halve the default tiles until they fit
// inside the output (and the groups with them). Constraints keep threads and shared memory per
// block within the device's limits.
void schedule_matmul_gpu(OperatorInstance &inst, GeneratorContext &ctx) {
    const int64_t M = inst.shape[0], N = inst.shape[1], K = inst.shape[2];
    const int64_t hand_j = halved_to_fit(128, N);
    const int64_t hand_i = halved_to_fit(128, M);
    const int tile_j = int(ctx.knob("tile_j", hand_first(hand_j, powers_of_two(4, 128))));
    const int tile_i = int(ctx.knob("tile_i", hand_first(hand_i, powers_of_two(1, 128))));
    const int out_j =
        int(ctx.knob("out_j", hand_first(std::min<int64_t>(8, hand_j), powers_of_two(1, 8))));
    const int out_i =
        int(ctx.knob("out_i", hand_first(std::min<int64_t>(8, hand_i), powers_of_two(1, 8))));
    const int k_step = int(ctx.knob("k_step", hand_first(16, powers_of_two(2, 64))));
    const bool b_shared = ctx.knob("b_shared", {1, 0}) != 0;
    const bool a_shared = ctx.knob("a_shared", {0, 1}) != 0;
    const int vec = int(ctx.knob("vec", {1, 4}));
    const bool prod_registers = ctx.knob("prod_registers", {1, 0}) != 0;
    const bool interleave = ctx.knob("interleave", {1, 0}) != 0;
    const int64_t threads = ctx.gpu_max_threads_per_block(), shared = ctx.gpu_shared_memory_bytes();
    ctx.constraint("tile_j <= N and tile_i <= M",
                   tile_j <= std::max<int64_t>(N, 4) && tile_i <= std::max<int64_t>(M, hand_i));
    ctx.constraint("out_j <= tile_j and out_i <= tile_i", out_j <= tile_j && out_i <= tile_i);
    ctx.constraint("out_j % vec == 0", out_j % vec == 0);
    ctx.constraint("k_step <= K", k_step <= std::max<int64_t>(K, 16));
    // The block: tile_j / out_j threads across, tile_i / out_i (or k_step, B's copy) down.
    const int64_t columns_of_threads = tile_j / out_j;
    int64_t rows = tile_i / out_i;
    if (b_shared) rows = std::max<int64_t>(rows, k_step);
    ctx.constraint("threads per block <= device limit (" + std::to_string(threads) + ")",
                   columns_of_threads * rows <= threads);
    int64_t bytes = prod_registers ? 0 : int64_t(tile_j) * tile_i * 4;
    if (b_shared) bytes += int64_t(tile_j) * k_step * 4;
    if (a_shared) bytes += int64_t(tile_i) * k_step * 4;
    ctx.constraint("shared memory per block <= device limit (" + std::to_string(shared) + ")",
                   bytes <= shared);

    Func C = inst.output, B_panel = inst.stages[0], prod = inst.stages[1];
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii"), kv("kv"), jt("jt"), jr("jr"),
        jv("jv"), it("it"), ir("ir");
    VarOrRVar ko("k.x_o", true), ki("k.x_i", true);
    // With vec > 1, jr (a thread's out_j columns) splits into jr (groups) and jv (the
    // vectorized lanes of a group), innermost. With interleave, a thread's columns (groups of
    // vec) lie columns_of_threads groups apart and neighbouring threads take neighbouring
    // groups: jt is the inner part of the split, so the threads of a warp read consecutive
    // words of B's panel (no bank conflict) and store consecutive words of C.
    auto columns = [&](Stage st, const Var &col, TailStrategy tail = TailStrategy::Auto) -> Stage {
        if (interleave) {
            if (vec > 1) {
                st.split(col, jr, jv, vec, tail);
                st.split(jr, jr, jt, int(columns_of_threads), tail);
            } else {
                st.split(col, jr, jt, int(columns_of_threads), tail);
            }
            return st;
        }
        st.split(col, jt, jr, out_j, tail);
        if (vec > 1) st.split(jr, jr, jv, vec);
        return st;
    };
    auto vectorize = [&](Stage st) {
        if (vec > 1) st.vectorize(jv);
    };
    // A thread's sums in registers: its loops over them unrolled.
    auto unroll = [&](Stage st) {
        if (!prod_registers) return;
        st.unroll(jr).unroll(ir);
    };
    C.tile(j, i, jo, io, ji, ii, tile_j, tile_i);
    Stage c_stage = columns(Stage(C.function(), 0), ji);
    c_stage.split(ii, it, ir, out_i);
    if (vec > 1)
        c_stage.reorder(jv, jr, ir, jt, it, jo, io);
    else
        c_stage.reorder(jr, ir, jt, it, jo, io);
    c_stage.gpu_blocks(jo, io).gpu_threads(jt, it);
    vectorize(c_stage);
    unroll(c_stage);
    prod.compute_at(C, jo).store_in(prod_registers ? MemoryType::Register : MemoryType::GPUShared);
    Stage pure = columns(Stage(prod.function(), 0), j);
    pure.split(i, it, ir, out_i);
    if (vec > 1)
        pure.reorder(jv, jr, ir, jt, it);
    else
        pure.reorder(jr, ir, jt, it);
    pure.gpu_threads(jt, it);
    vectorize(pure);
    unroll(pure);
    Stage update = prod.update(0);
    update.split(VarOrRVar("k.x", true), ko, ki, k_step);
    // Rounded up, not guarded: prod's region is the block's tile, a multiple of the thread's
    // out_j x out_i group, so nothing more is computed, and the sums need no test per
    // multiply-add.
    columns(update, j, TailStrategy::RoundUp).split(i, it, ir, out_i, TailStrategy::RoundUp);
    if (vec > 1)
        update.reorder(jv, jr, ir, ki, jt, it, ko);
    else
        update.reorder(jr, ir, ki, jt, it, ko);
    update.gpu_threads(jt, it);
    vectorize(update);
    unroll(update);
    if (b_shared) {
        B_panel.compute_at(prod, ko).store_in(MemoryType::GPUShared);
        Stage copy = columns(Stage(B_panel.function(), 0), j);
        if (vec > 1)
            copy.reorder(jv, jr, jt, kv);
        else
            copy.reorder(jr, jt, kv);
        copy.gpu_threads(jt, kv);
        vectorize(copy);
    }
    if (a_shared) {
        // Threads across walk k (neighbouring threads read neighbouring values of a row of A),
        // threads down walk the rows; each thread copies k_step / kx x tile_i / iy values. The
        // copy fits in the block the other stages make.
        const int kx = int(std::min<int64_t>(k_step, columns_of_threads));
        const int iy = int(std::min<int64_t>(tile_i, rows));
        Var kr("kr"), kt("kt");
        Func A_tile = inst.inputs[0].in(prod);
        A_tile.compute_at(prod, ko).store_in(MemoryType::GPUShared);
        // Guarded, not shifted: a shifted tail in k would widen the region of A that bounds
        // inference proves the kernel reads past A's edges at K below the step.
        A_tile.split(_0, kr, kt, kx, TailStrategy::GuardWithIf)
            .split(_1, ir, it, iy, TailStrategy::GuardWithIf)
            .reorder(kr, ir, kt, it);
        A_tile.gpu_threads(kt, it);
    }
}

// The K-blocked CPU schedule (see k_block in schedule_matmul): tasks are blocks of tile_i rows;
// in each, prod (tile_j * j_tiles columns by tile_i rows, zeroed by whole vectors) accumulates
// over blocks of k_block values of k, each block walked over the j_tiles register tiles (the
// SSRSRS nest of Ansor's CPU sketches: rows, column strip; k block; register tiles; k; the tile).
void schedule_matmul_k_blocked(Func C, Func prod, int lanes, int tile_j, int tile_i, int j_tiles,
                               int k_block, bool unroll_i, bool parallel) {
    Var j("j"), i("i"), jo("jo"), io("io"), jr("jr"), jm("jm"), ji("ji"), ii("ii"), jv("jv");
    // The strip first, then its register tiles: a strip is a constant multiple of the tile, so
    // prod's region per strip has a constant size.
    C.split(j, jo, jr, tile_j * j_tiles)
        .split(jr, jm, ji, tile_j)
        .split(i, io, ii, tile_i)
        .reorder(ji, ii, jm, jo, io)
        .vectorize(ji, lanes);
    if (unroll_i) C.unroll(ii);
    if (parallel) C.parallel(io);
    prod.compute_at(C, jo).vectorize(j, lanes);
    if (unroll_i) prod.unroll(i);
    // RoundUp: the region is tile_j * j_tiles wide, a multiple of the vector; the register tiles
    // then split the vector groups, which they divide exactly.
    VarOrRVar k("k.x", true), ko("k.x_o", true), ki("k.x_i", true);
    Stage up = prod.update(0);
    up.split(j, j, jv, lanes, TailStrategy::RoundUp)
        .split(j, j, jm, tile_j / lanes, TailStrategy::RoundUp)
        .split(k, ko, ki, k_block)
        .reorder(jv, jm, i, ki, j, ko)
        .vectorize(jv)
        .unroll(jm);
    if (unroll_i) up.unroll(i);
}

// The CPU schedule, as knobs whose defaults are the hand schedule, the template the tuner
// searches: the tile of C (tile_j x tile_i, lanes wide vectors), which of the two outer loops is
// inner, where the panel of B and the tile of sums are computed, the unrolling of k and of the
// tile's rows, and whether the column blocks run in parallel.
void schedule_matmul(OperatorInstance &inst, GeneratorContext &ctx) {
    const Target &target = ctx.target();
    if (target.has_gpu()) return schedule_matmul_gpu(inst, ctx);
    const int64_t M = inst.shape[0], N = inst.shape[1], K = inst.shape[2];
    const int vec = std::max(1, target.vector_bits / 32);
    // The K-blocked schedule's register tile (and, without 32 vector registers, the hand tile, with
    // K blocking as the hand schedule of a narrow C): 2 vectors x 8 rows.
    const int64_t panel_j = halved_to_fit(int64_t(2) * vec, N);
    const bool narrow = N <= 4 * panel_j && K >= 1024;
    // With AVX-512's 32 registers the hand tile is 4 vectors x 6 rows (24 accumulators; per k, 4
    // loads of B's panel and 6 broadcasts of A for 24 FMAs instead of 2 and 8 for 16) with k
    // unrolled twice: on an Intel Xeon (Sapphire Rapids class) it ran 1.1-1.2x the 8-row tile at
    // every bench shape, whose A addresses cost a chain of integer adds per k that competes with
    // the FMAs for ports 0 and 5 (docs/BENCHMARKS.md). Where that tile spans all of C's columns
    // (4096 x 64 x 4096), the row blocks are the parallel loop and a K x 64 B is its own panel,
    // copied once per task (below). That also beat the K-blocked schedule there (1.1-1.15x).
    const bool wide_tile = vec >= 16;
    const int64_t hand_j = wide_tile ? halved_to_fit(int64_t(4) * vec, N) : panel_j;
    const int64_t hand_i = halved_to_fit(wide_tile ? 6 : 8, M);
    const int64_t hand_k_unroll = wide_tile && K % 2 == 0 ? 2 : 1;
    const bool one_panel = wide_tile && hand_j >= N;
    const int64_t hand_tiles =
        !wide_tile && N <= 2 * panel_j && N % panel_j == 0 && narrow ? N / panel_j : 1;
    const int lanes =
        int(ctx.knob("lanes", hand_first(std::min<int64_t>(vec, hand_j), {4, 8, 16})));
    const int tile_j = int(ctx.knob("tile_j", hand_first(hand_j, powers_of_two(4, 128))));
    const int tile_i = int(ctx.knob("tile_i", hand_first(hand_i, {1, 2, 4, 6, 8, 12, 16})));
    const bool io_inner =
        ctx.knob_choice("outer_order",
                        one_panel ? std::vector<std::string>{"jo_inner", "io_inner"}
                                  : std::vector<std::string>{"io_inner", "jo_inner"}) == "io_inner";
    const std::string b_panel = ctx.knob_choice(
        "b_panel", one_panel ? std::vector<std::string>{"per_task", "inline", "at_jo", "root"}
                             : std::vector<std::string>{"at_jo", "inline", "root"});
    // Where the tile spans all of C's columns, every task reads all of B (1 MB at 4096 x 64 x
    // 4096). Shared by the cores, its lines cost each of them more than a panel of its own: on
    // the Intel Xeon two single-thread processes side by side each ran at their solo speed,
    // while one two-thread process took 14% more time per thread (static or dynamic tasks
    // alike); with a copy of B per task, 6.3-6.6 -> 5.9-6.0 ms, oneDNN's 5.9-6.1 (2 threads,
    // interleaved; 11.8-12.2 -> 11.4-11.8 on one). So the hand schedule (b_panel per_task) cuts
    // the row blocks into as many tasks as the target has threads (Target::threads, else the
    // runtime's when the schedule is built; a power of two from 2 to 32), each copying B into its
    // panel first (2-3% of a task).
    const int64_t hand_tasks = hand_task_count(target);
    const int b_tasks =
        int(ctx.knob("b_tasks", one_panel ? hand_first(hand_tasks, powers_of_two(2, 32))
                                          : std::vector<int64_t>{1}));
    const bool prod_at_tile = ctx.knob_choice("prod_at", {"tile", "strip"}) == "tile";
    const int k_unroll = int(ctx.knob("k_unroll", hand_first(hand_k_unroll, {1, 2, 4})));
    const bool unroll_i = ctx.knob("unroll_i", {1, 0}) != 0;
    const bool parallel = ctx.knob("parallel", {1, 0}) != 0;
    // K blocking for a narrow C (a few register tiles wide) and a long K: the hand schedule's
    // panel of B (K x tile_j) no longer stays in L1, and each column panel streams all of A
    // again. Instead prod holds a block of j_tiles register tiles side by side (all of C's width
    // when it is narrow) and tile_i rows, its k loop is split into blocks of k_block, and each
    // block is walked over all the register tiles before the next: B's k_block x (tile_j *
    // j_tiles) block stays in cache and A's rows are read once per row block. The tuner is
    // offered it where it can pay, C at most four of its register tiles (panel_j) wide and K at
    // least 1024 (at 1024^3 it measured no faster than the hand schedule), so elsewhere the two
    // knobs have one value and the space is as dense as without them.
    const int j_tiles =
        int(ctx.knob("j_tiles", hand_first(hand_tiles, narrow ? std::vector<int64_t>{1, 2, 4}
                                                              : std::vector<int64_t>{1})));
    const int k_block =
        int(ctx.knob("k_block", hand_first(hand_tiles > 1 ? 256 : 1,
                                           narrow ? std::vector<int64_t>{1, 128, 256, 512}
                                                  : std::vector<int64_t>{1})));
    ctx.constraint("lanes <= natural vector width (" + std::to_string(vec) + ")",
                   lanes <= std::max(4, vec));
    ctx.constraint("tile_j is a multiple of lanes", tile_j >= lanes && tile_j % lanes == 0);
    ctx.constraint("tile_j <= N and tile_i <= M", tile_j <= N && tile_i <= M);
    ctx.constraint("tile_j / lanes * tile_i <= 32 accumulators", tile_j / lanes * tile_i <= 32);
    ctx.constraint("k_unroll divides K", K % k_unroll == 0);
    // prod at the strip (a column panel of C, all rows) has a row count that is not a constant.
    ctx.constraint("prod_at strip needs outer_order io_inner and no unroll_i",
                   prod_at_tile || (io_inner && !unroll_i));
    ctx.constraint("b_panel at_jo needs jo outside io", b_panel != "at_jo" || io_inner);
    ctx.constraint("b_panel per_task needs io outside jo", b_panel != "per_task" || !io_inner);
    ctx.constraint("b_tasks other than its first value needs b_panel per_task",
                   b_panel == "per_task" || b_tasks == (one_panel ? hand_tasks : 1));
    ctx.constraint("k_block > 1 and j_tiles > 1 go together", (k_block > 1) == (j_tiles > 1));
    ctx.constraint("k_block < K", k_block < K || k_block == 1);
    ctx.constraint("tile_j * j_tiles <= N", int64_t(tile_j) * j_tiles <= N);
    // The blocked schedule fixes what these knobs choose: rows outer, B read in place, prod per
    // row block; only their first values are points of it.
    ctx.constraint("k_block > 1 needs outer_order io_inner, b_panel at_jo, prod_at tile and "
                   "k_unroll 1 (their first values)",
                   k_block == 1 ||
                       (io_inner && b_panel == "at_jo" && prod_at_tile && k_unroll == 1));

    Func C = inst.output, B_panel = inst.stages[0], prod = inst.stages[1];
    if (k_block > 1)
        return schedule_matmul_k_blocked(C, prod, lanes, tile_j, tile_i, j_tiles, k_block, unroll_i,
                                         parallel);
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii"), jv("jv");
    C.tile(j, i, jo, io, ji, ii, tile_j, tile_i);
    if (io_inner)
        C.reorder(ji, ii, io, jo);
    else
        C.reorder(ji, ii, jo, io);
    C.vectorize(ji, lanes);
    if (unroll_i) C.unroll(ii);
    if (b_panel == "per_task") {
        // The row blocks in b_tasks tasks, each copying B into a panel of its own first.
        Var task("task");
        const int64_t row_tiles = (M + tile_i - 1) / tile_i;
        C.split(io, task, io, int((row_tiles + b_tasks - 1) / b_tasks));
        if (parallel) C.parallel(task);
        B_panel.compute_at(C, task).vectorize(j, lanes);
    } else if (parallel) {
        C.parallel(io_inner ? jo : io);
    }
    if (b_panel == "at_jo") {
        B_panel.compute_at(C, jo).vectorize(j, lanes);
    } else if (b_panel == "root") {
        B_panel.compute_root().vectorize(j, lanes).parallel(Var("kv"));
    }
    // The tile: the inner of the two outer loops; the strip: the outer one.
    prod.compute_at(C, (io_inner == prod_at_tile) ? io : jo).vectorize(j, lanes);
    if (unroll_i) prod.unroll(i);
    // RoundUp: prod's region is exactly tile_j wide, a multiple of the vector, so no tail guard.
    Stage up = prod.update(0);
    up.split(j, j, jv, lanes, TailStrategy::RoundUp);
    VarOrRVar k("k.x", true);
    if (k_unroll > 1) {
        VarOrRVar ko("k.x_o", true), ki("k.x_i", true);
        up.split(k, ko, ki, k_unroll).reorder(jv, j, i, ki, ko).unroll(ki);
    } else {
        up.reorder(jv, j, i, k);
    }
    up.vectorize(jv).unroll(j);
    if (unroll_i) up.unroll(i);
}

BufferBase reference_matmul(const OperatorInstance &inst) {
    int M = int(inst.shape[0]), N = int(inst.shape[1]), K = int(inst.shape[2]);
    const float *a = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
    const float *b = reinterpret_cast<const float *>(inst.input_data[1].raw_data());
    BufferBase out(Float(32), {N, M}, "C");
    float *c = reinterpret_cast<float *>(out.raw_data());
    std::vector<double> row(size_t(N), 0.0);
    for (int i = 0; i < M; i++) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int k = 0; k < K; k++) {
            double aik = a[size_t(i) * K + k];
            const float *brow = b + size_t(k) * N;
            for (int j = 0; j < N; j++) {
                row[size_t(j)] += aik * brow[j];
            }
        }
        for (int j = 0; j < N; j++) {
            c[size_t(i) * N + j] = float(row[size_t(j)]);
        }
    }
    return out;
}

} // namespace

Operator matmul_operator() {
    Operator op;
    op.name = "matmul";
    op.description = "C = A * B, float32, row-major (A is M x K, B is K x N)";
    op.shape_names = {"M", "N", "K"};
    op.default_shape = {1024, 1024, 1024};
    op.make = make_matmul;
    op.reference = reference_matmul;
    op.work = [](const std::vector<int64_t> &s) {
        return 2.0 * double(s[0]) * double(s[1]) * double(s[2]);
    };
    op.work_unit = "GF/s";
    // The reference sums in double; kiln sums K float products in float with one rounding per
    // fma. Inputs are uniform in [-1, 1], so a sum's rounding error grows like
    // eps * sqrt(K) * |partial sums| ~ 6e-8 * K / 3, about 4e-5 at K = 2048, far under 1e-3,
    // while a wrong index or a missed term is off by O(0.1) or more.
    op.tolerance = 1e-3;
    define_by_generator(op, schedule_matmul);
    return op;
}

} // namespace kiln::apps
