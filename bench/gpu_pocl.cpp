// GPU schedules on OpenCL beside kiln's CPU hand schedules, for matmul and blur of apps/. Here
// OpenCL is PoCL, which runs kernels on this CPU: a sanity figure for the GPU path (it runs, and
// what it costs against the CPU schedule on the same cores), not a GPU measurement.
//
//   kiln_bench_gpu_pocl [rounds [matmul|blur]]   (scripts/bench.sh --gpu-pocl runs it)
//
// Each implementation is checked against the operator's reference before it is timed; times are
// medians over `rounds` runs (default 5) after a warm-up run, interleaved CPU / GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "apps/Operator.h"
#include "kiln.h"
#include "runtime/kiln_runtime.h"

using namespace kiln;

namespace {

/// A 32 x 32 output tile per block, 8 x 8 threads of 4 x 4 outputs, the K loop in steps of 16
/// with the step's 16 x 32 panel of B staged in shared memory, one element per thread (the block
/// has 32 x 16 threads; the others wait at the barrier while the 8 x 8 compute).
void gpu_matmul(apps::OperatorInstance &inst) {
    Func C = inst.output, B_panel = inst.stages[0], prod = inst.stages[1];
    Var j("j"), i("i"), kv("kv"), jo("jo"), io("io"), ji("ji"), ii("ii"), jt("jt"), it("it"),
        jr("jr"), ir("ir");
    RVar k("k.x"), ko("ko"), ki("ki");
    C.tile(j, i, jo, io, ji, ii, 32, 32)
        .split(ji, jt, jr, 4)
        .split(ii, it, ir, 4)
        .reorder(jr, ir, jt, it, jo, io)
        .gpu_blocks(jo, io)
        .gpu_threads(jt, it);
    prod.compute_at(C, jo).store_in(MemoryType::GPUShared);
    prod.split(j, jt, jr, 4).split(i, it, ir, 4).reorder(jr, ir, jt, it).gpu_threads(jt, it);
    prod.update(0)
        .split(k, ko, ki, 16)
        .split(j, jt, jr, 4)
        .split(i, it, ir, 4)
        .reorder(ki, jr, ir, jt, it, ko)
        .gpu_threads(jt, it);
    B_panel.compute_at(prod, ko).store_in(MemoryType::GPUShared).gpu_threads(j, kv);
}

/// 64 x 8 output tiles per block; blur_x's 64 x 10 tile in shared memory.
void gpu_blur(apps::OperatorInstance &inst) {
    Func blur_y = inst.output, blur_x = inst.stages[0];
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    blur_y.gpu_tile(x, y, xo, yo, xi, yi, 64, 8);
    blur_x.compute_at(blur_y, xo).store_in(MemoryType::GPUShared).gpu_threads(x, y);
}

double seconds_of(const std::function<void()> &f) {
    auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Case {
    const char *op;
    std::vector<int64_t> shape;
    void (*gpu_schedule)(apps::OperatorInstance &);
};

} // namespace

int main(int argc, char **argv) {
    int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    std::string only = argc > 2 ? argv[2] : "";
    Target cpu = Target::host(), gpu = Target::host().with_gpu(GpuApi::OpenCL);
    const kiln_device_interface_t *cl = kiln_device_interface(int(GpuApi::OpenCL));
    int64_t threads = 0, shared = 0;
    if (!cl || cl->device_limits(&threads, &shared) != 0) {
        std::printf("no OpenCL device: %s\n", kiln_last_error_message());
        return 1;
    }
    std::printf("OpenCL device: %lld threads per block, %lld bytes of local memory; %d rounds\n",
                (long long)threads, (long long)shared, rounds);
    std::printf(
        "| workload | kiln CPU schedule | GPU schedule on OpenCL (PoCL) | GPU / CPU time |\n");
    std::printf("|---|---:|---:|---:|\n");
    for (const Case &c :
         {Case{"matmul", {1024, 1024, 1024}, gpu_matmul}, Case{"blur", {4098, 4098}, gpu_blur}}) {
        if (!only.empty() && only != c.op) continue;
        const apps::Operator &op = apps::find_operator(c.op);
        apps::OperatorInstance on_cpu = op.make(c.shape), on_gpu = op.make(c.shape);
        op.hand_schedule(on_cpu, cpu);
        c.gpu_schedule(on_gpu);
        BufferBase want = op.reference(on_cpu);
        CompiledPipeline cpu_pipeline = on_cpu.pipeline().compile_jit(cpu);
        CompiledPipeline gpu_pipeline = on_gpu.pipeline().compile_jit(gpu);
        on_cpu.bind_inputs();
        on_gpu.bind_inputs();
        BufferBase cpu_out = on_cpu.make_output(), gpu_out = on_gpu.make_output();
        for (auto [p, out, name] : {std::tuple{&cpu_pipeline, &cpu_out, "cpu"},
                                    std::tuple{&gpu_pipeline, &gpu_out, "gpu"}}) {
            p->realize_into({*out}); // warm-up: PoCL builds the kernel here
            double err = apps::max_relative_error(*out, want);
            if (err > op.tolerance) {
                std::printf("%s %s: wrong result (max relative error %g)\n", c.op, name, err);
                return 1;
            }
        }
        std::vector<double> cpu_s, gpu_s;
        for (int r = 0; r < rounds; r++) {
            on_cpu.bind_inputs();
            cpu_s.push_back(seconds_of([&] { cpu_pipeline.realize_into({cpu_out}); }));
            on_gpu.bind_inputs();
            gpu_s.push_back(seconds_of([&] { gpu_pipeline.realize_into({gpu_out}); }));
        }
        double tc = median(cpu_s) * 1e3, tg = median(gpu_s) * 1e3;
        std::string shape;
        for (int64_t s : c.shape)
            shape += (shape.empty() ? "" : "x") + std::to_string(s);
        std::printf("| %s %s | %.2f ms | %.2f ms | %.1fx |\n", c.op, shape.c_str(), tc, tg,
                    tg / tc);
        std::fflush(stdout);
    }
    return 0;
}
