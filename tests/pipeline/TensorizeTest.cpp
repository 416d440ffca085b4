// Stage::tensorize (schedule/Tensorize.h): an 8-bit or bfloat16 matmul's tile loops become one
// tile_matmul intrinsic, emitted as Intel AMX instructions; the results equal the reference
// evaluator's where the machine has AMX (elsewhere those cases skip, saying why, and the code is
// still compiled for a named AMX CPU and its assembly checked); every misuse's message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "kiln.h"
#include "lang/IRVisitor.h"
#include "lang/ReferenceEvaluator.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

using test::error_of;

// c(j, i) = sum over k of a(k, i) * b(k % L, j, k / L): a is M x K row-major (x-first: a(k, i)
// is A[i][k]), b is B (K x N) with L consecutive k of each column together (the k lanes: 4 of 8
// bits, 2 of bfloat16), as AMX reads it. 8-bit inputs sum into int32, bfloat16 into float32.
template <typename A, typename B>
struct TileMatmul {
    static constexpr bool bf16 = std::is_same_v<A, bfloat16_t>;
    static constexpr int L = bf16 ? 2 : 4;
    using S = std::conditional_t<bf16, float, int32_t>;
    ImageParam a{type_of<A>(), 2, "tz_a"};
    ImageParam b{type_of<B>(), 3, "tz_b"};
    Func c{"tz_c"};
    Var j{"j"}, i{"i"}, jo{"jo"}, io{"io"}, ji{"ji"}, ii{"ii"};
    RDom r;
    int m, n, k;

    TileMatmul(int m, int n, int k) : r({{0, L}, {0, k / L}}, "tz_r"), m(m), n(n), k(k) {
        c(j, i) = make_zero(type_of<S>());
        c(j, i) += cast<S>(a(r.x + L * r.y, i)) * cast<S>(b(r.x, j, r.y));
    }

    // 16 x 16 tiles (or tm x tn), the whole reduction inside each, tile rows parallel.
    TileMatmul &schedule(int tm = 16, int tn = 16) {
        c.bound(j, 0, n).bound(i, 0, m);
        c.update()
            .split(j, jo, ji, tn)
            .split(i, io, ii, tm)
            .reorder({r.x, ji, r.y, ii, jo, io})
            .parallel(io)
            .tensorize(ii);
        return *this;
    }

    // Random inputs. bfloat16 ones are multiples of 1/32 in [-4, 4): with K <= 512 every sum
    // is a multiple of 1/1024 below 2^13, exact in float32 in any order, so the matrix unit's
    // results equal the reference evaluator's bit for bit.
    void set_inputs(uint32_t seed) {
        Buffer<A> ab({k, m}, "tz_a");
        Buffer<B> bb({L, n, k / L}, "tz_b");
        uint32_t s = seed;
        auto next = [&s] {
            s = s * 1664525u + 1013904223u;
            uint32_t r = s >> 24;
            if constexpr (bf16) {
                return bfloat16_t((float(r) - 128) / 32);
            } else {
                return r;
            }
        };
        for (int y = 0; y < m; y++) {
            for (int x = 0; x < k; x++)
                ab(x, y) = A(next());
        }
        for (int z = 0; z < k / L; z++) {
            for (int y = 0; y < n; y++) {
                for (int x = 0; x < L; x++)
                    bb(x, y, z) = B(next());
            }
        }
        a.set(ab);
        b.set(bb);
    }
};

class TileCalls : public IRVisitor {
public:
    int calls = 0;
    std::vector<std::string> loops;
    std::vector<Expr> args;

private:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::tile_matmul) {
            calls++;
            args = op->args;
        }
        IRVisitor::visit(op);
    }
    void visit(const For *op) override {
        loops.push_back(op->name);
        IRVisitor::visit(op);
    }
};

bool host_has_amx() {
    Target t = Target::host();
    return t.has_feature("amx-tile") && t.has_feature("amx-int8");
}

// The nest inside ii (16 rows, 16 columns, 4 lanes, K/4 = 50 steps) becomes one call with the
// tiles' shapes and strides (c's rows 48 int32 apart, a's rows K bytes apart, b's k4 rows 4 N
// apart) over the 48 steps of whole tiles, and the nest's own loops over the last 2 steps.
TEST(Tensorize, TheTileLoopsBecomeOneTileMatmul) {
    TileMatmul<uint8_t, int8_t> mm(32, 48, 200);
    mm.schedule();
    Pipeline p(mm.c);
    TileCalls t;
    t.include(p.lower().body);
    ASSERT_EQ(t.calls, 1);
    ASSERT_EQ(t.args.size(), 11u);
    // The whole reduction inside the tile: every tile starts at zero (c's initial value).
    EXPECT_TRUE(is_const_true(t.args[9])) << t.args[9];
    EXPECT_TRUE(is_const(t.args[6], 16)) << t.args[6];
    EXPECT_TRUE(is_const(t.args[7], 16)) << t.args[7];
    EXPECT_TRUE(is_const(t.args[8], 48)) << t.args[8];
    EXPECT_EQ(std::count(t.loops.begin(), t.loops.end(), "tz_c.s1.tz_r.y"), 1)
        << testing::PrintToString(t.loops);
    EXPECT_TRUE(is_const(t.args[3], 200) || t.args[3].as<Variable>()) << t.args[3];
    std::string text = p.lowered_text();
    EXPECT_NE(text.find("== after tensorize"), std::string::npos);
    EXPECT_NE(text.find("tile_matmul("), std::string::npos) << text;
    EXPECT_NE(text.find("tensorized"), std::string::npos) << "the loop before the pass";

    // A block of one row: its tensorized loop of one iteration stays a loop until the pass (the
    // simplifier once made it a let, and the nest silently ran as plain loops).
    TileMatmul<uint8_t, int8_t> one_row(5, 32, 64);
    one_row.schedule(1, 16);
    TileCalls row;
    row.include(Pipeline(one_row.c).lower().body);
    ASSERT_EQ(row.calls, 1);
    EXPECT_TRUE(is_const(row.args[6], 1)) << row.args[6];
}

// For a CPU with AMX the code has the tile instructions, the configuration LLVM writes, and the
// k loop keeps the sums in a tile register (one tile store per tile of c). u8 x s8 is tdpbusd;
// the other signednesses their own instruction.
TEST(Tensorize, CompilesToAMXInstructions) {
    Target spr = Target::parse("sapphirerapids");
    {
        TileMatmul<uint8_t, int8_t> mm(32, 32, 256);
        std::string s = Pipeline(mm.schedule().c).compile_jit(spr).assembly();
        EXPECT_NE(s.find("ldtilecfg"), std::string::npos) << s;
        EXPECT_NE(s.find("tileloadd"), std::string::npos);
        EXPECT_NE(s.find("tdpbusd"), std::string::npos);
        EXPECT_NE(s.find("tilestored"), std::string::npos);
    }
    {
        TileMatmul<int8_t, int8_t> mm(32, 32, 64);
        EXPECT_NE(Pipeline(mm.schedule().c).compile_jit(spr).assembly().find("tdpbssd"),
                  std::string::npos);
    }
    {
        TileMatmul<uint8_t, uint8_t> mm(32, 32, 64);
        EXPECT_NE(Pipeline(mm.schedule().c).compile_jit(spr).assembly().find("tdpbuud"),
                  std::string::npos);
    }
    {
        TileMatmul<int8_t, uint8_t> mm(32, 32, 64);
        EXPECT_NE(Pipeline(mm.schedule().c).compile_jit(spr).assembly().find("tdpbsud"),
                  std::string::npos);
    }
    {
        // bfloat16: 2 k a lane pair, a tile row 32 values of k.
        TileMatmul<bfloat16_t, bfloat16_t> mm(32, 32, 64);
        std::string s = Pipeline(mm.schedule().c).compile_jit(spr).assembly();
        EXPECT_NE(s.find("tdpbf16ps"), std::string::npos) << s;
        EXPECT_NE(s.find("tilestored"), std::string::npos);
    }
}

// Runs mm's tensorized schedule (blocks of tm x tn) on this machine and compares it with the
// reference evaluator bit for bit.
template <typename M>
void expect_reference_result(M &mm, int tm, int tn, uint32_t seed) {
    using S = typename M::S;
    mm.set_inputs(seed);
    Buffer<S> want = reference_realize(mm.c, {mm.n, mm.m});
    mm.schedule(tm, tn);
    Buffer<S> got({mm.n, mm.m}, "tz_c");
    Pipeline(mm.c).realize({got});
    for (int y = 0; y < mm.m; y++) {
        for (int x = 0; x < mm.n; x++)
            ASSERT_EQ(got(x, y), want(x, y)) << "at " << x << ", " << y << " seed " << seed;
    }
}

// Run on this machine and compared with the reference evaluator bit for bit: full tiles and
// whole 64-byte k steps; a k that leaves a remainder of k4 (a last, narrower pair of tiles);
// tiles narrower than 16 (12 x 8); signed a; blocks of several tiles.
TEST(Tensorize, MatchesTheReferenceOnAMX) {
    if (!host_has_amx()) {
        GTEST_SKIP() << "this CPU has no AMX (Target::host() lacks amx-tile or amx-int8): "
                     << Target::host().cpu << "; the code is checked by CompilesToAMXInstructions";
    }
    TileMatmul<uint8_t, int8_t> full(64, 64, 512);
    expect_reference_result(full, 16, 16, 1);
    TileMatmul<uint8_t, int8_t> rest(32, 48, 200);
    expect_reference_result(rest, 16, 16, 2);
    TileMatmul<uint8_t, int8_t> narrow(36, 40, 96);
    expect_reference_result(narrow, 12, 8, 3);
    TileMatmul<int8_t, int8_t> signed_a(32, 32, 128);
    expect_reference_result(signed_a, 16, 16, 4);
    // Blocks of 2 x 2 tiles: whole (32 x 32), and 24 x 20 (tiles of 16 and 8 rows, 16 and 4
    // columns) with a remainder of k.
    TileMatmul<uint8_t, int8_t> block(64, 64, 512);
    expect_reference_result(block, 32, 32, 5);
    TileMatmul<uint8_t, int8_t> uneven(48, 40, 136);
    expect_reference_result(uneven, 24, 20, 6);
    // Blocks of one row.
    TileMatmul<uint8_t, int8_t> rows(5, 32, 64);
    expect_reference_result(rows, 1, 16, 7);
}

// The k steps in chunks of `chunk` outside the tile loops (as matmul_u8s8's k_chunk does):
// each tile of c is visited once per chunk, at zero only in the first.
template <typename M>
void schedule_in_k_chunks(M &mm, int chunk) {
    Var jo("jo"), io("io"), ji("ji"), ii("ii");
    RVar yo("yo"), yi("yi");
    mm.c.bound(mm.j, 0, mm.n).bound(mm.i, 0, mm.m);
    mm.c.update()
        .split(mm.j, jo, ji, 16)
        .split(mm.i, io, ii, 16)
        .split(mm.r.y, yo, yi, chunk)
        .reorder({mm.r.x, ji, yi, ii, jo, yo, io})
        .tensorize(ii);
}

std::string lowered_text(const Func &f) {
    return Pipeline(f).lowered_text();
}

// c's zero initial value is folded into its tensorized update: no loop nest stores the zeros
// (the pure stage runs only for an empty RDom, which the simplifier removes here), and the
// tiles start at zero (tilezero) on their first visit instead of loading c. With the whole
// reduction in the tile that is every visit; with k in chunks outside, where the chunk loop is
// at its first value, which is known only at run time: both ways in the code.
TEST(Tensorize, AZeroInitialValueStartsTheTilesAtZero) {
    Target spr = Target::parse("sapphirerapids");
    {
        TileMatmul<uint8_t, int8_t> mm(32, 32, 256);
        mm.schedule();
        std::string text = lowered_text(mm.c);
        size_t at = text.find("== after tensorize");
        ASSERT_NE(at, std::string::npos);
        std::string after = text.substr(at, text.find("== after", at + 1) - at);
        EXPECT_EQ(after.find("tz_c.s0."), std::string::npos) << after;
        EXPECT_NE(after.find(", 16, 16, 64, true, 64)"), std::string::npos) << after;
        std::string s = Pipeline(mm.c).compile_jit(spr).assembly();
        EXPECT_NE(s.find("tilezero"), std::string::npos) << s;
        EXPECT_NE(s.find("tdpbusd"), std::string::npos);
    }
    {
        TileMatmul<uint8_t, int8_t> mm(32, 32, 512);
        schedule_in_k_chunks(mm, 32);
        TileCalls t;
        t.include(Pipeline(mm.c).lower().body);
        ASSERT_EQ(t.calls, 1);
        ASSERT_EQ(t.args.size(), 11u);
        const auto *eq = t.args[9].as<EQ>();
        ASSERT_TRUE(eq) << t.args[9];
        EXPECT_TRUE(eq->a.as<Variable>() && eq->a.as<Variable>()->name == "tz_c.s1.yo")
            << t.args[9];
        EXPECT_TRUE(is_const_zero(eq->b)) << t.args[9];
        EXPECT_TRUE(is_const(t.args[8], 32)) << t.args[8];
        std::string s = Pipeline(mm.c).compile_jit(spr).assembly();
        EXPECT_NE(s.find("tilezero"), std::string::npos) << s;
        EXPECT_NE(s.find("tileloadd"), std::string::npos) << s;
    }
}

// The sum restarted at zero by the algorithm itself, select(r.x == 0 && r.y == 0, 0, c(j, i)),
// maps onto the tiles' zero start too; a restart anywhere else is refused, saying why.
TEST(Tensorize, AnUpdateThatRestartsAtZeroStartsTheTilesThere) {
    struct Restart {
        ImageParam a{UInt(8), 2, "tu_a"}, b{Int(8), 3, "tu_b"};
        Func c{"tu_c"};
        Var j{"j"}, i{"i"}, io{"io"}, ii{"ii"};
        RDom r{{{0, 4}, {0, 16}}, "tu_r"};
        explicit Restart(const std::function<Expr(const RDom &, const Var &)> &where) {
            c(j, i) = 1;
            c(j, i) = select(where(r, j), 0, Expr(c(j, i))) +
                      cast<int32_t>(a(r.x + 4 * r.y, i)) * cast<int32_t>(b(r.x, j, r.y));
            c.bound(j, 0, 16).bound(i, 0, 16);
            c.update().split(i, io, ii, 16).reorder({r.x, j, r.y, ii, io}).tensorize(ii);
        }
    };
    Restart first([](const RDom &r, const Var &) { return r.x == 0 && r.y == 0; });
    TileCalls t;
    t.include(Pipeline(first.c).lower().body);
    ASSERT_EQ(t.args.size(), 11u);
    EXPECT_TRUE(is_const_true(t.args[9])) << t.args[9];

    Restart per_step([](const RDom &r, const Var &) { return r.y == 0; });
    std::string e = error_of([&] { Pipeline(per_step.c).lower(); });
    EXPECT_NE(e.find("which does not put k loop 'tu_c.s1.tu_r.x' at its first value"),
              std::string::npos)
        << e;
    Restart column([](const RDom &r, const Var &j) { return r.x == 0 && r.y == 0 && j == 3; });
    e = error_of([&] { Pipeline(column.c).lower(); });
    EXPECT_NE(e.find("does not hold exactly at the first value of one of the nest's k loops"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("write select(r.x == 0 && r.y == 0, 0, c(...)) + a * b"), std::string::npos)
        << e;
}

// Initial values that do not fold keep their pure stage: a nonzero one, and any in a Func
// whose update is not tensorized.
TEST(Tensorize, InitialValuesThatDoNotFoldAreStored) {
    auto pure_stage_loops = [](Func f) {
        TileCalls t;
        t.include(Pipeline(f).lower().body);
        return std::any_of(t.loops.begin(), t.loops.end(), [&](const std::string &l) {
            return l.rfind(f.name() + ".s0.", 0) == 0;
        });
    };
    {
        ImageParam a(UInt(8), 2, "tn_a"), b(Int(8), 3, "tn_b");
        Func c("tn_c");
        Var j("j"), i("i"), io("io"), ii("ii");
        RDom r({{0, 4}, {0, 16}}, "tn_r");
        c(j, i) = 5;
        c(j, i) += cast<int32_t>(a(r.x + 4 * r.y, i)) * cast<int32_t>(b(r.x, j, r.y));
        c.bound(j, 0, 16).bound(i, 0, 16);
        c.update().split(i, io, ii, 16).reorder({r.x, j, r.y, ii, io}).tensorize(ii);
        EXPECT_TRUE(pure_stage_loops(c));
        TileCalls t;
        t.include(Pipeline(c).lower().body);
        ASSERT_EQ(t.args.size(), 11u);
        EXPECT_TRUE(is_const_false(t.args[9])) << t.args[9];
    }
    {
        // Not tensorized: the update's nest reads c's stored zeros.
        TileMatmul<uint8_t, int8_t> mm(32, 32, 64);
        mm.c.update().parallel(mm.i);
        EXPECT_TRUE(pure_stage_loops(mm.c));
    }
}

// On this machine: the folded zero start gives the reference's results with the reduction whole
// in the tile, in chunks (a runtime choice between tilezero and loading c), with a remainder
// of k steps, for int8 and bfloat16; a nonzero initial value is loaded as before.
TEST(Tensorize, ZeroStartMatchesTheReferenceOnAMX) {
    if (!host_has_amx() || !Target::host().has_feature("amx-bf16")) {
        GTEST_SKIP() << "this CPU has no AMX int8 and bfloat16 units: " << Target::host().cpu
                     << "; the code is checked by AZeroInitialValueStartsTheTilesAtZero";
    }
    auto check = [](auto &mm, uint32_t seed, int chunk) {
        using S = typename std::remove_reference_t<decltype(mm)>::S;
        mm.set_inputs(seed);
        Buffer<S> want = reference_realize(mm.c, {mm.n, mm.m});
        schedule_in_k_chunks(mm, chunk);
        Buffer<S> got({mm.n, mm.m}, "tz_c");
        // Garbage first: the zeros must come from the tiles, not from a fresh buffer.
        for (int y = 0; y < mm.m; y++) {
            for (int x = 0; x < mm.n; x++)
                got(x, y) = S(77);
        }
        Pipeline(mm.c).realize({got});
        for (int y = 0; y < mm.m; y++) {
            for (int x = 0; x < mm.n; x++)
                ASSERT_EQ(got(x, y), want(x, y)) << "at " << x << ", " << y << " seed " << seed;
        }
    };
    TileMatmul<uint8_t, int8_t> chunks(48, 32, 512);
    check(chunks, 21, 32);
    TileMatmul<uint8_t, int8_t> rest(32, 48, 544); // chunks of 34 k steps: 32 in tiles, 2 in loops
    check(rest, 22, 34);
    TileMatmul<bfloat16_t, bfloat16_t> bf16(32, 32, 256);
    check(bf16, 23, 32);
    TileMatmul<uint8_t, int8_t> whole(32, 32, 256);
    expect_reference_result(whole, 16, 16, 24);
}

// bfloat16 sums into float32 (tdpbf16ps) on this machine, bit for bit (the inputs make every
// sum exact): whole tiles, a remainder of k steps, narrow tiles, blocks of 2 x 2 tiles.
TEST(Tensorize, BFloat16MatchesTheReferenceOnAMX) {
    if (!host_has_amx() || !Target::host().has_feature("amx-bf16")) {
        GTEST_SKIP() << "this CPU has no AMX bfloat16 unit (Target::host() lacks amx-tile or "
                        "amx-bf16): "
                     << Target::host().cpu << "; the code is checked by CompilesToAMXInstructions";
    }
    TileMatmul<bfloat16_t, bfloat16_t> full(64, 64, 512);
    expect_reference_result(full, 16, 16, 11);
    TileMatmul<bfloat16_t, bfloat16_t> rest(32, 48, 100);
    expect_reference_result(rest, 16, 16, 12);
    TileMatmul<bfloat16_t, bfloat16_t> narrow(36, 40, 96);
    expect_reference_result(narrow, 12, 8, 13);
    TileMatmul<bfloat16_t, bfloat16_t> block(64, 64, 256);
    expect_reference_result(block, 32, 32, 14);
    // A b whose columns are not 2 elements apart (a view of every other pair of a wider
    // buffer): the layout is checked when the pipeline runs.
    {
        TileMatmul<bfloat16_t, bfloat16_t> mm(16, 16, 32);
        mm.schedule();
        mm.set_inputs(1);
        Buffer<bfloat16_t> wide({4, 16, 16}, "tz_b");
        BufferBase view(BFloat(16), wide.raw_data(), {{0, 2, 1}, {0, 16, 4}, {0, 16, 64}}, "tz_b");
        mm.b.set(view);
        Buffer<float> out({16, 16}, "tz_c");
        std::string e;
        try {
            Pipeline(mm.c).realize({out});
        } catch (const std::exception &ex) {
            e = ex.what();
        }
        EXPECT_NE(e.find("the columns of 'tz_b' must be 2 elements apart"), std::string::npos) << e;
        EXPECT_NE(e.find("but they are 4 apart"), std::string::npos) << e;
    }
}

// b in blocks of 16 columns, b(t, jj, kl, jb) = B[4 kl + t][16 jb + jj] (matmul_u8s8's layout),
// c in blocks of 32 x 32 whose columns are split in two loops, j = 32 jo + 16 jt + ji: jt moves b
// by a block (b's stride 3, known when the pipeline runs).
struct BlockedTileMatmul {
    static constexpr int M = 64, N = 64, K = 256;
    ImageParam a{UInt(8), 2, "tzb_a"}, b{Int(8), 4, "tzb_b"};
    Func c{"tzb_c"};
    Var j{"j"}, i{"i"}, jo{"jo"}, jt{"jt"}, ji{"ji"}, io{"io"}, ii{"ii"};
    RDom r{{{0, 4}, {0, K / 4}}, "tzb_r"};

    BlockedTileMatmul() {
        c(j, i) = 0;
        c(j, i) += cast<int32_t>(a(r.x + 4 * r.y, i)) * cast<int32_t>(b(r.x, j % 16, r.y, j / 16));
        c.bound(j, 0, N).bound(i, 0, M);
        c.update()
            .split(j, jo, ji, 32)
            .split(ji, jt, ji, 16)
            .split(i, io, ii, 32)
            .reorder({r.x, ji, jt, r.y, ii, jo, io})
            .tensorize(ii);
    }
};

// One tile_matmul per block of 2 x 2 tiles, its b's second tile a block further; in its k loop 4
// multiplies on 2 tiles of a and 2 of b (each tile loaded serves two multiplies).
TEST(Tensorize, TwoTilesOfColumnsComeFromTwoBlocksOfB) {
    BlockedTileMatmul mm;
    TileCalls t;
    t.include(Pipeline(mm.c).lower().body);
    ASSERT_EQ(t.calls, 1);
    ASSERT_EQ(t.args.size(), 11u);
    EXPECT_TRUE(is_const(t.args[6], 32)) << t.args[6];
    EXPECT_TRUE(is_const(t.args[7], 32)) << t.args[7];
    const Variable *block = t.args[10].as<Variable>();
    ASSERT_NE(block, nullptr) << t.args[10];
    EXPECT_EQ(block->name, "tzb_b.stride.3");
    std::string s = Pipeline(mm.c).compile_jit(Target::parse("sapphirerapids")).assembly();
    size_t multiply = s.find("tdpbusd");
    ASSERT_NE(multiply, std::string::npos) << s;
    size_t from = s.rfind("\n.LBB", multiply), to = s.find("\tj", multiply);
    std::string loop = s.substr(from, to - from);
    auto count = [&](const std::string &what) {
        size_t n = 0;
        for (size_t at = loop.find(what); at != std::string::npos; at = loop.find(what, at + 1))
            n++;
        return n;
    };
    EXPECT_EQ(count("tdpbusd"), 4u) << loop;
    EXPECT_EQ(count("tileloadd"), 4u) << loop;
}

TEST(Tensorize, TwoTilesOfColumnsFromTwoBlocksMatchTheReferenceOnAMX) {
    if (!host_has_amx()) {
        GTEST_SKIP() << "this CPU has no AMX (Target::host() lacks amx-tile or amx-int8): "
                     << Target::host().cpu
                     << "; the code is checked by TwoTilesOfColumnsComeFromTwoBlocksOfB";
    }
    BlockedTileMatmul mm;
    const int M = mm.M, N = mm.N, K = mm.K;
    Buffer<uint8_t> ab({K, M}, "tzb_a");
    Buffer<int8_t> bb({4, 16, K / 4, N / 16}, "tzb_b");
    uint32_t seed = 21;
    auto next = [&seed] {
        seed = seed * 1664525u + 1013904223u;
        return uint8_t(seed >> 24);
    };
    ab.for_each_offset([&](int64_t o) { ab.raw_data()[o] = next(); });
    bb.for_each_offset([&](int64_t o) { bb.raw_data()[o] = next(); });
    mm.a.set(ab);
    mm.b.set(bb);
    Buffer<int32_t> got({N, M}, "tzb_c");
    Pipeline(mm.c).realize({got});
    Func plain("tzb_plain");
    plain(mm.j, mm.i) = 0;
    plain(mm.j, mm.i) += cast<int32_t>(mm.a(mm.r.x + 4 * mm.r.y, mm.i)) *
                         cast<int32_t>(mm.b(mm.r.x, mm.j % 16, mm.r.y, mm.j / 16));
    Buffer<int32_t> want = reference_realize(plain, {N, M});
    for (int y = 0; y < M; y++) {
        for (int x = 0; x < N; x++)
            ASSERT_EQ(got(x, y), want(x, y)) << "at " << x << ", " << y;
    }
}

TEST(Tensorize, MisusesSayWhatToChange) {
    // On the pure definition.
    {
        TileMatmul<uint8_t, int8_t> mm(32, 32, 64);
        std::string e = error_of([&] { Stage(mm.c.function(), 0).tensorize(mm.i); });
        EXPECT_NE(e.find("tensorize: 'tz_c' pure definition is not a reduction"), std::string::npos)
            << e;
        EXPECT_NE(e.find("tz_c.update(0).tensorize(i)"), std::string::npos) << e;
    }
    // Tiles larger than a tile register.
    {
        TileMatmul<uint8_t, int8_t> mm(128, 64, 64);
        mm.schedule(64, 16);
        std::string e = error_of([&] { Pipeline(mm.c).lower(); });
        EXPECT_NE(e.find("has extent 64 but a tensorized nest covers at most 2 x 2 tiles"),
                  std::string::npos)
            << e;
    }
    // Two tiles of columns around a columns loop narrower than a tile.
    {
        TileMatmul<uint8_t, int8_t> mm(32, 64, 64);
        Var jx("jx"), jy("jy"), jt("jt"), jz("jz");
        mm.c.bound(mm.j, 0, 64).bound(mm.i, 0, 32);
        mm.c.update()
            .split(mm.j, mm.jo, jx, 32)
            .split(jx, jt, jy, 16)
            .split(jy, jz, mm.ji, 8)
            .split(mm.i, mm.io, mm.ii, 16)
            .reorder({mm.r.x, mm.ji, jt, mm.r.y, mm.ii, jz, mm.jo, mm.io})
            .tensorize(mm.ii);
        std::string e = error_of([&] { Pipeline(mm.c).lower(); });
        EXPECT_NE(e.find("steps over two tiles of 16 columns, but the columns loop 'tz_c.s1.ji' "
                         "has extent 8; split the columns by 32 and then by 16, the 16 innermost"),
                  std::string::npos)
            << e;
    }
    // The reduction inside the tile loop is missing (r.y outside it).
    {
        TileMatmul<uint8_t, int8_t> mm(32, 32, 64);
        mm.c.bound(mm.j, 0, 32).bound(mm.i, 0, 32);
        mm.c.update()
            .split(mm.j, mm.jo, mm.ji, 16)
            .split(mm.i, mm.io, mm.ii, 16)
            .reorder({mm.r.x, mm.ji, mm.ii, mm.r.y, mm.jo, mm.io})
            .tensorize(mm.ii);
        std::string e = error_of([&] { Pipeline(mm.c).lower(); });
        EXPECT_NE(e.find("has no k steps loop"), std::string::npos) << e;
    }
    // A vectorized loop inside the nest.
    {
        TileMatmul<uint8_t, int8_t> mm(32, 32, 64);
        mm.c.bound(mm.j, 0, 32).bound(mm.i, 0, 32);
        mm.c.update()
            .split(mm.j, mm.jo, mm.ji, 16)
            .split(mm.i, mm.io, mm.ii, 16)
            .reorder({mm.r.x, mm.ji, mm.r.y, mm.ii, mm.jo, mm.io})
            .vectorize(mm.ji)
            .tensorize(mm.ii);
        std::string e = error_of([&] { Pipeline(mm.c).lower(); });
        EXPECT_NE(e.find("is vectorized; the loops of a tensorized nest must be plain loops"),
                  std::string::npos)
            << e;
    }
    // A 1-D reduction indexed r % 4 and r / 4: not linear.
    {
        ImageParam a(UInt(8), 2, "tz1_a"), b(Int(8), 3, "tz1_b");
        Func c("tz1_c");
        Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii");
        RDom r(0, 64, "tz1_r");
        c(j, i) = 0;
        c(j, i) += cast<int32_t>(a(r, i)) * cast<int32_t>(b(r % 4, j, r / 4));
        c.bound(j, 0, 16).bound(i, 0, 16);
        c.update()
            .split(j, jo, ji, 16)
            .split(i, io, ii, 16)
            .reorder({r, ji, ii, jo, io})
            .tensorize(ii);
        std::string e = error_of([&] { Pipeline(c).lower(); });
        EXPECT_NE(e.find("is not linear in the nest's loops"), std::string::npos) << e;
    }
    // Not a sum of 8-bit products.
    {
        ImageParam a(Float(32), 2, "tz2_a"), b(Float(32), 3, "tz2_b");
        Func c("tz2_c");
        Var j("j"), i("i"), io("io"), ii("ii");
        RDom r({{0, 4}, {0, 16}}, "tz2_r");
        c(j, i) = 0.f;
        c(j, i) += a(r.x + 4 * r.y, i) * b(r.x, j, r.y);
        c.update().split(i, io, ii, 16).reorder({r.x, j, r.y, ii, io}).tensorize(ii);
        c.bound(j, 0, 16).bound(i, 0, 16);
        std::string e = error_of([&] { Pipeline(c).lower(); });
        EXPECT_NE(e.find("which is not c = c + i32(a) * i32(b)"), std::string::npos) << e;
    }
    // bfloat16 products written in bfloat16: each product rounded to bfloat16, which the matrix
    // unit does not do.
    {
        ImageParam a(BFloat(16), 2, "tz3_a"), b(BFloat(16), 3, "tz3_b");
        Func c("tz3_c");
        Var j("j"), i("i"), io("io"), ii("ii");
        RDom r({{0, 2}, {0, 16}}, "tz3_r");
        c(j, i) = 0.f;
        c(j, i) += a(r.x + 2 * r.y, i) * b(r.x, j, r.y);
        c.update().split(i, io, ii, 16).reorder({r.x, j, r.y, ii, io}).tensorize(ii);
        c.bound(j, 0, 16).bound(i, 0, 16);
        std::string e = error_of([&] { Pipeline(c).lower(); });
        EXPECT_NE(e.find("nor c = c + f32(a) * f32(b) of a float32 c and bfloat16 a and b"),
                  std::string::npos)
            << e;
        EXPECT_NE(e.find("a product of bfloat16 values is rounded to bfloat16"), std::string::npos)
            << e;
    }
    // A CPU without AMX.
    {
        TileMatmul<uint8_t, int8_t> mm(32, 32, 64);
        std::string e = error_of(
            [&] { Pipeline(mm.schedule().c).compile_jit(Target::parse("skylake-avx512")); });
        EXPECT_NE(e.find("has no AMX (amx-tile, amx-int8)"), std::string::npos) << e;
    }
    // A CPU with the int8 unit but not the bfloat16 one: a bfloat16 nest is refused, an int8
    // one compiles.
    {
        Target t = Target::parse("sapphirerapids");
        const std::string bf16_unit = "+amx-bf16";
        const size_t at = t.features.find(bf16_unit);
        ASSERT_NE(at, std::string::npos) << t.features;
        t.features.replace(at, bf16_unit.size(), "-amx-bf16");
        TileMatmul<bfloat16_t, bfloat16_t> mm(32, 32, 64);
        std::string e = error_of([&] { Pipeline(mm.schedule().c).compile_jit(t); });
        EXPECT_NE(e.find("has no AMX (amx-tile, amx-bf16)"), std::string::npos) << e;
        TileMatmul<uint8_t, int8_t> int8(32, 32, 64);
        EXPECT_EQ(error_of([&] { Pipeline(int8.schedule().c).compile_jit(t); }), "(no error)");
    }
}

// The directive is recorded, printed as C++ and replayed from JSON.
TEST(Tensorize, IsRecordedPrintedAndReplayed) {
    TileMatmul<uint8_t, int8_t> mm(32, 32, 64);
    mm.schedule();
    ScheduleTrace t = ScheduleTrace::capture({mm.c});
    EXPECT_NE(t.to_cpp().find("tz_c.update(0).tensorize(Var(\"ii\"));"), std::string::npos)
        << t.to_cpp();
    TileMatmul<uint8_t, int8_t> again(32, 32, 64);
    ScheduleTrace::parse(t.to_json_string()).apply({again.c});
    TileCalls calls;
    calls.include(Pipeline(again.c).lower().body);
    EXPECT_EQ(calls.calls, 1);
}

} // namespace
} // namespace kiln
