// conv2d: a 3x3 convolution, stride 1, zero padding 1, batch 1, NCHW float32.
// In kiln's x-first indexing: in(x, y, ci) is in[ci][y][x] (extents W, H, C_in), the weights
// w(kx, ky, ci, co) are w[co][ci][ky][kx] (OIHW; extents 3, 3, C_in, C_out) and the output
// out(x, y, co) is out[co][y][x] (extents W, H, C_out).
//   out(x, y, co) = sum over ky, kx, ci of w(kx, ky, ci, co) * in_padded(x + kx - 1, y + ky - 1,
//   ci)
// The algorithm holds the zero-padded input in blocks of B channels, padded(c, x, y, cb) =
// in_padded(x, y, cb B + c), B the largest power of two up to 256 that divides C_in (all of
// them at 64 and 256 channels: a pixel's channels side by side, as oneDNN's NHWC for its
// brgemm convolution), and sums over c, kx, ky, cb with c innermost (the RDom's r.x): the
// kernel's inner loop then broadcasts consecutive values of one pixel, 16 of them in one cache
// line, where a plane per channel would take one line per value from a plane 13 KB further on
// (56 x 56), a stride no hardware prefetcher follows. Blocks of 16 channels (nChw16c) ran 3-5%
// slower at 256 -> 256 channels, 14 x 14 (the inner loop 16 steps long instead of 256), the same
// at 64 -> 64, 56 x 56. The weights are repacked the same way, output channel innermost.
// The RDom skips the taps in the padding, rows and columns alike (`where`): at 14 x 14 those are
// 1 in 21 of the products. In a row of pixels unrolled with its taps, the column conditions are
// constants once the tile's position is (the output's x bound to [0, W) with one tile per row),
// else a condition on the tile's position that lowering decides once per tile (loop unswitching,
// schedule/UnswitchLoops.h), so the FMA sequence has no branches in it.
#include "apps/Builtin.h"
#include "lang/BoundaryConditions.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

// Where a pixel's channels are: in planes (conv2d, conv2d_packed: in(x, y, c), out(x, y, co)) or
// side by side (conv2d_nhwc: in(c, x, y), out(co, x, y)). Each operator states it to both its
// algorithm and its schedule.
enum class Layout { NCHW, NHWC };

// A block of channels: the largest power of two that divides the channel count, at most `cap`,
// so that blocks tile the channels exactly. Output channels come in blocks of at most 16 (a
// vector of floats); input channels in blocks of up to 256 (see make_conv2d).
int channel_block(int CI, int cap = 16) {
    int b = 1;
    while (b < cap && CI % (2 * b) == 0)
        b *= 2;
    return b;
}

// conv2d_packed's weights: wp(o, c, kx, ky, cb, ob) = w(kx, ky, cb B + c, ob OB + o), the
// layout the kernel reads: output channels in blocks of OB (channel_block(C_out), 16 where C_out
// allows) outermost and innermost, input channels in blocks of B (the padded input's; with B =
// C_in that is oneDNN's Ohwi16o kind, with B = 16 its OIhw16i16o); extents OB, B, 3, 3, C_in / B,
// C_out / OB. A block of output channels reads one
// dense run of 9 C_in OB values (147 KB at 256 input channels), which stays in L2 for all the
// block's rows. conv2d_pack makes it from OIHW weights; a caller whose weights are constant packs
// them once and runs conv2d_packed on them for every input, as oneDNN's users reorder their
// weights into the primitive's layout once.
std::vector<int> packed_weight_extents(int CI, int CO) {
    const int B = channel_block(CI, 256), OB = channel_block(CO);
    return {OB, B, 3, 3, CI / B, CO / OB};
}

// conv2d_nhwc: the same sums on a channels-innermost input and output, in(c, x, y) = in[y][x][c]
// and out(co, x, y) = out[y][x][co] (NHWC, batch 1), on packed weights. The input already holds a
// pixel's channels side by side, so nothing is copied: the kernel reads it through clamped
// coordinates (in bounds for the buffer; the taps they would move, those in the padding, are the
// ones the RDom skips), and its tiles of sums are stored as they are, vectors of channels.
OperatorInstance make_conv2d(const std::vector<int64_t> &shape, bool packed_weights,
                             Layout layout) {
    const bool nhwc = layout == Layout::NHWC;
    const std::string name = nhwc ? "conv2d_nhwc" : packed_weights ? "conv2d_packed" : "conv2d";
    int CI = shape_extent(name, "C_in", shape[0]);
    int CO = shape_extent(name, "C_out", shape[1]);
    int H = shape_extent(name, "H", shape[2]);
    int W = shape_extent(name, "W", shape[3]);
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam in(Float(32), 3, "in");
    ImageParam w(Float(32), packed_weights ? 6 : 4, packed_weights ? "wp" : "w");
    Var x("x"), y("y"), c("c"), co("co"), kx("kx"), ky("ky"), ci("ci"), cb("cb");
    Func padded(nhwc ? "clamped" : "padded"), w_packed("w_packed"), conv("conv"), out(name);
    const int B = channel_block(CI, 256), CB = CI / B, OB = channel_block(CO);
    if (nhwc) {
        // A pixel's channels side by side, rows of W pixels: strides known when compiling, so
        // the tile's pixels are constant offsets from one address (checked when it runs).
        in.dim(0).set_bounds(0, CI);
        in.dim(1).set_bounds(0, W).set_stride(CI);
        in.dim(2).set_bounds(0, H).set_stride(CI * W);
        padded(c, x, y, cb) = in(cb * B + c, clamp(x, 0, W - 1), clamp(y, 0, H - 1));
    } else {
        padded(c, x, y, cb) = constant_exterior(in, 0.f)(x, y, cb * B + c);
    }
    // With packed weights the kernel reads the input itself; w_packed stays a name for it. They
    // are dense, as conv2d_pack makes them: their strides are constants too.
    if (packed_weights) {
        std::vector<int> extents = packed_weight_extents(CI, CO);
        int stride = 1;
        for (size_t d = 0; d < extents.size(); d++) {
            w.dim(int(d)).set_bounds(0, extents[d]).set_stride(stride);
            stride *= extents[d];
        }
        w_packed(co, ci, kx, ky, cb) = w(co % OB, ci, kx, ky, cb, co / OB);
    } else {
        w_packed(co, ci, kx, ky, cb) = w(kx, ky, cb * B + ci, co);
    }
    RDom r({{0, B}, {0, 3}, {0, 3}, {0, CB}}, "r");
    r.where(y + r.z - 1 >= 0 && y + r.z - 1 < H && x + r.y - 1 >= 0 && x + r.y - 1 < W);
    conv(x, y, co) = 0.f;
    conv(x, y, co) = fma(w_packed(co, r.x, r.y, r.z, r.w),
                         padded(r.x, x + r.y - 1, y + r.z - 1, r.w), conv(x, y, co));
    if (nhwc) {
        out(co, x, y) = conv(x, y, co);
    } else {
        out(x, y, co) = conv(x, y, co);
    }
    inst.inputs = {in, w};
    inst.input_data = {
        nhwc ? random_buffer(Float(32), {CI, W, H}, "in", 41, -1, 1)
             : random_buffer(Float(32), {W, H, CI}, "in", 41, -1, 1),
        packed_weights ? random_buffer(Float(32), packed_weight_extents(CI, CO), "wp", 42, -1, 1)
                       : random_buffer(Float(32), {3, 3, CI, CO}, "w", 42, -1, 1)};
    inst.output = out;
    inst.output_extents = nhwc ? std::vector<int>{CO, W, H} : std::vector<int>{W, H, CO};
    inst.stages = {padded, w_packed, conv};
    return inst;
}

// The padded input is computed once per run (0.9 MB at the default shape), the repacked weights
// once per block of output channels (see schedule_conv2d). The kernel vectorizes over output
// channels: a tile of 2 x 16 output channels by 14 pixels of a row (pixel_tile) is held in 28
// zmm accumulators (conv, stored channel-innermost, computed per tile); for each (cb, ky, kx, c)
// it loads two weight vectors and broadcasts one input value per pixel into 2 vfmadd231ps each.
// On the Intel Xeon, 64 -> 64 channels 56 x 56, 1 thread, interleaved: the planar input with 2 x
// 16 by 8 tiles 1.57-1.62 ms, blocked channels 1.42-1.46 ms, and 2 x 16 by 14 tiles 1.27-1.36
// ms (oneDNN 1.16-1.20 ms on its own blocked layouts, reorders untimed). 4 x 16 by 7 tiles ran
// 1.35-1.50 ms; unrolling c by 2 or 4 was slower.
// Tasks are blocks of 32 output channels (rows of the one block when there is only one); a block's
// weights (73 KB at 64 input channels) stay in L2 across all its rows.
//
// The GPU kernel (target.gpu != None), as knobs whose defaults are the hand schedule: a tiled
// direct convolution. A block computes a tile_x x tile_y (32 x 4) tile of pixels for tile_co
// (16) output channels (blocks over pixel tiles and channel blocks); each thread owns one pixel
// of the tile and accumulates its channels in a private array (conv, computed per thread),
// reading the zero-padded input and the weights (both inlined) from global memory; the
// reduction's loops stay in the algorithm's order (its RVars may not be reordered). unroll_co
// (the default) unrolls the channel loop, so the sums live in registers. On the H200 at the
// default shape this measured 0.224 ms against 0.452 ms for 16 x 8 pixels by 8 channels without
// unrolling (still 0.15x cuDNN: the input is read from global memory once per tap and channel
// block, and nothing is staged in shared memory). Tiles shrink to fit small shapes; threads per
// block stay within the device's limit. With w_packed_at = root (not the default: not yet measured
// on a GPU) the weights are repacked once per run, output channel innermost, so a tap's tile_co
// weights are one cache line instead of tile_co lines 9 C_in floats apart.
void schedule_conv2d_gpu(OperatorInstance &inst, GeneratorContext &ctx) {
    const int64_t CO = inst.shape[1], H = inst.shape[2], W = inst.shape[3];
    const int64_t hand_x = halved_to_fit(32, W);
    const int64_t hand_y = halved_to_fit(4, H);
    const int64_t hand_co = halved_to_fit(16, CO);
    const int tile_x = int(ctx.knob("tile_x", hand_first(hand_x, powers_of_two(1, 64))));
    const int tile_y = int(ctx.knob("tile_y", hand_first(hand_y, powers_of_two(1, 32))));
    const int tile_co = int(ctx.knob("tile_co", hand_first(hand_co, powers_of_two(1, 32))));
    const bool unroll_co = ctx.knob("unroll_co", {1, 0}) != 0;
    const bool w_root = ctx.knob_choice("w_packed_at", {"inline", "root"}) == "root";
    const int64_t threads = ctx.gpu_max_threads_per_block();
    ctx.constraint("tile_x <= W, tile_y <= H and tile_co <= C_out",
                   tile_x <= W && tile_y <= H && tile_co <= CO);
    ctx.constraint("threads per block <= device limit (" + std::to_string(threads) + ")",
                   int64_t(tile_x) * tile_y <= threads);
    Func out = inst.output, conv = inst.stages[2], w_packed = inst.stages[1];
    if (w_root) {
        // The weights repacked once per run, output channel innermost, by a kernel of their own:
        // blocks over 16 output channels and the taps and channel blocks (fused), a thread per
        // output channel and input channel of 16 of the block's (each thread walks the block's
        // input channels 16 apart: a block of 256 input channels would be 4096 threads); the
        // sums then read a tap's tile_co weights from consecutive addresses.
        const int B = channel_block(int(inst.shape[0]), 256);
        Var wco("co"), wci("ci"), wkx("kx"), wky("ky"), wcb("cb"), k("k"), kc("kc"), wcoo("coo"),
            wcoi("coi"), wcio("cio"), wcii("cii");
        w_packed.compute_root()
            .fuse(wkx, wky, k)
            .fuse(k, wcb, kc)
            .split(wco, wcoo, wcoi, int(std::min<int64_t>(16, CO)), TailStrategy::GuardWithIf)
            .split(wci, wcio, wcii, std::min(16, B))
            .reorder(wcio, wcoi, wcii, wcoo, kc)
            .gpu_blocks(wcoo, kc)
            .gpu_threads(wcoi, wcii);
    }
    Var x("x"), y("y"), co("co"), xo("xo"), yo("yo"), coo("coo"), xi("xi"), yi("yi"), coi("coi");
    out.split(x, xo, xi, tile_x)
        .split(y, yo, yi, tile_y)
        .split(co, coo, coi, tile_co)
        .reorder(coi, xi, yi, xo, yo, coo)
        .gpu_blocks(xo, yo, coo)
        .gpu_threads(xi, yi);
    conv.compute_at(out, xi);
    Stage up = conv.update(0).reorder(co, x, y, VarOrRVar("r.x", true), VarOrRVar("r.y", true),
                                      VarOrRVar("r.z", true), VarOrRVar("r.w", true));
    if (unroll_co) {
        conv.unroll(co);
        up.unroll(co);
    }
}

// The hand schedule's tile of pixels along a row: of max_tile and the widths below it down to 4,
// the one that computes the fewest pixels per row (ceil(W / t) t), the widest on ties. max_tile
// is what the vector registers hold: two vectors of output channels per pixel as accumulators,
// two of weights and one broadcast input value, 14 pixels with AVX-512's 32 registers, 6 with
// AVX2's 16. A 56-pixel row is four tiles of 14, a 14-pixel row one.
int64_t pixel_tile(int64_t W, int64_t max_tile) {
    if (W <= max_tile) return W;
    int64_t best = max_tile;
    for (int64_t t = max_tile - 1; t >= 4; t--) {
        if ((W + t - 1) / t * t < (W + best - 1) / best * best) best = t;
    }
    return best;
}

// The CPU schedule, as knobs whose defaults are the hand schedule, the template the tuner
// searches: the tile of output channels and its vector width, the pixel tile, where conv is
// computed, what is unrolled, and what runs in parallel.
void schedule_conv2d(OperatorInstance &inst, GeneratorContext &ctx, Layout layout) {
    const Target &target = ctx.target();
    if (target.has_gpu()) return schedule_conv2d_gpu(inst, ctx);
    const int64_t CI = inst.shape[0], CO = inst.shape[1], W = inst.shape[3];
    const int vec = std::max(1, target.vector_bits / 32);
    const int64_t hand_co = halved_to_fit(int64_t(2) * vec, CO);
    const int registers = target.vector_bits >= 512 ? 32 : 16;
    const int64_t hand_x = pixel_tile(W, (registers - 3) / 2);
    const int lanes =
        int(ctx.knob("lanes", hand_first(std::min<int64_t>(vec, hand_co), {4, 8, 16})));
    const int tile_co = int(ctx.knob("tile_co", hand_first(hand_co, powers_of_two(4, 64))));
    const int tile_x = int(ctx.knob("tile_x", hand_first(hand_x, {1, 2, 4, 6, 7, 8, 12, 14, 16})));
    const std::string conv_at = ctx.knob_choice("conv_at", {"xo", "y"});
    const bool unroll_x = ctx.knob("unroll_x", {1, 0}) != 0;
    const bool unroll_kx = ctx.knob("unroll_kx", {1, 0}) != 0;
    const bool parallel = ctx.knob("parallel", {1, 0}) != 0;
    // The copy of a tile of sums to the output's planes (conv_at = xo): vectors of pixels, one
    // per output channel, which the code generator makes dense loads of the tile's rows of
    // channels and an in-register transpose (CodeGenLLVM's transposed copies); or vectors of
    // channels, scattered to their planes.
    // conv2d_nhwc's output holds a pixel's channels side by side: vectors of channels are dense.
    const bool nhwc = layout == Layout::NHWC;
    const bool transpose_copy = ctx.knob("transpose_copy", nhwc ? std::vector<int64_t>{0}
                                                                : std::vector<int64_t>{1, 0}) != 0;
    // The tasks. Each task reads all of one operand: with blocks of output channels, all of the
    // padded input; with blocks of rows, all of the weights. Read by both cores, lines cost each
    // of them more than lines of its own (on the Intel Xeon two threads summing the same 1 MB
    // from L2 took 20% longer than each summing its own copy), so the hand schedule shares the
    // smaller one: row_tasks where the padded input is larger than the weights (64 -> 64
    // channels, 56 x 56: 861 KB against 147 KB), each of hand_task_count() tasks padding its own
    // rows (and the two they overlap), else blocks of output channels where there are at least
    // two (each task repacks its block's weights, with no barrier between), else rows of one
    // block in parallel (rows).
    const int64_t H = inst.shape[2];
    const bool hand_row_tasks = (H + 2) * (W + 2) > 9 * CO;
    const bool hand_blocks = (CO + hand_co - 1) / hand_co >= 2;
    using Kinds = std::vector<std::string>;
    const std::string over =
        ctx.knob_choice("parallel_over", hand_row_tasks ? Kinds{"row_tasks", "co_blocks", "rows"}
                                         : hand_blocks  ? Kinds{"co_blocks", "rows", "row_tasks"}
                                                        : Kinds{"rows", "co_blocks", "row_tasks"});
    const bool over_blocks = over == "co_blocks", row_tasks = over == "row_tasks";
    const int64_t hand_tasks = hand_task_count(target);
    const int tasks = int(ctx.knob("tasks", hand_first(hand_tasks, powers_of_two(2, 32))));
    ctx.constraint("lanes <= natural vector width (" + std::to_string(vec) + ")",
                   lanes <= std::max(4, vec));
    ctx.constraint("tile_co is a multiple of lanes and <= C_out",
                   tile_co % lanes == 0 && tile_co <= std::max<int64_t>(CO, hand_co));
    ctx.constraint("tile_x <= W", tile_x <= W);
    ctx.constraint("tasks other than its first value needs parallel_over row_tasks",
                   row_tasks || tasks == hand_tasks);
    ctx.constraint("transpose_copy = 0 needs conv_at xo", conv_at == "xo" || transpose_copy);
    ctx.constraint("tile_co / lanes * tile_x <= 32 accumulators", tile_co / lanes * tile_x <= 32);

    Func out = inst.output, padded = inst.stages[0], w_packed = inst.stages[1],
         conv = inst.stages[2];
    Var x("x"), y("y"), c("c"), co("co"), xo("xo"), xi("xi"), coo("coo"), coi("coi"), cv("cv");
    // The tile's copy to the output (conv_at = xo): a vector of the tile's pixels per output
    // channel, its channels unrolled, which the code generator turns into dense loads and a
    // transpose in registers (64 -> 64 channels, 56 x 56, interleaved: 0.75 against 0.77 ms on
    // 2 threads, the copy 0.16 -> 0.10 ms on 1, profiled); transpose_copy = 0 scatters each
    // vector of channels to their planes instead (each of those a gather: the same as the
    // scatter). With conv_at = y, conv
    // holds a row of the block, summed tile by tile in registers, and the copy gathers vectors
    // of pixels from it into whole rows of each plane. On the Intel Xeon that halved the copy
    // (0.136 -> 0.069 ms at 64 -> 64 channels, 56 x 56, 1 thread, profiled), yet the whole run
    // measured the same as the default's within 2% at both shapes and thread counts
    // (conv2d_packed, 3 interleaved rounds); not the default.
    // The output's channels start at 0 and number C_out (checked at run time): a block of
    // output channels then starts at a multiple of tile_co, which the packed weights' blocks of
    // OB channels need to be read as vectors. Its columns are [0, W): a tile's position is then a
    // constant where one tile spans the row, and so are the RDom's conditions on the taps.
    out.bound(co, 0, int(CO)).bound(x, 0, int(W));
    const bool row = conv_at == "y";
    out.split(co, coo, coi, tile_co);
    if (row) {
        out.split(x, xo, xi, std::min<int64_t>(vec, W), TailStrategy::ShiftInwards)
            .reorder(xi, coi, xo, y, coo)
            .vectorize(xi);
    } else {
        out.split(x, xo, xi, tile_x);
        if (transpose_copy) {
            out.reorder(xi, coi, xo, y, coo).vectorize(xi).unroll(coi);
        } else {
            out.reorder(coi, xi, xo, y, coo).vectorize(coi, lanes);
        }
    }
    // row_tasks: the rows in `tasks` blocks outermost, each with all its blocks of channels.
    // ShiftInwards: a last block that would run past the image is moved back over rows the one
    // before computes (the same values again); GuardWithIf would make the region of conv at xo
    // a non-constant one, its sums no longer in registers (3 times slower).
    Var yt("yt"), yi("yi");
    if (row_tasks) {
        out.split(y, yt, yi, int((H + tasks - 1) / tasks), TailStrategy::ShiftInwards)
            .reorder(row || transpose_copy ? VarOrRVar(xi) : VarOrRVar(coi),
                     row || transpose_copy ? VarOrRVar(coi) : VarOrRVar(xi), xo, yi, coo, yt);
        if (parallel) out.parallel(yt);
    } else if (parallel) {
        out.parallel(over_blocks ? coo : y);
    }
    // The padded input in blocks of channels (make_conv2d): a transpose, each vector of a
    // pixel's block's channels gathered from the input's planes, once per run (0.9 MB at the
    // default shape), or per task of rows (row_tasks) in the task's own buffer.
    // (conv2d_nhwc reads its input in place: `clamped` stays inlined.) At the root, its rows run
    // in parallel, each with all its blocks of channels (all 256 input channels are one block).
    Var cb("cb");
    if (!nhwc) {
        if (row_tasks) {
            padded.compute_at(out, yt);
        } else {
            padded.compute_root();
            if (parallel) padded.reorder(c, x, cb, y).parallel(y);
        }
        if (channel_block(int(CI)) >= 4) {
            padded.vectorize(c, std::min(channel_block(int(CI), 256), vec));
        } else {
            padded.vectorize(x, vec);
        }
    }
    // The weights are repacked per block of tile_co output channels (at coo), into a dense
    // buffer of that block's channels (295 KB at 256 -> 256 channels: the block's tiles stream it
    // from L2). The repacking is a transpose (co moves innermost), each vector of lanes output
    // channels gathered from as many rows of w, which it walks in order: their lines stay in L1
    // until all their values are used.
    // conv2d_packed takes them packed (its wp input, 6-D): w_packed is then inlined, a name.
    const bool packed_weights = inst.inputs[1].dimensions() == 6;
    Var ci("ci"), kx("kx"), ky("ky"), wco("wco"), wci("wci");
    if (!packed_weights) {
        w_packed.compute_at(out, coo)
            .split(co, wco, wci, lanes)
            .reorder(wci, kx, ky, ci, cb, wco)
            .vectorize(wci);
        // With tasks of rows, the block's repacking sits between two parallel loops: its
        // vectors of output channels run in parallel too (256 -> 256 channels, 14 x 14, 2
        // threads: 1.79 -> 1.52 ms). Tasks of blocks of channels are faster still where there
        // are enough blocks (1.44 -> 1.27 ms there, 1.25 -> 1.19 ms at 64 -> 64 channels, 56 x
        // 56; interleaved).
        if (parallel && over == "rows") w_packed.parallel(wco);
    }
    conv.compute_at(out, row ? (row_tasks ? yi : y) : xo)
        .reorder_storage(co, x, y)
        .reorder(co, x, y)
        .vectorize(co, lanes);
    // The reduction's own loops keep their order (r.x, the input channel, innermost): another
    // order would sum the products in another order. unroll_kx unrolls r.y, the 3 taps of a row.
    // RoundUp: conv's region is exactly tile_co channels, a multiple of the vector: no guard.
    Stage up = conv.update(0);
    up.split(co, co, cv, lanes, TailStrategy::RoundUp);
    // With a row of sums (conv_at y), its tiles: x split by tile_x outside the sum's loops,
    // each tile's sums in registers across the whole reduction.
    Var cxo("cxo"), cxi("cxi");
    if (row) {
        up.split(x, cxo, cxi, tile_x, TailStrategy::RoundUp)
            .reorder(cv, co, cxi, VarOrRVar("r.x", true), VarOrRVar("r.y", true),
                     VarOrRVar("r.z", true), VarOrRVar("r.w", true), cxo, y);
    } else {
        up.reorder(cv, co, x, y, VarOrRVar("r.x", true), VarOrRVar("r.y", true),
                   VarOrRVar("r.z", true), VarOrRVar("r.w", true));
    }
    up.vectorize(cv).unroll(co);
    if (unroll_x) up.unroll(row ? VarOrRVar(cxi) : VarOrRVar(x));
    if (unroll_kx) up.unroll(VarOrRVar("r.y", true));
}

// The index of w[co][ci][ky][kx] (OIHW) in conv2d_packed's layout,
// wp[co / OB][ci / B][ky][kx][ci % B][co % OB].
size_t packed_weight_index(int CI, int CO, int co, int ci, int ky, int kx) {
    const int B = channel_block(CI, 256), OB = channel_block(CO);
    return (((((size_t(co / OB) * (CI / B) + ci / B) * 3 + ky) * 3 + kx) * B + ci % B) * OB) +
           co % OB;
}

BufferBase reference_conv2d(const OperatorInstance &inst) {
    int CI = int(inst.shape[0]), CO = int(inst.shape[1]), H = int(inst.shape[2]),
        W = int(inst.shape[3]);
    const float *in = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
    const float *w = reinterpret_cast<const float *>(inst.input_data[1].raw_data());
    // Packed weights are read back in OIHW order.
    std::vector<float> unpacked;
    if (inst.input_data[1].dimensions() == 6) {
        unpacked.resize(size_t(CO) * CI * 9);
        for (int co = 0; co < CO; co++)
            for (int ci = 0; ci < CI; ci++)
                for (int k = 0; k < 9; k++)
                    unpacked[(size_t(co) * CI + ci) * 9 + k] =
                        w[packed_weight_index(CI, CO, co, ci, k / 3, k % 3)];
        w = unpacked.data();
    }
    BufferBase out(Float(32), {W, H, CO}, inst.output.name());
    float *o = reinterpret_cast<float *>(out.raw_data());
    for (int co = 0; co < CO; co++) {
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
                double s = 0;
                for (int ci = 0; ci < CI; ci++) {
                    for (int ky = 0; ky < 3; ky++) {
                        for (int kx = 0; kx < 3; kx++) {
                            int sx = x + kx - 1, sy = y + ky - 1;
                            if (sx < 0 || sx >= W || sy < 0 || sy >= H) continue;
                            s += double(w[((size_t(co) * CI + ci) * 3 + ky) * 3 + kx]) *
                                 in[(size_t(ci) * H + sy) * W + sx];
                        }
                    }
                }
                o[(size_t(co) * H + y) * W + x] = float(s);
            }
        }
    }
    return out;
}

// conv2d_nhwc's reference: the same sums in double, from the NHWC input and the packed weights.
BufferBase reference_conv2d_nhwc(const OperatorInstance &inst) {
    int CI = int(inst.shape[0]), CO = int(inst.shape[1]), H = int(inst.shape[2]),
        W = int(inst.shape[3]);
    const float *in = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
    const float *wp = reinterpret_cast<const float *>(inst.input_data[1].raw_data());
    BufferBase out(Float(32), {CO, W, H}, inst.output.name());
    float *o = reinterpret_cast<float *>(out.raw_data());
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            for (int co = 0; co < CO; co++) {
                double s = 0;
                for (int ky = 0; ky < 3; ky++) {
                    for (int kx = 0; kx < 3; kx++) {
                        int sx = x + kx - 1, sy = y + ky - 1;
                        if (sx < 0 || sx >= W || sy < 0 || sy >= H) continue;
                        for (int ci = 0; ci < CI; ci++) {
                            s += double(wp[packed_weight_index(CI, CO, co, ci, ky, kx)]) *
                                 in[(size_t(sy) * W + sx) * CI + ci];
                        }
                    }
                }
                o[(size_t(y) * W + x) * CO + co] = float(s);
            }
        }
    }
    return out;
}

// conv2d_pack: OIHW weights w(kx, ky, ci, co) into conv2d_packed's layout
// wp(o, c, kx, ky, cb, ob).
OperatorInstance make_conv2d_pack(const std::vector<int64_t> &shape) {
    int CI = shape_extent("conv2d_pack", "C_in", shape[0]);
    int CO = shape_extent("conv2d_pack", "C_out", shape[1]);
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam w(Float(32), 4, "w");
    Var o("o"), c("c"), kx("kx"), ky("ky"), cb("cb"), ob("ob");
    Func wp("conv2d_pack");
    const int B = channel_block(CI, 256), OB = channel_block(CO);
    wp(o, c, kx, ky, cb, ob) = w(kx, ky, cb * B + c, ob * OB + o);
    inst.inputs = {w};
    inst.input_data = {random_buffer(Float(32), {3, 3, CI, CO}, "w", 42, -1, 1)};
    inst.output = wp;
    inst.output_extents = packed_weight_extents(CI, CO);
    return inst;
}

// A transpose done once per set of weights: each vector of a block's output channels gathered
// from as many rows of w, blocks of output channels in parallel (CPU); on a GPU a thread per
// output channel of a block does the 9 taps, a block of threads per (c, cb, ob).
void schedule_conv2d_pack(OperatorInstance &inst, GeneratorContext &ctx) {
    const Target &target = ctx.target();
    const int OB = channel_block(int(inst.shape[1]));
    Func wp = inst.output;
    Var o("o"), c("c"), kx("kx"), ky("ky"), cb("cb"), ob("ob");
    wp.bound(o, 0, OB); // a block's channels: a constant loop
    if (target.has_gpu()) {
        wp.reorder(kx, ky, o, c, cb, ob).gpu_blocks(c, cb, ob).gpu_threads(o);
        return;
    }
    const int vec = std::max(1, target.vector_bits / 32);
    if (OB >= vec) wp.vectorize(o, vec);
    wp.parallel(ob);
}

BufferBase reference_conv2d_pack(const OperatorInstance &inst) {
    const int CI = int(inst.shape[0]), CO = int(inst.shape[1]);
    const float *w = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
    BufferBase out(Float(32), packed_weight_extents(CI, CO), "conv2d_pack");
    float *o = reinterpret_cast<float *>(out.raw_data());
    for (int co = 0; co < CO; co++)
        for (int ci = 0; ci < CI; ci++)
            for (int k = 0; k < 9; k++)
                o[packed_weight_index(CI, CO, co, ci, k / 3, k % 3)] =
                    w[(size_t(co) * CI + ci) * 9 + k];
    return out;
}

double conv2d_work(const std::vector<int64_t> &s) {
    return 2.0 * 9.0 * double(s[0]) * double(s[1]) * double(s[2]) * double(s[3]);
}

void schedule_conv2d_nchw(OperatorInstance &inst, GeneratorContext &ctx) {
    schedule_conv2d(inst, ctx, Layout::NCHW);
}

void schedule_conv2d_nhwc(OperatorInstance &inst, GeneratorContext &ctx) {
    schedule_conv2d(inst, ctx, Layout::NHWC);
}

} // namespace

Operator conv2d_operator() {
    Operator op;
    op.name = "conv2d";
    op.description = "3x3 convolution, stride 1, zero padding 1, batch 1, NCHW float32";
    op.shape_names = {"C_in", "C_out", "H", "W"};
    op.default_shape = {64, 64, 56, 56};
    op.make = [](const std::vector<int64_t> &shape) {
        return make_conv2d(shape, false, Layout::NCHW);
    };
    op.reference = reference_conv2d;
    op.work = conv2d_work;
    op.work_unit = "GF/s";
    // A float sum of 9 * C_in products of values in [-1, 1] against a double reference: the
    // rounding error grows like eps * sqrt(9 C_in) * |partial sums|, ~1e-5 at C_in = 64 and
    // ~1e-4 at C_in = 512; 1e-3 keeps margin while a missed tap or channel is off by O(0.1).
    op.tolerance = 1e-3;
    define_by_generator(op, schedule_conv2d_nchw);
    return op;
}

Operator conv2d_packed_operator() {
    Operator op = conv2d_operator();
    op.name = "conv2d_packed";
    op.description =
        "conv2d on weights packed once by conv2d_pack (wp[C_out/OB][C_in/B][3][3][B][OB])";
    op.make = [](const std::vector<int64_t> &shape) {
        return make_conv2d(shape, true, Layout::NCHW);
    };
    define_by_generator(op, schedule_conv2d_nchw);
    return op;
}

Operator conv2d_nhwc_operator() {
    Operator op = conv2d_operator();
    op.name = "conv2d_nhwc";
    op.description = "conv2d on NHWC input and output (channels innermost) and weights packed by "
                     "conv2d_pack";
    op.make = [](const std::vector<int64_t> &shape) {
        return make_conv2d(shape, true, Layout::NHWC);
    };
    op.reference = reference_conv2d_nhwc;
    define_by_generator(op, schedule_conv2d_nhwc);
    return op;
}

Operator conv2d_pack_operator() {
    Operator op;
    op.name = "conv2d_pack";
    op.description = "conv2d's OIHW weights repacked for conv2d_packed, once per set of weights";
    op.shape_names = {"C_in", "C_out"};
    op.default_shape = {64, 64};
    op.make = make_conv2d_pack;
    op.reference = reference_conv2d_pack;
    op.work = [](const std::vector<int64_t> &s) { return 2.0 * 4.0 * 9.0 * double(s[0] * s[1]); };
    op.work_unit = "GB/s";
    op.tolerance = 0; // a copy
    define_by_generator(op, schedule_conv2d_pack);
    return op;
}

} // namespace kiln::apps
