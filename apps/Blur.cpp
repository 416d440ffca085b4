// blur and blur_u16: the two-stage 3x3 box blur of Halide's apps/blur, in float32 and uint16.
//   blur_x(x, y) = (in(x, y) + in(x + 1, y) + in(x + 2, y)) / 3
//   blur_y(x, y) = (blur_x(x, y) + blur_x(x, y + 1) + blur_x(x, y + 2)) / 3
// Borders: as in Halide's app, the output covers only the points whose whole 3x3 window lies
// inside the input, so a W x H input gives a (W - 2) x (H - 2) output (no boundary condition);
// the reference does the same (and so do bench/bench_common.h's). float32 multiplies each sum by
// the float 1/3, as the reference does; uint16 adds in uint16 (inputs are below 2^14, so three
// of them never wrap) and divides by 3, exactly.
#include <algorithm>

#include "apps/Builtin.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

OperatorInstance make_blur(const std::vector<int64_t> &shape, Type t, const std::string &name) {
    int W = shape_extent(name, "W", shape[0], 3);
    int H = shape_extent(name, "H", shape[1], 3);
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam in(t, 2, "in");
    Var x("x"), y("y");
    Func blur_x("blur_x"), blur_y(name);
    auto third = [&](const Expr &e) {
        return t.is_float() ? e * (1.f / 3.f) : e / make_const(t, int64_t(3));
    };
    blur_x(x, y) = third(in(x, y) + in(x + 1, y) + in(x + 2, y));
    blur_y(x, y) = third(blur_x(x, y) + blur_x(x, y + 1) + blur_x(x, y + 2));
    inst.inputs = {in};
    inst.input_data = {t.is_float() ? random_buffer(t, {W, H}, "in", 31, 0, 1)
                                    : random_buffer(t, {W, H}, "in", 32, 0, 16383)};
    inst.output = blur_y;
    inst.output_extents = {W - 2, H - 2};
    inst.stages = {blur_x};
    return inst;
}

// Tiles of one vector by 6 rows (16 x 6 floats, 32 x 6 uint16 with AVX-512), the rows of tiles
// in parallel: per tile, blur_x is computed into a small buffer (8 rows of one vector, in L1),
// three loads and adds per vector, then each output vector adds three of its rows. So each input
// vector is loaded three times and each output costs ~6.7 loads and adds where blur_x inlined
// costs 9 loads and 8 adds, and a row of tiles walks 8 input rows and 6 output rows at once, few
// enough streams for the hardware prefetchers. On the AMD EPYC Zen 4 (4096², interleaved) this
// ran 1.4-1.6x the schedule it replaced on 1 thread (7.0-7.9 against 9.9-11.2 ms) and 1.2x on 2,
// blur_u16 1.0-1.15x: strips of 32 rows with blur_x inlined, each output reading its 3 x 3
// window (docs/BENCHMARKS.md). The tuner's automatic space found it first (docs/AUTOTUNE.md);
// 8 rows per tile (10 rows of blur_x, 18 streams) measured 1.2x slower than 6, 4 rows 5-10%.
// The GPU kernel (target.gpu != None), as knobs whose defaults are the hand schedule: a block
// per tile_x x tile_y (32 x 6) tile of the output, a thread per output; with blur_x_at shared
// (the default) the block first computes its tile of blur_x, two rows taller, into shared
// memory, a thread per point (32 x 8: a warp per row, 256 threads, which every OpenCL device
// kiln has met runs; NVIDIA's OpenCL on the H200 ran the 32 x 10 block of a 32 x 8 tile at most
// 256 work-items per group, CL_KERNEL_WORK_GROUP_SIZE), then each thread reads its three rows of
// it ("inline" recomputes blur_x in each output's thread). Tiles shrink to fit small images;
// constraints keep threads and shared memory per block within the device's limits.
void schedule_blur_gpu(OperatorInstance &inst, GeneratorContext &ctx) {
    const int64_t W = inst.shape[0] - 2, H = inst.shape[1] - 2;
    const int64_t bytes = inst.output.output_type().bytes();
    const int64_t hand_x = halved_to_fit(32, W);
    const int64_t hand_y = halved_to_fit(6, H);
    const int tile_x = int(ctx.knob("tile_x", hand_first(hand_x, powers_of_two(4, 256))));
    const int tile_y = int(ctx.knob("tile_y", hand_first(hand_y, powers_of_two(1, 64))));
    const bool shared = ctx.knob_choice("blur_x_at", {"shared", "inline"}) == "shared";
    const int64_t threads = ctx.gpu_max_threads_per_block(),
                  shared_bytes = ctx.gpu_shared_memory_bytes();
    ctx.constraint("tile_x <= W and tile_y <= H",
                   tile_x <= std::max<int64_t>(W, 4) && tile_y <= std::max<int64_t>(H, 1));
    ctx.constraint("threads per block <= device limit (" + std::to_string(threads) + ")",
                   int64_t(tile_x) * (tile_y + (shared ? 2 : 0)) <= threads);
    ctx.constraint("shared memory per block <= device limit (" + std::to_string(shared_bytes) + ")",
                   !shared || int64_t(tile_x) * (tile_y + 2) * bytes <= shared_bytes);
    Func blur_y = inst.output, blur_x = inst.stages[0];
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    blur_y.gpu_tile(x, y, xo, yo, xi, yi, tile_x, tile_y);
    if (shared) blur_x.compute_at(blur_y, xo).store_in(MemoryType::GPUShared).gpu_threads(x, y);
}

// The CPU schedule, as knobs whose defaults are the hand schedule above (tiles of one vector by
// 6 rows), the template the tuner searches: tiles or strips of the output (tile_x x tile_y; a
// strip is tile_y rows), the vector width, where blur_x is computed, whether a tile's rows are
// unrolled, and whether tile rows or strips run in parallel.
void schedule_blur(OperatorInstance &inst, GeneratorContext &ctx) {
    const Target &target = ctx.target();
    if (target.has_gpu()) return schedule_blur_gpu(inst, ctx);
    const int64_t W = inst.shape[0] - 2, H = inst.shape[1] - 2;
    Type t = inst.output.output_type();
    const int vec = std::max(1, target.vector_bits / t.bits);
    std::vector<int64_t> lane_values;
    for (int l = std::max(2, vec / 2); l <= 2 * vec; l *= 2)
        lane_values.push_back(l);
    const bool strips = ctx.knob_choice("layout", {"tiles", "strips"}) == "strips";
    const int lanes = int(ctx.knob("lanes", hand_first(std::min<int64_t>(vec, W), lane_values)));
    // The hand tile: one vector wide (at least 8, tile_x's smallest value), 6 rows.
    const std::vector<int64_t> tile_x_values =
        hand_first(std::max<int64_t>(8, halved_to_fit(vec, W)), powers_of_two(8, 1024));
    const int tile_x = int(ctx.knob("tile_x", tile_x_values));
    const int tile_y =
        int(ctx.knob("tile_y", hand_first(halved_to_fit(6, H), powers_of_two(1, 128))));
    const std::string at = ctx.knob_choice("blur_x_at", {"tile", "inline", "row", "root"});
    const bool unroll_y = ctx.knob("unroll_y", {1, 0}) != 0;
    const bool parallel = ctx.knob("parallel", {1, 0}) != 0;
    ctx.constraint("tile_y <= H", tile_y <= std::max<int64_t>(H, 1));
    ctx.constraint("tiles: lanes <= tile_x <= W; strips: tile_x at its first value",
                   strips ? tile_x == tile_x_values[0]
                          : lanes <= tile_x && tile_x <= std::max<int64_t>(W, 8));
    ctx.constraint("blur_x_at tile needs tiles", !strips || at != "tile");
    ctx.constraint("unroll_y needs tile_y <= 8", !unroll_y || tile_y <= 8);

    Func blur_y = inst.output, blur_x = inst.stages[0];
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    // Constant loop extents and buffer sizes (the shape is the instance's, as in the automatic
    // space's schedules): without them, each tile recomputed its shifted-inward index and the
    // kernel ran 1.2-1.25x slower on 1 thread.
    blur_y.bound(x, 0, int(W)).bound(y, 0, int(H));
    if (strips) {
        blur_y.split(y, yo, yi, tile_y).vectorize(x, lanes);
    } else {
        blur_y.tile(x, y, xo, yo, xi, yi, tile_x, tile_y).vectorize(xi, lanes);
    }
    if (unroll_y) blur_y.unroll(yi);
    if (parallel) blur_y.parallel(yo);
    if (at == "inline") return;
    if (at == "tile") blur_x.compute_at(blur_y, xo);
    if (at == "row") blur_x.compute_at(blur_y, yo);
    if (at == "root") {
        blur_x.compute_root();
        if (parallel) blur_x.parallel(y);
    }
    blur_x.vectorize(x, lanes);
}

template <typename T>
BufferBase reference_blur(const OperatorInstance &inst, const std::string &name) {
    int W = int(inst.shape[0]), H = int(inst.shape[1]);
    const T *in = reinterpret_cast<const T *>(inst.input_data[0].raw_data());
    auto third = [](T v) -> T {
        if constexpr (std::is_floating_point_v<T>) {
            return v * (1.f / 3.f);
        } else {
            return T(v / 3);
        }
    };
    size_t OW = size_t(W - 2);
    std::vector<T> bx(OW * size_t(H));
    for (int y = 0; y < H; y++) {
        for (size_t x = 0; x < OW; x++) {
            const T *p = in + size_t(y) * W + x;
            bx[size_t(y) * OW + x] = third(T(T(p[0] + p[1]) + p[2]));
        }
    }
    BufferBase out(type_of<T>(), {W - 2, H - 2}, name);
    T *o = reinterpret_cast<T *>(out.raw_data());
    for (int y = 0; y < H - 2; y++) {
        for (size_t x = 0; x < OW; x++) {
            const T *p = bx.data() + size_t(y) * OW + x;
            o[size_t(y) * OW + x] = third(T(T(p[0] + p[OW]) + p[2 * OW]));
        }
    }
    return out;
}

Operator blur_common(const std::string &name, Type t) {
    Operator op;
    op.name = name;
    op.shape_names = {"W", "H"};
    op.default_shape = {4096, 4096};
    op.make = [name, t](const std::vector<int64_t> &s) { return make_blur(s, t, name); };
    // Bytes of the input read and the output written, once each.
    op.work = [t](const std::vector<int64_t> &s) {
        return double(t.bytes()) *
               (double(s[0]) * double(s[1]) + double(s[0] - 2) * double(s[1] - 2));
    };
    op.work_unit = "GB/s";
    return op;
}

} // namespace

Operator blur_operator() {
    Operator op = blur_common("blur", Float(32));
    op.description = "two-stage 3x3 box blur, float32, output smaller by 2 (no border)";
    op.reference = [](const OperatorInstance &i) { return reference_blur<float>(i, "blur"); };
    // The reference performs the same float operations in the same order (two adds, a multiply
    // by the float 1/3, per stage): the results are identical, up to contraction, which kiln
    // does not do by default. 1e-6 allows one ulp on values below 1.
    op.tolerance = 1e-6;
    define_by_generator(op, schedule_blur);
    return op;
}

Operator blur_u16_operator() {
    Operator op = blur_common("blur_u16", UInt(16));
    op.description = "two-stage 3x3 box blur, uint16, output smaller by 2 (no border)";
    op.reference = [](const OperatorInstance &i) {
        return reference_blur<uint16_t>(i, "blur_u16");
    };
    // Integer arithmetic in the same order: exact.
    op.tolerance = 0;
    define_by_generator(op, schedule_blur);
    return op;
}

} // namespace kiln::apps
