// Vector accesses the code generator makes dense (codegen/CodeGenLLVM.cpp): ramps bound in lets
// by common-subexpression elimination, and ramps clamped by boundary conditions (one vector load
// away from the edges, a gather near them). Checked for values against the reference evaluator
// and for the instructions chosen, compiled for an explicit AVX-512 CPU whatever the host (nothing
// is run), so the instruction checks run on every x86 machine.
#include <gtest/gtest.h>

#include <algorithm>

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

// A narrow C (two register tiles wide) with a long K: the hand schedule blocks K. prod holds both
// register tiles of a row block, its k loop is split into blocks of 256 walked over both tiles
// (the block loop encloses the tile loop, which encloses the k loop of a block), the micro-kernel
// is still FMAs on zmm registers without gathers, and the result matches the reference.
TEST(CodegenAccess, MatmulOnANarrowOutputBlocksK) {
    const apps::Operator &op = apps::find_operator("matmul");
    apps::OperatorInstance inst = op.make({24, 64, 1024});
    op.hand_schedule(inst, avx512_target());
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
