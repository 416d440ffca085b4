// Ahead-of-time compilation: the files a pipeline compiles to, a C program built against them
// with the system C compiler and only libkiln_runtime.a, the generator driver and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/AOT.h"
#include "codegen/CUDABundle.h"
#include "codegen/MultiTarget.h"
#include "codegen/NVRTC.h"
#include "codegen/ObjectEmitter.h"
#include "driver/Generator.h"
#include "kiln.h"
#include "runtime/kiln_runtime.h"

using namespace kiln;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

/// A fresh directory per test, removed at the end.
class TempDir {
public:
    TempDir() {
        const ::testing::TestInfo *info = ::testing::UnitTest::GetInstance()->current_test_info();
        path = fs::temp_directory_path() /
               ("kiln_aot_" + std::to_string(getpid()) + "_" + info->name());
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
    std::string operator/(const std::string &name) const { return (path / name).string(); }
    fs::path path;
};

struct CommandResult {
    int status = -1;
    std::string output; ///< stdout and stderr together
};

CommandResult run_command(const std::string &command) {
    CommandResult r;
    FILE *p = popen((command + " 2>&1").c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
        r.output.append(buf.data(), n);
    int status = pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_file(const std::string &path, const std::string &text) {
    std::ofstream out(path);
    out << text;
}

/// out(x, y) = select(b_flip, -in(x, y), in(x, y)) * a_gain + c_bias, rows in parallel. The
/// scalar names sort in the order they are used, so the argument order is unambiguous.
Pipeline scale_pipeline() {
    ImageParam in(Float(32), 2, "in");
    Param<float> gain("a_gain");
    Param<bool> flip("b_flip");
    Param<uint8_t> bias("c_bias");
    Func out("out");
    Var x("x"), y("y");
    out(x, y) = select(flip, -in(x, y), in(x, y)) * gain + cast<float>(bias);
    out.parallel(y).vectorize(x, 4);
    return out;
}

const char *scale_signature = "int aot_scale(kiln_buffer_t *in, float a_gain, bool b_flip, "
                              "uint8_t c_bias, kiln_buffer_t *out)";

/// Compiles and links a C99 program against a generated kernel with the system C compiler, the
/// way a user without CMake would; returns the compiler's result.
CommandResult build_c_program(const TempDir &dir, const std::string &source_name,
                              const std::string &library, const std::string &exe) {
    std::string command =
        std::string(KILN_TEST_CC) + " -std=c99 -pedantic -Wall -Wextra -Werror -I" +
        dir.path.string() + " -I" KILN_TEST_RUNTIME_INCLUDE_DIR " " + dir / source_name + " " +
        library + " " KILN_TEST_RUNTIME_LIBRARY " " KILN_TEST_LINK_FLAGS " -fopenmp -lm -o " + exe;
    return run_command(command);
}

const char *scale_program = R"(#include <stdio.h>
#include <string.h>
#include "aot_scale.h"

static kiln_buffer_t describe(void *data, kiln_dimension_t dim[2], int w, int h, int code) {
    kiln_buffer_t b;
    memset(&b, 0, sizeof(b));
    dim[0].min = 0; dim[0].extent = w; dim[0].stride = 1; dim[0].flags = 0;
    dim[1].min = 0; dim[1].extent = h; dim[1].stride = w; dim[1].flags = 0;
    b.host = (uint8_t *)data;
    b.type.code = (uint8_t)code;
    b.type.bits = 32;
    b.type.lanes = 1;
    b.dimensions = 2;
    b.dim = dim;
    return b;
}

int main(void) {
    enum { W = 23, H = 9 };
    static float in[W * H], out[W * H];
    kiln_dimension_t din[2], dout[2];
    kiln_buffer_t bin, bout;
    int i, code, wrong = 0;
    for (i = 0; i < W * H; i++) in[i] = (float)i * 0.25f;
    bin = describe(in, din, W, H, kiln_type_float);
    bout = describe(out, dout, W, H, kiln_type_float);
    code = aot_scale(&bin, 2.0f, true, 3, &bout);
    for (i = 0; i < W * H; i++) wrong += out[i] != -in[i] * 2.0f + 3.0f;
    printf("run: %d wrong: %d\n", code, wrong);

    /* An input with fewer rows than the output needs. */
    bin = describe(in, din, W, H - 1, kiln_type_float);
    code = aot_scale(&bin, 2.0f, false, 3, &bout);
    printf("short input: %s: %s\n", kiln_error_code_name(code), kiln_last_error_message());

    /* An int32 buffer where float32 is expected. */
    bin = describe(in, din, W, H, kiln_type_int);
    code = aot_scale(&bin, 2.0f, false, 3, &bout);
    printf("wrong type: %s: %s\n", kiln_error_code_name(code), kiln_last_error_message());

    code = aot_scale(NULL, 2.0f, false, 3, &bout);
    printf("null: %s\n", kiln_error_code_name(code));
    return 0;
}
)";

} // namespace

TEST(AOT, CompileToWritesEveryOutputKind) {
    TempDir dir;
    scale_pipeline().compile_to(OutputSet::in_directory(dir.path.string(), "aot_scale"),
                                "aot_scale");
    for (OutputKind k : all_output_kinds()) {
        // A pipeline without GPU loops has no kernels' source to write.
        if (k == OutputKind::OpenCLSource || k == OutputKind::CUDASource) continue;
        std::string path = dir / ("aot_scale" + output_suffix(k));
        ASSERT_TRUE(fs::exists(path)) << path;
        EXPECT_GT(fs::file_size(path), 0u) << path;
    }
    std::string header = read_file(dir / "aot_scale.h");
    EXPECT_THAT(header, HasSubstr(std::string(scale_signature) + ";"));
    EXPECT_THAT(header, HasSubstr("int aot_scale_argv(void **args);"));
    EXPECT_THAT(header, HasSubstr("#include \"kiln_runtime.h\""));
    std::string json = read_file(dir / "aot_scale.json");
    EXPECT_THAT(json, HasSubstr("\"name\": \"aot_scale\""));
    EXPECT_THAT(json, HasSubstr("{\"name\": \"b_flip\", \"c_name\": \"b_flip\", \"kind\": "
                                "\"scalar\", \"direction\": \"input\", \"type\": \"bool\""));
    EXPECT_THAT(json, HasSubstr("{\"name\": \"out\", \"c_name\": \"out\", \"kind\": \"buffer\", "
                                "\"direction\": \"output\", \"type\": \"float32\", "
                                "\"dimensions\": 2}"));
    EXPECT_THAT(read_file(dir / "aot_scale.stmt"), HasSubstr("produce out"));
    EXPECT_THAT(read_file(dir / "aot_scale.ll"), HasSubstr("@aot_scale("));
    EXPECT_THAT(read_file(dir / "aot_scale.s"), HasSubstr("aot_scale:"));
    // The static library is an ar archive holding the object.
    EXPECT_EQ(read_file(dir / "aot_scale.a").substr(0, 8), "!<arch>\n");
    EXPECT_EQ(read_file(dir / "aot_scale.o").substr(0, 4), "\x7f"
                                                           "ELF");
}

TEST(AOT, PlainCProgramLinksTheKernelAndTheRuntimeOnly) {
    TempDir dir;
    scale_pipeline().compile_to_static_library(dir.path.string(), "aot_scale");
    write_file(dir / "main.c", scale_program);
    CommandResult build = build_c_program(dir, "main.c", dir / "aot_scale.a", dir / "main");
    ASSERT_EQ(build.status, 0) << build.output;
    CommandResult run = run_command(dir / "main");
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_THAT(run.output, HasSubstr("run: 0 wrong: 0"));
    // Wrong buffers are error codes with messages naming the buffer, not crashes.
    EXPECT_THAT(run.output, HasSubstr("short input: kiln_error_access_out_of_bounds: buffer 'in' "
                                      "dimension 1"));
    EXPECT_THAT(run.output, HasSubstr("wrong type: kiln_error_bad_type:"));
    EXPECT_THAT(run.output, HasSubstr("null: kiln_error_buffer_argument_null"));
}

TEST(AOTTarget, NamedX86LevelsHaveExactlyTheirFeatures) {
    Target v2 = Target::parse("x86-64-v2"), v3 = Target::parse("x86-64-v3"),
           v4 = Target::parse("x86-64-v4");
    EXPECT_EQ(v3.cpu, "x86-64-v3");
    EXPECT_EQ(v3.triple, Target::host().triple);
    EXPECT_TRUE(v2.has_feature("sse4.2"));
    EXPECT_FALSE(v2.has_feature("avx"));
    EXPECT_EQ(v2.vector_bits, 128);
    EXPECT_TRUE(v3.has_feature("avx2") && v3.has_feature("fma"));
    EXPECT_FALSE(v3.has_feature("avx512f"));
    EXPECT_EQ(v3.vector_bits, 256);
    EXPECT_TRUE(v4.has_feature("avx512f") && v4.has_feature("avx512bw"));
    EXPECT_EQ(v4.vector_bits, 512);
    EXPECT_EQ(Target::from_string(v3.to_string()), v3);
    // Only the CPU's own features, all enabled: the same on every x86-64 machine that parses it.
    EXPECT_EQ(v3.features[0], '+');
    EXPECT_THAT(v3.features, ::testing::Not(HasSubstr(",-")));
    Target skx = Target::parse("skylake-avx512");
    EXPECT_EQ(skx.cpu, "skylake-avx512");
    EXPECT_TRUE(skx.has_feature("avx512f"));
    EXPECT_TRUE(Target::parse("znver4").has_feature("avx512f"));
}

TEST(AOTTarget, NamedCpusCombineWithGpuAndFields) {
    Target cuda = Target::parse("x86-64-v3-cuda");
    EXPECT_EQ(cuda.cpu, "x86-64-v3");
    EXPECT_EQ(cuda.gpu, GpuApi::CUDA);
    EXPECT_EQ(cuda.features, Target::parse("x86-64-v3").features);
    Target fast = Target::parse("x86-64-v3;fast_math=1");
    EXPECT_TRUE(fast.fast_math);
    EXPECT_EQ(fast.cpu, "x86-64-v3");
    Target ocl = Target::parse("skylake-avx512-opencl;vector_bits=256");
    EXPECT_EQ(ocl.cpu, "skylake-avx512");
    EXPECT_EQ(ocl.gpu, GpuApi::OpenCL);
    EXPECT_EQ(ocl.vector_bits, 256);
    EXPECT_EQ(parse_target_string("x86-64-v4"), Target::parse("x86-64-v4"));
}

TEST(AOTTarget, UnknownCpuNameIsAnErrorListingKnownOnes) {
    auto message = [](const std::string &text) {
        try {
            Target::parse(text);
        } catch (const CompileError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    std::string m = message("pentium9-cuda;fast_math=1");
    EXPECT_THAT(m, HasSubstr("target 'pentium9-cuda;fast_math=1': unknown CPU 'pentium9' for " +
                             Target::host().triple + " (e.g. x86-64-v2, x86-64-v3, x86-64-v4, "));
    EXPECT_THAT(m, HasSubstr("skylake-avx512"));
    EXPECT_THAT(m, HasSubstr("expected host, a named x86-64 level (x86-64-v2, x86-64-v3, "
                             "x86-64-v4) or a CPU name LLVM knows"));
    EXPECT_THAT(message(";fast_math=1"), HasSubstr("target ';fast_math=1': expected host"));
}

/// A pipeline whose inner loop is 16 floats wide: AVX-512 code where the target allows it.
Pipeline wide_pipeline() {
    ImageParam in(Float(32), 1, "in");
    Func out("out");
    Var x("x");
    out(x) = in(x)*3.f + 1.f;
    out.vectorize(x, 16);
    return out;
}

TEST(AOTTarget, X86_64V3KernelHasNoAvx512AndV4MayUseIt) {
    TempDir dir;
    std::vector<OutputKind> kinds = {OutputKind::Assembly, OutputKind::LLVMIR, OutputKind::CHeader};
    wide_pipeline().compile_to(OutputSet::in_directory((dir.path / "v3").string(), "k", kinds), "k",
                               Target::parse("x86-64-v3"));
    wide_pipeline().compile_to(OutputSet::in_directory((dir.path / "v4").string(), "k", kinds), "k",
                               Target::parse("x86-64-v4"));
    std::string v3_asm = read_file(dir / "v3/k.s"), v3_ir = read_file(dir / "v3/k.ll");
    EXPECT_THAT(v3_asm, HasSubstr("ymm"));
    EXPECT_THAT(v3_asm, ::testing::Not(HasSubstr("zmm")));
    EXPECT_THAT(v3_ir, HasSubstr("\"target-cpu\"=\"x86-64-v3\""));
    EXPECT_THAT(v3_ir, ::testing::Not(HasSubstr("avx512")));
    EXPECT_THAT(read_file(dir / "v3/k.h"), HasSubstr(" * Target: triple="));
    EXPECT_THAT(read_file(dir / "v3/k.h"), HasSubstr(";cpu=x86-64-v3;"));
    EXPECT_THAT(read_file(dir / "v4/k.s"), HasSubstr("zmm"));
    EXPECT_THAT(read_file(dir / "v4/k.ll"), HasSubstr("+avx512f"));
}

TEST(AOTTarget, X86_64V3KernelRunsFromC) {
    TempDir dir;
    scale_pipeline().compile_to_static_library(dir.path.string(), "aot_scale",
                                               Target::parse("x86-64-v3"));
    write_file(dir / "main.c", scale_program);
    CommandResult build = build_c_program(dir, "main.c", dir / "aot_scale.a", dir / "main");
    ASSERT_EQ(build.status, 0) << build.output;
    CommandResult run = run_command(dir / "main");
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_THAT(run.output, HasSubstr("run: 0 wrong: 0"));
}

/// Runs the multi-target kernel aot_multi (scale_pipeline) with argv[1] forced ("auto": the
/// CPU's choice) and prints the variant it ran, the return code and the number of wrong values.
const char *multi_program = R"(#include <stdio.h>
#include <string.h>
#include "aot_multi.h"
int main(int argc, char **argv) {
    enum { W = 37, H = 5 };
    static float in[W * H], out[W * H];
    kiln_dimension_t din[2] = {{0, W, 1, 0}, {0, H, W, 0}}, dout[2] = {{0, W, 1, 0}, {0, H, W, 0}};
    kiln_buffer_t bin, bout;
    int i, code, wrong = 0;
    memset(&bin, 0, sizeof(bin));
    memset(&bout, 0, sizeof(bout));
    for (i = 0; i < W * H; i++) in[i] = (float)i * 0.5f;
    bin.host = (uint8_t *)in;
    bout.host = (uint8_t *)out;
    bin.type.code = bout.type.code = (uint8_t)kiln_type_float;
    bin.type.bits = bout.type.bits = 32;
    bin.type.lanes = bout.type.lanes = 1;
    bin.dimensions = bout.dimensions = 2;
    bin.dim = din;
    bout.dim = dout;
    if (argc > 1 && strcmp(argv[1], "auto") != 0) kiln_force_target(argv[1]);
    code = aot_multi(&bin, 2.0f, true, 3, &bout);
    for (i = 0; code == 0 && i < W * H; i++) wrong += out[i] != -in[i] * 2.0f + 3.0f;
    printf("variant: %s code: %d wrong: %d\n", kiln_last_target_variant(), code, wrong);
    if (code != 0) printf("error: %s\n", kiln_last_error_message());
    return 0;
}
)";

TEST(AOTMultiTarget, EachVariantRunsAndTheCpuPicksTheFirstItSupports) {
    TempDir dir;
    std::vector<Target> targets = {Target::parse("x86-64-v4"), Target::parse("x86-64-v3"),
                                   Target::parse("x86-64")};
    scale_pipeline().compile_to(
        OutputSet::in_directory(dir.path.string(), "aot_multi",
                                {OutputKind::StaticLibrary, OutputKind::CHeader}),
        "aot_multi", targets);
    std::string header = read_file(dir / "aot_multi.h");
    EXPECT_THAT(header, HasSubstr("int aot_multi(kiln_buffer_t *in, float a_gain, bool b_flip, "
                                  "uint8_t c_bias, kiln_buffer_t *out);"));
    EXPECT_THAT(header, HasSubstr(" *   0 x86-64-v4: triple="));
    EXPECT_THAT(header, HasSubstr(" *   2 x86-64: triple="));
    write_file(dir / "main.c", multi_program);
    CommandResult build = build_c_program(dir, "main.c", dir / "aot_multi.a", dir / "main");
    ASSERT_EQ(build.status, 0) << build.output;

    // Without an override, the first listed whose features this CPU has.
    uint64_t host = required_cpu_features(Target::host());
    std::string expected = "x86-64";
    for (const Target &t : {targets[0], targets[1]}) {
        if ((required_cpu_features(t) & ~host) == 0) {
            expected = t.cpu;
            break;
        }
    }
    EXPECT_THAT(run_command(dir / "main auto").output,
                HasSubstr("variant: " + expected + " code: 0 wrong: 0"));
    // Forced by the function, by name or index, and by the environment.
    for (size_t i = 0; i < targets.size(); i++) {
        if ((required_cpu_features(targets[i]) & ~host) != 0) continue; // cannot run here
        EXPECT_THAT(run_command(dir / "main " + targets[i].cpu).output,
                    HasSubstr("variant: " + targets[i].cpu + " code: 0 wrong: 0"));
        EXPECT_THAT(run_command(dir / "main " + std::to_string(i)).output,
                    HasSubstr("variant: " + targets[i].cpu + " code: 0 wrong: 0"));
        EXPECT_THAT(
            run_command("KILN_FORCE_TARGET=" + targets[i].cpu + " " + dir / "main auto").output,
            HasSubstr("variant: " + targets[i].cpu + " code: 0 wrong: 0"));
    }
    EXPECT_THAT(run_command("KILN_FORCE_TARGET=pentium " + dir / "main auto").output,
                HasSubstr("code: -1 wrong: 0\nerror: kernel 'aot_multi' has no target variant "
                          "'pentium' (forced by KILN_FORCE_TARGET or kiln_force_target; its "
                          "variants: x86-64-v4, x86-64-v3, x86-64, or their indices 0 to 2)"));
}

TEST(AOTMultiTarget, RuntimeFeaturesAgreeWithLLVMsHostDetection) {
    static const char *const names[] = {KILN_CPU_FEATURE_NAMES};
    uint64_t runtime = kiln_cpu_features(), llvm = required_cpu_features(Target::host());
    for (int i = 0; i < KILN_CPU_FEATURE_COUNT; i++) {
        EXPECT_EQ((runtime >> i) & 1, (llvm >> i) & 1) << names[i];
    }
}

TEST(AOTMultiTarget, ForcingAVariantThisCpuCannotRunIsAnError) {
    // Bit 63 is no feature this runtime knows, so no CPU has it.
    kiln_target_variant_t variants[2] = {{"future", uint64_t(1) << 63}, {"plain", 0}};
    kiln_force_target(nullptr);
    EXPECT_EQ(kiln_select_target_variant("k", 2, variants), 1);
    EXPECT_STREQ(kiln_last_target_variant(), "plain");
    kiln_force_target("future");
    EXPECT_EQ(kiln_select_target_variant("k", 2, variants), kiln_error_generic);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kernel 'k': the forced target variant 'future' needs the CPU feature 'bit 63, "
                 "unknown to this runtime', which this CPU lacks; force another variant or none");
    kiln_force_target("1");
    EXPECT_EQ(kiln_select_target_variant("k", 2, variants), 1);
    kiln_force_target(nullptr);
    // A feature the runtime knows but this CPU lacks is named.
    static const char *const names[] = {KILN_CPU_FEATURE_NAMES};
    uint64_t lacking = ((uint64_t(1) << KILN_CPU_FEATURE_COUNT) - 1) & ~kiln_cpu_features();
    if (!lacking) return; // this CPU has all of them
    variants[0].required_features = lacking;
    kiln_force_target("0");
    EXPECT_EQ(kiln_select_target_variant("k", 2, variants), kiln_error_generic);
    EXPECT_EQ(
        std::string(kiln_last_error_message()),
        std::string("kernel 'k': the forced target variant 'future' needs the CPU feature '") +
            names[__builtin_ctzll(lacking)] +
            "', which this CPU lacks; force another variant or none");
    kiln_force_target(nullptr);
}

TEST(AOTMultiTarget, OnlyLibrariesAndHeadersAndANonEmptyList) {
    TempDir dir;
    auto message = [&](const std::vector<Target> &targets, OutputKind kind) {
        try {
            scale_pipeline().compile_to(OutputSet::in_directory(dir.path.string(), "k", {kind}),
                                        "k", targets);
        } catch (const CompileError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    std::vector<Target> two = {Target::parse("x86-64-v3"), Target::parse("x86-64")};
    EXPECT_EQ(message(two, OutputKind::Assembly),
              "kernel 'k' for 2 targets: cannot write assembly; a multi-target kernel is a "
              "static_library with its c_header (and metadata, lowered_stmt); compile for one "
              "target to get the others");
    EXPECT_EQ(message({}, OutputKind::StaticLibrary),
              "a kernel's list of targets is empty; name at least one, e.g. host");
}

TEST(AOTMultiTarget, VariantsMustShareTheSignature) {
    TempDir dir;
    Pipeline p = scale_pipeline();
    LoweredFunc a = p.lower("k"), b = with_argument_order(a, {"a_gain", "in", "b_flip", "c_bias"});
    try {
        compile_lowered_to(
            {a, b}, {Target::parse("x86-64-v3"), Target::parse("x86-64")},
            OutputSet::in_directory(dir.path.string(), "k", {OutputKind::StaticLibrary}));
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "the variants of a multi-target kernel must have one signature: for x86-64-v3 "
                  "it is 'int k(kiln_buffer_t *in, float a_gain, bool b_flip, uint8_t c_bias, "
                  "kiln_buffer_t *out)', for x86-64 'int k(float a_gain, kiln_buffer_t *in, bool "
                  "b_flip, uint8_t c_bias, kiln_buffer_t *out)'");
    }
}

TEST(AOTMultiTarget, RequiredFeaturesAreTheTargetsOwn) {
    uint64_t v3 = required_cpu_features(Target::parse("x86-64-v3")),
             v4 = required_cpu_features(Target::parse("x86-64-v4"));
    EXPECT_EQ(v3 & ~v4, 0u) << "v4 includes v3";
    EXPECT_NE(v4 & ~v3, 0u);
    EXPECT_EQ(target_variant_names({Target::parse("x86-64-v3"), Target::parse("x86-64-v3")}),
              (std::vector<std::string>{"x86-64-v3", "x86-64-v3-1"}));
}

TEST(AOT, HeaderCompilesAsC99AndCxx) {
    TempDir dir;
    scale_pipeline().compile_to(
        OutputSet::in_directory(dir.path.string(), "aot_scale", {OutputKind::CHeader}),
        "aot_scale");
    write_file(dir / "only_header.c", "#include \"aot_scale.h\"\nint main(void) { return 0; }\n");
    write_file(dir / "only_header.cpp",
               "#include \"aot_scale.h\"\nint main() { return aot_scale(nullptr, 1.f, true, 2, "
               "nullptr); }\n");
    std::string includes = " -I" + dir.path.string() + " -I" KILN_TEST_RUNTIME_INCLUDE_DIR " ";
    CommandResult c = run_command(std::string(KILN_TEST_CC) +
                                  " -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only" +
                                  includes + dir / "only_header.c");
    EXPECT_EQ(c.status, 0) << c.output;
    CommandResult cxx = run_command(std::string(KILN_TEST_CXX) +
                                    " -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only" +
                                    includes + dir / "only_header.cpp");
    EXPECT_EQ(cxx.status, 0) << cxx.output;
}

TEST(AOT, LibrariesHoldNoLLVMAndTheKernelExportsOnlyItsEntryPoints) {
    TempDir dir;
    scale_pipeline().compile_to_static_library(dir.path.string(), "aot_scale");
    CommandResult kernel = run_command(KILN_TEST_NM " -g --defined-only " + dir / "aot_scale.a");
    ASSERT_EQ(kernel.status, 0) << kernel.output;
    std::vector<std::string> symbols;
    std::istringstream lines(kernel.output);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::string address, kind, name;
        if (words >> address >> kind >> name) symbols.push_back(name);
    }
    std::sort(symbols.begin(), symbols.end());
    EXPECT_EQ(symbols, (std::vector<std::string>{"aot_scale", "aot_scale_argv"}));
    // The kernel needs the runtime, not LLVM; the runtime itself holds no LLVM either.
    CommandResult undefined = run_command(KILN_TEST_NM " -u " + dir / "aot_scale.a");
    EXPECT_THAT(undefined.output, ::testing::Not(HasSubstr("llvm")));
    CommandResult runtime = run_command(KILN_TEST_NM " -C " KILN_TEST_RUNTIME_LIBRARY);
    ASSERT_EQ(runtime.status, 0) << runtime.output;
    EXPECT_THAT(runtime.output, HasSubstr("kiln_parallel_for"));
    EXPECT_THAT(runtime.output, ::testing::Not(HasSubstr("llvm")));
    EXPECT_THAT(runtime.output, ::testing::Not(HasSubstr("LLVM")));
    // Nor the C++ library: a C program links it with libc, libm and OpenMP alone.
    CommandResult runtime_undefined = run_command(KILN_TEST_NM " -u " KILN_TEST_RUNTIME_LIBRARY);
    ASSERT_EQ(runtime_undefined.status, 0) << runtime_undefined.output;
    for (const char *cxx_symbol : {" _Z", "__cxa_", "__gxx_", "_Unwind_"})
        EXPECT_THAT(runtime_undefined.output, ::testing::Not(HasSubstr(cxx_symbol)));
}

TEST(AOT, StaticLibraryIsDeterministic) {
    TempDir dir;
    Pipeline p = scale_pipeline();
    p.compile_to(
        OutputSet::in_directory((dir.path / "a").string(), "k", {OutputKind::StaticLibrary}), "k");
    p.compile_to(
        OutputSet::in_directory((dir.path / "b").string(), "k", {OutputKind::StaticLibrary}), "k");
    EXPECT_EQ(read_file(dir / "a/k.a"), read_file(dir / "b/k.a"));
}

TEST(AOT, ArgumentNamesBecomeCIdentifiers) {
    EXPECT_EQ(c_argument_name("in.buf$1"), "in_buf_1");
    EXPECT_EQ(c_argument_name("2d"), "_2d");
    EXPECT_EQ(c_argument_name("int"), "_int");
    // Two arguments that sanitize to the same name stay distinct.
    ImageParam a(Float(32), 1, "a.b"), b(Float(32), 1, "a_b");
    Func f("f");
    Var x("x");
    f(x) = a(x) + b(x);
    EXPECT_THAT(c_signature(Pipeline(f).lower("k")),
                HasSubstr("kiln_buffer_t *a_b, kiln_buffer_t *a_b_2, kiln_buffer_t *f"));
}

TEST(AOT, DefaultArgumentOrderIsDeclarationOrder) {
    // Declared b, then the images B and A, then a: the signature keeps that order, whatever the
    // names sort to and whatever the code reads first; the outputs come last.
    Param<float> b("b");
    ImageParam B(Float(32), 1, "B"), A(Float(32), 1, "A");
    Param<int32_t> a("a");
    Func f("f");
    Var x("x");
    f(x) = A(x) * b + B(x) + cast<float>(a);
    EXPECT_EQ(c_signature(Pipeline(f).lower("k")),
              "int k(float b, kiln_buffer_t *B, kiln_buffer_t *A, int32_t a, kiln_buffer_t *f)");
}

TEST(AOT, BuffersUsedDirectlyComeAfterTheDeclaredInputs) {
    Buffer<float> table({8}, "table");
    ImageParam in(Float(32), 1, "in");
    Param<float> gain("gain");
    Func f("f");
    Var x("x");
    f(x) = table(x) + in(x)*gain;
    EXPECT_EQ(c_signature(Pipeline(f).lower("k")),
              "int k(kiln_buffer_t *in, float gain, kiln_buffer_t *table, kiln_buffer_t *f)");
}

TEST(AOT, GivenArgumentOrderWinsOverDeclarationOrder) {
    Param<float> b("b"), a("a");
    Func f("f");
    Var x("x");
    f(x) = cast<float>(x) * a + b;
    LoweredFunc k = Pipeline(f).lower("k");
    EXPECT_EQ(c_signature(k), "int k(float b, float a, kiln_buffer_t *f)");
    EXPECT_EQ(c_signature(with_argument_order(k, {"a", "b"})),
              "int k(float a, float b, kiln_buffer_t *f)");
}

TEST(AOT, ArgumentOrderIsTheOneGiven) {
    Pipeline p = scale_pipeline();
    LoweredFunc f = p.lower("k");
    EXPECT_EQ(c_signature(with_argument_order(f, {"c_bias", "in", "a_gain", "b_flip"})),
              "int k(uint8_t c_bias, kiln_buffer_t *in, float a_gain, bool b_flip, "
              "kiln_buffer_t *out)");
    auto message = [&](const std::vector<std::string> &order) {
        try {
            with_argument_order(f, order);
        } catch (const CompileError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message({"in", "a_gain", "b_flip", "c_bias", "gain"}),
              "argument order of 'k': 'gain' is not an input of the pipeline (inputs: in, a_gain, "
              "b_flip, c_bias)");
    EXPECT_EQ(message({"in", "in"}), "argument order of 'k': 'in' is given twice");
    EXPECT_EQ(message({"in", "a_gain", "b_flip"}),
              "argument order of 'k' leaves out the input 'c_bias' (inputs: in, a_gain, b_flip, "
              "c_bias)");
    EXPECT_EQ(message({"out", "in", "a_gain", "b_flip", "c_bias"}),
              "argument order of 'k': 'out' is not an input of the pipeline (inputs: in, a_gain, "
              "b_flip, c_bias)");
}

TEST(AOT, BadFunctionNamesAreCompileErrors) {
    Pipeline p = scale_pipeline();
    TempDir dir;
    try {
        p.compile_to_static_library(dir.path.string(), "my-kernel");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "function name 'my-kernel' is not a C identifier; use letters, "
                               "digits and '_', not starting with a digit");
    }
    try {
        p.compile_to_static_library(dir.path.string(), "double");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "function name 'double' is a C or C++ keyword; choose another name");
    }
    EXPECT_TRUE(fs::is_empty(dir.path)); // nothing written
}

TEST(AOT, ScalarsWithoutACTypeAreCompileErrors) {
    ImageParam in(Float(32), 1, "in");
    Func f("f");
    Var x("x");
    f(x) = in(x);
    // float16 buffers are fine; a float16 scalar has no C type.
    LoweredFunc lowered = Pipeline(f).lower("k");
    lowered.args.push_back(lowered.args.back());
    lowered.args.back().name = "h";
    lowered.args.back().kind = LoweredArgument::Scalar;
    lowered.args.back().type = Float(16);
    try {
        c_signature(lowered);
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_THAT(e.what(), HasSubstr("param 'h' has type float16, which has no C type for an "
                                        "ahead-of-time entry point"));
    }
}

TEST(AOT, UnknownOutputKindAndUnwritablePathAreErrors) {
    try {
        parse_output_kind("shared_library");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "unknown output kind 'shared_library' (known: object, "
                               "static_library, c_header, assembly, llvm_ir, lowered_stmt, "
                               "metadata, opencl_source, cuda_source)");
    }
    EXPECT_EQ(parse_output_kind("llvm_ir"), OutputKind::LLVMIR);
    TempDir dir;
    write_file(dir / "file", "a file, not a directory");
    try {
        scale_pipeline().compile_to_static_library(dir / "file", "k");
        FAIL() << "expected a RuntimeError";
    } catch (const RuntimeError &e) {
        EXPECT_THAT(e.what(), HasSubstr("cannot create the output directory '" + dir / "file"));
    }
    try {
        OutputSet().path(OutputKind::Object);
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "the output set has no path for object");
    }
}

// ---- Generators ---------------------------------------------------------------------------------

KILN_REGISTER_GENERATOR(aot_test_scale, [](GeneratorContext &ctx) -> Pipeline {
    ImageParam in(Float(32), 1, "in");
    Func out("out");
    Var x("x");
    out(x) = in(x) * float(ctx.get_float("factor", 2.0)) + float(ctx.get_int("offset", 0));
    if (ctx.get_bool("vectorize", true)) out.vectorize(x, 4);
    return out;
});

TEST(AOTGenerator, MainWritesTheRequestedFiles) {
    TempDir dir;
    std::string out = dir.path.string();
    std::vector<std::string> args = {"gen",
                                     "-g",
                                     "aot_test_scale",
                                     "-o",
                                     out,
                                     "-f",
                                     "scale_fn",
                                     "-n",
                                     "lib",
                                     "-e",
                                     "static_library,c_header,lowered_stmt",
                                     "factor=0.5",
                                     "offset=3",
                                     "-t",
                                     "host;fast_math=1"};
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(a.data());
    ASSERT_EQ(kiln_generator_main(int(argv.size()), argv.data()), 0);
    EXPECT_TRUE(fs::exists(dir / "lib.a"));
    EXPECT_THAT(read_file(dir / "lib.h"),
                HasSubstr("int scale_fn(kiln_buffer_t *in, kiln_buffer_t *out);"));
    EXPECT_THAT(read_file(dir / "lib.h"), HasSubstr("fast_math=1"));
    EXPECT_THAT(read_file(dir / "lib.stmt"), HasSubstr("0.5"));
    EXPECT_FALSE(fs::exists(dir / "lib.json"));
}

TEST(AOTGenerator, NamedCpuTargetsReachTheGeneratorAndTheHeader) {
    TempDir dir;
    std::vector<std::string> args = {"gen",
                                     "-g",
                                     "aot_test_scale",
                                     "-o",
                                     dir.path.string(),
                                     "-e",
                                     "c_header,assembly",
                                     "-t",
                                     "x86-64-v3;fast_math=1"};
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(a.data());
    ASSERT_EQ(kiln_generator_main(int(argv.size()), argv.data()), 0);
    std::string header = read_file(dir / "aot_test_scale.h");
    EXPECT_THAT(header, HasSubstr(";cpu=x86-64-v3;"));
    EXPECT_THAT(header, HasSubstr("fast_math=1"));
    EXPECT_THAT(read_file(dir / "aot_test_scale.s"), ::testing::Not(HasSubstr("zmm")));
}

/// The CPUs aot_test_per_target was run for, in order.
std::vector<std::string> &per_target_runs() {
    static std::vector<std::string> runs;
    return runs;
}

KILN_REGISTER_GENERATOR(aot_test_per_target, [](GeneratorContext &ctx) -> Pipeline {
    per_target_runs().push_back(ctx.target().cpu);
    ImageParam in(Float(32), 1, "in");
    Param<float> gain("gain");
    Func out("out");
    Var x("x");
    out(x) = in(x)*gain;
    out.vectorize(x, ctx.target().has_feature("avx512f") ? 16 : 8);
    ctx.set_argument_order({"gain", "in"});
    return out;
});

TEST(AOTGenerator, SeveralTargetsRunTheGeneratorPerTargetIntoOneLibrary) {
    TempDir dir;
    std::vector<std::string> args = {"gen",
                                     "-g",
                                     "aot_test_per_target",
                                     "-o",
                                     dir.path.string(),
                                     "-t",
                                     "x86-64-v4",
                                     "-t",
                                     "x86-64-v3",
                                     "-t",
                                     "x86-64",
                                     "-e",
                                     "static_library,c_header"};
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(a.data());
    per_target_runs().clear();
    ASSERT_EQ(kiln_generator_main(int(argv.size()), argv.data()), 0);
    EXPECT_EQ(per_target_runs(), (std::vector<std::string>{"x86-64-v4", "x86-64-v3", "x86-64"}));
    std::string header = read_file(dir / "aot_test_per_target.h");
    EXPECT_THAT(header, HasSubstr("int aot_test_per_target(float gain, kiln_buffer_t *in, "
                                  "kiln_buffer_t *out);"));
    EXPECT_THAT(header, HasSubstr(" *   0 x86-64-v4: triple="));
    EXPECT_THAT(header, HasSubstr(" *   1 x86-64-v3: triple="));
    EXPECT_THAT(header, HasSubstr(" *   2 x86-64: triple="));
    // The library holds the three variants and the dispatcher.
    CommandResult nm = run_command(std::string(KILN_TEST_NM) + " " + dir / "aot_test_per_target.a");
    ASSERT_EQ(nm.status, 0) << nm.output;
    for (const char *symbol :
         {"T aot_test_per_target\n", "T aot_test_per_target_x86_64_v4\n",
          "T aot_test_per_target_x86_64_v3\n", "T aot_test_per_target_x86_64\n"})
        EXPECT_THAT(nm.output, HasSubstr(symbol));
}

TEST(AOTGenerator, SeveralTargetsWriteOnlyLibrariesAndHeaders) {
    TempDir dir;
    std::vector<std::string> args = {"gen",
                                     "-g",
                                     "aot_test_per_target",
                                     "-o",
                                     dir.path.string(),
                                     "-t",
                                     "x86-64-v3",
                                     "-t",
                                     "x86-64",
                                     "-e",
                                     "object"};
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    int code = kiln_generator_main(int(argv.size()), argv.data());
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, 1);
    EXPECT_THAT(err, HasSubstr("gen: error: kernel 'aot_test_per_target' for 2 targets: cannot "
                               "write object; a multi-target kernel is a static_library with its "
                               "c_header"));
}

TEST(AOTGenerator, ParametersThatAreNeverReadAreErrors) {
    GeneratorContext ctx(Target::host(), {{"factr", "3"}, {"offset", "1"}});
    try {
        run_generator("aot_test_scale", ctx);
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "generator 'aot_test_scale' does not read the parameter(s) "
                               "'factr'; it reads: factor, offset, vectorize (check the "
                               "spelling in PARAMS)");
    }
}

TEST(AOTGenerator, BadParameterValuesAreErrors) {
    GeneratorContext ctx(Target::host(), {{"offset", "3x"}, {"factor", "y"}, {"vectorize", "2"}});
    try {
        ctx.get_int("offset", 0);
        FAIL();
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "generator parameter 'offset' must be an integer, got '3x'");
    }
    try {
        ctx.get_float("factor", 0);
        FAIL();
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "generator parameter 'factor' must be a number, got 'y'");
    }
    try {
        ctx.get_bool("vectorize", false);
        FAIL();
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(),
                     "generator parameter 'vectorize' must be 1/0, true/false or on/off, got '2'");
    }
    EXPECT_EQ(ctx.get("missing", "fallback"), "fallback");
}

TEST(AOTGenerator, UnknownAndDuplicateGeneratorsAreErrors) {
    GeneratorContext ctx(Target::host(), {});
    try {
        run_generator("no_such_generator", ctx);
        FAIL();
    } catch (const CompileError &e) {
        EXPECT_THAT(e.what(), HasSubstr("no generator called 'no_such_generator' (known: "));
        EXPECT_THAT(e.what(), HasSubstr("aot_test_scale"));
    }
    try {
        register_generator("aot_test_scale", [](GeneratorContext &) -> Pipeline {
            return Pipeline(std::vector<Func>{});
        });
        FAIL();
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "generator 'aot_test_scale' is registered twice; give each "
                               "KILN_REGISTER_GENERATOR its own name");
    }
}

TEST(AOTGenerator, CommandLineErrorsReturnOneWithAMessage) {
    std::vector<std::string> args = {"gen", "-g", "aot_test_scale", "factor=2"};
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    int code = kiln_generator_main(int(argv.size()), argv.data());
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, 1);
    EXPECT_THAT(err, HasSubstr("gen: error: no output directory; pass -o DIR"));

    std::vector<std::string> args2 = {"gen", "-o", "/tmp", "--bogus"};
    argv.clear();
    for (std::string &a : args2)
        argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    code = kiln_generator_main(int(argv.size()), argv.data());
    err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, 1);
    EXPECT_THAT(err, HasSubstr("unexpected argument '--bogus'"));
}

TEST(AOTGenerator, TargetStrings) {
    Target host = Target::host();
    EXPECT_EQ(parse_target_string("host"), host);
    Target fast = parse_target_string("host;fast_math=1");
    EXPECT_TRUE(fast.fast_math);
    EXPECT_EQ(fast.triple, host.triple);
    EXPECT_EQ(fast.features, host.features);
    EXPECT_EQ(parse_target_string(host.to_string()), host);
    EXPECT_THROW(parse_target_string("host;speed=11"), CompileError);
}

#ifdef KILN_TEST_OPERATOR_GEN
// The generator for the built-in operators (tools/kiln_operator_gen.cpp) compiles matmul.
TEST(AOTGenerator, OperatorGeneratorCompilesMatmul) {
    TempDir dir;
    CommandResult r = run_command(std::string(KILN_TEST_OPERATOR_GEN) + " -o " + dir.path.string() +
                                  " -f mm op=matmul shape=64x48x32");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_THAT(read_file(dir / "mm.h"),
                HasSubstr("int mm(kiln_buffer_t *A, kiln_buffer_t *B, kiln_buffer_t *C);"));
    CommandResult bad = run_command(std::string(KILN_TEST_OPERATOR_GEN) + " -o " +
                                    dir.path.string() + " op=matmul shape=64x48x32 tile=3");
    EXPECT_EQ(bad.status, 1);
    EXPECT_THAT(bad.output, HasSubstr("does not read the parameter(s) 'tile'"));
    // The operator is a generator: its shape by name, its knobs as parameters (the lowered code
    // shows the register tile of 4 rows: C's tile rows are unrolled, 4 copies of the row's
    // loop over its vectors).
    CommandResult knob =
        run_command(std::string(KILN_TEST_OPERATOR_GEN) + " -o " + dir.path.string() +
                    " -f mm4 -e c_header,lowered_stmt op=matmul M=64 N=48 K=32 "
                    "tile_i=4");
    ASSERT_EQ(knob.status, 0) << knob.output;
    std::string stmt = read_file(dir / "mm4.stmt");
    size_t rows = 0;
    for (size_t at = stmt.find("for (C.s0.ji"); at != std::string::npos;
         at = stmt.find("for (C.s0.ji", at + 1))
        rows++;
    EXPECT_EQ(rows, 4u) << stmt;
    CommandResult wrong = run_command(std::string(KILN_TEST_OPERATOR_GEN) + " -o " +
                                      dir.path.string() + " op=matmul shape=64x48x32 tile_i=5");
    EXPECT_EQ(wrong.status, 1);
    // The hand value first: 6 rows with AVX-512's 32 registers, else 8 (apps/Matmul.cpp).
    EXPECT_THAT(wrong.output, HasSubstr(Target::host().vector_bits >= 512
                                            ? "knob 'tile_i' cannot be 5; its values are 6, 1, 2, "
                                              "4, 8, 12, 16"
                                            : "knob 'tile_i' cannot be 5; its values are 8, 1, 2, "
                                              "4, 6, 12, 16"));
    CommandResult test_op = run_command(std::string(KILN_TEST_OPERATOR_GEN) + " -o " +
                                        dir.path.string() + " op=test_wrong");
    EXPECT_EQ(test_op.status, 1);
    EXPECT_THAT(test_op.output,
                HasSubstr("operator 'test_wrong' is a test's and has no generator to build"));
}
#endif

// ---- CUDA kernels for linking ---------------------------------------------------------------

namespace {

/// out(x, y) = in(x, y) * 2 + 1 in 16 x 8 tiles of GPU threads.
Pipeline gpu_scale_pipeline() {
    ImageParam in(Float(32), 2, "in");
    Func out("out");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    out(x, y) = in(x, y) * 2.0f + 1.0f;
    out.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
    return out;
}

const char *gpu_scale_program = R"(#include <stdio.h>
#include <string.h>
#include "aot_gpu_scale.h"
int main(void) {
    enum { W = 37, H = 11 };
    static float in[W * H], out[W * H];
    kiln_dimension_t din[2] = {{0, W, 1, 0}, {0, H, W, 0}}, dout[2] = {{0, W, 1, 0}, {0, H, W, 0}};
    kiln_buffer_t bin, bout;
    int i, code, wrong = 0;
    memset(&bin, 0, sizeof(bin));
    memset(&bout, 0, sizeof(bout));
    for (i = 0; i < W * H; i++) in[i] = (float)i * 0.5f;
    bin.host = (uint8_t *)in;
    bout.host = (uint8_t *)out;
    bin.type.code = bout.type.code = (uint8_t)kiln_type_float;
    bin.type.bits = bout.type.bits = 32;
    bin.type.lanes = bout.type.lanes = 1;
    bin.dimensions = bout.dimensions = 2;
    bin.dim = din;
    bout.dim = dout;
    code = aot_gpu_scale(&bin, &bout);
    if (code == 0) code = kiln_buffer_copy_to_host(&bout);
    for (i = 0; i < W * H; i++) wrong += out[i] != in[i] * 2.0f + 1.0f;
    if (code == 0) {
        printf("run: 0 wrong: %d\n", wrong);
    } else {
        printf("run: %s: %s\n", kiln_error_code_name(code), kiln_last_error_message());
    }
    kiln_buffer_device_free(&bin);
    kiln_buffer_device_free(&bout);
    return 0;
}
)";

} // namespace

TEST(AOTCUDA, TargetNamesAndArchitectureLists) {
    Target cuda = Target::parse("host-cuda");
    EXPECT_EQ(cuda.gpu, GpuApi::CUDA);
    EXPECT_EQ(cuda.cuda_archs, (std::vector<int>{80, 90}));
    EXPECT_EQ(cuda.triple, Target::host().triple);
    EXPECT_EQ(Target::parse("host-opencl").gpu, GpuApi::OpenCL);
    // The default list is left out of the text form, so existing keys do not change.
    EXPECT_THAT(cuda.to_string(), ::testing::EndsWith(";gpu=cuda"));
    Target one = Target::parse("host-cuda;cuda_archs=sm_90,sm_86,sm_90");
    EXPECT_EQ(one.cuda_archs, (std::vector<int>{86, 90}));
    EXPECT_THAT(one.to_string(), HasSubstr(";cuda_archs=sm_86,sm_90"));
    EXPECT_EQ(Target::from_string(one.to_string()), one);
    EXPECT_EQ(parse_target_string("host-cuda;fast_math=1").fast_math, true);
    auto message = [](const std::string &text) {
        try {
            Target::parse(text);
        } catch (const CompileError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_THAT(message("host-cuda;cuda_archs=90"),
                HasSubstr("cuda_archs must list architectures like sm_80,sm_90 (sm_50 to sm_199), "
                          "got '90'"));
    EXPECT_THAT(message("host-cuda;cuda_archs="), HasSubstr("cuda_archs is empty"));
    EXPECT_THAT(message("host-vulkan"),
                HasSubstr("unknown CPU 'host-vulkan' for " + Target::host().triple));
}

TEST(AOTCUDA, ObjectEmbedsPTXAndCubinsForEachArchitectureAndTheSource) {
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC cannot be loaded: " << why;
    TempDir dir;
    Pipeline p = gpu_scale_pipeline();
    Target t = Target::parse("host-cuda;cuda_archs=sm_80,sm_90");
    p.compile_to(OutputSet::in_directory(dir.path.string(), "aot_gpu_scale",
                                         {OutputKind::StaticLibrary, OutputKind::CUDASource}),
                 "aot_gpu_scale", t);
    std::string library = read_file(dir / "aot_gpu_scale.a");
    std::string source = read_file(dir / "aot_gpu_scale.cu");
    ASSERT_THAT(source, HasSubstr("__global__"));
    size_t at = library.find(KILN_CUDA_BUNDLE_MAGIC);
    ASSERT_NE(at, std::string::npos) << "no CUDA bundle in the library";
    std::vector<CUDAImage> images = read_cuda_bundle(library.substr(at));
    std::vector<std::pair<int, int>> kinds; // (kind, arch)
    for (const CUDAImage &image : images)
        kinds.emplace_back(int(image.kind), image.arch);
    EXPECT_EQ(kinds,
              (std::vector<std::pair<int, int>>{{1, 80}, {2, 80}, {1, 90}, {2, 90}, {0, 0}}));
    EXPECT_THAT(images[0].bytes, HasSubstr(".target sm_80"));
    EXPECT_THAT(images[2].bytes, HasSubstr(".target sm_90"));
    EXPECT_EQ(images[1].bytes.compare(1, 3, "ELF"), 0) << "a cubin is an ELF file";
    EXPECT_EQ(images[4].bytes, source);
    EXPECT_THAT(describe_cuda_bundle(library.substr(at)), HasSubstr("sm_90 PTX ("));
    // A truncated bundle is refused with a message, not read past its end.
    try {
        read_cuda_bundle(library.substr(at, 40));
        ADD_FAILURE() << "a truncated bundle was accepted";
    } catch (const CompileError &e) {
        EXPECT_THAT(e.what(), HasSubstr("malformed kiln CUDA bundle"));
    }
}

// The C program links the kernel with libkiln_runtime.a and -ldl alone: no CUDA runtime, no
// driver library (the runtime opens libcuda.so.1 when the kernel first runs). Without a driver
// the kernel returns kiln_error_no_device naming the library; with a GPU it computes the output.
TEST(AOTCUDA, PlainCProgramLinksWithoutCUDALibraries) {
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC cannot be loaded: " << why;
    TempDir dir;
    gpu_scale_pipeline().compile_to_static_library(dir.path.string(), "aot_gpu_scale",
                                                   Target::parse("host-cuda"));
    CommandResult undefined = run_command(KILN_TEST_NM " -u " + dir / "aot_gpu_scale.a");
    ASSERT_EQ(undefined.status, 0) << undefined.output;
    std::istringstream lines(undefined.output);
    for (std::string line; std::getline(lines, line);) {
        if (line.find(" U ") == std::string::npos) continue; // the member's name, blank lines
        std::string name = line.substr(line.find_last_of(' ') + 1);
        EXPECT_TRUE(name.rfind("kiln_", 0) == 0 || name.rfind("memset", 0) == 0 ||
                    name.rfind("memcpy", 0) == 0 || name.rfind("GOMP_", 0) == 0 ||
                    name.rfind("__", 0) == 0 || name.rfind("omp_", 0) == 0)
            << "the kernel needs '" << name << "'";
        EXPECT_THAT(name, ::testing::Not(::testing::StartsWith("cu")));
    }
    write_file(dir / "main.c", gpu_scale_program);
    std::string command =
        std::string(KILN_TEST_CC) + " -std=c99 -pedantic -Wall -Wextra -Werror -I" +
        dir.path.string() + " -I" KILN_TEST_RUNTIME_INCLUDE_DIR " " + dir / "main.c" + " " +
        dir / "aot_gpu_scale.a" +
        " " KILN_TEST_RUNTIME_LIBRARY " " KILN_TEST_LINK_FLAGS " -fopenmp -lm -ldl -o " +
        dir / "main";
    CommandResult build = run_command(command);
    ASSERT_EQ(build.status, 0) << build.output;
    CommandResult exe_undefined = run_command(KILN_TEST_NM " -u " + dir / "main");
    EXPECT_THAT(exe_undefined.output, ::testing::Not(HasSubstr("cuda")));
    EXPECT_THAT(exe_undefined.output, ::testing::Not(HasSubstr(" cu")));
    // Through the fake driver (host memory, launches recorded, nothing computed), the kernel
    // finds its image in the bundle, loads it and launches: status 0.
    CommandResult fake =
        run_command("env KILN_CUDA_DRIVER=" KILN_TEST_FAKE_CUDA_DRIVER " " + dir / "main");
    ASSERT_EQ(fake.status, 0) << fake.output;
    EXPECT_THAT(fake.output, HasSubstr("run: 0 wrong: ")) << fake.output;
    CommandResult run = run_command("env -u KILN_CUDA_DRIVER " + dir / "main");
    ASSERT_EQ(run.status, 0) << run.output;
    if (run.output.find("run: 0 ") != std::string::npos) {
        EXPECT_THAT(run.output, HasSubstr("run: 0 wrong: 0"));
    } else {
        std::printf("[ note     ] no CUDA device here; the kernel reported: %s",
                    run.output.c_str());
        EXPECT_THAT(run.output, HasSubstr("run: kiln_error_no_device: "));
        EXPECT_THAT(run.output, HasSubstr("libcuda.so.1"));
    }
}
