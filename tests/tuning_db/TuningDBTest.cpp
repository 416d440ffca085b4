#include "tuning_db/TuningDB.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>

#include "lang/Error.h"
#include "tests/lang/ErrorOf.h"
#include "tests/tuning_db/TestDb.h"

namespace kiln::tuning_db {
namespace {

using test::failed_measurement;
using test::ok_measurement;
using test::ScratchDir;
using test::test_config;
using test::test_target;
using test::test_workload;

/// Runs SQL on the file directly, as another tool (or an older kiln) would.
void raw_sql(const std::string &path, const std::string &sql) {
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char *err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << msg;
}

int64_t raw_count(const std::string &path, const std::string &sql) {
    sqlite3 *db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_stmt *s = nullptr;
    int64_t n = -1;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

using kiln::test::error_of;

#define EXPECT_CONTAINS(text, part)                                                                \
    EXPECT_NE(std::string(text).find(part), std::string::npos)                                     \
        << "  text: " << (text) << "\n  expected to contain: " << (part)

TEST(TuningDB, CreatesTheSchemaInWalModeWithTheCurrentVersion) {
    ScratchDir dir;
    std::string path = dir.file("sub/dir/kiln.db"); // parent directories are created
    { Database db = Database::open(path); }
    EXPECT_EQ(raw_count(path, "SELECT max(version) FROM schema_version"), Database::schema_version);
    for (const char *table : {"targets", "workloads", "configs", "measurements", "tuning_runs"}) {
        EXPECT_EQ(raw_count(path, std::string("SELECT count(*) FROM sqlite_master WHERE type = "
                                              "'table' AND name = '") +
                                      table + "'"),
                  1)
            << table;
    }
    EXPECT_GE(raw_count(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                              "name LIKE 'measurements_%'"),
              3);
    sqlite3 *db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_stmt *s = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char *>(sqlite3_column_text(s, 0)), "wal");
    sqlite3_finalize(s);
    sqlite3_close(db);
    // Opening again keeps everything (no second schema).
    Database again = Database::open(path);
    EXPECT_EQ(again.integrity_check(), "ok");
}

TEST(TuningDB, RefusesANewerSchemaVersionNamingFileAndVersions) {
    ScratchDir dir;
    std::string path = dir.file("kiln.db");
    { Database db = Database::open(path); }
    raw_sql(path, "UPDATE schema_version SET version = 99");
    std::string msg = error_of<RuntimeError>([&] { Database::open(path); });
    EXPECT_CONTAINS(msg, "tuning database '" + path + "'");
    EXPECT_CONTAINS(msg, "schema version 99 is newer than version " +
                             std::to_string(Database::schema_version) +
                             " that this build of kiln supports");
    EXPECT_CONTAINS(msg, "use a newer kiln");
}

TEST(TuningDB, MigratesAVersion1DatabaseKeepingItsRows) {
    ScratchDir dir;
    std::string path = dir.file("old.db");
    // The layout schema version 1 wrote: tuning runs without a uuid.
    raw_sql(path, R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1);
CREATE TABLE targets (id INTEGER PRIMARY KEY, cpu_model TEXT NOT NULL, features TEXT NOT NULL,
    threads INTEGER NOT NULL, compiler TEXT NOT NULL, UNIQUE (cpu_model, features, threads, compiler));
CREATE TABLE workloads (id INTEGER PRIMARY KEY, op TEXT NOT NULL, algorithm_hash TEXT NOT NULL,
    shape TEXT NOT NULL, types TEXT NOT NULL, UNIQUE (op, algorithm_hash, shape, types));
CREATE TABLE configs (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, config_json TEXT NOT NULL,
    trace_json TEXT NOT NULL);
CREATE TABLE tuning_runs (id INTEGER PRIMARY KEY, workload_id INTEGER NOT NULL REFERENCES workloads(id),
    target_id INTEGER NOT NULL REFERENCES targets(id), strategy TEXT NOT NULL, seed INTEGER NOT NULL,
    budget_trials INTEGER NOT NULL, budget_seconds REAL NOT NULL, elapsed_s REAL NOT NULL DEFAULT 0,
    trials_done INTEGER NOT NULL DEFAULT 0, state_json TEXT NOT NULL, started_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL, finished_us INTEGER);
CREATE TABLE measurements (id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES tuning_runs(id),
    workload_id INTEGER NOT NULL REFERENCES workloads(id), target_id INTEGER NOT NULL REFERENCES targets(id),
    config_id INTEGER NOT NULL REFERENCES configs(id), status TEXT NOT NULL, times_ms TEXT NOT NULL,
    median_ms REAL NOT NULL, spread_ms REAL NOT NULL, compile_ms REAL NOT NULL, error TEXT NOT NULL,
    timestamp_us INTEGER NOT NULL);
INSERT INTO targets VALUES (1, 'oldcpu', '', 2, 'kiln 0.0.9');
INSERT INTO workloads VALUES (1, 'blur', '0x1', '640x480', 'float32');
INSERT INTO configs VALUES (1, 'h1', '{}', '{}');
INSERT INTO tuning_runs VALUES (1, 1, 1, 'random', 7, 100, 0, 3.5, 2, '{}', 1000, 2000, NULL);
INSERT INTO measurements VALUES (1, 1, 1, 1, 1, 'ok', '[2.0,2.1]', 2.05, 0.1, 30, '', 1500);
)sql");
    Database db = Database::open(path);
    EXPECT_EQ(raw_count(path, "SELECT max(version) FROM schema_version"), Database::schema_version);
    std::optional<RunRecord> run = db.run(1);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->uuid.size(), 32u); // backfilled
    EXPECT_EQ(run->strategy, "random");
    std::optional<BestConfig> best = db.best(1, 1);
    ASSERT_TRUE(best);
    EXPECT_DOUBLE_EQ(best->measurement.median_ms, 2.05);
    EXPECT_EQ(best->measurement.run_uuid, run->uuid);
    EXPECT_EQ(db.integrity_check(), "ok");
}

TEST(TuningDB, AVersion2DatabaseIsReadAsItIsAndMigratedWithItsRunOwners) {
    ScratchDir dir;
    std::string path = dir.file("v2.db");
    int64_t w, t, open_run, done_run;
    {
        Database db = Database::open(path);
        w = db.workload_id(test_workload());
        t = db.target_id(test_target());
        open_run = db.create_run(w, t, "random", 1, 0, 0, "{}");
        done_run = db.create_run(w, t, "random", 1, 0, 0, "{}");
        db.finish_run(done_run);
    }
    // What schema version 2 wrote: no owner columns; an older kiln kept the owner in state_json
    // (here: this process, alive).
    RunOwner me = RunOwner::this_process();
    raw_sql(path, "DROP TABLE run_state_items; DROP TABLE features; DROP TABLE cost_models; "
                  "ALTER TABLE measurements DROP COLUMN closing; "
                  "ALTER TABLE tuning_runs DROP COLUMN owner_pid; "
                  "ALTER TABLE tuning_runs DROP COLUMN owner_host; "
                  "ALTER TABLE tuning_runs DROP COLUMN owner_start; "
                  "UPDATE schema_version SET version = 2; "
                  "UPDATE tuning_runs SET state_json = '{\"strategy\": {}, \"owner\": {\"pid\": " +
                      std::to_string(me.pid) + ", \"host\": \"" + me.host + "\", \"start\": " +
                      std::to_string(me.start) + "}}' WHERE id = " + std::to_string(open_run) +
                      "; "
                      "UPDATE tuning_runs SET state_json = 'not json' WHERE id = " +
                      std::to_string(done_run) + ";");
    ASSERT_EQ(raw_count(path, "SELECT max(version) FROM schema_version"), 2);
    {
        // Read commands read it as it is.
        Database db = Database::open_existing(path);
        EXPECT_EQ(db.runs(w).size(), 2u);
        EXPECT_TRUE(db.feature_rows(t, "v1").empty()); // no features table before version 5
        EXPECT_TRUE(db.cost_models().empty());
    }
    EXPECT_EQ(raw_count(path, "SELECT max(version) FROM schema_version"), 2);
    // A write open migrates it; the owner recorded in state_json is the run's owner.
    Database db = Database::open(path);
    EXPECT_EQ(raw_count(path, "SELECT max(version) FROM schema_version"), Database::schema_version);
    EXPECT_EQ(
        raw_count(path, "SELECT owner_pid FROM tuning_runs WHERE id = " + std::to_string(open_run)),
        me.pid);
    EXPECT_EQ(raw_count(path, "SELECT count(*) FROM tuning_runs WHERE owner_pid IS NULL"), 1);
    RunClaim c = db.claim_run(open_run, RunOwner{me.pid + 1, me.host, 1});
    EXPECT_FALSE(c.claimed); // its owner, this process, is alive
    ASSERT_TRUE(c.holder);
    EXPECT_EQ(c.holder->pid, me.pid);
    EXPECT_EQ(c.holder->start, me.start);
    EXPECT_EQ(db.integrity_check(), "ok");
}

TEST(TuningDB, OpenExistingNamesAMissingFileAndSuggestsTune) {
    ScratchDir dir;
    std::string path = dir.file("nothing.db");
    std::string msg = error_of<RuntimeError>([&] { Database::open_existing(path); });
    EXPECT_EQ(msg, "tuning database '" + path +
                       "' does not exist; run `kiln tune OP` to create it, or pass --db FILE to "
                       "name an existing one");
    EXPECT_FALSE(std::filesystem::exists(path));
}

namespace {
std::string bytes_of(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
bool has_side_files(const std::string &path) {
    return std::filesystem::exists(path + "-wal") || std::filesystem::exists(path + "-shm") ||
           std::filesystem::exists(path + "-journal");
}
} // namespace

void fill(Database &db); // below

TEST(TuningDB, OpenExistingNeverChangesTheFile) {
    ScratchDir dir;
    // Another program's SQLite file: refused, not switched to WAL.
    std::string foreign = dir.file("other.db");
    raw_sql(foreign, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('mine');");
    std::string before = bytes_of(foreign);
    EXPECT_CONTAINS(error_of<RuntimeError>([&] { Database::open_existing(foreign); }),
                    "is an SQLite database but not a kiln tuning database");
    EXPECT_EQ(bytes_of(foreign), before);
    EXPECT_FALSE(has_side_files(foreign));

    // A 0-byte file: refused, no schema written into it.
    std::string empty = dir.file("empty.db");
    std::ofstream(empty).close();
    EXPECT_EQ(error_of<RuntimeError>([&] { Database::open_existing(empty); }),
              "tuning database '" + empty +
                  "' is an empty file, not a kiln tuning database (read commands never write to "
                  "it); run `kiln tune OP --db " +
                  empty + "` to create one there, or pass another --db file");
    EXPECT_EQ(std::filesystem::file_size(empty), 0u);
    EXPECT_FALSE(has_side_files(empty));

    // An older schema: refused, not migrated.
    std::string old = dir.file("old.db");
    raw_sql(old, "CREATE TABLE schema_version (version INTEGER NOT NULL); "
                 "INSERT INTO schema_version VALUES (1);");
    before = bytes_of(old);
    EXPECT_CONTAINS(error_of<RuntimeError>([&] { Database::open_existing(old); }),
                    "schema version 1 is older than version 2");
    EXPECT_EQ(bytes_of(old), before);
    EXPECT_FALSE(has_side_files(old));

    // A kiln database: read, and nothing is left next to it.
    std::string path = dir.file("kiln.db");
    {
        Database db = Database::open(path);
        fill(db);
    }
    ASSERT_FALSE(has_side_files(path));
    before = bytes_of(path);
    {
        Database db = Database::open_existing(path);
        EXPECT_EQ(db.statistics().measurements, 4);
        EXPECT_EQ(db.workloads().size(), 2u);
    }
    EXPECT_EQ(bytes_of(path), before);
    EXPECT_FALSE(has_side_files(path));
}

TEST(TuningDB, RefusesAFileThatIsNotSQLite) {
    ScratchDir dir;
    std::string path = dir.file("notes.txt");
    std::ofstream(path) << "these are not the droids you are looking for, and not SQLite either\n";
    std::string msg = error_of<RuntimeError>([&] { Database::open(path); });
    EXPECT_CONTAINS(msg, "tuning database '" + path + "' is not an SQLite database");
    EXPECT_CONTAINS(msg, "pass another --db file");
}

TEST(TuningDB, RefusesAnSQLiteDatabaseOfAnotherProgram) {
    ScratchDir dir;
    std::string path = dir.file("other.db");
    raw_sql(path, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)");
    std::string msg = error_of<RuntimeError>([&] { Database::open(path); });
    EXPECT_EQ(msg, "tuning database '" + path +
                       "': the file is an SQLite database but not a kiln tuning database (it has "
                       "tables but no schema_version table); pass another --db file");
}

TEST(TuningDB, KeysAreGetOrCreate) {
    ScratchDir dir;
    Database db = Database::open(dir.file("kiln.db"));
    int64_t t = db.target_id(test_target());
    EXPECT_EQ(db.target_id(test_target()), t);
    EXPECT_NE(db.target_id(test_target(8)), t);
    int64_t w = db.workload_id(test_workload());
    EXPECT_EQ(db.workload_id(test_workload()), w);
    EXPECT_NE(db.workload_id(test_workload("matmul", "128x128x128")), w);
    int64_t c = test_config(db, 1);
    EXPECT_EQ(test_config(db, 1), c);
    EXPECT_EQ(db.find_target(test_target()), t);
    EXPECT_EQ(db.find_workload(test_workload()), w);
    EXPECT_FALSE(db.find_workload(test_workload("conv")));
    EXPECT_EQ(db.config(c).hash, "cfg1");
    EXPECT_EQ(db.target(t).key, test_target());
    EXPECT_EQ(db.workload(w).key, test_workload());
}

TEST(TuningDB, RecordsMeasurementsAndFindsTheBestAndTheHistory) {
    ScratchDir dir;
    Database db = Database::open(dir.file("kiln.db"));
    int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
    int64_t run = db.create_run(w, t, "random", 42, 100, 0, "{\"rng\":1}");
    std::vector<int64_t> c;
    for (int i = 0; i < 5; i++)
        c.push_back(test_config(db, i));
    db.record_measurement(ok_measurement(run, w, t, c[0], 3.0));
    db.record_measurement(ok_measurement(run, w, t, c[1], 1.5));
    db.record_measurement(
        failed_measurement(run, w, t, c[2], Status::crash, "worker died with SIGSEGV"));
    db.record_measurement(ok_measurement(run, w, t, c[3], 2.0));
    db.record_measurement(ok_measurement(run, w, t, c[1], 1.7)); // re-measured, slower
    db.record_measurement(failed_measurement(run, w, t, c[4], Status::timeout, "over 10 s"));

    std::optional<BestConfig> best = db.best(w, t);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->config.hash, "cfg1");
    EXPECT_EQ(best->config.config_json, "{\"tile\":1}");
    EXPECT_DOUBLE_EQ(best->measurement.median_ms, 1.5);
    EXPECT_EQ(best->measurement.times_ms, (std::vector<double>{1.5 * 1.01, 1.5, 1.5 * 0.99}));
    EXPECT_DOUBLE_EQ(best->measurement.compile_ms, 12.5);
    EXPECT_EQ(best->measurement.run_id, run);
    EXPECT_DOUBLE_EQ(best->median_ms, 1.6); // the median of its two measurements, 1.5 and 1.7
    EXPECT_EQ(best->measurements, 2);

    std::vector<BestConfig> top = db.top_k(w, t, 10);
    ASSERT_EQ(top.size(), 3u); // one entry per config, failed ones left out
    EXPECT_EQ(top[0].config.hash, "cfg1");
    EXPECT_EQ(top[1].config.hash, "cfg3");
    EXPECT_EQ(top[2].config.hash, "cfg0");
    EXPECT_EQ(db.top_k(w, t, 2).size(), 2u);

    std::vector<Measurement> h = db.history(w, t);
    ASSERT_EQ(h.size(), 6u);
    for (size_t i = 1; i < h.size(); i++)
        EXPECT_LE(h[i - 1].timestamp_us, h[i].timestamp_us);
    EXPECT_EQ(h[2].status, Status::crash);
    EXPECT_EQ(h[2].error, "worker died with SIGSEGV");
    EXPECT_EQ(h[5].status, Status::timeout);

    // A resumed run skips configs it has: the fastest ok measurement, else the latest failure.
    std::optional<Measurement> have = db.find_measurement(w, t, "cfg1");
    ASSERT_TRUE(have);
    EXPECT_DOUBLE_EQ(have->median_ms, 1.5);
    EXPECT_EQ(db.find_measurement(w, t, "cfg2")->status, Status::crash);
    EXPECT_FALSE(db.find_measurement(w, t, "cfg9"));
    EXPECT_FALSE(db.best(w, db.target_id(test_target(1)))); // nothing on another target

    // Apply-the-best support without creating keys.
    EXPECT_EQ(db.best_trace_json(test_workload(), test_target()), best->config.trace_json);
    EXPECT_FALSE(db.best_trace_json(test_workload("conv"), test_target()));
    EXPECT_FALSE(db.find_workload(test_workload("conv")));
}

TEST(TuningDB, BestIsTheMedianOfEveryOkMeasurementSoALuckyFirstValueIsDemoted) {
    ScratchDir dir;
    Database db = Database::open(dir.file("kiln.db"));
    int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
    int64_t run = db.create_run(w, t, "random", 1, 0, 0, "{}");
    int64_t lucky = test_config(db, 0), steady = test_config(db, 1);
    db.record_measurement(ok_measurement(run, w, t, lucky, 1.0)); // a lucky first timing
    for (int i = 0; i < 3; i++)
        db.record_measurement(ok_measurement(run, w, t, steady, 5.0));
    db.record_measurement(ok_measurement(run, w, t, lucky, 30.0)); // its re-measurements
    db.record_measurement(ok_measurement(run, w, t, lucky, 35.0));
    db.record_measurement(failed_measurement(run, w, t, steady, Status::timeout, "over 1 s"));

    std::optional<BestConfig> best = db.best(w, t);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->config.hash, "cfg1");
    EXPECT_DOUBLE_EQ(best->median_ms, 5.0);
    EXPECT_EQ(best->measurements, 3); // the timeout does not count
    EXPECT_FALSE(best->unstable());
    EXPECT_EQ(db.best_trace_json(test_workload(), test_target()), best->config.trace_json);

    std::vector<BestConfig> top = db.top_k(w, t, 5);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[1].config.hash, "cfg0");
    EXPECT_DOUBLE_EQ(top[1].median_ms, 30.0);
    EXPECT_DOUBLE_EQ(top[1].min_ms, 1.0);
    EXPECT_DOUBLE_EQ(top[1].max_ms, 35.0);
    EXPECT_EQ(top[1].measurements, 3);
    EXPECT_TRUE(top[1].unstable());                       // 35 / 1 > unstable_ratio
    EXPECT_DOUBLE_EQ(top[1].measurement.median_ms, 30.0); // the middle measurement

    // An even count: the mean of the two middle ones.
    db.record_measurement(ok_measurement(run, w, t, steady, 7.0));
    EXPECT_DOUBLE_EQ(db.best(w, t)->median_ms, 5.0);
    db.record_measurement(ok_measurement(run, w, t, steady, 9.0));
    db.record_measurement(ok_measurement(run, w, t, steady, 9.0));
    EXPECT_DOUBLE_EQ(db.best(w, t)->median_ms, 6.0);
    EXPECT_FALSE(db.best(w, t)->unstable()); // 9 / 5 is within unstable_ratio
}

// Times taken at different moments are not comparable: a closing round that ran slower than the
// search must not hand the crown to a config timed once during the search. While a finished
// run's closing round is the latest measuring of the workload, its contenders rank first by
// their closing times; a later measurement outside it ends its standing.
TEST(TuningDB, AStandingClosingRoundRanksItsContendersByTheirClosingTimesFirst) {
    ScratchDir dir;
    Database db = Database::open(dir.file("kiln.db"));
    int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
    int64_t run = db.create_run(w, t, "random", 1, 0, 0, "{}");
    int64_t a = test_config(db, 0), b = test_config(db, 1), once = test_config(db, 2);
    auto closing = [&](int64_t r, int64_t c, double ms) {
        MeasurementRecord m = ok_measurement(r, w, t, c, ms);
        m.closing = true;
        db.record_measurement(m);
    };
    // The search, in a fast quarter of an hour; then the closing round, slower.
    db.record_measurement(ok_measurement(run, w, t, a, 5.0));
    db.record_measurement(ok_measurement(run, w, t, b, 5.2));
    db.record_measurement(ok_measurement(run, w, t, once, 5.4));
    closing(run, a, 9.0);
    closing(run, b, 8.8);
    closing(run, a, 9.2);
    closing(run, b, 8.9);
    MeasurementRecord failed = failed_measurement(run, w, t, once, Status::crash, "signal 11");
    failed.closing = true; // a failed closing measurement makes no contender
    db.record_measurement(failed);

    // The run is not finished (a stopped closing round): the medians over all measurements.
    std::vector<BestConfig> top = db.top_k(w, t, 3);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].config.id, once);
    EXPECT_EQ(top[0].closing_run_id, 0);
    EXPECT_EQ(top[1].config.id, b);
    EXPECT_DOUBLE_EQ(top[1].median_ms, 8.8); // of 5.2, 8.8, 8.9
    EXPECT_EQ(top[1].measurements, 3);

    // The tuner during its closing round, and anyone once the run is finished: the contenders
    // first, each by its closing times only, then the rest by their medians.
    for (int finished = 0; finished < 2; finished++) {
        if (finished) db.finish_run(run);
        top = db.top_k(w, t, 3, finished ? 0 : run);
        ASSERT_EQ(top.size(), 3u);
        EXPECT_EQ(top[0].config.id, b);
        EXPECT_DOUBLE_EQ(top[0].median_ms, 8.85);
        EXPECT_DOUBLE_EQ(top[0].min_ms, 8.8);
        EXPECT_EQ(top[0].measurements, 2); // not its search time
        EXPECT_EQ(top[0].closing_run_id, run);
        EXPECT_TRUE(top[0].measurement.closing);
        EXPECT_EQ(top[1].config.id, a);
        EXPECT_DOUBLE_EQ(top[1].median_ms, 9.1);
        EXPECT_EQ(top[1].closing_run_id, run);
        EXPECT_EQ(top[2].config.id, once);
        EXPECT_DOUBLE_EQ(top[2].median_ms, 5.4);
        EXPECT_EQ(top[2].closing_run_id, 0);
    }
    EXPECT_EQ(db.best(w, t)->config.id, b);
    EXPECT_EQ(db.best_trace_json(test_workload(), test_target()), db.best(w, t)->config.trace_json);
    EXPECT_DOUBLE_EQ(*db.workload(w).best_ms, 8.85); // `kiln db list` agrees with `kiln db best`
    EXPECT_DOUBLE_EQ(*db.workloads().front().best_ms, 8.85);

    // A closing measurement travels with an export; the imported round stands the same way.
    nlohmann::json doc = db.export_json();
    int closing_rows = 0;
    for (const nlohmann::json &m : doc["measurements"])
        closing_rows += m.value("closing", false);
    EXPECT_EQ(closing_rows, 5);
    {
        Database copy = Database::open(dir.file("copy.db"));
        copy.import_json(doc);
        int64_t cw = *copy.find_workload(test_workload()), ct = *copy.find_target(test_target());
        std::optional<BestConfig> best = copy.best(cw, ct);
        ASSERT_TRUE(best);
        EXPECT_EQ(best->config.hash, "cfg1");
        EXPECT_DOUBLE_EQ(best->median_ms, 8.85);
        EXPECT_NE(best->closing_run_id, 0);
    }

    // A later search measurement (another run's) ends the round's standing: its times are from
    // yet another moment, comparable with neither.
    int64_t run2 = db.create_run(w, t, "random", 2, 0, 0, "{}");
    int64_t c = test_config(db, 3);
    db.record_measurement(ok_measurement(run2, w, t, c, 7.0));
    top = db.top_k(w, t, 4);
    EXPECT_EQ(top[0].config.id, once);
    EXPECT_EQ(top[0].closing_run_id, 0);
    EXPECT_EQ(top[1].config.id, c);
    EXPECT_DOUBLE_EQ(*db.workload(w).best_ms, 5.4);
    // That run's own closing round, once it finished, stands in turn: its contender first.
    closing(run2, c, 7.5);
    db.finish_run(run2);
    top = db.top_k(w, t, 4);
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0].config.id, c);
    EXPECT_DOUBLE_EQ(top[0].median_ms, 7.5);
    EXPECT_EQ(top[0].closing_run_id, run2);
    EXPECT_EQ(top[1].config.id, once);
    EXPECT_EQ(top[1].closing_run_id, 0);
    EXPECT_EQ(top[2].config.id, b);
    EXPECT_DOUBLE_EQ(top[2].median_ms, 8.8); // all its measurements again
}

// A file from before version 6 has no closing flag: read as it is, every config ranks by its
// median; migrated, its measurements are search ones.
TEST(TuningDB, AVersion5FileRanksByMediansAndIsReadAsItIs) {
    ScratchDir dir;
    std::string path = dir.file("v5.db");
    int64_t w, t, lucky, steady;
    {
        Database db = Database::open(path);
        w = db.workload_id(test_workload());
        t = db.target_id(test_target());
        int64_t run = db.create_run(w, t, "random", 1, 0, 0, "{}");
        lucky = test_config(db, 0);
        steady = test_config(db, 1);
        db.record_measurement(ok_measurement(run, w, t, lucky, 1.0));
        db.record_measurement(ok_measurement(run, w, t, steady, 4.0));
        db.finish_run(run);
    }
    raw_sql(path, "ALTER TABLE measurements DROP COLUMN closing; "
                  "UPDATE schema_version SET version = 5;");
    std::string before = bytes_of(path);
    {
        Database db = Database::open_existing(path);
        std::vector<BestConfig> top = db.top_k(w, t, 2);
        ASSERT_EQ(top.size(), 2u);
        EXPECT_EQ(top[0].config.id, lucky);
        EXPECT_EQ(top[0].closing_run_id, 0);
        EXPECT_FALSE(top[0].measurement.closing);
        EXPECT_EQ(db.history(w, t).size(), 2u);
        EXPECT_DOUBLE_EQ(*db.workload(w).best_ms, 1.0);
    }
    EXPECT_EQ(bytes_of(path), before); // the temporary view is not in the file
    Database db = Database::open(path);
    EXPECT_EQ(raw_count(path, "SELECT max(version) FROM schema_version"), Database::schema_version);
    EXPECT_EQ(raw_count(path, "SELECT count(*) FROM measurements WHERE closing = 0"), 2);
    EXPECT_EQ(db.best(w, t)->config.id, lucky);
}

TEST(TuningDB, StatisticsCountStatusesTrialsAndStrategies) {
    ScratchDir dir;
    Database db = Database::open(dir.file("kiln.db"));
    int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
    int64_t w2 = db.workload_id(test_workload("blur", "640x480"));
    int64_t r1 = db.create_run(w, t, "random", 1, 10, 0, "{}");
    int64_t r2 = db.create_run(w, t, "annealing", 2, 10, 0, "{}");
    int64_t r3 = db.create_run(w2, t, "random", 3, 10, 0, "{}");
    db.record_measurement(ok_measurement(r1, w, t, test_config(db, 1), 4.0));
    db.record_measurement(ok_measurement(r2, w, t, test_config(db, 2), 2.0));
    db.record_measurement(
        failed_measurement(r2, w, t, test_config(db, 3), Status::compile_error, "bad split"));
    db.record_measurement(ok_measurement(r3, w2, t, test_config(db, 4), 0.5));
    db.record_measurement(ok_measurement(0, w, t, test_config(db, 5), 9.0)); // outside a run
    db.update_run_state(r1, "{\"step\":1}", 1, 2.0);
    db.update_run_state(r2, "{\"step\":2}", 2, 3.0);

    Statistics s = db.statistics({w, t, std::nullopt});
    EXPECT_EQ(s.measurements, 4);
    EXPECT_EQ(s.per_status["ok"], 3);
    EXPECT_EQ(s.per_status["compile_error"], 1);
    EXPECT_EQ(s.configs, 4);
    EXPECT_EQ(s.runs, 2);
    EXPECT_EQ(s.trials, 3);
    EXPECT_DOUBLE_EQ(*s.best_ms, 2.0);
    ASSERT_EQ(s.per_strategy.size(), 2u);
    EXPECT_EQ(s.per_strategy[0].strategy, "annealing");
    EXPECT_EQ(s.per_strategy[0].measurements, 2);
    EXPECT_EQ(s.per_strategy[0].trials, 2);
    EXPECT_DOUBLE_EQ(*s.per_strategy[0].best_ms, 2.0);
    EXPECT_EQ(s.per_strategy[1].strategy, "random");
    EXPECT_DOUBLE_EQ(*s.per_strategy[1].best_ms, 4.0);

    Statistics all = db.statistics();
    EXPECT_EQ(all.measurements, 5);
    EXPECT_EQ(all.runs, 3);
    EXPECT_DOUBLE_EQ(*all.best_ms, 0.5);
    Statistics blur = db.statistics({std::nullopt, std::nullopt, std::string("blur")});
    EXPECT_EQ(blur.measurements, 1);

    std::vector<WorkloadRecord> ws = db.workloads();
    ASSERT_EQ(ws.size(), 2u);
    EXPECT_EQ(ws[0].key.op, "blur"); // sorted by operator
    EXPECT_EQ(ws[1].measurements, 4);
    EXPECT_EQ(ws[1].ok_measurements, 3);
    EXPECT_DOUBLE_EQ(*ws[1].best_ms, 2.0);
}

TEST(TuningDB, EveryBestIsAConfigsMedianNotItsLuckiestMeasurement) {
    // Config a is measured at 1 ms once (a lucky first value), then at 10 and 12 ms: its time is
    // the median, 10 ms, so config b (5 ms) is the best everywhere the database says "best".
    ScratchDir dir;
    Database db = Database::open(dir.file("kiln.db"));
    int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
    int64_t run = db.create_run(w, t, "random", 1, 10, 0, "{}");
    int64_t a = test_config(db, 1), b = test_config(db, 2);
    db.record_measurement(ok_measurement(run, w, t, a, 1.0));
    db.record_measurement(ok_measurement(run, w, t, b, 5.0));
    db.record_measurement(ok_measurement(run, w, t, a, 10.0));
    db.record_measurement(ok_measurement(run, w, t, a, 12.0));

    EXPECT_EQ(db.best(w, t)->config.id, b);
    EXPECT_DOUBLE_EQ(db.best(w, t)->median_ms, 5.0);
    Statistics s = db.statistics({w, t, std::nullopt});
    EXPECT_DOUBLE_EQ(*s.best_ms, 5.0);
    ASSERT_EQ(s.per_strategy.size(), 1u);
    EXPECT_DOUBLE_EQ(*s.per_strategy[0].best_ms, 5.0);
    std::vector<WorkloadRecord> ws = db.workloads();
    ASSERT_EQ(ws.size(), 1u);
    EXPECT_DOUBLE_EQ(*ws[0].best_ms, 5.0);
    EXPECT_DOUBLE_EQ(*db.workload(w).best_ms, 5.0);

    // The curve follows the configs' medians: 1, then 1, then (1 + 10) / 2 = 5.5 against b's 5,
    // then a's median 10 against b's 5.
    std::vector<ProgressPoint> p = db.progress(run);
    ASSERT_EQ(p.size(), 4u);
    EXPECT_DOUBLE_EQ(*p[0].best_ms, 1.0);
    EXPECT_DOUBLE_EQ(*p[1].best_ms, 1.0);
    EXPECT_DOUBLE_EQ(*p[2].best_ms, 5.0);
    EXPECT_DOUBLE_EQ(*p[3].best_ms, 5.0);
}

TEST(TuningDB, RunsSaveStateForResumeAndTrackProgress) {
    ScratchDir dir;
    std::string path = dir.file("kiln.db");
    int64_t w, t, run;
    {
        Database db = Database::open(path);
        t = db.target_id(test_target());
        w = db.workload_id(test_workload());
        run = db.create_run(w, t, "evolutionary", 1234, 50, 600, "{\"population\":[]}");
        db.record_measurement(
            failed_measurement(run, w, t, test_config(db, 0), Status::wrong_answer, "off by 1"));
        db.record_measurement(ok_measurement(run, w, t, test_config(db, 1), 5.0));
        db.record_measurement(ok_measurement(run, w, t, test_config(db, 2), 6.0));
        db.record_measurement(ok_measurement(run, w, t, test_config(db, 3), 4.0));
        db.update_run_state(run, "{\"population\":[1,3]}", 4, 12.5);
    }
    Database db = Database::open(path); // as a resumed process would
    std::optional<RunRecord> r = db.latest_run(w, t, "evolutionary");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->id, run);
    EXPECT_EQ(r->seed, 1234);
    EXPECT_EQ(r->budget_trials, 50);
    EXPECT_DOUBLE_EQ(r->budget_seconds, 600);
    EXPECT_EQ(r->trials_done, 4);
    EXPECT_DOUBLE_EQ(r->elapsed_s, 12.5);
    EXPECT_EQ(r->state_json, "{\"population\":[1,3]}");
    EXPECT_FALSE(r->finished_us);
    EXPECT_FALSE(db.latest_run(w, t, "random"));

    std::vector<ProgressPoint> p = db.progress(run);
    ASSERT_EQ(p.size(), 4u);
    EXPECT_FALSE(p[0].best_ms);
    EXPECT_DOUBLE_EQ(*p[1].best_ms, 5.0);
    EXPECT_DOUBLE_EQ(*p[2].best_ms, 5.0);
    EXPECT_DOUBLE_EQ(*p[3].best_ms, 4.0);
    EXPECT_EQ(p[3].trial, 4);
    EXPECT_GE(p[3].elapsed_s, p[0].elapsed_s);
    EXPECT_EQ(db.history(w, t, run).size(), 4u);

    db.finish_run(run);
    EXPECT_TRUE(db.run(run)->finished_us);
    EXPECT_FALSE(db.latest_run(w, t, "evolutionary")); // a finished run is not resumed
    ASSERT_EQ(db.runs(w).size(), 1u);
}

TEST(TuningDB, UserErrorsNameTheProblem) {
    ScratchDir dir;
    std::string path = dir.file("kiln.db");
    Database db = Database::open(path);
    int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
    int64_t w2 = db.workload_id(test_workload("blur"));
    int64_t c = test_config(db, 1);
    std::string prefix = "tuning database '" + path + "': ";

    EXPECT_EQ(
        error_of<RuntimeError>([&] { db.record_measurement(ok_measurement(0, 99, t, c, 1)); }),
        prefix + "record_measurement: no workload with id 99; get ids from workload_id()");
    EXPECT_EQ(
        error_of<RuntimeError>([&] { db.record_measurement(ok_measurement(0, w, 98, c, 1)); }),
        prefix + "record_measurement: no target with id 98; get ids from target_id()");
    EXPECT_EQ(
        error_of<RuntimeError>([&] { db.record_measurement(ok_measurement(0, w, t, 97, 1)); }),
        prefix + "record_measurement: no config with id 97; get ids from config_id()");
    EXPECT_EQ(
        error_of<RuntimeError>([&] { db.record_measurement(ok_measurement(96, w, t, c, 1)); }),
        prefix + "record_measurement: no tuning run with id 96; get ids from create_run(), "
                 "or pass 0");
    int64_t run = db.create_run(w2, t, "random", 0, 0, 0, "{}");
    EXPECT_EQ(
        error_of<RuntimeError>([&] { db.record_measurement(ok_measurement(run, w, t, c, 1)); }),
        prefix + "record_measurement: tuning run " + std::to_string(run) + " is for workload " +
            std::to_string(w2) + " on target " + std::to_string(t) + ", not workload " +
            std::to_string(w) + " on target " + std::to_string(t));
    EXPECT_EQ(
        error_of<RuntimeError>([&] { db.record_measurement(ok_measurement(0, w, t, c, NAN)); }),
        prefix + "record_measurement: median_ms is nan; record a failed candidate with its "
                 "status and zero times");
    EXPECT_EQ(error_of<RuntimeError>([&] { db.config_id("cfg1", "{\"tile\":2}", "{}"); }),
              prefix + "config hash 'cfg1' is already stored with a different config or trace "
                       "(stored config {\"tile\":1}, new config {\"tile\":2}); the hash must "
                       "cover both the knob values and the trace");
    EXPECT_EQ(error_of<RuntimeError>([&] { db.config_id("", "{}", "{}"); }),
              prefix + "a config needs a hash (config_hash is empty)");
    EXPECT_EQ(error_of<RuntimeError>([&] {
                  db.workload_id({"", "0x1", "1", "float32"});
              }),
              prefix + "a workload needs an operator name (WorkloadKey::op is empty)");
    EXPECT_EQ(error_of<RuntimeError>([&] { db.update_run_state(555, "{}", 1, 1); }),
              prefix + "update_run_state: no tuning run with id 555");
    EXPECT_EQ(error_of<RuntimeError>([&] { db.finish_run(555); }),
              prefix + "finish_run: no tuning run with id 555");
    EXPECT_EQ(error_of<RuntimeError>([&] { db.create_run(w, 77, "random", 0, 0, 0, "{}"); }),
              prefix + "create_run: no target with id 77");
    EXPECT_EQ(error_of<RuntimeError>([&] { db.create_run(w, t, "", 0, 0, 0, "{}"); }),
              prefix + "create_run: the strategy name is empty");
    EXPECT_EQ(error_of<RuntimeError>([&] { db.config(1234); }), prefix + "no config with id 1234");
    EXPECT_EQ(error_of<RuntimeError>([&] { status_from_string("slow"); }),
              "unknown measurement status 'slow'; expected one of ok, compile_error, "
              "runtime_error, crash, timeout, wrong_answer");
    EXPECT_EQ(db.statistics().measurements, 0); // nothing was recorded by the failed calls
}

TEST(TuningDB, StatusNamesRoundTrip) {
    for (Status s : {Status::ok, Status::compile_error, Status::runtime_error, Status::crash,
                     Status::timeout, Status::wrong_answer})
        EXPECT_EQ(status_from_string(to_string(s)), s);
    EXPECT_STREQ(to_string(Status::wrong_answer), "wrong_answer");
}

/// Fills a database with two workloads, two targets, runs and measurements of all statuses.
void fill(Database &db) {
    int64_t t1 = db.target_id(test_target(4)), t2 = db.target_id(test_target(1));
    int64_t w1 = db.workload_id(test_workload()), w2 = db.workload_id(test_workload("blur"));
    int64_t r1 = db.create_run(w1, t1, "random", 5, 10, 0, "{\"a\":1}");
    int64_t r2 = db.create_run(w2, t2, "model", 6, 0, 60, "{\"b\":2}");
    db.record_measurement(ok_measurement(r1, w1, t1, test_config(db, 1), 2.0));
    db.record_measurement(
        failed_measurement(r1, w1, t1, test_config(db, 2), Status::runtime_error, "oob"));
    db.record_measurement(ok_measurement(r2, w2, t2, test_config(db, 3), 1.0));
    db.record_measurement(ok_measurement(0, w2, t2, test_config(db, 1), 3.0));
    db.update_run_state(r1, "{\"a\":2}", 2, 1.5);
    db.finish_run(r2);
}

TEST(TuningDB, ExportThenImportIntoAFreshDatabaseRoundTrips) {
    ScratchDir dir;
    Database a = Database::open(dir.file("a.db"));
    fill(a);
    nlohmann::json doc = a.export_json();
    EXPECT_EQ(doc["format_version"], Database::export_format_version);
    // Through text, as `kiln db export` / `import` do.
    nlohmann::json reread = nlohmann::json::parse(doc.dump(1));

    Database b = Database::open(dir.file("b.db"));
    b.target_id(test_target(16)); // ids in b differ from a's
    b.workload_id(test_workload("other"));
    ImportSummary s = b.import_json(reread);
    EXPECT_EQ(s.measurements_added, 4);
    EXPECT_EQ(s.measurements_skipped, 0);
    EXPECT_EQ(s.configs_added, 3);
    EXPECT_EQ(s.runs_added, 2);
    EXPECT_EQ(s.workloads_added, 2);
    EXPECT_EQ(s.targets_added, 2);

    // Same content (ids aside): export b for the same workloads and compare field by field.
    auto canonical = [](Database &db) {
        nlohmann::json out = nlohmann::json::array();
        for (const WorkloadRecord &w : db.workloads()) {
            if (w.key.op == "other") continue;
            for (const TargetRecord &t : db.targets()) {
                for (const Measurement &m : db.history(w.id, t.id)) {
                    out.push_back({w.key.op, t.key.threads, m.config_hash, m.run_uuid,
                                   to_string(m.status), m.times_ms, m.median_ms, m.spread_ms,
                                   m.compile_ms, m.error, m.timestamp_us,
                                   db.config(m.config_id).trace_json});
                }
                for (const RunRecord &r : db.runs(w.id, t.id)) {
                    out.push_back({r.uuid, r.strategy, r.seed, r.budget_trials, r.budget_seconds,
                                   r.elapsed_s, r.trials_done, r.state_json, r.started_us,
                                   r.updated_us, r.finished_us.value_or(-1)});
                }
            }
        }
        return out;
    };
    EXPECT_EQ(canonical(a), canonical(b));
    EXPECT_EQ(
        b.best(*b.find_workload(test_workload()), *b.find_target(test_target(4)))->config.hash,
        "cfg1");

    // Idempotent: a second import adds nothing.
    ImportSummary again = b.import_json(reread);
    EXPECT_EQ(again.measurements_added, 0);
    EXPECT_EQ(again.measurements_skipped, 4);
    EXPECT_EQ(again.configs_added + again.runs_added + again.workloads_added + again.targets_added,
              0);
    EXPECT_EQ(b.statistics().measurements, 4);
    // And importing b's own export into a adds nothing either.
    ImportSummary back = a.import_json(b.export_json());
    EXPECT_EQ(back.measurements_added, 0);
    EXPECT_EQ(a.statistics().measurements, 4);
}

TEST(TuningDB, ExportFiltersByOperator) {
    ScratchDir dir;
    Database a = Database::open(dir.file("a.db"));
    fill(a);
    Filter f;
    f.op = "blur";
    nlohmann::json doc = a.export_json(f);
    EXPECT_EQ(doc["workloads"].size(), 1u);
    EXPECT_EQ(doc["workloads"][0]["op"], "blur");
    EXPECT_EQ(doc["measurements"].size(), 2u);
    EXPECT_EQ(doc["runs"].size(), 1u);
    EXPECT_EQ(doc["targets"].size(), 1u);
    EXPECT_EQ(doc["configs"].size(), 2u);
    Database b = Database::open(dir.file("b.db"));
    EXPECT_EQ(b.import_json(doc).measurements_added, 2);
}

TEST(TuningDB, ImportOfAMalformedDocumentNamesTheFieldAndAddsNothing) {
    ScratchDir dir;
    Database a = Database::open(dir.file("a.db"));
    fill(a);
    nlohmann::json good = a.export_json();
    std::string path = dir.file("b.db");
    Database b = Database::open(path);
    std::string prefix = "cannot import into tuning database '" + path + "': ";
    auto import_error = [&](nlohmann::json doc) {
        return error_of<RuntimeError>([&] { b.import_json(doc); });
    };

    EXPECT_EQ(import_error(nlohmann::json::array()),
              prefix + "the document: expected a JSON object from `kiln db export`");
    nlohmann::json d = good;
    d["format_version"] = 7;
    EXPECT_EQ(import_error(d), prefix + "the document: format_version 7 is not supported by this "
                                        "build of kiln (supports 1)");
    d = good;
    d.erase("measurements");
    EXPECT_EQ(import_error(d), prefix + "the document: field 'measurements' is missing");
    d = good;
    d["measurements"][1].erase("median_ms");
    EXPECT_EQ(import_error(d), prefix + "measurements[1]: field 'median_ms' is missing");
    d = good;
    d["measurements"][0]["median_ms"] = "fast";
    EXPECT_EQ(import_error(d), prefix + "measurements[0]: field 'median_ms' must be a number");
    d = good;
    d["measurements"][0]["config"] = "nope";
    EXPECT_EQ(import_error(d),
              prefix + "measurements[0]: config 'nope' is not in the document's configs");
    d = good;
    d["measurements"][0]["status"] = "slow";
    EXPECT_CONTAINS(import_error(d), prefix + "measurements[0]: unknown measurement status 'slow'");
    d = good;
    d["runs"][0]["workload"] = 1000;
    EXPECT_EQ(import_error(d),
              prefix + "runs[0]: workload 1000 is not in the document's workloads");
    d = good;
    d["targets"][0]["threads"] = 1.5;
    EXPECT_EQ(import_error(d), prefix + "targets[0]: field 'threads' must be an integer");
    d = good;
    d["configs"][0]["config"] = "{\"tile\":99}";
    b.config_id(good["configs"][0]["hash"].get<std::string>(), "{\"tile\":1}",
                "{\"schema_version\":1}");
    EXPECT_CONTAINS(import_error(d), "' is already stored with a different config or trace");

    EXPECT_EQ(b.statistics().measurements, 0);
    EXPECT_EQ(b.workloads().size(), 0u); // the failed import rolled back
}

TEST(TuningDB, ImportRefusesImpossibleValuesNamingRecordFieldAndValue) {
    ScratchDir dir;
    Database a = Database::open(dir.file("a.db"));
    fill(a);
    nlohmann::json good = a.export_json();
    std::string path = dir.file("b.db");
    Database b = Database::open(path);
    std::string prefix = "cannot import into tuning database '" + path + "': ";
    auto import_error = [&](nlohmann::json doc) {
        return error_of<RuntimeError>([&] { b.import_json(doc); });
    };
    // measurements[0] is ok with times {2.02, 2, 1.98} and median 2; [1] a runtime_error.
    ASSERT_EQ(good["measurements"][0]["status"], "ok");
    ASSERT_EQ(good["measurements"][1]["status"], "runtime_error");

    nlohmann::json d = good;
    d["measurements"][0]["median_ms"] = -5;
    EXPECT_EQ(import_error(d), prefix + "measurements[0]: field 'median_ms' is -5: positive finite "
                                        "milliseconds for status ok");
    d = good;
    d["measurements"][0]["median_ms"] = 0;
    EXPECT_CONTAINS(import_error(d), "measurements[0]: field 'median_ms' is 0: positive finite");
    d = good;
    d["measurements"][1]["median_ms"] = -1;
    EXPECT_EQ(import_error(d), prefix + "measurements[1]: field 'median_ms' is -1: finite "
                                        "milliseconds, not negative");
    d = good;
    d["measurements"][0]["median_ms"] = 7;
    EXPECT_EQ(import_error(d),
              prefix + "measurements[0]: field 'median_ms' is 7: the median of times_ms, 2");
    d = good;
    d["measurements"][0]["times_ms"] = {1.0, 2.0, 4.0, 8.0}; // any value from 2 to 4 is a median
    d["measurements"][0]["median_ms"] = 5;
    EXPECT_EQ(import_error(d),
              prefix + "measurements[0]: field 'median_ms' is 5: the median of times_ms, 2..4");
    d = good;
    d["measurements"][0]["times_ms"][2] = -3;
    EXPECT_EQ(import_error(d), prefix + "measurements[0]: field 'times_ms' holds -3 at index 2: "
                                        "positive finite milliseconds");
    d = good;
    d["measurements"][0]["closing"] = 1;
    EXPECT_EQ(import_error(d), prefix + "measurements[0]: field 'closing' must be true or false");
    d = good;
    d["measurements"][0]["closing"] = true;
    d["measurements"][0]["run"] = "";
    EXPECT_EQ(import_error(d), prefix + "measurements[0]: field 'closing' is true but 'run' is "
                                        "empty: a closing measurement belongs to the run whose "
                                        "closing round took it");
    d = good;
    d["measurements"][0]["times_ms"] = nlohmann::json::array();
    EXPECT_EQ(import_error(d), prefix + "measurements[0]: field 'times_ms' is empty: status ok "
                                        "needs the timed runs");
    d = good;
    d["measurements"][0]["spread_ms"] = -0.5;
    EXPECT_EQ(import_error(d), prefix + "measurements[0]: field 'spread_ms' is -0.5: finite "
                                        "milliseconds, not negative");
    d = good;
    d["measurements"][0]["compile_ms"] = -1;
    EXPECT_CONTAINS(import_error(d), "measurements[0]: field 'compile_ms' is -1");
    for (const char *shape : {"axb", "", "64x", "64x0x64", "x64", "-4x4", "64 x64"}) {
        d = good;
        d["workloads"][0]["shape"] = shape;
        EXPECT_EQ(import_error(d), prefix + "workloads[0]: field 'shape' is '" + shape +
                                       "': positive integers joined by 'x', e.g. 1024x1024x1024");
    }
    d = good;
    d["configs"][0]["config"] = "{tile: 4";
    EXPECT_EQ(import_error(d), prefix + "configs[0]: field 'config' is '{tile: 4': not JSON");
    d = good;
    d["configs"][1]["trace"] = "not json";
    EXPECT_EQ(import_error(d), prefix + "configs[1]: field 'trace' is 'not json': not JSON");
    d = good;
    d["targets"][0]["threads"] = 0;
    EXPECT_EQ(import_error(d), prefix + "targets[0]: field 'threads' is 0: at least 1");

    EXPECT_EQ(b.statistics().measurements, 0);
    EXPECT_EQ(b.workloads().size(), 0u);                  // nothing was added
    EXPECT_EQ(b.import_json(good).measurements_added, 4); // the untouched document imports
}

TEST(TuningDB, MovedFromDatabaseIsSafeToDestroy) {
    ScratchDir dir;
    Database a = Database::open(dir.file("a.db"));
    Database b = std::move(a);
    EXPECT_EQ(b.integrity_check(), "ok");
    a = std::move(b);
    EXPECT_EQ(a.statistics().measurements, 0);
}

TEST(TuningDB, RunStateIsSavedIncrementallyAndReadBackWhole) {
    ScratchDir dir;
    std::string path = dir.file("kiln.db");
    Database db = Database::open(path);
    int64_t t = db.target_id(test_target()), w = db.workload_id(test_workload());
    int64_t run = db.create_run(w, t, "model", 1, 0, 0, "{}");
    // Count the bytes each commit writes into the run's state: its base and its element rows.
    raw_sql(path, "CREATE TABLE written (bytes INTEGER NOT NULL); INSERT INTO written VALUES (0); "
                  "CREATE TRIGGER count_items AFTER INSERT ON run_state_items BEGIN UPDATE "
                  "written SET bytes = bytes + length(NEW.item); END; "
                  "CREATE TRIGGER count_state AFTER UPDATE OF state_json ON tuning_runs BEGIN "
                  "UPDATE written SET bytes = bytes + length(NEW.state_json); END;");
    nlohmann::json state = {
        {"strategy", {{"rng", std::string(300, '7')}, {"samples", nlohmann::json::array()}}},
        {"owner", {{"pid", 12}}}};
    std::vector<int64_t> per_commit;
    for (int i = 0; i < 300; i++) {
        // One sample more per trial, as the model strategy adds (about 350 bytes).
        state["strategy"]["samples"].push_back({{"config", {i % 7, i % 5, 3}},
                                                {"features", std::vector<float>(24, 0.5f)},
                                                {"score", -0.25}});
        int64_t before = raw_count(path, "SELECT bytes FROM written");
        db.update_run_state(run, state.dump(), i + 1, i);
        per_commit.push_back(raw_count(path, "SELECT bytes FROM written") - before);
        if (i % 100 == 0) {
            EXPECT_EQ(db.run(run)->state_json, state.dump()) << i;
        }
    }
    // The bytes written per commit do not grow with the number of commits.
    EXPECT_EQ(per_commit[299], per_commit[1]);
    EXPECT_GT(int64_t(state.dump().size()), 50 * per_commit[299]);
    EXPECT_EQ(raw_count(path, "SELECT count(*) FROM run_state_items"), 300);
    EXPECT_LT(raw_count(path, "SELECT length(state_json) FROM tuning_runs"), 400);
    EXPECT_EQ(db.run(run)->state_json, state.dump());
    EXPECT_EQ(db.latest_run(w, t, "model")->state_json, state.dump());

    // A change in the middle rewrites from there on; a list that goes away leaves no rows.
    state["strategy"]["samples"][250]["score"] = 1.5;
    db.update_run_state(run, state.dump(), 301, 301);
    EXPECT_EQ(db.run(run)->state_json, state.dump());
    state["strategy"]["samples"].erase(state["strategy"]["samples"].begin() + 10,
                                       state["strategy"]["samples"].end());
    db.update_run_state(run, state.dump(), 302, 302);
    EXPECT_EQ(raw_count(path, "SELECT count(*) FROM run_state_items"), 10);
    EXPECT_EQ(db.run(run)->state_json, state.dump());

    // Another connection (a resumed tuner) reads the same state, and saves on top of it.
    {
        Database other = Database::open(path);
        EXPECT_EQ(other.run(run)->state_json, state.dump());
        state["strategy"]["samples"].push_back({{"config", {1}}, {"score", 2}});
        other.update_run_state(run, state.dump(), 303, 303);
    }
    state["strategy"].erase("samples");
    db.update_run_state(run, state.dump(), 304, 304); // its cache is stale: read again
    EXPECT_EQ(raw_count(path, "SELECT count(*) FROM run_state_items"), 0);
    EXPECT_EQ(Database::open_existing(path).run(run)->state_json, state.dump());
    // Not JSON (no strategy writes that): stored whole.
    db.update_run_state(run, "not json", 305, 305);
    EXPECT_EQ(db.run(run)->state_json, "not json");
    EXPECT_EQ(db.integrity_check(), "ok");
}

TEST(TuningDB, AVersion3RunStateIsReadAsItIsAndSplitAtItsNextSave) {
    ScratchDir dir;
    std::string path = dir.file("v3.db");
    nlohmann::json state = {{"strategy", {{"rng", "1 2 3"}, {"samples", nlohmann::json::array()}}}};
    for (int i = 0; i < 20; i++)
        state["strategy"]["samples"].push_back({{"config", {i}}, {"score", i}});
    int64_t run;
    {
        Database db = Database::open(path);
        run = db.create_run(db.workload_id(test_workload()), db.target_id(test_target()), "model",
                            1, 0, 0, state.dump()); // stored whole, as version 3 did
    }
    raw_sql(path, "DROP TABLE run_state_items; DROP TABLE features; DROP TABLE cost_models; "
                  "ALTER TABLE measurements DROP COLUMN closing; "
                  "UPDATE schema_version SET version = 3;");
    std::string before = bytes_of(path);
    EXPECT_EQ(Database::open_existing(path).run(run)->state_json, state.dump());
    EXPECT_EQ(bytes_of(path), before); // read as it is, not migrated
    Database db = Database::open(path);
    EXPECT_EQ(raw_count(path, "SELECT max(version) FROM schema_version"), Database::schema_version);
    EXPECT_EQ(db.run(run)->state_json, state.dump());
    db.update_run_state(run, state.dump(), 20, 1);
    EXPECT_EQ(raw_count(path, "SELECT count(*) FROM run_state_items"), 20);
    EXPECT_EQ(db.run(run)->state_json, state.dump());
    EXPECT_EQ(db.export_json()["runs"][0]["state"], state.dump());
}

TEST(TuningDB, WriteOpensRefuseAnotherProgramsFileBeforeChangingIt) {
    ScratchDir dir;
    std::string foreign = dir.file("other.db");
    raw_sql(foreign, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('mine');");
    std::string before = bytes_of(foreign);
    EXPECT_CONTAINS(error_of<RuntimeError>([&] { Database::open(foreign); }),
                    "is an SQLite database but not a kiln tuning database");
    EXPECT_EQ(bytes_of(foreign), before); // not switched to WAL, no schema written
    EXPECT_FALSE(has_side_files(foreign));

    // No tables, but marked by its program.
    std::string marked = dir.file("marked.db");
    raw_sql(marked, "PRAGMA user_version = 7;");
    before = bytes_of(marked);
    EXPECT_EQ(error_of<RuntimeError>([&] { Database::open(marked); }),
              "tuning database '" + marked +
                  "': the file is an SQLite database of another program (no kiln tables, but a "
                  "schema, a user_version or an application_id of its own); pass another --db "
                  "file");
    EXPECT_EQ(bytes_of(marked), before);

    // Not SQLite at all.
    std::string text = dir.file("notes.txt");
    std::ofstream(text) << "not a database, and long enough to be read as a header............\n";
    before = bytes_of(text);
    EXPECT_CONTAINS(error_of<RuntimeError>([&] { Database::open(text); }),
                    "is not an SQLite database");
    EXPECT_EQ(bytes_of(text), before);

    // An empty file holds nothing to lose: a write open makes it a kiln database.
    std::string empty = dir.file("empty.db");
    std::ofstream(empty).close();
    Database db = Database::open(empty);
    EXPECT_EQ(raw_count(empty, "SELECT max(version) FROM schema_version"),
              Database::schema_version);
}

// The cost model's training rows: a config's features on a workload, with the median of its ok
// measurements there; configs without an ok measurement, and features of another version, are
// not rows.
TEST(TuningDB, FeatureRowsPairAConfigsFeaturesWithItsMedian) {
    ScratchDir dir;
    Database db = Database::open(dir.file("f.db"));
    int64_t t = db.target_id(test_target());
    int64_t w1 = db.workload_id(test_workload("matmul", "64x64x64"));
    int64_t w2 = db.workload_id(test_workload("matmul", "128x128x128"));
    int64_t a = test_config(db, 1), b = test_config(db, 2), c = test_config(db, 3);
    for (double ms : {3.0, 1.0, 2.0, 9.0})
        db.record_measurement(ok_measurement(0, w1, t, a, ms));
    db.record_measurement(ok_measurement(0, w2, t, a, 5.0));
    db.record_measurement(failed_measurement(0, w1, t, b, Status::timeout, "timed out"));
    db.record_measurement(ok_measurement(0, w1, t, c, 4.0));
    db.record_features(w1, t, a, "v1", {1.0f, 2.0f});
    db.record_features(w2, t, a, "v1", {3.0f, 4.0f});
    db.record_features(w1, t, b, "v1", {5.0f, 6.0f}); // never ok: not a row
    db.record_features(w1, t, c, "v0", {7.0f, 8.0f}); // another version
    db.record_features(w1, t, a, "v1", {1.5f, 2.5f}); // replaces the first

    std::vector<FeatureRow> rows = db.feature_rows(t, "v1");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].workload_id, w1);
    EXPECT_EQ(rows[0].config_id, a);
    EXPECT_EQ(rows[0].features, (std::vector<float>{1.5f, 2.5f}));
    EXPECT_DOUBLE_EQ(rows[0].median_ms, 2.5); // the median of 1, 2, 3, 9
    EXPECT_EQ(rows[1].workload_id, w2);
    EXPECT_DOUBLE_EQ(rows[1].median_ms, 5.0);
    ASSERT_EQ(db.feature_rows(t, "v0").size(), 1u);
    EXPECT_TRUE(db.feature_rows(t + 1, "v1").empty());

    EXPECT_EQ(error_of<RuntimeError>([&] { db.record_features(w1 + 100, t, a, "v1", {1.0f}); }),
              "tuning database '" + db.path() + "': record_features: no workload " +
                  std::to_string(w1 + 100) + ", target " + std::to_string(t) + " or config " +
                  std::to_string(a) + " (get ids from workload_id(), target_id(), config_id())");
    EXPECT_EQ(error_of<RuntimeError>([&] {
                  db.record_features(w1, t, a, "v1", {1.0f, NAN});
              }),
              "tuning database '" + db.path() + "': record_features: a feature of config " +
                  std::to_string(a) + " is nan; features must be finite");
}

TEST(TuningDB, CostModelsGiveTheLatestModelOfEachTarget) {
    ScratchDir dir;
    Database db = Database::open(dir.file("m.db"));
    int64_t t1 = db.target_id(test_target(1)), t2 = db.target_id(test_target(2));
    CostModelRecord m;
    m.target_id = t1;
    m.version = "v1";
    m.rows = 10;
    m.workloads = 2;
    m.file = "first.json";
    m.evaluation = {{"mean_kendall_tau", 0.5}};
    int64_t first = db.record_cost_model(m);
    m.file = "second.json";
    m.rows = 20;
    int64_t second = db.record_cost_model(m);
    m.target_id = t2;
    m.file = "other.json";
    db.record_cost_model(m);
    EXPECT_GT(second, first);

    std::vector<CostModelRecord> all = db.cost_models();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].id, second);
    EXPECT_EQ(all[0].file, "second.json");
    EXPECT_EQ(all[0].rows, 20);
    EXPECT_EQ(all[0].workloads, 2);
    EXPECT_GT(all[0].trained_us, 0);
    EXPECT_DOUBLE_EQ(all[0].evaluation["mean_kendall_tau"].get<double>(), 0.5);
    EXPECT_EQ(all[1].file, "other.json");
    ASSERT_EQ(db.cost_models(t2).size(), 1u);
    m.target_id = t2 + 10;
    EXPECT_EQ(error_of<RuntimeError>([&] { db.record_cost_model(m); }),
              "tuning database '" + db.path() + "': record_cost_model: no target with id " +
                  std::to_string(t2 + 10));
}

TEST(TuningDB, FeaturesTravelWithAnExportAndImportOnce) {
    ScratchDir dir;
    Database a = Database::open(dir.file("a.db"));
    int64_t t = a.target_id(test_target());
    int64_t w = a.workload_id(test_workload());
    int64_t c1 = test_config(a, 1), c2 = test_config(a, 2), c3 = test_config(a, 3);
    a.record_measurement(ok_measurement(0, w, t, c1, 2.0));
    a.record_measurement(ok_measurement(0, w, t, c2, 3.0));
    a.record_features(w, t, c1, "v1", {1.0f, 2.0f});
    a.record_features(w, t, c2, "v1", {3.0f, 4.0f});
    a.record_features(w, t, c3, "v1", {5.0f, 6.0f}); // never measured: not exported
    nlohmann::json doc = a.export_json();
    ASSERT_EQ(doc["features"].size(), 2u) << doc["features"].dump();

    Database b = Database::open(dir.file("b.db"));
    ImportSummary first = b.import_json(doc);
    EXPECT_EQ(first.features_added, 2);
    EXPECT_EQ(b.import_json(doc).features_added, 0); // idempotent
    int64_t bt = *b.find_target(test_target());
    std::vector<FeatureRow> rows = b.feature_rows(bt, "v1");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].features, (std::vector<float>{1.0f, 2.0f}));
    EXPECT_DOUBLE_EQ(rows[0].median_ms, 2.0);
    EXPECT_EQ(rows[1].features, (std::vector<float>{3.0f, 4.0f}));

    // A document without features (an older export) imports; a malformed row is named.
    doc.erase("features");
    EXPECT_EQ(Database::open(dir.file("c.db")).import_json(doc).features_added, 0);
    doc["features"] = {{{"workload", w},
                        {"target", t},
                        {"config", "cfg1"},
                        {"version", "v1"},
                        {"vector", {1.0, "x"}}}};
    EXPECT_EQ(error_of<RuntimeError>([&] { b.import_json(doc); }),
              "cannot import into tuning database '" + b.path() +
                  "': features[0]: field 'vector' must hold finite numbers");
    doc["features"][0]["vector"] = {1.0};
    doc["features"][0]["config"] = "cfg9";
    EXPECT_EQ(error_of<RuntimeError>([&] { b.import_json(doc); }),
              "cannot import into tuning database '" + b.path() +
                  "': features[0]: config 'cfg9' is not in the document's configs");
}

} // namespace
} // namespace kiln::tuning_db
