// Vector accesses the code generator makes dense (codegen/CodeGenLLVM.cpp): ramps bound in lets
// by common-subexpression elimination, and ramps clamped by boundary conditions (one vector load
// away from the edges, a gather near them). Checked for values against the reference evaluator
// and for the instructions chosen, compiled for an explicit AVX-512 CPU whatever the host (nothing
// is run), so the instruction checks run on every x86 machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "codegen/CodeGenLLVM.h"
#include "kiln.h"
#include "lang/IRVisitor.h"

namespace kiln {
namespace {

Target avx512_target() {
    return Target::parse("skylake-avx512");
}

Buffer<float> ramp_input(int w, int h, const std::string &name) {
    Buffer<float> b({w, h}, name);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            b(x, y) = float(x * 7 + y * 131 % 17) * 0.25f;
    }
    return b;
}

void expect_same(const Buffer<float> &a, const Buffer<float> &b) {
    ASSERT_EQ(a.width(), b.width());
    ASSERT_EQ(a.height(), b.height());
    for (int y = 0; y < a.height(); y++) {
        for (int x = 0; x < a.width(); x++) {
            ASSERT_EQ(a(x, y), b(x, y)) << "at (" << x << ", " << y << ")";
        }
    }
}

// Widths below, equal to and above the vector width, so that every vector is clamped, none is,
// or some are at each edge.
TEST(CodegenAccess, ClampedVectorLoadsMatchTheReferenceEvaluator) {
    for (auto [w, h] : {std::pair{5, 3}, {16, 4}, {40, 7}, {67, 5}}) {
        Buffer<float> in = ramp_input(w, h, "clamped_in_" + std::to_string(w));
        Func c = repeat_edge(in);
        Func out("clamped_out_" + std::to_string(w));
        Var x("x"), y("y");
        out(x, y) = c(x - 2, y - 1) + c(x, y + 1) * 2.f + c(x + 3, y);
        Buffer<float> expected = reference_realize(out, {w, h});
        out.vectorize(x, 16, TailStrategy::GuardWithIf);
        expect_same(out.realize({w, h}), expected);
    }
}

TEST(CodegenAccess, ClampedVectorLoadsAreDenseAwayFromTheEdges) {
    Buffer<float> in = ramp_input(64, 8, "dense_in");
    Func c = repeat_edge(in);
    Func out("dense_out");
    Var x("x"), y("y");
    out(x, y) = c(x - 1, y) + c(x + 1, y);
    out.vectorize(x, 16);
    std::string ir = compile_to_llvm_module(Pipeline(out).lower(), avx512_target()).llvm_ir();
    EXPECT_NE(ir.find("load <16 x float>"), std::string::npos) << ir;
    EXPECT_NE(ir.find("llvm.masked.gather"), std::string::npos) << ir; // near the edges
}

// A blocked layout, blocks of 16 columns stored one after another: reading it as
// b(x % 16, y, x / 16) with x vectorized by 16 from a known multiple of 16 (bound() makes the
// loop start at 0) stays one dense load per vector: the simplifier sees that every lane is in
// the same block. Without the bound the start is the output's min, which may be any value, and
// the read is a gather.
TEST(CodegenAccess, ABlockedLayoutReadAtAlignedVectorsIsDense) {
    const int W = 64, H = 3;
    Buffer<float> blocked({16, H, W / 16}, "blocked_in");
    for (int b = 0; b < W / 16; b++) {
        for (int y = 0; y < H; y++) {
            for (int i = 0; i < 16; i++)
                blocked(i, y, b) = float(b * 1000 + y * 100 + i);
        }
    }
    auto make = [&](bool bounded) {
        Func out(bounded ? "blocked_out" : "blocked_out_free");
        Var x("x"), y("y");
        out(x, y) = blocked(x % 16, y, x / 16) * 2.f;
        out.vectorize(x, 16);
        if (bounded) out.bound(x, 0, W);
        return out;
    };
    Func out = make(true);
    Buffer<float> got = out.realize({W, H});
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++)
            ASSERT_EQ(got(x, y), float((x / 16) * 1000 + y * 100 + x % 16) * 2.f) << x << ", " << y;
    }
    std::string ir = compile_to_llvm_module(Pipeline(out).lower(), avx512_target()).llvm_ir();
    EXPECT_NE(ir.find("load <16 x float>"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("llvm.masked.gather"), std::string::npos) << ir;
    Func free = make(false);
    std::string free_ir = compile_to_llvm_module(Pipeline(free).lower(), avx512_target()).llvm_ir();
    EXPECT_NE(free_ir.find("llvm.masked.gather"), std::string::npos) << free_ir;
}

TEST(CodegenAccess, MatmulMicroKernelHasNoGathersOrScatters) {
    const apps::Operator &op = apps::find_operator("matmul");
    apps::OperatorInstance inst = op.make({64, 64, 64});
    op.hand_schedule(inst, avx512_target());
    std::string assembly =
        compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).assembly();
    EXPECT_EQ(assembly.find("gather"), std::string::npos);
    EXPECT_EQ(assembly.find("scatter"), std::string::npos);
    EXPECT_NE(assembly.find("vfmadd231ps"), std::string::npos);
    EXPECT_NE(assembly.find("zmm"), std::string::npos);
}

/// The innermost of the assembly's loops (from a label to the branch back to it) with the most
/// FMAs (an outer loop holds as many), as lines of text; empty when there is none.
std::string fma_loop(const std::string &assembly) {
    std::istringstream in(assembly);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    auto count = [&](size_t from, size_t to) {
        size_t n = 0;
        for (size_t i = from; i < to; i++)
            n += lines[i].find("vfmadd231ps") != std::string::npos;
        return n;
    };
    size_t best_fmas = 0, best_from = 0, best_to = 0;
    for (size_t i = 0; i < lines.size(); i++) {
        if (lines[i].empty() || lines[i][0] != '.' || lines[i].back() != ':') continue;
        std::string label = lines[i].substr(0, lines[i].size() - 1);
        for (size_t j = i + 1; j < lines.size(); j++) {
            if (lines[j].find("\tj") != std::string::npos &&
                lines[j].substr(lines[j].find_last_of("\t ") + 1) == label) {
                size_t fmas = count(i, j);
                if (fmas > best_fmas || (fmas == best_fmas && j - i < best_to - best_from)) {
                    best_fmas = fmas;
                    best_from = i;
                    best_to = j;
                }
                break;
            }
        }
    }
    std::string loop;
    for (size_t i = best_from; i <= best_to && best_to > 0; i++)
        loop += lines[i] + "\n";
    return loop;
}

/// How many times `what` occurs in `text`.
size_t occurrences(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
        n++;
    return n;
}

/// The instructions of an assembly listing that are not vector instructions (nor directives).
size_t scalar_instructions(const std::string &listing) {
    size_t scalar = 0;
    std::istringstream lines(listing);
    for (std::string l; std::getline(lines, l);)
        scalar += l.size() > 1 && l[0] == '\t' && l[1] != 'v' && l[1] != '.';
    return scalar;
}

// The hand micro-kernel with AVX-512's 32 registers: a tile of 4 vectors x 6 rows, k unrolled
// twice. Its loop (from a label to the branch back to it) is 48 FMAs on 24 accumulators that stay
// in registers (nothing on the stack), 12 broadcasts of A and 8 vector loads of B's panel. A is
// dense (the operator promises its row pitch, K), so each of the tile's rows is a constant offset
// from one register: no address arithmetic beside the FMAs, only the loop's counter and two
// pointer steps (with the pitch read at run time, four leas rebuilt the row addresses per step):
//   vbroadcastss -1036(%rcx), %zmm25; vmovups -448(%r11), %zmm26; ... 4 loads
//   vfmadd231ps %zmm26, %zmm25, %zmm23; ... 4 FMAs per broadcast, 6 broadcasts per k
TEST(CodegenAccess, MatmulHandKernelIs48FMAsPerTwoStepsOfK) {
    const apps::Operator &op = apps::find_operator("matmul");
    apps::OperatorInstance inst = op.make({96, 128, 256});
    op.hand_schedule(inst, avx512_target());
    std::string loop =
        fma_loop(compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).assembly());
    EXPECT_EQ(occurrences(loop, "vfmadd231ps"), 48u) << loop;
    EXPECT_EQ(occurrences(loop, "vbroadcastss"), 12u) << loop;
    EXPECT_EQ(occurrences(loop, "vmovups"), 8u) << loop;
    EXPECT_EQ(occurrences(loop, "rsp"), 0u) << loop;
    EXPECT_EQ(occurrences(loop, "lea"), 0u) << loop;
    EXPECT_LE(scalar_instructions(loop), 5u) << loop;
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

// Software prefetch around the register-tiled loop: the hand kernel with its loop over pairs of
// k split into blocks of 8 pairs, and A's rows prefetched 2 blocks ahead at the block loop. The
// region (16 values of k in each of the tile's 6 rows) is of constant size, so it is 12
// straight-line prefetches (each row's first and last element), not loops with counters and a
// min per line; the kernel's loop is still the 48 FMAs on accumulators that stay in registers
// (nothing on the stack) with no prefetch inside. Same values.
TEST(CodegenAccess, PrefetchAroundTheMatmulKernelIsStraightLineCode) {
    const apps::Operator &op = apps::find_operator("matmul");
    apps::OperatorInstance inst = op.make({96, 128, 256});
    op.hand_schedule(inst, avx512_target());
    VarOrRVar ko("k.x_o", true), kb("k.x_b", true), kc("k.x_c", true);
    inst.stages[1].update(0).split(ko, kb, kc, 8).prefetch(inst.inputs[0], kb, kb, 2);
    std::string assembly =
        compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).assembly();
    std::string loop = fma_loop(assembly);
    EXPECT_EQ(occurrences(loop, "vfmadd231ps"), 48u) << loop;
    EXPECT_EQ(occurrences(loop, "rsp"), 0u) << loop;
    EXPECT_EQ(occurrences(loop, "prefetcht0"), 0u) << loop;
    EXPECT_EQ(occurrences(assembly, "prefetcht0"), 12u) << assembly;
    std::string text = inst.pipeline().lowered_text();
    EXPECT_EQ(text.find(".prefetch_A.line"), std::string::npos) << text;
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

// A narrow C (two register tiles wide) with a long K, K blocked (the template offers it; the hand
// schedule does it without AVX-512's 32 registers). prod holds both
// register tiles of a row block, its k loop is split into blocks of 256 walked over both tiles
// (the block loop encloses the tile loop, which encloses the k loop of a block), the micro-kernel
// is still FMAs on zmm registers without gathers, and the result matches the reference.
TEST(CodegenAccess, MatmulOnANarrowOutputBlocksK) {
    const apps::Operator &op = apps::find_operator("matmul");
    apps::OperatorInstance inst = op.make({24, 64, 1024});
    // With AVX-512 the hand schedule of this shape is one 64 x 6 tile per row block, not blocked
    // (faster where measured); the K-blocked schedule is the template's point with two tiles.
    apps::schedule_from_generator(op.generator, op.generator_params, inst, avx512_target(),
                                  {{"tile_j", "32"},
                                   {"tile_i", "8"},
                                   {"outer_order", "io_inner"},
                                   {"b_panel", "at_jo"},
                                   {"k_unroll", "1"},
                                   {"j_tiles", "2"},
                                   {"k_block", "256"}});
    LoweredFunc lowered = inst.pipeline().lower();
    class Nest : public IRVisitor {
    public:
        std::vector<std::string> stack, around_k_i;

    protected:
        using IRVisitor::visit;
        void visit(const For *op) override {
            std::string name = op->name.substr(0, op->name.find('$'));
            if (name == "prod.s1.k.x_i" && around_k_i.empty()) around_k_i = stack;
            stack.push_back(name);
            IRVisitor::visit(op);
            stack.pop_back();
        }
    } nest;
    nest.include(lowered.body);
    std::string loops;
    for (const std::string &n : nest.around_k_i)
        loops += n + " ";
    auto at = [&](const std::string &name) {
        auto it = std::find(nest.around_k_i.begin(), nest.around_k_i.end(), name);
        return it == nest.around_k_i.end() ? -1 : int(it - nest.around_k_i.begin());
    };
    EXPECT_GE(at("prod.s1.k.x_o"), 0) << loops;
    EXPECT_GT(at("prod.s1.j"), at("prod.s1.k.x_o")) << loops;
    std::string assembly = compile_to_llvm_module(lowered, avx512_target()).assembly();
    EXPECT_EQ(assembly.find("gather"), std::string::npos);
    EXPECT_NE(assembly.find("vfmadd231ps"), std::string::npos);
    EXPECT_NE(assembly.find("zmm"), std::string::npos);
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

/// The text of the LLVM basic block named `label` (up to the next blank line).
std::string block_of(const std::string &ir, const std::string &label) {
    size_t at = ir.find("\n" + label + ":");
    if (at == std::string::npos) return "";
    size_t end = ir.find("\n\n", at + 1);
    return ir.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
}

/// The LLVM IR of a conv2d operator's innermost reduction loops (`conv.s1.r.x.body`, and the
/// copies LLVM numbers `conv.s1.r.x.body405` and so on: one per tap of a kernel row with the
/// taps unrolled), in order, compiled for AVX-512 from its template with `knobs` (the hand
/// schedule where empty); empty when there is none.
std::vector<std::string> conv_kernel_bodies(const apps::Operator &op, apps::OperatorInstance &inst,
                                            const std::map<std::string, std::string> &knobs = {}) {
    apps::schedule_from_generator(op.generator, op.generator_params, inst, avx512_target(), knobs);
    std::string ir = compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).llvm_ir();
    std::vector<std::string> bodies;
    const std::string label = "\nconv.s1.r.x.body";
    for (size_t at = ir.find(label); at != std::string::npos; at = ir.find(label, at + 1)) {
        size_t colon = ir.find(':', at);
        std::string name = ir.substr(at + 1, colon - at - 1);
        if (name.find_first_not_of("0123456789", label.size() - 1) != std::string::npos) continue;
        bodies.push_back(block_of(ir, name));
    }
    return bodies;
}

std::string conv_kernel_body(const apps::Operator &op, apps::OperatorInstance &inst,
                             const std::map<std::string, std::string> &knobs = {}) {
    std::vector<std::string> bodies = conv_kernel_bodies(op, inst, knobs);
    return bodies.empty() ? "" : bodies[0];
}

} // namespace

// The K-blocked matmul of MatmulOnANarrowOutputBlocksK at 4096 x 64 x 4096 (compiled, not run):
// prod holds two register tiles side by side, and the k loop of a block runs inside the loop
// over the tiles, so the tile's 16 sums are places in prod at indices like `j.min + tile * 32 +
// 16` that depend on the tile loop. LLVM keeps them in registers across the block (16 vector
// phis, no store) only while their addresses differ by constants; a lowering that hid the
// constants behind lets of their own names made every FMA load and store its sum (2x slower).
TEST(CodegenAccess, TheKBlockedMatmulsTileOfSumsStaysInRegisters) {
    const apps::Operator &op = apps::find_operator("matmul");
    apps::OperatorInstance inst = op.make({4096, 64, 4096}); // compiled, not run
    apps::schedule_from_generator(op.generator, op.generator_params, inst, avx512_target(),
                                  {{"tile_j", "32"},
                                   {"tile_i", "8"},
                                   {"outer_order", "io_inner"},
                                   {"b_panel", "at_jo"},
                                   {"k_unroll", "1"},
                                   {"j_tiles", "2"},
                                   {"k_block", "256"}});
    std::string ir = compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).llvm_ir();
    std::string body = block_of(ir, "prod.s1.k.x_i.body");
    ASSERT_FALSE(body.empty()) << ir;
    EXPECT_EQ(body.find("store "), std::string::npos) << body;
    EXPECT_EQ(occurrences(body, "= phi <16 x float>"), 16u) << body;
    EXPECT_EQ(occurrences(body, "@llvm.fma.v16f32("), 16u) << body;
}

// store_nontemporal: the output's dense vector stores are movntps where the address is aligned
// to the vector, plain stores where it is not (checked per store), and the parallel task that
// stores them ends with an sfence. The values are right either way: an output buffer 64-byte
// aligned, and one a float past that.
TEST(CodegenAccess, NonTemporalStoresAreStreamedWhereAlignedAndFenced) {
    const int W = 64, H = 6;
    Buffer<float> in = ramp_input(W, H, "nt_in");
    Func out("nt_out");
    Var x("x"), y("y");
    out(x, y) = in(x, y) * 3.f + 1.f;
    out.vectorize(x, 16).parallel(y).store_nontemporal();
    std::string assembly =
        compile_to_llvm_module(Pipeline(out).lower(), avx512_target()).assembly();
    EXPECT_NE(assembly.find("vmovntps\t%zmm"), std::string::npos) << assembly;
    EXPECT_NE(assembly.find("vmovups\t%zmm"), std::string::npos) << assembly; // unaligned
    EXPECT_EQ(occurrences(assembly, "sfence"), size_t(1)) << assembly;        // the task's
    std::vector<float> storage(size_t(W) * H + 32);
    float *aligned = storage.data();
    while (reinterpret_cast<uintptr_t>(aligned) % 64 != 0)
        aligned++;
    for (float *data : {aligned, aligned + 1}) {
        Buffer<float> got(data, {W, H}, "nt_out");
        Pipeline(out).realize({got});
        for (int yy = 0; yy < H; yy++) {
            for (int xx = 0; xx < W; xx++)
                ASSERT_EQ(got(xx, yy), in(xx, yy) * 3.f + 1.f) << xx << ", " << yy;
        }
    }
    // Recorded and replayed like any directive.
    EXPECT_NE(ScheduleTrace::capture({out}).to_cpp().find("nt_out.store_nontemporal();"),
              std::string::npos);
}

// A reduction into an output, written as users write one (C(j, i) += A(k, i) * B(j, k)), with k
// innermost and j vectorized: each access carries a TBAA tag of its buffer, so LLVM knows the
// loads of A and B cannot read what the store to C wrote, keeps C's vector in a register across
// the k loop (the loop body has no store, and the sum enters it as a phi) and stores it once
// after. Without the tags, the sum went through memory at every k. Checked in the optimized IR
// for an explicit AVX-512 CPU, and the result against the reference evaluator.
TEST(CodegenAccess, ASumIntoTheOutputStaysInARegisterAcrossItsReduction) {
    ImageParam A(Float(32), 2, "tbaa_A"), B(Float(32), 2, "tbaa_B");
    Var j("j"), i("i");
    RDom k(0, 32, "k");
    Func C("tbaa_C");
    C(j, i) = 0.f;
    C(j, i) += A(k, i) * B(j, k);
    C.vectorize(j, 16);
    C.update(0).vectorize(j, 16);
    C.bound(j, 0, 32).bound(i, 0, 8);
    std::string ir = compile_to_llvm_module(Pipeline(C).lower(), avx512_target()).llvm_ir();
    EXPECT_NE(ir.find("!{!\"tbaa_C\", "), std::string::npos) << ir;
    EXPECT_NE(ir.find("!{!\"tbaa_A\", "), std::string::npos) << ir;
    std::string body = block_of(ir, "tbaa_C.s1.k.x.body");
    ASSERT_FALSE(body.empty()) << ir;
    EXPECT_EQ(body.find("store "), std::string::npos) << body;
    EXPECT_NE(body.find("= phi <16 x float>"), std::string::npos) << body;

    Buffer<float> a = ramp_input(32, 8, "tbaa_A"), b = ramp_input(32, 32, "tbaa_B");
    A.set(a);
    B.set(b);
    Buffer<float> expected = reference_realize(C, {32, 8});
    Buffer<float> got = C.realize({32, 8});
    for (int y = 0; y < 8; y++) {
        for (int x = 0; x < 32; x++)
            EXPECT_NEAR(got(x, y), expected(x, y), 1e-3f * std::abs(expected(x, y)) + 1e-3f);
    }
}

// A register tile of sums for an output that is itself a reduction: rfactor({}) moves C's
// reduction into an intermediate with constant strides, computed per 32 x 4 tile of C with k
// outside its vectorized, unrolled tile. The k loop of the optimized IR then holds the tile's
// eight 16-wide sums in registers (eight vector phis, no store), which the sums written in the
// output itself cannot (the test above keeps one vector, not a tile, in a register).
TEST(CodegenAccess, AnOutputsTileOfSumsStaysInRegistersInItsRfactorIntermediate) {
    ImageParam A(Float(32), 2, "sums_A"), B(Float(32), 2, "sums_B");
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii"), jv("jv");
    RDom k(0, 64, "k");
    Func C("sums_C");
    C(j, i) = 0.f;
    C(j, i) += A(k, i) * B(j, k);
    Func sums = C.update(0).rfactor({}, "sums_C_tile");
    C.vectorize(j, 16);
    C.update(0).tile(j, i, jo, io, ji, ii, 32, 4).vectorize(ji, 16);
    sums.compute_at(C, jo).vectorize(j, 16).unroll(i);
    sums.update(0).split(j, j, jv, 16, TailStrategy::RoundUp).reorder(jv, j, i, k);
    sums.update(0).vectorize(jv).unroll(j).unroll(i);
    C.bound(j, 0, 64).bound(i, 0, 8);
    std::string ir = compile_to_llvm_module(Pipeline(C).lower(), avx512_target()).llvm_ir();
    std::string body = block_of(ir, "sums_C_tile.s1.k.x.body");
    ASSERT_FALSE(body.empty()) << ir;
    EXPECT_EQ(body.find("store "), std::string::npos) << body;
    EXPECT_EQ(occurrences(body, "= phi <16 x float>"), 8u) << body;

    Buffer<float> a = ramp_input(64, 8, "sums_A"), b = ramp_input(64, 64, "sums_B");
    A.set(a);
    B.set(b);
    Buffer<float> expected = reference_realize(C, {64, 8});
    Buffer<float> got = C.realize({64, 8});
    for (int y = 0; y < 8; y++) {
        for (int x = 0; x < 64; x++)
            EXPECT_NEAR(got(x, y), expected(x, y), 1e-3f * std::abs(expected(x, y)) + 1e-3f);
    }
}

// conv2d's hand schedule on a 14-pixel-wide image with AVX-512: one tile of 14 pixels per row by
// two vectors of 16 output channels, 28 of the 32 vector registers. The loops over the input
// channels, the sum's innermost, one per tap of a kernel row (unrolled), keep the tile's 28 sums
// in registers (a vector phi per sum the loop adds to, no store); each body is an FMA of 16 lanes
// per pixel and vector of channels from 2 dense weight loads and a broadcast input value per pixel
// (no gather), from the pixel's channels side by side, walked in order (the address of a pixel's
// value moves by one float per iteration). The taps in the padding are skipped: the first tap has
// no left neighbour for pixel 0 and the last none for pixel 13, so those loops are 26 FMAs from 13
// values, the middle one 28 from 14, with no branch but the loop's own (the RDom's conditions
// are constants in the unrolled row). The result matches the reference.
TEST(CodegenAccess, Conv2dKernelHoldsATileOf14PixelsBy32ChannelsInRegisters) {
    const apps::Operator &op = apps::find_operator("conv2d");
    apps::OperatorInstance inst = op.make({64, 64, 14, 14});
    std::vector<std::string> bodies = conv_kernel_bodies(op, inst);
    ASSERT_EQ(bodies.size(), 3u);
    const size_t fmas[] = {26, 28, 26};
    for (size_t tap = 0; tap < 3; tap++) {
        const std::string &body = bodies[tap];
        EXPECT_EQ(body.find("store "), std::string::npos) << body;
        EXPECT_EQ(body.find("gather"), std::string::npos) << body;
        EXPECT_EQ(occurrences(body, "= phi <16 x float>"), fmas[tap])
            << body; // the sums it adds to
        EXPECT_EQ(occurrences(body, "@llvm.fma.v16f32("), fmas[tap]) << body;
        EXPECT_EQ(occurrences(body, "= load <16 x float>"), 2u) << body;     // 32 channels' weights
        EXPECT_EQ(occurrences(body, "= load float"), fmas[tap] / 2) << body; // a value per pixel
        EXPECT_EQ(occurrences(body, "br i1 "), 1u) << body;                  // the loop's own
    }
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

// At 56 pixels a row is four tiles of 14; the RDom's conditions on the taps in the padding hold
// for some tiles and not others, so each is a condition on the tile's position, the same for
// the whole of its reduction. Lowering decides each once per tile (loop unswitching): the
// reduction is copied for the first tile (no left neighbour for its pixel 0), the last (no right
// neighbour for its pixel 13) and those between, and no loop over input channels holds a branch
// other than its own. Every copy computes what the reference computes, conv2d and conv2d_packed;
// so do they at 3 -> 16 channels (one input channel: no loop over them).
TEST(CodegenAccess, Conv2dDecidesItsTapsInThePaddingOncePerTile) {
    for (const char *name : {"conv2d", "conv2d_packed"}) {
        const apps::Operator &op = apps::find_operator(name);
        apps::OperatorInstance rgb = op.make({3, 16, 5, 56});
        op.hand_schedule(rgb, avx512_target());
        EXPECT_LE(apps::max_relative_error(rgb.realize(), op.reference(rgb)), op.tolerance) << name;
        apps::OperatorInstance inst = op.make({64, 32, 4, 56});
        std::vector<std::string> bodies = conv_kernel_bodies(op, inst);
        EXPECT_GE(bodies.size(), 9u) << name; // three tap loops for each kind of tile
        size_t fmas = 0;
        for (const std::string &body : bodies) {
            EXPECT_EQ(occurrences(body, "br i1 "), 1u) << body;
            fmas += occurrences(body, "@llvm.fma.v16f32(");
        }
        // Two vectors of channels: the middle tiles' 3 x 14 taps, the first's and the last's each
        // one fewer.
        EXPECT_EQ(fmas, 2u * (3 * 3 * 14 - 2)) << name;
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
            << name;
    }
}

/// The assembly's innermost loops that hold FMAs (a label, no other label before the branch back
/// to it), in order, each as lines of text.
std::vector<std::string> innermost_fma_loops(const std::string &assembly) {
    std::istringstream in(assembly);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    auto is_label = [&](size_t i) {
        return !lines[i].empty() && lines[i][0] == '.' && lines[i].back() == ':';
    };
    std::vector<std::string> loops;
    for (size_t i = 0; i < lines.size(); i++) {
        if (!is_label(i)) continue;
        std::string label = lines[i].substr(0, lines[i].size() - 1), loop = lines[i] + "\n";
        for (size_t j = i + 1; j < lines.size() && !is_label(j); j++) {
            loop += lines[j] + "\n";
            if (lines[j].find("\tj") != std::string::npos &&
                lines[j].substr(lines[j].find_last_of("\t ") + 1) == label) {
                if (loop.find("vfmadd231ps") != std::string::npos) loops.push_back(loop);
                break;
            }
        }
    }
    return loops;
}

// conv2d_nhwc reads its input in place, a pixel's 64 channels side by side and the image's strides
// promised (ImageParam::dim(d).set_stride), as are the packed weights'. In the kernel's loops over
// the input channels, one per tap of a kernel row, each pixel's broadcast is a constant offset
// from one pointer and both vectors of weights from another:
//   vmovups (%r14), %zmm29; vmovups 36864(%r14), %zmm31; vbroadcastss 256(%rdx), %zmm30; ...
// The middle tap's loop is 28 FMAs, 14 broadcasts and 2 weight loads, the others 26 and 13 (the
// taps in the padding skipped); each has no more than 5 scalar instructions (the counter, the
// two pointers, compare and branch) and nothing on the stack. With the row pitch known only at
// run time, the 14 addresses were a chain of adds of it per step.
TEST(CodegenAccess, Conv2dNhwcBroadcastsEachPixelAtAConstantOffset) {
    const apps::Operator &op = apps::find_operator("conv2d_nhwc");
    apps::OperatorInstance inst = op.make({64, 64, 14, 14});
    op.hand_schedule(inst, avx512_target());
    std::vector<std::string> loops = innermost_fma_loops(
        compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).assembly());
    ASSERT_EQ(loops.size(), 3u);
    const size_t fmas[] = {26, 28, 26};
    for (size_t tap = 0; tap < 3; tap++) {
        const std::string &loop = loops[tap];
        EXPECT_EQ(occurrences(loop, "vfmadd231ps"), fmas[tap]) << loop;
        EXPECT_EQ(occurrences(loop, "vbroadcastss"), fmas[tap] / 2) << loop;
        EXPECT_EQ(occurrences(loop, "vmovups"), 2u) << loop;
        EXPECT_EQ(occurrences(loop, "rsp"), 0u) << loop;
        EXPECT_LE(scalar_instructions(loop), 5u) << loop;
    }
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

// conv2d with conv_at = y: conv holds a whole row of 56 pixels by 32 output channels, summed
// tile by tile (14 pixels) inside it. The tile's 28 sums are 28 places in the row buffer whose
// indices differ by constants (the simplifier binds each unrolled copy's `x = (xo * 14 + x.min)
// + k` as `x.b = xo * 14 + x.min` and leaves `x.b + k` in the index), so LLVM keeps them in
// registers across the reduction, as for a buffer of one tile: 28 vector phis and no store in
// the innermost loop. With the constant inside the let every FMA loaded and stored its sum (3x
// slower).
TEST(CodegenAccess, ATileOfSumsInARowBufferStaysInRegisters) {
    const apps::Operator &op = apps::find_operator("conv2d");
    apps::OperatorInstance inst = op.make({32, 32, 6, 56});
    std::string body = conv_kernel_body(op, inst, {{"conv_at", "y"}});
    ASSERT_FALSE(body.empty());
    EXPECT_EQ(body.find("store "), std::string::npos) << body;
    EXPECT_EQ(occurrences(body, "= phi <16 x float>"), 28u) << body;
    EXPECT_EQ(occurrences(body, "@llvm.fma.v16f32("), 28u) << body;
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

// conv2d_packed reads its weights in their packed layout, output channels in blocks of 16: the
// kernel's vector of 16 channels is one block's, so its weights are dense loads, the same FMAs
// from 2 weight loads and a broadcast input value per pixel as conv2d's (its middle tap: 28
// from 14), and the result matches the reference. 48 output channels are a block of 32 and a
// last one shifted inwards to start at min(48 - 32, coo * 32), 0 or 16: the simplifier knows
// that either is a multiple of 16.
TEST(CodegenAccess, Conv2dPackedReadsItsBlockedWeightsAsDenseVectors) {
    const apps::Operator &op = apps::find_operator("conv2d_packed");
    apps::OperatorInstance inst = op.make({64, 48, 14, 14});
    std::vector<std::string> bodies = conv_kernel_bodies(op, inst);
    ASSERT_EQ(bodies.size(), 3u);
    const std::string &body = bodies[1];
    EXPECT_EQ(body.find("gather"), std::string::npos) << body;
    EXPECT_EQ(occurrences(body, "@llvm.fma.v16f32("), 28u) << body;
    EXPECT_EQ(occurrences(body, "= load <16 x float>"), 2u) << body;
    EXPECT_EQ(occurrences(body, "= load float"), 14u) << body;
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

// conv2d's algorithm skips the kernel rows that fall in the zero padding (RDom::where on r.z):
// trim_no_ops turns the predicate into the bounds of the kernel-row loop, so no guard is left in
// the loop nest and the first and last rows of the image run 2 of the 3 kernel rows.
TEST(CodegenAccess, Conv2dRunsOnlyTheKernelRowsInsideTheImage) {
    const apps::Operator &op = apps::find_operator("conv2d");
    apps::OperatorInstance inst = op.make({16, 32, 5, 14});
    op.hand_schedule(inst, avx512_target());
    LoweredFunc lowered = inst.pipeline().lower();
    class Find : public IRVisitor {
    public:
        int kernel_rows = 0, guards = 0;
        Expr extent;

    protected:
        using IRVisitor::visit;
        void visit(const For *op) override {
            if (op->name.rfind("conv.s1.r.z", 0) == 0) {
                kernel_rows++;
                extent = op->extent;
            }
            IRVisitor::visit(op);
        }
        void visit(const IfThenElse *op) override {
            guards++;
            IRVisitor::visit(op);
        }
    } find;
    find.include(lowered.body);
    ASSERT_EQ(find.kernel_rows, 1);
    EXPECT_FALSE(is_const(find.extent)) << find.extent; // depends on the row
    EXPECT_EQ(find.guards, 0);
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
}

// Addresses are computed in 64 bits (CodeGen::wide_index): layernorm's output loop reads three
// inputs and writes its output through indices that are sums of the loop counter and row
// offsets, which LLVM turns into pointers bumped by a constant; no index is sign-extended in the
// loop (with int32 sums, one was per access, each iteration). Likewise conv2d's kernel.
TEST(CodegenAccess, InnerLoopsAddressInSixtyFourBitsWithoutSignExtensions) {
    const apps::Operator &op = apps::find_operator("layernorm");
    apps::OperatorInstance inst = op.make({512, 32});
    op.hand_schedule(inst, avx512_target());
    std::string ir = compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).llvm_ir();
    std::string body = block_of(ir, "\"layernorm.s0.x$1.body\"");
    ASSERT_FALSE(body.empty()) << ir;
    EXPECT_EQ(occurrences(body, "= getelementptr float, ptr %"), 4u) << body;
    EXPECT_EQ(occurrences(body, "store <16 x float>"), 1u) << body;
    EXPECT_EQ(body.find(" sext "), std::string::npos) << body;
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);

    const apps::Operator &conv = apps::find_operator("conv2d");
    apps::OperatorInstance c = conv.make({64, 64, 14, 14});
    conv.hand_schedule(c, avx512_target());
    ir = compile_to_llvm_module(c.pipeline().lower(), avx512_target()).llvm_ir();
    body = block_of(ir, "conv.s1.r.x.body");
    ASSERT_FALSE(body.empty()) << ir;
    EXPECT_EQ(body.find(" sext "), std::string::npos) << body;
}

namespace {

// out(x, c) = in(c * c_step, x) with x vectorized (all `lanes` of it) and c unrolled (`count`
// stores): each store a dense vector of pixels, each load a vector of a column of `in`, stride
// its row pitch. A transposed copy where c_step is 1.
template <typename T>
Func transposed_copy_of(const Buffer<T> &in, int lanes, int count, int c_step,
                        const std::string &name) {
    Func out(name);
    Var x("x"), c("c");
    out(x, c) = in(c * c_step, x);
    out.bound(x, 0, lanes).bound(c, 0, count).vectorize(x).unroll(c);
    return out;
}

template <typename T>
void expect_transposed(int lanes, int count, int c_step) {
    const std::string name = "tcopy_" + std::to_string(sizeof(T)) + "_" + std::to_string(lanes) +
                             "_" + std::to_string(count) + "_" + std::to_string(c_step);
    // One spare column and row, so that the loads' stride is not the copied width.
    Buffer<T> in({count * c_step + 1, lanes + 1}, name + "_in");
    for (int y = 0; y < lanes + 1; y++) {
        for (int x = 0; x < count * c_step + 1; x++)
            in(x, y) = T(x * 3 + y * 29 + 1);
    }
    Func out = transposed_copy_of(in, lanes, count, c_step, name);
    Buffer<T> got = out.realize({lanes, count});
    for (int c = 0; c < count; c++) {
        for (int x = 0; x < lanes; x++) {
            ASSERT_EQ(got(x, c), in(c * c_step, x)) << name << ": at (" << x << ", " << c << ")";
        }
    }
}

std::string transposed_copy_ir(int lanes, int count, int c_step) {
    Buffer<float> in({count * c_step + 1, lanes + 1}, "tcopy_ir_in");
    Func out = transposed_copy_of(in, lanes, count, c_step, "tcopy_ir");
    return compile_to_llvm_module(Pipeline(out).lower(), avx512_target()).llvm_ir();
}

} // namespace

// An unrolled run of stores, each a dense vector loaded at a stride from consecutive columns of
// another buffer (a gather each), is a transpose: the code generator loads the rows densely and
// swaps lanes in registers (codegen/CodeGenLLVM.cpp, transposed_copy). Values for every shape
// of run: fewer lanes than a power of two (masked stores), more stores than a vector's lanes
// (blocks of them), 8- to 64-bit elements, and runs that are not transposes (every other
// column; 64-bit lanes too many for one 512-bit vector), which stay gathers.
TEST(CodegenAccess, TransposedCopiesMatchForEveryShapeOfRun) {
    for (auto [lanes, count] : {std::pair{2, 2}, {3, 5}, {8, 8}, {14, 32}, {16, 17}, {5, 40}}) {
        expect_transposed<float>(lanes, count, 1);
        expect_transposed<uint8_t>(lanes, count, 1);
        expect_transposed<int16_t>(lanes, count, 1);
        expect_transposed<double>(lanes, count, 1);
        expect_transposed<float>(lanes, count, 2);
    }
    expect_transposed<double>(14, 3, 1);
}

TEST(CodegenAccess, ATransposedCopyIsDenseLoadsAndShufflesNotGathers) {
    // 14 pixels by 32 channels, conv2d's tile: two blocks of 16 x 16, 14 rows loaded per block
    // (the rows past 14 are never loaded), 4 stages of 16 shuffles each, masked stores of 14.
    std::string ir = transposed_copy_ir(14, 32, 1);
    EXPECT_EQ(ir.find("llvm.masked.gather"), std::string::npos) << ir;
    EXPECT_EQ(occurrences(ir, "= load <16 x float>"), 28u) << ir;
    EXPECT_EQ(occurrences(ir, "call void @llvm.masked.store.v16f32"), 32u) << ir;
    EXPECT_GE(occurrences(ir, "shufflevector <16 x float>"), 64u) << ir;
    // The assembly: 28 row loads, the butterflies as two-input permutes and unpacks, 32 masked
    // stores of 14 lanes, no gather or scatter.
    Buffer<float> in({33, 15}, "tcopy_asm_in");
    std::string assembly =
        compile_to_llvm_module(Pipeline(transposed_copy_of(in, 14, 32, 1, "tcopy_asm")).lower(),
                               avx512_target())
            .assembly();
    EXPECT_EQ(occurrences(assembly, "gather"), 0u) << assembly;
    EXPECT_EQ(occurrences(assembly, "scatter"), 0u) << assembly;
    EXPECT_EQ(occurrences(assembly, "vmovups\t%zmm") + occurrences(assembly, "vmovups %zmm"), 32u)
        << assembly;
    EXPECT_GE(occurrences(assembly, "vpermt2") + occurrences(assembly, "vunpck") +
                  occurrences(assembly, "vshuf"),
              48u)
        << assembly;
    // Every other column: not a transpose, a gather per store.
    std::string strided = transposed_copy_ir(14, 32, 2);
    EXPECT_EQ(occurrences(strided, "call <14 x float> @llvm.masked.gather"), 32u) << strided;
}

// conv2d copies its tile of sums (14 pixels by 32 channels, channels innermost) to the output's
// planes as vectors of pixels: a transposed copy, no scatter; transpose_copy = 0 scatters
// vectors of channels.
TEST(CodegenAccess, Conv2dCopiesItsTileToThePlanesThroughATransposeInRegisters) {
    const apps::Operator &op = apps::find_operator("conv2d_packed");
    for (const char *transpose : {"1", "0"}) {
        apps::OperatorInstance inst = op.make({64, 64, 14, 14});
        apps::schedule_from_generator(op.generator, op.generator_params, inst, avx512_target(),
                                      {{"transpose_copy", transpose}});
        std::string ir = compile_to_llvm_module(inst.pipeline().lower(), avx512_target()).llvm_ir();
        const bool transposed = std::string(transpose) == "1";
        EXPECT_EQ(ir.find("llvm.masked.scatter") == std::string::npos, transposed) << transpose;
        EXPECT_EQ(occurrences(ir, "call void @llvm.masked.store.v16f32") >= 32u, transposed)
            << transpose;
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);
    }
}

} // namespace kiln
