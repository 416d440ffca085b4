// Kernels specialized per shape from the tuning database and the lockfile (tools/
// GeneratorShapes.h), end to end with the test generator executable (kiln_test_generators): tune
// two shapes, lock them, build the shape-dispatched library, call it from C at each tuned shape
// and at a third (generic) one, then build again from the lockfile alone; and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/autotune/TempDir.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autotune/GeneratorOperator.h"
#include "autotune/Tuner.h"
#include "schedule/ScheduleTrace.h"
#include "tuning_db/TuningDB.h"

#if defined(KILN_TEST_GENERATORS) && defined(KILN_TEST_CC)

using namespace kiln;
using kiln::autotune_test::TempDir;
using ::testing::HasSubstr;

namespace {

struct Ran {
    int status = -1;
    std::string output;
};

/// Runs a shell command; stdout and stderr together.
Ran run(const std::string &command) {
    Ran r;
    FILE *p = popen((command + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
        r.output.append(buf, n);
    int status = pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

std::string read_text(const std::string &path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// The test generator's command building brighten (offset=1) for 64x48 and 40x24 into dir.
std::string build_command(const std::string &dir, const std::string &db, const std::string &lock,
                          const std::string &shapes = "64x48,40x24") {
    return std::string(KILN_TEST_GENERATORS) + " -g brighten -o " + dir +
           " -e static_library,c_header,lowered_stmt --shapes " + shapes +
           (db.empty() ? "" : " --db " + db) + (lock.empty() ? "" : " --lock " + lock) +
           " offset=1";
}

/// brighten(in, gain, out) = in * gain + 1 at three shapes; prints the variant each ran. With an
/// argument, forces that target variant of a multi-target kernel first and prints it too.
const char *program = R"(#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "brighten.h"
static int call(int w, int h) {
    float *in = malloc(sizeof(float) * w * h), *out = malloc(sizeof(float) * w * h);
    kiln_dimension_t din[2] = {{0, 0, 1, 0}, {0, 0, 0, 0}}, dout[2];
    kiln_buffer_t bin, bout;
    int i, code, wrong = 0;
    din[0].extent = w;
    din[1].extent = h;
    din[1].stride = w;
    memcpy(dout, din, sizeof(din));
    memset(&bin, 0, sizeof(bin));
    memset(&bout, 0, sizeof(bout));
    for (i = 0; i < w * h; i++) in[i] = (float)(i % 13) * 0.5f;
    bin.host = (uint8_t *)in;
    bout.host = (uint8_t *)out;
    bin.type.code = bout.type.code = (uint8_t)kiln_type_float;
    bin.type.bits = bout.type.bits = 32;
    bin.type.lanes = bout.type.lanes = 1;
    bin.dimensions = bout.dimensions = 2;
    bin.dim = din;
    bout.dim = dout;
    code = brighten(&bin, 3.0f, &bout);
    for (i = 0; code == 0 && i < w * h; i++) wrong += out[i] != in[i] * 3.0f + 1.0f;
    printf("%dx%d ran %s code %d wrong %d\n", w, h, kiln_last_shape_variant(), code, wrong);
    if (code != 0) printf("error: %s\n", kiln_last_error_message());
    free(in);
    free(out);
    return code != 0 || wrong != 0;
}
int main(int argc, char **argv) {
    int failures;
    if (argc > 1) kiln_force_target(argv[1]);
    failures = call(64, 48) + call(40, 24) + call(33, 17);
    if (argc > 1) printf("target %s\n", kiln_last_target_variant());
    return failures;
}
)";

/// Builds the C program against dir/brighten.a and runs it (with `force` as its argument).
Ran build_and_run(const TempDir &tmp, const std::string &dir, const std::string &force = "") {
    std::ofstream(tmp / "main.c") << program;
    Ran cc = run(std::string(KILN_TEST_CC) + " -std=c99 -I" + dir + " -I" +
                 KILN_TEST_RUNTIME_INCLUDE_DIR + " " + tmp / "main.c" + " " + dir + "/brighten.a " +
                 KILN_TEST_RUNTIME_LIBRARY + " " KILN_TEST_LINK_FLAGS " -fopenmp -lm -o " + dir +
                 "/main");
    if (cc.status != 0) return cc;
    return run(dir + "/main" + (force.empty() ? "" : " " + force));
}

std::string tune(const std::string &db, const std::string &shape) {
    return std::string(KILN_CLI_PATH) + " tune --generator " + KILN_TEST_GENERATORS +
           " brighten --param offset=1 --shape " + shape + " --db " + db +
           " --strategy random --jobs 1 --min-time-ms 5 --remeasure 0 --quiet --trials 3 "
           "--no-baselines"; // the best is a searched schedule, not the empty default
}

} // namespace

TEST(ShapeDispatch, TunedShapesDispatchFromTheDatabaseAndThenFromTheLockfileAlone) {
    TempDir tmp;
    std::string db = tmp / "kiln.db", lock = tmp / "kiln.lock.json";
    for (const char *shape : {"64x48", "40x24"}) {
        Ran t = run(tune(db, shape));
        ASSERT_EQ(t.status, 0) << t.output;
    }
    Ran update = run(std::string(KILN_CLI_PATH) + " lock update --generator " +
                     KILN_TEST_GENERATORS + " brighten --shape 64x48 --shape 40x24 --param " +
                     "offset=1 --db " + db + " --lock " + lock);
    ASSERT_EQ(update.status, 0) << update.output;
    EXPECT_THAT(update.output, HasSubstr("wrote " + lock));
    nlohmann::json locked = nlohmann::json::parse(read_text(lock));
    const nlohmann::json &kernel = locked["kernels"]["brighten[offset=1]"];
    ASSERT_TRUE(kernel.contains("64x48") && kernel.contains("40x24")) << locked.dump(2);
    EXPECT_EQ(kernel["64x48"]["source"]["database"], db);
    int64_t run_64 = kernel["64x48"]["source"]["run"];
    EXPECT_FALSE(kernel["64x48"]["schedule"]["directives"].empty()) << locked.dump(2);

    // From the database.
    std::string from_db = tmp / "from_db";
    Ran b = run(build_command(from_db, db, lock));
    ASSERT_EQ(b.status, 0) << b.output;
    std::string header = read_text(from_db + "/brighten.h");
    EXPECT_THAT(header, HasSubstr(" *   64x48: database " + db + ", run " + std::to_string(run_64) +
                                  ", measured "));
    EXPECT_THAT(header, HasSubstr(" *   40x24: database " + db + ", run "));
    EXPECT_THAT(header, HasSubstr(" *   generic: the generator's hand schedule (any other shape)"));
    EXPECT_THAT(header, HasSubstr("int brighten(kiln_buffer_t *in, float gain, kiln_buffer_t "
                                  "*brightened);"));
    Ran c = build_and_run(tmp, from_db);
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_THAT(c.output, HasSubstr("64x48 ran 64x48 code 0 wrong 0"));
    EXPECT_THAT(c.output, HasSubstr("40x24 ran 40x24 code 0 wrong 0"));
    EXPECT_THAT(c.output, HasSubstr("33x17 ran generic code 0 wrong 0"));

    // A lockfile that holds another schedule than the database's best: the database wins and
    // the header says to update the lockfile.
    nlohmann::json other = locked;
    other["kernels"]["brighten[offset=1]"]["64x48"]["schedule"]["directives"] =
        nlohmann::json::array();
    std::string other_lock = tmp / "other.lock.json";
    std::ofstream(other_lock) << other.dump(2);
    Ran o = run(build_command(tmp / "other", db, other_lock));
    ASSERT_EQ(o.status, 0) << o.output;
    EXPECT_THAT(read_text(tmp / "other/brighten.h"),
                HasSubstr("; " + other_lock + " holds another schedule: run `kiln lock update`"));

    // Without the database: the lockfile's schedules, the same lowered code.
    std::filesystem::remove(db);
    std::string from_lock = tmp / "from_lock";
    Ran l = run(build_command(from_lock, db, lock));
    ASSERT_EQ(l.status, 0) << l.output;
    std::string lock_header = read_text(from_lock + "/brighten.h");
    EXPECT_THAT(lock_header, HasSubstr(" *   64x48: lockfile " + lock + " (from database " + db +
                                       ", run " + std::to_string(run_64) + ", measured "));
    EXPECT_THAT(lock_header, HasSubstr(" *   40x24: lockfile " + lock + " (from database "));
    EXPECT_EQ(read_text(from_lock + "/brighten.stmt"), read_text(from_db + "/brighten.stmt"));
    Ran c2 = build_and_run(tmp, from_lock);
    ASSERT_EQ(c2.status, 0) << c2.output;
    EXPECT_THAT(c2.output, HasSubstr("64x48 ran 64x48 code 0 wrong 0"));
    EXPECT_THAT(c2.output, HasSubstr("33x17 ran generic code 0 wrong 0"));
}

TEST(ShapeDispatch, LockUpdateWithoutADatabaseSaysToTuneFirst) {
    TempDir tmp;
    Ran u = run(std::string(KILN_CLI_PATH) + " lock update --generator " + KILN_TEST_GENERATORS +
                " brighten --shape 64x48 --db " + tmp / "none.db" + " --lock " + tmp / "l.json");
    EXPECT_EQ(u.status, 1);
    EXPECT_THAT(u.output, HasSubstr("error: kiln lock update: the database " + tmp / "none.db" +
                                    " does not exist; tune first with `kiln tune --generator "));
    EXPECT_FALSE(std::filesystem::exists(tmp / "l.json"));
}

TEST(ShapeDispatch, AShapeWithoutARecordFallsBackToTheHandScheduleAndSaysWhy) {
    TempDir tmp;
    std::string lock = tmp / "kiln.lock.json";
    Ran b = run(build_command(tmp / "out", tmp / "missing.db", lock));
    ASSERT_EQ(b.status, 0) << b.output;
    EXPECT_THAT(read_text(tmp / "out/brighten.h"),
                HasSubstr(" *   64x48: the generator's hand schedule (database " +
                          tmp / "missing.db" + " does not exist, and " + lock + " has no entry)"));
}

TEST(ShapeDispatch, ALockedScheduleThatNoLongerReplaysIsAnErrorNamingTheShapeAndTheFix) {
    TempDir tmp;
    std::string lock = tmp / "kiln.lock.json";
    ScheduleTrace stale;
    stale.algorithm_hash = 1; // recorded on another version of the algorithm
    nlohmann::json entry = {
        {"schedule", nlohmann::json::parse(stale.to_json_string())},
        {"source",
         {{"database", "old.db"}, {"run", 7}, {"median_ms", 0.5}, {"target", "somewhere"}}}};
    nlohmann::json file = {{"version", 1},
                           {"kernels", {{"brighten[offset=1]", {{"40x24", entry}}}}}};
    std::ofstream(lock) << file.dump(2);
    Ran b = run(build_command(tmp / "out", "", lock));
    EXPECT_EQ(b.status, 1);
    EXPECT_THAT(b.output, HasSubstr("error: lockfile " + lock +
                                    ": the schedule of brighten[offset=1] at 40x24 no longer "
                                    "replays on the generator ("));
    EXPECT_THAT(b.output, HasSubstr("); refresh the lockfile from a database that has it with "
                                    "`kiln lock update --generator "));
    EXPECT_THAT(b.output, HasSubstr(" brighten --shape 64x48 --shape 40x24 --param offset=1 --db "
                                    "tuning_db/kiln.db --lock " +
                                    lock + "`, or re-tune with `kiln tune --generator "));
}

TEST(ShapeDispatch, ADatabaseOfAnotherTargetIsAnErrorNamingBothKeys) {
    TempDir tmp;
    std::string db = tmp / "kiln.db";
    {
        autotune::GeneratorSpec spec{"brighten", {{"offset", "1"}}};
        const apps::Operator &op = autotune::generator_operator(spec);
        auto d = tuning_db::Database::open(db);
        int64_t w = d.workload_id(autotune::workload_key(op, {64, 48}));
        tuning_db::TargetKey other{"pentium4", "+sse2", 1, "kiln 0 / LLVM 0"};
        int64_t t = d.target_id(other);
        int64_t run_id = d.create_run(w, t, "random", 1, 1, 0, "{}");
        int64_t c = d.config_id(
            "h", "{}", ScheduleTrace::capture({op.make({64, 48}).output}).to_json_string());
        d.record_measurement({run_id, w, t, c, tuning_db::Status::ok, {1.0}, 1.0, 0, 1, ""});
    }
    Ran b = run(build_command(tmp / "out", db, ""));
    EXPECT_EQ(b.status, 1);
    std::string wanted =
        autotune::target_key(Target::host(), autotune::default_threads()).to_string();
    EXPECT_THAT(b.output, HasSubstr("error: database " + db +
                                    " holds brighten[offset=1] at 64x48 only for the target "
                                    "key(s) 'pentium4 threads=1 kiln 0 / LLVM 0'; this build "
                                    "wants '" +
                                    wanted + "' (a database from another machine or target"));
}

TEST(ShapeDispatch, ADatabaseScheduleThatDoesNotReplayIsAnErrorNamingTheShape) {
    TempDir tmp;
    std::string db = tmp / "kiln.db";
    {
        autotune::GeneratorSpec spec{"brighten", {{"offset", "1"}}};
        const apps::Operator &op = autotune::generator_operator(spec);
        auto d = tuning_db::Database::open(db);
        int64_t w = d.workload_id(autotune::workload_key(op, {64, 48}));
        int64_t t = d.target_id(autotune::target_key(Target::host(), autotune::default_threads()));
        int64_t run_id = d.create_run(w, t, "random", 1, 1, 0, "{}");
        ScheduleTrace stale;
        stale.algorithm_hash = 1;
        int64_t c = d.config_id("h", "{}", stale.to_json_string());
        d.record_measurement({run_id, w, t, c, tuning_db::Status::ok, {1.0}, 1.0, 0, 1, ""});
    }
    Ran b = run(build_command(tmp / "out", db, ""));
    EXPECT_EQ(b.status, 1);
    EXPECT_THAT(b.output, HasSubstr("error: the database's best schedule of brighten[offset=1] "
                                    "at 64x48 does not replay on the generator ("));
    EXPECT_THAT(b.output, HasSubstr("); re-tune with `kiln tune --generator "));
}

TEST(ShapeDispatch, AParameterTheGeneratorDoesNotHaveIsAnError) {
    TempDir tmp;
    Ran b = run(build_command(tmp / "out", "", tmp / "l.json") + " ofset=2");
    EXPECT_EQ(b.status, 1);
    EXPECT_THAT(b.output, HasSubstr("error: generator 'brighten' has no parameter 'ofset': it does "
                                    "not read it and has no scalar Param of that name (check the "
                                    "spelling in PARAMS)"));
}

TEST(ShapeDispatch, AShapeThatDoesNotFitTheOutputIsAnError) {
    TempDir tmp;
    Ran b = run(build_command(tmp / "out", "", tmp / "kiln.lock.json", "64x48,8x8x3"));
    EXPECT_EQ(b.status, 1);
    EXPECT_THAT(b.output, HasSubstr("error: shape 8x8x3 of kernel 'brighten' has 3 values, but "
                                    "the shape of generator 'brighten' has 2 (x, y); "
                                    "list 2 values per shape in SHAPES"));
}

TEST(ShapeDispatch, AGeneratorThatDeclaresItsShapeDispatchesOnItsOutputsEstimates) {
    TempDir tmp;
    std::string gen = std::string(KILN_TEST_GENERATORS) + " -g sgemm -e static_library,c_header";
    // sgemm's shape is M x N x K and its output is N x M.
    Ran b = run(gen + " -o " + (tmp / "out") + " --shapes 16x32x24,8x64x24");
    ASSERT_EQ(b.status, 0) << b.output;
    EXPECT_THAT(b.output, HasSubstr("sgemm 16x32x24: the generator's hand schedule"));
    std::string header = read_text(tmp / "out/sgemm.h");
    EXPECT_THAT(header, HasSubstr(" *   32x16: the generator's hand schedule"));
    EXPECT_THAT(header, HasSubstr(" *   64x8: the generator's hand schedule"));
    Ran same = run(gen + " -o " + (tmp / "same") + " --shapes 16x32x24,16x32x8");
    EXPECT_EQ(same.status, 1);
    EXPECT_THAT(same.output,
                HasSubstr("error: shapes 16x32x24 and 16x32x8 of kernel 'sgemm' both make an "
                          "output of 32x16; the kernel chooses its variant by the output's "
                          "extents, so list only one of them in SHAPES"));
    Ran none = run(std::string(KILN_TEST_GENERATORS) + " -g shape_without_estimates -o " +
                   (tmp / "none") + " --shapes 16");
    EXPECT_EQ(none.status, 1);
    EXPECT_THAT(none.output, HasSubstr("error: generator 'shape_without_estimates' declares its "
                                       "shape, so each dimension of its output needs an estimate "
                                       "from 0 (Func::set_estimates): the kernel chooses its "
                                       "variant by the output's extents"));
}

TEST(ShapeDispatch, ThreadsSelectTheRecordsTunedWithThatManyThreads) {
    TempDir tmp;
    std::string db = tmp / "kiln.db";
    Ran t = run(tune(db, "40x24") + " --threads 1");
    ASSERT_EQ(t.status, 0) << t.output;
    Ran one = run(build_command(tmp / "one", db, "", "40x24") + " --threads 1");
    ASSERT_EQ(one.status, 0) << one.output;
    EXPECT_THAT(read_text(tmp / "one/brighten.h"), HasSubstr(" threads=1 kiln "));
    Ran other = run(build_command(tmp / "three", db, "", "40x24") + " --threads 3");
    EXPECT_EQ(other.status, 1);
    EXPECT_THAT(other.output, HasSubstr("only for the target key(s) '"));
    EXPECT_THAT(other.output, HasSubstr(" threads=3 kiln "));
    Ran bad = run(build_command(tmp / "bad", db, "", "40x24") + " --threads 0");
    EXPECT_EQ(bad.status, 1);
    EXPECT_THAT(bad.output, HasSubstr("error: --threads 0: the thread count the shapes were tuned "
                                      "with, a positive integer (kiln tune --threads)"));
}

TEST(ShapeDispatch, SeveralTargetsEachDispatchOnShapesWithTheirOwnTargetKeysRecords) {
    TempDir tmp;
    std::string db = tmp / "kiln.db";
    Ran t = run(tune(db, "40x24"));
    ASSERT_EQ(t.status, 0) << t.output;
    // The records are the host's: its variant uses them, the x86-64-v3 variant (another target
    // key) falls back to the generator's schedule and says why.
    std::string dir = tmp / "multi";
    Ran b = run(build_command(dir, db, "", "64x48,40x24") + " -t x86-64-v3 -t host");
    ASSERT_EQ(b.status, 0) << b.output;
    std::string header = read_text(dir + "/brighten.h");
    EXPECT_THAT(header, HasSubstr(" * Multi-target: one variant per target."));
    EXPECT_THAT(header, HasSubstr(" *   x86-64-v3 40x24: the generator's hand schedule (database " +
                                  db + " has no record of it on x86-64-v3"));
    EXPECT_THAT(header, HasSubstr(" 40x24: database " + db + ", run 1, measured "));
    EXPECT_THAT(header, HasSubstr(" *   x86-64-v3 generic: the generator's hand schedule (any "
                                  "other shape)"));
    EXPECT_THAT(header, HasSubstr("int brighten(kiln_buffer_t *in, float gain, kiln_buffer_t "
                                  "*brightened);"));
    std::string stmt = read_text(dir + "/brighten.stmt");
    EXPECT_THAT(stmt, HasSubstr("// ---- x86-64-v3 64x48"));
    // Each target variant, chosen by the CPU or forced, dispatches on the shape.
    for (const char *force : {"", "0", "1"}) {
        Ran c = build_and_run(tmp, dir, force);
        if (std::string(force) == "0" && c.output.find("which this CPU lacks") != std::string::npos)
            continue; // a CPU without AVX2 cannot run the x86-64-v3 variant
        ASSERT_EQ(c.status, 0) << "forced: '" << force << "'\n" << c.output;
        EXPECT_THAT(c.output, HasSubstr("64x48 ran 64x48 code 0 wrong 0"));
        EXPECT_THAT(c.output, HasSubstr("40x24 ran 40x24 code 0 wrong 0"));
        EXPECT_THAT(c.output, HasSubstr("33x17 ran generic code 0 wrong 0"));
        if (std::string(force) == "0") {
            EXPECT_THAT(c.output, HasSubstr("target x86-64-v3"));
        }
    }
    // A database that holds the shape for none of the targets is the usual error.
    Ran other = run(build_command(tmp / "other", db, "", "40x24") + " -t x86-64-v3 -t x86-64-v2");
    EXPECT_EQ(other.status, 1);
    EXPECT_THAT(other.output, HasSubstr("only for the target key(s) '"));
    // The lockfile is updated for one target.
    Ran lock = run(std::string(KILN_TEST_GENERATORS) + " --kiln-lock-update -g brighten --shapes " +
                   "40x24 --db " + db + " --lock " + tmp / "l.json" + " -t x86-64-v3 -t host");
    EXPECT_EQ(lock.status, 1);
    EXPECT_THAT(lock.output, HasSubstr("error: --kiln-lock-update takes one target (-t); got 2"));
}

#endif
