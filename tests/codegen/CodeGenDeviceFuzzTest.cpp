// Semantics fuzzer of the device code generator: random expressions of every type
// (tests/codegen/DeviceRandomExpr.h), each wrapped in a kernel that loads the inputs of its
// thread's point from buffers and stores the result, printed as OpenCL, run on the first OpenCL
// device (PoCL's CPU device here) and compared lane by lane with ExprEvaluator: bit for bit for
// everything but transcendental functions, which get a few ulps. The same programs' CUDA dialect
// is compiled with NVRTC (and ptxas) when they are available.
//
// One iteration is one program whose one kernel computes kExpressions expressions (PoCL compiles
// a program and its kernel in hundreds of milliseconds, so expressions are batched).
// KILN_FUZZ_ITERATIONS scales a run, KILN_FUZZ_SECONDS caps its time (tests/lang/FuzzBudget.h)
// and KILN_FUZZ_SEED changes its seed; iteration i uses
// seed + i, so a failure reproduces with KILN_FUZZ_SEED set to that sum and
// KILN_FUZZ_ITERATIONS=1. A failure prints the expression, the inputs and its kernel alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "codegen/CodeGenDevice.h"
#include "codegen/NVRTC.h"
#include "lang/Error.h"
#include "lang/ExprEvaluator.h"
#include "lang/IRPrinter.h"
#include "tests/codegen/DeviceRandomExpr.h"
#include "tests/codegen/DeviceTestUtil.h"
#include "tests/lang/FuzzBudget.h"
#include "tests/lang/RandomExpr.h"

namespace kiln {
namespace {

constexpr int kThreads = 16, kPoints = 4 * kThreads;
constexpr int kExpressions = 64; // per program

uint64_t env_or(const char *name, uint64_t fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

std::string test_name() {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->test_suite_name()) + "." + info->name();
}

const std::vector<test::DeviceInput> &inputs() {
    static const std::vector<test::DeviceInput> in = {
        {"a", "in_a", Int(32)},   {"b", "in_b", Int(32)},   {"c", "in_c", Int(8)},
        {"h", "in_h", UInt(16)},  {"u", "in_u", UInt(32)},  {"l", "in_l", Int(64)},
        {"f", "in_f", Float(32)}, {"g", "in_g", Float(32)}, {"d", "in_d", Float(64)},
        {"p", "in_p", Bool()}};
    return in;
}

Value random_value(std::mt19937_64 &rng, Type t) {
    auto pick = [&](int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
    if (t.is_bool()) return Value::make_bool(pick(2));
    if (t.is_float()) {
        static const double specials[] = {0.0,
                                          -0.0,
                                          1.0,
                                          -1.0,
                                          0.5,
                                          2.5,
                                          -2.5,
                                          1e-40,
                                          3e9,
                                          -3e9,
                                          1e20,
                                          -1e20,
                                          1e300,
                                          65535.5,
                                          127.9,
                                          std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN()};
        int k = pick(10);
        if (k < 4) return Value::make_float(t, specials[pick(int(std::size(specials)))]);
        if (k < 7) return Value::make_float(t, double(pick(401) - 200) / 8);
        double mantissa = std::uniform_real_distribution<double>(-1, 1)(rng);
        return Value::make_float(t, std::ldexp(mantissa, pick(140) - 70));
    }
    int k = pick(10);
    if (k < 4) return Value::make_int(t, pick(41) - 20);
    if (k < 5) return t.is_int() ? Value::make_int(t, t.min_int()) : Value::make_uint(t, 0);
    if (k < 6)
        return t.is_int() ? Value::make_int(t, t.max_int()) : Value::make_uint(t, t.max_uint());
    return Value::make_uint(t, rng());
}

// The bytes of a value as device memory holds it (bool as one byte).
void store_value(const Value &v, uint8_t *p) {
    Type t = v.type;
    if (t.is_float() && t.bits == 32) {
        float f = float(v.f);
        std::memcpy(p, &f, 4);
    } else if (t.is_float()) {
        std::memcpy(p, &v.f, 8);
    } else {
        std::memcpy(p, &v.bits, size_t(t.bytes())); // little-endian: the low bytes
    }
}

Value load_value(Type t, const uint8_t *p) {
    if (t.is_bool()) return Value::make_bool(*p != 0);
    if (t.is_float() && t.bits == 32) {
        float f;
        std::memcpy(&f, p, 4);
        return Value::make_float(t, f);
    }
    if (t.is_float()) {
        double f;
        std::memcpy(&f, p, 8);
        return Value::make_float(t, f);
    }
    uint64_t bits = 0;
    std::memcpy(&bits, p, size_t(t.bytes()));
    return t.is_int() ? Value::make_int(t, int64_t(bits << (64 - t.bits)) >> (64 - t.bits))
                      : Value::make_uint(t, bits);
}

/// The output buffer of expressions of element type t.
std::string output_name(Type t) {
    return "out_" + t.element_of().to_string();
}

bool type_less(Type a, Type b) {
    return std::make_tuple(a.code, a.bits, a.lanes) < std::make_tuple(b.code, b.bits, b.lanes);
}
using OutputSizes = std::map<Type, int, bool (*)(Type, Type)>;

/// Expressions over inputs, each loaded at its point, with their kernel and data.
struct Batch {
    std::vector<test::DeviceInput> inputs;
    int points = kPoints;                           ///< a multiple of kThreads
    std::map<std::string, std::vector<Value>> data; ///< input buffer -> one value per point
    std::vector<Expr> exprs;
    DeviceKernel kernel;          ///< all expressions in one kernel
    std::vector<int> offsets;     ///< where each expression's lanes start in its output buffer
    OutputSizes sizes{type_less}; ///< elements per output buffer
};

/// A kernel computing exprs at point i = block * kThreads + thread: each input variable is
/// loaded at i, and lane l of expression n goes to its output buffer at offsets[n] + i * lanes + l.
DeviceKernel batch_kernel(const std::string &name, const Batch &b, const std::vector<Expr> &exprs,
                          std::vector<int> *offsets, OutputSizes *sizes) {
    DeviceKernel k;
    k.name = name;
    Expr i = Variable::make(Int(32), "i");
    std::vector<Stmt> stores;
    for (const Expr &e : exprs) {
        int lanes = e.type().lanes;
        Type t = e.type().element_of();
        if (!sizes->count(t)) k.args.push_back(test::buffer_argument(output_name(t), t, true));
        int offset = (*sizes)[t];
        offsets->push_back(offset);
        (*sizes)[t] += b.points * lanes;
        Expr index = i * lanes + offset;
        if (lanes > 1) index = Ramp::make(index, 1, lanes);
        stores.push_back(Store::make(output_name(t), e, index));
    }
    Stmt body = Block::make(stores);
    for (auto it = b.inputs.rbegin(); it != b.inputs.rend(); ++it) {
        body = LetStmt::make(it->name, Load::make(it->type, it->buffer, i), body);
        k.args.insert(k.args.begin(), test::buffer_argument(it->buffer, it->type, false));
    }
    k.body = LetStmt::make("i", test::gpu_block_id(0) * kThreads + test::gpu_thread_id(0), body);
    k.threads[0] = kThreads;
    return k;
}

void finish(Batch &b, const std::string &name) {
    b.kernel = batch_kernel(name, b, b.exprs, &b.offsets, &b.sizes);
}

/// kExpressions random expressions and the inputs they run on; transcendental ones when asked.
Batch make_batch(uint64_t seed, bool transcendental) {
    std::mt19937_64 rng(seed);
    Batch b;
    b.inputs = inputs();
    for (const test::DeviceInput &in : b.inputs) {
        std::vector<Value> &values = b.data[in.buffer];
        for (int p = 0; p < b.points; p++)
            values.push_back(random_value(rng, in.type));
    }
    test::DeviceExprGenerator gen(rng, b.inputs, "i", b.points);
    for (int n = 0; n < kExpressions; n++) {
        // OpenCL prints 2, 3, 4, 8 and 16 lanes as vector types, others (5) lane by lane.
        static const int lane_counts[] = {1, 1, 1, 1, 1, 2, 3, 4, 8, 16, 5};
        int lanes = lane_counts[gen.pick(11)];
        Expr e;
        if (transcendental) {
            e = gen.transcendental((gen.pick(3) ? Float(32) : Float(64)).with_lanes(lanes), 2);
        } else if (n % 4 == 3) {
            // tests/lang/RandomExpr.h's integer expressions, unbounded: here int32 may wrap.
            test::RandomExprOptions options;
            options.magnitude_limit = std::numeric_limits<double>::infinity();
            options.lanes = lanes;
            test::RandomExprGenerator ints(rng, {"a", "b"}, options);
            e = ints.int_expr(ints.random_type(), 1 + gen.pick(4));
        } else {
            e = gen.exact(gen.random_type().with_lanes(lanes), 1 + gen.pick(4));
        }
        b.exprs.push_back(e);
    }
    if (const char *only = std::getenv("KILN_FUZZ_ONLY")) {
        // Keeps one expression of the batch (its inputs stay the same), to study a failure.
        std::string range = only;
        size_t colon = range.find(':');
        size_t lo = size_t(std::atoi(range.c_str()));
        size_t hi =
            colon == std::string::npos ? lo + 1 : size_t(std::atoi(range.c_str() + colon + 1));
        b.exprs = std::vector<Expr>(b.exprs.begin() + long(lo), b.exprs.begin() + long(hi));
    }
    finish(b, "fuzz");
    return b;
}

/// Edge values of a type: its limits, zeros, small values, and for floats infinities, NaN, a
/// denormal and the first values out of int32 range.
std::vector<Value> edge_values(Type t) {
    std::vector<Value> v;
    if (t.is_bool()) return {Value::make_bool(false), Value::make_bool(true)};
    if (t.is_float()) {
        for (double x :
             {-double(INFINITY), -1e20, -2147483904.0, -2.5, -1.5, -0.5, -0.0, 0.0, 1e-40, 0.5, 1.5,
              2.5, 255.5, 2147483648.0, 3e9, double(INFINITY), double(NAN)})
            v.push_back(Value::make_float(t, x));
        return v;
    }
    if (t.is_int()) {
        for (int64_t x :
             {t.min_int(), t.min_int() + 1, int64_t(-7), int64_t(-2), int64_t(-1), int64_t(0),
              int64_t(1), int64_t(2), int64_t(3), int64_t(8), t.max_int() - 1, t.max_int()})
            v.push_back(Value::make_int(t, x));
        return v;
    }
    for (uint64_t x :
         {uint64_t(0), uint64_t(1), uint64_t(2), uint64_t(3), uint64_t(7), uint64_t(8),
          uint64_t(100), t.max_uint() / 2, t.max_uint() / 2 + 1, t.max_uint() - 1, t.max_uint()})
        v.push_back(Value::make_uint(t, x));
    return v;
}

/// Every operator on x and y of type t (scalars or vectors), every cast of x, and the exact
/// math functions.
std::vector<Expr> every_operator(const Expr &x, const Expr &y, const std::vector<Type> &types) {
    Type t = x.type();
    std::vector<Expr> v = {EQ::make(x, y),  NE::make(x, y),  LT::make(x, y),
                           LE::make(x, y),  GT::make(x, y),  GE::make(x, y),
                           Min::make(x, y), Max::make(x, y), Select::make(LT::make(x, y), y, x)};
    if (t.is_bool()) {
        v.insert(v.end(), {And::make(x, y), Or::make(x, y), Not::make(x)});
    } else {
        v.insert(v.end(), {Add::make(x, y), Sub::make(x, y), Mul::make(x, y), Div::make(x, y),
                           Mod::make(x, y)});
    }
    for (Type to : types) {
        if (to != t.element_of()) v.push_back(Cast::make(to.with_lanes(t.lanes), x));
    }
    if (t.is_float()) {
        for (const char *f : {"floor", "ceil", "round", "abs", "sqrt"})
            v.push_back(Call::make(t, f, {x}, Call::Math));
        v.push_back(Call::make(t, "fma", {x, y, x}, Call::Math));
    } else if (t.is_int()) {
        v.push_back(Call::make(t.with_code(Type::UInt), intrinsic::abs, {x}, Call::Intrinsic));
    }
    return v;
}

/// Every operator and cast of every type on every pair of edge values (x, y), as scalars and
/// as 4-lane vectors (x broadcast, y gathered from four consecutive points).
Batch make_edge_batch() {
    static const std::vector<Type> types = {Bool(),   Int(8),    Int(16),  Int(32),
                                            Int(64),  UInt(8),   UInt(16), UInt(32),
                                            UInt(64), Float(32), Float(64)};
    Batch b;
    b.points = 17 * 17 + 15; // every pair of up to 17 values, rounded up to whole blocks
    for (Type t : types) {
        std::string s = t.to_string();
        b.inputs.push_back({"x_" + s, "in_x_" + s, t});
        b.inputs.push_back({"y_" + s, "in_y_" + s, t});
        std::vector<Value> e = edge_values(t);
        int n = int(e.size());
        for (int p = 0; p < b.points; p++) {
            b.data["in_x_" + s].push_back(e[size_t((p / n) % n)]);
            b.data["in_y_" + s].push_back(e[size_t(p % n)]);
        }
        Expr x = Variable::make(t, "x_" + s), y = Variable::make(t, "y_" + s);
        std::vector<Expr> scalar = every_operator(x, y, types);
        Expr i = Variable::make(Int(32), "i");
        Expr gathered = Load::make(t.with_lanes(4), "in_y_" + s,
                                   Mod::make(Ramp::make(i, 1, 4), Broadcast::make(b.points, 4)));
        std::vector<Expr> vector = every_operator(Broadcast::make(x, 4), gathered, types);
        b.exprs.insert(b.exprs.end(), scalar.begin(), scalar.end());
        b.exprs.insert(b.exprs.end(), vector.begin(), vector.end());
    }
    finish(b, "edges");
    return b;
}

/// Expression n alone in a kernel: what a failure prints for the reader.
std::string expression_source(const Batch &b, size_t n) {
    std::vector<int> offsets;
    OutputSizes sizes{type_less};
    return print_device_source(
        {batch_kernel("expression_" + std::to_string(n), b, {b.exprs[n]}, &offsets, &sizes)},
        GpuApi::OpenCL);
}

/// The expected lanes of e at point p.
std::vector<Value> expected(const Batch &b, const Expr &e, int p) {
    ExprEvaluator ev;
    ev.bind("i", Value::make_int(Int(32), p));
    for (const test::DeviceInput &in : b.inputs)
        ev.bind(in.name, b.data.at(in.buffer)[size_t(p)]);
    ev.on_load = [&](const Load *op, int64_t index) {
        const std::vector<Value> &values = b.data.at(op->name);
        internal_assert(index >= 0 && index < int64_t(values.size()), "fuzz load out of range");
        return values[size_t(index)];
    };
    return ev.eval_lanes(e);
}

// Within `ulps` units in the last place of want (or both NaN, or equal infinities).
bool close_enough(const Value &want, const Value &got, double ulps) {
    if (want == got) return true;
    double w = want.f, g = got.f;
    if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) return false;
    bool f32 = want.type.bits == 32;
    double ulp =
        f32 ? double(std::nextafter(float(std::abs(w)), INFINITY)) - double(float(std::abs(w)))
            : std::nextafter(std::abs(w), INFINITY) - std::abs(w);
    // Results near zero (sin of a multiple of pi, log near 1) are judged against 1.0's ulp.
    double floor = f32 ? 0x1p-23 : 0x1p-52;
    return std::abs(w - g) <= ulps * std::max(ulp, floor);
}

struct FuzzStats {
    uint64_t programs = 0, expressions = 0, lanes = 0;
};

#if KILN_TEST_OPENCL

/// Runs a batch on OpenCL; adds a failure (with a reproducer) for each of the first mismatches.
void run_batch(test::OpenCLRunner &runner, const Batch &b, uint64_t seed, double ulps,
               FuzzStats &stats, int &failures) {
    std::string source = print_device_source({b.kernel}, GpuApi::OpenCL);
    if (std::getenv("KILN_FUZZ_PRINT")) std::printf("%s\n", source.c_str());
    std::string error;
    cl_program program = runner.build(source, &error);
    if (!program) {
        ADD_FAILURE() << "seed " << seed << ": the printed OpenCL does not build: " << error << "\n"
                      << test::numbered(source);
        failures++;
        return;
    }
    std::vector<test::OpenCLRunner::Arg> args;
    std::vector<cl_mem> buffers;
    std::map<std::string, std::pair<cl_mem, std::vector<uint8_t>>> outputs;
    for (const DeviceArgument &a : b.kernel.args) {
        std::vector<uint8_t> bytes;
        if (a.written) {
            bytes.assign(size_t(b.sizes.at(a.type) * a.type.bytes()), 0xA5);
        } else {
            bytes.resize(size_t(b.points * a.type.bytes()));
            for (int p = 0; p < b.points; p++)
                store_value(b.data.at(a.name)[size_t(p)], &bytes[size_t(p * a.type.bytes())]);
        }
        buffers.push_back(runner.buffer(bytes.size(), bytes.data()));
        args.push_back(test::OpenCLRunner::buffer_arg(buffers.back()));
        if (a.written) outputs[a.name] = {buffers.back(), std::move(bytes)};
    }
    bool ok = runner.launch(program, b.kernel, {b.points / kThreads}, args, &error);
    for (auto &[name, out] : outputs)
        runner.read(out.first, out.second.size(), out.second.data());
    for (cl_mem m : buffers)
        clReleaseMemObject(m);
    clReleaseProgram(program);
    if (!ok) {
        ADD_FAILURE() << "seed " << seed << ": launch failed: " << error << "\n"
                      << test::numbered(source);
        failures++;
        return;
    }
    stats.programs++;
    for (size_t n = 0; n < b.exprs.size() && failures < 3; n++) {
        const Expr &e = b.exprs[n];
        Type t = e.type().element_of();
        int lanes = e.type().lanes;
        const std::vector<uint8_t> &out = outputs.at(output_name(t)).second;
        stats.expressions++;
        for (int p = 0; p < b.points; p++) {
            std::vector<Value> want = expected(b, e, p);
            int lane = 0;
            Value got;
            for (; lane < lanes; lane++) {
                size_t at = size_t(b.offsets[n] + p * lanes + lane) * size_t(t.bytes());
                got = load_value(t, &out[at]);
                stats.lanes++;
                bool same = ulps > 0 ? close_enough(want[size_t(lane)], got, ulps)
                                     : want[size_t(lane)] == got;
                if (!same) break;
            }
            if (lane == lanes) continue;
            std::ostringstream inputs_text;
            for (const test::DeviceInput &in : b.inputs)
                inputs_text << " " << in.name << "=" << b.data.at(in.buffer)[size_t(p)];
            ADD_FAILURE() << "point " << p << ", lane " << lane << ": ExprEvaluator gives "
                          << want[size_t(lane)] << ", OpenCL gives " << got
                          << "\n  inputs:" << inputs_text.str() << "\n  seed " << seed
                          << ", expression " << n << ": " << e
                          << "\n  reproduce:  KILN_FUZZ_SEED=" << seed
                          << " KILN_FUZZ_ITERATIONS=1 tests/kiln_codegen_tests --gtest_filter="
                          << test_name() << "\n  the expression's kernel alone:\n"
                          << test::numbered(expression_source(b, n));
            failures++;
            break;
        }
    }
}

void fuzz(const char *what, uint64_t default_seed, uint64_t default_iterations, bool transcendental,
          double ulps) {
    std::string why;
    test::OpenCLRunner *runner = test::OpenCLRunner::get(&why);
    if (!runner) GTEST_SKIP() << "no OpenCL device: " << why;
    uint64_t seed = env_or("KILN_FUZZ_SEED", default_seed);
    // Each iteration is a whole OpenCL program of many expressions (a PoCL compile each), so the
    // suite-wide KILN_FUZZ_ITERATIONS (150 in the sanitizer pass, a million with --long) is read
    // as expressions: iterations = KILN_FUZZ_ITERATIONS / 64, at least the default, at most 200.
    uint64_t iterations = default_iterations;
    if (std::getenv("KILN_FUZZ_ITERATIONS")) {
        uint64_t n = env_or("KILN_FUZZ_ITERATIONS", default_iterations) / 64;
        iterations =
            n <= 1 ? std::min<uint64_t>(default_iterations, 2) : std::min<uint64_t>(n, 200);
    }
    FuzzStats stats;
    int failures = 0;
    test::FuzzBudget budget;
    uint64_t i = 0;
    for (; i < iterations && failures < 3 && !budget.spent(); i++) {
        Batch b = make_batch(seed + i, transcendental);
        run_batch(*runner, b, seed + i, ulps, stats, failures);
    }
    budget.report(what, i, iterations);
    std::printf("[ device fuzz, %s ] seed %llu: %llu programs, %llu expressions, %llu lanes "
                "checked\n",
                what, (unsigned long long)seed, (unsigned long long)stats.programs,
                (unsigned long long)stats.expressions, (unsigned long long)stats.lanes);
}

TEST(CodeGenDeviceFuzz, OpenCLMatchesExprEvaluatorExactly) {
    fuzz("exact", 1, 4, false, 0);
}

// Not random: every operator and cast of every type on every pair of edge values.
TEST(CodeGenDeviceFuzz, OpenCLEdgeValuesOfEveryOperator) {
    std::string why;
    test::OpenCLRunner *runner = test::OpenCLRunner::get(&why);
    if (!runner) GTEST_SKIP() << "no OpenCL device: " << why;
    FuzzStats stats;
    int failures = 0;
    run_batch(*runner, make_edge_batch(), 0, 0, stats, failures);
    std::printf("[ device edge values ] %llu expressions, %llu lanes checked\n",
                (unsigned long long)stats.expressions, (unsigned long long)stats.lanes);
}

TEST(CodeGenDeviceFuzz, OpenCLTranscendentalsWithinUlps) {
    fuzz("transcendental", 1000, 1, true, 16);
}

#endif // KILN_TEST_OPENCL

// The CUDA dialect of the fuzzer's programs compiles with NVRTC and assembles with ptxas.
TEST(CodeGenDeviceFuzz, CUDADialectCompilesWithNVRTC) {
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC is not available: " << why;
    std::string ptxas = test::find_ptxas(&why);
    uint64_t seed = env_or("KILN_FUZZ_SEED", 1);
    std::vector<Batch> batches = {make_batch(seed, false), make_batch(seed, true),
                                  make_edge_batch()};
    for (const Batch &b : batches) {
        // Each expression in a kernel of its own too: a program of many kernels sharing helpers.
        std::vector<DeviceKernel> kernels = {b.kernel};
        for (size_t n = 0; n < b.exprs.size() && n < 16; n++) {
            std::vector<int> offsets;
            OutputSizes sizes{type_less};
            kernels.push_back(
                batch_kernel("e" + std::to_string(n), b, {b.exprs[n]}, &offsets, &sizes));
        }
        std::string source = print_device_source(kernels, GpuApi::CUDA);
        std::string ptx;
        try {
            ptx = compile_cuda_to_ptx(source, "sm_90", "fuzz.cu");
        } catch (const CompileError &e) {
            FAIL() << "seed " << seed << ": " << e.what();
        }
        if (ptxas.empty()) continue;
        std::string log;
        EXPECT_TRUE(test::ptxas_assembles(ptxas, ptx, &log)) << "seed " << seed << ": " << log;
    }
    if (ptxas.empty()) GTEST_SKIP() << "PTX not assembled: " << why;
}

} // namespace
} // namespace kiln
