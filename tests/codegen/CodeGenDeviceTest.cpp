// The device code generator (codegen/CodeGenDevice.h) and NVRTC (codegen/NVRTC.h): the printed
// text of hand-built kernels in both dialects, their CUDA compiled by NVRTC and assembled by
// ptxas, and their OpenCL run on the first OpenCL device (PoCL's CPU device here) against
// expected values. The semantics fuzzer is CodeGenDeviceFuzzTest.cpp.
#include <gtest/gtest.h>

#include <numeric>

#include "codegen/CodeGenDevice.h"
#include "codegen/NVRTC.h"
#include "lang/Error.h"
#include "lang/IROperator.h"
#include "tests/codegen/DeviceTestUtil.h"

namespace kiln {
namespace {

using test::buffer_argument;
using test::gpu_barrier;
using test::gpu_block_id;
using test::gpu_thread_id;
using test::scalar_argument;

Expr var(const std::string &name, Type t = Int(32)) {
    return Variable::make(t, name);
}

// out[i] = a[i] + b[i] for i < n, with i = block * 64 + thread.
DeviceKernel add_kernel() {
    DeviceKernel k;
    k.name = "add";
    k.args = {buffer_argument("a", Float(32), false), buffer_argument("b", Float(32), false),
              buffer_argument("out", Float(32), true), scalar_argument("n", Int(32))};
    Expr i = var("add.s0.x");
    Stmt store =
        Store::make("out", Load::make(Float(32), "a", i) + Load::make(Float(32), "b", i), i);
    k.body = LetStmt::make("add.s0.x", gpu_block_id(0) * 64 + gpu_thread_id(0),
                           IfThenElse::make(likely(i < var("n")), store));
    k.threads[0] = 64;
    return k;
}

// Each block reverses its 32 values through shared memory.
DeviceKernel reverse_kernel() {
    DeviceKernel k;
    k.name = "reverse_tiles";
    k.args = {buffer_argument("in", Float(32), false), buffer_argument("out", Float(32), true)};
    Expr t = gpu_thread_id(0), base = gpu_block_id(0) * 32;
    Stmt fill = Store::make("tile", Load::make(Float(32), "in", base + t), t);
    Stmt drain = Store::make("out", Load::make(Float(32), "tile", 31 - t), base + t);
    k.body = Allocate::make("tile", Float(32), MemoryType::GPUShared, {Expr(32)}, Expr(),
                            Block::make({fill, gpu_barrier(), drain, Free::make("tile")}));
    k.threads[0] = 32;
    k.shared_bytes = 32 * 4;
    return k;
}

std::string print(const DeviceKernel &k, GpuApi api) {
    return print_device_source({k}, api);
}

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

size_t count(const std::string &text, const std::string &part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
        n++;
    return n;
}

#define EXPECT_CONTAINS(text, part)                                                                \
    EXPECT_TRUE(contains(text, part)) << "expected `" << (part) << "` in:\n" << (text)
#define EXPECT_NOT_CONTAINS(text, part)                                                            \
    EXPECT_FALSE(contains(text, part)) << "did not expect `" << (part) << "` in:\n" << (text)

// ---- Printed text ------------------------------------------------------------------------------

TEST(CodeGenDevice, AddKernelSignaturesInBothDialects) {
    std::string cl = print(add_kernel(), GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void add(\n"
                        "    __global const float *restrict a,\n"
                        "    __global const float *restrict b,\n"
                        "    __global float *restrict out,\n"
                        "    const int n) {");
    EXPECT_CONTAINS(cl, "const int add_s0_x = (int)((uint)get_group_id(0) * 64u + "
                        "(uint)get_local_id(0));");
    EXPECT_CONTAINS(cl, "    if (add_s0_x < n) {\n        out[add_s0_x] = a[add_s0_x] + "
                        "b[add_s0_x];\n    }");
    EXPECT_CONTAINS(cl, "#pragma OPENCL FP_CONTRACT OFF");
    EXPECT_NOT_CONTAINS(cl, "#include");

    std::string cu = print(add_kernel(), GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "extern \"C\" __global__ void __launch_bounds__(64) add(\n"
                        "    const float *__restrict__ a,\n"
                        "    const float *__restrict__ b,\n"
                        "    float *__restrict__ out,\n"
                        "    const int n) {");
    EXPECT_CONTAINS(cu, "const int add_s0_x = (int)(blockIdx.x * 64u + threadIdx.x);");
    EXPECT_NOT_CONTAINS(cu, "typedef"); // only the types in use
    EXPECT_NOT_CONTAINS(cu, "#include");
}

TEST(CodeGenDevice, SharedMemoryAndBarrier) {
    std::string cu = print(reverse_kernel(), GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "    __shared__ float tile[32];\n");
    EXPECT_CONTAINS(cu, "    __syncthreads();\n");
    EXPECT_CONTAINS(cu, "__launch_bounds__(32)");
    std::string cl = print(reverse_kernel(), GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "    __local float tile[32];\n");
    EXPECT_CONTAINS(cl, "    barrier(CLK_LOCAL_MEM_FENCE);\n");
}

// Each block reverses `tiles` tiles of 32 values through one shared tile, a barrier ending each
// iteration (the next one overwrites the tile).
DeviceKernel reverse_tiles_loop_kernel() {
    DeviceKernel k;
    k.name = "reverse_loop";
    k.args = {buffer_argument("in", Float(32), false), buffer_argument("out", Float(32), true),
              scalar_argument("tiles", Int(32))};
    Expr t = gpu_thread_id(0), base = var("base");
    Stmt fill = Store::make("tile", Load::make(Float(32), "in", base + t), t);
    Stmt drain = Store::make("out", Load::make(Float(32), "tile", 31 - t), base + t);
    Stmt body = LetStmt::make("base", (gpu_block_id(0) * var("tiles") + var("i")) * 32,
                              Block::make({fill, gpu_barrier(), drain, gpu_barrier()}));
    Stmt loop = For::make("i", 0, var("tiles"), ForType::Serial, body);
    k.body = Allocate::make("tile", Float(32), MemoryType::GPUShared, {Expr(32)}, Expr(),
                            Block::make(loop, Free::make("tile")));
    k.threads[0] = 32;
    k.shared_bytes = 32 * 4;
    return k;
}

TEST(CodeGenDevice, OpenCLLoopsOpenWithTheirBarrier) {
    // CUDA: the barrier ends the loop body, as in the IR.
    std::string cu = print(reverse_tiles_loop_kernel(), GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "[(int)(31u - threadIdx.x)];\n        __syncthreads();\n    }\n}\n");
    // OpenCL: the body opens with the barrier and one follows the loop (PoCL 3.1 miscompiles
    // loops whose body ends with a barrier after a guarded store; see CodeGenDevice.h).
    std::string cl = print(reverse_tiles_loop_kernel(), GpuApi::OpenCL);
    EXPECT_CONTAINS(cl,
                    "i < tiles; i++) {\n        barrier(CLK_LOCAL_MEM_FENCE);\n        const int "
                    "base = ");
    EXPECT_CONTAINS(cl, "[(int)(31u - (uint)get_local_id(0))];\n    }\n    "
                        "barrier(CLK_LOCAL_MEM_FENCE);\n}\n");
    EXPECT_EQ(count(cl, "barrier(CLK_LOCAL_MEM_FENCE);"), 3u) << cl;
}

TEST(CodeGenDevice, BarriersInARowArePrintedOnce) {
    // Barriers before and after the loop, and two in a row inside it: in OpenCL the loop's own
    // barriers (opening its body, following it) take their places (PoCL 3.1 lost a store to
    // local memory before a barrier that came right before such a loop); in CUDA two in a row
    // print as one.
    DeviceKernel k = reverse_tiles_loop_kernel();
    const auto *alloc = k.body.as<Allocate>();
    const auto *loop = alloc->body.as<Block>()->first.as<For>();
    const auto *let = loop->body.as<LetStmt>();
    Stmt twice = Block::make({let->body, gpu_barrier()});
    Stmt body = Block::make({gpu_barrier(), gpu_barrier(),
                             For::make(loop->name, loop->min, loop->extent, loop->for_type,
                                       LetStmt::make(let->name, let->value, twice)),
                             gpu_barrier(), Free::make("tile")});
    k.body = Allocate::make("tile", Float(32), MemoryType::GPUShared, {Expr(32)}, Expr(), body);
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_EQ(count(cl, "barrier(CLK_LOCAL_MEM_FENCE);"), 3u) << cl;
    EXPECT_CONTAINS(cl, "[32];\n    for (int i = 0; i < tiles; i++) {\n        barrier(");
    std::string cu = print(k, GpuApi::CUDA);
    // Before the loop, between fill and drain, ending the body, after the loop.
    EXPECT_EQ(count(cu, "__syncthreads();"), 4u) << cu;
}

TEST(CodeGenDevice, SharedAllocationIsDeclaredAtFunctionScope) {
    // Inside a let, still printed first (OpenCL allows __local only at function scope).
    DeviceKernel k = reverse_kernel();
    k.body = LetStmt::make("size", 32, k.body);
    k.body = Allocate::make("tile", Float(32), MemoryType::GPUShared, {var("size")}, Expr(),
                            k.body.as<LetStmt>()->body.as<Allocate>()->body);
    k.body = LetStmt::make("size", 32, k.body);
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "{\n    __local float tile[32];\n    const int size = 32;");
}

TEST(CodeGenDevice, NonConstantSharedAllocationIsInternalError) {
    DeviceKernel k = reverse_kernel();
    k.args.push_back(scalar_argument("n", Int(32)));
    k.body = Allocate::make("tile", Float(32), MemoryType::GPUShared, {var("n")}, Expr(),
                            k.body.as<Allocate>()->body);
    try {
        print(k, GpuApi::CUDA);
        FAIL() << "expected an InternalError";
    } catch (const InternalError &e) {
        EXPECT_CONTAINS(std::string(e.what()), "allocation 'tile' needs constant extents");
    }
}

TEST(CodeGenDevice, NamesAreMangledIntoUniqueIdentifiers) {
    DeviceKernel k;
    k.name = "names";
    k.args = {buffer_argument("out.buf", Int(32), true),
              scalar_argument("blur_y.s0.x", Int(32)),
              scalar_argument("blur_y$s0.x", Int(32)),
              scalar_argument("int", Int(32)),
              scalar_argument("float4", Int(32)),
              scalar_argument("kiln_div_i32", Int(32)),
              scalar_argument("3d", Int(32))};
    Expr sum = var("blur_y.s0.x") + var("blur_y$s0.x") + var("int") + var("float4") +
               var("kiln_div_i32") + var("3d");
    k.body = Store::make("out.buf", sum, 0);
    for (GpuApi api : {GpuApi::CUDA, GpuApi::OpenCL}) {
        std::string s = print(k, api);
        EXPECT_CONTAINS(s, "out_buf");
        EXPECT_CONTAINS(s, "const int blur_y_s0_x,");
        EXPECT_CONTAINS(s, "const int blur_y_s0_x_1,");
        EXPECT_CONTAINS(s, "const int int_1,");
        EXPECT_CONTAINS(s, "const int float4_1,");
        EXPECT_CONTAINS(s, "const int v_kiln_div_i32,");
        EXPECT_CONTAINS(s, "const int v3d");
        EXPECT_CONTAINS(s, "out_buf[0] = (int)((uint");
    }
}

// All-capitals names look like macros and are reserved; matmul's buffers are A, B and C, and a
// suffix ("A_1") would still be all capitals, so they get a lowercase prefix instead.
TEST(CodeGenDevice, AllCapitalNamesGetALowercasePrefix) {
    DeviceKernel k;
    k.name = "caps";
    k.args = {buffer_argument("C", Int(32), true), scalar_argument("A", Int(32)),
              scalar_argument("B_PANEL.0", Int(32)), scalar_argument("v_A", Int(32))};
    k.body = Store::make("C", var("A") + var("B_PANEL.0") + var("v_A"), 0);
    for (GpuApi api : {GpuApi::CUDA, GpuApi::OpenCL}) {
        std::string s = print(k, api);
        EXPECT_CONTAINS(s, "v_C[0]");
        EXPECT_CONTAINS(s, "const int v_A,");
        EXPECT_CONTAINS(s, "const int v_B_PANEL_0,");
        EXPECT_CONTAINS(s, "const int v_A_1");
    }
}

TEST(CodeGenDevice, ShadowingLetsGetFreshNames) {
    DeviceKernel k;
    k.name = "shadow";
    k.args = {buffer_argument("out", Int(32), true)};
    Expr x = var("x");
    // let x = 1 in (let x = x + 1 in x * 3) + x, twice in a row
    Expr inner = Let::make("x", x + 1, x * 3);
    Stmt s = Store::make("out", Let::make("x", 1, inner + x), 0);
    k.body = Block::make(s, s);
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "    const int x = 1;\n"
                        "    const int x_1 = (int)((uint)x + 1u);\n"
                        "    out[0] = (int)((uint)x_1 * 3u + (uint)x);\n"
                        "    const int x_2 = 1;\n");
}

TEST(CodeGenDevice, OnlyUsedHelpersArePrintedOnce) {
    DeviceKernel k = add_kernel();
    std::string plain = print(k, GpuApi::OpenCL);
    EXPECT_NOT_CONTAINS(plain, "kiln_");
    Expr x = var("n");
    k.body = Block::make({Store::make("out", cast(Float(32), x / 3 + x % 7 + x / 4 + x % 8), 0),
                          Store::make("out", cast(Float(32), x / 5), 1)});
    for (GpuApi api : {GpuApi::CUDA, GpuApi::OpenCL}) {
        std::string s = print(k, api);
        size_t first = s.find("kiln_div_i32(int a, int b)");
        EXPECT_NE(first, std::string::npos) << s;
        EXPECT_EQ(s.find("kiln_div_i32(int a, int b)", first + 1), std::string::npos) << s;
        EXPECT_CONTAINS(s, "kiln_mod_i32(int a, int b)");
        // Powers of two are shifts and masks.
        EXPECT_CONTAINS(s, "n >> 2");
        EXPECT_CONTAINS(s, "n & 7");
        EXPECT_NOT_CONTAINS(s, "kiln_min");
    }
}

TEST(CodeGenDevice, ArithmeticWrapsThroughUnsignedTypes) {
    DeviceKernel k;
    k.name = "wrap";
    k.args = {buffer_argument("out", Int(32), true), scalar_argument("x", Int(32)),
              scalar_argument("w", Int(32)),         scalar_argument("y", Int(32)),
              scalar_argument("f", Float(32)),       scalar_argument("c", Int(8))};
    Expr x = var("x"), w = var("w"), y = var("y"), f = var("f", Float(32)), c = var("c", Int(8));
    k.body = Block::make({Store::make("out", x * w + y - 1, 0),
                          Store::make("out", cast(Int(32), f * 2.0f + 1.0f), 1),
                          Store::make("out", cast(Int(32), c * c), 2)});
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "out[0] = (int)((uint)x * (uint)w + (uint)y - 1u);");
    EXPECT_CONTAINS(cl, "out[1] = convert_int_sat(f * 2.0f + 1.0f);");
    EXPECT_CONTAINS(cl, "out[2] = (int)(char)((uint)c * (uint)c);");
    std::string cu = print(k, GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "out[0] = (int)((uint32_t)x * (uint32_t)w + (uint32_t)y - 1u);");
    EXPECT_CONTAINS(cu, "out[1] = kiln_f32_to_i32(f * 2.0f + 1.0f);");
    EXPECT_CONTAINS(cu, "static __device__ inline int kiln_f32_to_i32(float x) {");
    EXPECT_CONTAINS(cu, "typedef signed char int8_t;");
}

TEST(CodeGenDevice, BoolScalarsAndBuffersInOpenCL) {
    DeviceKernel k;
    k.name = "flags";
    k.args = {buffer_argument("in", Bool(), false), buffer_argument("out", Bool(), true),
              scalar_argument("flag", Bool())};
    k.body = Store::make("out", Load::make(Bool(), "in", 0) && var("flag", Bool()), 0);
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "    __global const uchar *restrict in,\n"
                        "    __global uchar *restrict out,\n"
                        "    const uchar flag_arg) {\n");
    EXPECT_CONTAINS(cl, "    const bool flag = flag_arg != 0;\n");
    EXPECT_CONTAINS(cl, "out[0] = (bool)in[0] && flag;");
    std::string cu = print(k, GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "    const bool *__restrict__ in,\n"
                        "    bool *__restrict__ out,\n"
                        "    const bool flag) {\n");
}

TEST(CodeGenDevice, Float64EnablesTheExtensionInOpenCL) {
    DeviceKernel k;
    k.name = "f64";
    k.args = {buffer_argument("out", Float(64), true), scalar_argument("x", Float(64))};
    k.body = Store::make("out", exp(var("x", Float(64))) + 0.5, 0);
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable");
    EXPECT_CONTAINS(cl, "out[0] = exp(x) + 0.5;");
    EXPECT_NOT_CONTAINS(print(add_kernel(), GpuApi::OpenCL), "cl_khr_fp64");
    std::string cu = print(k, GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "out[0] = exp(x) + 0.5;");
}

TEST(CodeGenDevice, MathFunctionsPerDialect) {
    DeviceKernel k;
    k.name = "math";
    k.args = {buffer_argument("out", Float(32), true), scalar_argument("x", Float(32))};
    Expr x = var("x", Float(32));
    k.body = Store::make("out", round(x) + abs(x) + pow(x, x) + fma(x, x, x) + min(x, 1.0f), 0);
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "kiln_round_f32(x) + fabs(x) + pow(x, x) + fma(x, x, x) + "
                        "kiln_min_f32(x, 1.0f)");
    EXPECT_CONTAINS(cl, "static inline float kiln_min_f32(float a, float b) {\n    return a < b ? "
                        "a : b;\n}");
    std::string cu = print(k, GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "rintf(x) + fabsf(x) + powf(x, x) + fmaf(x, x, x) + kiln_min_f32(x, 1.0f)");
}

TEST(CodeGenDevice, LoopsIfsAndPrivateArraysKeepTheirStructure) {
    DeviceKernel k;
    k.name = "loops";
    k.args = {buffer_argument("out", Int(32), true), scalar_argument("n", Int(32))};
    Expr i = var("f.s0.i"), j = var("f.s1.j"), n = var("n");
    Stmt fill = For::make("f.s0.i", 0, 4, ForType::Serial, Store::make("acc", i * i, i));
    Stmt use =
        For::make("f.s1.j", n - 1, n * 2, ForType::Unrolled,
                  IfThenElse::make(
                      j > 2, Store::make("out", Load::make(Int(32), "acc", 1), j),
                      IfThenElse::make(j < 0, Store::make("out", 0, 0), Store::make("out", 1, 0))));
    k.body = Allocate::make("acc", Int(32), MemoryType::Register, {Expr(2), Expr(2)}, Expr(),
                            Block::make(fill, use));
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "    int acc[4];\n"
                        "    for (int f_s0_i = 0; f_s0_i < 4; f_s0_i++) {\n"
                        "        acc[f_s0_i] = (int)((uint)f_s0_i * (uint)f_s0_i);\n"
                        "    }\n"
                        "    const int f_s1_j_min = (int)((uint)n - 1u);\n"
                        "    const int f_s1_j_extent = (int)((uint)n * 2u);\n"
                        "    for (int f_s1_j = f_s1_j_min; f_s1_j < f_s1_j_min + f_s1_j_extent; "
                        "f_s1_j++) {\n"
                        "        if (f_s1_j > 2) {\n"
                        "            out[f_s1_j] = acc[1];\n"
                        "        } else if (f_s1_j < 0) {\n"
                        "            out[0] = 0;\n"
                        "        } else {\n"
                        "            out[0] = 1;\n"
                        "        }\n"
                        "    }\n");
}

TEST(CodeGenDevice, ElseIfWhoseConditionNeedsADeclarationNests) {
    DeviceKernel k;
    k.name = "chain";
    k.args = {buffer_argument("out", Int(32), true), scalar_argument("n", Int(32))};
    Expr n = var("n"), t = var("t");
    Expr second = Let::make("t", n * n, t > 4 && t < 100);
    k.body = IfThenElse::make(n > 0, Store::make("out", 1, 0),
                              IfThenElse::make(second, Store::make("out", 2, 0)));
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "    if (n > 0) {\n"
                        "        out[0] = 1;\n"
                        "    } else {\n"
                        "        const int t = (int)((uint)n * (uint)n);\n"
                        "        if (t > 4 && t < 100) {\n"
                        "            out[0] = 2;\n"
                        "        }\n"
                        "    }\n");
}

TEST(CodeGenDevice, VectorsInBothDialects) {
    DeviceKernel k;
    k.name = "vec";
    k.args = {buffer_argument("in", Float(32), false), buffer_argument("out", Float(32), true),
              scalar_argument("x", Int(32))};
    Expr x = var("x");
    Expr v = Load::make(Float(32, 4), "in", Ramp::make(x, 1, 4));
    Expr pred = Ramp::make(x, 1, 4) < Broadcast::make(Expr(10), 4);
    k.body =
        LetStmt::make("v", v * Broadcast::make(Expr(2.0f), 4),
                      Store::make("out", var("v", Float(32, 4)), Ramp::make(x * 4, 2, 4), pred));
    // OpenCL: vector types, vloadN for the dense load, one store per lane under its predicate.
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl,
                    "    const float4 v = vload4(0, in + x) * (float4)(2.0f);\n"
                    "    if (x < 10) out[(int)((uint)x * 4u)] = v.s0;\n"
                    "    if ((int)((uint)x + 1u) < 10) out[(int)((uint)x * 4u + 2u)] = v.s1;\n");
    // CUDA: lane by lane, vector lets as arrays; the dense load is one float4 (through the
    // helper that checks the alignment), the strided, predicated store one store per lane.
    std::string cu = print(k, GpuApi::CUDA);
    EXPECT_CONTAINS(cu,
                    "    const float4 in_vec = kiln_load_f32x4(in + x);\n"
                    "    const float v[4] = {in_vec.x * 2.0f, in_vec.y * 2.0f, in_vec.z * 2.0f, "
                    "in_vec.w * 2.0f};\n");
    EXPECT_CONTAINS(cu, "if (((unsigned long long)p & 15) == 0) return *(const float4 *)p;");
    EXPECT_CONTAINS(cu, "    if (x < 10) out[(int)((uint32_t)x * 4u)] = v[0];\n");
}

void expect_cuda_compiles(const std::string &source); // below, with the NVRTC tests

TEST(CodeGenDevice, DenseCUDAStoresAndLoadsMoveWholeVectors) {
    DeviceKernel k;
    k.name = "copy";
    k.args = {buffer_argument("a", Int(32), false), buffer_argument("b", Int(32), true),
              buffer_argument("c", Float(32), true), scalar_argument("x", Int(32))};
    Expr x = var("x");
    Expr ramp = Ramp::make(x * 2, 1, 2);
    Expr loaded = Load::make(Int(32, 2), "a", ramp);
    k.body = Block::make(
        Store::make("b", loaded + Broadcast::make(x, 2), ramp),
        // A vector let holding a dense ramp is a dense index; 8 lanes have no CUDA vector type.
        Block::make(
            LetStmt::make("i", Ramp::make(x, 1, 4),
                          Store::make("c", Broadcast::make(Expr(1.0f), 4), var("i", Int(32, 4)))),
            Store::make("c", Broadcast::make(Expr(2.0f), 8), Ramp::make(x, 1, 8))));
    std::string cu = print(k, GpuApi::CUDA);
    EXPECT_CONTAINS(cu, "    const int2 a_vec = kiln_load_i32x2(a + (int)((uint32_t)x * 2u));\n"
                        "    kiln_store_i32x2(b + (int)((uint32_t)x * 2u), "
                        "(int)((uint32_t)a_vec.x + (uint32_t)x), "
                        "(int)((uint32_t)a_vec.y + (uint32_t)x));\n");
    EXPECT_CONTAINS(cu, "if (((unsigned long long)p & 7) == 0) {");
    EXPECT_CONTAINS(cu, "    kiln_store_f32x4(c + i[0], 1.0f, 1.0f, 1.0f, 1.0f);\n");
    EXPECT_CONTAINS(cu, "    c[x] = 2.0f;\n");
    EXPECT_CONTAINS(cu, "    c[(int)((uint32_t)x + 7u)] = 2.0f;\n");
    expect_cuda_compiles(cu);
}

TEST(CodeGenDevice, DenseVectorStoreIsVstoreInOpenCL) {
    DeviceKernel k;
    k.name = "dense";
    k.args = {buffer_argument("a", Int(32), false), buffer_argument("b", Bool(), true),
              scalar_argument("x", Int(32))};
    Expr x = var("x");
    Expr ramp = Ramp::make(x * 8, 1, 8);
    Expr loaded = Load::make(Int(32, 8), "a", ramp);
    k.body = Block::make(
        Store::make("a", loaded + loaded * Broadcast::make(x, 8), ramp),
        Store::make("b", Load::make(Int(32, 8), "a", Ramp::make(x, 3, 8)) < loaded, ramp));
    std::string cl = print(k, GpuApi::OpenCL);
    EXPECT_CONTAINS(cl, "    vstore8(as_int8(as_uint8(vload8(0, a + (int)((uint)x * 8u))) + "
                        "as_uint8(vload8(0, a + (int)((uint)x * 8u))) * as_uint8((int8)(x))), 0, "
                        "a + (int)((uint)x * 8u));\n");
    // A gather is a vector literal of its lanes; a bool vector is a mask, stored as 0 or 1.
    EXPECT_CONTAINS(cl, "    vstore8(convert_uchar8(-((int8)(a[x], a[(int)((uint)x + 3u)], ");
    EXPECT_CONTAINS(cl, "< vload8(0, a + (int)((uint)x * 8u)))), 0, b + (int)((uint)x * 8u));");
}

TEST(CodeGenDevice, AssertInKernelIsInternalError) {
    DeviceKernel k = add_kernel();
    k.body = Block::make(AssertStmt::make(var("n") > 0, "n must be positive"), k.body);
    EXPECT_THROW(print(k, GpuApi::OpenCL), InternalError);
    EXPECT_THROW(print_device_source({add_kernel()}, GpuApi::None), InternalError);
}

// ---- NVRTC ---------------------------------------------------------------------------------

// CUDA source compiled to PTX for sm_90 and assembled by ptxas; skips (saying why) without them.
void expect_cuda_compiles(const std::string &source) {
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC is not available: " << why;
    std::string ptx;
    try {
        ptx = compile_cuda_to_ptx(source, "sm_90");
    } catch (const CompileError &e) {
        FAIL() << e.what() << "\nsource:\n" << test::numbered(source);
    }
    EXPECT_CONTAINS(ptx, ".target sm_90");
    std::string ptxas = test::find_ptxas(&why);
    if (ptxas.empty()) GTEST_SKIP() << "PTX not assembled: " << why;
    std::string log;
    EXPECT_TRUE(test::ptxas_assembles(ptxas, ptx, &log)) << log << "\nsource:\n"
                                                         << test::numbered(source);
}

TEST(NVRTC, PrintedKernelsCompileAndAssembleForSm90) {
    std::vector<DeviceKernel> kernels = {add_kernel(), reverse_kernel()};
    expect_cuda_compiles(print_device_source(kernels, GpuApi::CUDA));
}

TEST(NVRTC, BrokenSourceGivesCompileErrorWithLogAndLine) {
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC is not available: " << why;
    std::string source = "extern \"C\" __global__ void k(float *out) {\n"
                         "    out[0] = undefined_name + 1.0f;\n"
                         "}\n";
    try {
        compile_cuda_to_ptx(source, "sm_90", "broken.cu");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        std::string m = e.what();
        EXPECT_CONTAINS(m, "nvrtc could not compile broken.cu for compute_90");
        EXPECT_CONTAINS(m, "broken.cu(2): error: identifier \"undefined_name\" is undefined");
        EXPECT_CONTAINS(m, "broken.cu:2:     out[0] = undefined_name + 1.0f;");
    }
}

TEST(NVRTC, CubinNeedsARealArchitecture) {
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC is not available: " << why;
    std::string source = print(add_kernel(), GpuApi::CUDA);
    std::vector<char> cubin = compile_cuda_to_cubin(source, "sm_90");
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(std::string(cubin.data() + 1, 3), "ELF");
    try {
        compile_cuda_to_cubin(source, "compute_90");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_CONTAINS(std::string(e.what()), "a cubin needs a real architecture such as sm_90");
    }
}

TEST(NVRTC, MalformedArchitectureIsCompileError) {
    try {
        compile_cuda_to_ptx("", "hopper");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_CONTAINS(std::string(e.what()),
                        "architecture 'hopper' is not of the form sm_XX or compute_XX");
    }
}

TEST(NVRTC, OptionsForbidContractionAndFastMath) {
    std::vector<std::string> o = nvrtc_options("compute_90");
    EXPECT_NE(std::find(o.begin(), o.end(), "--fmad=false"), o.end());
    EXPECT_NE(std::find(o.begin(), o.end(), "--std=c++17"), o.end());
    EXPECT_EQ(std::find(o.begin(), o.end(), "--use_fast_math"), o.end());
}

} // namespace
} // namespace kiln
