// The matrix products of the matrix units' input types, tensorized on Intel AMX:
//
// matmul_u8s8: C = A * B of 8-bit integers summed in int32, as quantized layers compute it
// (oneDNN's u8 x s8 -> s32 matmul). Integer sums wrap (as in the hardware): the results are
// exact.
// matmul_bf16: C = A * B of bfloat16 summed in float32 (oneDNN's bf16 x bf16 -> f32 matmul).
//
// A is row-major M x K: A(k, i) is A[i][k]. B (K x N) comes packed for the matrix units (Intel
// AMX, VNNI), as oneDNN's weights are reordered once: in blocks of 16 columns, each block K/L
// rows of 64 bytes (16 columns x L consecutive k, L = 4 values of 8 bits or 2 of 16: the k
// lanes), B(t, jj, kl, jb) = B[L kl + t][16 jb + jj], so a tile of B (16 rows of kl) is 1 KB in
// one piece. (With columns a whole row of B apart, the 16 rows of a tile are 4 N bytes apart, all
// in one L1 set at N = 1024: 0.47-0.54 ms at 1024^3 on 2 threads against 0.38 for oneDNN.)
// C(j, i) is C[i][j]. K must be a multiple of L and N of 16.
#include <algorithm>
#include <vector>

#include "apps/Builtin.h"
#include "lang/Error.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

constexpr int column_block = 16; // a tile's 16 columns of 4-byte sums

// What one of the operators multiplies: its element types and the range of its random inputs.
struct TileMatmul {
    const char *name;
    Type a, b, c;
    double a_lo, a_hi, b_lo, b_hi;
    /// The values of k in 4 bytes of an input.
    int k_lanes() const { return 4 / a.bytes(); }
};

const TileMatmul u8s8 = {"matmul_u8s8", UInt(8), Int(8), Int(32), 0, 255, -128, 127};
const TileMatmul bf16 = {"matmul_bf16", BFloat(16), BFloat(16), Float(32), -1, 1, -1, 1};

OperatorInstance make_tile_matmul(const TileMatmul &kind, const std::vector<int64_t> &shape) {
    const int L = kind.k_lanes();
    int M = shape_extent(kind.name, "M", shape[0]);
    int N = shape_extent(kind.name, "N", shape[1]);
    int K = shape_extent(kind.name, "K", shape[2], L);
    if (K % L != 0) {
        user_error(kind.name, ": K = ", K, " is not a multiple of ", L, "; B holds ", L,
                   " consecutive k of each column together, so pad K to a multiple of ", L,
                   " with zeros");
    }
    if (N % column_block != 0) {
        user_error(kind.name, ": N = ", N,
                   " is not a multiple of 16; B comes in blocks of 16 "
                   "columns, so pad N to a multiple of 16 with zero columns");
    }
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam A(kind.a, 2, "A"), B(kind.b, 4, "B");
    Var j("j"), i("i");
    RDom k({{0, L}, {0, K / L}}, "k");
    Func C("C");
    C(j, i) = make_zero(kind.c);
    // The products in the sum's type: bfloat16 products are exact in float32.
    C(j, i) += cast(kind.c, A(k.x + L * k.y, i)) *
               cast(kind.c, B(k.x, j % column_block, k.y, j / column_block));
    inst.inputs = {A, B};
    inst.input_data = {random_buffer(kind.a, {K, M}, "A", 1, kind.a_lo, kind.a_hi),
                       random_buffer(kind.b, {L, column_block, K / L, N / column_block}, "B", 2,
                                     kind.b_lo, kind.b_hi)};
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
void schedule_tile_matmul(const TileMatmul &kind, OperatorInstance &inst, GeneratorContext &ctx) {
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
    bool amx = target.has_matrix_unit(kind.a);
    if (ctx.knob("tensorize", amx ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0}) != 0) {
        int64_t tm = ctx.knob("tile_rows", dividing_tiles(M));
        // A block of c is one tile wide (16 columns: one block of B): a tile of B loaded serves
        // two multiplies, a tile of A one. The tuner may take two tiles (2 x 2: each tile loaded
        // serves two), the columns split by 16 in two loops so that B's blocks stay linear in
        // them (j % 16 is the inner loop, j / 16 the outer's 2 jo + jt). On the Intel Xeon the
        // wider block was no faster (interleaved, ms, 1 / 2 threads: bf16 2048^3 17.0-17.7 /
        // 9.5-9.6 one tile wide, 18.1-18.6 / 9.6-9.9 two; u8s8 2048^3 7.1-7.2 / 3.4-4.2 against
        // 7.4-8.6 / 3.5-3.6): not the hand choice.
        const int64_t one = column_block, two = 2 * one;
        int64_t tn = ctx.knob("tile_cols", N % two == 0 ? std::vector<int64_t>{one, two}
                                                        : std::vector<int64_t>{one});
        // Panels of B's columns outermost: all rows of blocks pass over one panel (K x panel
        // elements, 512 KB of int8 at K = 2048) while it stays in L2, instead of streaming all of
        // B per row of blocks. Where B fits in 1 MiB it stays in L2 anyway and the split only
        // costs (u8s8 1024^3 on 2 threads: 0.44 ms whole, 0.48 in panels of 256; 2048^3: 5.8
        // whole, 4.6 in panels; bf16 1024^3, B 2 MiB: 1.42 whole, 1.24-1.28 in panels).
        // The widest panel of at most 1 MiB first (with k in chunks, u8s8 2048^3 on 2 threads:
        // 3.7-3.9 ms in panels of 512 columns, 1 MiB, against 4.1-4.4 in panels of 256).
        int64_t K = inst.shape[2];
        const int64_t panel_budget = int64_t(1) << 20;
        std::vector<int64_t> panels;
        for (int64_t p : {1024, 512, 256, 128, 64}) {
            if (p % tn == 0 && N % p == 0 && p < N) panels.push_back(p);
        }
        std::stable_partition(panels.begin(), panels.end(),
                              [&](int64_t p) { return K * p * kind.b.bytes() <= panel_budget; });
        int64_t b_bytes = K * N * kind.b.bytes();
        panels.insert(b_bytes > panel_budget ? panels.end() : panels.begin(), N); // whole
        int64_t panel = ctx.knob("panel_cols", panels);
        // Chunks of k outside the block's columns: a block's rows of A over one chunk stay in
        // L1 for all the tiles of a panel (a tile multiply takes 2 KB of A and B per 16 cycles,
        // more than L2 gives). The k steps (4 bytes each) per chunk: whole K where the block's
        // rows of A fit in 32 KB, else 256 (1 KB of each row) first, or 128 where B comes in
        // panels of at most 256 columns (each chunk of A serving 16 tiles or fewer): bf16 with
        // K = 2048 ran 3-15% faster in chunks of 128 (interleaved, ms, 1 / 2 threads: 2048^3
        // 16.7-17.5 / 7.2-7.6 against 17.5-18.2 / 7.6-8.8; 2048x4096x2048 33.8-34.1 / 18.1
        // against 34.7-36.8 / 19.6-19.8), where panels of 512 columns ran 5-10% slower in them
        // (bf16 and u8s8 1024^3, u8s8 2048^3).
        int64_t k_steps = K / kind.k_lanes();
        std::vector<int64_t> chunks;
        std::vector<int64_t> chunk_order = panel < N && panel <= 256
                                               ? std::vector<int64_t>{128, 256, 512}
                                               : std::vector<int64_t>{256, 128, 512};
        for (int64_t c : chunk_order) {
            if (k_steps % c == 0 && c < k_steps) chunks.push_back(c);
        }
        const int64_t l1_budget = int64_t(32) << 10;
        bool a_in_l1 = tm * K * kind.a.bytes() <= l1_budget;
        chunks.insert(a_in_l1 ? chunks.begin() : chunks.end(), k_steps); // whole
        int64_t chunk = ctx.knob("k_chunk", chunks);
        // Constant extents: the tiles divide them, so the nest has no tail guards.
        C.bound(j, 0, int(N)).bound(i, 0, int(M));
        Var jb("jb"), jp("jp"), jt("jt"), jc("jc");
        RVar kyo("k.yo"), kyi("k.yi");
        Stage s = C.update();
        if (panel < N) {
            s.split(j, jb, jp, int(panel)).split(jp, jo, ji, int(tn));
        } else {
            s.split(j, jo, ji, int(tn));
        }
        std::vector<VarOrRVar> cols = {ji};
        if (tn > column_block) {
            s.split(ji, jt, jc, int(column_block));
            cols = {jc, jt};
        }
        s.split(i, io, ii, int(tm));
        std::vector<VarOrRVar> order = {rx};
        order.insert(order.end(), cols.begin(), cols.end());
        if (chunk < k_steps) {
            s.split(ky, kyo, kyi, int(chunk));
            order.insert(order.end(), {kyi, ii, jo, kyo, io});
        } else {
            order.insert(order.end(), {ry, ii, jo, io});
        }
        if (panel < N) order.push_back(jb);
        s.reorder(order);
        s.parallel(io).tensorize(ii);
        // A's rows of the block over one chunk of k copied to a buffer of their own, rows a chunk
        // apart, per chunk (as oneDNN's brgemm copies A). Rows a multiple of 2 KB apart fall
        // into at most two of L1's 64 sets per 64 bytes of k (one at 4 KB), so the block's 32
        // rows of a tile column exceed the 12 ways and each pass over the panel's tiles reloads
        // them from L2: u8s8 2048^3 on one thread 7.5-8.1 ms with the copy against 7.8-9.1
        // without (K = 3072, rows 3 KB apart, ran 15% more operations per second than 2048
        // and 4096 uncopied); where A's rows are 1 KB apart (u8s8 1024^3, no chunks) the copy
        // only costs (0.44 against 0.39-0.44 ms on two threads). The hand copies where the rows
        // alias and k is in chunks.
        bool aliasing = K * kind.a.bytes() % 2048 == 0 && chunk < k_steps;
        if (ctx.knob("copy_a",
                     aliasing ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 1}) != 0) {
            Func a_block = inst.inputs[0].in(C);
            a_block.compute_at(C, chunk < k_steps ? VarOrRVar(kyo) : VarOrRVar(io));
            a_block.vectorize(_0, int(std::min<int64_t>(64, chunk * 4) / kind.a.bytes()));
        }
        return;
    }
    C.update()
        .split(j, jo, ji, int(std::min<int64_t>(lanes, N)), TailStrategy::GuardWithIf)
        .reorder({ji, rx, ry, jo, i})
        .vectorize(ji)
        .unroll(rx)
        .parallel(i);
}

// The product with plain loops, T the inputs' C type, S the sum's: int32 sums wrap as the
// hardware's do; float sums are taken in double, the exact value the kernels approach.
template <typename TA, typename TB, typename S>
BufferBase reference_tile_matmul(const TileMatmul &kind, const OperatorInstance &inst) {
    const int L = kind.k_lanes();
    int M = int(inst.shape[0]), N = int(inst.shape[1]), K = int(inst.shape[2]);
    const auto *a = reinterpret_cast<const TA *>(inst.input_data[0].raw_data());
    const auto *b = reinterpret_cast<const TB *>(inst.input_data[1].raw_data());
    BufferBase out(kind.c, {N, M}, "C");
    auto *c = reinterpret_cast<S *>(out.raw_data());
    using Sum = std::conditional_t<std::is_integral_v<S>, S, double>;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            Sum s = 0;
            for (int k = 0; k < K; k++) {
                int t = k % L, kl = k / L;
                size_t block = size_t(j / column_block) * (K / L) + size_t(kl);
                s += Sum(S(a[size_t(i) * K + k])) *
                     Sum(S(b[(block * column_block + size_t(j % column_block)) * L + t]));
            }
            c[size_t(i) * N + j] = S(s);
        }
    }
    return out;
}

Operator tile_matmul_operator(const TileMatmul &kind) {
    Operator op;
    op.name = kind.name;
    op.shape_names = {"M", "N", "K"};
    op.default_shape = {1024, 1024, 1024};
    op.make = [&kind](const std::vector<int64_t> &shape) { return make_tile_matmul(kind, shape); };
    // A multiply and an add per product, as for matmul's flops.
    op.work = [](const std::vector<int64_t> &s) {
        return 2.0 * double(s[0]) * double(s[1]) * double(s[2]);
    };
    define_by_generator(op, [&kind](OperatorInstance &inst, GeneratorContext &ctx) {
        schedule_tile_matmul(kind, inst, ctx);
    });
    return op;
}

} // namespace

Operator matmul_u8s8_operator() {
    Operator op = tile_matmul_operator(u8s8);
    op.description =
        "uint8 x int8 matrix product summed in int32 (B packed for AMX: 16-column blocks of 4 k)";
    op.reference = [](const OperatorInstance &inst) {
        return reference_tile_matmul<uint8_t, int8_t, int32_t>(u8s8, inst);
    };
    op.work_unit = "GOP/s";
    // Integer sums are exact.
    op.tolerance = 0;
    return op;
}

Operator matmul_bf16_operator() {
    Operator op = tile_matmul_operator(bf16);
    op.description = "bfloat16 matrix product summed in float32 (B packed for AMX: 16-column "
                     "blocks of 2 k)";
    op.reference = [](const OperatorInstance &inst) {
        return reference_tile_matmul<bfloat16_t, bfloat16_t, float>(bf16, inst);
    };
    op.work_unit = "GF/s";
    // The products are exact in float32; the sums round there (the matrix unit flushes
    // denormals too), against a reference summed in double: matmul's tolerance.
    op.tolerance = 1e-3;
    return op;
}

} // namespace kiln::apps
