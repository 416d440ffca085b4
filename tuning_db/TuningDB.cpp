// tuning_db::Database, the core: opening a file (and refusing one that is not kiln's), the schema
// and its migrations, keys (get-or-create through internal::upsert), recording measurements,
// tuning runs, their owners and their incrementally saved state. The read-only queries are in
// Queries.cpp, export and import in ImportExport.cpp; what they share is in DatabaseImpl.h.
#include "tuning_db/TuningDB.h"

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

#include "lang/Error.h"
#include "tuning_db/DatabaseImpl.h"
#include "tuning_db/RunState.h"

namespace kiln::tuning_db {

using nlohmann::json;
using namespace internal;

namespace internal {

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Upserted upsert_target(Impl &db, const TargetKey &key) {
    auto columns = std::tie(key.cpu_model, key.features, key.threads, key.compiler);
    return upsert(db, kTargetRow, columns, columns);
}

Upserted upsert_workload(Impl &db, const WorkloadKey &key) {
    auto columns = std::tie(key.op, key.algorithm_hash, key.shape, key.types);
    return upsert(db, kWorkloadRow, columns, columns);
}

RunRecord read_run(const Query &q) {
    RunRecord r;
    r.id = q.i64(0);
    r.uuid = q.text(1);
    r.workload_id = q.i64(2);
    r.target_id = q.i64(3);
    r.strategy = q.text(4);
    r.seed = q.i64(5);
    r.budget_trials = q.i64(6);
    r.budget_seconds = q.dbl(7);
    r.elapsed_s = q.dbl(8);
    r.trials_done = q.i64(9);
    r.state_json = q.text(10);
    r.started_us = q.i64(11);
    r.updated_us = q.i64(12);
    if (!q.null(13)) r.finished_us = q.i64(13);
    return r;
}

std::string assembled_state(Impl &db, int64_t run_id, const std::string &base) {
    if (db.version < kRunStateItemsVersion) return base;
    std::map<std::string, std::vector<std::string>> lists;
    Query q(db, "SELECT path, item FROM run_state_items WHERE run_id = ? ORDER BY path, seq");
    q.bind(run_id);
    while (q.step())
        lists[q.text(0)].push_back(q.text(1));
    if (lists.empty()) return base;
    try {
        return run_state::join(json::parse(base), lists).dump();
    } catch (const json::exception &e) {
        db.fail_user(detail::str("tuning run ", run_id, ": its saved state is malformed: ",
                                 e.what(), "; rerun with --no-resume to start a fresh run"));
    }
}

} // namespace internal

namespace {

std::string random_uuid() {
    std::random_device rd;
    std::mt19937_64 gen((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(now_us()));
    uint64_t a = gen(), b = gen();
    char text[33];
    std::snprintf(text, sizeof text, "%016llx%016llx", (unsigned long long)a,
                  (unsigned long long)b);
    return text;
}

const char *const kStatusNames[] = {"ok",    "compile_error", "runtime_error",
                                    "crash", "timeout",       "wrong_answer"};

// The schema, one script per version. Migrating from version v runs scripts v+1.. in one
// transaction. Never edit a released script: add a new one and bump Database::schema_version.
const char *const kMigrations[] = {
    // Version 1: the tables and their lookup indices.
    R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE targets (
    id INTEGER PRIMARY KEY,
    cpu_model TEXT NOT NULL,
    features TEXT NOT NULL,
    threads INTEGER NOT NULL,
    compiler TEXT NOT NULL,
    UNIQUE (cpu_model, features, threads, compiler));
CREATE TABLE workloads (
    id INTEGER PRIMARY KEY,
    op TEXT NOT NULL,
    algorithm_hash TEXT NOT NULL,
    shape TEXT NOT NULL,
    types TEXT NOT NULL,
    UNIQUE (op, algorithm_hash, shape, types));
CREATE TABLE configs (
    id INTEGER PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    config_json TEXT NOT NULL,
    trace_json TEXT NOT NULL);
CREATE TABLE tuning_runs (
    id INTEGER PRIMARY KEY,
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    target_id INTEGER NOT NULL REFERENCES targets(id),
    strategy TEXT NOT NULL,
    seed INTEGER NOT NULL,
    budget_trials INTEGER NOT NULL,
    budget_seconds REAL NOT NULL,
    elapsed_s REAL NOT NULL DEFAULT 0,
    trials_done INTEGER NOT NULL DEFAULT 0,
    state_json TEXT NOT NULL,
    started_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    finished_us INTEGER);
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY,
    run_id INTEGER REFERENCES tuning_runs(id),
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    target_id INTEGER NOT NULL REFERENCES targets(id),
    config_id INTEGER NOT NULL REFERENCES configs(id),
    status TEXT NOT NULL CHECK (status IN ('ok', 'compile_error', 'runtime_error', 'crash',
                                           'timeout', 'wrong_answer')),
    times_ms TEXT NOT NULL,
    median_ms REAL NOT NULL,
    spread_ms REAL NOT NULL,
    compile_ms REAL NOT NULL,
    error TEXT NOT NULL,
    timestamp_us INTEGER NOT NULL);
CREATE INDEX measurements_best ON measurements (workload_id, target_id, status, median_ms);
CREATE INDEX measurements_config ON measurements (workload_id, target_id, config_id);
CREATE INDEX measurements_time ON measurements (workload_id, target_id, timestamp_us);
CREATE INDEX measurements_run ON measurements (run_id, id);
CREATE INDEX runs_lookup ON tuning_runs (workload_id, target_id, strategy, started_us);
)sql",
    // Version 2: runs get a random uuid, the key that export/import match runs (and through
    // them measurements) by across databases.
    R"sql(
ALTER TABLE tuning_runs ADD COLUMN uuid TEXT;
UPDATE tuning_runs SET uuid = lower(hex(randomblob(16))) WHERE uuid IS NULL;
CREATE UNIQUE INDEX runs_uuid ON tuning_runs (uuid);
)sql",
    // Version 3: a run's owner (the process tuning it: pid, host, process start time), set
    // atomically by create_run and claim_run so that two tuners never resume the same run.
    // Backfilled from the owner an older kiln kept in state_json.
    R"sql(
ALTER TABLE tuning_runs ADD COLUMN owner_pid INTEGER;
ALTER TABLE tuning_runs ADD COLUMN owner_host TEXT;
ALTER TABLE tuning_runs ADD COLUMN owner_start INTEGER;
UPDATE tuning_runs SET owner_pid = json_extract(state_json, '$.owner.pid'),
                       owner_host = json_extract(state_json, '$.owner.host'),
                       owner_start = json_extract(state_json, '$.owner.start')
    WHERE json_valid(state_json) AND json_type(state_json, '$.owner') = 'object';
)sql",
    // Version 4: a run's state is saved incrementally (tuning_db/RunState.h): the elements of its
    // record lists, one row each, the rest in state_json. A state saved whole by an older version
    // is read as it is and split at its next save.
    R"sql(
CREATE TABLE run_state_items (
    run_id INTEGER NOT NULL REFERENCES tuning_runs(id),
    path TEXT NOT NULL,
    seq INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (run_id, path, seq)) WITHOUT ROWID;
)sql",
    // Version 5: the cost model's training data and its saved models (tuning_db/CostModels.cpp).
    // features: the loop-nest features of a measured config on a workload and target, per
    // feature-set version (JSON array); cost_models: each model trained on a target's features,
    // with its file beside the database and how well it ranked held-out workloads.
    R"sql(
CREATE TABLE features (
    target_id INTEGER NOT NULL REFERENCES targets(id),
    version TEXT NOT NULL,
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    config_id INTEGER NOT NULL REFERENCES configs(id),
    vector TEXT NOT NULL,
    PRIMARY KEY (target_id, version, workload_id, config_id)) WITHOUT ROWID;
CREATE TABLE cost_models (
    id INTEGER PRIMARY KEY,
    target_id INTEGER NOT NULL REFERENCES targets(id),
    version TEXT NOT NULL,
    trained_us INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    workloads INTEGER NOT NULL,
    file TEXT NOT NULL,
    evaluation_json TEXT NOT NULL);
CREATE INDEX cost_models_target ON cost_models (target_id, trained_us);
)sql",
    // Version 6: a measurement knows whether its run's closing round took it; the standing closing
    // round decides the best config by its own times (BestConfig in TuningDB.h).
    R"sql(
ALTER TABLE measurements ADD COLUMN closing INTEGER NOT NULL DEFAULT 0 CHECK (closing IN (0, 1));
)sql",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Database::schema_version,
              "one migration script per schema version");
// The oldest schema version read commands open as it is: later versions only added columns that
// no read query selects (the run owner, version 3), tables read only when they exist (the run
// state's rows, version 4; the cost model's features and models, version 5), and the closing
// flag of measurements (version 6), which a temporary view supplies as 0 (check_readable).
constexpr int64_t kOldestReadableVersion = 2;

/// The record lists of a run as stored: hashes of their elements, from this connection's cache
/// when every list's row count in the file still matches it, else read again.
std::map<std::string, std::vector<size_t>> stored_lists(Impl &db, int64_t run_id) {
    auto it = db.stored_lists.find(run_id);
    if (it != db.stored_lists.end()) {
        bool current = true;
        for (const auto &[path, hashes] : it->second) {
            Query q(db, "SELECT coalesce(max(seq) + 1, 0) FROM run_state_items WHERE run_id = ? "
                        "AND path = ?");
            q.bind(run_id, path).step();
            current = current && q.i64(0) == int64_t(hashes.size());
        }
        if (current) return it->second;
    }
    std::map<std::string, std::vector<size_t>> out;
    Query q(db, "SELECT path, item FROM run_state_items WHERE run_id = ? ORDER BY path, seq");
    q.bind(run_id);
    while (q.step())
        out[q.text(0)].push_back(std::hash<std::string>()(q.text(1)));
    return out;
}

/// Deletes the stored record lists that the state no longer has, and forgets them in `stored`.
void delete_lists_gone(Impl &db, int64_t run_id, const run_state::Split &split,
                       std::map<std::string, std::vector<size_t>> &stored) {
    for (auto it = stored.begin(); it != stored.end();) {
        if (split.lists.count(it->first)) {
            ++it;
            continue;
        }
        Query(db, "DELETE FROM run_state_items WHERE run_id = ? AND path = ?")
            .bind(run_id, it->first)
            .run();
        it = stored.erase(it);
    }
}

/// Writes one record list: the elements after the longest prefix that equals what is stored
/// (`have`: the hashes of the stored elements, updated).
void write_list(Impl &db, int64_t run_id, const std::string &path,
                const std::vector<std::string> &items, std::vector<size_t> &have) {
    size_t same = 0;
    while (same < have.size() && same < items.size() &&
           have[same] == std::hash<std::string>()(items[same]))
        same++;
    if (same < have.size()) {
        Query(db, "DELETE FROM run_state_items WHERE run_id = ? AND path = ? AND seq >= ?")
            .bind(run_id, path, int64_t(same))
            .run();
        have.resize(same);
    }
    for (size_t i = same; i < items.size(); i++) {
        Query(db, "INSERT INTO run_state_items (run_id, path, seq, item) "
                  "VALUES (?, ?, ?, ?)")
            .bind(run_id, path, int64_t(i), items[i])
            .run();
        have.push_back(std::hash<std::string>()(items[i]));
    }
}

} // namespace

std::string TargetKey::to_string() const {
    return detail::str(cpu_model, " threads=", threads, " ", compiler);
}

std::string WorkloadKey::to_string() const {
    return detail::str(op, " ", shape, " ", types, " (", algorithm_hash, ")");
}

const char *to_string(Status s) {
    return kStatusNames[int(s)];
}

Status status_from_string(const std::string &name) {
    for (int i = 0; i < 6; i++) {
        if (name == kStatusNames[i]) return Status(i);
    }
    runtime_error("unknown measurement status '", name,
                  "'; expected one of ok, compile_error, runtime_error, crash, timeout, "
                  "wrong_answer");
}

// --- opening ------------------------------------------------------------------------------------

namespace {

/// Creates the folder of a new file; refuses an empty path and a directory.
void check_path(const std::string &path) {
    if (path.empty()) runtime_error("tuning database path is empty; pass a file name");
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
        std::filesystem::create_directories(parent, ec);
        if (ec) {
            runtime_error("tuning database '", path, "': cannot create directory '",
                          parent.string(), "': ", ec.message());
        }
    }
    if (std::filesystem::is_directory(path, ec))
        runtime_error("tuning database '", path, "' is a directory; pass a file name");
}

/// The URI that opens `path` as immutable, its characters that mean something in a URI escaped.
std::string immutable_uri(const std::string &path) {
    std::error_code ec;
    std::string uri = "file:";
    for (char c : std::filesystem::absolute(path, ec).string()) {
        if (c == '%' || c == '?' || c == '#') {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%%%02X", (unsigned char)c);
            uri += buf;
        } else {
            uri += c;
        }
    }
    return uri + "?immutable=1";
}

/// Opens the connection: read-write and creating for a write command; for a read command
/// read-write without create when the file is writable, else immutable.
void open_connection(Impl &db, bool read_only) {
    const std::string &path = db.path;
    int rc;
    if (!read_only) {
        rc = sqlite3_open_v2(path.c_str(), &db.db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    } else if (access(path.c_str(), W_OK) == 0) {
        // Read-write without create and without any pragma that writes: the last connection to
        // close removes the -wal/-shm files, which a read-only connection would leave behind.
        rc = sqlite3_open_v2(path.c_str(), &db.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    } else {
        // A file this process cannot write: nobody writes it through us, so read it as
        // immutable (no -wal/-shm files created next to it).
        rc = sqlite3_open_v2(immutable_uri(path).c_str(), &db.db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    }
    if (rc != SQLITE_OK) db.fail("cannot open", rc);
    sqlite3_extended_result_codes(db.db, 1);
    sqlite3_busy_timeout(db.db, kBusyTimeoutMs);
}

/// For a read command: checks that the file is kiln's, of a version this build reads. Never
/// creates, converts or migrates anything: the file is read as it is.
void check_readable(Impl &db) {
    constexpr int schema_version = Database::schema_version;
    std::optional<int64_t> v = db.read("reading the schema version", [&] {
        Query t(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                    "name = 'schema_version'");
        t.step();
        if (t.i64(0) == 0)
            db.fail_user("the file is an SQLite database but not a kiln tuning database (it "
                         "has no schema_version table); pass another --db file");
        Query q(db, "SELECT max(version) FROM schema_version");
        if (!q.step() || q.null(0)) db.fail_user("the schema_version table is empty");
        return std::optional<int64_t>(q.i64(0));
    });
    if (*v > schema_version || *v < kOldestReadableVersion)
        db.fail_user(detail::str(
            "schema version ", *v, *v > schema_version ? " is newer" : " is older",
            " than version ", *v > schema_version ? schema_version : kOldestReadableVersion,
            " that this build of kiln reads; ",
            *v > schema_version ? "use a newer kiln"
                                : "a write command (`kiln tune`, `kiln db import`) migrates it "
                                  "first; read commands never change the file"));
    db.exec("PRAGMA foreign_keys=ON", "configuring");
    db.version = *v;
    // Before version 6 no measurement was marked as a closing one. A temporary view (in the
    // connection's temp schema, which unqualified names find first; the file is not touched)
    // gives every query the column, 0 throughout: no closing round stands in such a file.
    if (*v < kClosingVersion) {
        db.exec("CREATE TEMP VIEW measurements AS SELECT *, 0 AS closing FROM main.measurements",
                "reading an older schema");
    }
}

/// The file's schema version; none for a file that holds nothing yet (new or empty). Refuses
/// another program's file.
std::optional<int64_t> current_version(Impl &db) {
    Query t(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                "name = 'schema_version'");
    t.step();
    if (t.i64(0) == 0) {
        Query any(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
        any.step();
        if (any.i64(0) != 0) {
            db.fail_user("the file is an SQLite database but not a kiln tuning database (it "
                         "has tables but no schema_version table); pass another --db file");
        }
        // No tables, but marked by a program (views, indices, a user version or an
        // application id): not an empty file either.
        Query other(db, "SELECT (SELECT count(*) FROM sqlite_master) <> 0 OR "
                        "(SELECT user_version FROM pragma_user_version) <> 0 OR "
                        "(SELECT application_id FROM pragma_application_id) <> 0");
        other.step();
        if (other.i64(0) != 0) {
            db.fail_user("the file is an SQLite database of another program (no kiln tables, "
                         "but a schema, a user_version or an application_id of its own); "
                         "pass another --db file");
        }
        return std::nullopt;
    }
    Query v(db, "SELECT max(version) FROM schema_version");
    if (!v.step() || v.null(0)) db.fail_user("the schema_version table is empty");
    return v.i64(0);
}

void refuse_newer(Impl &db, int64_t v) {
    constexpr int schema_version = Database::schema_version;
    if (v > schema_version) {
        db.fail_user(detail::str(
            "schema version ", v, " is newer than version ", schema_version,
            " that this build of kiln supports; use a newer kiln, or export the data with it "
            "(`kiln db export`) and import into a new file"));
    }
}

/// For a write command: checks the file (before any change), switches it to WAL, configures
/// the connection and creates or migrates the schema.
void prepare_for_writing(Impl &db) {
    constexpr int schema_version = Database::schema_version;
    // Before any change (the WAL switch writes the file's header): the file must be kiln's, or
    // hold nothing yet (new or empty). Another program's file is refused with its bytes unchanged.
    std::optional<int64_t> v =
        db.read("reading the schema version", [&] { return current_version(db); });
    if (v) refuse_newer(db, *v);
    // journal_mode=WAL needs a lock briefly; it persists in the file once set.
    std::string mode = db.read("setting WAL mode", [&] {
        Query q(db, "PRAGMA journal_mode=WAL");
        if (!q.step()) return std::string();
        return q.text(0);
    });
    if (mode != "wal")
        db.fail_user("cannot switch to WAL journal mode (got '" + mode +
                     "'); is the file on a network file system?");
    // FULL: a committed measurement survives a power loss too, not just a killed process.
    db.read("configuring", [&] {
        db.exec("PRAGMA synchronous=FULL", "configuring");
        db.exec("PRAGMA foreign_keys=ON", "configuring");
    });

    if (!v || *v < schema_version) {
        db.write("creating or migrating the schema", [&] {
            std::optional<int64_t> from = current_version(db); // again, under the write lock
            int64_t start = from.value_or(0);
            refuse_newer(db, start);
            for (int64_t i = start; i < schema_version; i++)
                db.exec(kMigrations[i], detail::str("migrating the schema to version ", i + 1));
            db.exec("DELETE FROM schema_version", "migrating the schema");
            Query q(db, "INSERT INTO schema_version (version) VALUES (?)");
            q.bind(int64_t(schema_version)).run();
        });
    }
    db.version = schema_version;
}

} // namespace

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::Database(Database &&) noexcept = default;
Database &Database::operator=(Database &&) noexcept = default;
Database::~Database() = default;

const std::string &Database::path() const {
    return impl_->path;
}

Database Database::open_existing(const std::string &path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        runtime_error("tuning database '", path,
                      "' does not exist; run `kiln tune OP` to create it, or pass --db FILE to "
                      "name an existing one");
    }
    if (std::filesystem::is_directory(path, ec))
        runtime_error("tuning database '", path, "' is a directory; pass a file name");
    if (std::filesystem::file_size(path, ec) == 0 && !ec)
        runtime_error("tuning database '", path,
                      "' is an empty file, not a kiln tuning database (read commands never write "
                      "to it); run `kiln tune OP --db ",
                      path, "` to create one there, or pass another --db file");
    return open_database(path, true);
}

Database Database::open(const std::string &path) {
    return open_database(path, false);
}

Database Database::open_database(const std::string &path, bool read_only) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    check_path(path);
    open_connection(*impl, read_only);
    if (read_only)
        check_readable(*impl);
    else
        prepare_for_writing(*impl);
    return Database(std::move(impl));
}

// --- run owners ----------------------------------------------------------------------------------

namespace {
/// A process's start time in clock ticks since boot (/proc/PID/stat field 22), -1 when there is
/// no such process. With the pid it identifies a process even after pid reuse.
int64_t process_start_ticks(int64_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')');
    if (close == std::string::npos || close + 2 > text.size()) return -1;
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; i++) {
        if (i == 22) return std::stoll(field);
    }
    return -1;
}
} // namespace

RunOwner RunOwner::this_process() {
    RunOwner me;
    me.pid = int64_t(getpid());
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    me.host = buf;
    me.start = process_start_ticks(me.pid);
    return me;
}

bool RunOwner::alive() const {
    // Another host's process cannot be checked from here: treated as gone, so that a run copied
    // to (or shared with) another machine can be resumed there.
    if (pid <= 0 || host != this_process().host) return false;
    return process_start_ticks(pid) == start;
}
// --- keys ----------------------------------------------------------------------------------------

int64_t Database::target_id(const TargetKey &key) {
    Impl &db = *impl_;
    return db.write("recording a target", [&] { return upsert_target(db, key).id; });
}

int64_t Database::workload_id(const WorkloadKey &key) {
    Impl &db = *impl_;
    if (key.op.empty())
        db.fail_user("a workload needs an operator name (WorkloadKey::op is empty)");
    return db.write("recording a workload", [&] { return upsert_workload(db, key).id; });
}

int64_t Database::config_id(const std::string &config_hash, const std::string &config_json,
                            const std::string &trace_json) {
    Impl &db = *impl_;
    if (config_hash.empty()) db.fail_user("a config needs a hash (config_hash is empty)");
    return db.write("recording a config", [&] {
        auto conflict = [&](const std::string &stored_config) {
            db.fail_user(
                detail::str("config hash '", config_hash,
                            "' is already stored with a different config or trace (stored config ",
                            stored_config, ", new config ", config_json,
                            "); the hash must cover both the knob values and the trace"));
        };
        return upsert_config(db, config_hash, config_json, trace_json, conflict).id;
    });
}

std::optional<int64_t> Database::find_target(const TargetKey &key) const {
    Impl &db = *impl_;
    return db.read("looking up a target", [&]() -> std::optional<int64_t> {
        Query q(db, kTargetRow.select_sql);
        if (!q.bind(key.cpu_model, key.features, key.threads, key.compiler).step())
            return std::nullopt;
        return q.i64(0);
    });
}

std::optional<int64_t> Database::find_workload(const WorkloadKey &key) const {
    Impl &db = *impl_;
    return db.read("looking up a workload", [&]() -> std::optional<int64_t> {
        Query q(db, kWorkloadRow.select_sql);
        if (!q.bind(key.op, key.algorithm_hash, key.shape, key.types).step()) return std::nullopt;
        return q.i64(0);
    });
}

std::optional<ConfigRecord> Database::find_config(const std::string &config_hash) const {
    Impl &db = *impl_;
    return db.read("looking up a config", [&]() -> std::optional<ConfigRecord> {
        Query q(db, "SELECT id, hash, config_json, trace_json FROM configs WHERE hash = ?");
        if (!q.bind(config_hash).step()) return std::nullopt;
        return ConfigRecord{q.i64(0), q.text(1), q.text(2), q.text(3)};
    });
}

// --- measurements --------------------------------------------------------------------------------

int64_t Database::record_measurement(const MeasurementRecord &m) {
    Impl &db = *impl_;
    auto check_finite = [&](double v, const char *name) {
        if (!std::isfinite(v)) {
            db.fail_user(detail::str("record_measurement: ", name, " is ", v,
                                     "; record a failed candidate with its status and zero times"));
        }
    };
    check_finite(m.median_ms, "median_ms");
    check_finite(m.spread_ms, "spread_ms");
    check_finite(m.compile_ms, "compile_ms");
    for (double t : m.times_ms)
        check_finite(t, "a value of times_ms");
    std::string times = times_to_json(m.times_ms);

    return db.write("recording a measurement", [&] {
        auto exists = [&](const char *table, int64_t id) {
            Query q(db, std::string("SELECT 1 FROM ") + table + " WHERE id = ?");
            return q.bind(id).step();
        };
        if (!exists("workloads", m.workload_id))
            db.fail_user(detail::str("record_measurement: no workload with id ", m.workload_id,
                                     "; get ids from workload_id()"));
        if (!exists("targets", m.target_id))
            db.fail_user(detail::str("record_measurement: no target with id ", m.target_id,
                                     "; get ids from target_id()"));
        if (!exists("configs", m.config_id))
            db.fail_user(detail::str("record_measurement: no config with id ", m.config_id,
                                     "; get ids from config_id()"));
        if (m.run_id != 0) {
            Query r(db, "SELECT workload_id, target_id FROM tuning_runs WHERE id = ?");
            if (!r.bind(m.run_id).step())
                db.fail_user(detail::str("record_measurement: no tuning run with id ", m.run_id,
                                         "; get ids from create_run(), or pass 0"));
            if (r.i64(0) != m.workload_id || r.i64(1) != m.target_id)
                db.fail_user(detail::str("record_measurement: tuning run ", m.run_id,
                                         " is for workload ", r.i64(0), " on target ", r.i64(1),
                                         ", not workload ", m.workload_id, " on target ",
                                         m.target_id));
        }
        Query q(db, "INSERT INTO measurements (run_id, workload_id, target_id, config_id, status, "
                    "times_ms, median_ms, spread_ms, compile_ms, error, timestamp_us, closing) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        q.bind(m.run_id ? std::optional<int64_t>(m.run_id) : std::nullopt, m.workload_id,
               m.target_id, m.config_id, to_string(m.status), times, m.median_ms, m.spread_ms,
               m.compile_ms, m.error, now_us(), int64_t(m.closing))
            .run();
        return int64_t(sqlite3_last_insert_rowid(db.db));
    });
}

// --- runs ----------------------------------------------------------------------------------------

int64_t Database::create_run(int64_t workload_id, int64_t target_id, const std::string &strategy,
                             int64_t seed, int64_t budget_trials, double budget_seconds,
                             const std::string &state_json) {
    Impl &db = *impl_;
    if (strategy.empty()) db.fail_user("create_run: the strategy name is empty");
    return db.write("creating a tuning run", [&] {
        Query w(db, "SELECT 1 FROM workloads WHERE id = ?");
        if (!w.bind(workload_id).step())
            db.fail_user(detail::str("create_run: no workload with id ", workload_id));
        Query t(db, "SELECT 1 FROM targets WHERE id = ?");
        if (!t.bind(target_id).step())
            db.fail_user(detail::str("create_run: no target with id ", target_id));
        int64_t now = now_us();
        RunOwner me = RunOwner::this_process();
        Query(db, "INSERT INTO tuning_runs (uuid, workload_id, target_id, strategy, seed, "
                  "budget_trials, budget_seconds, state_json, started_us, updated_us, owner_pid, "
                  "owner_host, owner_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(random_uuid(), workload_id, target_id, strategy, seed, budget_trials,
                  budget_seconds, state_json, now, now, me.pid, me.host, me.start)
            .run();
        return int64_t(sqlite3_last_insert_rowid(db.db));
    });
}

RunClaim Database::claim_run(int64_t run_id, const RunOwner &me) {
    Impl &db = *impl_;
    return db.write("claiming a tuning run", [&] {
        RunClaim claim;
        {
            Query q(db, "SELECT finished_us IS NOT NULL, owner_pid, owner_host, owner_start "
                        "FROM tuning_runs WHERE id = ?");
            if (!q.bind(run_id).step())
                db.fail_user(detail::str("claim_run: no tuning run with id ", run_id));
            claim.finished = q.i64(0) != 0;
            if (!q.null(1)) {
                RunOwner holder;
                holder.pid = q.i64(1);
                holder.host = q.null(2) ? std::string() : q.text(2);
                holder.start = q.null(3) ? -1 : q.i64(3);
                claim.holder = holder;
            }
        }
        if (claim.finished) return claim;
        bool same = claim.holder && claim.holder->pid == me.pid && claim.holder->host == me.host &&
                    claim.holder->start == me.start;
        if (claim.holder && !same && claim.holder->alive()) return claim;
        Query(db, "UPDATE tuning_runs SET owner_pid = ?, owner_host = ?, owner_start = ?, "
                  "updated_us = ? WHERE id = ?")
            .bind(me.pid, me.host, me.start, now_us(), run_id)
            .run();
        claim.claimed = true;
        return claim;
    });
}

void Database::update_run_state(int64_t run_id, const std::string &state_json, int64_t trials_done,
                                double elapsed_s) {
    Impl &db = *impl_;
    // A state that is not JSON (no strategy writes one) is stored whole, as before version 4.
    run_state::Split split;
    bool whole = false;
    try {
        split = run_state::split(json::parse(state_json));
    } catch (const json::exception &) {
        whole = true;
    }
    std::string base = whole ? state_json : split.base.dump();
    std::map<std::string, std::vector<size_t>> stored;
    db.write("saving a tuning run's state", [&] {
        Query(db, "UPDATE tuning_runs SET state_json = ?, trials_done = ?, elapsed_s = ?, "
                  "updated_us = ? WHERE id = ?")
            .bind(base, trials_done, elapsed_s, now_us(), run_id)
            .run();
        if (sqlite3_changes(db.db) == 0)
            db.fail_user(detail::str("update_run_state: no tuning run with id ", run_id));
        stored = stored_lists(db, run_id);
        delete_lists_gone(db, run_id, split, stored);
        for (const auto &[path, items] : split.lists)
            write_list(db, run_id, path, items, stored[path]);
    });
    db.stored_lists[run_id] = std::move(stored);
}

void Database::finish_run(int64_t run_id) {
    Impl &db = *impl_;
    db.write("finishing a tuning run", [&] {
        int64_t now = now_us();
        Query(db, "UPDATE tuning_runs SET finished_us = coalesce(finished_us, ?), updated_us = ? "
                  "WHERE id = ?")
            .bind(now, now, run_id)
            .run();
        if (sqlite3_changes(db.db) == 0)
            db.fail_user(detail::str("finish_run: no tuning run with id ", run_id));
    });
}

std::optional<RunRecord> Database::run(int64_t run_id) const {
    Impl &db = *impl_;
    return db.read("reading a tuning run", [&]() -> std::optional<RunRecord> {
        Query q(db, std::string("SELECT ") + kRunColumns + " FROM tuning_runs WHERE id = ?");
        if (!q.bind(run_id).step()) return std::nullopt;
        RunRecord r = read_run(q);
        r.state_json = assembled_state(db, r.id, r.state_json);
        return std::optional<RunRecord>(std::move(r));
    });
}

std::optional<RunRecord> Database::latest_run(int64_t workload_id, int64_t target_id,
                                              const std::string &strategy) const {
    Impl &db = *impl_;
    return db.read("looking up a tuning run", [&]() -> std::optional<RunRecord> {
        Query q(db, std::string("SELECT ") + kRunColumns +
                        " FROM tuning_runs WHERE workload_id = ? AND target_id = ? AND "
                        "strategy = ? AND finished_us IS NULL ORDER BY started_us DESC, id DESC "
                        "LIMIT 1");
        if (!q.bind(workload_id, target_id, strategy).step()) return std::nullopt;
        RunRecord r = read_run(q);
        r.state_json = assembled_state(db, r.id, r.state_json);
        return std::optional<RunRecord>(std::move(r));
    });
}

std::vector<RunRecord> Database::runs(int64_t workload_id, int64_t target_id) const {
    Impl &db = *impl_;
    return db.read("listing tuning runs", [&] {
        std::vector<RunRecord> out;
        Query q(db, std::string("SELECT ") + kRunColumns +
                        " FROM tuning_runs WHERE workload_id = ? AND (? = 0 OR target_id = ?) "
                        "ORDER BY started_us, id");
        q.bind(workload_id, target_id, target_id);
        while (q.step())
            out.push_back(read_run(q));
        for (RunRecord &r : out)
            r.state_json = assembled_state(db, r.id, r.state_json);
        return out;
    });
}

} // namespace kiln::tuning_db
