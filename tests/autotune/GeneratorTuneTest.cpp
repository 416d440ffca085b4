// Tuning the operators users define as generators: the generator as an operator (inputs sized by
// bounds inference, its own schedule removed, knobs as a search space), the checker against the
// reference evaluator, and `kiln tune --generator` end to end with a generator executable like a
// user's (tests/autotune/generators/TestGenerators.cpp, also linked into this test).
#include <gtest/gtest.h>

#include "tests/autotune/KilnProcess.h"
#include "tests/autotune/TempDir.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "autotune/Checker.h"
#include "autotune/GeneratorOperator.h"
#include "autotune/Runner.h"
#include "driver/Generator.h"
#include "lang/Error.h"
#include "lang/ReferenceEvaluator.h"
#include "runtime/kiln_runtime.h"
#include "schedule/ScheduleTrace.h"
#include "tests/lang/ErrorOf.h"
#include "tuning_db/TuningDB.h"

using namespace kiln;
using namespace kiln::autotune;

namespace {

using autotune_test::TempDir;

using kiln::test::error_of;

struct Ran {
    int status = -1;
    std::string output;
};

/// Runs the kiln command line with the arguments; stdout and stderr together.
Ran kiln_cli(const std::string &args) {
    Ran r;
    std::string cmd = std::string(KILN_CLI_PATH) + " " + args + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
        r.output.append(buf, n);
    int status = pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

std::string tune_generator(const std::string &name, const std::string &db,
                           const std::string &extra) {
    return std::string("tune --generator ") + KILN_TEST_GENERATORS + " " + name + " --db " + db +
           " --strategy random --jobs 1 --threads 2 --min-time-ms 5 --remeasure 0 --quiet " + extra;
}

std::map<std::string, int64_t> statuses(const std::string &db, const std::string &op,
                                        const std::string &shape = "") {
    std::map<std::string, int64_t> r;
    auto d = tuning_db::Database::open_existing(db);
    for (const auto &w : d.workloads_matching(op, shape)) {
        if (w.key.op != op) continue;
        for (const auto &t : d.targets())
            for (const auto &m : d.history(w.id, t.id, 0))
                r[tuning_db::to_string(m.status)]++;
    }
    return r;
}

std::vector<std::string> errors_of(const std::string &db, const std::string &op) {
    std::vector<std::string> r;
    auto d = tuning_db::Database::open_existing(db);
    for (const auto &w : d.workloads_matching(op, ""))
        for (const auto &t : d.targets())
            for (const auto &m : d.history(w.id, t.id, 0))
                if (!m.error.empty() && w.key.op == op) r.push_back(m.error);
    return r;
}

} // namespace

// --- the generator as an operator ---------------------------------------------------------------

TEST(GeneratorOperator, NameCarriesTheSortedParametersAndParsesBack) {
    GeneratorSpec s{"brighten", {{"vector", "16"}, {"offset", "2"}, {"size", "4,4"}}};
    std::string name = generator_operator_name(s);
    EXPECT_EQ(name, "brighten[offset=2,size=4,4,vector=16]");
    auto back = parse_generator_operator_name(name);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->generator, "brighten");
    EXPECT_EQ(back->params, s.params);
    EXPECT_EQ(generator_operator_name({"brighten", {}}), "brighten");
    EXPECT_FALSE(parse_generator_operator_name("brighten[offset]"));
    EXPECT_FALSE(parse_generator_operator_name("brighten[=2]"));
}

TEST(GeneratorOperator, InputsCoverWhatTheOutputRegionReadsAndTheScheduleIsRemoved) {
    const apps::Operator &op = generator_operator({"tiled_blur", {}});
    EXPECT_EQ(op.shape_names, (std::vector<std::string>{"x", "y"}));
    apps::OperatorInstance inst = op.make({64, 48});
    ASSERT_EQ(inst.input_data.size(), 1u);
    const BufferBase &in = inst.input_data[0];
    EXPECT_EQ(in.dim(0).min, -1);
    EXPECT_EQ(in.dim(0).extent, 66);
    EXPECT_EQ(in.dim(1).min, -1);
    EXPECT_EQ(in.dim(1).extent, 50);
    EXPECT_TRUE(ScheduleTrace::capture({inst.output}).directives.empty());
    ASSERT_EQ(inst.stages.size(), 1u);
    EXPECT_EQ(inst.stages[0].name(), "blur_x");

    // The hand schedule is the generator's own (knobs at their first values), and it runs.
    op.hand_schedule(inst, Target::host());
    EXPECT_FALSE(ScheduleTrace::capture({inst.output}).directives.empty());
    inst.bind_inputs();
    BufferBase got = inst.realize();
    BufferBase want = reference_realize(inst.output, {64, 48});
    EXPECT_LE(apps::max_relative_error(got, want), 1e-6);
    EXPECT_EQ(op.work({64, 48}), (66.0 * 50 + 64 * 48) * 4);
}

TEST(GeneratorOperator, ParametersSetScalarParamsAndGeneratorParameters) {
    const apps::Operator &op = generator_operator({"brighten", {{"gain", "2"}, {"offset", "1"}}});
    EXPECT_EQ(op.name, "brighten[gain=2,offset=1]");
    apps::OperatorInstance inst = op.make({16, 4});
    inst.bind_inputs();
    Buffer<float> out = inst.realize();
    Buffer<float> in = inst.input_data[0];
    EXPECT_FLOAT_EQ(out(3, 2), in(3, 2) * 2 + 1);
    // Without the parameter, the Param's own default (1.5).
    apps::OperatorInstance plain = generator_operator({"brighten", {}}).make({16, 4});
    plain.bind_inputs();
    Buffer<float> out2 = plain.realize();
    Buffer<float> in2 = plain.input_data[0];
    EXPECT_FLOAT_EQ(out2(3, 2), in2(3, 2) * 1.5f);
}

TEST(GeneratorOperator, BadInputsSayWhatIsWrong) {
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"nope", {}});
              })
                  .rfind("no generator called 'nope' in "
                         "this program (it registers: ",
                         0),
              0u);
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"brighten", {{"gian", "2"}}}).make({8, 8});
              }),
              "generator 'brighten' has no parameter 'gian': it reads no such parameter and has no "
              "Param of that name (its Params: gain); check the spelling of --param");
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"brighten", {{"gain", "x2"}}}).make({8, 8});
              }),
              "generator 'brighten': param 'gain' of float32 must be a number, got 'x2'");
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"tiled_blur", {}}).make({64, 48, 3});
              }),
              "shape '64x48x3' for generator 'tiled_blur' has 3 values, but its output 'blur_y' "
              "has 2 dimensions (x, y); give 2 extents, e.g. --shape 256x256");
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"throws", {}});
              }),
              "generator 'throws' failed while building its algorithm: no coefficients for this "
              "shape");
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"tiled_blur", {{"tile", "12"}}});
              }),
              "generator 'tiled_blur' failed while building its algorithm: knob 'tile' cannot be "
              "12; its values are 8, 16, 32");
}

TEST(GeneratorOperator, OutputsAndScalarParamsThatCannotBeTunedAreNamed) {
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"two_outputs", {}});
              }),
              "generator 'two_outputs' returns 2 output Func(s); the tuner tunes generators with "
              "one single-valued output");
    const apps::Operator &op = generator_operator({"needs_offset", {}});
    EXPECT_EQ(error_of<std::exception>([&] { op.make({8}); }),
              "generator 'needs_offset': param 'offset' has no value; give one with --param "
              "offset=VALUE (or a default: Param<T>(\"offset\", value))");
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"needs_offset", {{"offset", "1.5"}}}).make({8});
              }),
              "generator 'needs_offset': param 'offset' of int32 must be an integer, got '1.5'");
    apps::OperatorInstance inst = generator_operator({"needs_offset", {{"offset", "7"}}}).make({8});
    inst.bind_inputs();
    Buffer<int32_t> out = inst.realize();
    Buffer<int32_t> in = inst.input_data[0];
    EXPECT_EQ(out(3), in(3) + 7);
}

TEST(GeneratorOperator, ADeclaredShapeIsTunedAndItsEstimatesSizeTheBuffers) {
    const apps::Operator &op = generator_operator({"sgemm", {}});
    EXPECT_EQ(op.shape_names, (std::vector<std::string>{"M", "N", "K"}));
    EXPECT_EQ(op.default_shape, (std::vector<int64_t>{64, 64, 64}));
    // M = 8, N = 16, K = 24: C is N x M, A is K x M (its estimate), B is N x K (what C reads of
    // it once A's width is known).
    apps::OperatorInstance inst = op.make({8, 16, 24});
    EXPECT_EQ(inst.output_extents, (std::vector<int>{16, 8}));
    ASSERT_EQ(inst.input_data.size(), 2u);
    EXPECT_EQ(inst.inputs[0].name(), "A");
    EXPECT_EQ(inst.input_data[0].dim(0).extent, 24);
    EXPECT_EQ(inst.input_data[0].dim(1).extent, 8);
    EXPECT_EQ(inst.input_data[1].dim(0).extent, 16);
    EXPECT_EQ(inst.input_data[1].dim(1).extent, 24);
    // The knobs are the generator's at this shape: tiles that divide N.
    std::optional<SearchSpace> s = generator_knob_space(op, {8, 16, 24}, Target::host());
    ASSERT_TRUE(s);
    EXPECT_EQ(s->knobs()[0].values.size(), 3u); // 4, 8, 16
    std::optional<SearchSpace> wide = generator_knob_space(op, {8, 64, 24}, Target::host());
    ASSERT_TRUE(wide);
    EXPECT_EQ(wide->knobs()[0].values.size(), 4u); // 4, 8, 16, 32
    // The hand schedule and a config of the space compute the right answer.
    inst.bind_inputs();
    op.hand_schedule(inst, Target::host());
    BufferBase want = reference_realize(inst.output, {16, 8});
    EXPECT_LE(apps::max_relative_error(inst.realize(), want), 1e-5);
    apps::OperatorInstance tuned = op.make({8, 16, 24});
    tuned.bind_inputs();
    s->apply(tuned, s->from_json({{"tile_j", 8}, {"order", "jki"}}));
    EXPECT_LE(apps::max_relative_error(tuned.realize(), want), 1e-5);

    EXPECT_EQ(error_of<std::exception>([&] {
                  op.make({8, 16});
              }),
              "shape '8x16' for generator 'sgemm' has 2 values, but the generator's shape is 3 "
              "(M, N, K); give 3 values, e.g. --shape 64x64x64");
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"shape_without_estimates", {}}).make({16});
              }),
              "generator 'shape_without_estimates' declares its shape (N) but its output 'ramp' "
              "has no estimate for 'x', so the tuner does not know the region to compute; give "
              "one per dimension: ramp.set_estimates({{0, extent_of_x}})");
    EXPECT_EQ(error_of<std::exception>([] {
                  generator_operator({"shape_without_estimates", {{"from", "2"}}}).make({16});
              }),
              "generator 'shape_without_estimates': the estimate of 'x' in output 'ramp' starts at "
              "2; the tuner computes outputs from 0, so give min 0");
}

TEST(GeneratorOperator, KnobsAreTheSearchSpaceWithTheirConstraints) {
    const apps::Operator &op = generator_operator({"tiled_blur", {}});
    std::optional<SearchSpace> s = generator_knob_space(op, {64, 48}, Target::host());
    ASSERT_TRUE(s);
    ASSERT_EQ(s->knobs().size(), 3u);
    EXPECT_EQ(s->knobs()[0].name, "tile");
    EXPECT_EQ(s->knobs()[2].values.size(), 3u);
    EXPECT_TRUE(s->valid(s->from_json({{"tile", 8}, {"vector", 4}, {"blur_x_at", "root"}})));
    EXPECT_EQ(s->violated(Config{{0, 1, 0}}),
              "generator 'tiled_blur' failed while building its algorithm: generator constraint "
              "'tile >= 2 * vector' does not hold for tile=8, vector=8, blur_x_at=tile");
    // A config's schedule applies to a fresh instance and computes the right answer.
    apps::OperatorInstance inst = op.make({64, 48});
    s->apply(inst, s->from_json({{"tile", 16}, {"vector", 8}, {"blur_x_at", "inline"}}));
    BufferBase got = inst.realize();
    EXPECT_LE(apps::max_relative_error(got, reference_realize(inst.output, {64, 48})), 1e-6);
    // A knob given as a parameter is fixed.
    const apps::Operator &fixed = generator_operator({"tiled_blur", {{"tile", "16"}}});
    std::optional<SearchSpace> f = generator_knob_space(fixed, {64, 48}, Target::host());
    ASSERT_TRUE(f);
    EXPECT_EQ(f->knobs()[0].values.size(), 1u);
    // Without knobs: no generator space (the automatic one is used).
    EXPECT_FALSE(
        generator_knob_space(generator_operator({"brighten", {}}), {8, 8}, Target::host()));
}

TEST(GeneratorContext, ShapesAndKnobDeclarationsAreChecked) {
    GeneratorContext ctx(Target::host(), {{"size", "64x32"}, {"bad", "64xx"}});
    EXPECT_EQ(ctx.get_shape("size", {}), (std::vector<int64_t>{64, 32}));
    EXPECT_EQ(ctx.get_shape("other", {8}), (std::vector<int64_t>{8}));
    EXPECT_EQ(error_of<std::exception>([&] { ctx.get_shape("bad", {}); }),
              "generator parameter 'bad' '64xx': '' is not a positive integer below 2^31; write "
              "extents like 4096x4096");
    EXPECT_EQ(ctx.knob("t", {4, 8}), 4);
    EXPECT_EQ(error_of<std::exception>([&] {
                  ctx.knob("t", {4, 16});
              }),
              "knob 't' is declared twice with different values");
    EXPECT_EQ(error_of<std::exception>([&] { ctx.knob("u", {}); }),
              "knob 'u' has no values; list at least one");
    EXPECT_EQ(error_of<std::exception>([&] {
                  ctx.knob("w", {2, 4, 2});
              }),
              "knob 'w' lists the value 2 twice");
    EXPECT_EQ(error_of<std::exception>([&] { ctx.constraint("t > 4", false); }),
              "generator constraint 't > 4' does not hold for t=4");
    EXPECT_EQ(ctx.knob_range("r", 1, 7, 3), 1);
    EXPECT_EQ(ctx.knobs().back().integers, (std::vector<int64_t>{1, 4, 7}));
    EXPECT_EQ(error_of<std::exception>([&] { ctx.knob_range("s", 5, 1); }),
              "knob 's': range 5..1 step 1 must have lo <= hi, a positive step and at most 100000 "
              "values");
    EXPECT_EQ(ctx.knob_choice("c", {"a", "b"}), "a");
    ctx.set_knob_values({{"v", "8"}});
    EXPECT_EQ(ctx.knob("v", {4, 8}), 8);
    EXPECT_EQ(error_of<std::exception>([&] { ctx.set_tolerance(-1); }),
              "set_tolerance: -1 must be a finite number >= 0");
}

TEST(GeneratorContext, ADeclaredShapeComesFromTheTunerTheParametersOrTheDefaults) {
    GeneratorContext built(Target::host(), {{"K", "256"}});
    EXPECT_EQ(built.shape({"M", "N", "K"}, {64, 64, 64}), (std::vector<int64_t>{64, 64, 256}));
    EXPECT_TRUE(built.unused().empty());
    EXPECT_EQ(built.shape_names(), (std::vector<std::string>{"M", "N", "K"}));
    EXPECT_EQ(error_of<std::exception>([&] { built.shape({"M"}, {1}); }),
              "shape: the generator declares its shape twice");
    GeneratorContext tuned(Target::host(), {});
    tuned.set_tuning_shape({8, 16, 24});
    EXPECT_EQ(tuned.shape({"M", "N", "K"}, {64, 64, 64}), (std::vector<int64_t>{8, 16, 24}));
    GeneratorContext wrong(Target::host(), {});
    wrong.set_tuning_shape({8, 16});
    EXPECT_EQ(error_of<std::exception>([&] {
                  wrong.shape({"M", "N", "K"}, {64, 64, 64});
              }),
              "the shape being tuned has 2 values, but the generator's shape is 3 (M, N, K)");
    GeneratorContext bad(Target::host(), {{"N", "0"}});
    EXPECT_EQ(error_of<std::exception>([&] { bad.shape({"N"}, {8}); }),
              "shape: parameter 'N' is 0; give a value in 1..2^31-1");
    EXPECT_EQ(error_of<std::exception>([&] {
                  GeneratorContext(Target::host(), {}).shape({"M", "N"}, {1});
              }),
              "shape: give one name per default value (2 names, 1 defaults)");
    EXPECT_EQ(error_of<std::exception>([&] {
                  GeneratorContext(Target::host(), {}).shape({"M", "M"}, {1, 2});
              }),
              "shape: the name 'M' is listed twice");
    EXPECT_EQ(
        error_of<std::exception>([&] { GeneratorContext(Target::host(), {}).shape({"M"}, {0}); }),
        "shape: the default of 'M' is 0; give a value in 1..2^31-1");
}

// --- the checker --------------------------------------------------------------------------------

TEST(Checker, SamplesCornersEdgesAndAThousandPoints) {
    std::vector<std::vector<int>> p = sample_points({64, 48}, 1000, 1);
    std::set<std::vector<int>> set(p.begin(), p.end());
    for (auto c : std::vector<std::vector<int>>{{0, 0}, {63, 0}, {0, 47}, {63, 47}, {1, 47}})
        EXPECT_TRUE(set.count(c)) << c[0] << "," << c[1];
    EXPECT_GE(p.size(), 1100u); // 1000 random points and the edges
    EXPECT_EQ(p, sample_points({64, 48}, 1000, 1));
}

TEST(Checker, PassesACorrectCandidateAndCatchesWrongUnwrittenAndRacyOnes) {
    const apps::Operator &op = generator_operator({"brighten", {}});
    ReferenceChecker checker(op.make({40, 30}), op.tolerance);
    apps::OperatorInstance cand = op.make({40, 30});
    CompiledPipeline compiled = cand.pipeline().compile_jit();
    auto run = [&](BufferBase &o) -> std::string {
        return compiled.run({o}) == 0 ? "" : kiln_last_error_message();
    };
    CheckResult ok = checker.check(cand, run);
    EXPECT_EQ(ok.status, "ok") << ok.error;

    // A wrong value at one corner.
    CheckResult wrong = checker.check(cand, [&](BufferBase &o) {
        std::string e = run(o);
        Buffer<float> b(o);
        b(39, 29) += 0.5f;
        return e;
    });
    EXPECT_EQ(wrong.status, "wrong_answer");
    EXPECT_EQ(wrong.error.rfind("output 'brightened' at (39, 29): got ", 0), 0u) << wrong.error;

    // Rows never written, wherever they are (not only at sampled points).
    CheckResult unwritten = checker.check(cand, [&](BufferBase &o) {
        Buffer<float> out(o);
        BufferBase scratch = cand.make_output();
        std::string e = run(scratch);
        Buffer<float> s(scratch);
        for (int y = 0; y < 30; y++)
            for (int x = 0; x < 40; x++)
                if (!(x == 17 && y == 13)) out(x, y) = s(x, y);
        return e;
    });
    EXPECT_EQ(unwritten.status, "wrong_answer");
    EXPECT_EQ(unwritten.error.rfind("output 'brightened' at (17, 13) was never written (it still "
                                    "holds the NaN it was filled with; expected ",
                                    0),
              0u)
        << unwritten.error;

    // An answer that depends on the number of threads.
    CheckResult racy = checker.check(cand, [&](BufferBase &o) {
        std::string e = run(o);
        Buffer<float> b(o);
        if (kiln_get_num_threads() == 1) b(5, 5) += 1;
        return e;
    });
    EXPECT_EQ(racy.status, "wrong_answer");
    EXPECT_NE(racy.error.find("differs between"), std::string::npos) << racy.error;

    // Right on the first input set only.
    int calls = 0;
    CheckResult second = checker.check(cand, [&](BufferBase &o) {
        std::string e = run(o);
        Buffer<float> b(o);
        if (++calls == 3) b(0, 0) = 1e6f;
        return e;
    });
    EXPECT_EQ(second.status, "wrong_answer");
    EXPECT_NE(second.error.find("with the second input set"), std::string::npos) << second.error;
}

TEST(Checker, IntegerOutputsAreFilledWithASentinel) {
    const apps::Operator &op = generator_operator({"threshold", {}});
    EXPECT_EQ(op.tolerance, 0); // ctx.set_tolerance(0)
    ReferenceChecker checker(op.make({33, 7}), op.tolerance);
    apps::OperatorInstance cand = op.make({33, 7});
    CompiledPipeline compiled = cand.pipeline().compile_jit();
    CheckResult ok = checker.check(cand, [&](BufferBase &o) -> std::string {
        return compiled.run({o}) == 0 ? "" : kiln_last_error_message();
    });
    EXPECT_EQ(ok.status, "ok") << ok.error;
    CheckResult skipped = checker.check(cand, [&](BufferBase &) -> std::string { return ""; });
    EXPECT_EQ(skipped.status, "wrong_answer");
    EXPECT_NE(skipped.error.find("still holds the sentinel"), std::string::npos) << skipped.error;
}

// --- EXE --kiln-worker
// ----------------------------------------------------------------------------

namespace {

/// The next reply of the worker that is not an event (10 s at most).
nlohmann::json reply_of(WorkerProcess &w) {
    for (int i = 0; i < 200; i++) {
        while (auto line = w.next_line()) {
            nlohmann::json j = nlohmann::json::parse(*line);
            if (!j.contains("event")) return j;
        }
        pollfd fd{w.read_fd(), POLLIN, 0};
        if (poll(&fd, 1, 50) > 0 && !w.pump()) return {{"status", "died"}};
    }
    return {{"status", "no answer"}};
}

} // namespace

TEST(GeneratorWorker, TheGeneratorExecutableServesTheWorkerProtocol) {
    WorkerProcess w(KILN_TEST_GENERATORS, {"--kiln-worker"});
    apps::OperatorInstance inst = generator_operator({"brighten", {{"gain", "2"}}}).make({32, 8});
    nlohmann::json trace = ScheduleTrace::capture({inst.output}).to_json();
    ASSERT_TRUE(w.send({{"cmd", "build"},
                        {"op", "brighten[gain=2]"},
                        {"shape", {32, 8}},
                        {"trace", trace},
                        {"threads", 2}}));
    nlohmann::json built = reply_of(w);
    ASSERT_EQ(built["status"], "built") << built.dump();
    ASSERT_TRUE(w.send({{"cmd", "measure"}, {"min_time_ms", 5}}));
    nlohmann::json measured = reply_of(w);
    EXPECT_EQ(measured["status"], "ok") << measured.dump();
    // A name that is neither a built-in operator nor a generator of the executable.
    ASSERT_TRUE(w.send({{"cmd", "build"}, {"op", "nope[a=1]"}, {"shape", {8}}, {"trace", trace}}));
    nlohmann::json unknown = reply_of(w);
    EXPECT_EQ(unknown["status"], "compile_error");
    EXPECT_EQ(unknown.value("error", "").rfind("unknown operator 'nope[a=1]'", 0), 0u)
        << unknown.dump();
}

// --- kiln tune --generator, end to end
// ------------------------------------------------------------

TEST(GeneratorTune, TunesRecordsOkMeasurementsAndResumes) {
    TempDir dir;
    std::string db = dir / "k.db";
    Ran first = kiln_cli(tune_generator("brighten", db, "--shape 64x48 --param gain=2 --trials 3"));
    ASSERT_EQ(first.status, 0) << first.output;
    EXPECT_NE(first.output.find("best: "), std::string::npos) << first.output;
    auto s = statuses(db, "brighten[gain=2]");
    EXPECT_EQ(s["ok"], 5) << first.output; // 3 trials + the default and hand schedules
    Ran again = kiln_cli(tune_generator("brighten", db, "--shape 64x48 --param gain=2 --trials 2"));
    ASSERT_EQ(again.status, 0) << again.output;
    auto t = statuses(db, "brighten[gain=2]");
    EXPECT_EQ(t["ok"], 7) << again.output; // the baselines are not measured again
    Ran sim = kiln_cli(tune_generator("brighten", db, "--shape 64x48 --param gain=2 --simulate"));
    EXPECT_EQ(sim.status, 0) << sim.output;
    EXPECT_NE(sim.output.find("random"), std::string::npos) << sim.output;
    Ran list = kiln_cli("db list --db " + db);
    EXPECT_NE(list.output.find("brighten[gain=2]"), std::string::npos) << list.output;
    Ran best = kiln_cli("db best 'brighten[gain=2]' --shape 64x48 --db " + db);
    EXPECT_EQ(best.status, 0) << best.output;
    Ran report = kiln_cli("db report -o " + dir.path + "/r.html --db " + db);
    EXPECT_EQ(report.status, 0) << report.output;
}

TEST(GeneratorTune, StoppedBySigtermTheRunResumes) {
    TempDir dir;
    std::string db = dir / "k.db", log = dir / "log";
    std::string args = tune_generator("brighten", db, "--shape 256x64 --trials 1000");
    std::vector<std::string> words;
    std::istringstream split(args);
    for (std::string w; split >> w;)
        words.push_back(w);
    pid_t pid = autotune_test::spawn_kiln(words, log);
    ASSERT_GT(pid, 0);
    // Wait (at most 120 s: a deadline, not a timing gate) for a few measurements.
    int64_t rows = 0;
    int status = 0;
    for (int i = 0; i < 2400 && rows < 4 && waitpid(pid, &status, WNOHANG) == 0; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        try {
            rows = statuses(db, "brighten")["ok"];
        } catch (const std::exception &) {
        }
    }
    if (rows < 4) kill(pid, SIGKILL);
    ASSERT_GE(rows, 4) << [&] {
        std::ifstream f(log);
        return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    }();
    kill(pid, SIGTERM); // kiln passes it on to the generator executable, which stops cleanly
    waitpid(pid, &status, 0);
    std::ifstream f(log);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(WIFEXITED(status)) << text;
    EXPECT_EQ(WEXITSTATUS(status), 130) << text;
    EXPECT_NE(text.find(std::string("Resume with the same command (kiln tune --generator ") +
                        KILN_TEST_GENERATORS + " brighten --shape 256x64"),
              std::string::npos)
        << text;
    Ran again = kiln_cli(tune_generator("brighten", db, "--shape 256x64 --trials 2"));
    ASSERT_EQ(again.status, 0) << again.output;
    EXPECT_NE(again.output.find("resuming run 1"), std::string::npos) << again.output;
}

TEST(GeneratorTune, KnobSpaceTunes) {
    TempDir dir;
    std::string db = dir / "k.db";
    Ran r = kiln_cli(tune_generator("tiled_blur", db, "--shape 64x48 --trials 4"));
    ASSERT_EQ(r.status, 0) << r.output;
    auto s = statuses(db, "tiled_blur");
    EXPECT_EQ(s["ok"], 6) << r.output; // 4 trials + the default and hand schedules
}

TEST(GeneratorTune, AGeneratorThatDeclaresItsShapeTunesAtIt) {
    TempDir dir;
    std::string db = dir / "k.db";
    Ran r = kiln_cli(tune_generator("sgemm", db, "--shape 16x32x24 --trials 3"));
    ASSERT_EQ(r.status, 0) << r.output;
    auto s = statuses(db, "sgemm", "16x32x24");
    EXPECT_EQ(s["ok"], 5) << r.output; // 3 trials + the default and hand schedules
    Ran wrong = kiln_cli(tune_generator("sgemm", db, "--shape 16x32 --trials 1"));
    EXPECT_EQ(wrong.status, 1);
    EXPECT_NE(wrong.output.find("kiln: shape '16x32' for generator 'sgemm' has 2 values, but the "
                                "generator's shape is 3 (M, N, K)"),
              std::string::npos)
        << wrong.output;
}

TEST(GeneratorTune, AScheduleThatLeavesPointsUnwrittenIsAWrongAnswer) {
    TempDir dir;
    std::string db = dir / "k.db";
    Ran r = kiln_cli(tune_generator("bounded", db, "--shape 32x24 --param rows=8 --trials 1"));
    ASSERT_EQ(r.status, 0) << r.output;
    auto s = statuses(db, "bounded[rows=8]");
    EXPECT_EQ(s["wrong_answer"], 2) << r.output; // the hand schedule and the one search trial
    EXPECT_EQ(s["ok"], 1) << r.output;           // the default schedule
    bool named = false;
    for (const std::string &e : errors_of(db, "bounded[rows=8]"))
        named |= e.find("at (0, 8) was never written") != std::string::npos;
    EXPECT_TRUE(named);
}

TEST(GeneratorTune, AConfigWhoseChecksFailAtTheShapeIsRejectedBeforeMeasuring) {
    // 60 is not a multiple of 8: tail=round_up would compute (and read) x up to 63. Its lowered
    // code fails a check before any loop, so no worker builds or runs it.
    TempDir dir;
    std::string db = dir / "k.db";
    Ran r = kiln_cli(tune_generator("rounds_up", db, "--shape 60x4 --trials 2"));
    ASSERT_EQ(r.status, 0) << r.output;
    auto s = statuses(db, "rounds_up", "60x4");
    EXPECT_EQ(s["ok"], 3) << r.output; // tail=guard, and the default and hand schedules
    EXPECT_EQ(s["compile_error"], 1) << r.output;
    std::vector<std::string> errors = errors_of(db, "rounds_up");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].rfind("rejected before measuring: at this shape, ", 0), 0u) << errors[0];
    EXPECT_NE(errors[0].find("63"), std::string::npos) << errors[0];
    EXPECT_NE(r.output.find("1 of the search configs were rejected before measuring"),
              std::string::npos)
        << r.output;
    // At a width that is a multiple of 8 both configs run.
    Ran whole = kiln_cli(tune_generator("rounds_up", db, "--shape 64x4 --trials 2"));
    ASSERT_EQ(whole.status, 0) << whole.output;
    EXPECT_EQ(statuses(db, "rounds_up", "64x4")["ok"], 4) << whole.output;
}

TEST(GeneratorTune, BadInputsSayWhatIsWrong) {
    TempDir dir;
    std::string db = dir / "k.db";
    Ran unknown = kiln_cli(tune_generator("nope", db, "--shape 8x8"));
    EXPECT_EQ(unknown.status, 1);
    EXPECT_NE(unknown.output.find("kiln: no generator called 'nope' in this program (it registers: "
                                  "bounded, brighten, crashes, needs_offset, rounds_up, "
                                  "sgemm, shape_without_estimates, threshold, throws, "
                                  "tiled_blur, two_outputs)"),
              std::string::npos)
        << unknown.output;
    Ran param = kiln_cli(tune_generator("brighten", db, "--shape 8x8 --param gian=2"));
    EXPECT_EQ(param.status, 1);
    EXPECT_NE(param.output.find("kiln: generator 'brighten' has no parameter 'gian'"),
              std::string::npos)
        << param.output;
    Ran shape = kiln_cli(tune_generator("brighten", db, "--shape 8x8x3"));
    EXPECT_EQ(shape.status, 1);
    EXPECT_NE(shape.output.find("kiln: shape '8x8x3' for generator 'brighten' has 3 values, but "
                                "its output 'brightened' has 2 dimensions (x, y)"),
              std::string::npos)
        << shape.output;
    Ran throws = kiln_cli(tune_generator("throws", db, "--shape 8x8"));
    EXPECT_EQ(throws.status, 1);
    EXPECT_NE(throws.output.find("kiln: generator 'throws' failed while building its algorithm: no "
                                 "coefficients for this shape"),
              std::string::npos)
        << throws.output;
    // Under AddressSanitizer the generator's SIGSEGV would be caught by the sanitizer (which
    // exits with status 1); let the signal kill it as it does in a user's build.
    const char *asan = std::getenv("ASAN_OPTIONS");
    std::string asan_before = asan ? asan : "";
    setenv("ASAN_OPTIONS",
           (asan_before.empty() ? "" : asan_before + ":").append("handle_segv=0").c_str(), 1);
    Ran crashes = kiln_cli(tune_generator("crashes", db, "--shape 8x8"));
    if (asan)
        setenv("ASAN_OPTIONS", asan_before.c_str(), 1);
    else
        unsetenv("ASAN_OPTIONS");
    EXPECT_EQ(crashes.status, 1);
    EXPECT_NE(crashes.output.find("was killed by signal 11 (Segmentation fault) while tuning "
                                  "'crashes'; run it alone to debug: "),
              std::string::npos)
        << crashes.output;
    Ran no_shape = kiln_cli(tune_generator("brighten", db, ""));
    EXPECT_NE(no_shape.output.find("kiln: --generator: give the shape to tune with --shape: the "
                                   "extents of the generator's output (e.g. --shape 4096x4096), "
                                   "or the values of the shape it declares with ctx.shape"),
              std::string::npos)
        << no_shape.output;
    Ran missing = kiln_cli("tune --generator " + dir.path + "/no-such-exe brighten --shape 8x8");
    EXPECT_NE(missing.output.find("/no-such-exe: No such file or directory; give the path of a "
                                  "generator executable"),
              std::string::npos)
        << missing.output;
    Ran bad_param = kiln_cli(tune_generator("brighten", db, "--shape 8x8 --param gain"));
    EXPECT_NE(bad_param.output.find("kiln: --param gain: write key=value, e.g. --param vector=16"),
              std::string::npos)
        << bad_param.output;
    Ran twice =
        kiln_cli(tune_generator("brighten", db, "--shape 8x8 --param gain=1 --param gain=2"));
    EXPECT_NE(twice.output.find("kiln: --param gain=2: 'gain' is given twice"), std::string::npos)
        << twice.output;
    Ran worker = kiln_cli(tune_generator("brighten", db, "--shape 8x8 --worker /bin/true"));
    EXPECT_NE(worker.output.find("kiln: --worker /bin/true: with --generator the generator "
                                 "executable is the worker"),
              std::string::npos)
        << worker.output;
    Ran not_a_generator = kiln_cli("tune --generator /bin/true brighten --shape 8x8");
    EXPECT_EQ(not_a_generator.status, 1);
    EXPECT_NE(not_a_generator.output.find("kiln: --generator /bin/true: this program does not "
                                          "serve kiln tune (it does not know --kiln-tune); give a "
                                          "generator executable linked with kiln::generator"),
              std::string::npos)
        << not_a_generator.output;
    Ran builtin = kiln_cli("tune blur --param gain=2");
    EXPECT_NE(builtin.output.find("kiln: --param is for generators: add --generator EXE"),
              std::string::npos)
        << builtin.output;
}
