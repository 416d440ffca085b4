#include "schedule/Lower.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>

#include "lang/IREquality.h"
#include "lang/IRPrinter.h"
#include "lang/Simplify.h"
#include "schedule/AddBufferChecks.h"
#include "schedule/BoundsInference.h"
#include "schedule/CSE.h"
#include "schedule/HoistLoopInvariants.h"
#include "schedule/InjectPrefetch.h"
#include "schedule/OffloadGPULoops.h"
#include "schedule/PartitionLoops.h"
#include "schedule/ScheduleFunctions.h"
#include "schedule/StorageFlattening.h"
#include "schedule/Tensorize.h"
#include "schedule/UnrollLoops.h"
#include "schedule/UnswitchLoops.h"
#include "schedule/VectorizeLoops.h"
#include "schedule/VerifyLowered.h"

namespace kiln {

namespace {

int env_int(const char *name) {
    const char *v = std::getenv(name);
    return v ? std::atoi(v) : 0;
}

/// Runs passes in order, printing and timing them on request.
class PassLog {
public:
    PassLog(const LowerOptions &o, std::ostream *text)
        : print(o.print_passes || env_int("KILN_DEBUG") >= 2),
          time(o.time_passes || env_int("KILN_TIME_PASSES")), text(text) {}
    ~PassLog() {
        if (!time) return;
        std::fprintf(stderr, "%-32s %10s\n", "pass", "ms");
        for (auto &[name, ms] : times)
            std::fprintf(stderr, "%-32s %10.3f\n", name.c_str(), ms);
    }

    /// Prints extra text (the kernels after offloading) where the pass output goes.
    void note(const std::string &extra) {
        if (print) std::cerr << extra;
        if (text) *text << extra;
    }

    Stmt run(const char *name, const Stmt &before, const std::function<Stmt(const Stmt &)> &pass) {
        auto start = std::chrono::steady_clock::now();
        Stmt after = pass(before);
        times.emplace_back(name, std::chrono::duration<double, std::milli>(
                                     std::chrono::steady_clock::now() - start)
                                     .count());
        if (print || text) {
            std::ostringstream s;
            s << "== after " << name << "\n";
            if (before.defined() && equal(before, after)) {
                s << "(unchanged)\n";
            } else {
                s << after;
            }
            if (print) std::cerr << s.str();
            if (text) *text << s.str();
        }
        return after;
    }

private:
    bool print, time;
    std::ostream *text;
    std::vector<std::pair<std::string, double>> times;
};

LoweredFunc lower_impl(const std::vector<Func> &outputs, const std::string &name,
                       const LowerOptions &options, std::ostream *text) {
    std::vector<FunctionPtr> funcs;
    for (const Func &f : outputs)
        funcs.push_back(f.function());
    PipelineEnv env = make_pipeline_env(funcs);
    PassLog log(options, text);
    std::vector<LoweredArgument> args;

    Stmt s;
    s = log.run("schedule functions", s, [&](const Stmt &) {
        Stmt loops = schedule_functions(env);
        check_gpu_loops(loops);
        return loops;
    });
    s = log.run("bounds inference", s, [&](const Stmt &x) { return bounds_inference(x, env); });
    s = log.run("add buffer checks", s, [&](const Stmt &x) {
        args = collect_arguments(x, env);
        return strip_fuse_clamps(add_buffer_checks(x, env, args), env);
    });
    s = log.run("inject prefetches", s, [&](const Stmt &x) { return inject_prefetches(x, env); });
    s = log.run("storage flattening", s, [&](const Stmt &x) { return storage_flattening(x, env); });
    s = log.run("simplify", s, [&](const Stmt &x) { return simplify(x); });
    s = log.run("tensorize", s, [&](const Stmt &x) { return tensorize_loops(x); });
    s = log.run("trim no-ops", s, [&](const Stmt &x) { return trim_no_ops(x); });
    s = log.run("unroll loops", s, [&](const Stmt &x) { return unroll_loops(x); });
    s = log.run("vectorize loops", s, [&](const Stmt &x) { return vectorize_loops(x); });
    s = log.run("partition loops", s, [&](const Stmt &x) { return partition_loops(x); });
    s = log.run("simplify", s, [&](const Stmt &x) { return simplify(x); });
    s = log.run("common subexpressions", s, [&](const Stmt &x) { return cse(x); });
    s = log.run("hoist loop invariants", s,
                [&](const Stmt &x) { return hoist_loop_invariants(x); });
    s = log.run("unswitch loops", s, [&](const Stmt &x) { return unswitch_loops(x); });
    s = log.run("final simplify", s, [&](const Stmt &x) { return simplify(x); });
    std::vector<DeviceKernel> kernels;
    s = log.run("offload GPU loops", s,
                [&](const Stmt &x) { return offload_gpu_loops(x, &kernels); });
    for (const DeviceKernel &k : kernels)
        log.note(describe_kernel(k));
    // Parallel loops become closures run by kiln_parallel_for in the code generator
    // (codegen/CodeGenLLVM.cpp), which knows the closure layout.

    LoweredFunc result;
    result.name = name;
    result.args = args;
    result.body = s;
    result.kernels = std::move(kernels);
    for (const auto &[fname, schedule] : env.schedules) {
        if (!schedule.nontemporal) continue;
        const FunctionContents &f = *env.funcs.at(fname);
        for (size_t i = 0; i < f.output_types.size(); i++)
            result.nontemporal_stores.insert(buffer_name(f, int(i)));
    }
#ifndef NDEBUG
    verify_lowered(result);
#endif
    return result;
}

} // namespace

LoweredFunc lower(const std::vector<Func> &outputs, const std::string &name,
                  const LowerOptions &options) {
    return lower_impl(outputs, name, options, nullptr);
}

std::string lower_to_text(const std::vector<Func> &outputs, const std::string &name) {
    std::ostringstream s;
    lower_impl(outputs, name, {}, &s);
    return s.str();
}

} // namespace kiln
