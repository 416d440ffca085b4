// Per-Func profiling (Target::profile, "host-profile"): a profiled pipeline computes what the
// unprofiled one computes, and the runtime's table gives each Func its own thread time, counts
// the calls, accounts for the calling thread's whole run, and names every Func in its report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln.h"
#include "runtime/kiln_runtime.h"
#include "tests/pipeline/GPUTestUtil.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

/// Three Funcs: `heavy` (a 64-term sum per element, computed at root, its rows in parallel),
/// `light` (one add per element, computed at root) and the output `name` (one multiply).
Func three_stages(const std::string &name, const Var &x, const Var &y) {
    Func heavy(name + "_heavy"), light(name + "_light"), out(name);
    RDom r(0, 64, "r");
    heavy(x, y) = 0.f;
    heavy(x, y) += sin(cast<float>(x + r) * 0.01f) * cast<float>(y + 1);
    light(x, y) = heavy(x, y) + 1.f;
    out(x, y) = light(x, y) * 2.f;
    heavy.compute_root().parallel(y);
    light.compute_root();
    return out;
}

Target profiling() {
    Target t = Target::host();
    t.profile = true;
    return t;
}

TEST(Profile, AProfiledPipelineComputesWhatTheUnprofiledOneComputes) {
    Var x("x"), y("y");
    Func out = three_stages("profile_same", x, y);
    Buffer<float> want(Pipeline(out).realize({96, 40}, Target::host()));
    Buffer<float> got(Pipeline(out).realize({96, 40}, profiling()));
    for (int j = 0; j < 40; j++)
        for (int i = 0; i < 96; i++)
            ASSERT_EQ(want(i, j), got(i, j)) << "at " << i << ", " << j;
}

TEST(Profile, EachFuncGetsItsOwnThreadTimeAndEveryCallIsCounted) {
    Var x("x"), y("y");
    Func out = three_stages("profile_funcs", x, y);
    CompiledPipeline c = Pipeline(out).compile_jit(profiling());
    EXPECT_THAT(c.llvm_ir(), HasSubstr("kiln_profiler_switch"));
    EXPECT_EQ(Pipeline(out).compile_jit(Target::host()).llvm_ir().find("kiln_profiler_switch"),
              std::string::npos);
    Buffer<float> result({256, 64}, "profile_funcs");
    const char *names[4] = {"profile_funcs_heavy", "profile_funcs_light", "profile_funcs",
                            "(overhead)"};
    uint64_t calls[4] = {}, ns[4] = {};
    double wall_ns = 0;
    // The times are wall time while a thread holds a Func: a thread preempted by another
    // process (ctest runs two at once, under the sanitizers too) inflates the Func it holds, and
    // a preemption outside the calls inflates only the wall time. So the time relations get a
    // few tries, each on fresh counters; a profiler that misattributes fails every one.
    auto relations_hold = [&] {
        return ns[0] > 4 * ns[1] && ns[0] > 4 * ns[2] && ns[1] > 0 &&
               double(ns[0] + ns[1] + ns[2] + ns[3]) >= 0.9 * wall_ns;
    };
    for (int attempt = 0; attempt < 5; attempt++) {
        kiln_profiler_reset();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < 3; i++)
            c.realize_into({result});
        wall_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                      .count();
        for (int k = 0; k < 4; k++) {
            ASSERT_EQ(kiln_profiler_func_query("profile_funcs", names[k], &calls[k], &ns[k]), 1)
                << names[k];
            EXPECT_EQ(calls[k], 3u) << names[k];
        }
        if (relations_hold()) break;
    }
    // heavy does 64 sines per element where light does one add, and the output one multiply.
    EXPECT_GT(ns[0], 4 * ns[1]);
    EXPECT_GT(ns[0], 4 * ns[2]);
    EXPECT_GT(ns[1], 0u);
    // The calling thread always holds some Func from the entry to the exit, so the thread time
    // covers the calls' wall time (workers add theirs on top).
    EXPECT_GE(double(ns[0] + ns[1] + ns[2] + ns[3]), 0.9 * wall_ns);
    EXPECT_EQ(kiln_profiler_func_query("profile_funcs", "no_such_func", &calls[0], &ns[0]), 0);
    EXPECT_EQ(calls[0], 0u);
    EXPECT_EQ(ns[0], 0u);
}

TEST(Profile, TheReportNamesEveryFuncLargestFirst) {
    Var x("x"), y("y");
    Func out = three_stages("profile_report", x, y);
    CompiledPipeline c = Pipeline(out).compile_jit(profiling());
    Buffer<float> result({128, 32}, "profile_report");
    kiln_profiler_reset();
    c.realize_into({result});
    c.realize_into({result});
    FILE *f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    kiln_profiler_report(f);
    std::rewind(f);
    std::string text;
    char buf[512];
    while (std::fgets(buf, sizeof buf, f))
        text += buf;
    std::fclose(f);
    EXPECT_THAT(text, HasSubstr("kiln profile of profile_report: 2 calls, "));
    const size_t heavy = text.find("  profile_report_heavy "),
                 light = text.find("  profile_report_light "),
                 overhead = text.find("  (overhead) ");
    EXPECT_NE(heavy, std::string::npos) << text;
    EXPECT_NE(light, std::string::npos) << text;
    EXPECT_NE(overhead, std::string::npos) << text;
    EXPECT_LT(heavy, light) << text; // the largest total first
}

// A GPU pipeline's host code is profiled too: a Func computed on the device counts the host's
// time in its launch (here on OpenCL, PoCL on this machine); its kernel has no switches.
TEST(Profile, AGPUPipelineIsProfiledOnTheHost) {
    KILN_REQUIRE_OPENCL();
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    Func pre("profile_gpu_pre"), out("profile_gpu");
    pre(x, y) = cast<float>(x + 2 * y);
    out(x, y) = pre(x, y) * 0.5f + 1.f;
    pre.compute_root();
    out.gpu_tile(x, y, xo, yo, xi, yi, 8, 8);
    Target t = opencl_target();
    t.profile = true;
    CompiledPipeline c = Pipeline(out).compile_jit(t);
    EXPECT_EQ(c.device_source().find("profiler"), std::string::npos);
    Buffer<float> result({40, 24}, "profile_gpu");
    kiln_profiler_reset();
    c.realize_into({result});
    result.copy_to_host();
    for (int j = 0; j < 24; j++)
        for (int i = 0; i < 40; i++)
            ASSERT_EQ(result(i, j), float(i + 2 * j) * 0.5f + 1.f) << i << ", " << j;
    uint64_t calls = 0, ns = 0;
    EXPECT_EQ(kiln_profiler_func_query("profile_gpu", "profile_gpu", &calls, &ns), 1);
    EXPECT_EQ(calls, 1u);
    EXPECT_GT(ns, 0u);
    EXPECT_EQ(kiln_profiler_func_query("profile_gpu", "profile_gpu_pre", &calls, &ns), 1);
}

TEST(Profile, TheTargetSaysItProfiles) {
    Target t = Target::parse("host-profile");
    EXPECT_TRUE(t.profile);
    EXPECT_THAT(t.to_string(), HasSubstr(";profile=1"));
    EXPECT_EQ(Target::from_string(t.to_string()), t);
    EXPECT_EQ(t.with_gpu(GpuApi::None), Target::parse("host;profile=1"));
    EXPECT_FALSE(Target::host().profile);
    EXPECT_EQ(Target::host().to_string().find("profile"), std::string::npos);
    try {
        Target::from_string("profile=yes");
        ADD_FAILURE() << "profile=yes was accepted";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "target 'profile=yes': profile must be 0 or 1, got 'yes'");
    }
}

} // namespace
} // namespace kiln
