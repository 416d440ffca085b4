#include "autotune/Worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/Operator.h"
#include "autotune/Checker.h"
#include "codegen/Target.h"
#include "driver/Pipeline.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"
#include "schedule/ScheduleTrace.h"

namespace kiln::autotune {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void reply(std::FILE *out, const json &j) {
    std::string s = j.dump() + "\n";
    std::fwrite(s.data(), 1, s.size(), out);
    std::fflush(out);
}

json failure(const char *status, const std::string &error) {
    return {{"status", status}, {"error", error}};
}

struct Built {
    const apps::Operator *op = nullptr;
    std::optional<apps::OperatorInstance> inst;
    CompiledPipeline compiled;
    std::string key; ///< op and shape, for the reference cache
    /// The GPU API's interface when the target has one: runs are timed with its timer (device
    /// time), and the output is copied back to the host before the comparison.
    const kiln_device_interface_t *device = nullptr;
};

class Worker {
public:
    json build(const json &req) {
        built.reset();
        auto start = Clock::now();
        try {
            const apps::Operator &op = apps::find_operator(req.at("op").get<std::string>());
            std::vector<int64_t> shape = req.at("shape").get<std::vector<int64_t>>();
            kiln_set_num_threads(req.value("threads", 0));
            Built b;
            b.op = &op;
            b.key = op.name + " " + apps::shape_to_string(shape);
            b.inst = op.make(shape);
            ScheduleTrace::from_json(req.at("trace")).apply({b.inst->output});
            Target target = Target::host();
            if (req.contains("target")) target = Target::from_string(req["target"]);
            b.compiled = b.inst->pipeline().compile_jit(target);
            if (target.has_gpu()) {
                b.device = kiln_device_interface(int(target.gpu));
                if (!b.device)
                    return failure("runtime_error", std::string("no ") + gpu_api_name(target.gpu) +
                                                        " device: " + kiln_last_error_message());
                // The device compiles a kernel at its first launch (OpenCL: clBuildProgram, slow
                // on PoCL): run once here, so that compiling counts as building, a kernel the
                // device cannot build is a compile_error, and the first measured run is a run.
                b.inst->bind_inputs();
                BufferBase scratch = b.inst->make_output();
                if (b.compiled.run({scratch}) != 0 || b.device->synchronize() != 0) {
                    std::string msg = kiln_last_error_message();
                    bool build_failed = msg.find("build") != std::string::npos ||
                                        msg.find("compil") != std::string::npos;
                    return failure(build_failed ? "compile_error" : "runtime_error",
                                   "first run on the device: " + msg);
                }
            }
            built = std::move(b);
        } catch (const CompileError &e) {
            return failure("compile_error", e.what());
        } catch (const RuntimeError &e) {
            return failure("compile_error", e.what());
        } catch (const InternalError &e) {
            return failure("compile_error", std::string("internal error: ") + e.what());
        } catch (const std::exception &e) {
            return failure("compile_error", e.what());
        }
        return {{"status", "built"}, {"compile_ms", ms_since(start)}};
    }

    json measure(const json &req, std::FILE *out) {
        if (!built) return failure("runtime_error", "measure without a built candidate");
        const double min_time_ms = req.value("min_time_ms", 200.0);
        const int warmup = req.value("warmup", 1);
        const int max_repeats = std::max(3, req.value("max_repeats", 200));
        const apps::OperatorInstance &inst = *built->inst;
        inst.bind_inputs();
        BufferBase output = inst.make_output();
        // GPU kernels are launched without waiting. Inputs stay on the device between runs
        // (their host copies are not dirty); the output stays there until the comparison copies
        // it. A GPU sample is the device's time between two marks on its queue (the interface's
        // timer_start / timer_stop: OpenCL profiling markers, CUDA events) around back-to-back
        // runs, so neither the host's wait for the device nor its wake-up counts; a CPU sample is
        // the steady clock's.
        const kiln_device_interface_t *device = built->device;
        auto time_runs = [&](int runs, double *ms_per_run) -> std::optional<std::string> {
            auto t0 = Clock::now();
            if (device && device->timer_start() != 0) return std::string(kiln_last_error_message());
            for (int i = 0; i < runs; i++) {
                if (built->compiled.run({output}) != 0)
                    return std::string(kiln_last_error_message());
            }
            double ms = 0;
            if (device && device->timer_stop(&ms) != 0)
                return std::string(kiln_last_error_message());
            if (!device) ms = ms_since(t0);
            *ms_per_run = ms / runs;
            return std::nullopt;
        };

        auto start = Clock::now();
        double first_run_ms = 0;
        if (auto err = time_runs(1, &first_run_ms)) return failure("runtime_error", *err);
        double first_ms = ms_since(start);
        json ran = {{"event", "ran"}, {"first_ms", first_ms}};
        if (device) ran["first_device_ms"] = first_run_ms;
        reply(out, ran);

        double err = 0;
        if (!built->op->reference) {
            // No hand-written reference (a generator's operator): the reference evaluator at
            // sampled points, on two input sets, into pre-filled outputs, 1 against N threads.
            CheckResult r = check_by_evaluator(device);
            if (r.status != "ok") return failure(r.status.c_str(), r.error);
            err = r.max_error;
        } else {
            auto it = references.find(built->key);
            if (it == references.end())
                it = references.emplace(built->key, built->op->reference(inst)).first;
            if (device) output.copy_to_host();
            err = apps::max_relative_error(output, it->second);
            if (!(err <= built->op->tolerance)) {
                char buf[200];
                std::snprintf(buf, sizeof buf,
                              "max relative error %.3g against the reference exceeds the "
                              "tolerance %.3g of '%s'",
                              err, built->op->tolerance, built->op->name.c_str());
                return failure("wrong_answer", buf);
            }
        }
        reply(out, {{"event", "checked"}, {"max_relative_error", err}});

        // Batches: a sample of a fast kernel covers about 1 ms.
        const int batch =
            first_ms >= 1.0 ? 1 : int(std::min(1000.0, std::ceil(1.0 / std::max(first_ms, 1e-3))));
        double sample = 0;
        for (int i = 0; i < warmup; i++) {
            if (auto e = time_runs(batch, &sample)) return failure("runtime_error", *e);
        }
        std::vector<double> times;
        auto measuring = Clock::now();
        // At least min_time_ms and 3 samples; then on, up to 4 x min_time_ms, while the samples
        // disagree (a busy moment of the machine), so that the median is a settled one.
        auto more = [&] {
            if (int(times.size()) >= max_repeats) return false;
            double spent = ms_since(measuring);
            if (times.size() < 3 || spent < min_time_ms) return true;
            return spent < 4 * min_time_ms && !timing_settled(times);
        };
        while (more()) {
            if (auto e = time_runs(batch, &sample)) return failure("runtime_error", *e);
            times.push_back(sample);
        }
        std::vector<double> sorted = times;
        std::sort(sorted.begin(), sorted.end());
        size_t n = sorted.size();
        double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
        return {{"status", "ok"},
                {"times_ms", times},
                {"median_ms", median},
                {"spread_ms", sorted.back() - sorted.front()},
                {"settled", timing_settled(times)},
                {"clock", device ? "device" : "host"}};
    }

private:
    CheckResult check_by_evaluator(const kiln_device_interface_t *device) {
        auto c = checkers.find(built->key);
        if (c == checkers.end())
            c = checkers
                    .try_emplace(built->key, built->op->make(built->inst->shape),
                                 built->op->tolerance)
                    .first;
        return c->second.check(*built->inst, [&](BufferBase &o) -> std::string {
            int rc = built->compiled.run({o});
            if (rc == 0 && device) rc = device->synchronize();
            if (rc != 0) return kiln_last_error_message();
            if (device) o.copy_to_host();
            return "";
        });
    }

    std::optional<Built> built;
    std::map<std::string, BufferBase> references;
    std::map<std::string, ReferenceChecker> checkers; ///< by op and shape
};

} // namespace

bool timing_settled(const std::vector<double> &samples, double tolerance) {
    if (samples.size() < 3) return false;
    std::vector<double> s = samples;
    std::sort(s.begin(), s.end());
    auto at = [&](double q) { // linear interpolation between the closest ranks
        double pos = q * double(s.size() - 1);
        size_t lo = size_t(pos);
        size_t hi = std::min(lo + 1, s.size() - 1);
        return s[lo] + (pos - double(lo)) * (s[hi] - s[lo]);
    };
    double median = at(0.5);
    return median > 0 && at(0.75) - at(0.25) <= tolerance * median;
}

int run_worker(std::FILE *in, std::FILE *out) {
    apps::register_builtin_operators();
    Worker worker;
    std::string line;
    for (;;) {
        line.clear();
        int c;
        while ((c = std::fgetc(in)) != EOF && c != '\n')
            line.push_back(char(c));
        if (line.empty() && c == EOF) return 0;
        if (line.empty()) continue;
        json req;
        try {
            req = json::parse(line);
        } catch (const json::exception &e) {
            reply(out, failure("runtime_error", std::string("worker: bad request: ") + e.what()));
            continue;
        }
        std::string cmd = req.value("cmd", "");
        if (cmd == "quit") return 0;
        try {
            if (cmd == "build") {
                reply(out, worker.build(req));
            } else if (cmd == "measure") {
                reply(out, worker.measure(req, out));
            } else {
                reply(out, failure("runtime_error", "worker: unknown command '" + cmd + "'"));
            }
        } catch (const std::exception &e) {
            reply(out, failure("runtime_error", e.what()));
        }
    }
}

} // namespace kiln::autotune
