#include "tools/DbCommands.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/tuning_db/TestDb.h"
#include "tuning_db/TuningDB.h"

namespace kiln {
namespace {

using namespace tuning_db;
using test::failed_measurement;
using test::ok_measurement;
using test::ScratchDir;
using test::test_config;
using test::test_target;
using test::test_workload;

struct Result {
    int status;
    std::string out, err;
};

Result kiln_cli(std::vector<std::string> args) {
    std::ostringstream out, err;
    int status = run_db_command_line(args, out, err);
    return {status, out.str(), err.str()};
}

std::string read_file(const std::string &path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

/// The points attribute of every <polyline> in the page, by its data-strategy attribute.
std::map<std::string, std::vector<std::string>> polylines(const std::string &page) {
    std::map<std::string, std::vector<std::string>> out;
    auto attribute = [](const std::string &tag, const std::string &name) {
        size_t at = tag.find(" " + name + "=\"");
        if (at == std::string::npos) return std::string();
        at += name.size() + 3;
        return tag.substr(at, tag.find('"', at) - at);
    };
    for (size_t at = page.find("<polyline"); at != std::string::npos;
         at = page.find("<polyline", at + 1)) {
        std::string tag = page.substr(at, page.find('>', at) - at);
        out[attribute(tag, "data-strategy")].push_back(attribute(tag, "points"));
    }
    return out;
}

/// The number of "x,y" pairs in a points attribute; -1 when one is not two numbers.
int point_count(const std::string &points) {
    std::istringstream in(points);
    std::string pair;
    int n = 0;
    while (in >> pair) {
        double x, y;
        char comma;
        std::istringstream p(pair);
        if (!(p >> x >> comma >> y) || comma != ',' || !(p >> std::ws).eof()) return -1;
        n++;
    }
    return n;
}

#define EXPECT_CONTAINS(text, part)                                                                \
    EXPECT_NE(std::string(text).find(part), std::string::npos)                                     \
        << "  text: " << (text) << "\n  expected to contain: " << (part)

/// matmul 64x64x64 tuned by two strategies, blur measured outside runs.
void fill(const std::string &path) {
    Database db = Database::open(path);
    int64_t t = db.target_id(test_target());
    int64_t w = db.workload_id(test_workload());
    int64_t blur = db.workload_id(test_workload("blur", "640x480"));
    int64_t r1 = db.create_run(w, t, "random", 1, 5, 0, "{}");
    int64_t r2 = db.create_run(w, t, "annealing", 2, 5, 0, "{}");
    for (int i = 0; i < 5; i++) {
        db.record_measurement(ok_measurement(r1, w, t, test_config(db, i), 5.0 - 0.5 * i));
        if (i == 0) // before any ok one: no point on the progress curve
            db.record_measurement(
                failed_measurement(r2, w, t, test_config(db, 10 + i), Status::crash, "SIGSEGV"));
        else
            db.record_measurement(
                ok_measurement(r2, w, t, test_config(db, 10 + i), 4.0 - 0.75 * i));
    }
    db.update_run_state(r1, "{}", 5, 1.0);
    db.update_run_state(r2, "{}", 5, 1.0);
    db.record_measurement(ok_measurement(0, blur, t, test_config(db, 20), 0.25));
}

TEST(DbCommands, ListShowsWorkloadsWithBestTimes) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db");
    fill(db);
    Result r = kiln_cli({"db", "list", "--db", db});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_CONTAINS(r.out, "testcpu threads=4");
    EXPECT_CONTAINS(r.out, "matmul");
    EXPECT_CONTAINS(r.out, "64x64x64");
    EXPECT_CONTAINS(r.out, "0.25 ms");
    EXPECT_CONTAINS(r.out, "1 ms"); // annealing's best, 4.0 - 0.75 * 4
    EXPECT_EQ(r.err, "");
}

TEST(DbCommands, BestPrintsTheTopConfigsFastestFirst) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db");
    fill(db);
    Result r = kiln_cli({"db", "best", "matmul", "--db", db, "--top", "2", "--trace"});
    ASSERT_EQ(r.status, 0) << r.err;
    size_t first = r.out.find("#1  1 ms"), second = r.out.find("#2  1.75 ms");
    EXPECT_NE(first, std::string::npos) << r.out;
    EXPECT_NE(second, std::string::npos) << r.out;
    EXPECT_LT(first, second);
    EXPECT_CONTAINS(r.out, "config cfg14  {\"tile\":14}");
    EXPECT_CONTAINS(r.out, "trace: {\"schema_version\":1");
    EXPECT_EQ(r.out.find("#3"), std::string::npos);
}

TEST(DbCommands, BestShowsTheMedianOfRepeatedMeasurementsAndFlagsUnstableConfigs) {
    ScratchDir dir;
    std::string path = dir.file("kiln.db");
    {
        Database db = Database::open(path);
        int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
        int64_t lucky = test_config(db, 0), steady = test_config(db, 1);
        for (double ms : {1.0, 30.0, 35.0})
            db.record_measurement(ok_measurement(0, w, t, lucky, ms));
        for (int i = 0; i < 3; i++)
            db.record_measurement(ok_measurement(0, w, t, steady, 5.0));
    }
    Result r = kiln_cli({"db", "best", "matmul", "--db", path});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_CONTAINS(r.out, "#1  5 ms (median of 3 measurements, 5 ms .. 5 ms)  config cfg1");
    EXPECT_CONTAINS(r.out,
                    "#2  30 ms (median of 3 measurements, 1 ms .. 35 ms, unstable)  config cfg0");
}

// A finished run's closing round, the latest measuring of the workload, ranks its contenders by
// their closing times: `best`, `list` and `show` say so and agree.
TEST(DbCommands, BestListAndShowRankAStandingClosingRoundsContendersFirst) {
    ScratchDir dir;
    std::string path = dir.file("kiln.db");
    {
        Database db = Database::open(path);
        int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
        int64_t run = db.create_run(w, t, "random", 1, 0, 0, "{}");
        int64_t steady = test_config(db, 0), once = test_config(db, 1);
        db.record_measurement(ok_measurement(run, w, t, steady, 5.0));
        db.record_measurement(ok_measurement(run, w, t, once, 5.5));
        for (double ms : {9.0, 9.4}) {
            MeasurementRecord m = ok_measurement(run, w, t, steady, ms);
            m.closing = true;
            db.record_measurement(m);
        }
        db.finish_run(run);
    }
    Result r = kiln_cli({"db", "best", "matmul", "--db", path});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_CONTAINS(r.out, "#1  9.2 ms (closing round of run 1, median of 2 measurements, 9 ms .. "
                           "9.4 ms)  config cfg0");
    EXPECT_CONTAINS(r.out, "#2  5.5 ms (spread 0.11 ms)  config cfg1");
    r = kiln_cli({"db", "list", "--db", path});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_CONTAINS(r.out, "9.2 ms");
    EXPECT_EQ(r.out.find("5.5 ms"), std::string::npos) << r.out;
    r = kiln_cli({"db", "show", "matmul", "--db", path});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_CONTAINS(r.out, "4 measurements of 2 configs (ok 4), best 9.2 ms");
    EXPECT_CONTAINS(r.out, "finished (started ");
    EXPECT_CONTAINS(r.out, "), closing round of 2 measurements, standing\n");
    EXPECT_CONTAINS(r.out, "  ok  9.4 ms  config cfg0  closing\n");
}

TEST(DbCommands, ImportIntoAnotherProgramsSQLiteFileLeavesItsBytesUnchanged) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db"), json = dir.file("doc.json");
    fill(db);
    ASSERT_EQ(kiln_cli({"db", "export", json, "--db", db}).status, 0);
    std::string foreign = dir.file("photos.db");
    sqlite3 *handle = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &handle), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(handle,
                           "CREATE TABLE photos (name TEXT); INSERT INTO photos VALUES "
                           "('cat.jpg');",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(handle);
    std::string before = read_file(foreign);
    Result r = kiln_cli({"db", "import", json, "--db", foreign});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "kiln: tuning database '" + foreign +
                         "': the file is an SQLite database but not a kiln tuning database (it "
                         "has tables but no schema_version table); pass another --db file\n");
    EXPECT_EQ(read_file(foreign), before); // no WAL switch, no schema written into it
    EXPECT_FALSE(std::filesystem::exists(foreign + "-wal"));
}

TEST(DbCommands, ShowPrintsRunsStatisticsAndHistory) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db");
    fill(db);
    Result r = kiln_cli({"db", "--db", db, "show", "1"}); // by workload id, --db before the verb
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_CONTAINS(r.out, "workload [1] matmul 64x64x64 float32");
    EXPECT_CONTAINS(r.out, "10 measurements of 10 configs (crash 1, ok 9), best 1 ms");
    EXPECT_CONTAINS(r.out, "strategy annealing: 1 runs, 5 trials, best 1 ms");
    EXPECT_CONTAINS(r.out, "random seed 1, 5 trials in 1.0 s, resumable");
    EXPECT_CONTAINS(r.out, "crash  -  config cfg10  SIGSEGV");
}

TEST(DbCommands, ErrorsNameTheFileTheWorkloadAndTheFix) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db");
    std::string missing = dir.file("missing.db");
    Result r = kiln_cli({"db", "list", "--db", missing});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "kiln: tuning database '" + missing +
                         "' does not exist; run `kiln tune OP` to create it, or pass --db FILE to "
                         "name an existing one\n");
    EXPECT_FALSE(std::filesystem::exists(missing)); // read commands never create the file

    fill(db);
    r = kiln_cli({"db", "best", "conv2d", "--db", db});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "kiln: no workload for operator 'conv2d' in tuning database '" + db +
                         "'; stored operators: blur, matmul (run `kiln tune conv2d` to tune it)\n");
    r = kiln_cli({"db", "show", "matmul", "--shape", "8x8x8", "--db", db});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "kiln: no workload 'matmul' with shape '8x8x8' in tuning database '" + db +
                         "'; stored shapes: 64x64x64\n");
    r = kiln_cli({"db", "show", "42", "--db", db});
    EXPECT_EQ(r.err, "kiln: no workload with id 42 in tuning database '" + db +
                         "'; `kiln db list` shows the ids\n");
    r = kiln_cli({"db", "best", "matmul", "--target", "9", "--db", db});
    EXPECT_EQ(r.err, "kiln: no target with id 9 in tuning database '" + db +
                         "'; `kiln db list` shows the targets\n");
    r = kiln_cli({"db", "best", "matmul", "--top", "0", "--db", db});
    EXPECT_EQ(r.err, "kiln: --top must be at least 1, got 0\n");
    r = kiln_cli({"db", "export", dir.file("x.json"), "--op", "conv2d", "--db", db});
    EXPECT_EQ(r.err, "kiln: no workload for operator 'conv2d' in tuning database '" + db +
                         "'; `kiln db list` shows what is stored\n");
    r = kiln_cli({"db", "export", dir.file("no/such/dir/x.json"), "--db", db});
    EXPECT_EQ(r.err, "kiln: cannot write export file '" + dir.file("no/such/dir/x.json") +
                         "'; check the directory exists\n");
    r = kiln_cli({"db", "import", dir.file("nothing.json"), "--db", db});
    EXPECT_EQ(r.err, "kiln: cannot read import file '" + dir.file("nothing.json") +
                         "'; it does not exist or is not readable\n");
    std::ofstream(dir.file("bad.json")) << "{\"format\": ";
    r = kiln_cli({"db", "import", dir.file("bad.json"), "--db", db});
    EXPECT_EQ(r.status, 1);
    EXPECT_CONTAINS(r.err, "kiln: import file '" + dir.file("bad.json") + "' is not JSON: ");
    r = kiln_cli({"db", "report", "-o", dir.file("no/such/dir/r.html"), "--db", db});
    EXPECT_EQ(r.err, "kiln: cannot write report '" + dir.file("no/such/dir/r.html") +
                         "'; check the directory exists\n");
    // A usage error is CLI11's.
    r = kiln_cli({"db", "best", "--db", db});
    EXPECT_NE(r.status, 0);
    EXPECT_CONTAINS(r.err, "workload is required");
}

TEST(DbCommands, ExportThenImportIntoANewFileRoundTrips) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db"), json = dir.file("all.json"), copy = dir.file("copy.db");
    fill(db);
    Result r = kiln_cli({"db", "export", json, "--db", db});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out,
              "exported 11 measurements, 11 configs, 2 runs of 2 workloads to " + json + "\n");
    r = kiln_cli({"db", "import", json, "--db", copy});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "imported into " + copy +
                         ": 11 measurements added (0 already present), 11 configs, 2 runs, 2 "
                         "workloads, 1 targets added\n");
    r = kiln_cli({"db", "import", json, "--db", copy});
    EXPECT_EQ(r.out, "imported into " + copy +
                         ": 0 measurements added (11 already present), 0 configs, 0 runs, 0 "
                         "workloads, 0 targets added\n");
    Result a = kiln_cli({"db", "best", "matmul", "--db", db});
    Result b = kiln_cli({"db", "best", "matmul", "--db", copy});
    EXPECT_EQ(a.out, b.out);
}

TEST(DbCommands, ImportOfANegativeTimeIsRefusedAndAddsNothing) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db"), json = dir.file("all.json"), copy = dir.file("copy.db");
    fill(db);
    ASSERT_EQ(kiln_cli({"db", "export", json, "--db", db}).status, 0);
    nlohmann::json doc;
    std::ifstream(json) >> doc;
    size_t k = 0;
    while (doc["measurements"][k]["status"] != "ok")
        k++;
    doc["measurements"][k]["median_ms"] = -5;
    std::ofstream(dir.file("bad.json")) << doc.dump(1);
    Result r = kiln_cli({"db", "import", dir.file("bad.json"), "--db", copy});
    EXPECT_EQ(r.status, 1);
    EXPECT_CONTAINS(r.err, "measurements[" + std::to_string(k) +
                               "]: field 'median_ms' is -5: positive finite milliseconds for "
                               "status ok\n");
    r = kiln_cli({"db", "best", "matmul", "--db", copy});
    EXPECT_EQ(r.out.find("-5"), std::string::npos) << r.out;
}

TEST(DbCommands, ReadCommandsNeverWriteIntoAnEmptyFile) {
    ScratchDir dir;
    std::string db = dir.file("empty.db");
    std::ofstream(db).close();
    for (std::vector<std::string> args : {std::vector<std::string>{"db", "list"},
                                          {"db", "best", "matmul"},
                                          {"db", "show", "matmul"},
                                          {"db", "report", "-o", dir.file("r.html")}}) {
        args.insert(args.end(), {"--db", db});
        Result r = kiln_cli(args);
        EXPECT_EQ(r.status, 1) << args[1];
        EXPECT_CONTAINS(r.err, "is an empty file, not a kiln tuning database");
        EXPECT_EQ(std::filesystem::file_size(db), 0u) << args[1];
        EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
        EXPECT_FALSE(std::filesystem::exists(db + "-shm"));
    }
}

TEST(DbCommands, ReportHasASvgPlotWithAPolylinePerStrategy) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db"), html = dir.file("report.html");
    fill(db);
    Result r = kiln_cli({"db", "report", "--db", db, "-o", html});
    ASSERT_EQ(r.status, 0) << r.err;
    std::string page = read_file(html);
    EXPECT_CONTAINS(page, "<!DOCTYPE html>");
    EXPECT_CONTAINS(page, "best time against trials");
    EXPECT_CONTAINS(page, "best time against wall time");
    // Two plots (trials, wall time) for matmul, each with one polyline per strategy; random's
    // curve has 5 points (all ok), annealing's 4 (its first trial crashed).
    std::map<std::string, std::vector<std::string>> lines = polylines(page);
    ASSERT_EQ(lines.size(), 2u);
    ASSERT_EQ(lines["random"].size(), 2u);
    ASSERT_EQ(lines["annealing"].size(), 2u);
    for (const std::string &points : lines["random"])
        EXPECT_EQ(point_count(points), 5) << points;
    for (const std::string &points : lines["annealing"])
        EXPECT_EQ(point_count(points), 4) << points;
    // The table of best configs.
    EXPECT_CONTAINS(page, "<td>matmul</td><td>64x64x64</td><td>float32</td>");
    EXPECT_CONTAINS(page, "cfg14 {&quot;tile&quot;:14}");
    EXPECT_CONTAINS(page, "<td>blur</td><td>640x480</td>");
    EXPECT_EQ(page.find("<script"), std::string::npos); // self-contained, no scripts
}

TEST(DbCommands, ReportShowsHowWellTheSavedCostModelRanksHeldOutWorkloads) {
    ScratchDir dir;
    std::string db = dir.file("kiln.db"), html = dir.file("report.html");
    fill(db);
    Result none = kiln_cli({"db", "report", "--db", db, "-o", html});
    ASSERT_EQ(none.status, 0) << none.err;
    EXPECT_CONTAINS(read_file(html), "<h2>Cost models</h2>\n<p>none saved yet");
    {
        Database d = Database::open(db);
        CostModelRecord m;
        m.target_id = d.target_id(test_target());
        m.version = "v1";
        m.rows = 42;
        m.workloads = 2;
        m.file = db + ".models/target-1.json";
        m.evaluation = {{"mean_kendall_tau", 0.4567},
                        {"held_out",
                         {{{"workload_id", d.workload_id(test_workload())},
                           {"rows", 30},
                           {"kendall_tau", 0.4567},
                           {"top_k", 3},
                           {"top_k_hits", 2}}}}};
        d.record_cost_model(m);
    }
    Result r = kiln_cli({"db", "report", "--db", db, "-o", html});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_CONTAINS(r.out, "cost model for target 1: trained on 42 configs of 2 workloads; "
                           "held-out Kendall's tau 0.46 over 1 workloads (" +
                               db + ".models/target-1.json)\n");
    std::string page = read_file(html);
    EXPECT_CONTAINS(page,
                    "<tr><td>matmul 64x64x64</td><td>30</td><td>0.46</td><td>2 of 3</td></tr>");
}

} // namespace
} // namespace kiln
