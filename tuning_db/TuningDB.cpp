#include "tuning_db/TuningDB.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "lang/Error.h"
#include "tuning_db/RunState.h"

namespace kiln::tuning_db {

namespace {

using nlohmann::json;

constexpr int kBusyTimeoutMs = 30000;
/// BEGIN IMMEDIATE already waits up to kBusyTimeoutMs for the write lock; on top of that a
/// transaction that still meets SQLITE_BUSY is rolled back and retried this many times.
constexpr int kMaxAttempts = 8;

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string random_uuid() {
    std::random_device rd;
    std::mt19937_64 gen((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(now_us()));
    uint64_t a = gen(), b = gen();
    char text[33];
    std::snprintf(text, sizeof text, "%016llx%016llx", (unsigned long long)a,
                  (unsigned long long)b);
    return text;
}

/// SQLITE_BUSY / SQLITE_LOCKED met inside a statement: the transaction is retried. Derived from
/// RuntimeError so that one escaping a retry loop still reads as a database error.
struct BusyError : RuntimeError {
    explicit BusyError(const std::string &msg) : RuntimeError(msg), message(msg) {}
    std::string message;
};

bool is_busy(int rc) {
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
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
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Database::schema_version,
              "one migration script per schema version");
// The oldest schema version read commands open as it is: later versions only added columns that
// no read query selects (the run owner, version 3) and a table read only when it exists (the run
// state's rows, version 4).
constexpr int64_t kOldestReadableVersion = 2;
// The first schema version with the table run_state_items.
constexpr int64_t kRunStateItemsVersion = 4;

struct StmtDeleter {
    void operator()(sqlite3_stmt *s) const noexcept { sqlite3_finalize(s); }
};
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

struct CachedStmt {
    StmtPtr stmt;
    bool in_use = false;
};

std::string times_to_json(const std::vector<double> &times) {
    return json(times).dump();
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

// --- the connection and its statements
// ------------------------------------------------------------

struct Database::Impl {
    sqlite3 *db = nullptr;
    std::string path;
    int64_t version = 0; ///< the file's schema version once opened
    /// Per run, per record list: the hash of each element stored, as this connection last wrote
    /// or read them (checked against the file's row count before use).
    std::map<int64_t, std::map<std::string, std::vector<size_t>>> stored_lists;
    std::unordered_map<std::string, CachedStmt> cache;

    ~Impl() {
        cache.clear(); // finalize every statement before closing
        if (db) sqlite3_close_v2(db);
    }

    [[noreturn]] void fail(const std::string &context, int rc) const {
        std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        if (is_busy(rc)) throw BusyError(msg);
        if ((rc & 0xff) == SQLITE_NOTADB)
            runtime_error("tuning database '", path, "' is not an SQLite database (", msg,
                          "); pass another --db file");
        runtime_error("tuning database '", path, "': ", context, ": ", msg);
    }
    [[noreturn]] void fail_user(const std::string &msg) const {
        runtime_error("tuning database '", path, "': ", msg);
    }

    void exec(const char *sql, const std::string &context) {
        char *err = nullptr;
        int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
        if (rc != SQLITE_OK) {
            std::string msg = err ? err : sqlite3_errstr(rc);
            sqlite3_free(err);
            if (is_busy(rc)) throw BusyError(msg);
            runtime_error("tuning database '", path, "': ", context, ": ", msg);
        }
    }
    void rollback_noexcept() noexcept {
        if (db && !sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    }

    static void backoff(int attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * attempt * attempt));
    }
    [[noreturn]] void fail_locked(const std::string &what, const BusyError &e) const {
        runtime_error("tuning database '", path, "': ", what, ": ", e.message, " after ",
                      kMaxAttempts, " attempts of ", kBusyTimeoutMs / 1000,
                      " s each; another process holds the write lock (a stuck kiln process?)");
    }

    /// Runs f inside BEGIN IMMEDIATE ... COMMIT, retrying the whole transaction on SQLITE_BUSY.
    template <typename F>
    auto write(const std::string &what, F &&f) -> decltype(f()) {
        for (int attempt = 1;; attempt++) {
            try {
                exec("BEGIN IMMEDIATE", what);
                try {
                    if constexpr (std::is_void_v<decltype(f())>) {
                        f();
                        exec("COMMIT", what);
                        return;
                    } else {
                        auto result = f();
                        exec("COMMIT", what);
                        return result;
                    }
                } catch (...) {
                    rollback_noexcept();
                    throw;
                }
            } catch (const BusyError &e) {
                if (attempt >= kMaxAttempts) fail_locked(what, e);
                backoff(attempt);
            }
        }
    }

    /// Runs a read, retrying on SQLITE_BUSY (rare in WAL mode: a reader meets it only while
    /// another connection recovers the WAL).
    template <typename F>
    auto read(const std::string &what, F &&f) -> decltype(f()) {
        for (int attempt = 1;; attempt++) {
            try {
                return f();
            } catch (const BusyError &e) {
                if (attempt >= kMaxAttempts) fail_locked(what, e);
                backoff(attempt);
            }
        }
    }
};

namespace {

/// One use of a prepared statement: binds, steps, reads columns, and resets it when done (also on
/// exceptions). Statements are prepared once per connection and cached by their text; a statement
/// already in use (a nested query) gets a private copy.
class Query {
public:
    Query(Database::Impl &impl, const std::string &sql) : impl_(impl) {
        CachedStmt &c = impl.cache[sql];
        if (!c.stmt || c.in_use) {
            sqlite3_stmt *s = nullptr;
            int rc = sqlite3_prepare_v3(impl.db, sql.c_str(), int(sql.size()),
                                        c.in_use ? 0 : SQLITE_PREPARE_PERSISTENT, &s, nullptr);
            if (rc != SQLITE_OK) impl.fail("preparing a statement", rc);
            if (c.in_use) {
                private_.reset(s);
                stmt_ = s;
                return;
            }
            c.stmt.reset(s);
        }
        c.in_use = true;
        cached_ = &c;
        stmt_ = c.stmt.get();
    }
    ~Query() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
        if (cached_) cached_->in_use = false;
    }
    Query(const Query &) = delete;
    Query &operator=(const Query &) = delete;

    template <typename... Args>
    Query &bind(const Args &...args) {
        int i = 1;
        (bind_one(i++, args), ...);
        return *this;
    }
    /// True when a row is available, false when done.
    bool step() {
        int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        impl_.fail("running a statement", rc);
    }
    void run() {
        while (step()) {
        }
    }
    int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
    double dbl(int col) const { return sqlite3_column_double(stmt_, col); }
    bool null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
    std::string text(int col) const {
        const unsigned char *t = sqlite3_column_text(stmt_, col);
        return t ? std::string(reinterpret_cast<const char *>(t),
                               size_t(sqlite3_column_bytes(stmt_, col)))
                 : std::string();
    }
    std::optional<double> opt_dbl(int col) const {
        if (null(col)) return std::nullopt;
        return dbl(col);
    }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) impl_.fail("binding a parameter", rc);
    }
    void bind_one(int i, int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
    void bind_one(int i, int v) { check(sqlite3_bind_int64(stmt_, i, v)); }
    void bind_one(int i, double v) { check(sqlite3_bind_double(stmt_, i, v)); }
    void bind_one(int i, const std::string &v) {
        check(sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
    }
    void bind_one(int i, const char *v) {
        check(sqlite3_bind_text(stmt_, i, v, -1, SQLITE_TRANSIENT));
    }
    void bind_one(int i, std::nullptr_t) { check(sqlite3_bind_null(stmt_, i)); }
    template <typename T>
    void bind_one(int i, const std::optional<T> &v) {
        if (v)
            bind_one(i, *v);
        else
            bind_one(i, nullptr);
    }

    Database::Impl &impl_;
    CachedStmt *cached_ = nullptr;
    StmtPtr private_;
    sqlite3_stmt *stmt_ = nullptr;
};

// The columns every measurement query selects, in the order read_measurement reads them.
const char *const kMeasurementColumns =
    "m.id, coalesce(m.run_id, 0), coalesce(r.uuid, ''), m.workload_id, m.target_id, m.config_id, "
    "c.hash, m.status, m.times_ms, m.median_ms, m.spread_ms, m.compile_ms, m.error, "
    "m.timestamp_us";
const char *const kMeasurementJoins = " FROM measurements m JOIN configs c ON c.id = m.config_id"
                                      " LEFT JOIN tuning_runs r ON r.id = m.run_id ";
constexpr int kMeasurementColumnCount = 14;

Measurement read_measurement(const Query &q, int first, const std::string &path) {
    Measurement m;
    m.id = q.i64(first + 0);
    m.run_id = q.i64(first + 1);
    m.run_uuid = q.text(first + 2);
    m.workload_id = q.i64(first + 3);
    m.target_id = q.i64(first + 4);
    m.config_id = q.i64(first + 5);
    m.config_hash = q.text(first + 6);
    m.status = status_from_string(q.text(first + 7));
    try {
        m.times_ms = json::parse(q.text(first + 8)).get<std::vector<double>>();
    } catch (const json::exception &e) {
        runtime_error("tuning database '", path, "': measurement ", m.id,
                      " has malformed times_ms: ", e.what());
    }
    m.median_ms = q.dbl(first + 9);
    m.spread_ms = q.dbl(first + 10);
    m.compile_ms = q.dbl(first + 11);
    m.error = q.text(first + 12);
    m.timestamp_us = q.i64(first + 13);
    return m;
}

const char *const kRunColumns =
    "id, coalesce(uuid, ''), workload_id, target_id, strategy, seed, budget_trials, "
    "budget_seconds, elapsed_s, trials_done, state_json, started_us, updated_us, finished_us";

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

/// A run's state as saved: its base (state_json) with the elements of its record lists put back
/// (tuning_db/RunState.h). A state saved whole (an older version, an import) is returned as is.
std::string assembled_state(Database::Impl &db, int64_t run_id, const std::string &base) {
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

/// The record lists of a run as stored: hashes of their elements, from this connection's cache
/// when every list's row count in the file still matches it, else read again.
std::map<std::string, std::vector<size_t>> stored_lists(Database::Impl &db, int64_t run_id) {
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

/// A WITH clause that defines `cfg(k, med)`: for each config (of a workload on a target) of the
/// measurements `from_where` selects (a FROM ... WHERE ... over measurements m), and each value
/// of the SQL expression `key`, the config's time as Database::best defines it: the median of
/// its ok measurements' medians (the middle one, or the mean of the two middle ones). So every
/// "best" the database reports is a config's median, never one lucky measurement.
std::string config_medians(const std::string &key, const std::string &from_where) {
    const std::string config = "PARTITION BY " + key + ", m.workload_id, m.target_id, m.config_id";
    return "WITH ok AS (SELECT " + key +
           " AS k, m.workload_id AS wid, m.target_id AS tid, m.config_id AS cid, m.median_ms AS "
           "ms, row_number() OVER (" +
           config + " ORDER BY m.median_ms) AS rn, count(*) OVER (" + config + ") AS n " +
           from_where +
           " AND m.status = 'ok'), cfg AS (SELECT k, avg(ms) AS med FROM ok WHERE rn IN ((n + 1) "
           "/ 2, (n + 2) / 2) GROUP BY k, wid, tid, cid) ";
}

/// The middle value of a sorted, non-empty list (the mean of the two middle ones).
double median_of_sorted(const std::vector<double> &v) {
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Workload rows with their measurement counts and best config time (read_workload's columns).
std::string workload_summary() {
    return config_medians("m.workload_id", "FROM measurements m WHERE 1") +
           ", best AS (SELECT k, min(med) AS ms FROM cfg GROUP BY k) "
           "SELECT w.id, w.op, w.algorithm_hash, w.shape, w.types, count(m.id), "
           "coalesce(sum(m.status = 'ok'), 0), max(b.ms) FROM workloads w LEFT JOIN measurements "
           "m ON m.workload_id = w.id LEFT JOIN best b ON b.k = w.id ";
}

WorkloadRecord read_workload(const Query &q) {
    WorkloadRecord w;
    w.id = q.i64(0);
    w.key = {q.text(1), q.text(2), q.text(3), q.text(4)};
    w.measurements = q.i64(5);
    w.ok_measurements = q.i64(6);
    w.best_ms = q.opt_dbl(7);
    return w;
}

} // namespace

// --- opening
// ----------------------------------------------------------------------------------------

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

    int rc;
    if (!read_only) {
        rc = sqlite3_open_v2(path.c_str(), &impl->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    } else if (access(path.c_str(), W_OK) == 0) {
        // Read-write without create and without any pragma that writes: the last connection to
        // close removes the -wal/-shm files, which a read-only connection would leave behind.
        rc = sqlite3_open_v2(path.c_str(), &impl->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    } else {
        // A file this process cannot write: nobody writes it through us, so read it as
        // immutable (no -wal/-shm files created next to it).
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
        uri += "?immutable=1";
        rc = sqlite3_open_v2(uri.c_str(), &impl->db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    }
    if (rc != SQLITE_OK) impl->fail("cannot open", rc);
    sqlite3_extended_result_codes(impl->db, 1);
    sqlite3_busy_timeout(impl->db, kBusyTimeoutMs);

    Impl &db = *impl;
    if (read_only) {
        // Never create, convert or migrate: only check that the file is kiln's, as it is.
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
        return Database(std::move(impl));
    }
    auto current_version = [&]() -> std::optional<int64_t> {
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
    };
    auto refuse_newer = [&](int64_t v) {
        if (v > schema_version) {
            db.fail_user(detail::str(
                "schema version ", v, " is newer than version ", schema_version,
                " that this build of kiln supports; use a newer kiln, or export the data with it "
                "(`kiln db export`) and import into a new file"));
        }
    };

    // Before any change (the WAL switch writes the file's header): the file must be kiln's, or
    // hold nothing yet (new or empty). Another program's file is refused with its bytes unchanged.
    std::optional<int64_t> v = db.read("reading the schema version", current_version);
    if (v) refuse_newer(*v);
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
            std::optional<int64_t> from = current_version(); // again, under the write lock
            int64_t start = from.value_or(0);
            refuse_newer(start);
            for (int64_t i = start; i < schema_version; i++)
                db.exec(kMigrations[i], detail::str("migrating the schema to version ", i + 1));
            db.exec("DELETE FROM schema_version", "migrating the schema");
            Query q(db, "INSERT INTO schema_version (version) VALUES (?)");
            q.bind(int64_t(schema_version)).run();
        });
    }
    db.version = schema_version;
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
    return db.write("recording a target", [&] {
        Query(db, "INSERT OR IGNORE INTO targets (cpu_model, features, threads, compiler) "
                  "VALUES (?, ?, ?, ?)")
            .bind(key.cpu_model, key.features, key.threads, key.compiler)
            .run();
        Query q(db, "SELECT id FROM targets WHERE cpu_model = ? AND features = ? AND threads = ? "
                    "AND compiler = ?");
        q.bind(key.cpu_model, key.features, key.threads, key.compiler).step();
        return q.i64(0);
    });
}

int64_t Database::workload_id(const WorkloadKey &key) {
    Impl &db = *impl_;
    if (key.op.empty())
        db.fail_user("a workload needs an operator name (WorkloadKey::op is empty)");
    return db.write("recording a workload", [&] {
        Query(db, "INSERT OR IGNORE INTO workloads (op, algorithm_hash, shape, types) "
                  "VALUES (?, ?, ?, ?)")
            .bind(key.op, key.algorithm_hash, key.shape, key.types)
            .run();
        Query q(db, "SELECT id FROM workloads WHERE op = ? AND algorithm_hash = ? AND shape = ? "
                    "AND types = ?");
        q.bind(key.op, key.algorithm_hash, key.shape, key.types).step();
        return q.i64(0);
    });
}

int64_t Database::config_id(const std::string &config_hash, const std::string &config_json,
                            const std::string &trace_json) {
    Impl &db = *impl_;
    if (config_hash.empty()) db.fail_user("a config needs a hash (config_hash is empty)");
    return db.write("recording a config", [&] {
        Query(db, "INSERT OR IGNORE INTO configs (hash, config_json, trace_json) VALUES (?, ?, ?)")
            .bind(config_hash, config_json, trace_json)
            .run();
        Query q(db, "SELECT id, config_json, trace_json FROM configs WHERE hash = ?");
        q.bind(config_hash).step();
        if (q.text(1) != config_json || q.text(2) != trace_json) {
            db.fail_user(
                detail::str("config hash '", config_hash,
                            "' is already stored with a different config or trace (stored config ",
                            q.text(1), ", new config ", config_json,
                            "); the hash must cover both the knob values and the trace"));
        }
        return q.i64(0);
    });
}

std::optional<int64_t> Database::find_target(const TargetKey &key) const {
    Impl &db = *impl_;
    return db.read("looking up a target", [&]() -> std::optional<int64_t> {
        Query q(db, "SELECT id FROM targets WHERE cpu_model = ? AND features = ? AND threads = ? "
                    "AND compiler = ?");
        if (!q.bind(key.cpu_model, key.features, key.threads, key.compiler).step())
            return std::nullopt;
        return q.i64(0);
    });
}

std::optional<int64_t> Database::find_workload(const WorkloadKey &key) const {
    Impl &db = *impl_;
    return db.read("looking up a workload", [&]() -> std::optional<int64_t> {
        Query q(db, "SELECT id FROM workloads WHERE op = ? AND algorithm_hash = ? AND shape = ? "
                    "AND types = ?");
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

ConfigRecord Database::config(int64_t config_id) const {
    Impl &db = *impl_;
    return db.read("reading a config", [&] {
        Query q(db, "SELECT id, hash, config_json, trace_json FROM configs WHERE id = ?");
        if (!q.bind(config_id).step()) db.fail_user(detail::str("no config with id ", config_id));
        return ConfigRecord{q.i64(0), q.text(1), q.text(2), q.text(3)};
    });
}

TargetRecord Database::target(int64_t target_id) const {
    Impl &db = *impl_;
    return db.read("reading a target", [&] {
        Query q(db, "SELECT id, cpu_model, features, threads, compiler FROM targets WHERE id = ?");
        if (!q.bind(target_id).step()) db.fail_user(detail::str("no target with id ", target_id));
        return TargetRecord{q.i64(0), {q.text(1), q.text(2), int(q.i64(3)), q.text(4)}};
    });
}

WorkloadRecord Database::workload(int64_t workload_id) const {
    Impl &db = *impl_;
    return db.read("reading a workload", [&] {
        Query q(db, workload_summary() + "WHERE w.id = ? GROUP BY w.id");
        if (!q.bind(workload_id).step())
            db.fail_user(detail::str("no workload with id ", workload_id));
        return read_workload(q);
    });
}

std::vector<TargetRecord> Database::targets() const {
    Impl &db = *impl_;
    return db.read("listing targets", [&] {
        std::vector<TargetRecord> out;
        Query q(db, "SELECT id, cpu_model, features, threads, compiler FROM targets ORDER BY id");
        while (q.step())
            out.push_back({q.i64(0), {q.text(1), q.text(2), int(q.i64(3)), q.text(4)}});
        return out;
    });
}

std::vector<WorkloadRecord> Database::workloads() const {
    Impl &db = *impl_;
    return db.read("listing workloads", [&] {
        std::vector<WorkloadRecord> out;
        Query q(db, workload_summary() + "GROUP BY w.id ORDER BY w.op, w.shape, w.id");
        while (q.step())
            out.push_back(read_workload(q));
        return out;
    });
}

std::vector<WorkloadRecord> Database::workloads_matching(const std::string &op,
                                                         const std::string &shape) const {
    Impl &db = *impl_;
    return db.read("listing workloads", [&] {
        std::vector<WorkloadRecord> out;
        Query q(db, workload_summary() +
                        "WHERE w.op = ?1 AND (?2 = '' OR w.shape = ?2) GROUP BY w.id "
                        "ORDER BY w.shape, w.id");
        q.bind(op, shape);
        while (q.step())
            out.push_back(read_workload(q));
        return out;
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
                    "times_ms, median_ms, spread_ms, compile_ms, error, timestamp_us) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        q.bind(m.run_id ? std::optional<int64_t>(m.run_id) : std::nullopt, m.workload_id,
               m.target_id, m.config_id, to_string(m.status), times, m.median_ms, m.spread_ms,
               m.compile_ms, m.error, now_us())
            .run();
        return int64_t(sqlite3_last_insert_rowid(db.db));
    });
}

std::optional<Measurement> Database::find_measurement(int64_t workload_id, int64_t target_id,
                                                      const std::string &config_hash) const {
    Impl &db = *impl_;
    return db.read("looking up a measurement", [&]() -> std::optional<Measurement> {
        Query q(db, std::string("SELECT ") + kMeasurementColumns + kMeasurementJoins +
                        "WHERE m.workload_id = ? AND m.target_id = ? AND c.hash = ? "
                        "ORDER BY m.status <> 'ok', CASE WHEN m.status = 'ok' THEN m.median_ms "
                        "END, m.timestamp_us DESC, m.id DESC LIMIT 1");
        if (!q.bind(workload_id, target_id, config_hash).step()) return std::nullopt;
        return read_measurement(q, 0, db.path);
    });
}

std::optional<BestConfig> Database::best(int64_t workload_id, int64_t target_id) const {
    std::vector<BestConfig> top = top_k(workload_id, target_id, 1);
    if (top.empty()) return std::nullopt;
    return top.front();
}

std::vector<BestConfig> Database::top_k(int64_t workload_id, int64_t target_id, int k) const {
    Impl &db = *impl_;
    return db.read("querying the best configs", [&] {
        std::vector<BestConfig> out;
        // Per config: its ok measurements ranked by median (rn of n), the median of those medians
        // (the middle one, or the mean of the two middle ones), their range; then the k fastest
        // configs by that median, the earliest measured first on ties. The row returned for a
        // config is its middle measurement.
        Query q(db, std::string("WITH ok AS (SELECT m.*, row_number() OVER (PARTITION BY "
                                "m.config_id ORDER BY m.median_ms, m.timestamp_us, m.id) AS rn, "
                                "count(*) OVER config AS n, min(m.median_ms) OVER config AS lo, "
                                "max(m.median_ms) OVER config AS hi, min(m.timestamp_us) OVER "
                                "config AS first_us FROM measurements m WHERE m.workload_id = ? "
                                "AND m.target_id = ? AND m.status = 'ok' WINDOW config AS "
                                "(PARTITION BY m.config_id)), mid AS (SELECT config_id, "
                                "avg(median_ms) AS med FROM ok WHERE rn IN ((n + 1) / 2, "
                                "(n + 2) / 2) GROUP BY config_id) SELECT ") +
                        kMeasurementColumns +
                        ", c.config_json, c.trace_json, mid.med, m.lo, m.hi, m.n FROM ok m JOIN "
                        "mid ON mid.config_id = m.config_id JOIN configs c ON c.id = m.config_id "
                        "LEFT JOIN tuning_runs r ON r.id = m.run_id WHERE m.rn = (m.n + 1) / 2 "
                        "ORDER BY mid.med, m.first_us, m.config_id LIMIT ?");
        q.bind(workload_id, target_id, int64_t(std::max(k, 0)));
        while (q.step()) {
            BestConfig b;
            b.measurement = read_measurement(q, 0, db.path);
            b.config = {b.measurement.config_id, b.measurement.config_hash,
                        q.text(kMeasurementColumnCount), q.text(kMeasurementColumnCount + 1)};
            b.median_ms = q.dbl(kMeasurementColumnCount + 2);
            b.min_ms = q.dbl(kMeasurementColumnCount + 3);
            b.max_ms = q.dbl(kMeasurementColumnCount + 4);
            b.measurements = q.i64(kMeasurementColumnCount + 5);
            out.push_back(std::move(b));
        }
        return out;
    });
}

std::vector<Measurement> Database::history(int64_t workload_id, int64_t target_id,
                                           int64_t run_id) const {
    Impl &db = *impl_;
    return db.read("reading the history", [&] {
        std::vector<Measurement> out;
        Query q(db, std::string("SELECT ") + kMeasurementColumns + kMeasurementJoins +
                        "WHERE m.workload_id = ? AND m.target_id = ? AND (? = 0 OR m.run_id = ?) "
                        "ORDER BY m.timestamp_us, m.id");
        q.bind(workload_id, target_id, run_id, run_id);
        while (q.step())
            out.push_back(read_measurement(q, 0, db.path));
        return out;
    });
}

std::optional<std::string> Database::best_trace_json(const WorkloadKey &workload,
                                                     const TargetKey &target) const {
    std::optional<int64_t> w = find_workload(workload), t = find_target(target);
    if (!w || !t) return std::nullopt;
    std::optional<BestConfig> b = best(*w, *t);
    if (!b) return std::nullopt;
    return b->config.trace_json;
}

namespace {

/// The WHERE clause (over measurements m / tuning_runs r joined with workloads w) of a filter;
/// its parameters are bound as ?1 (workload), ?2 (target), ?3 (op), NULL meaning "any".
std::string filter_clause(const char *alias) {
    return detail::str(" WHERE (?1 IS NULL OR ", alias, ".workload_id = ?1) AND (?2 IS NULL OR ",
                       alias, ".target_id = ?2) AND (?3 IS NULL OR w.op = ?3) ");
}

} // namespace

Statistics Database::statistics(const Filter &filter) const {
    Impl &db = *impl_;
    return db.read("computing statistics", [&] {
        Statistics s;
        auto bind = [&](Query &q) { q.bind(filter.workload_id, filter.target_id, filter.op); };
        {
            Query q(db, "SELECT m.status, count(*) FROM measurements m JOIN workloads w ON "
                        "w.id = m.workload_id" +
                            filter_clause("m") + "GROUP BY m.status");
            bind(q);
            while (q.step()) {
                s.per_status[q.text(0)] = q.i64(1);
                s.measurements += q.i64(1);
            }
        }
        {
            Query q(db, "SELECT count(DISTINCT m.config_id) FROM measurements m JOIN workloads w "
                        "ON w.id = m.workload_id" +
                            filter_clause("m"));
            bind(q);
            q.step();
            s.configs = q.i64(0);
        }
        {
            Query q(db, config_medians("0", "FROM measurements m JOIN workloads w ON w.id = "
                                            "m.workload_id" +
                                                filter_clause("m")) +
                            "SELECT min(med) FROM cfg");
            bind(q);
            q.step();
            s.best_ms = q.opt_dbl(0);
        }
        std::map<std::string, Statistics::PerStrategy> per;
        {
            Query q(db, "SELECT r.strategy, count(*), sum(r.trials_done) FROM tuning_runs r JOIN "
                        "workloads w ON w.id = r.workload_id" +
                            filter_clause("r") + "GROUP BY r.strategy");
            bind(q);
            while (q.step()) {
                auto &p = per[q.text(0)];
                p.strategy = q.text(0);
                p.runs = q.i64(1);
                p.trials = q.i64(2);
                s.runs += p.runs;
                s.trials += p.trials;
            }
        }
        const std::string by_strategy = "FROM measurements m JOIN tuning_runs r ON r.id = "
                                        "m.run_id JOIN workloads w ON w.id = m.workload_id" +
                                        filter_clause("m");
        {
            Query q(db, "SELECT r.strategy, count(*) " + by_strategy + "GROUP BY r.strategy");
            bind(q);
            while (q.step()) {
                auto &p = per[q.text(0)];
                p.strategy = q.text(0);
                p.measurements = q.i64(1);
            }
        }
        {
            Query q(db, config_medians("r.strategy", by_strategy) +
                            "SELECT k, min(med) FROM cfg GROUP BY k");
            bind(q);
            while (q.step())
                per[q.text(0)].best_ms = q.dbl(1);
        }
        for (auto &[name, p] : per)
            s.per_strategy.push_back(p);
        return s;
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
        for (const auto &[path, items] : split.lists) {
            std::vector<size_t> &have = stored[path];
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

std::vector<ProgressPoint> Database::progress(int64_t run_id) const {
    Impl &db = *impl_;
    return db.read("reading a run's progress", [&] {
        std::vector<ProgressPoint> out;
        Query q(db, "SELECT m.status, m.median_ms, m.timestamp_us - r.started_us, m.config_id "
                    "FROM measurements m JOIN tuning_runs r ON r.id = m.run_id WHERE m.run_id = ? "
                    "ORDER BY m.id");
        q.bind(run_id);
        // The best config time after each measurement, as Database::best defines it (the
        // median of a config's ok measurements), over the run's measurements so far: a
        // re-measurement that is slower than a lucky first one can make the curve rise.
        std::map<int64_t, std::vector<double>> times; // config -> its ok medians, sorted
        std::multiset<double> config_ms;              // each measured config's time
        while (q.step()) {
            if (q.text(0) == "ok") {
                std::vector<double> &t = times[q.i64(3)];
                if (!t.empty()) config_ms.erase(config_ms.find(median_of_sorted(t)));
                t.insert(std::upper_bound(t.begin(), t.end(), q.dbl(1)), q.dbl(1));
                config_ms.insert(median_of_sorted(t));
            }
            std::optional<double> best;
            if (!config_ms.empty()) best = *config_ms.begin();
            out.push_back({int64_t(out.size()) + 1, double(q.i64(2)) / 1e6, best});
        }
        return out;
    });
}

std::string Database::integrity_check() const {
    Impl &db = *impl_;
    return db.read("checking integrity", [&] {
        std::string out;
        Query q(db, "PRAGMA integrity_check");
        while (q.step())
            out += (out.empty() ? "" : "\n") + q.text(0);
        return out;
    });
}

// --- export / import -----------------------------------------------------------------------------

json Database::export_json(const Filter &filter) const {
    Impl &db = *impl_;
    return db.read("exporting", [&] {
        // One read transaction, so the document is a consistent snapshot.
        db.exec("BEGIN", "exporting");
        struct End {
            Impl &db;
            ~End() { db.rollback_noexcept(); }
        } end{db};
        auto bind = [&](Query &q) { q.bind(filter.workload_id, filter.target_id, filter.op); };
        json doc = {{"format", "kiln tuning database"},
                    {"format_version", export_format_version},
                    {"schema_version", schema_version},
                    {"exported_us", now_us()}};
        json measurements = json::array(), runs = json::array(), configs = json::array();
        std::set<int64_t> target_ids, workload_ids;
        {
            Query q(db, std::string("SELECT ") + kMeasurementColumns + kMeasurementJoins +
                            "JOIN workloads w ON w.id = m.workload_id" + filter_clause("m") +
                            "ORDER BY m.id");
            bind(q);
            while (q.step()) {
                Measurement m = read_measurement(q, 0, db.path);
                target_ids.insert(m.target_id);
                workload_ids.insert(m.workload_id);
                measurements.push_back({{"workload", m.workload_id},
                                        {"target", m.target_id},
                                        {"config", m.config_hash},
                                        {"run", m.run_uuid},
                                        {"status", to_string(m.status)},
                                        {"times_ms", m.times_ms},
                                        {"median_ms", m.median_ms},
                                        {"spread_ms", m.spread_ms},
                                        {"compile_ms", m.compile_ms},
                                        {"error", m.error},
                                        {"timestamp_us", m.timestamp_us}});
            }
        }
        {
            Query q(db, "SELECT r.id, coalesce(r.uuid, ''), r.workload_id, r.target_id, "
                        "r.strategy, r.seed, r.budget_trials, r.budget_seconds, r.elapsed_s, "
                        "r.trials_done, r.state_json, r.started_us, r.updated_us, r.finished_us "
                        "FROM tuning_runs r JOIN workloads w ON w.id = r.workload_id" +
                            filter_clause("r") + "ORDER BY r.id");
            bind(q);
            while (q.step()) {
                RunRecord r = read_run(q);
                r.state_json = assembled_state(db, r.id, r.state_json);
                target_ids.insert(r.target_id);
                workload_ids.insert(r.workload_id);
                runs.push_back({{"uuid", r.uuid},
                                {"workload", r.workload_id},
                                {"target", r.target_id},
                                {"strategy", r.strategy},
                                {"seed", r.seed},
                                {"budget_trials", r.budget_trials},
                                {"budget_seconds", r.budget_seconds},
                                {"elapsed_s", r.elapsed_s},
                                {"trials_done", r.trials_done},
                                {"state", r.state_json},
                                {"started_us", r.started_us},
                                {"updated_us", r.updated_us},
                                {"finished_us", r.finished_us ? json(*r.finished_us) : json()}});
            }
        }
        {
            Query q(db, "SELECT DISTINCT c.hash, c.config_json, c.trace_json FROM configs c JOIN "
                        "measurements m ON m.config_id = c.id JOIN workloads w ON "
                        "w.id = m.workload_id" +
                            filter_clause("m") + "ORDER BY c.id");
            bind(q);
            while (q.step())
                configs.push_back(
                    {{"hash", q.text(0)}, {"config", q.text(1)}, {"trace", q.text(2)}});
        }
        bool unfiltered = !filter.workload_id && !filter.target_id && !filter.op;
        json targets = json::array(), workloads = json::array();
        {
            Query q(db, "SELECT id, cpu_model, features, threads, compiler FROM targets "
                        "ORDER BY id");
            while (q.step()) {
                if (!unfiltered && !target_ids.count(q.i64(0))) continue;
                targets.push_back({{"id", q.i64(0)},
                                   {"cpu_model", q.text(1)},
                                   {"features", q.text(2)},
                                   {"threads", q.i64(3)},
                                   {"compiler", q.text(4)}});
            }
        }
        {
            Query q(db, "SELECT id, op, algorithm_hash, shape, types FROM workloads ORDER BY id");
            while (q.step()) {
                int64_t id = q.i64(0);
                // Every workload the measurements and runs refer to, and those the filter names
                // (even without measurements) unless it also names a target.
                bool named = !filter.target_id &&
                             (!filter.workload_id || *filter.workload_id == id) &&
                             (!filter.op || *filter.op == q.text(1));
                if (!unfiltered && !named && !workload_ids.count(id)) continue;
                workloads.push_back({{"id", id},
                                     {"op", q.text(1)},
                                     {"algorithm_hash", q.text(2)},
                                     {"shape", q.text(3)},
                                     {"types", q.text(4)}});
            }
        }
        doc["targets"] = std::move(targets);
        doc["workloads"] = std::move(workloads);
        doc["configs"] = std::move(configs);
        doc["runs"] = std::move(runs);
        doc["measurements"] = std::move(measurements);
        return doc;
    });
}

namespace {

/// Checked access to an import document, naming the place of a malformed field.
struct Reader {
    std::string path;

    [[noreturn]] void fail(const std::string &where, const std::string &msg) const {
        runtime_error("cannot import into tuning database '", path, "': ", where, ": ", msg);
    }
    const json &field(const json &obj, const std::string &where, const char *name) const {
        if (!obj.is_object()) fail(where, "expected an object");
        auto it = obj.find(name);
        if (it == obj.end()) fail(where, detail::str("field '", name, "' is missing"));
        return *it;
    }
    std::string str(const json &obj, const std::string &where, const char *name) const {
        const json &v = field(obj, where, name);
        if (!v.is_string()) fail(where, detail::str("field '", name, "' must be a string"));
        return v.get<std::string>();
    }
    int64_t integer(const json &obj, const std::string &where, const char *name) const {
        const json &v = field(obj, where, name);
        if (!v.is_number_integer())
            fail(where, detail::str("field '", name, "' must be an integer"));
        return v.get<int64_t>();
    }
    double number(const json &obj, const std::string &where, const char *name) const {
        const json &v = field(obj, where, name);
        if (!v.is_number()) fail(where, detail::str("field '", name, "' must be a number"));
        return v.get<double>();
    }
    const json &array(const json &obj, const std::string &where, const char *name) const {
        const json &v = field(obj, where, name);
        if (!v.is_array()) fail(where, detail::str("field '", name, "' must be an array"));
        return v;
    }
};

/// A workload's shape: NxMx... of positive integers.
void check_shape(const Reader &rd, const std::string &at, const std::string &shape) {
    bool good = !shape.empty();
    size_t start = 0;
    while (good) {
        size_t end = shape.find('x', start);
        std::string part = shape.substr(start, end == std::string::npos ? end : end - start);
        good = !part.empty() && part.size() <= 18 &&
               part.find_first_not_of("0123456789") == std::string::npos && std::stoll(part) > 0;
        if (end == std::string::npos) break;
        start = end + 1;
    }
    if (!good)
        rd.fail(at, "field 'shape' is '" + shape +
                        "': positive integers joined by 'x', e.g. 1024x1024x1024");
}

/// A measurement's times: finite; for an ok one positive, with median_ms the median of times_ms
/// (within rounding); spread and compile time not negative.
void check_times(const Reader &rd, const std::string &at, const MeasurementRecord &m) {
    bool ok = m.status == Status::ok;
    for (size_t k = 0; k < m.times_ms.size(); k++) {
        double t = m.times_ms[k];
        if (!std::isfinite(t) || !(t > 0))
            rd.fail(at, detail::str("field 'times_ms' holds ", t, " at index ", k,
                                    ": positive finite milliseconds"));
    }
    if (!std::isfinite(m.median_ms) || (ok ? !(m.median_ms > 0) : m.median_ms < 0))
        rd.fail(at, detail::str("field 'median_ms' is ", m.median_ms,
                                ok ? ": positive finite milliseconds for status ok"
                                   : ": finite milliseconds, not negative"));
    if (ok && m.times_ms.empty())
        rd.fail(at, "field 'times_ms' is empty: status ok needs the timed runs");
    if (!m.times_ms.empty()) {
        std::vector<double> sorted = m.times_ms;
        std::sort(sorted.begin(), sorted.end());
        double lo = sorted[(sorted.size() - 1) / 2], hi = sorted[sorted.size() / 2];
        double slack = 1e-6 * hi + 1e-9;
        if (m.median_ms < lo - slack || m.median_ms > hi + slack)
            rd.fail(at,
                    detail::str("field 'median_ms' is ", m.median_ms, ": the median of times_ms, ",
                                lo == hi ? detail::str(lo) : detail::str(lo, "..", hi)));
    }
    if (!std::isfinite(m.spread_ms) || m.spread_ms < 0)
        rd.fail(at, detail::str("field 'spread_ms' is ", m.spread_ms,
                                ": finite milliseconds, not negative"));
    if (!std::isfinite(m.compile_ms) || m.compile_ms < 0)
        rd.fail(at, detail::str("field 'compile_ms' is ", m.compile_ms,
                                ": finite milliseconds, not negative"));
}

} // namespace

ImportSummary Database::import_json(const json &doc) {
    Impl &db = *impl_;
    Reader rd{db.path};
    if (!doc.is_object()) rd.fail("the document", "expected a JSON object from `kiln db export`");
    if (rd.str(doc, "the document", "format") != "kiln tuning database")
        rd.fail("the document", "field 'format' is not \"kiln tuning database\"");
    int64_t version = rd.integer(doc, "the document", "format_version");
    if (version > export_format_version || version < 1)
        rd.fail("the document", detail::str("format_version ", version,
                                            " is not supported by this build of kiln (supports ",
                                            export_format_version, ")"));

    // Parse everything first: a malformed document adds nothing.
    struct In {
        std::map<int64_t, TargetKey> targets;
        std::map<int64_t, WorkloadKey> workloads;
        std::vector<ConfigRecord> configs;
        std::vector<std::pair<RunRecord, std::pair<int64_t, int64_t>>> runs;
        struct M {
            MeasurementRecord rec;
            std::string config_hash, run_uuid;
            int64_t timestamp_us;
        };
        std::vector<M> measurements;
    } in;
    const json &targets = rd.array(doc, "the document", "targets");
    for (size_t i = 0; i < targets.size(); i++) {
        std::string at = detail::str("targets[", i, "]");
        const json &t = targets[i];
        in.targets[rd.integer(t, at, "id")] = {
            rd.str(t, at, "cpu_model"), rd.str(t, at, "features"),
            int(rd.integer(t, at, "threads")), rd.str(t, at, "compiler")};
        if (rd.integer(t, at, "threads") < 1)
            rd.fail(at, detail::str("field 'threads' is ", rd.integer(t, at, "threads"),
                                    ": at least 1"));
    }
    const json &workloads = rd.array(doc, "the document", "workloads");
    for (size_t i = 0; i < workloads.size(); i++) {
        std::string at = detail::str("workloads[", i, "]");
        const json &w = workloads[i];
        in.workloads[rd.integer(w, at, "id")] = {rd.str(w, at, "op"),
                                                 rd.str(w, at, "algorithm_hash"),
                                                 rd.str(w, at, "shape"), rd.str(w, at, "types")};
        check_shape(rd, at, rd.str(w, at, "shape"));
    }
    std::set<std::string> config_hashes;
    const json &configs = rd.array(doc, "the document", "configs");
    for (size_t i = 0; i < configs.size(); i++) {
        std::string at = detail::str("configs[", i, "]");
        const json &c = configs[i];
        in.configs.push_back(
            {0, rd.str(c, at, "hash"), rd.str(c, at, "config"), rd.str(c, at, "trace")});
        for (const char *name : {"config", "trace"}) {
            std::string text = rd.str(c, at, name);
            if (json::parse(text, nullptr, false).is_discarded())
                rd.fail(at, detail::str("field '", name, "' is '", text.substr(0, 80),
                                        text.size() > 80 ? "..." : "", "': not JSON"));
        }
        config_hashes.insert(in.configs.back().hash);
    }
    auto workload_ref = [&](const json &obj, const std::string &at) {
        int64_t id = rd.integer(obj, at, "workload");
        if (!in.workloads.count(id))
            rd.fail(at, detail::str("workload ", id, " is not in the document's workloads"));
        return id;
    };
    auto target_ref = [&](const json &obj, const std::string &at) {
        int64_t id = rd.integer(obj, at, "target");
        if (!in.targets.count(id))
            rd.fail(at, detail::str("target ", id, " is not in the document's targets"));
        return id;
    };
    std::set<std::string> run_uuids;
    const json &runs = rd.array(doc, "the document", "runs");
    for (size_t i = 0; i < runs.size(); i++) {
        std::string at = detail::str("runs[", i, "]");
        const json &r = runs[i];
        RunRecord run;
        run.uuid = rd.str(r, at, "uuid");
        if (run.uuid.empty()) rd.fail(at, "field 'uuid' is empty");
        run.strategy = rd.str(r, at, "strategy");
        run.seed = rd.integer(r, at, "seed");
        run.budget_trials = rd.integer(r, at, "budget_trials");
        run.budget_seconds = rd.number(r, at, "budget_seconds");
        run.elapsed_s = rd.number(r, at, "elapsed_s");
        run.trials_done = rd.integer(r, at, "trials_done");
        run.state_json = rd.str(r, at, "state");
        run.started_us = rd.integer(r, at, "started_us");
        run.updated_us = rd.integer(r, at, "updated_us");
        if (!rd.field(r, at, "finished_us").is_null())
            run.finished_us = rd.integer(r, at, "finished_us");
        in.runs.push_back({run, {workload_ref(r, at), target_ref(r, at)}});
        run_uuids.insert(run.uuid);
    }
    const json &measurements = rd.array(doc, "the document", "measurements");
    for (size_t i = 0; i < measurements.size(); i++) {
        std::string at = detail::str("measurements[", i, "]");
        const json &m = measurements[i];
        In::M x;
        x.rec.workload_id = workload_ref(m, at);
        x.rec.target_id = target_ref(m, at);
        x.config_hash = rd.str(m, at, "config");
        if (!config_hashes.count(x.config_hash))
            rd.fail(at, "config '" + x.config_hash + "' is not in the document's configs");
        x.run_uuid = rd.str(m, at, "run");
        if (!x.run_uuid.empty() && !run_uuids.count(x.run_uuid))
            rd.fail(at, "run '" + x.run_uuid + "' is not in the document's runs");
        try {
            x.rec.status = status_from_string(rd.str(m, at, "status"));
        } catch (const RuntimeError &e) {
            rd.fail(at, e.what());
        }
        const json &times = rd.array(m, at, "times_ms");
        for (const json &t : times) {
            if (!t.is_number()) rd.fail(at, "field 'times_ms' must hold numbers");
            x.rec.times_ms.push_back(t.get<double>());
        }
        x.rec.median_ms = rd.number(m, at, "median_ms");
        x.rec.spread_ms = rd.number(m, at, "spread_ms");
        x.rec.compile_ms = rd.number(m, at, "compile_ms");
        x.rec.error = rd.str(m, at, "error");
        x.timestamp_us = rd.integer(m, at, "timestamp_us");
        check_times(rd, at, x.rec);
        in.measurements.push_back(std::move(x));
    }

    return db.write("importing", [&] {
        ImportSummary sum;
        auto added = [&] { return sqlite3_changes(db.db) > 0; };
        std::map<int64_t, int64_t> target_map, workload_map;
        std::map<std::string, int64_t> config_map, run_map;
        for (auto &[id, key] : in.targets) {
            Query(db, "INSERT OR IGNORE INTO targets (cpu_model, features, threads, compiler) "
                      "VALUES (?, ?, ?, ?)")
                .bind(key.cpu_model, key.features, key.threads, key.compiler)
                .run();
            sum.targets_added += added();
            Query q(db, "SELECT id FROM targets WHERE cpu_model = ? AND features = ? AND "
                        "threads = ? AND compiler = ?");
            q.bind(key.cpu_model, key.features, key.threads, key.compiler).step();
            target_map[id] = q.i64(0);
        }
        for (auto &[id, key] : in.workloads) {
            Query(db, "INSERT OR IGNORE INTO workloads (op, algorithm_hash, shape, types) "
                      "VALUES (?, ?, ?, ?)")
                .bind(key.op, key.algorithm_hash, key.shape, key.types)
                .run();
            sum.workloads_added += added();
            Query q(db, "SELECT id FROM workloads WHERE op = ? AND algorithm_hash = ? AND "
                        "shape = ? AND types = ?");
            q.bind(key.op, key.algorithm_hash, key.shape, key.types).step();
            workload_map[id] = q.i64(0);
        }
        for (const ConfigRecord &c : in.configs) {
            Query(db, "INSERT OR IGNORE INTO configs (hash, config_json, trace_json) "
                      "VALUES (?, ?, ?)")
                .bind(c.hash, c.config_json, c.trace_json)
                .run();
            sum.configs_added += added();
            Query q(db, "SELECT id, config_json, trace_json FROM configs WHERE hash = ?");
            q.bind(c.hash).step();
            if (q.text(1) != c.config_json || q.text(2) != c.trace_json)
                rd.fail("configs", "config hash '" + c.hash +
                                       "' is already stored with a different config or trace");
            config_map[c.hash] = q.i64(0);
        }
        for (auto &[r, keys] : in.runs) {
            Query(db, "INSERT OR IGNORE INTO tuning_runs (uuid, workload_id, target_id, strategy, "
                      "seed, budget_trials, budget_seconds, elapsed_s, trials_done, state_json, "
                      "started_us, updated_us, finished_us) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                .bind(r.uuid, workload_map[keys.first], target_map[keys.second], r.strategy, r.seed,
                      r.budget_trials, r.budget_seconds, r.elapsed_s, r.trials_done, r.state_json,
                      r.started_us, r.updated_us, r.finished_us)
                .run();
            sum.runs_added += added();
            Query q(db, "SELECT id, workload_id, target_id FROM tuning_runs WHERE uuid = ?");
            q.bind(r.uuid).step();
            if (q.i64(1) != workload_map[keys.first] || q.i64(2) != target_map[keys.second])
                rd.fail("runs",
                        "run '" + r.uuid + "' is already stored for another workload or target");
            run_map[r.uuid] = q.i64(0);
        }
        for (In::M &x : in.measurements) {
            int64_t w = workload_map[x.rec.workload_id], t = target_map[x.rec.target_id];
            int64_t c = config_map[x.config_hash];
            std::optional<int64_t> run;
            if (!x.run_uuid.empty()) run = run_map[x.run_uuid];
            Query dup(db, "SELECT 1 FROM measurements m LEFT JOIN tuning_runs r ON "
                          "r.id = m.run_id WHERE m.workload_id = ? AND m.target_id = ? AND "
                          "m.config_id = ? AND coalesce(r.uuid, '') = ? AND m.timestamp_us = ?");
            if (dup.bind(w, t, c, x.run_uuid, x.timestamp_us).step()) {
                sum.measurements_skipped++;
                continue;
            }
            Query(db, "INSERT INTO measurements (run_id, workload_id, target_id, config_id, "
                      "status, times_ms, median_ms, spread_ms, compile_ms, error, timestamp_us) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                .bind(run, w, t, c, to_string(x.rec.status), times_to_json(x.rec.times_ms),
                      x.rec.median_ms, x.rec.spread_ms, x.rec.compile_ms, x.rec.error,
                      x.timestamp_us)
                .run();
            sum.measurements_added++;
        }
        return sum;
    });
}

} // namespace kiln::tuning_db
