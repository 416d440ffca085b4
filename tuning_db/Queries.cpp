// tuning_db::Database, the read-only queries: stored keys and workloads with their summaries,
// the best configs (each ranked by the median of its ok measurements), history, statistics, a
// run's progress curve and the integrity check.
#include <algorithm>
#include <map>
#include <set>

#include "lang/Error.h"
#include "tuning_db/DatabaseImpl.h"
#include "tuning_db/TuningDB.h"

namespace kiln::tuning_db {

using nlohmann::json;
using namespace internal;

namespace internal {

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
    m.closing = q.i64(first + 14) != 0;
    return m;
}

std::string filter_clause(const char *alias) {
    return detail::str(" WHERE (?1 IS NULL OR ", alias, ".workload_id = ?1) AND (?2 IS NULL OR ",
                       alias, ".target_id = ?2) AND (?3 IS NULL OR w.op = ?3) ");
}

/// A WITH clause that defines `cfg(k, wid, cid, med)`: for each config (of a workload on a target)
/// of the measurements `from_where` selects (a FROM ... WHERE ... over measurements m), and each
/// value of the SQL expression `key`, the config's time as Database::best defines it: the median of
/// its ok measurements' medians (the middle one, or the mean of the two middle ones). So every
/// "best" the database reports is a config's median, never one lucky measurement.
std::string config_medians(const std::string &key, const std::string &from_where) {
    const std::string config = "PARTITION BY " + key + ", m.workload_id, m.target_id, m.config_id";
    return "WITH ok AS (SELECT " + key +
           " AS k, m.workload_id AS wid, m.target_id AS tid, m.config_id AS cid, m.median_ms AS "
           "ms, row_number() OVER (" +
           config + " ORDER BY m.median_ms) AS rn, count(*) OVER (" + config + ") AS n " +
           from_where +
           " AND m.status = 'ok'), cfg AS (SELECT k, wid, cid, avg(ms) AS med FROM ok WHERE rn IN "
           "((n + 1) "
           "/ 2, (n + 2) / 2) GROUP BY k, wid, tid, cid) ";
}

} // namespace internal

namespace {

/// The middle value of a sorted, non-empty list (the mean of the two middle ones).
double median_of_sorted(const std::vector<double> &v) {
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Workload rows with their measurement counts (read_workload's columns); the best time is set by
/// set_best_times.
std::string workload_summary() {
    return "SELECT w.id, w.op, w.algorithm_hash, w.shape, w.types, count(m.id), "
           "coalesce(sum(m.status = 'ok'), 0) FROM workloads w LEFT JOIN measurements m ON "
           "m.workload_id = w.id ";
}

/// Each workload's best time: the best config's (Database::best, so a standing closing round's
/// crown) on each target it has an ok measurement on, the fastest of those.
void set_best_times(Impl &db, const Database &database, std::vector<WorkloadRecord> &workloads) {
    for (WorkloadRecord &w : workloads) {
        std::vector<int64_t> targets = db.read("listing a workload's targets", [&] {
            std::vector<int64_t> out;
            Query q(db, "SELECT DISTINCT target_id FROM measurements WHERE workload_id = ? AND "
                        "status = 'ok' ORDER BY target_id");
            q.bind(w.id);
            while (q.step())
                out.push_back(q.i64(0));
            return out;
        });
        w.best_ms.reset();
        for (int64_t t : targets) {
            std::optional<BestConfig> b = database.best(w.id, t);
            if (b && (!w.best_ms || b->median_ms < *w.best_ms)) w.best_ms = b->median_ms;
        }
    }
}

WorkloadRecord read_workload(const Query &q) {
    WorkloadRecord w;
    w.id = q.i64(0);
    w.key = {q.text(1), q.text(2), q.text(3), q.text(4)};
    w.measurements = q.i64(5);
    w.ok_measurements = q.i64(6);
    return w;
}

} // namespace

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
    std::vector<WorkloadRecord> out{db.read("reading a workload", [&] {
        Query q(db, workload_summary() + "WHERE w.id = ? GROUP BY w.id");
        if (!q.bind(workload_id).step())
            db.fail_user(detail::str("no workload with id ", workload_id));
        return read_workload(q);
    })};
    set_best_times(db, *this, out);
    return out.front();
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
    std::vector<WorkloadRecord> out = db.read("listing workloads", [&] {
        std::vector<WorkloadRecord> out;
        Query q(db, workload_summary() + "GROUP BY w.id ORDER BY w.op, w.shape, w.id");
        while (q.step())
            out.push_back(read_workload(q));
        return out;
    });
    set_best_times(db, *this, out);
    return out;
}

std::vector<WorkloadRecord> Database::workloads_matching(const std::string &op,
                                                         const std::string &shape) const {
    Impl &db = *impl_;
    std::vector<WorkloadRecord> out = db.read("listing workloads", [&] {
        std::vector<WorkloadRecord> out;
        Query q(db, workload_summary() +
                        "WHERE w.op = ?1 AND (?2 = '' OR w.shape = ?2) GROUP BY w.id "
                        "ORDER BY w.shape, w.id");
        q.bind(op, shape);
        while (q.step())
            out.push_back(read_workload(q));
        return out;
    });
    set_best_times(db, *this, out);
    return out;
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

std::optional<BestConfig> Database::best(int64_t workload_id, int64_t target_id,
                                         int64_t closing_run) const {
    std::vector<BestConfig> top = top_k(workload_id, target_id, 1, closing_run);
    if (top.empty()) return std::nullopt;
    return top.front();
}

std::vector<BestConfig> Database::top_k(int64_t workload_id, int64_t target_id, int k,
                                        int64_t closing_run) const {
    Impl &db = *impl_;
    return db.read("querying the best configs", [&] {
        std::vector<BestConfig> out;
        // `last`: when the latest ok measurement outside closing rounds was taken; `round`: the
        // closing measurements a finished run (or closing_run) took after it, of the run whose
        // first such measurement is the latest; `stands`: that round, unless an ok measurement
        // not its own is newer than its start. Each ok measurement is `in_round` when the
        // standing round took it; a config is a `contender` when one of its measurements is. A
        // contender's measurements in the round count, and every ok measurement of any other
        // config (BestConfig). Per config: the counted measurements ranked by median (rn of n),
        // the median of their medians (the middle one, or the mean of the two middle ones), their
        // range; then the contenders first, each group by that median, the earliest measured
        // first on ties. The row returned for a config is its middle measurement (the lower
        // middle one; the next one, for an even count, gives the mean of the two). One pass of
        // window functions, no join of a config's rows with its median: SQLite ran that join
        // (of two materialized CTEs, without an index) as a nested scan, and `kiln db best`
        // took 3m42s on 60000 measurements of one workload (0.5 s now).
        Query q(db,
                std::string("WITH base AS MATERIALIZED (SELECT * FROM measurements WHERE "
                            "workload_id = ?1 "
                            "AND target_id = ?2), last AS (SELECT coalesce(max(timestamp_us), "
                            "0) AS us FROM base WHERE status = 'ok' AND closing = 0), round AS "
                            "(SELECT b.run_id AS rid, min(b.timestamp_us) AS start_us FROM "
                            "base b JOIN tuning_runs r ON r.id = b.run_id JOIN last WHERE "
                            "b.closing = 1 AND b.timestamp_us > last.us AND (r.finished_us IS "
                            "NOT NULL OR r.id = ?3) GROUP BY b.run_id ORDER BY start_us DESC "
                            "LIMIT 1), stands AS MATERIALIZED (SELECT rid, start_us FROM round "
                            "WHERE NOT "
                            "EXISTS (SELECT 1 FROM base b WHERE b.status = 'ok' AND "
                            "b.timestamp_us > round.start_us AND NOT (b.closing = 1 AND "
                            "b.run_id = round.rid))), flagged AS (SELECT b.*, s.rid IS NOT NULL "
                            "AS in_round FROM base b LEFT JOIN stands s ON b.closing = 1 AND "
                            "b.run_id = s.rid AND b.timestamp_us >= s.start_us WHERE "
                            "b.status = 'ok'), counted AS (SELECT f.*, max(f.in_round) OVER "
                            "(PARTITION BY f.config_id) AS contender FROM flagged f), ok AS "
                            "(SELECT c.*, row_number() OVER config AS rn, count(*) OVER config "
                            "AS n, min(c.median_ms) OVER config AS lo, max(c.median_ms) OVER "
                            "config AS hi, min(c.timestamp_us) OVER config AS first_us, "
                            "lead(c.median_ms) OVER config AS next_ms FROM counted c WHERE "
                            "c.in_round = c.contender WINDOW config AS (PARTITION BY "
                            "c.config_id ORDER BY c.median_ms, c.timestamp_us, c.id ROWS "
                            "BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)), mid AS "
                            "(SELECT *, CASE WHEN n % 2 = 1 THEN median_ms ELSE (median_ms + "
                            "next_ms) / 2 END AS med FROM ok WHERE rn = (n + 1) / 2) SELECT ") +
                    kMeasurementColumns +
                    ", c.config_json, c.trace_json, m.med, m.lo, m.hi, m.n, CASE WHEN "
                    "m.contender THEN m.run_id ELSE 0 END FROM mid m JOIN configs c ON c.id = "
                    "m.config_id LEFT JOIN tuning_runs r ON r.id = m.run_id ORDER BY "
                    "m.contender DESC, m.med, m.first_us, m.config_id LIMIT ?4");
        q.bind(workload_id, target_id, closing_run, int64_t(std::max(k, 0)));
        while (q.step()) {
            BestConfig b;
            b.measurement = read_measurement(q, 0, db.path);
            b.config = {b.measurement.config_id, b.measurement.config_hash,
                        q.text(kMeasurementColumnCount), q.text(kMeasurementColumnCount + 1)};
            b.median_ms = q.dbl(kMeasurementColumnCount + 2);
            b.min_ms = q.dbl(kMeasurementColumnCount + 3);
            b.max_ms = q.dbl(kMeasurementColumnCount + 4);
            b.measurements = q.i64(kMeasurementColumnCount + 5);
            b.closing_run_id = q.i64(kMeasurementColumnCount + 6);
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

/// The counts over all measurements the filter selects: per status, configs, the best time.
void add_totals(Impl &db, const Filter &filter, Statistics &s) {
    {
        Query q(db, "SELECT m.status, count(*) FROM measurements m JOIN workloads w ON "
                    "w.id = m.workload_id" +
                        filter_clause("m") + "GROUP BY m.status");
        bind_filter(q, filter);
        while (q.step()) {
            s.per_status[q.text(0)] = q.i64(1);
            s.measurements += q.i64(1);
        }
    }
    {
        Query q(db, "SELECT count(DISTINCT m.config_id) FROM measurements m JOIN workloads w "
                    "ON w.id = m.workload_id" +
                        filter_clause("m"));
        bind_filter(q, filter);
        q.step();
        s.configs = q.i64(0);
    }
    Query q(db, config_medians("0", "FROM measurements m JOIN workloads w ON w.id = "
                                    "m.workload_id" +
                                        filter_clause("m")) +
                    "SELECT min(med) FROM cfg");
    bind_filter(q, filter);
    q.step();
    s.best_ms = q.opt_dbl(0);
}

/// The runs, trials, measurements and best time of each strategy (adding up the runs and trials).
void add_per_strategy(Impl &db, const Filter &filter, Statistics &s) {
    std::map<std::string, Statistics::PerStrategy> per;
    {
        Query q(db, "SELECT r.strategy, count(*), sum(r.trials_done) FROM tuning_runs r JOIN "
                    "workloads w ON w.id = r.workload_id" +
                        filter_clause("r") + "GROUP BY r.strategy");
        bind_filter(q, filter);
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
        bind_filter(q, filter);
        while (q.step()) {
            auto &p = per[q.text(0)];
            p.strategy = q.text(0);
            p.measurements = q.i64(1);
        }
    }
    {
        Query q(db, config_medians("r.strategy", by_strategy) +
                        "SELECT k, min(med) FROM cfg GROUP BY k");
        bind_filter(q, filter);
        while (q.step())
            per[q.text(0)].best_ms = q.dbl(1);
    }
    for (auto &[name, p] : per)
        s.per_strategy.push_back(p);
}

} // namespace

Statistics Database::statistics(const Filter &filter) const {
    Impl &db = *impl_;
    return db.read("computing statistics", [&] {
        Statistics s;
        add_totals(db, filter, s);
        add_per_strategy(db, filter, s);
        return s;
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

} // namespace kiln::tuning_db
