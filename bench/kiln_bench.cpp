// kiln_bench: the kiln side of the side-by-side benchmarks. Each workload is an apps/ operator
// with its hand schedule, compiled once by the JIT for the host. Protocol (bench/bench_common.h):
//   kiln_bench --list | --info
//   kiln_bench --workload NAME [--shape AxBxC] [--threads T] [--reps R] [--min-time S]
//              [--dump PREFIX]   (also writes the lowered loop nest, LLVM IR and assembly)
//              [--knobs knob=value,...]  (the operator's template at those knob values, the
//                                          others at their hand values, instead of the hand
//                                          schedule: a point to compare with it)
//              [--db FILE]   (the best schedule the tuning database holds for this workload,
//                             shape, host target and thread count, as `kiln compile` emits it;
//                             the JSON line's impl is then "kiln_tuned"; no such record: exit 2)
//              [--auto-config JSON | --auto-config @FILE]   (a point of the automatic search
//                             space, its knob values as the tuning database's configs hold them:
//                             a generated schedule to time beside the hand one; impl "kiln_auto")
//              [--profile]   (compiled for a profiling target: after the timed runs, the
//                             thread time of each Func over them goes to stderr, as
//                             kiln_profiler_report prints it; the timings include the
//                             profiler's switches)
//              [--packed-weights]   (conv2d only: the conv2d_packed operator on weights packed
//                             once, untimed, by the conv2d_pack kernel, as a caller with constant
//                             weights runs it and as the oneDNN columns reorder theirs; impl
//                             "kiln_packed"; with --list, lists conv2d only)
//              [--nhwc]   (conv2d only: the conv2d_nhwc operator, input and output channels
//                             innermost, on weights packed as for --packed-weights: the layouts
//                             the onednn column's brgemm convolution runs on (acdb), whose
//                             conversions it does not time either; impl "kiln_nhwc")
// prints one JSON line: {"impl":"kiln","workload":..,"shape":..,"threads":..,"median_ms":..,
// "min_ms":..,"reps":..,"work":..,"unit":..,"rate":..,"checked":..,"max_rel_err":..}.
// The output is filled with NaN (or a pattern) and checked against the operator's plain-loop
// reference on the warm-up run and again after the timed runs. Shapes are those of the shared
// protocol; conv2d's NxCxHxWxK (N = 1) maps to the operator's C_in x C_out x H x W. Operators the
// other libraries do not run (layernorm, harris) take their apps/ shapes.
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/Operator.h"
#include "autotune/AutoSpace.h"
#include "autotune/Emit.h"
#include "bench/bench_common.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"

using namespace kiln;

namespace {

std::string impl = "kiln";

void poison(const BufferBase &b) {
    if (b.type().is_float()) {
        float *p = reinterpret_cast<float *>(b.raw_data());
        for (int64_t i = 0; i < b.number_of_elements(); i++) {
            p[i] = std::numeric_limits<float>::quiet_NaN();
        }
    } else {
        std::memset(b.raw_data(), 0xA5, size_t(b.number_of_elements()) * b.type().bytes());
    }
}

/// The protocol's shape for a workload as the operator's shape.
std::vector<int64_t> operator_shape(const apps::Operator &op, const std::string &text) {
    if (op.name.rfind("conv2d", 0) == 0 && op.name != "conv2d_pack" && !text.empty()) {
        const benchref::WorkloadInfo *w = benchref::find_workload("conv2d");
        std::vector<int64_t> s = benchref::parse_shape(impl, *w, text); // N x C x H x W x K
        return {s[1], s[4], s[2], s[3]};
    }
    return apps::parse_shape(op, text);
}

/// The operator's shape written as the protocol writes it.
std::string protocol_shape(const apps::Operator &op, const std::vector<int64_t> &s) {
    if (op.name.rfind("conv2d", 0) == 0 && op.name != "conv2d_pack")
        return benchref::shape_to_string({1, s[0], s[2], s[3], s[1]});
    return apps::shape_to_string(s);
}

int run(int argc, char **argv) {
    std::string workload, shape_text;
    int threads = 1, reps = 50;
    double min_time_s = 0.5;
    bool list = false, info = false, packed_weights = false, nhwc = false, profile = false;
    std::string dump; // --dump PREFIX: write PREFIX.lowered.txt, PREFIX.ll and PREFIX.s
    std::map<std::string, std::string> knobs; // --knobs knob=value,...
    std::string db;                           // --db FILE: the tuned schedule
    std::string auto_config;                  // --auto-config JSON or @FILE
    auto need = [&](int &i) -> std::string {
        if (i + 1 >= argc) benchref::fail(impl, std::string(argv[i]) + " needs a value");
        return argv[++i];
    };
    // The options that choose the schedule: empty would silently mean the hand schedule.
    auto need_nonempty = [&](int &i, const std::string &what) -> std::string {
        std::string flag = argv[i], v = need(i);
        if (v.empty())
            benchref::fail(impl, flag + " needs a value (" + what + "), got an empty one");
        return v;
    };
    auto to_int = [&](const std::string &flag, const std::string &v) {
        char *end = nullptr;
        long x = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || x < 1 || x > 1 << 20) {
            benchref::fail(impl, flag + " '" + v + "' must be an integer >= 1");
        }
        return int(x);
    };
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--workload") {
            workload = need(i);
        } else if (a == "--shape") {
            shape_text = need(i);
        } else if (a == "--threads") {
            threads = to_int(a, need(i));
        } else if (a == "--reps") {
            reps = to_int(a, need(i));
        } else if (a == "--min-time") {
            min_time_s = std::atof(need(i).c_str());
        } else if (a == "--dump") {
            dump = need(i);
        } else if (a == "--knobs") {
            knobs = apps::parse_knob_values(need_nonempty(i, "knob=value,..."));
        } else if (a == "--db") {
            db = need_nonempty(i, "a tuning database");
        } else if (a == "--auto-config") {
            auto_config = need_nonempty(i, "JSON or @FILE");
        } else if (a == "--profile") {
            profile = true;
        } else if (a == "--packed-weights") {
            packed_weights = true;
        } else if (a == "--nhwc") {
            nhwc = true;
        } else if (a == "--list") {
            list = true;
        } else if (a == "--info") {
            info = true;
        } else if (a == "--help" || a == "-h") {
            std::printf(
                "usage: kiln_bench --workload NAME [--shape AxBxC] [--threads T] "
                "[--reps R] [--min-time S] [--dump PREFIX] [--knobs k=v,... | --db FILE | "
                "--auto-config JSON|@FILE] [--packed-weights | --nhwc] [--profile] | --list | "
                "--info\n");
            return 0;
        } else {
            benchref::fail(impl, "unknown argument '" + a + "'; try --help");
        }
    }
    if (info) {
        std::printf("target: %s\nthreads: %d\n", Target::host().to_string().c_str(),
                    kiln_get_num_threads());
        return 0;
    }
    if (list) {
        for (const apps::Operator *op : apps::all_operators()) {
            if ((packed_weights || nhwc) && op->name != "conv2d") continue;
            std::string names;
            for (const std::string &n : op->shape_names)
                names += (names.empty() ? "" : "x") + n;
            if (op->name == "conv2d") names = "NxCxHxWxK";
            std::printf("%s %s %s\n", op->name.c_str(), names.c_str(),
                        protocol_shape(*op, op->default_shape).c_str());
        }
        return 0;
    }
    if (workload.empty()) benchref::fail(impl, "--workload is required (or --list); try --help");
    if (int(!knobs.empty()) + int(!db.empty()) + int(!auto_config.empty()) > 1)
        benchref::fail(impl, "--knobs, --db and --auto-config each choose the schedule; give one");
    if (!db.empty()) impl = "kiln_tuned";
    if (!auto_config.empty()) impl = "kiln_auto";
    if (packed_weights && nhwc)
        benchref::fail(impl, "--nhwc runs on packed weights already; give one of the two");
    if (packed_weights || nhwc) {
        const std::string flag = nhwc ? "--nhwc" : "--packed-weights";
        if (workload != "conv2d")
            benchref::fail(impl, flag +
                                     " is for conv2d only (its weights are packed by "
                                     "conv2d_pack), not '" +
                                     workload + "'");
        workload = nhwc ? "conv2d_nhwc" : "conv2d_packed";
        if (db.empty() && auto_config.empty()) impl = nhwc ? "kiln_nhwc" : "kiln_packed";
        packed_weights = true;
    }
    const apps::Operator &op = apps::find_operator(workload);
    std::vector<int64_t> shape = operator_shape(op, shape_text);
    kiln_set_num_threads(threads);

    apps::OperatorInstance inst = op.make(shape);
    Target target = Target::host();
    target.profile = profile;
    if (profile) setenv("KILN_PROFILE_AT_EXIT", "0", 1); // reported below, over the timed runs
    std::string note;
    if (!db.empty()) {
        autotune::TunedSchedule tuned = autotune::apply_best(db, op, shape, target, threads, inst);
        if (!tuned.found) {
            benchref::fail(impl, tuned.why + "; tune it first: kiln tune " + op.name + " --shape " +
                                     apps::shape_to_string(shape) + " --threads " +
                                     std::to_string(threads) + " --db " + db);
        }
        char buf[160];
        std::snprintf(buf, sizeof buf, "config %lld, recorded %.4g ms (median of %lld), ",
                      (long long)tuned.config_id, tuned.median_ms, (long long)tuned.measurements);
        note = buf;
    } else if (!auto_config.empty()) {
        std::string text = auto_config;
        if (text[0] == '@') {
            std::ifstream f(text.substr(1));
            if (!f) benchref::fail(impl, "--auto-config: cannot read " + text.substr(1));
            std::stringstream ss;
            ss << f.rdbuf();
            text = ss.str();
        }
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception &e) {
            benchref::fail(impl, "--auto-config is not JSON (" + std::string(e.what()) +
                                     "); give the knob values as an object, e.g. "
                                     "'{\"tile_x\":64,...}'");
        }
        autotune::SearchSpace space = autotune::auto_space(op, shape, target);
        space.apply(inst, space.from_json(j));
        note = "automatic space config, ";
    } else if (knobs.empty()) {
        op.hand_schedule(inst, target);
    } else {
        apps::check_knob_names(op, shape, target, knobs);
        apps::schedule_from_generator(op.generator, op.generator_params, inst, target, knobs);
    }
    CompiledPipeline compiled = inst.pipeline().compile_jit(target);
    if (!dump.empty()) {
        auto write = [&](const std::string &suffix, const std::string &text) {
            FILE *f = std::fopen((dump + suffix).c_str(), "w");
            if (!f) benchref::fail(impl, "--dump: cannot write " + dump + suffix);
            std::fwrite(text.data(), 1, text.size(), f);
            std::fclose(f);
        };
        write(".lowered.txt", inst.pipeline().lowered_text());
        write(".ll", compiled.llvm_ir());
        write(".s", compiled.assembly());
    }
    if (packed_weights) {
        // The weights as a caller packs them: the conv2d_pack kernel on the OIHW weights, once.
        const apps::Operator &pack = apps::find_operator("conv2d_pack");
        apps::OperatorInstance p = pack.make({shape[0], shape[1]});
        pack.hand_schedule(p, target);
        CompiledPipeline packer = p.pipeline().compile_jit(target);
        p.bind_inputs();
        BufferBase packed = p.make_output();
        benchref::Timing pt = benchref::time_runs([&] { packer.realize_into({packed}); }, 1, 0);
        inst.input_data[1] = packed;
        char buf[160];
        std::snprintf(buf, sizeof buf, "weights packed once by conv2d_pack in %.3g ms, untimed, ",
                      pt.median_ms);
        note += buf;
    }
    inst.bind_inputs();
    BufferBase out = inst.make_output();
    BufferBase expected = op.reference(inst);
    auto run_once = [&] { compiled.realize_into({out}); };

    poison(out);
    run_once(); // the warm-up run, checked
    double err = apps::max_relative_error(out, expected);
    if (profile) kiln_profiler_reset();
    benchref::Timing t = benchref::time_runs(run_once, reps, min_time_s);
    if (profile) kiln_profiler_report(stderr);
    poison(out); // and checked again after the timed runs
    run_once();
    err = std::max(err, apps::max_relative_error(out, expected));
    bool checked = err <= op.tolerance;
    double work = op.work(shape);
    double rate = work / (t.median_ms * 1e6);
    std::printf("{\"impl\":\"%s\",\"workload\":\"%s\",\"shape\":\"%s\",\"threads\":%d,"
                "\"median_ms\":%.6g,\"min_ms\":%.6g,\"reps\":%d,\"work\":%.6g,\"unit\":\"%s\","
                "\"rate\":%.6g,\"checked\":%s,\"max_rel_err\":%.6g,\"cpu_ms\":%.6g,\"note\":\"%"
                "scompile %.0f ms\"}\n",
                impl.c_str(), packed_weights ? "conv2d" : op.name.c_str(),
                protocol_shape(op, shape).c_str(), threads, t.median_ms, t.min_ms, t.reps, work,
                op.work_unit.c_str(), rate, checked ? "true" : "false",
                std::isfinite(err) ? err : 1e300, t.cpu_median_ms, note.c_str(),
                compiled.compile_time_ms());
    std::fflush(stdout);
    if (!checked) {
        std::fprintf(stderr, "%s: %s %s: wrong result, max relative error %g > %g\n",
                     ("kiln_bench (" + impl + ")").c_str(), op.name.c_str(),
                     apps::shape_to_string(shape).c_str(), err, op.tolerance);
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const CompileError &e) {
        benchref::fail(impl, e.what());
    } catch (const RuntimeError &e) {
        benchref::fail(impl, e.what());
    }
}
