// The kiln command line: `tune` searches schedules for an operator and records every measurement
// in the tuning database, `compile` emits the best one as object + static library + header,
// `profile` prints where a kernel's time goes per Func, `db` inspects the database
// (tools/DbCommands.h), and `demo` runs a small pipeline through the reference evaluator.
#include <CLI/CLI.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <unistd.h>

#include "apps/Operator.h"
#include "autotune/Emit.h"
#include "autotune/Simulator.h"
#include "autotune/Strategy.h"
#include "autotune/TaskScheduler.h"
#include "autotune/Tuner.h"
#include "driver/Generator.h"
#include "kiln.h"
#include "runtime/kiln_runtime.h"
#include "tools/DbCommands.h"
#include "tools/GeneratorShapes.h"
#include "tools/GeneratorTune.h"
#include "tools/StopSignals.h"

namespace {

using namespace kiln;

int run_demo(int width, int height) {
    Buffer<float> input(std::vector<int>{width, height}, "input");
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++)
            input(x, y) = float((x * 7 + y * 13) % 17);
    }
    Var x("x"), y("y");
    Func clamped = repeat_edge(input);
    Func blur_x("blur_x"), blur_y("blur_y");
    blur_x(x, y) = (clamped(x - 1, y) + clamped(x, y) + clamped(x + 1, y)) / 3;
    blur_y(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3;

    std::cout << "algorithm:\n" << blur_y.to_string() << "\n";
    auto start = std::chrono::steady_clock::now();
    Buffer<float> out = reference_realize(blur_y, {width, height});
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double checksum = 0;
    for (int j = 0; j < height; j++) {
        for (int i = 0; i < width; i++)
            checksum += out(i, j);
    }
    std::printf("reference evaluation of blur_y over %dx%d: %.1f ms, checksum %.4f\n", width,
                height, ms, checksum);
    std::printf("out(0, 0) = %g, out(%d, %d) = %g\n", out(0, 0), width / 2, height / 2,
                out(width / 2, height / 2));
    return 0;
}

/// A --seed: a whole number 0..2^64-1, written in decimal (no sign, no wrap-around).
uint64_t parse_seed(const std::string &text) {
    bool digits =
        !text.empty() && text.size() <= 20 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    errno = 0;
    unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
    if (!digits || errno == ERANGE)
        throw CompileError("--seed " + text + ": a whole number 0.." +
                           std::to_string(std::numeric_limits<uint64_t>::max()));
    return uint64_t(v);
}

/// "90", "90s", "30m", "8h", "1.5h" -> seconds.
double parse_duration(const std::string &text) {
    size_t used = 0;
    double v = -1;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception &) {
        used = 0;
    }
    std::string unit = text.substr(used);
    double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
    if (used == 0 || scale < 0 || v < 0)
        throw CompileError(
            "--time: cannot read '" + text +
            "'; give a number of seconds or a number with s, m or h, e.g. 30m or 8h");
    return v * scale;
}

std::vector<int64_t> shape_of(const std::string &op_name, const std::string &text) {
    apps::register_builtin_operators();
    return apps::parse_shape(apps::find_operator(op_name), text);
}

/// `kiln profile`: the operator's hand schedule (or the database's best) compiled for a profiling
/// target (Target::profile), one warm-up run, `runs` timed runs, then each Func's thread time over
/// them (kiln_profiler_report).
int run_profile(const std::string &op_name, const std::vector<int64_t> &shape,
                const std::string &db, int threads, int runs) {
    const apps::Operator &op = apps::find_operator(op_name);
    if (threads > 0) kiln_set_num_threads(threads);
    Target target = Target::host();
    target.profile = true;
    apps::OperatorInstance inst = op.make(shape);
    std::string which = "the hand schedule";
    if (!db.empty()) {
        const int keyed = threads > 0 ? threads : autotune::default_threads();
        autotune::TunedSchedule tuned = autotune::apply_best(db, op, shape, target, keyed, inst);
        if (!tuned.found) {
            throw CompileError("--db: " + tuned.why + "; tune it first (kiln tune " + op.name +
                               " --shape " + apps::shape_to_string(shape) + " --threads " +
                               std::to_string(keyed) + " --db " + db +
                               ") or drop --db to profile the hand schedule");
        }
        which = "config " + std::to_string(tuned.config_id) + " of " + db;
    } else {
        op.hand_schedule(inst, target);
    }
    setenv("KILN_PROFILE_AT_EXIT", "0", 1); // the report below covers the timed runs only
    CompiledPipeline compiled = inst.pipeline().compile_jit(target);
    inst.bind_inputs();
    BufferBase out = inst.make_output();
    compiled.realize_into({out});
    kiln_profiler_reset();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; i++)
        compiled.realize_into({out});
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const int used = kiln_get_num_threads();
    std::printf("%s %s, %s, %d thread%s: %d runs after a warm-up run, %.4g ms per run (wall)\n",
                op.name.c_str(), apps::shape_to_string(shape).c_str(), which.c_str(), used,
                used == 1 ? "" : "s", runs, ms / runs);
    std::fflush(stdout);
    kiln_profiler_report(stdout);
    return 0;
}

} // namespace

/// The command line; main() only adds a last catch for what building it may throw.
static int run_kiln(int argc, char **argv) {
    CLI::App app{"kiln: a scheduling language and autotuner for fast kernels"};
    app.require_subcommand(1);
    // A value the option cannot hold ("--trials abc") is one "kiln:" line like every other bad
    // option, naming the option and the value.
    app.failure_message([](const CLI::App *a, const CLI::Error &e) -> std::string {
        const std::string prefix = "Could not convert: ";
        std::string what = e.what();
        size_t eq = what.find(" = ");
        if (!dynamic_cast<const CLI::ConversionError *>(&e) || what.rfind(prefix, 0) != 0 ||
            eq == std::string::npos)
            return CLI::FailureMessage::simple(a, e);
        return "kiln: " + what.substr(prefix.size(), eq - prefix.size()) + " " +
               what.substr(eq + 3) + ": not a value this option takes; see --help\n";
    });

    int width = 64, height = 48;
    CLI::App *demo = app.add_subcommand("demo", "run a 3x3 blur through the reference evaluator");
    demo->add_option("--width", width, "output width")->check(CLI::PositiveNumber);
    demo->add_option("--height", height, "output height")->check(CLI::PositiveNumber);

    // kiln tune
    autotune::TuneOptions tune;
    std::string tune_shape, tune_time;
    bool no_resume = false, no_baselines = false, simulate = false, quiet = false;
    CLI::App *tune_cmd = app.add_subcommand(
        "tune", "search schedules for an operator, recording every measurement in the database");
    tune_cmd->add_option("operator", tune.op,
                         "operator name (e.g. matmul), or the generator's with --generator");
    std::string tasks_path;
    int round_trials = 16;
    tune_cmd->add_option(
        "--tasks", tasks_path,
        "tune many operators and shapes as one job: a JSON file of tasks "
        "[{\"op\": \"matmul\", \"shape\": \"1024x1024x1024\", \"weight\": 1}, ...]");
    tune_cmd
        ->add_option("--round-trials", round_trials,
                     "with --tasks: trials per round, the unit the job's time is given in")
        ->default_str("16");
    std::string generator_exe;
    std::vector<std::string> generator_params;
    tune_cmd->add_option("--generator", generator_exe,
                         "tune a generator of this executable (linked with kiln::generator) "
                         "instead of a built-in operator; --shape gives its output's extents");
    tune_cmd->add_option("--param", generator_params,
                         "key=value: a generator parameter, knob or scalar Param (repeatable)");
    tune_cmd->add_option("--shape", tune_shape, "e.g. 1024x1024x1024 (default: the operator's)");
    tune_cmd->add_option("--trials", tune.trials, "search trials (0: no limit)");
    tune_cmd->add_option("--time", tune_time, "wall-clock budget: 90s, 30m, 8h");
    tune_cmd
        ->add_option("--strategy", tune.strategy, "random|grid|evolution|annealing|model|bandit")
        ->default_str("bandit");
    tune_cmd->add_option("--space", tune.space, "template (hand-written when there is one) or auto")
        ->default_str("template");
    tune_cmd->add_option("--db", tune.db_path, "tuning database")->default_str(tune.db_path);
    tune_cmd
        ->add_option("--target", tune.target,
                     "host, host-opencl, host-cuda (GPU kernels; the device must be present) or a "
                     "target string")
        ->default_str("host");
    tune_cmd->add_option("--jobs", tune.jobs, "worker processes building candidates in parallel")
        ->default_str("2");
    tune_cmd->add_option("--threads", tune.threads, "threads per kernel (default: all cores)");
    std::string seed_text;
    tune_cmd->add_option("--seed", seed_text, "strategy seed, 0..2^64-1")->default_str("1");
    tune_cmd->add_flag("--no-resume", no_resume, "start a fresh run instead of resuming");
    tune_cmd->add_flag("--budget-across-runs", tune.budget_across_runs,
                       "count earlier runs' trials and time against the budget");
    tune_cmd->add_flag("--no-baselines", no_baselines,
                       "do not measure the default and hand schedules");
    tune_cmd->add_option("--remeasure", tune.remeasure, "top configs measured again at the end")
        ->default_str("3");
    tune_cmd->add_option("--min-time-ms", tune.min_time_ms, "measuring time per candidate")
        ->default_str("100");
    tune_cmd
        ->add_option("--timeout", tune.timeout_s,
                     "floor of the run deadline in seconds (the deadline is max(this, 20 x "
                     "best time))")
        ->default_str("1");
    tune_cmd
        ->add_option("--first-timeout", tune.first_timeout_s,
                     "run deadline before any candidate succeeded, seconds")
        ->default_str("10");
    tune_cmd
        ->add_option("--compile-timeout", tune.compile_timeout_s,
                     "deadline for building one candidate, seconds")
        ->default_str("300");
    tune_cmd->add_option("--worker", tune.worker_path, "the kiln-worker executable");
    tune_cmd->add_flag("--simulate", simulate,
                       "replay the database instead of measuring; compares strategies");
    tune_cmd->add_flag("--quiet", quiet, "no progress line");

    // kiln compile
    autotune::EmitOptions emit;
    std::string emit_shape;
    CLI::App *compile_cmd = app.add_subcommand(
        "compile", "emit the best schedule from the database as object + static library + header");
    compile_cmd->add_option("operator", emit.op, "operator name")->required();
    compile_cmd->add_option("--shape", emit_shape, "e.g. 1024x1024x1024");
    compile_cmd->add_option("--db", emit.db_path, "tuning database")->default_str(emit.db_path);
    compile_cmd->add_option("-o,--output", emit.out_dir, "output directory")->required();
    compile_cmd->add_option("--name", emit.function_name, "entry point name (default: operator)");
    compile_cmd
        ->add_option("--target", emit.target,
                     "host, host-opencl, host-cuda or a target string (as tuned)")
        ->default_str("host");
    compile_cmd->add_option("--threads", emit.threads,
                            "the thread count the schedule was tuned with (default: all cores); "
                            "with no tuned schedule, the one the hand schedule plans tasks for");
    std::string emit_kinds = "object,static_library,c_header";
    compile_cmd
        ->add_option("-e,--emit", emit_kinds,
                     "files to write, comma-separated: object, static_library, c_header, "
                     "assembly, llvm_ir, lowered_stmt, metadata, opencl_source, cuda_source")
        ->default_str(emit_kinds);

    // kiln profile
    std::string profile_op, profile_shape, profile_db;
    int profile_threads = 0, profile_runs = 20;
    CLI::App *profile_cmd = app.add_subcommand(
        "profile", "run an operator's kernel compiled for profiling and print each Func's time");
    profile_cmd->add_option("operator", profile_op, "operator name")->required();
    profile_cmd->add_option("--shape", profile_shape, "e.g. 1024x1024x1024");
    profile_cmd->add_option("--db", profile_db,
                            "profile the best schedule of this tuning database (default: the "
                            "hand schedule)");
    profile_cmd->add_option("--threads", profile_threads, "threads (default: all cores)")
        ->check(CLI::PositiveNumber);
    profile_cmd->add_option("--runs", profile_runs, "timed runs, after one warm-up run")
        ->check(CLI::PositiveNumber)
        ->default_str("20");

    // kiln lock update
    CLI::App *lock_cmd = app.add_subcommand("lock", "the lockfile of shape-dispatched kernels");
    CLI::App *lock_update = lock_cmd->add_subcommand(
        "update", "write the database's best schedule of each shape into the lockfile");
    std::string lock_exe, lock_generator, lock_db = "tuning_db/kiln.db",
                                          lock_path = "kiln.lock.json", lock_target = "host";
    std::vector<std::string> lock_shapes, lock_params;
    lock_update->add_option("--generator", lock_exe, "the generator executable")->required();
    lock_update->add_option("generator", lock_generator, "the generator's name")->required();
    lock_update->add_option("--shape", lock_shapes, "an output shape (repeatable)")->required();
    lock_update->add_option("--param", lock_params, "key=value (repeatable)");
    lock_update->add_option("--db", lock_db, "tuning database")->default_str(lock_db);
    lock_update->add_option("--lock", lock_path, "the lockfile")->default_str(lock_path);
    lock_update->add_option("--target", lock_target, "the target the kernel is built for")
        ->default_str(lock_target);
    int lock_threads = 0;
    lock_update->add_option("--threads", lock_threads,
                            "the thread count the shapes were tuned with (default: all cores)");
    lock_cmd->require_subcommand(1);

    add_db_commands(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        int rc = app.exit(e); // --help: 0; a bad option: its message (see failure_message above)
        return dynamic_cast<const CLI::ConversionError *>(&e) ? 1 : rc;
    }
    try {
        if (*demo) return run_demo(width, height);
        if (*tune_cmd && !seed_text.empty()) tune.seed = parse_seed(seed_text);
        if (*tune_cmd && tune.op.empty() && tasks_path.empty())
            throw CompileError("kiln tune: name an operator (e.g. kiln tune matmul) or give a job "
                               "of several with --tasks FILE");
        if (*tune_cmd && !tasks_path.empty() && !generator_exe.empty())
            throw CompileError("--tasks " + tasks_path +
                               ": a job's tasks are built-in operators; tune a generator with "
                               "kiln tune --generator EXE NAME");
        if (*tune_cmd && !generator_exe.empty()) {
            GeneratorTuneRequest request;
            request.generator = tune.op;
            for (const std::string &p : generator_params)
                add_param(request.params, p);
            if (tune_shape.empty())
                throw CompileError("--generator: give the shape to tune with --shape: the "
                                   "extents of the generator's output (e.g. --shape 4096x4096), "
                                   "or the values of the shape it declares with ctx.shape");
            if (!tune.worker_path.empty())
                throw CompileError("--worker " + tune.worker_path +
                                   ": with --generator the generator executable is the worker");
            request.shape = parse_shape_text(tune_shape, "--shape");
            if (!tune_time.empty()) {
                tune.time_s = parse_duration(tune_time);
                if (!(tune.time_s > 0))
                    throw CompileError("--time " + tune_time +
                                       ": a positive duration, e.g. 90s, 30m or 8h");
            }
            tune.resume = !no_resume;
            tune.baselines = !no_baselines;
            tune.progress = !quiet;
            if (tune.trials <= 0 && tune.time_s <= 0) tune.trials = 100;
            autotune::validate(tune);
            if (simulate && autotune::tune_target(tune.target).has_gpu())
                throw CompileError("--simulate replays CPU records only; drop --target " +
                                   tune.target);
            request.options = tune;
            request.simulate = simulate;
            request.strategy_given = tune_cmd->count("--strategy") > 0;
            return run_generator_tune(generator_exe, request);
        }
        if (!generator_params.empty())
            throw CompileError("--param is for generators: add --generator EXE");
        if (*tune_cmd && !tasks_path.empty()) {
            if (!tune.op.empty())
                throw CompileError("--tasks " + tasks_path +
                                   ": the tasks name the operators; drop '" + tune.op + "'");
            if (!tune_shape.empty())
                throw CompileError("--tasks " + tasks_path +
                                   ": give each task its shape in the file; drop --shape");
            if (simulate) throw CompileError("--simulate replays one operator; drop --tasks");
            if (!tune_time.empty()) {
                tune.time_s = parse_duration(tune_time);
                if (!(tune.time_s > 0))
                    throw CompileError("--time " + tune_time +
                                       ": a positive duration, e.g. 90s, 30m or 8h");
            }
            autotune::validate(tune);
            std::vector<autotune::TuneTask> tasks = autotune::load_tasks(tasks_path);
            tune.resume = !no_resume;
            tune.baselines = !no_baselines;
            tune.progress = !quiet;
            tune.command_operand = "--tasks " + tasks_path;
            if (tune.trials <= 0 && tune.time_s <= 0) tune.trials = 100 * int64_t(tasks.size());
            tune.stop = &tools::stop_requested;
            tools::install_stop_handlers();
            autotune::JobResult r =
                autotune::tune_tasks(tune, tasks, round_trials, std::cout, std::cerr);
            return r.interrupted ? tools::stop_exit_code : 0;
        }
        if (*tune_cmd) {
            tune.shape = shape_of(tune.op, tune_shape);
            if (!tune_time.empty()) {
                tune.time_s = parse_duration(tune_time);
                if (!(tune.time_s > 0))
                    throw CompileError("--time " + tune_time +
                                       ": a positive duration, e.g. 90s, 30m or 8h");
            }
            autotune::validate(tune); // every option, before the database or a worker
            if (simulate) {
                if (autotune::tune_target(tune.target).has_gpu())
                    throw CompileError("--simulate replays CPU records only; drop --target " +
                                       tune.target);
                autotune::SimulateOptions sim;
                sim.op = tune.op;
                sim.shape = tune.shape;
                sim.db_path = tune.db_path;
                if (tune_cmd->count("--strategy")) sim.strategies = {tune.strategy};
                sim.space = tune.space;
                sim.trials = tune.trials > 0 ? tune.trials : 100;
                sim.threads = tune.threads;
                sim.seed = tune.seed;
                autotune::simulate(sim, std::cout);
                return 0;
            }
            tune.resume = !no_resume;
            tune.baselines = !no_baselines;
            tune.progress = !quiet;
            if (tune.trials <= 0 && tune.time_s <= 0) tune.trials = 100;
            tune.stop = &tools::stop_requested;
            tools::install_stop_handlers();
            autotune::TuneResult r = autotune::tune(tune, std::cout, std::cerr);
            return r.interrupted ? tools::stop_exit_code : 0;
        }
        if (*lock_update) {
            std::map<std::string, std::string> params;
            for (const std::string &p : lock_params)
                add_param(params, p);
            return run_generator_lock_update(lock_exe, lock_generator, lock_shapes, params, lock_db,
                                             lock_path, lock_target, lock_threads);
        }
        if (*profile_cmd) {
            return run_profile(profile_op, shape_of(profile_op, profile_shape), profile_db,
                               profile_threads, profile_runs);
        }
        if (*compile_cmd) {
            emit.shape = shape_of(emit.op, emit_shape);
            emit.kinds = parse_output_kinds(emit_kinds);
            autotune::EmitResult r = autotune::emit_best(emit, std::cerr);
            if (r.tuned) std::printf("tuned schedule (%.4g ms measured)\n", r.tuned_ms);
            for (const std::string &f : r.files)
                std::printf("wrote %s\n", f.c_str());
            return 0;
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kiln: %s\n", e.what());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    try {
        return run_kiln(argc, argv);
    } catch (const std::exception &e) { // outside the commands' own handler: the set-up
        std::fprintf(stderr, "kiln: %s\n", e.what());
        return 1;
    }
}
