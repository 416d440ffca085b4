// kiln_bench_compile_time: how long the JIT takes to compile the hand-scheduled operators, phase
// by phase. Not a test and not part of CI: a measuring tool for the compile pipeline
// (codegen/LLVMModule.cpp, codegen/JIT.cpp).
//
//   kiln_bench_compile_time [repetitions=15] [operator ...]   (default operators: blur matmul)
//
// For each operator and repetition it builds a fresh instance with its hand schedule, then times
//   lower        Pipeline::lower (all lowering passes)
//   codegen+opt  compile_to_llvm_module: LLVM IR generation and the optimization pipeline
//   opt          the optimization pipeline alone (included in codegen+opt)
//   machine code LLVMModule::object_code: instruction selection to an object file
//   jit total    a JITModule from the lowered code: codegen, opt, machine code, linking, lookup
//   compile_jit  Pipeline::compile_jit with the JIT cache cleared (lower + jit total), as a
//                user sees it
//   run          one run of the compiled code on the operator's default shape (its speed, to
//                weigh a cheaper optimization pipeline against slower code)
// and prints the median of each, in milliseconds of this thread's CPU time and of wall time.
// Wall time exceeds CPU time when other processes compete for the cores.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "codegen/CodeGenLLVM.h"
#include "codegen/JIT.h"
#include "codegen/LLVMModuleImpl.h"
#include "driver/Pipeline.h"

namespace {

using namespace kiln;

double thread_cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

double wall_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct Sample {
    double cpu = 0, wall = 0;
};

/// Runs f once and returns its CPU and wall time.
Sample measure(const std::function<void()> &f) {
    double c = thread_cpu_ms(), w = wall_ms();
    f();
    return {thread_cpu_ms() - c, wall_ms() - w};
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

} // namespace

int main(int argc, char **argv) {
    int repetitions = argc > 1 ? std::atoi(argv[1]) : 15;
    if (repetitions < 1) {
        std::fprintf(stderr, "usage: %s [repetitions=15] [operator ...]\n", argv[0]);
        return 2;
    }
    std::vector<std::string> names;
    for (int i = 2; i < argc; i++)
        names.push_back(argv[i]);
    if (names.empty()) names = {"blur", "matmul"};

    Target target = Target::host();
    const char *phases[] = {"lower",     "codegen+opt", "opt", "machine code",
                            "jit total", "compile_jit", "run"};
    std::printf("kiln JIT compile time, median of %d, ms (thread CPU / wall), target %s\n",
                repetitions, target.to_string().c_str());
    std::printf("%-10s", "operator");
    for (const char *p : phases)
        std::printf(" %17s", p);
    std::printf("\n");
    try {
        for (const std::string &name : names) {
            const apps::Operator &op = apps::find_operator(name);
            std::map<std::string, std::vector<Sample>> samples;
            // One untimed round first: LLVM's one-time initialization is not a per-compile cost.
            for (int rep = -1; rep < repetitions; rep++) {
                apps::OperatorInstance inst = op.make(op.default_shape);
                op.hand_schedule(inst, target);
                Pipeline p = inst.pipeline();
                LoweredFunc lowered;
                Sample lower = measure([&] { lowered = p.lower(); });
                double opt_before = optimize_cpu_ms_total();
                double opt_wall_before = optimize_wall_ms_total();
                std::unique_ptr<LLVMModule> module;
                Sample codegen = measure([&] {
                    module = std::make_unique<LLVMModule>(compile_to_llvm_module(lowered, target));
                });
                Sample opt{optimize_cpu_ms_total() - opt_before,
                           optimize_wall_ms_total() - opt_wall_before};
                Sample machine = measure([&] { (void)module->object_code(); });
                Sample jit = measure([&] { JITModule m(lowered, target); });
                clear_jit_cache();
                CompiledPipeline compiled;
                Sample user = measure([&] { compiled = p.compile_jit(target); });
                // The compiled code's speed, to see what a cheaper pipeline costs at run time.
                inst.bind_inputs();
                BufferBase out = inst.make_output();
                Sample run = measure([&] { compiled.realize_into({out}); });
                if (rep < 0) continue;
                samples["run"].push_back(run);
                samples["lower"].push_back(lower);
                samples["codegen+opt"].push_back(codegen);
                samples["opt"].push_back(opt);
                samples["machine code"].push_back(machine);
                samples["jit total"].push_back(jit);
                samples["compile_jit"].push_back(user);
            }
            std::printf("%-10s", name.c_str());
            for (const char *phase : phases) {
                std::vector<double> cpu, wall;
                for (const Sample &s : samples[phase]) {
                    cpu.push_back(s.cpu);
                    wall.push_back(s.wall);
                }
                char cell[64];
                std::snprintf(cell, sizeof cell, "%.1f / %.1f", median(cpu), median(wall));
                std::printf(" %17s", cell);
            }
            std::printf("\n");
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
