// The inside of tuning_db::Database, shared by its three source files and by nothing else:
// TuningDB.cpp (opening, the schema and its migrations, keys, measurements, runs and their
// state), Queries.cpp (the read-only queries) and ImportExport.cpp (export_json, import_json).
// Private: no user includes it (it needs sqlite3.h, which the public TuningDB.h keeps out).
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "lang/Error.h"
#include "tuning_db/TuningDB.h"

namespace kiln::tuning_db::internal {

constexpr int kBusyTimeoutMs = 30000;
/// BEGIN IMMEDIATE already waits up to kBusyTimeoutMs for the write lock; on top of that a
/// transaction that still meets SQLITE_BUSY is rolled back and retried this many times.
constexpr int kMaxAttempts = 8;
/// The first schema version with the table run_state_items.
constexpr int64_t kRunStateItemsVersion = 4;
/// The first schema version with the features and cost_models tables.
constexpr int64_t kCostModelVersion = 5;
/// The first schema version with measurements.closing.
constexpr int64_t kClosingVersion = 6;

/// Microseconds since the Unix epoch: the database's timestamps.
int64_t now_us();

/// SQLITE_BUSY / SQLITE_LOCKED met inside a statement: the transaction is retried. Derived from
/// RuntimeError so that one escaping a retry loop still reads as a database error.
struct BusyError : RuntimeError {
    explicit BusyError(const std::string &msg) : RuntimeError(msg), message(msg) {}
    std::string message;
};

inline bool is_busy(int rc) {
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

struct StmtDeleter {
    void operator()(sqlite3_stmt *s) const noexcept { sqlite3_finalize(s); }
};
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

struct CachedStmt {
    StmtPtr stmt;
    bool in_use = false;
};

inline std::string times_to_json(const std::vector<double> &times) {
    return nlohmann::json(times).dump();
}

} // namespace kiln::tuning_db::internal

namespace kiln::tuning_db {

/// The connection and its prepared statements.
struct Database::Impl {
    sqlite3 *db = nullptr;
    std::string path;
    int64_t version = 0; ///< the file's schema version once opened
    /// Per run, per record list: the hash of each element stored, as this connection last wrote
    /// or read them (checked against the file's row count before use).
    std::map<int64_t, std::map<std::string, std::vector<size_t>>> stored_lists;
    std::unordered_map<std::string, internal::CachedStmt> cache;

    ~Impl() {
        cache.clear(); // finalize every statement before closing
        if (db) sqlite3_close_v2(db);
    }

    [[noreturn]] void fail(const std::string &context, int rc) const {
        std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        if (internal::is_busy(rc)) throw internal::BusyError(msg);
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
            if (internal::is_busy(rc)) throw internal::BusyError(msg);
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
    [[noreturn]] void fail_locked(const std::string &what, const internal::BusyError &e) const {
        runtime_error("tuning database '", path, "': ", what, ": ", e.message, " after ",
                      internal::kMaxAttempts, " attempts of ", internal::kBusyTimeoutMs / 1000,
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
            } catch (const internal::BusyError &e) {
                if (attempt >= internal::kMaxAttempts) fail_locked(what, e);
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
            } catch (const internal::BusyError &e) {
                if (attempt >= internal::kMaxAttempts) fail_locked(what, e);
                backoff(attempt);
            }
        }
    }
};

} // namespace kiln::tuning_db

namespace kiln::tuning_db::internal {

using Impl = Database::Impl;

/// One use of a prepared statement: binds, steps, reads columns, and resets it when done (also on
/// exceptions). Statements are prepared once per connection and cached by their text; a statement
/// already in use (a nested query) gets a private copy.
class Query {
public:
    Query(Impl &impl, const std::string &sql) : impl_(impl) {
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
    /// The same, the values given as a tuple (std::tie of the columns).
    template <typename... Args>
    Query &bind_tuple(const std::tuple<Args...> &args) {
        return std::apply([this](const auto &...a) -> Query & { return bind(a...); }, args);
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

    Impl &impl_;
    CachedStmt *cached_ = nullptr;
    StmtPtr private_;
    sqlite3_stmt *stmt_ = nullptr;
};

// --- rows with a unique key: insert-or-ignore, then select -------------------------------------

/// A table whose rows have a unique key: the statement that inserts a row unless one with its key
/// is stored, and the one that reads the stored row back by its key (the id first).
struct UniqueRow {
    const char *insert_sql;
    const char *select_sql;
};

inline constexpr UniqueRow kTargetRow{
    "INSERT OR IGNORE INTO targets (cpu_model, features, threads, compiler) VALUES (?, ?, ?, ?)",
    "SELECT id FROM targets WHERE cpu_model = ? AND features = ? AND threads = ? AND "
    "compiler = ?"};
inline constexpr UniqueRow kWorkloadRow{
    "INSERT OR IGNORE INTO workloads (op, algorithm_hash, shape, types) VALUES (?, ?, ?, ?)",
    "SELECT id FROM workloads WHERE op = ? AND algorithm_hash = ? AND shape = ? AND types = ?"};
inline constexpr UniqueRow kConfigRow{
    "INSERT OR IGNORE INTO configs (hash, config_json, trace_json) VALUES (?, ?, ?)",
    "SELECT id, config_json, trace_json FROM configs WHERE hash = ?"};
inline constexpr UniqueRow kRunRow{
    "INSERT OR IGNORE INTO tuning_runs (uuid, workload_id, target_id, strategy, seed, "
    "budget_trials, budget_seconds, elapsed_s, trials_done, state_json, started_us, updated_us, "
    "finished_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "SELECT id, workload_id, target_id FROM tuning_runs WHERE uuid = ?"};

/// A row upsert wrote or found: its id, and whether this call inserted it.
struct Upserted {
    int64_t id = 0;
    bool added = false;
};

struct AcceptStoredRow {
    void operator()(const Query &) const {}
};

/// The one way a row with a unique key is written (keys, configs, imported rows): inserts
/// `values` unless a row with the same key is stored, then reads the stored row back by `key`.
/// `check` sees that row (row.select_sql's columns) and raises when it was stored with other
/// values than these. Runs inside the caller's write transaction.
template <typename Values, typename Key, typename Check = AcceptStoredRow>
Upserted upsert(Impl &db, const UniqueRow &row, const Values &values, const Key &key,
                const Check &check = {}) {
    Query(db, row.insert_sql).bind_tuple(values).run();
    bool added = sqlite3_changes(db.db) > 0;
    Query q(db, row.select_sql);
    q.bind_tuple(key).step();
    check(q);
    return {q.i64(0), added};
}

Upserted upsert_target(Impl &db, const TargetKey &key);
Upserted upsert_workload(Impl &db, const WorkloadKey &key);
/// `conflict(stored_config_json)` raises the caller's error for a hash stored with another
/// config or trace.
template <typename Conflict>
Upserted upsert_config(Impl &db, const std::string &hash, const std::string &config_json,
                       const std::string &trace_json, const Conflict &conflict) {
    return upsert(db, kConfigRow, std::tie(hash, config_json, trace_json), std::tie(hash),
                  [&](const Query &q) {
                      if (q.text(1) != config_json || q.text(2) != trace_json) conflict(q.text(1));
                  });
}

// --- reading rows ---------------------------------------------------------------------------

/// The columns every measurement query selects, in the order read_measurement reads them.
inline constexpr const char *kMeasurementColumns =
    "m.id, coalesce(m.run_id, 0), coalesce(r.uuid, ''), m.workload_id, m.target_id, m.config_id, "
    "c.hash, m.status, m.times_ms, m.median_ms, m.spread_ms, m.compile_ms, m.error, "
    "m.timestamp_us, m.closing";
inline constexpr const char *kMeasurementJoins =
    " FROM measurements m JOIN configs c ON c.id = m.config_id"
    " LEFT JOIN tuning_runs r ON r.id = m.run_id ";
constexpr int kMeasurementColumnCount = 15;

/// The measurement of the row, its columns (kMeasurementColumns) from `first` on.
Measurement read_measurement(const Query &q, int first, const std::string &path);

/// A WITH clause that defines `cfg(k, wid, cid, med)`: for each config `cid` of a workload `wid`
/// on a target among the measurements `from_where` selects, and each value `k` of the SQL
/// expression `key`, the config's median over its ok measurements (tuning_db/Queries.cpp).
std::string config_medians(const std::string &key, const std::string &from_where);

/// The columns read_run reads, in order.
inline constexpr const char *kRunColumns =
    "id, coalesce(uuid, ''), workload_id, target_id, strategy, seed, budget_trials, "
    "budget_seconds, elapsed_s, trials_done, state_json, started_us, updated_us, finished_us";

RunRecord read_run(const Query &q);

/// A run's state as saved: its base (state_json) with the elements of its record lists put back
/// (tuning_db/RunState.h). A state saved whole (an older version, an import) is returned as is.
std::string assembled_state(Impl &db, int64_t run_id, const std::string &base);

/// The WHERE clause (over measurements m / tuning_runs r joined with workloads w) of a filter;
/// its parameters are bound as ?1 (workload), ?2 (target), ?3 (op), NULL meaning "any".
std::string filter_clause(const char *alias);
/// Binds a filter's ?1, ?2 and ?3 (filter_clause's parameters).
inline void bind_filter(Query &q, const Filter &filter) {
    q.bind(filter.workload_id, filter.target_id, filter.op);
}

} // namespace kiln::tuning_db::internal
