// Tuning for a GPU target (`--target host-opencl`) end to end: real worker processes, each with
// its own OpenCL context on this machine's device (PoCL here), a real SQLite database, tiny
// shapes and few trials (PoCL compiles each kernel in about a second). Skipped, with the reason
// printed, without an OpenCL device. Also: a CUDA target without a driver fails before any
// worker starts, with the runtime's message.
#include <gtest/gtest.h>

#include "tests/autotune/PlainMatmul.h"
#include "tests/autotune/TempDir.h"
#include "tests/lang/ErrorOf.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "autotune/AutoSpace.h"
#include "autotune/Emit.h"
#include "autotune/Features.h"
#include "autotune/Templates.h"
#include "autotune/Tuner.h"
#include "codegen/CodeGenDevice.h"
#include "codegen/NVRTC.h"
#include "driver/Pipeline.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"
#include "schedule/LoweredFunc.h"
#include "tuning_db/TuningDB.h"

// PoCL's own LLVM keeps about 2 MB after its first kernel compile, on its worker thread: not
// kiln's leak. The suppression covers only the OpenCL implementation's libraries.
extern "C" const char *__lsan_default_suppressions() { // NOLINT: the sanitizer's name
    return "leak:libpocl.so\n"
           "leak:libpocl-devices-\n"
           "leak:libLLVM-15.so\n"
           "leak:libclang-cpp.so.15\n";
}

using namespace kiln;
using namespace kiln::autotune;
namespace fs = std::filesystem;

namespace {

using autotune_test::TempDir;

/// Empty when an OpenCL device runs kernels here, else why not. Points PoCL's kernel cache (of
/// this process and of the workers it starts) at a fresh folder.
std::string opencl_unavailable() {
    static const bool cache = [] {
        char dir[] = "/tmp/kiln_pocl_cache_XXXXXX";
        if (mkdtemp(dir)) setenv("POCL_CACHE_DIR", dir, 1);
        return true;
    }();
    (void)cache;
    try {
        open_gpu_device(tune_target("host-opencl"));
    } catch (const RuntimeError &e) {
        return e.what();
    }
    return "";
}

#define REQUIRE_OPENCL()                                                                           \
    do {                                                                                           \
        std::string why = opencl_unavailable();                                                    \
        if (!why.empty()) GTEST_SKIP() << "no OpenCL device to tune on: " << why;                  \
    } while (0)

TuneOptions quick_gpu(const std::string &op, std::vector<int64_t> shape, const std::string &db) {
    TuneOptions o;
    o.op = op;
    o.shape = std::move(shape);
    o.db_path = db;
    o.target = "host-opencl";
    o.strategy = "random";
    o.trials = 3;
    o.jobs = 2;
    o.threads = 1;
    o.min_time_ms = 5;
    o.remeasure = 0;
    o.progress = false;
    o.worker_path = KILN_WORKER_PATH;
    return o;
}

std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Every measurement of the database: status counts.
std::map<std::string, int64_t> statuses(const std::string &db_path) {
    auto db = tuning_db::Database::open_existing(db_path);
    std::map<std::string, int64_t> n;
    for (const auto &w : db.workloads())
        for (const auto &t : db.targets())
            for (const auto &m : db.history(w.id, t.id, 0))
                n[tuning_db::to_string(m.status)]++;
    return n;
}

TEST(GPUTune, BlurOnOpenCLRecordsOkMeasurementsUnderTheDevicesTargetKey) {
    REQUIRE_OPENCL();
    TempDir dir;
    TuneOptions o = quick_gpu("blur", {34, 18}, dir / "k.db");
    std::ostringstream out, err;
    TuneResult r = tune(o, out, err);
    EXPECT_EQ(r.trials, 3) << out.str() << err.str();
    ASSERT_TRUE(r.best_ms) << out.str() << err.str();
    EXPECT_TRUE(r.hand_ms) << out.str() << err.str();
    EXPECT_FALSE(r.default_ms); // a CPU schedule: not a baseline of a GPU target
    // 3 trials + the hand schedule, every one ok.
    EXPECT_EQ(r.recorded, 4);
    EXPECT_EQ(statuses(o.db_path), (std::map<std::string, int64_t>{{"ok", 4}}))
        << out.str() << err.str();
    EXPECT_NE(r.best_trace_json.find("gpu_blocks"), std::string::npos) << r.best_trace_json;
    EXPECT_NE(r.best_cpp.find("gpu_"), std::string::npos) << r.best_cpp;

    auto db = tuning_db::Database::open_existing(o.db_path);
    ASSERT_EQ(db.targets().size(), 1u);
    const tuning_db::TargetKey key = db.targets()[0].key;
    std::string description = open_gpu_device(tune_target("host-opencl")).description;
    EXPECT_NE(key.cpu_model.find("opencl"), std::string::npos) << key.cpu_model;
    EXPECT_NE(key.cpu_model.find(description), std::string::npos) << key.cpu_model;
    EXPECT_NE(key.features.find("gpu=opencl"), std::string::npos) << key.features;
    EXPECT_EQ(key, target_key(tune_target("host-opencl"), 1, description));
}

TEST(GPUTune, SoftmaxThreadsPerRowAreTunedOnOpenCL) {
    REQUIRE_OPENCL();
    TempDir dir;
    TuneOptions o = quick_gpu("softmax", {4, 70}, dir / "k.db");
    o.strategy = "grid";
    std::ostringstream out, err;
    TuneResult r = tune(o, out, err);
    ASSERT_TRUE(r.best_ms) << out.str() << err.str();
    EXPECT_EQ(statuses(o.db_path), (std::map<std::string, int64_t>{{"ok", 4}}))
        << out.str() << err.str();
    EXPECT_EQ(r.trials, 3);
    EXPECT_TRUE(r.hand_ms);
}

TEST(GPUTune, CPUAndGPURunsOfOneOperatorAreKeptApart) {
    REQUIRE_OPENCL();
    TempDir dir;
    std::ostringstream out, err;
    TuneOptions gpu = quick_gpu("blur", {34, 18}, dir / "k.db");
    gpu.trials = 2;
    gpu.time_s = 0;
    TuneResult g = tune(gpu, out, err);
    ASSERT_TRUE(g.best_ms) << out.str() << err.str();

    // The same operator, shape and strategy on the CPU: another target, so a fresh run that
    // skips nothing the GPU run measured and gets its own best.
    TuneOptions cpu = gpu;
    cpu.target = "host";
    TuneResult c = tune(cpu, out, err);
    EXPECT_FALSE(c.resumed);
    EXPECT_NE(c.run_id, g.run_id);
    EXPECT_EQ(c.skipped, 0);
    EXPECT_TRUE(c.default_ms);
    EXPECT_EQ(c.best_trace_json.find("gpu_"), std::string::npos) << c.best_trace_json;

    auto db = tuning_db::Database::open_existing(gpu.db_path);
    auto targets = db.targets();
    ASSERT_EQ(targets.size(), 2u);
    EXPECT_NE(targets[0].key, targets[1].key);
    auto w = db.workloads_matching("blur", "34x18");
    ASSERT_EQ(w.size(), 1u);
    for (const auto &t : targets) {
        bool is_gpu = t.key.features.find("gpu=opencl") != std::string::npos;
        auto best = db.best(w[0].id, t.id);
        ASSERT_TRUE(best) << t.key.to_string();
        EXPECT_EQ(best->config.trace_json.find("gpu_blocks") != std::string::npos, is_gpu)
            << t.key.to_string();
        EXPECT_EQ(db.runs(w[0].id, t.id).size(), 1u) << t.key.to_string();
    }

    // kiln compile for the GPU target emits the GPU build: the object embeds the OpenCL kernel.
    EmitOptions e;
    e.op = "blur";
    e.shape = {34, 18};
    e.db_path = gpu.db_path;
    e.out_dir = dir / "gpu";
    e.threads = 1;
    e.target = "host-opencl";
    std::ostringstream warn;
    EmitResult emitted = emit_best(e, warn);
    EXPECT_TRUE(emitted.tuned) << warn.str();
    ASSERT_EQ(emitted.files.size(), 3u);
    EXPECT_NE(read_file(emitted.files[0]).find("__kernel"), std::string::npos);
    EXPECT_NE(read_file(emitted.files[2]).find("int blur("), std::string::npos);
}

TEST(GPUTune, OperatorsWithoutAGPUTemplateAreClearErrors) {
    REQUIRE_OPENCL();
    TempDir dir;
    std::ostringstream out, err;
    TuneOptions o = quick_gpu("harris", {34, 18}, dir / "k.db");
    try {
        tune(o, out, err);
        ADD_FAILURE() << "no error for harris on a GPU target";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "operator 'harris' has no GPU template (gpu=opencl); GPU "
                               "templates: matmul, conv2d, blur, blur_u16, softmax, layernorm; "
                               "or tune it with --space auto (the automatic GPU space)");
    }
}

// --space auto on a GPU target: the automatic GPU space, really tuned on OpenCL.
TEST(GPUTune, AutoSpaceTunesBlurOnOpenCL) {
    REQUIRE_OPENCL();
    TempDir dir;
    TuneOptions o = quick_gpu("blur", {34, 18}, dir / "k.db");
    o.space = "auto";
    std::ostringstream out, err;
    TuneResult r = tune(o, out, err);
    EXPECT_EQ(r.trials, 3) << out.str() << err.str();
    ASSERT_TRUE(r.best_ms) << out.str() << err.str();
    std::map<std::string, int64_t> n = statuses(o.db_path);
    EXPECT_GE(n["ok"], 4) << out.str() << err.str(); // 3 trials and the hand schedule
    EXPECT_NE(r.best_trace_json.find("gpu_blocks"), std::string::npos) << r.best_trace_json;
}

// Reductions (softmax: row reductions as updates; matmul: an RDom update of an intermediate) and a
// chain of stencils (harris) in the automatic GPU space: every measured candidate runs and
// matches the reference.
TEST(GPUTune, AutoSpaceTunesSoftmaxHarrisAndMatmulOnOpenCL) {
    REQUIRE_OPENCL();
    for (auto [op, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"softmax", {4, 70}}, {"harris", {34, 18}}, {"matmul", {24, 40, 16}}}) {
        TempDir dir;
        TuneOptions o = quick_gpu(op, shape, dir / "k.db");
        o.space = "auto";
        o.trials = 4;
        std::ostringstream out, err;
        TuneResult r = tune(o, out, err);
        ASSERT_TRUE(r.best_ms) << op << "\n" << out.str() << err.str();
        std::map<std::string, int64_t> n = statuses(o.db_path);
        EXPECT_EQ(n["ok"], r.recorded) << op << "\n" << out.str() << err.str();
    }
}

TEST(GPUTune, AutoGPUSpaceOfAScalarOutputIsAClearError) {
    apps::Operator op;
    op.name = "scalar";
    op.make = [](const std::vector<int64_t> &) {
        apps::OperatorInstance inst;
        Func f("scalar_out");
        f() = 1.f;
        inst.output = f;
        return inst;
    };
    try {
        auto_gpu_space(op, {});
        ADD_FAILURE() << "no error for a scalar output";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "--space auto for a GPU target: the output of 'scalar' has no "
                               "dimensions to spread over GPU threads");
    }
}

// No device needed: sampled points of the automatic GPU space of five operators of different
// shapes (a stencil, row reductions, a chain of stencils, reductions over an RDom into an
// intermediate) lower to kernels within the limits.
TEST(GPUTune, AutoGPUSpacePointsLowerToKernels) {
    struct Case {
        std::string op;
        std::vector<int64_t> shape;
        std::string knob, value; ///< a choice some of the points must make
    };
    std::vector<Case> cases = {{"blur", {66, 42}, "blur_x_at", "block"},
                               {"softmax", {4, 300}, "", ""},
                               {"harris", {34, 18}, "", ""},
                               {"matmul", {24, 40, 16}, "", ""},
                               {"conv2d", {4, 16, 8, 16}, "", ""},
                               {"plain_matmul", {37, 53, 24}, "C_sums", "registers"}};
    GpuLimits limits;
    limits.max_threads_per_block = 512;
    for (const Case &c : cases) {
        const apps::Operator op =
            c.op == "plain_matmul" ? autotune_test::plain_matmul() : apps::find_operator(c.op);
        SearchSpace space = auto_gpu_space(op, c.shape, limits);
        std::mt19937_64 rng(11);
        int lowered = 0, with_choice = 0;
        for (int tries = 0; tries < 2000 && lowered < 40; tries++) {
            Config config = space.random(rng);
            if (!space.valid(config)) continue;
            nlohmann::json j = space.to_json(config);
            apps::OperatorInstance inst = op.make(c.shape);
            space.apply(inst, config);
            LoweredFunc f;
            try {
                f = inst.pipeline().lower();
            } catch (const std::exception &e) {
                ADD_FAILURE() << c.op << " " << j.dump() << ": " << e.what();
                continue;
            }
            lowered++;
            if (!c.knob.empty() && j.value(c.knob, "") == c.value) with_choice++;
            ASSERT_FALSE(f.kernels.empty()) << c.op << " " << j.dump();
            for (const DeviceKernel &k : f.kernels) {
                EXPECT_LE(int64_t(k.threads[0]) * k.threads[1] * k.threads[2], 512)
                    << c.op << " " << j.dump();
                EXPECT_LE(k.shared_bytes, 48 * 1024) << c.op << " " << j.dump();
            }
        }
        EXPECT_EQ(lowered, 40) << c.op;
        if (!c.knob.empty()) {
            EXPECT_GT(with_choice, 0) << c.op << ": no point with " << c.knob << " = " << c.value;
        }
    }
}

TEST(GPUTune, CUDAWithoutADriverFailsAtOnceQuotingTheRuntime) {
    const kiln_device_interface_t *iface = kiln_device_interface(kiln_gpu_api_cuda);
    char description[256];
    if (iface && iface->device_description(description, sizeof description) == 0)
        GTEST_SKIP() << "this machine has a CUDA device: " << description;
    std::string runtime_message = kiln_last_error_message();
    ASSERT_FALSE(runtime_message.empty());
    TempDir dir;
    TuneOptions o = quick_gpu("blur", {34, 18}, dir / "k.db");
    o.target = "host-cuda";
    // A real worker: had the tuner started it (or opened the database) before asking for the
    // device, the error would be another one.
    o.worker_path = KILN_WORKER_PATH;
    std::ostringstream out, err;
    try {
        tune(o, out, err);
        ADD_FAILURE() << "no error for --target host-cuda without a CUDA device";
    } catch (const RuntimeError &e) {
        std::string m = e.what();
        EXPECT_EQ(m.rfind("--target with gpu=cuda: ", 0), 0u) << m;
        EXPECT_NE(m.find(runtime_message), std::string::npos) << m;
        EXPECT_NE(m.find("tune for the CPU with --target host"), std::string::npos) << m;
    }
    // Before anything else: not even the database was created.
    EXPECT_FALSE(fs::exists(o.db_path));

    // The command line says the same and exits with 1.
    std::string cmd = std::string(KILN_CLI_PATH) + " tune blur --shape 34x18 --trials 1 --db " +
                      (dir / "cli.db") + " --target host-cuda 2>&1";
    FILE *pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string text;
    char buf[512];
    while (fgets(buf, sizeof buf, pipe))
        text += buf;
    int status = pclose(pipe);
    EXPECT_EQ(WEXITSTATUS(status), 1) << text;
    EXPECT_NE(text.find("kiln: --target with gpu=cuda: "), std::string::npos) << text;
    EXPECT_NE(text.find(runtime_message), std::string::npos) << text;
}

TEST(GPUTune, UnknownTargetNamesTheChoices) {
    try {
        tune_target("gpu");
        ADD_FAILURE() << "no error";
    } catch (const CompileError &e) {
        std::string m = e.what();
        EXPECT_EQ(m.rfind("--target: ", 0), 0u) << m;
        EXPECT_NE(m.find("gpu"), std::string::npos) << m;
    }
    EXPECT_EQ(tune_target("host-opencl").gpu, GpuApi::OpenCL);
    EXPECT_EQ(tune_target("host-cuda").gpu, GpuApi::CUDA);
    EXPECT_EQ(tune_target("host"), Target::host());
    EXPECT_EQ(tune_target(Target::host().with_gpu(GpuApi::OpenCL).to_string()),
              Target::host().with_gpu(GpuApi::OpenCL));
}

// No device needed: valid points of each GPU template (the hand schedule's among them) lower to
// kernels within the limits, so every GPU rule of lowering (schedule/OffloadGPULoops) holds.
TEST(GPUTune, GPUTemplatePointsLowerToKernels) {
    struct Case {
        std::string op;
        std::vector<int64_t> shape;
        nlohmann::json hand;
    };
    std::vector<Case> cases = {
        {"matmul",
         {64, 64, 64},
         {{"tile_j", 64},
          {"tile_i", 64},
          {"out_j", 8},
          {"out_i", 8},
          {"k_step", 16},
          {"b_shared", 1},
          {"a_shared", 0},
          {"vec", 1},
          {"prod_registers", 1},
          {"interleave", 1}}},
        {"conv2d",
         {4, 16, 8, 16},
         {{"tile_x", 16},
          {"tile_y", 4},
          {"tile_co", 16},
          {"unroll_co", 1},
          {"w_packed_at", "inline"}}},
        {"blur", {66, 42}, {{"tile_x", 32}, {"tile_y", 6}, {"blur_x_at", "shared"}}},
        {"softmax", {4, 300}, {{"threads", 128}}},
        {"layernorm", {4, 300}, {{"threads", 128}}},
    };
    GpuLimits limits;
    limits.max_threads_per_block = 512;
    for (const Case &c : cases) {
        const apps::Operator &op = apps::find_operator(c.op);
        SearchSpace space = space_for(op, c.shape, "template", tune_target("host-opencl"), &limits);
        // The hand schedule is a point: the same kernels as op.hand_schedule.
        apps::OperatorInstance hand = op.make(c.shape), point = op.make(c.shape);
        op.hand_schedule(hand, tune_target("host-opencl"));
        space.apply(point, space.from_json(c.hand));
        LoweredFunc want = hand.pipeline().lower(), got = point.pipeline().lower();
        ASSERT_EQ(want.kernels.size(), got.kernels.size()) << c.op;
        for (size_t k = 0; k < want.kernels.size(); k++) {
            for (int d = 0; d < 3; d++)
                EXPECT_EQ(want.kernels[k].threads[d], got.kernels[k].threads[d]) << c.op;
            EXPECT_EQ(want.kernels[k].shared_bytes, got.kernels[k].shared_bytes) << c.op;
        }
        std::mt19937_64 rng(7);
        int lowered = 0;
        for (int tries = 0; tries < 400 && lowered < 12; tries++) {
            Config config = space.random(rng);
            if (!space.valid(config)) continue;
            apps::OperatorInstance inst = op.make(c.shape);
            space.apply(inst, config);
            LoweredFunc f;
            try {
                f = inst.pipeline().lower();
            } catch (const CompileError &e) {
                ADD_FAILURE() << c.op << " " << space.to_json(config).dump() << ": " << e.what();
                continue;
            }
            lowered++;
            ASSERT_FALSE(f.kernels.empty()) << c.op << " " << space.to_json(config).dump();
            for (const DeviceKernel &k : f.kernels) {
                EXPECT_LE(int64_t(k.threads[0]) * k.threads[1] * k.threads[2], 512)
                    << c.op << " " << space.to_json(config).dump();
                EXPECT_LE(k.shared_bytes, 48 * 1024) << c.op << " " << space.to_json(config).dump();
            }
        }
        EXPECT_EQ(lowered, 12) << c.op;
    }
}

/// CUDA source compiles with NVRTC for sm_90 and its PTX, which reads global memory, assembles
/// with ptxas (each skipped, saying why, where this machine lacks it).
void expect_cuda_assembles(const std::string &cu, const std::string &file) {
    std::string why;
    if (!nvrtc_available(&why)) {
        std::printf("[ note     ] no NVRTC: %s\n", why.c_str());
        return;
    }
    std::string ptx = compile_cuda_to_ptx(cu, "sm_90", file);
    EXPECT_NE(ptx.find("ld.global"), std::string::npos);
    std::string ptxas;
    for (const char *p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
        if (ptxas.empty() && access(p, X_OK) == 0) ptxas = p;
    if (ptxas.empty()) {
        std::printf("[ note     ] no ptxas: the PTX is not assembled\n");
        return;
    }
    TempDir dir;
    std::ofstream(dir / "k.ptx") << ptx;
    std::string cmd = ptxas + " -arch=sm_90 " + (dir / "k.ptx") + " -o /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

/// `op` at `shape` under `config` runs on the OpenCL device (PoCL here) and matches the
/// reference within `tolerance`; skips the test, saying why, without an OpenCL device.
void expect_matches_on_opencl(const apps::Operator &op, const std::vector<int64_t> &shape,
                              const SearchSpace &space, const Config &config, double tolerance) {
    std::string unavailable = opencl_unavailable();
    if (!unavailable.empty()) GTEST_SKIP() << "no OpenCL device: " << unavailable;
    apps::OperatorInstance run = op.make(shape);
    space.apply(run, config);
    run.bind_inputs();
    BufferBase out = run.make_output();
    CompiledPipeline compiled = run.pipeline().compile_jit(tune_target("host-opencl"));
    ASSERT_EQ(compiled.run({out}), 0) << kiln_last_error_message();
    out.copy_to_host();
    EXPECT_LE(apps::max_relative_error(out, op.reference(run)), tolerance);
}

// The matmul template's vec = 4: whole-vector accesses in both dialects. The OpenCL kernel runs
// (PoCL) and matches the reference; the CUDA source compiles with NVRTC for sm_90 and its PTX
// assembles with ptxas (each skipped, saying why, where this machine lacks it).
TEST(GPUTune, MatmulTemplateWithVec4MovesFloat4) {
    const apps::Operator &op = apps::find_operator("matmul");
    std::vector<int64_t> shape = {40, 72, 24}; // N = 72: tiles shift inwards, rows unaligned
    GpuLimits limits;
    limits.max_threads_per_block = 512;
    SearchSpace space = space_for(op, shape, "template", tune_target("host-opencl"), &limits);
    Config config = space.from_json({{"tile_j", 32},
                                     {"tile_i", 16},
                                     {"out_j", 8},
                                     {"out_i", 2},
                                     {"k_step", 8},
                                     {"b_shared", 1},
                                     {"a_shared", 1},
                                     {"vec", 4},
                                     {"prod_registers", 1},
                                     {"interleave", 0}});
    ASSERT_TRUE(space.valid(config));
    try {
        space.from_json({{"tile_j", 32},
                         {"tile_i", 16},
                         {"out_j", 2},
                         {"out_i", 2},
                         {"k_step", 8},
                         {"b_shared", 1},
                         {"a_shared", 1},
                         {"vec", 4},
                         {"prod_registers", 1},
                         {"interleave", 0}});
        ADD_FAILURE() << "no error for out_j = 2 with vec = 4";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find(
                      "generator constraint 'out_j % vec == 0' does not hold for "),
                  std::string::npos)
            << e.what();
    }
    apps::OperatorInstance inst = op.make(shape);
    space.apply(inst, config);
    LoweredFunc f = inst.pipeline().lower();
    std::string cl = print_device_source(f.kernels, GpuApi::OpenCL);
    std::string cu = print_device_source(f.kernels, GpuApi::CUDA);
    EXPECT_NE(cl.find("vload4("), std::string::npos) << cl;
    EXPECT_NE(cl.find("vstore4("), std::string::npos) << cl;
    EXPECT_NE(cu.find("kiln_load_f32x4("), std::string::npos) << cu;
    EXPECT_NE(cu.find("kiln_store_f32x4("), std::string::npos) << cu;

    expect_cuda_assembles(cu, "matmul_vec4.cu");

    expect_matches_on_opencl(op, shape, space, config, op.tolerance);
}

// The matmul template's interleave: a thread's columns (groups of vec) lie the block's threads
// across apart, so neighbouring threads read neighbouring words of B's panel and write
// neighbouring words of C; the sums stay in each thread's registers. At a shape the tiles do not
// divide, with and without vectors and A's stage, the OpenCL kernel runs (PoCL) and matches the
// reference, and the CUDA source compiles and assembles.
TEST(GPUTune, MatmulTemplateInterleavesAThreadsColumns) {
    const apps::Operator &op = apps::find_operator("matmul");
    std::vector<int64_t> shape = {40, 72, 24};
    GpuLimits limits;
    limits.max_threads_per_block = 512;
    SearchSpace space = space_for(op, shape, "template", tune_target("host-opencl"), &limits);
    for (int vec : {1, 4}) {
        SCOPED_TRACE("vec " + std::to_string(vec));
        Config config = space.from_json({{"tile_j", 32},
                                         {"tile_i", 16},
                                         {"out_j", 8},
                                         {"out_i", 2},
                                         {"k_step", 8},
                                         {"b_shared", 1},
                                         {"a_shared", vec == 4 ? 1 : 0},
                                         {"vec", vec},
                                         {"prod_registers", 1},
                                         {"interleave", 1}});
        ASSERT_TRUE(space.valid(config));
        apps::OperatorInstance inst = op.make(shape);
        space.apply(inst, config);
        LoweredFunc f = inst.pipeline().lower();
        std::string cu = print_device_source(f.kernels, GpuApi::CUDA);
        EXPECT_NE(cu.find("float prod[16];"), std::string::npos) << cu;
        // Thread x's first column: x itself (vec 1), its x-th group of 4 (vec 4); blocked, it
        // would be x * 8.
        if (vec == 1)
            EXPECT_EQ(cu.find("prod_s1_jt * "), std::string::npos) << cu;
        else
            EXPECT_NE(cu.find("prod_s1_jt * 4u"), std::string::npos) << cu;
        EXPECT_EQ(cu.find("prod_s1_jt * 8u"), std::string::npos) << cu;
        expect_cuda_assembles(cu, "matmul_interleave.cu");
        expect_matches_on_opencl(op, shape, space, config, op.tolerance);
    }
}

// The conv2d template's weights repacked once per run by a kernel of their own (w_packed_at =
// root), output channel innermost, so the sums read a tap's channels from consecutive addresses:
// two kernels, the OpenCL pair matches the reference at a shape no tile divides (24 output
// channels in tiles of 16), the CUDA source assembles.
TEST(GPUTune, Conv2dTemplateRepacksItsWeightsOnceByAKernel) {
    const apps::Operator &op = apps::find_operator("conv2d");
    std::vector<int64_t> shape = {32, 24, 9, 13}; // C_in, C_out, H, W
    SearchSpace space = space_for(op, shape, "template", tune_target("host-opencl"));
    Config config = space.from_json(
        {{"tile_x", 8}, {"tile_y", 4}, {"tile_co", 16}, {"unroll_co", 1}, {"w_packed_at", "root"}});
    apps::OperatorInstance inst = op.make(shape);
    space.apply(inst, config);
    LoweredFunc f = inst.pipeline().lower();
    ASSERT_EQ(f.kernels.size(), 2u);
    // 16 output channels by 16 of the block's 32 input channels (each thread two of them).
    EXPECT_EQ(f.kernels[0].threads[0] * f.kernels[0].threads[1], 16 * 16);
    const std::string cu = print_device_source(f.kernels, GpuApi::CUDA);
    EXPECT_NE(cu.find("w_packed_kernel0"), std::string::npos) << cu;
    expect_cuda_assembles(cu, "conv2d_w_root.cu");
    expect_matches_on_opencl(op, shape, space, config, op.tolerance);
}

// The conv2d GPU hand schedule's sums (conv, computed per thread: one pixel by 16 output
// channels) have a region of constant extent (bounds inference writes a max a constant past its
// min from the min's name), so no loop runs over their one-point x and y: the kernel has the
// reduction's three loops (its fourth, over blocks of input channels, has one: all 64 channels
// are one block) and the output's one.
TEST(GPUTune, Conv2dHandSchedulesSumsHaveNoOnePointLoops) {
    const apps::Operator &op = apps::find_operator("conv2d");
    apps::OperatorInstance inst = op.make({64, 64, 56, 56});
    op.hand_schedule(inst, tune_target("host-cuda"));
    const std::string cu = print_device_source(inst.pipeline().lower().kernels, GpuApi::CUDA);
    EXPECT_NE(cu.find("float conv[16];"), std::string::npos) << cu;
    EXPECT_EQ(cu.find("conv_s1_x_loop_extent"), std::string::npos) << cu;
    EXPECT_EQ(cu.find("conv_s0_y_loop_extent"), std::string::npos) << cu;
    size_t loops = 0;
    for (size_t at = cu.find("for ("); at != std::string::npos; at = cu.find("for (", at + 1))
        loops++;
    EXPECT_EQ(loops, 4u) << cu;
    expect_cuda_assembles(cu, "conv2d_hand.cu");
}

// Applies `config` of the automatic GPU space to a fresh plain matmul at `shape` and lowers it
// into *f: C's zeros, then the kernel of the sums adding them to C, whose block is threads_x x
// threads_y.
void lower_matmul_sums_kernel(const apps::Operator &op, const std::vector<int64_t> &shape,
                              const SearchSpace &space, const Config &config, int threads_x,
                              int threads_y, LoweredFunc *f) {
    apps::OperatorInstance inst = op.make(shape);
    space.apply(inst, config);
    *f = inst.pipeline().lower();
    ASSERT_EQ(f->kernels.size(), 2u);
    EXPECT_EQ(f->kernels[1].threads[0], threads_x);
    EXPECT_EQ(f->kernels[1].threads[1], threads_y);
}

// A user's plain matmul (C(j, i) += A(k, i) * B(j, k), no stage of its own) in the automatic GPU
// space: its reduction moves into an intermediate of sums per block in shared memory, stepped 8
// values of k at a time, and at each step the block's threads stage A's and B's tiles in shared
// memory (in() wrappers) before they accumulate. The kernel's shared memory is exactly the
// three tiles; the OpenCL kernel runs (PoCL) and matches the reference at a shape the tiles do
// not divide; the CUDA source compiles and assembles.
TEST(GPUTune, AutoGPUSpaceStagesAUsersMatmulInputsInSharedMemoryPerStep) {
    const apps::Operator op = autotune_test::plain_matmul();
    const std::vector<int64_t> shape = {37, 53, 24}; // M, N, K
    SearchSpace space = auto_gpu_space(op, shape);
    nlohmann::json j = {{"block_x", 16},      {"block_y", 8},           {"out_x", 2},
                        {"out_y", 1},         {"unroll", true},         {"C_sums", "block"},
                        {"C_sums_r_step", 8}, {"C_sums_stage_A", true}, {"C_sums_stage_B", true},
                        {"interleave", false}};
    Config config = space.from_json(j);
    ASSERT_TRUE(space.valid(config)) << space.violated(config);
    // Staging needs a step; a step needs the sums per block. from_json names the constraint.
    auto broken = [](const SearchSpace &sp, const nlohmann::json &config) {
        return kiln::test::error_of([&] { sp.from_json(config); });
    };
    nlohmann::json no_step = j;
    no_step["C_sums_r_step"] = 1;
    EXPECT_NE(broken(space, no_step).find("'C_sums_stage_A needs C_sums_r_step > 1'"),
              std::string::npos)
        << broken(space, no_step);
    nlohmann::json in_place = j;
    in_place["C_sums"] = "inplace";
    EXPECT_NE(broken(space, in_place).find("'C_sums_r_step > 1 needs C_sums per block'"),
              std::string::npos)
        << broken(space, in_place);

    LoweredFunc f;
    ASSERT_NO_FATAL_FAILURE(lower_matmul_sums_kernel(op, shape, space, config, 16, 8, &f));
    const DeviceKernel &k = f.kernels[1];
    // Sums 32 x 8, A's step 8 (k) x 8 (rows), B's step 32 (columns) x 8 (k), four bytes each.
    EXPECT_EQ(k.shared_bytes, (32 * 8 + 8 * 8 + 32 * 8) * 4);
    const std::string cl = print_device_source(f.kernels, GpuApi::OpenCL);
    EXPECT_NE(cl.find("barrier("), std::string::npos) << cl;
    // The space's own account of shared memory is the kernel's: the config fits a device with
    // exactly that much, and not one with a byte less.
    for (int64_t less : {0, 1}) {
        GpuLimits limits;
        limits.shared_memory_bytes = k.shared_bytes - less;
        const std::string message = broken(auto_gpu_space(op, shape, limits), j);
        EXPECT_EQ(message.find("shared memory per block") != std::string::npos, less == 1)
            << message;
    }
    expect_cuda_assembles(print_device_source(f.kernels, GpuApi::CUDA), "plain_matmul.cu");

    expect_matches_on_opencl(op, shape, space, config, 1e-4);
}

// The same matmul with its sums in registers (C_sums = registers) and a 4 x 4 tile of them per
// thread: the block-level intermediate is lifted into a private array per thread, each thread
// keeping the 16 sums it alone touches, so shared memory holds only the staged tiles, the sums
// are never stored to shared or local memory, and the kernel still matches the reference on
// PoCL at a shape no tile divides.
TEST(GPUTune, AutoGPUSpaceKeepsAUsersMatmulSumsInRegisters) {
    const apps::Operator op = autotune_test::plain_matmul();
    const std::vector<int64_t> shape = {37, 53, 24}; // M, N, K
    SearchSpace space = auto_gpu_space(op, shape);
    Config config = space.from_json({{"block_x", 8},
                                     {"block_y", 4},
                                     {"out_x", 4},
                                     {"out_y", 4},
                                     {"unroll", true},
                                     {"C_sums", "registers"},
                                     {"C_sums_r_step", 8},
                                     {"C_sums_stage_A", true},
                                     {"C_sums_stage_B", true},
                                     {"interleave", false}});
    ASSERT_TRUE(space.valid(config)) << space.violated(config);
    LoweredFunc f;
    ASSERT_NO_FATAL_FAILURE(lower_matmul_sums_kernel(op, shape, space, config, 8, 4, &f));
    const DeviceKernel &k = f.kernels[1];
    // A's step: 8 values of k by the tile's 16 rows; B's: its 32 columns by 8 values of k.
    EXPECT_EQ(k.shared_bytes, (8 * 16 + 32 * 8) * 4);
    // Each thread's 16 sums: a private array indexed by constants only.
    const std::string cl = print_device_source(f.kernels, GpuApi::OpenCL);
    const std::string cu = print_device_source(f.kernels, GpuApi::CUDA);
    EXPECT_NE(cu.find("float C_sums[16];"), std::string::npos) << cu;
    EXPECT_EQ(cu.find("__shared__ float C_sums"), std::string::npos) << cu;
    EXPECT_NE(cl.find("float C_sums[16];"), std::string::npos) << cl;
    std::string why;
    if (nvrtc_available(&why)) {
        // NVRTC keeps the sums in registers: no local memory at all.
        std::string ptx = compile_cuda_to_ptx(cu, "sm_90", "registers.cu");
        EXPECT_EQ(ptx.find(".local"), std::string::npos) << ptx;
        EXPECT_NE(ptx.find("ld.shared.f32"), std::string::npos) << ptx;
    }
    expect_cuda_assembles(cu, "registers.cu");
    expect_matches_on_opencl(op, shape, space, config, 1e-4);
}

// Random points of the automatic GPU space with the sums in registers (any block shape, points
// per thread, step and staging) compute what the reference computes, on PoCL, at a shape none
// of their tiles divides: lifting a block's sums into each thread's registers never changes a
// result.
TEST(GPUTune, AutoGPUSpaceRegisterTilesMatchTheReferenceOnOpenCL) {
    REQUIRE_OPENCL();
    const apps::Operator op = autotune_test::plain_matmul();
    // M, N, K: no tile divides the first (guarded sums); the second is whole tiles for most
    // points (sums rounded up, interleaved points).
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{29, 45, 20}, std::vector<int64_t>{32, 64, 16}}) {
        SearchSpace space = auto_gpu_space(op, shape);
        std::mt19937_64 rng(5);
        int ran = 0;
        for (int tries = 0; tries < 4000 && ran < 6; tries++) {
            Config config = space.random(rng);
            nlohmann::json j = space.to_json(config);
            j["C_sums"] = "registers";
            try {
                config = space.from_json(j);
            } catch (const CompileError &) {
                continue; // breaks a constraint
            }
            SCOPED_TRACE(j.dump());
            expect_matches_on_opencl(op, shape, space, config, 1e-4);
            ran++;
        }
        EXPECT_EQ(ran, 6);
    }
}

// The built-in matmul's prod (a reduction its output reads at its own points) may stay in
// each thread's registers in the automatic GPU space, as the template keeps it: at a shape its
// tiles divide, with a thread's columns interleaved, every multiply-add runs unguarded, a
// warp's threads read neighbouring words of B's staged panel, the sums are a private array, and
// the OpenCL kernel matches the reference; a user's matmul's sums likewise.
TEST(GPUTune, AutoGPUSpaceKeepsAReductionTheOutputReadsInRegistersInterleaved) {
    const std::vector<int64_t> shape = {32, 64, 24}; // M, N, K; tiles of 32 x 8 divide it
    {
        const apps::Operator &op = apps::find_operator("matmul");
        SearchSpace space = auto_gpu_space(op, shape);
        Config config = space.from_json({{"block_x", 8},
                                         {"block_y", 4},
                                         {"out_x", 4},
                                         {"out_y", 2},
                                         {"unroll", true},
                                         {"interleave", true},
                                         {"prod_at", "registers"},
                                         {"prod_r_step", 8},
                                         {"prod_stage_A", false},
                                         {"prod_stage_B_panel", true},
                                         {"B_panel_at", "inline"}});
        ASSERT_TRUE(space.valid(config)) << space.violated(config);
        apps::OperatorInstance inst = op.make(shape);
        space.apply(inst, config);
        LoweredFunc f = inst.pipeline().lower();
        const std::string cu = print_device_source(f.kernels, GpuApi::CUDA);
        EXPECT_NE(cu.find("float prod[8];"), std::string::npos) << cu;
        EXPECT_EQ(cu.find("__shared__ float prod"), std::string::npos) << cu;
        // No guard of a sum's row or column: rounded up over the block's whole tile.
        EXPECT_EQ(cu.find("s1_j_loop_max"), std::string::npos) << cu;
        EXPECT_EQ(cu.find("s1_i_loop_max"), std::string::npos) << cu;
        // Thread x's first column is x itself; blocked, it would be x * 4.
        EXPECT_EQ(cu.find("prod_s1_j_t * "), std::string::npos) << cu;
        EXPECT_NE(cu.find("prod_s1_j_t"), std::string::npos) << cu;
        expect_cuda_assembles(cu, "auto_registers.cu");
        expect_matches_on_opencl(op, shape, space, config, op.tolerance);
        // Interleaved registers at a partial tile would need a variable count of unrolled
        // points: the space refuses the point before it is measured.
        SearchSpace odd = auto_gpu_space(autotune_test::plain_matmul(), {37, 53, 24});
        nlohmann::json j = {{"block_x", 8},
                            {"block_y", 4},
                            {"out_x", 4},
                            {"out_y", 2},
                            {"unroll", true},
                            {"interleave", true},
                            {"C_sums", "registers"},
                            {"C_sums_r_step", 8},
                            {"C_sums_stage_A", false},
                            {"C_sums_stage_B", true}};
        try {
            odd.from_json(j);
            ADD_FAILURE() << "no error for interleaved registers at partial tiles";
        } catch (const CompileError &e) {
            EXPECT_NE(std::string(e.what()).find(
                          "breaks the constraint 'interleave with registers needs whole tiles'"),
                      std::string::npos)
                << e.what();
        }
    }
    const apps::Operator op = autotune_test::plain_matmul();
    SearchSpace space = auto_gpu_space(op, shape);
    Config config = space.from_json({{"block_x", 8},
                                     {"block_y", 4},
                                     {"out_x", 4},
                                     {"out_y", 2},
                                     {"unroll", true},
                                     {"interleave", true},
                                     {"C_sums", "registers"},
                                     {"C_sums_r_step", 8},
                                     {"C_sums_stage_A", true},
                                     {"C_sums_stage_B", true}});
    apps::OperatorInstance inst = op.make(shape);
    space.apply(inst, config);
    const std::string cu = print_device_source(inst.pipeline().lower().kernels, GpuApi::CUDA);
    EXPECT_NE(cu.find("float C_sums[8];"), std::string::npos) << cu;
    EXPECT_EQ(cu.find("s1_j_loop_max"), std::string::npos) << cu;
    expect_cuda_assembles(cu, "auto_sums_registers.cu");
    expect_matches_on_opencl(op, shape, space, config, 1e-4);
}

// The automatic GPU space reaches the structure of the matmul template's hand schedule at 2048^3:
// one kernel of 16 x 16 threads, each keeping 8 x 8 interleaved sums in registers, B's panel of
// 16 values of k staged in shared memory (8 KiB), no test per multiply-add.
TEST(GPUTune, AutoGPUSpaceHasTheMatmulHandSchedulesKernel) {
    const apps::Operator &op = apps::find_operator("matmul");
    const std::vector<int64_t> shape = {2048, 2048, 2048};
    SearchSpace space = auto_gpu_space(op, shape);
    Config config = space.from_json({{"block_x", 16},
                                     {"block_y", 16},
                                     {"out_x", 8},
                                     {"out_y", 8},
                                     {"unroll", true},
                                     {"interleave", true},
                                     {"prod_at", "registers"},
                                     {"prod_r_step", 16},
                                     {"prod_stage_A", false},
                                     {"prod_stage_B_panel", true},
                                     {"B_panel_at", "inline"}});
    apps::OperatorInstance point = op.make(shape), hand = op.make(shape);
    space.apply(point, config);
    op.hand_schedule(hand, tune_target("host-cuda"));
    const LoweredFunc got = point.pipeline().lower(), want = hand.pipeline().lower();
    ASSERT_EQ(got.kernels.size(), 1u);
    ASSERT_EQ(want.kernels.size(), 1u);
    for (int d = 0; d < 3; d++)
        EXPECT_EQ(got.kernels[0].threads[d], want.kernels[0].threads[d]) << d;
    EXPECT_EQ(got.kernels[0].shared_bytes, want.kernels[0].shared_bytes);
    EXPECT_EQ(got.kernels[0].shared_bytes, 128 * 16 * 4);
    const std::string cu = print_device_source(got.kernels, GpuApi::CUDA);
    EXPECT_NE(cu.find("float prod[64];"), std::string::npos) << cu;
    EXPECT_EQ(cu.find("s1_j_loop_max"), std::string::npos) << cu;
    EXPECT_EQ(cu.find("s1_i_loop_max"), std::string::npos) << cu;
    expect_cuda_assembles(cu, "auto_hand.cu");
}

// A new run's random draws of the automatic GPU space lean to the hand schedules' register
// tiles: a reduction in registers, 4 or 8 points a thread, unrolled, interleaved; every value
// stays drawable. Drawn by the weights: registers in 3 / (3 + 2) of the draws of prod_at.
TEST(GPUTune, AutoGPUSpaceDrawsRegisterTilesMoreOften) {
    const apps::Operator &op = apps::find_operator("matmul");
    SearchSpace space = auto_gpu_space(op, {2048, 2048, 2048});
    auto weights = [&](const std::string &name) {
        return space.knobs()[size_t(space.knob_index(name))].weights;
    };
    const Knob &at = space.knobs()[size_t(space.knob_index("prod_at"))];
    ASSERT_EQ(at.values.back().get<std::string>(), "registers");
    EXPECT_EQ(weights("prod_at").back(), 3.0);
    EXPECT_EQ(weights("out_x"), (std::vector<double>{1.0, 1.0, 2.0, 2.0}));
    EXPECT_EQ(weights("unroll"), (std::vector<double>{1.0, 3.0}));
    EXPECT_EQ(weights("interleave"), (std::vector<double>{1.0, 2.0}));
    std::mt19937_64 rng(3);
    int registers = 0, eights = 0;
    const int draws = 4000;
    for (int i = 0; i < draws; i++) {
        nlohmann::json j = space.to_json(space.random(rng));
        registers += j["prod_at"] == "registers";
        eights += j["out_x"] == 8;
    }
    EXPECT_NEAR(double(registers) / draws, 3.0 / 5.0, 0.03);
    EXPECT_NEAR(double(eights) / draws, 2.0 / 6.0, 0.03);
    // A user's matmul's sums: registers 3 times as likely as each other place.
    SearchSpace plain = auto_gpu_space(autotune_test::plain_matmul(), {64, 64, 64});
    EXPECT_EQ(plain.knobs()[size_t(plain.knob_index("C_sums"))].weights,
              (std::vector<double>{1.0, 1.0, 3.0}));
}

// A short real tuning job of matmul on OpenCL (its buffers A, B and C exercise the device
// printer's renaming of all-capitals names).
TEST(GPUTune, Matmul64OnOpenCL) {
    REQUIRE_OPENCL();
    TempDir dir;
    TuneOptions o = quick_gpu("matmul", {64, 64, 64}, dir / "k.db");
    std::ostringstream out, err;
    TuneResult r = tune(o, out, err);
    ASSERT_TRUE(r.best_ms) << out.str() << err.str();
    EXPECT_EQ(statuses(o.db_path).count("ok"), 1u) << out.str() << err.str();
}

} // namespace

TEST(GPUTune, TheCoalescingFeatureSeesWhetherNeighbouringThreadsReadNeighbouringElements) {
    // out(x, y) = 2 in(x, y), with threads along x (every load and store coalesced), then with
    // threads along y (neighbouring threads a row apart: none), then both dimensions in x.
    auto fraction = [](bool threads_along_x) {
        apps::OperatorInstance inst;
        ImageParam in(Float(32), 2, "in");
        Func out("out");
        Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
        out(x, y) = in(x, y) * 2.0f;
        if (threads_along_x)
            out.gpu_tile(x, y, xo, yo, xi, yi, 32, 4);
        else
            out.gpu_tile(y, x, yo, xo, yi, xi, 32, 4);
        inst.inputs = {in};
        inst.input_data = {BufferBase(Float(32), {64, 64}, "in")};
        inst.output = out;
        inst.output_extents = {64, 64};
        std::vector<float> f = loop_nest_features(inst.pipeline().lower(), inst);
        const std::vector<std::string> &names = feature_names();
        return f[size_t(std::find(names.begin(), names.end(), "gpu_coalesced_fraction") -
                        names.begin())];
    };
    EXPECT_EQ(fraction(true), 1.0f);
    EXPECT_EQ(fraction(false), 0.0f);
    // The matmul template: with interleave (the default) neighbouring threads copy
    // neighbouring words of B's panel and store neighbouring words of C, and read the same value
    // of A (a step of 0): all coalesced; without it they step by a thread's 8 columns.
    const apps::Operator &op = apps::find_operator("matmul");
    auto matmul_fraction = [&](const std::string &interleave) {
        apps::OperatorInstance mm = op.make({64, 64, 64});
        apps::schedule_from_generator(op.generator, op.generator_params, mm,
                                      tune_target("host-opencl"), {{"interleave", interleave}});
        std::vector<float> f = loop_nest_features(mm.pipeline().lower(), mm);
        const std::vector<std::string> &names = feature_names();
        return f[size_t(std::find(names.begin(), names.end(), "gpu_coalesced_fraction") -
                        names.begin())];
    };
    EXPECT_EQ(matmul_fraction("1"), 1.0f);
    const float blocked = matmul_fraction("0");
    EXPECT_GT(blocked, 0.0f);
    EXPECT_LT(blocked, 1.0f);
}

TEST(GPUTune, TheCostModelsFeaturesSeeInsideTheKernels) {
    // The features of a GPU schedule count what its kernels do (each body once per thread of
    // every block) and describe the launch; a CPU schedule's GPU features are zero. Lowering needs
    // no device.
    const apps::Operator &op = apps::find_operator("matmul");
    std::vector<int64_t> shape = {64, 96, 32};
    SearchSpace space = space_for(op, shape, "template", tune_target("host-cuda"));
    Config config = space.from_json({{"tile_j", 32},
                                     {"tile_i", 16},
                                     {"out_j", 4},
                                     {"out_i", 2},
                                     {"k_step", 8},
                                     {"b_shared", 1},
                                     {"a_shared", 1},
                                     {"vec", 1},
                                     {"prod_registers", 0},
                                     {"interleave", 0}});
    ASSERT_TRUE(space.valid(config));
    apps::OperatorInstance inst = op.make(shape);
    space.apply(inst, config);
    LoweredFunc lowered = inst.pipeline().lower();
    ASSERT_FALSE(lowered.kernels.empty());
    const DeviceKernel &k = lowered.kernels[0];
    std::vector<float> f = loop_nest_features(lowered, inst);
    auto at = [&](const std::string &name) {
        const std::vector<std::string> &names = feature_names();
        return f[size_t(std::find(names.begin(), names.end(), name) - names.begin())];
    };
    ASSERT_EQ(f.size(), feature_names().size());
    EXPECT_EQ(at("gpu_launches"), float(lowered.kernels.size()));
    EXPECT_EQ(at("gpu_threads_per_block"), float(k.threads[0] * k.threads[1] * k.threads[2]));
    EXPECT_EQ(at("gpu_threads_per_block"), 8.0f * 8.0f); // 32 / 4 by 16 / 2
    EXPECT_GT(at("log2_gpu_blocks"), 0.0f);
    EXPECT_GT(at("log2_gpu_shared_bytes"), 0.0f); // B is staged in shared memory
    EXPECT_GT(at("gpu_occupancy"), 0.0f);
    EXPECT_LE(at("gpu_occupancy"), 1.0f);
    // 2 M N K flops (an fma counts two) happen inside the kernel.
    const float flops = std::log2(2.0f * 64 * 96 * 32);
    EXPECT_GE(at("log2_flops"), flops - 1) << "the kernel's work is not counted";

    apps::OperatorInstance cpu = op.make(shape);
    op.hand_schedule(cpu, Target::host());
    std::vector<float> g = loop_nest_features(cpu.pipeline().lower(), cpu);
    for (const char *name :
         {"gpu_launches", "log2_gpu_blocks", "gpu_threads_per_block", "gpu_warps_per_block",
          "log2_gpu_shared_bytes", "gpu_occupancy", "gpu_coalesced_fraction"}) {
        const std::vector<std::string> &names = feature_names();
        EXPECT_EQ(g[size_t(std::find(names.begin(), names.end(), name) - names.begin())], 0.0f)
            << name;
    }
}
