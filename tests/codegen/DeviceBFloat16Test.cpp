// bfloat16 in device code (codegen/CodeGenDevice.h): a pipeline that loads, converts, selects and
// stores bfloat16 runs as OpenCL (PoCL here) through kiln's runtime, with a scalar and a vectorized
// GPU schedule, and agrees bit for bit with the CPU JIT of the same algorithm on edge values (NaN
// payloads, infinities, ties, -0, denormals, overflow); its CUDA C compiles with NVRTC and
// assembles with ptxas. Each test skips, saying why, without an OpenCL device or the CUDA toolkit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codegen/CodeGenDevice.h"
#include "codegen/JIT.h"
#include "codegen/NVRTC.h"
#include "lang/BFloat16.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "runtime/kiln_runtime.h"
#include "schedule/Lower.h"
#include "tests/codegen/CodeGenTestUtil.h"
#include "tests/codegen/DeviceTestUtil.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

constexpr int kPoints = 128;

/// Bit patterns first, then pseudo-random ones up to kPoints.
template <typename Bits>
std::vector<Bits> patterns(std::vector<Bits> edges, uint64_t seed) {
    uint64_t k = seed;
    while (edges.size() < size_t(kPoints)) {
        k = k * 6364136223846793005ull + 1442695040888963407ull;
        edges.push_back(Bits(k >> 17));
    }
    return edges;
}

// bfloat16 inputs: zeros, ones, infinities, quiet and signaling NaNs with payloads and signs,
// denormals, the smallest normal, the largest finite values (times 3 overflows), and values at
// and beyond the limits of int32.
const std::vector<uint16_t> &bfloat16_inputs() {
    static const std::vector<uint16_t> v =
        patterns<uint16_t>({0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81,
                            0xff81, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x4f00, 0xcf00,
                            0x4f80, 0x3f00, 0xbfc0, 0x3fc0, 0x4049, 0x2a80, 0xaa80, 0x4b00},
                           1);
    return v;
}

// float32 inputs rounded to bfloat16: ties to even both ways (normal, negative, denormal, at the
// largest finite value), just off ties, overflow to infinity, NaNs whose payload lies in the low
// half only, and zeros.
const std::vector<uint32_t> &float_inputs() {
    static const std::vector<uint32_t> v =
        patterns<uint32_t>({0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf818000, 0xbf808000,
                            0x7f7fffff, 0x7f7f7fff, 0x7f7f8000, 0xff7f8000, 0x7f800001, 0xff800001,
                            0x7fffffff, 0x7fc00000, 0x00000001, 0x00008000, 0x00018000, 0x00008001,
                            0x807fffff, 0x80008000, 0x80000000, 0x00000000, 0x7f800000, 0xff800000},
                           2);
    return v;
}

// float64 and int32 inputs, converted to bfloat16 through float32: a double that rounds to a
// float32 tie (so to even, not up), overflow and underflow of float32, and integers that float32
// rounds or that are bfloat16 ties.
const std::vector<double> &double_inputs() {
    static const std::vector<double> v = [] {
        std::vector<double> d = {1.00390625,
                                 1.00390625 + std::ldexp(1.0, -40),
                                 -1.01171875,
                                 1e300,
                                 -1e300,
                                 1e-50,
                                 -1e-50,
                                 -0.0,
                                 0.1,
                                 std::numeric_limits<double>::quiet_NaN(),
                                 std::numeric_limits<double>::infinity()};
        for (uint32_t b : patterns<uint32_t>({}, 3)) {
            float f;
            std::memcpy(&f, &b, 4);
            d.push_back(double(f) * 1.0000001);
            if (d.size() == size_t(kPoints)) break;
        }
        return d;
    }();
    return v;
}

const std::vector<int32_t> &int_inputs() {
    static const std::vector<int32_t> v = [] {
        std::vector<uint32_t> bits = patterns<uint32_t>(
            {0, 1, uint32_t(-1), 16777217, 2147483647, 0x80000000u, 257, 259, uint32_t(-259)}, 4);
        return std::vector<int32_t>(bits.begin(), bits.end());
    }();
    return v;
}

/// The bits of the bfloat16 scalar argument: 1.5078125, whose products round.
constexpr uint16_t kParamBits = 0x3fc1;

/// The algorithm: bfloat16 computed on in float32 and rounded back, bfloat16 widened to float32,
/// to int32 and to bool, float32, float64 and int32 rounded to bfloat16, a select among bfloat16
/// values and a constant, and a bfloat16 scalar argument used as it is and in a product.
struct Algorithm {
    ImageParam b, f, d, i;
    Param<bfloat16_t> p;
    Var x{"x"};
    Func scaled, widened, rounded, mixed, as_int, nonzero, with_param;

    explicit Algorithm(const std::string &prefix)
        : b(BFloat(16), 1, prefix + "_b"), f(Float(32), 1, prefix + "_f"),
          d(Float(64), 1, prefix + "_d"), i(Int(32), 1, prefix + "_i"), p(prefix + "_p"),
          scaled(prefix + "_scaled"), widened(prefix + "_widened"), rounded(prefix + "_rounded"),
          mixed(prefix + "_mixed"), as_int(prefix + "_as_int"), nonzero(prefix + "_nonzero"),
          with_param(prefix + "_with_param") {
        scaled(x) = cast<bfloat16_t>(cast<float>(b(x)) * 3.0f + 1.0f);
        widened(x) = cast<float>(b(x));
        rounded(x) = cast<bfloat16_t>(f(x));
        Expr tenth = make_const(BFloat(16), 0.1);
        mixed(x) = select(x % 3 == 0, cast<bfloat16_t>(d(x)),
                          select(x % 3 == 1, cast<bfloat16_t>(i(x)),
                                 select(cast<float>(b(x)) < 0.0f, b(x), tenth)));
        as_int(x) = cast<int32_t>(b(x));
        nonzero(x) = cast<uint8_t>(cast<bool>(b(x)));
        with_param(x) =
            select(x % 2 == 0, Expr(p), cast<bfloat16_t>(cast<float>(b(x)) * cast<float>(p)));
    }

    std::vector<Func> outputs() const {
        return {scaled, widened, rounded, mixed, as_int, nonzero, with_param};
    }

    /// One block of 16 threads per 16 points.
    void schedule_gpu() {
        Var xo("xo"), xi("xi");
        for (Func g : outputs())
            g.gpu_tile(x, xo, xi, 16);
    }
    /// 16 threads per block, each with a vector of 4 points.
    void schedule_gpu_vectorized() {
        Var xo("xo"), xi("xi"), xt("xt"), xv("xv");
        for (Func g : outputs())
            g.gpu_tile(x, xo, xi, 64)
                .split(xi, xt, xv, 4)
                .reorder(xv, xt, xo)
                .gpu_threads(xt)
                .vectorize(xv);
    }
};

/// The buffers of one run: the inputs, and outputs to fill.
struct Data {
    test::TestBuffer<bfloat16_t> b{{kPoints}}, scaled{{kPoints}}, rounded{{kPoints}},
        mixed{{kPoints}}, with_param{{kPoints}};
    test::TestBuffer<float> f{{kPoints}}, widened{{kPoints}};
    test::TestBuffer<double> d{{kPoints}};
    test::TestBuffer<int32_t> i{{kPoints}}, as_int{{kPoints}};
    test::TestBuffer<uint8_t> nonzero{{kPoints}};
    uint16_t p = kParamBits;

    Data() {
        for (int n = 0; n < kPoints; n++) {
            b.data[n] = bfloat16_t::from_bits(bfloat16_inputs()[n]);
            std::memcpy(&f.data[n], &float_inputs()[n], 4);
            d.data[n] = double_inputs()[n];
            i.data[n] = int_inputs()[n];
        }
    }

    std::vector<kiln_buffer_t *> all() {
        return {&b.buffer,      &f.buffer,       &d.buffer,         &i.buffer,
                &scaled.buffer, &widened.buffer, &rounded.buffer,   &mixed.buffer,
                &as_int.buffer, &nonzero.buffer, &with_param.buffer};
    }
};

/// The argv slot of each argument, by the algorithm's names.
std::vector<void *> arguments(const LoweredFunc &lowered, const Algorithm &a, Data &data) {
    std::map<std::string, void *> slots = {{a.b.name(), &data.b.pointer},
                                           {a.f.name(), &data.f.pointer},
                                           {a.d.name(), &data.d.pointer},
                                           {a.i.name(), &data.i.pointer},
                                           {a.p.name(), &data.p},
                                           {a.scaled.name(), &data.scaled.pointer},
                                           {a.widened.name(), &data.widened.pointer},
                                           {a.rounded.name(), &data.rounded.pointer},
                                           {a.mixed.name(), &data.mixed.pointer},
                                           {a.as_int.name(), &data.as_int.pointer},
                                           {a.nonzero.name(), &data.nonzero.pointer},
                                           {a.with_param.name(), &data.with_param.pointer}};
    std::vector<void *> argv;
    for (const LoweredArgument &arg : lowered.args) {
        auto it = slots.find(arg.name);
        EXPECT_TRUE(it != slots.end()) << "unexpected argument '" << arg.name << "'";
        argv.push_back(it == slots.end() ? nullptr : it->second);
    }
    return argv;
}

/// Runs the algorithm on the CPU (no schedule) into data.
void run_on_cpu(const std::string &prefix, Data *data) {
    Algorithm a(prefix);
    LoweredFunc lowered = lower(a.outputs(), prefix);
    JITModule m(lowered);
    std::vector<void *> argv = arguments(lowered, a, *data);
    ASSERT_EQ(m.call(argv.data()), 0) << kiln_last_error_message();
}

/// Empty when kiln's runtime has an OpenCL device, else why not.
std::string opencl_unavailable() {
    static std::string why = [] {
        // PoCL reads its cache folder when the platform starts: a fresh one for this process.
        static test::TempDir cache("kiln_pocl_cache_");
        setenv("POCL_CACHE_DIR", cache.path.c_str(), 0);
        const kiln_device_interface_t *iface = kiln_device_interface(int(GpuApi::OpenCL));
        if (!iface) return std::string(kiln_last_error_message());
        int64_t threads = 0, shared = 0;
        if (iface->device_limits(&threads, &shared) != 0) {
            return std::string(kiln_last_error_message());
        }
        return std::string();
    }();
    return why;
}

/// Runs the lowered GPU pipeline on OpenCL into data and copies the outputs back; its source in
/// *source.
void run_on_opencl(const LoweredFunc &lowered, const Algorithm &a, Data *data,
                   std::string *source) {
    Target target = Target::host().with_gpu(GpuApi::OpenCL);
    *source = kernel_source(lowered, target);
    JITModule m(lowered, target, *source);
    std::vector<void *> argv = arguments(lowered, a, *data);
    int code = m.call(argv.data());
    EXPECT_EQ(code, 0) << kiln_last_error_message() << "\n" << test::numbered(*source);
    for (kiln_buffer_t *b : data->all()) {
        EXPECT_EQ(kiln_buffer_copy_to_host(b), 0) << kiln_last_error_message();
        EXPECT_EQ(kiln_buffer_device_free(b), 0) << kiln_last_error_message();
    }
}

template <typename T>
uint64_t bits_of(const T &v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
}

/// Every element of got has the bits of want's; the first few differences are reported with the
/// input point.
template <typename T>
void expect_same_bits(const char *what, const test::TestBuffer<T> &want,
                      const test::TestBuffer<T> &got) {
    int reported = 0;
    for (int n = 0; n < kPoints; n++) {
        if (bits_of(want.data[n]) == bits_of(got.data[n]) || reported++ >= 8) continue;
        char line[256];
        std::snprintf(line, sizeof(line),
                      "%s[%d]: CPU 0x%llx, GPU 0x%llx (inputs: bfloat16 0x%04x, float32 0x%08x, "
                      "float64 %.17g, int32 %d)",
                      what, n, (unsigned long long)bits_of(want.data[n]),
                      (unsigned long long)bits_of(got.data[n]), bfloat16_inputs()[n],
                      float_inputs()[n], double_inputs()[n], int_inputs()[n]);
        ADD_FAILURE() << line;
    }
}

void expect_same_outputs(const Data &cpu, const Data &gpu) {
    expect_same_bits("scaled", cpu.scaled, gpu.scaled);
    expect_same_bits("widened", cpu.widened, gpu.widened);
    expect_same_bits("rounded", cpu.rounded, gpu.rounded);
    expect_same_bits("mixed", cpu.mixed, gpu.mixed);
    expect_same_bits("as_int", cpu.as_int, gpu.as_int);
    expect_same_bits("nonzero", cpu.nonzero, gpu.nonzero);
    expect_same_bits("with_param", cpu.with_param, gpu.with_param);
}

#define KILN_REQUIRE_OPENCL_DEVICE()                                                               \
    do {                                                                                           \
        std::string why = opencl_unavailable();                                                    \
        if (!why.empty()) GTEST_SKIP() << "no OpenCL device to run kernels on: " << why;           \
    } while (0)

// The CPU result is the semantics of lang/BFloat16.h; checked here where it needs no arithmetic,
// so that the GPU comparisons below compare with the right thing.
TEST(DeviceBFloat16, CPUConversionsFollowBFloat16BitsOf) {
    Data cpu;
    run_on_cpu("bf16_cpu_check", &cpu);
    for (int n = 0; n < kPoints; n++) {
        float f;
        std::memcpy(&f, &float_inputs()[n], 4);
        EXPECT_EQ(cpu.rounded.data[n].bits, bfloat16_bits_of(f))
            << "float32 0x" << std::hex << float_inputs()[n];
        float w = float_of_bfloat16_bits(bfloat16_inputs()[n]);
        EXPECT_EQ(bits_of(cpu.widened.data[n]), bits_of(w))
            << "bfloat16 0x" << std::hex << bfloat16_inputs()[n];
    }
    EXPECT_EQ(cpu.rounded.data[0].bits, 0x3f80);  // a tie, to even (down)
    EXPECT_EQ(cpu.rounded.data[1].bits, 0x3f82);  // a tie, to even (up)
    EXPECT_EQ(cpu.rounded.data[10].bits, 0x7fc0); // a NaN of the low half stays a NaN
    EXPECT_EQ(cpu.with_param.data[0].bits, kParamBits);
}

TEST(DeviceBFloat16, OpenCLMatchesTheCPUBitForBit) {
    KILN_REQUIRE_OPENCL_DEVICE();
    Data cpu, gpu;
    run_on_cpu("bf16_cl_cpu", &cpu);
    Algorithm a("bf16_cl");
    a.schedule_gpu();
    LoweredFunc lowered = lower(a.outputs(), "bf16_cl");
    ASSERT_FALSE(lowered.kernels.empty());
    std::string source;
    run_on_opencl(lowered, a, &gpu, &source);
    expect_same_outputs(cpu, gpu);
    EXPECT_NE(source.find("ushort"), std::string::npos) << source;
    EXPECT_NE(source.find("kiln_bf16_to_f32("), std::string::npos) << source;
    EXPECT_NE(source.find("kiln_f32_to_bf16("), std::string::npos) << source;
    EXPECT_NE(source.find("(ushort)0x3dcd"), std::string::npos) << source; // 0.1 as bfloat16
    EXPECT_NE(source.find("const ushort bf16_cl_p"), std::string::npos) << source;
    if (HasFailure()) std::printf("%s", test::numbered(source).c_str());
}

TEST(DeviceBFloat16, VectorizedOpenCLMatchesTheCPUBitForBit) {
    KILN_REQUIRE_OPENCL_DEVICE();
    Data cpu, gpu;
    run_on_cpu("bf16_clv_cpu", &cpu);
    Algorithm a("bf16_clv");
    a.schedule_gpu_vectorized();
    LoweredFunc lowered = lower(a.outputs(), "bf16_clv");
    ASSERT_FALSE(lowered.kernels.empty());
    std::string source;
    run_on_opencl(lowered, a, &gpu, &source);
    expect_same_outputs(cpu, gpu);
    // Whole vectors of bfloat16 bits, converted by the vector helpers.
    EXPECT_NE(source.find("ushort4"), std::string::npos) << source;
    EXPECT_NE(source.find("kiln_bf16x4_to_f32x4("), std::string::npos) << source;
    EXPECT_NE(source.find("kiln_f32x4_to_bf16x4("), std::string::npos) << source;
    if (HasFailure()) std::printf("%s", test::numbered(source).c_str());
}

// The CUDA C of both schedules compiles with NVRTC and assembles with ptxas for sm_90.
TEST(DeviceBFloat16, CUDASourceCompilesWithNVRTC) {
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC is not available: " << why;
    std::string ptxas = test::find_ptxas(&why);
    for (bool vectorized : {false, true}) {
        std::string name = vectorized ? "bf16_cuv" : "bf16_cu";
        Algorithm a(name);
        if (vectorized) {
            a.schedule_gpu_vectorized();
        } else {
            a.schedule_gpu();
        }
        LoweredFunc lowered = lower(a.outputs(), name);
        std::string source = print_device_source(lowered.kernels, GpuApi::CUDA);
        EXPECT_NE(source.find("typedef unsigned short uint16_t;"), std::string::npos) << source;
        EXPECT_NE(source.find("(uint16_t)0x3dcd"), std::string::npos) << source;
        EXPECT_NE(source.find("const uint16_t " + name + "_p"), std::string::npos) << source;
        std::string ptx;
        try {
            ptx = compile_cuda_to_ptx(source, "sm_90", name + ".cu");
        } catch (const CompileError &e) {
            ADD_FAILURE() << "NVRTC rejected the CUDA source: " << e.what() << "\n"
                          << test::numbered(source);
            continue;
        }
        if (ptxas.empty()) continue;
        std::string log;
        EXPECT_TRUE(test::ptxas_assembles(ptxas, ptx, &log)) << log;
    }
    if (ptxas.empty()) GTEST_SKIP() << "PTX not assembled: " << why;
}

// The operators compute on bfloat16 in float32, so arithmetic of bfloat16 type reaching device
// code is a bug upstream, reported as one rather than printed as integer arithmetic on the bits.
TEST(DeviceBFloat16, ArithmeticOnBFloat16IsAnInternalError) {
    Expr a = Load::make(BFloat(16), "in", Variable::make(Int(32), "i"));
    std::vector<Expr> bad = {
        Add::make(a, a), Mul::make(a, a), Min::make(a, a), LT::make(a, a),
        Ramp::make(make_const(BFloat(16), 1.0), make_const(BFloat(16), 1.0), 4)};
    for (const Expr &e : bad) {
        for (GpuApi api : {GpuApi::OpenCL, GpuApi::CUDA}) {
            DeviceKernel k;
            k.name = "bf16_bad";
            k.args = {test::buffer_argument("in", BFloat(16), false),
                      test::buffer_argument("out", e.type().element_of(), true)};
            Expr index =
                e.type().is_vector() ? Ramp::make(Expr(0), Expr(1), e.type().lanes) : Expr(0);
            k.body = LetStmt::make("i", test::gpu_thread_id(0), Store::make("out", e, index));
            EXPECT_THROW(print_device_source({k}, api), InternalError)
                << e << " in " << gpu_api_name(api);
        }
    }
}

// Each comparison of two bfloat16 values reaching device code is refused the same way, with a
// message naming the comparison (the check reads the operands' type, not the comparison's bool).
struct BFloat16Comparison {
    const char *name;
    Expr (*make)(Expr, Expr);
};

void PrintTo(const BFloat16Comparison &comparison, std::ostream *os) {
    *os << comparison.name;
}

const BFloat16Comparison bfloat16_comparisons[] = {
    {"EQ", [](Expr a, Expr b) { return EQ::make(std::move(a), std::move(b)); }},
    {"NE", [](Expr a, Expr b) { return NE::make(std::move(a), std::move(b)); }},
    {"LT", [](Expr a, Expr b) { return LT::make(std::move(a), std::move(b)); }},
    {"LE", [](Expr a, Expr b) { return LE::make(std::move(a), std::move(b)); }},
    {"GT", [](Expr a, Expr b) { return GT::make(std::move(a), std::move(b)); }},
    {"GE", [](Expr a, Expr b) { return GE::make(std::move(a), std::move(b)); }},
};

class DeviceBFloat16Comparison
    : public testing::TestWithParam<std::tuple<BFloat16Comparison, GpuApi>> {};

TEST_P(DeviceBFloat16Comparison, IsAnInternalErrorNamingIt) {
    auto [comparison, api] = GetParam();
    Expr i = Variable::make(Int(32), "i");
    Expr e = comparison.make(Load::make(BFloat(16), "in", i), Load::make(BFloat(16), "in", i + 1));
    DeviceKernel k;
    k.name = "bf16_compare";
    k.args = {test::buffer_argument("in", BFloat(16), false),
              test::buffer_argument("out", Bool(), true)};
    k.body = LetStmt::make("i", test::gpu_thread_id(0), Store::make("out", e, Expr(0)));
    std::ostringstream printed;
    printed << e;
    std::string expected =
        "device code: " + printed.str() +
        " computes on bfloat16, which only Load, Store, Cast, Select and "
        "Broadcast may hold (the operators compute on it in float32: lang/Type.h)";
    std::string message = test::error_of<InternalError>([&] { print_device_source({k}, api); });
    EXPECT_NE(message.find(expected), std::string::npos)
        << "the message: " << message << "\nshould contain: " << expected;
}

INSTANTIATE_TEST_SUITE_P(
    AllComparisons, DeviceBFloat16Comparison,
    testing::Combine(testing::ValuesIn(bfloat16_comparisons),
                     testing::Values(GpuApi::OpenCL, GpuApi::CUDA)),
    [](const testing::TestParamInfo<DeviceBFloat16Comparison::ParamType> &info) {
        return std::string(std::get<0>(info.param).name) + "_" +
               gpu_api_name(std::get<1>(info.param));
    });

} // namespace
} // namespace kiln
