// What the JIT and the ahead-of-time outputs show: targets, LLVM IR, assembly, object files and
// compile times.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include <unistd.h>

#include "CodeGenTestUtil.h"
#include "codegen/CodeGenLLVM.h"
#include "codegen/ObjectEmitter.h"
#include "codegen/Target.h"
#include "lang/Error.h"
#include "tests/lang/ErrorOf.h"

using namespace kiln;
using namespace kiln::test;

namespace {

/// out[x] = in[x] * 2 + 1 in 16-lane float32 vectors.
LoweredFunc vector_scale(const std::string &name) {
    Expr x = var("xo") * 16;
    Expr v = Load::make(Float(32, 16), "in", Ramp::make(x, 1, 16)) * Broadcast::make(2.0f, 16) +
             Broadcast::make(1.0f, 16);
    return make_func(
        name, {buffer_arg("in", Float(32), 1), buffer_arg("out", Float(32), 1, true)},
        loop("xo", 0, extent_of("out") / 16, Store::make("out", v, Ramp::make(x, 1, 16))));
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string temp_path(const std::string &file) {
    return (std::filesystem::temp_directory_path() /
            ("kiln_codegen_" + std::to_string(::getpid()) + "_" + file))
        .string();
}

} // namespace

TEST(Target, HostDescribesThisMachine) {
    Target t = Target::host();
    EXPECT_FALSE(t.triple.empty());
    EXPECT_FALSE(t.cpu.empty());
    EXPECT_FALSE(t.fast_math);
    if (t.has_feature("avx512f")) {
        EXPECT_EQ(t.vector_bits, 512);
    } else {
        EXPECT_LE(t.vector_bits, 256);
    }
    std::printf("[ info ] host target: %s, %s, %d-bit vectors\n", t.triple.c_str(), t.cpu.c_str(),
                t.vector_bits);
}

TEST(Target, TextFormRoundTripsAndIsStable) {
    Target t = Target::host();
    t.fast_math = true;
    EXPECT_EQ(Target::from_string(t.to_string()), t);
    EXPECT_EQ(Target::host().to_string(), Target::host().to_string());
    Target u = Target::from_string("cpu=znver4;triple=x86_64-unknown-linux-gnu;vector_bits=256");
    EXPECT_EQ(u.cpu, "znver4");
    EXPECT_EQ(u.vector_bits, 256);
    EXPECT_EQ(u.to_string(),
              "triple=x86_64-unknown-linux-gnu;cpu=znver4;features=;vector_bits=256;fast_math=0");
}

// threads (the thread count hand schedules plan their tasks for) appears in the text only when
// set, so the keys of targets without it are what they were; it parses from a named target's
// overrides too.
TEST(Target, ThreadsIsInTheTextOnlyWhenSet) {
    Target t = Target::host();
    EXPECT_EQ(t.threads, 0);
    EXPECT_EQ(t.to_string().find("threads"), std::string::npos) << t.to_string();
    t.threads = 32;
    EXPECT_NE(t.to_string().find(";threads=32"), std::string::npos) << t.to_string();
    EXPECT_EQ(Target::from_string(t.to_string()), t);
    EXPECT_EQ(Target::parse("host;threads=64").threads, 64);
    EXPECT_EQ(Target::parse("x86-64-v3;threads=1").threads, 1);
}

TEST(Target, ABadThreadCountIsAnErrorNamingTheValue) {
    for (const char *bad : {"0", "-2", "abc", "", "1025", "99999", " 4", "4x"}) {
        std::string text = std::string("host;threads=") + bad;
        std::string message = kiln::test::error_of<CompileError>([&] { Target::parse(text); });
        EXPECT_NE(message.find("threads must be a thread count from 1 to 1024"), std::string::npos)
            << text << ": " << message;
        EXPECT_NE(message.find(std::string("got '") + bad + "'"), std::string::npos)
            << text << ": " << message;
        // The text as written, not the expanded target string.
        EXPECT_EQ(message.rfind("target '" + text + "': ", 0), 0u) << message;
        EXPECT_EQ(message.find("features="), std::string::npos) << message;
    }
}

TEST(Target, UnknownKeyIsAnErrorNamingIt) {
    try {
        Target::from_string("triple=x86_64-unknown-linux-gnu;color=blue");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("unknown key 'color'"), std::string::npos) << e.what();
    }
}

TEST(JIT, SixteenLaneLoopIsSixteenLaneIRAndZmmAssembly) {
    JITModule m(vector_scale("scale16"));
    TestBuffer<float> in({64}), out({64});
    for (int k = 0; k < 64; k++)
        in.data[k] = float(k);
    ASSERT_EQ(run(m, {&in.pointer, &out.pointer}), kiln_success);
    for (int k = 0; k < 64; k++)
        EXPECT_EQ(out.data[k], float(k) * 2 + 1);
    std::string ir = m.llvm_ir();
    EXPECT_NE(ir.find("<16 x float>"), std::string::npos) << ir;
    EXPECT_NE(ir.find("define i32 @scale16_argv(ptr"), std::string::npos) << ir;
    // The zmm check compiles for an explicit AVX-512 CPU (nothing is run), whatever the host.
    std::string assembly =
        compile_to_llvm_module(vector_scale("scale16_avx512"), Target::parse("skylake-avx512"))
            .assembly();
    EXPECT_NE(assembly.find("zmm"), std::string::npos) << assembly;
}

TEST(JIT, CompileToObjectWritesAnELFFileWithBothEntryPoints) {
    std::string object = temp_path("scale.o"), assembly = temp_path("scale.s"),
                ir = temp_path("scale.ll");
    LoweredFunc f = vector_scale("scale_aot");
    compile_to_object(f, Target::host(), object);
    compile_to_assembly(f, Target::host(), assembly);
    compile_to_llvm_ir(f, Target::host(), ir);
    std::string bytes = read_file(object);
    ASSERT_GT(bytes.size(), 64u);
    EXPECT_EQ(bytes.substr(0, 4), "\x7f"
                                  "ELF");
    EXPECT_NE(bytes.find("scale_aot_argv"), std::string::npos);
    EXPECT_NE(read_file(assembly).find("scale_aot:"), std::string::npos);
    EXPECT_NE(read_file(ir).find("define i32 @scale_aot(ptr"), std::string::npos);
    std::filesystem::remove(object);
    std::filesystem::remove(assembly);
    std::filesystem::remove(ir);
}

TEST(JIT, UnwritablePathIsARuntimeErrorNamingIt) {
    try {
        compile_to_object(vector_scale("nowhere"), Target::host(), "/nonexistent/dir/out.o");
        FAIL() << "expected a RuntimeError";
    } catch (const RuntimeError &e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/out.o"), std::string::npos);
    }
}

TEST(JIT, CompileTimeOfASmallFunctionIsMeasured) {
    JITModule warm(vector_scale("warm_up"));
    for (const char *name : {"small_a", "small_b", "small_c"}) {
        auto start = std::chrono::steady_clock::now();
        JITModule m(vector_scale(name));
        std::chrono::duration<double, std::milli> wall = std::chrono::steady_clock::now() - start;
        EXPECT_GT(m.compile_time_ms(), 0.0);
        std::printf("[ info ] JIT compile of %s: %.2f ms (wall %.2f ms; first module %.2f ms)\n",
                    name, m.compile_time_ms(), wall.count(), warm.compile_time_ms());
    }
}

TEST(JIT, ModulesAreIndependentAndMovable) {
    JITModule a(vector_scale("same_name"));
    JITModule b(vector_scale("same_name"));
    JITModule moved = std::move(a);
    TestBuffer<float> in({16}), out({16});
    in.data.assign(16, 4.0f);
    ASSERT_EQ(run(moved, {&in.pointer, &out.pointer}), kiln_success);
    EXPECT_EQ(out.data[0], 9.0f);
    ASSERT_EQ(run(b, {&in.pointer, &out.pointer}), kiln_success);
    EXPECT_NE(moved.argv_function(), b.argv_function());
}

TEST(JIT, ModulesCompileConcurrentlyFromSeveralThreads) {
    // The tuner's builder compiles candidates in parallel.
    std::vector<std::unique_ptr<JITModule>> modules(4);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < modules.size(); k++) {
        threads.emplace_back([&modules, k] {
            modules[k] =
                std::make_unique<JITModule>(vector_scale("concurrent" + std::to_string(k)));
        });
    }
    for (std::thread &t : threads)
        t.join();
    TestBuffer<float> in({32}), out({32});
    in.data.assign(32, 1.0f);
    for (const auto &m : modules) {
        std::fill(out.data.begin(), out.data.end(), 0.0f);
        ASSERT_EQ(run(*m, {&in.pointer, &out.pointer}), kiln_success);
        EXPECT_EQ(out.data[31], 3.0f);
    }
}
