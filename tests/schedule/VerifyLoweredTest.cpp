#include "schedule/VerifyLowered.h"

#include <gtest/gtest.h>

#include "lang/IROperator.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

Expr int_var(const std::string &name) {
    return Variable::make(Int(32), name);
}

/// f(in: 1-d buffer, n: int32 scalar) -> out: 1-d buffer, with the given host body.
LoweredFunc func_with(const Stmt &body) {
    LoweredFunc f;
    f.name = "f";
    LoweredArgument in{"in", LoweredArgument::Buffer, Int(32), 1, false, nullptr, nullptr};
    LoweredArgument n{"n", LoweredArgument::Scalar, Int(32), 0, false, nullptr, nullptr};
    LoweredArgument out{"out", LoweredArgument::Buffer, Int(32), 1, true, nullptr, nullptr};
    f.args = {in, n, out};
    f.body = body;
    return f;
}

/// A loop over the output's extent copying `in` to `out` through `inner`.
Stmt copy_loop(const std::string &var, ForType type = ForType::Serial) {
    Expr x = int_var(var);
    return For::make(var, 0, int_var("out.extent.0"), type,
                     Store::make("out", Load::make(Int(32), "in", x), x));
}

/// The InternalError message of verify_lowered(f), or "(no error)".
std::string error_of(const LoweredFunc &f) {
    return test::error_of<InternalError>([&] { verify_lowered(f); });
}

TEST(VerifyLowered, AcceptsAWellFormedFunction) {
    Expr x = int_var("x");
    Stmt loop = For::make(
        "x", 0, int_var("m"), ForType::Parallel,
        Block::make(Store::make("tmp", x, x),
                    Store::make("out", Load::make(Int(32), "tmp", x), x + int_var("in.min.0"))));
    // An allocation's descriptor is in scope inside it, as an argument's is everywhere.
    Stmt copies = Block::make(Evaluate::make(Variable::make(UInt(64), "tmp.buffer")),
                              Evaluate::make(Variable::make(UInt(64), "in.buffer")));
    Stmt body = LetStmt::make("m", int_var("n") * 2,
                              Allocate::make("tmp", Int(32), MemoryType::Heap, {int_var("m")},
                                             Expr(), Block::make(copies, loop)));
    EXPECT_EQ(error_of(func_with(body)), "(no error)");
}

TEST(VerifyLowered, RejectsAVariableWithNoBinder) {
    Expr x = int_var("x");
    Stmt body = For::make("x", 0, int_var("m"), ForType::Serial, Store::make("out", x, x));
    std::string e = error_of(func_with(body));
    EXPECT_NE(e.find("undefined variable in host code of 'f': 'm'"), std::string::npos) << e;
}

TEST(VerifyLowered, RejectsAVariableUsedOutsideItsLet) {
    Stmt body = Block::make(LetStmt::make("m", 1, Evaluate::make(int_var("m"))),
                            Evaluate::make(int_var("m")));
    std::string e = error_of(func_with(body));
    EXPECT_NE(e.find("undefined variable in host code of 'f': 'm'"), std::string::npos) << e;
}

TEST(VerifyLowered, RejectsAnAccessToABufferNeitherArgumentNorAllocated) {
    Expr x = int_var("x");
    Stmt body = For::make("x", 0, 4, ForType::Serial,
                          Store::make("out", Load::make(Int(32), "nowhere", x), x));
    std::string e = error_of(func_with(body));
    EXPECT_NE(e.find("unknown buffer in host code of 'f': load from 'nowhere'"), std::string::npos)
        << e;
}

TEST(VerifyLowered, RejectsAStoreAfterItsAllocationEnds) {
    Stmt body = Block::make(
        Allocate::make("tmp", Int(32), MemoryType::Stack, {4}, Expr(), Store::make("tmp", 1, 0)),
        Store::make("tmp", 2, 0));
    std::string e = error_of(func_with(body));
    EXPECT_NE(e.find("unknown buffer in host code of 'f': store to 'tmp'"), std::string::npos) << e;
}

TEST(VerifyLowered, RejectsALoopThatRebindsAnEnclosingLoopVariable) {
    Expr x = int_var("x");
    Stmt body = For::make("x", 0, 4, ForType::Serial, copy_loop("x"));
    std::string e = error_of(func_with(body));
    EXPECT_NE(e.find("loop variable rebound in host code of 'f': loop 'x'"), std::string::npos)
        << e;
}

TEST(VerifyLowered, RejectsLoopsThatLoweringShouldHaveReplaced) {
    for (ForType t :
         {ForType::Vectorized, ForType::Unrolled, ForType::GPUBlock, ForType::GPUThread}) {
        std::string e = error_of(func_with(copy_loop("x", t)));
        EXPECT_NE(
            e.find(std::string("loop left in host code of 'f': ") + for_type_name(t) + " loop 'x'"),
            std::string::npos)
            << e;
    }
}

Stmt launch(int kernel) {
    return Evaluate::make(
        Call::make(Int(32), intrinsic::gpu_launch, {kernel, 1, 1, 1}, Call::Intrinsic));
}

DeviceKernel kernel_with(const Stmt &body) {
    DeviceKernel k;
    k.name = "k0";
    k.args = {{"out", true, Int(32), false, true}, {"n", false, Int(32), false, false}};
    k.body = body;
    return k;
}

TEST(VerifyLowered, AcceptsAKernelUsingItsArguments) {
    LoweredFunc f = func_with(launch(0));
    Expr t = Call::make(Int(32), intrinsic::gpu_thread_id, {0}, Call::Intrinsic);
    f.kernels.push_back(kernel_with(
        Allocate::make("s", Int(32), MemoryType::GPUShared, {32}, Expr(),
                       Block::make(Store::make("s", int_var("n"), t),
                                   Store::make("out", Load::make(Int(32), "s", t), t)))));
    EXPECT_EQ(error_of(f), "(no error)");
}

TEST(VerifyLowered, RejectsALaunchOfAKernelThatDoesNotExist) {
    LoweredFunc f = func_with(launch(1));
    f.kernels.push_back(kernel_with(Store::make("out", 0, 0)));
    std::string e = error_of(f);
    EXPECT_NE(e.find("bad gpu_launch in host code of 'f'"), std::string::npos) << e;
}

TEST(VerifyLowered, RejectsAKernelReadingAHostVariable) {
    LoweredFunc f = func_with(LetStmt::make("m", 1, launch(0)));
    f.kernels.push_back(kernel_with(Store::make("out", int_var("m"), 0)));
    std::string e = error_of(f);
    EXPECT_NE(e.find("undefined variable in kernel 0 ('k0') of 'f': 'm'"), std::string::npos) << e;
}

TEST(VerifyLowered, RejectsAKernelLoadingABufferThatIsNotItsArgument) {
    LoweredFunc f = func_with(launch(0));
    f.kernels.push_back(kernel_with(Store::make("out", Load::make(Int(32), "in", 0), 0)));
    std::string e = error_of(f);
    EXPECT_NE(e.find("unknown buffer in kernel 0 ('k0') of 'f': load from 'in'"), std::string::npos)
        << e;
}

TEST(VerifyLowered, RejectsAKernelAllocationOfVariableSize) {
    LoweredFunc f = func_with(launch(0));
    f.kernels.push_back(kernel_with(Allocate::make(
        "s", Int(32), MemoryType::Register, {int_var("n")}, Expr(), Store::make("s", 0, 0))));
    std::string e = error_of(f);
    EXPECT_NE(e.find("bad kernel in kernel 0 ('k0') of 'f': allocation 's' has extent n"),
              std::string::npos)
        << e;
}

TEST(VerifyLowered, RejectsSharedMemoryInHostCode) {
    Stmt body =
        Allocate::make("s", Int(32), MemoryType::GPUShared, {4}, Expr(), Store::make("s", 0, 0));
    std::string e = error_of(func_with(body));
    EXPECT_NE(e.find("bad kernel in host code of 'f': GPU shared allocation 's' outside a kernel"),
              std::string::npos)
        << e;
}

TEST(VerifyLowered, RejectsAKernelWithMoreThanThreeBlockDimensions) {
    LoweredFunc f = func_with(launch(0));
    f.kernels.push_back(kernel_with(Store::make("out", 0, 0)));
    f.kernels[0].block_dims = 4;
    std::string e = error_of(f);
    EXPECT_NE(e.find("bad kernel in kernel 0 ('k0') of 'f': 4 block and 1 thread dimensions"),
              std::string::npos)
        << e;
}

} // namespace
} // namespace kiln
