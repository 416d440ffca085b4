// kiln's CUDA schedules beside NVIDIA's libraries on the same GPU, in the same process:
//   matmul  (fp32)  against cublasSgemm with the default math mode (no TF32 tensor cores)
//   conv2d  (fp32)  against cuDNN's fastest forward algorithm with CUDNN_FMA_MATH (no TF32)
//   softmax (fp32)  against the device's copy bandwidth (a device-to-device cudaMemcpy)
//
//   kiln_bench_gpu_cuda [--rounds N] [--only matmul|conv2d|softmax] [--quick]
//                       [--trace OP=schedule.json ...] [--knobs OP:knob=value,knob=value ...]
//                       [--auto-config OP=JSON ...]
//   (scripts/bench.sh --gpu and scripts/gpu-check.sh run it)
//
// kiln's column is the operator's GPU hand schedule (apps/, hand_schedule with a host-cuda
// target); --trace adds a column for a tuned schedule (a ScheduleTrace as JSON, e.g. from
// `kiln db best OP --trace`); --knobs adds a column for the operator's template at those knob
// values (the others at their hand values), e.g. --knobs matmul:tile_j=128,out_j=8;
// --auto-config a column for a point of the automatic GPU space (autotune/AutoGPUSpace.cpp, every
// knob named, as `kiln db best` prints a config), at each shape of the operator. Every kiln
// output is checked against the library's output (or the CPU reference for softmax) before anything
// is timed. Times are medians over rounds, each round the mean of `reps` back-to-back launches
// timed with CUDA events, implementations interleaved. Without a CUDA device it prints why and
// exits with status 2.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "autotune/AutoSpace.h"
#include "kiln.h"
#include "runtime/kiln_runtime.h"
#include "schedule/ScheduleTrace.h"

using namespace kiln;

namespace {

[[noreturn]] void fail(const std::string &what) {
    std::fprintf(stderr, "kiln_bench_gpu_cuda: %s\n", what.c_str());
    std::exit(1);
}

void check_cuda(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}
void check_cublas(cublasStatus_t s, const char *what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        fail(std::string(what) + ": cuBLAS status " + std::to_string(s));
}
void check_cudnn(cudnnStatus_t s, const char *what) {
    if (s != CUDNN_STATUS_SUCCESS) fail(std::string(what) + ": " + cudnnGetErrorString(s));
}
void check_kiln(int code, const char *what) {
    if (code != kiln_success) fail(std::string(what) + ": " + kiln_last_error_message());
}

/// float32 device memory holding a copy of a host buffer (or zeros).
struct DeviceArray {
    float *p = nullptr;
    size_t n = 0;
    explicit DeviceArray(size_t count) : n(count) {
        check_cuda(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc");
        check_cuda(cudaMemset(p, 0, n * sizeof(float)), "cudaMemset");
    }
    explicit DeviceArray(const BufferBase &b) : DeviceArray(size_t(b.number_of_elements())) {
        check_cuda(cudaMemcpy(p, b.raw_data(), n * sizeof(float), cudaMemcpyHostToDevice),
                   "cudaMemcpy to the device");
    }
    DeviceArray(const DeviceArray &) = delete;
    DeviceArray &operator=(const DeviceArray &) = delete;
    ~DeviceArray() { cudaFree(p); }
    /// The contents in a fresh buffer shaped like `like`.
    BufferBase to_host(const BufferBase &like) const {
        std::vector<int> extents;
        for (int d = 0; d < like.dimensions(); d++)
            extents.push_back(like.dim(d).extent);
        BufferBase out(like.type(), extents, "device_copy");
        check_cuda(cudaMemcpy(out.raw_data(), p, n * sizeof(float), cudaMemcpyDeviceToHost),
                   "cudaMemcpy to the host");
        return out;
    }
};

/// Mean milliseconds of `reps` calls of f between two events on `stream`.
double event_ms(const std::function<void()> &f, int reps, cudaStream_t stream = nullptr) {
    cudaEvent_t start, stop;
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int r = 0; r < reps; r++)
        f();
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return double(ms) / reps;
}

/// Mean milliseconds of `reps` runs of a compiled kiln pipeline, timed with the runtime's events
/// on kiln's stream.
double kiln_ms(const CompiledPipeline &p, const BufferBase &out, int reps) {
    check_kiln(kiln_cuda_timer_start(), "kiln_cuda_timer_start");
    for (int r = 0; r < reps; r++)
        check_kiln(p.run({out}), "running the kiln pipeline");
    float ms = 0;
    check_kiln(kiln_cuda_timer_stop(&ms), "kiln_cuda_timer_stop");
    return double(ms) / reps;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

std::string read_text(const std::string &path) {
    std::ifstream in(path);
    if (!in) fail("cannot read " + path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// One kiln column: a schedule applied to a fresh instance, compiled for CUDA, inputs on the
/// device, checked once.
struct KilnCase {
    std::string label;
    apps::OperatorInstance inst;
    CompiledPipeline pipeline;
    BufferBase out;
};

KilnCase make_kiln_case(const apps::Operator &op, const std::vector<int64_t> &shape,
                        const std::string &label, const std::string &trace_json,
                        const std::map<std::string, std::string> &knobs = {},
                        const std::string &auto_config = "") {
    Target cuda = Target::parse("host-cuda");
    apps::OperatorInstance inst = op.make(shape);
    if (!auto_config.empty()) {
        autotune::SearchSpace space = autotune::auto_gpu_space(op, shape);
        space.apply(inst, space.from_json(nlohmann::json::parse(auto_config)));
    } else if (!knobs.empty()) {
        apps::check_knob_names(op, shape, cuda, knobs);
        apps::schedule_from_generator(op.generator, op.generator_params, inst, cuda, knobs);
    } else if (trace_json.empty()) {
        op.hand_schedule(inst, cuda);
    } else {
        ScheduleTrace::parse(trace_json).apply({inst.output});
    }
    CompiledPipeline p = inst.pipeline().compile_jit(cuda);
    inst.bind_inputs();
    BufferBase out = inst.make_output();
    check_kiln(p.run({out}), "the first kiln run"); // loads the module, copies the inputs
    return KilnCase{label, std::move(inst), std::move(p), std::move(out)};
}

struct Row {
    std::string workload, metric;
    std::vector<std::pair<std::string, double>> ms; ///< implementation -> median ms
    std::string reference;                          ///< the library the ratio is against
    double work = 0;                                ///< flops or bytes per run
    bool bytes = false;
};

void print_row(const Row &r) {
    double ref_ms = 0;
    for (const auto &[name, ms] : r.ms)
        if (name == r.reference) ref_ms = ms;
    for (const auto &[name, ms] : r.ms) {
        double rate = r.work / (ms * 1e-3) / 1e9;
        std::printf("| %s | %s | %.3f ms | %.1f %s | %.2fx |\n", r.workload.c_str(), name.c_str(),
                    ms, rate, r.bytes ? "GB/s" : "GF/s", ref_ms / ms);
    }
    std::fflush(stdout);
}

struct Options {
    int rounds = 7;
    bool quick = false;
    std::string only;
    std::map<std::string, std::string> traces; ///< op -> trace JSON text
    /// op -> knob settings, one column each (--knobs)
    std::multimap<std::string, std::map<std::string, std::string>> knobs;
    /// op -> a point of its automatic GPU space as JSON, one column each (--auto-config)
    std::multimap<std::string, std::string> auto_configs;
};

/// The columns of the --knobs settings of op: each "kiln (knob=value, ...)"; a setting the
/// template rejects (a constraint, an unknown knob) is left out with the reason.
void add_knob_cases(const Options &o, const apps::Operator &op, const std::vector<int64_t> &shape,
                    std::vector<KilnCase> &kiln) {
    auto [first, last] = o.knobs.equal_range(op.name);
    for (auto it = first; it != last; ++it) {
        std::string label;
        for (const auto &[k, v] : it->second)
            label += (label.empty() ? "" : ",") + k + "=" + v;
        try {
            kiln.push_back(make_kiln_case(op, shape, "kiln (" + label + ")", "", it->second));
        } catch (const std::exception &e) {
            std::fprintf(stderr, "%s %s: knobs %s left out: %s\n", op.name.c_str(),
                         apps::shape_to_string(shape).c_str(), label.c_str(), e.what());
        }
    }
    auto [auto_first, auto_last] = o.auto_configs.equal_range(op.name);
    for (auto it = auto_first; it != auto_last; ++it) {
        try {
            kiln.push_back(make_kiln_case(op, shape, "kiln (generated " + it->second + ")", "", {},
                                          it->second));
        } catch (const std::exception &e) {
            std::fprintf(stderr, "%s %s: generated config %s left out: %s\n", op.name.c_str(),
                         apps::shape_to_string(shape).c_str(), it->second.c_str(), e.what());
        }
    }
}

void bench_matmul(const Options &o, int64_t n) {
    const apps::Operator &op = apps::find_operator("matmul");
    std::vector<int64_t> shape{n, n, n};
    std::vector<KilnCase> kiln;
    kiln.push_back(make_kiln_case(op, shape, "kiln (hand schedule)", ""));
    // A tuned trace is for the shape it was tuned at (gpu-check.sh tunes 2048^3); where it does
    // not replay (another shape's algorithm), the column is left out with a note.
    if (o.traces.count("matmul")) {
        try {
            kiln.push_back(make_kiln_case(op, shape, "kiln (tuned)", o.traces.at("matmul")));
        } catch (const std::exception &e) {
            std::fprintf(stderr, "matmul %lld^3: the tuned trace does not apply: %s\n",
                         (long long)n, e.what());
        }
    }
    add_knob_cases(o, op, shape, kiln);
    const apps::OperatorInstance &inst = kiln[0].inst;
    // Row-major C[M][N] = A[M][K] B[K][N] is, column-major, C^T = B^T A^T.
    DeviceArray A(inst.input_data[0]), B(inst.input_data[1]), C(size_t(n * n));
    cublasHandle_t handle;
    check_cublas(cublasCreate(&handle), "cublasCreate");
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    const float one = 1.0f, zero = 0.0f;
    int in = int(n);
    auto sgemm = [&] {
        check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, in, in, in, &one, B.p, in, A.p,
                                 in, &zero, C.p, in),
                     "cublasSgemm");
    };
    sgemm();
    check_cuda(cudaDeviceSynchronize(), "cublasSgemm");
    BufferBase want = C.to_host(kiln[0].out);
    for (KilnCase &k : kiln) {
        k.out.copy_to_host();
        double err = apps::max_relative_error(k.out, want);
        if (err > op.tolerance)
            fail("matmul " + k.label + ": off cuBLAS by " + std::to_string(err));
    }
    int reps = n >= 4096 ? 5 : 20;
    Row row{"matmul " + std::to_string(n) + "^3 fp32", "GF/s", {}, "cuBLAS sgemm", op.work(shape)};
    std::map<std::string, std::vector<double>> times;
    for (int r = 0; r < o.rounds; r++) {
        times["cuBLAS sgemm"].push_back(event_ms(sgemm, reps));
        for (KilnCase &k : kiln)
            times[k.label].push_back(kiln_ms(k.pipeline, k.out, reps));
    }
    row.ms.emplace_back("cuBLAS sgemm", median(times["cuBLAS sgemm"]));
    for (KilnCase &k : kiln)
        row.ms.emplace_back(k.label, median(times[k.label]));
    print_row(row);
    cublasDestroy(handle);
}

void bench_conv2d(const Options &o) {
    const apps::Operator &op = apps::find_operator("conv2d");
    std::vector<int64_t> shape = op.default_shape; // C_in, C_out, H, W
    int CI = int(shape[0]), CO = int(shape[1]), H = int(shape[2]), W = int(shape[3]);
    std::vector<KilnCase> kiln;
    kiln.push_back(make_kiln_case(op, shape, "kiln (hand schedule)", ""));
    if (o.traces.count("conv2d"))
        kiln.push_back(make_kiln_case(op, shape, "kiln (tuned)", o.traces.at("conv2d")));
    add_knob_cases(o, op, shape, kiln);
    const apps::OperatorInstance &inst = kiln[0].inst;
    DeviceArray in(inst.input_data[0]), w(inst.input_data[1]), out(size_t(W) * H * CO);
    cudnnHandle_t handle;
    check_cudnn(cudnnCreate(&handle), "cudnnCreate");
    cudnnTensorDescriptor_t in_desc, out_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv;
    check_cudnn(cudnnCreateTensorDescriptor(&in_desc), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&out_desc), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&w_desc), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check_cudnn(
        cudnnSetTensor4dDescriptor(in_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CI, H, W),
        "input descriptor");
    check_cudnn(
        cudnnSetTensor4dDescriptor(out_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CO, H, W),
        "output descriptor");
    check_cudnn(
        cudnnSetFilter4dDescriptor(w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CO, CI, 3, 3),
        "filter descriptor");
    // kiln's conv2d is a cross-correlation (no kernel flip), as are deep-learning convolutions.
    check_cudnn(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT),
                "convolution descriptor");
    check_cudnn(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH), "no TF32");
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int found = 0;
    check_cudnn(cudnnFindConvolutionForwardAlgorithm(handle, in_desc, w_desc, conv, out_desc, 8,
                                                     &found, perf),
                "cudnnFindConvolutionForwardAlgorithm");
    int best = -1;
    for (int i = 0; i < found && best < 0; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) best = i;
    if (best < 0) fail("cuDNN found no fp32 FMA algorithm for conv2d");
    size_t workspace_bytes = perf[best].memory;
    void *workspace = nullptr;
    if (workspace_bytes) check_cuda(cudaMalloc(&workspace, workspace_bytes), "workspace");
    const float one = 1.0f, zero = 0.0f;
    auto forward = [&] {
        check_cudnn(cudnnConvolutionForward(handle, &one, in_desc, in.p, w_desc, w.p, conv,
                                            perf[best].algo, workspace, workspace_bytes, &zero,
                                            out_desc, out.p),
                    "cudnnConvolutionForward");
    };
    forward();
    check_cuda(cudaDeviceSynchronize(), "cudnnConvolutionForward");
    BufferBase want = out.to_host(kiln[0].out);
    for (KilnCase &k : kiln) {
        k.out.copy_to_host();
        double err = apps::max_relative_error(k.out, want);
        if (err > op.tolerance) fail("conv2d " + k.label + ": off cuDNN by " + std::to_string(err));
    }
    std::string name = "cuDNN (algo " + std::to_string(int(perf[best].algo)) + ")";
    Row row{"conv2d " + apps::shape_to_string(shape) + " fp32", "GF/s", {}, name, op.work(shape)};
    std::map<std::string, std::vector<double>> times;
    for (int r = 0; r < o.rounds; r++) {
        times[name].push_back(event_ms(forward, 50));
        for (KilnCase &k : kiln)
            times[k.label].push_back(kiln_ms(k.pipeline, k.out, 50));
    }
    row.ms.emplace_back(name, median(times[name]));
    for (KilnCase &k : kiln)
        row.ms.emplace_back(k.label, median(times[k.label]));
    print_row(row);
    cudaFree(workspace);
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w_desc);
    cudnnDestroyTensorDescriptor(in_desc);
    cudnnDestroyTensorDescriptor(out_desc);
    cudnnDestroy(handle);
}

void bench_softmax(const Options &o, int64_t n) {
    const apps::Operator &op = apps::find_operator("softmax");
    std::vector<int64_t> shape{n, n};
    std::vector<KilnCase> kiln;
    kiln.push_back(make_kiln_case(op, shape, "kiln (hand schedule)", ""));
    if (o.traces.count("softmax"))
        kiln.push_back(make_kiln_case(op, shape, "kiln (tuned)", o.traces.at("softmax")));
    add_knob_cases(o, op, shape, kiln);
    BufferBase want = op.reference(kiln[0].inst);
    for (KilnCase &k : kiln) {
        k.out.copy_to_host();
        double err = apps::max_relative_error(k.out, want);
        if (err > op.tolerance)
            fail("softmax " + k.label + ": off the reference by " + std::to_string(err));
    }
    // The copy moves the same bytes softmax must: read the matrix once, write it once.
    size_t count = size_t(n) * size_t(n);
    DeviceArray from(count), to(count);
    auto copy = [&] {
        check_cuda(cudaMemcpyAsync(to.p, from.p, count * sizeof(float), cudaMemcpyDeviceToDevice),
                   "cudaMemcpyAsync");
    };
    copy();
    Row row{"softmax " + std::to_string(n) + "^2 fp32",
            "GB/s",
            {},
            "device copy",
            op.work(shape),
            true};
    std::map<std::string, std::vector<double>> times;
    for (int r = 0; r < o.rounds; r++) {
        times["device copy"].push_back(event_ms(copy, 20));
        for (KilnCase &k : kiln)
            times[k.label].push_back(kiln_ms(k.pipeline, k.out, 20));
    }
    row.ms.emplace_back("device copy", median(times["device copy"]));
    for (KilnCase &k : kiln)
        row.ms.emplace_back(k.label, median(times[k.label]));
    print_row(row);
}

} // namespace

int main(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail(a + " needs a value");
            return argv[++i];
        };
        if (a == "--rounds") {
            o.rounds = std::max(1, std::atoi(value().c_str()));
        } else if (a == "--only") {
            o.only = value();
        } else if (a == "--quick") {
            o.quick = true;
        } else if (a == "--trace") {
            std::string v = value();
            size_t eq = v.find('=');
            if (eq == std::string::npos) fail("--trace takes OP=path.json, got '" + v + "'");
            o.traces[v.substr(0, eq)] = read_text(v.substr(eq + 1));
        } else if (a == "--knobs") {
            // OP:knob=value,knob=value
            std::string v = value();
            size_t colon = v.find(':');
            if (colon == std::string::npos)
                fail("--knobs takes OP:knob=value,..., got '" + v + "'");
            try {
                o.knobs.emplace(v.substr(0, colon), apps::parse_knob_values(v.substr(colon + 1)));
            } catch (const CompileError &e) {
                fail(std::string("--knobs: ") + e.what());
            }
        } else if (a == "--auto-config") {
            // OP=JSON: checked here, so a typo fails before the GPU is touched.
            std::string v = value();
            size_t eq = v.find('=');
            if (eq == std::string::npos || eq == 0)
                fail("--auto-config takes OP=JSON (a point of the automatic GPU space), got '" + v +
                     "'");
            if (!nlohmann::json::accept(v.substr(eq + 1)))
                fail("--auto-config " + v.substr(0, eq) + ": not JSON: '" + v.substr(eq + 1) + "'");
            o.auto_configs.emplace(v.substr(0, eq), v.substr(eq + 1));
        } else {
            fail("unknown option '" + a +
                 "' (known: --rounds N, --only matmul|conv2d|softmax, --quick, --trace OP=FILE, "
                 "--knobs OP:knob=value,..., --auto-config OP=JSON)");
        }
    }
    const kiln_device_interface_t *cuda = kiln_device_interface(kiln_gpu_api_cuda);
    if (!cuda) {
        std::printf("no CUDA device: %s\n", kiln_last_error_message());
        return 2;
    }
    char device[256];
    check_kiln(cuda->device_description(device, sizeof(device)), "device_description");
    int runtime_version = 0, driver_version = 0, cublas_version = 0;
    cudaRuntimeGetVersion(&runtime_version);
    cudaDriverGetVersion(&driver_version);
    cublasHandle_t h;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        cublasGetVersion(h, &cublas_version);
        cublasDestroy(h);
    }
    std::printf("- device: %s\n- CUDA runtime %d, driver %d, cuBLAS %d, cuDNN %zu\n", device,
                runtime_version, driver_version, cublas_version, cudnnGetVersion());
    std::printf("- medians of %d rounds; ratio = library time / this time (higher is better "
                "for kiln)\n\n",
                o.rounds);
    std::printf("| workload | implementation | time | rate | ratio to the library |\n");
    std::printf("|---|---|---:|---:|---:|\n");
    if (o.only.empty() || o.only == "matmul") {
        bench_matmul(o, o.quick ? 1024 : 2048);
        if (!o.quick) bench_matmul(o, 4096);
    }
    if (o.only.empty() || o.only == "conv2d") bench_conv2d(o);
    if (o.only.empty() || o.only == "softmax") bench_softmax(o, o.quick ? 2048 : 8192);
    return 0;
}
