// matmul_u8s8: C = A * B of 8-bit integers summed in int32, as quantized layers compute it
// (oneDNN's u8 x s8 -> s32 matmul). A is row-major M x K of uint8: A(k, i) is A[i][k]. B (K x N of
// int8) comes packed for the matrix units (Intel AMX, VNNI), as oneDNN's weights are reordered
// once: in blocks of 16 columns, each block K/4 rows of 64 bytes (16 columns x 4 consecutive k),
// B(t, jj, k4, jb) = B[4 k4 + t][16 jb + jj], so a tile of B (16 rows of k4) is 1 KB in one piece.
// (With columns a whole row of B apart, the 16 rows of a tile are 4 N bytes apart, all in one L1
// set at N = 1024: 0.47-0.54 ms at 1024^3 on 2 threads against 0.38 for oneDNN.) C(j, i) is
// C[i][j] in int32. K must be a multiple of 4 and N of 16. Integer sums wrap (as in the
// hardware): the results are exact.
#include <algorithm>

#include "apps/Builtin.h"
#include "lang/Error.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

constexpr int k_lanes = 4;
constexpr int column_block = 16; // a tile's 16 int32 columns

OperatorInstance make_matmul_u8s8(const std::vector<int64_t> &shape) {
    int M = shape_extent("matmul_u8s8", "M", shape[0]);
    int N = shape_extent("matmul_u8s8", "N", shape[1]);
    int K = shape_extent("matmul_u8s8", "K", shape[2], k_lanes);
    if (K % k_lanes != 0) {
        user_error("matmul_u8s8: K = ", K,
                   " is not a multiple of 4; B holds 4 consecutive k of "
                   "each column together, so pad K to a multiple of 4 with zeros");
    }
    if (N % column_block != 0) {
        user_error("matmul_u8s8: N = ", N,
                   " is not a multiple of 16; B comes in blocks of 16 "
                   "columns, so pad N to a multiple of 16 with zero columns");
    }
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam A(UInt(8), 2, "A"), B(Int(8), 4, "B");
    Var j("j"), i("i");
    RDom k({{0, k_lanes}, {0, K / k_lanes}}, "k");
    Func C("C");
    C(j, i) = 0;
    C(j, i) += cast<int32_t>(A(k.x + k_lanes * k.y, i)) *
               cast<int32_t>(B(k.x, j % column_block, k.y, j / column_block));
    inst.inputs = {A, B};
    inst.input_data = {random_buffer(UInt(8), {K, M}, "A", 1, 0, 255),
                       random_buffer(Int(8), {k_lanes, column_block, K / k_lanes, N / column_block},
                                     "B", 2, -128, 127)};
    inst.output = C;
    inst.output_extents = {N, M};
    return inst;
}

// The block extents of at most 32 (two AMX tiles) that divide the extent (a tensorized nest has
// no tails), the largest first.
std::vector<int64_t> dividing_tiles(int64_t extent) {
    std::vector<int64_t> tiles;
    for (int64_t t = std::min<int64_t>(32, extent); t >= 1; t--) {
        if (extent % t == 0) tiles.push_back(t);
    }
    return tiles;
}

// With AMX: C's blocks of up to 32 x 32 int32 (2 x 2 tiles), each summed over the whole of K in
// tile registers (a tile multiply per tile per 64 values of k: Stage::tensorize; each tile of A
// and B loaded serves two multiplies), rows of blocks in parallel. Elsewhere
// the sums of 16 columns in a vector, k innermost; on a GPU a thread per element of C.
void schedule_matmul_u8s8(OperatorInstance &inst, GeneratorContext &ctx) {
    const Target &target = ctx.target();
    Func C = inst.output;
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii");
    RVar kx("k.x"), ky("k.y");
    VarOrRVar rx(kx), ry(ky);
    int64_t M = inst.shape[0], N = inst.shape[1];
    if (target.has_gpu()) {
        C.gpu_tile(j, i, jo, io, ji, ii, 16, 16);
        C.update().gpu_tile(j, i, jo, io, ji, ii, 16, 16);
        return;
    }
    int lanes = std::max(1, target.vector_bits / 32);
    C.vectorize(j, int(std::min<int64_t>(lanes, N))).parallel(i);
    bool amx = target.has_feature("amx-tile") && target.has_feature("amx-int8");
    if (ctx.knob("tensorize", amx ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0}) != 0) {
        int64_t tm = ctx.knob("tile_rows", dividing_tiles(M));
        // A block of c is one tile wide: the 16 columns of one block of B (wider, j % 16 would
        // not be linear in the block's columns).
        int64_t tn = column_block;
        // Panels of B's columns outermost: all rows of blocks pass over one panel (K x panel
        // bytes, 512 KB at K = 2048) while it stays in L2, instead of streaming all of B per row
        // of blocks. Where B fits in 1 MiB it stays in L2 anyway and the split only costs (1024^3
        // on 2 threads: 0.44 ms whole, 0.48 in panels of 256; 2048^3: 5.8 whole, 4.6 in panels).
        std::vector<int64_t> panels;
        for (int64_t p : {256, 128, 512, 64, 1024}) {
            if (p % tn == 0 && N % p == 0 && p < N) panels.push_back(p);
        }
        int64_t K = inst.shape[2];
        panels.insert(K * N > (int64_t(1) << 20) ? panels.end() : panels.begin(), N); // whole
        int64_t panel = ctx.knob("panel_cols", panels);
        // Constant extents: the tiles divide them, so the nest has no tail guards.
        C.bound(j, 0, int(N)).bound(i, 0, int(M));
        Var jb("jb"), jp("jp");
        Stage s = C.update();
        if (panel < N) {
            s.split(j, jb, jp, int(panel)).split(jp, jo, ji, int(tn));
        } else {
            s.split(j, jo, ji, int(tn));
        }
        s.split(i, io, ii, int(tm));
        if (panel < N) {
            s.reorder({rx, ji, ry, ii, jo, io, jb});
        } else {
            s.reorder({rx, ji, ry, ii, jo, io});
        }
        s.parallel(io).tensorize(ii);
        return;
    }
    C.update()
        .split(j, jo, ji, int(std::min<int64_t>(lanes, N)), TailStrategy::GuardWithIf)
        .reorder({ji, rx, ry, jo, i})
        .vectorize(ji)
        .unroll(rx)
        .parallel(i);
}

BufferBase reference_matmul_u8s8(const OperatorInstance &inst) {
    int M = int(inst.shape[0]), N = int(inst.shape[1]), K = int(inst.shape[2]);
    const uint8_t *a = inst.input_data[0].raw_data();
    const auto *b = reinterpret_cast<const int8_t *>(inst.input_data[1].raw_data());
    BufferBase out(Int(32), {N, M}, "C");
    auto *c = reinterpret_cast<int32_t *>(out.raw_data());
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            int32_t s = 0;
            for (int k = 0; k < K; k++) {
                int t = k % k_lanes, k4 = k / k_lanes;
                size_t block = size_t(j / column_block) * (K / k_lanes) + size_t(k4);
                s += int32_t(a[size_t(i) * K + k]) *
                     int32_t(b[(block * column_block + size_t(j % column_block)) * k_lanes + t]);
            }
            c[size_t(i) * N + j] = s;
        }
    }
    return out;
}

} // namespace

Operator matmul_u8s8_operator() {
    Operator op;
    op.name = "matmul_u8s8";
    op.description =
        "uint8 x int8 matrix product summed in int32 (B packed for AMX: 16-column blocks of 4 k)";
    op.shape_names = {"M", "N", "K"};
    op.default_shape = {1024, 1024, 1024};
    op.make = make_matmul_u8s8;
    op.reference = reference_matmul_u8s8;
    // A multiply and an add per product, as for matmul's flops.
    op.work = [](const std::vector<int64_t> &s) {
        return 2.0 * double(s[0]) * double(s[1]) * double(s[2]);
    };
    op.work_unit = "GOP/s";
    // Integer sums are exact.
    op.tolerance = 0;
    define_by_generator(op, schedule_matmul_u8s8);
    return op;
}

} // namespace kiln::apps
