// tuning_db::Database, export and import: export_json writes the rows a filter selects as one
// JSON document (format_version 1; the cost model's features are an optional array of it);
// import_json reads such a document and checks it whole, then adds its rows in one transaction,
// each through internal::upsert, so importing twice adds nothing.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "lang/Error.h"
#include "tuning_db/DatabaseImpl.h"
#include "tuning_db/TuningDB.h"

namespace kiln::tuning_db {

using nlohmann::json;
using namespace internal;

// --- export --------------------------------------------------------------------------------------

namespace {

/// Builds export_json's arrays, inside its read transaction. The measurements and runs come
/// first: a filtered export keeps the targets and workloads they refer to.
class Exporter {
public:
    Exporter(Impl &db, const Filter &filter) : db_(db), filter_(filter) {}

    json measurements() {
        json out = json::array();
        Query q(db_, std::string("SELECT ") + kMeasurementColumns + kMeasurementJoins +
                         "JOIN workloads w ON w.id = m.workload_id" + filter_clause("m") +
                         "ORDER BY m.id");
        bind_filter(q, filter_);
        while (q.step()) {
            Measurement m = read_measurement(q, 0, db_.path);
            refer_to(m.workload_id, m.target_id);
            out.push_back({{"workload", m.workload_id},
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
            if (m.closing) out.back()["closing"] = true; // absent: false (older documents)
        }
        return out;
    }

    json runs() {
        json out = json::array();
        Query q(db_, "SELECT r.id, coalesce(r.uuid, ''), r.workload_id, r.target_id, "
                     "r.strategy, r.seed, r.budget_trials, r.budget_seconds, r.elapsed_s, "
                     "r.trials_done, r.state_json, r.started_us, r.updated_us, r.finished_us "
                     "FROM tuning_runs r JOIN workloads w ON w.id = r.workload_id" +
                         filter_clause("r") + "ORDER BY r.id");
        bind_filter(q, filter_);
        while (q.step()) {
            RunRecord r = read_run(q);
            r.state_json = assembled_state(db_, r.id, r.state_json);
            refer_to(r.workload_id, r.target_id);
            out.push_back({{"uuid", r.uuid},
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
        return out;
    }

    json configs() {
        json out = json::array();
        Query q(db_, "SELECT DISTINCT c.hash, c.config_json, c.trace_json FROM configs c JOIN "
                     "measurements m ON m.config_id = c.id JOIN workloads w ON "
                     "w.id = m.workload_id" +
                         filter_clause("m") + "ORDER BY c.id");
        bind_filter(q, filter_);
        while (q.step())
            out.push_back({{"hash", q.text(0)}, {"config", q.text(1)}, {"trace", q.text(2)}});
        return out;
    }

    /// The cost model's training rows of the exported measurements' workloads and targets
    /// (none from a file older than schema version 5).
    json features() {
        json out = json::array();
        if (db_.version < kCostModelVersion) return out;
        Query q(db_, "SELECT f.workload_id, f.target_id, c.hash, f.version, f.vector FROM "
                     "features f JOIN configs c ON c.id = f.config_id JOIN workloads w ON "
                     "w.id = f.workload_id" +
                         filter_clause("f") +
                         "AND EXISTS (SELECT 1 FROM measurements m WHERE m.workload_id = "
                         "f.workload_id AND m.target_id = f.target_id AND m.config_id = "
                         "f.config_id) ORDER BY f.workload_id, f.config_id");
        bind_filter(q, filter_);
        while (q.step()) {
            json vector = json::parse(q.text(4), nullptr, false);
            if (vector.is_discarded()) continue; // a malformed row is not worth an export
            out.push_back({{"workload", q.i64(0)},
                           {"target", q.i64(1)},
                           {"config", q.text(2)},
                           {"version", q.text(3)},
                           {"vector", vector}});
        }
        return out;
    }

    /// After measurements() and runs().
    json targets() {
        json out = json::array();
        Query q(db_, "SELECT id, cpu_model, features, threads, compiler FROM targets ORDER BY id");
        while (q.step()) {
            if (!unfiltered() && !target_ids_.count(q.i64(0))) continue;
            out.push_back({{"id", q.i64(0)},
                           {"cpu_model", q.text(1)},
                           {"features", q.text(2)},
                           {"threads", q.i64(3)},
                           {"compiler", q.text(4)}});
        }
        return out;
    }

    /// After measurements() and runs().
    json workloads() {
        json out = json::array();
        Query q(db_, "SELECT id, op, algorithm_hash, shape, types FROM workloads ORDER BY id");
        while (q.step()) {
            int64_t id = q.i64(0);
            // Every workload the measurements and runs refer to, and those the filter names
            // (even without measurements) unless it also names a target.
            bool named = !filter_.target_id &&
                         (!filter_.workload_id || *filter_.workload_id == id) &&
                         (!filter_.op || *filter_.op == q.text(1));
            if (!unfiltered() && !named && !workload_ids_.count(id)) continue;
            out.push_back({{"id", id},
                           {"op", q.text(1)},
                           {"algorithm_hash", q.text(2)},
                           {"shape", q.text(3)},
                           {"types", q.text(4)}});
        }
        return out;
    }

private:
    /// A row of the export refers to this workload and target: a filtered export keeps them.
    void refer_to(int64_t workload_id, int64_t target_id) {
        workload_ids_.insert(workload_id);
        target_ids_.insert(target_id);
    }
    bool unfiltered() const { return !filter_.workload_id && !filter_.target_id && !filter_.op; }

    Impl &db_;
    const Filter &filter_;
    std::set<int64_t> target_ids_, workload_ids_;
};

} // namespace

json Database::export_json(const Filter &filter) const {
    Impl &db = *impl_;
    return db.read("exporting", [&] {
        // One read transaction, so the document is a consistent snapshot.
        db.exec("BEGIN", "exporting");
        struct End {
            Impl &db;
            ~End() { db.rollback_noexcept(); }
        } end{db};
        json doc = {{"format", "kiln tuning database"},
                    {"format_version", export_format_version},
                    {"schema_version", schema_version},
                    {"exported_us", now_us()}};
        Exporter exporter(db, filter);
        json measurements = exporter.measurements();
        json runs = exporter.runs();
        json configs = exporter.configs();
        json features = exporter.features();
        doc["targets"] = exporter.targets();
        doc["workloads"] = exporter.workloads();
        doc["configs"] = std::move(configs);
        doc["runs"] = std::move(runs);
        doc["measurements"] = std::move(measurements);
        doc["features"] = std::move(features);
        return doc;
    });
}

// --- import: reading and checking the document --------------------------------------------------

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

/// An import document's rows, read and checked whole before anything is written: a malformed
/// document adds nothing. Ids are the document's own.
struct ImportDocument {
    std::map<int64_t, TargetKey> targets;
    std::map<int64_t, WorkloadKey> workloads;
    std::vector<ConfigRecord> configs;
    std::set<std::string> config_hashes;
    /// Each run with its workload and target.
    std::vector<std::pair<RunRecord, std::pair<int64_t, int64_t>>> runs;
    std::set<std::string> run_uuids;
    struct MeasurementRow {
        MeasurementRecord rec;
        std::string config_hash, run_uuid;
        int64_t timestamp_us;
    };
    std::vector<MeasurementRow> measurements;
    struct FeatureRow {
        int64_t workload_id, target_id;
        std::string config_hash, version;
        std::vector<float> vector;
    };
    std::vector<FeatureRow> features; ///< optional in a document (older exports have none)
};

/// Reads the document's arrays into an ImportDocument, in the order that lets each refer to the
/// ones before it.
class DocumentReader {
public:
    explicit DocumentReader(const Reader &rd) : rd_(rd) {}

    ImportDocument read(const json &doc) {
        check_format(doc);
        read_targets(rd_.array(doc, "the document", "targets"));
        read_workloads(rd_.array(doc, "the document", "workloads"));
        read_configs(rd_.array(doc, "the document", "configs"));
        read_runs(rd_.array(doc, "the document", "runs"));
        read_measurements(rd_.array(doc, "the document", "measurements"));
        if (doc.contains("features")) read_features(rd_.array(doc, "the document", "features"));
        return std::move(in_);
    }

private:
    void check_format(const json &doc) const {
        if (!doc.is_object())
            rd_.fail("the document", "expected a JSON object from `kiln db export`");
        if (rd_.str(doc, "the document", "format") != "kiln tuning database")
            rd_.fail("the document", "field 'format' is not \"kiln tuning database\"");
        int64_t version = rd_.integer(doc, "the document", "format_version");
        if (version > Database::export_format_version || version < 1)
            rd_.fail("the document",
                     detail::str("format_version ", version,
                                 " is not supported by this build of kiln (supports ",
                                 Database::export_format_version, ")"));
    }

    void read_targets(const json &targets) {
        for (size_t i = 0; i < targets.size(); i++) {
            std::string at = detail::str("targets[", i, "]");
            const json &t = targets[i];
            in_.targets[rd_.integer(t, at, "id")] = {
                rd_.str(t, at, "cpu_model"), rd_.str(t, at, "features"),
                int(rd_.integer(t, at, "threads")), rd_.str(t, at, "compiler")};
            if (rd_.integer(t, at, "threads") < 1)
                rd_.fail(at, detail::str("field 'threads' is ", rd_.integer(t, at, "threads"),
                                         ": at least 1"));
        }
    }

    void read_workloads(const json &workloads) {
        for (size_t i = 0; i < workloads.size(); i++) {
            std::string at = detail::str("workloads[", i, "]");
            const json &w = workloads[i];
            in_.workloads[rd_.integer(w, at, "id")] = {
                rd_.str(w, at, "op"), rd_.str(w, at, "algorithm_hash"), rd_.str(w, at, "shape"),
                rd_.str(w, at, "types")};
            check_shape(rd_, at, rd_.str(w, at, "shape"));
        }
    }

    void read_configs(const json &configs) {
        for (size_t i = 0; i < configs.size(); i++) {
            std::string at = detail::str("configs[", i, "]");
            const json &c = configs[i];
            in_.configs.push_back(
                {0, rd_.str(c, at, "hash"), rd_.str(c, at, "config"), rd_.str(c, at, "trace")});
            for (const char *name : {"config", "trace"}) {
                std::string text = rd_.str(c, at, name);
                if (json::parse(text, nullptr, false).is_discarded())
                    rd_.fail(at, detail::str("field '", name, "' is '", text.substr(0, 80),
                                             text.size() > 80 ? "..." : "", "': not JSON"));
            }
            in_.config_hashes.insert(in_.configs.back().hash);
        }
    }

    void read_runs(const json &runs) {
        for (size_t i = 0; i < runs.size(); i++) {
            std::string at = detail::str("runs[", i, "]");
            const json &r = runs[i];
            RunRecord run;
            run.uuid = rd_.str(r, at, "uuid");
            if (run.uuid.empty()) rd_.fail(at, "field 'uuid' is empty");
            run.strategy = rd_.str(r, at, "strategy");
            run.seed = rd_.integer(r, at, "seed");
            run.budget_trials = rd_.integer(r, at, "budget_trials");
            run.budget_seconds = rd_.number(r, at, "budget_seconds");
            run.elapsed_s = rd_.number(r, at, "elapsed_s");
            run.trials_done = rd_.integer(r, at, "trials_done");
            run.state_json = rd_.str(r, at, "state");
            run.started_us = rd_.integer(r, at, "started_us");
            run.updated_us = rd_.integer(r, at, "updated_us");
            if (!rd_.field(r, at, "finished_us").is_null())
                run.finished_us = rd_.integer(r, at, "finished_us");
            in_.runs.push_back({run, {workload_ref(r, at), target_ref(r, at)}});
            in_.run_uuids.insert(run.uuid);
        }
    }

    void read_measurements(const json &measurements) {
        for (size_t i = 0; i < measurements.size(); i++)
            in_.measurements.push_back(
                measurement_row(measurements[i], detail::str("measurements[", i, "]")));
    }

    void read_features(const json &features) {
        for (size_t i = 0; i < features.size(); i++) {
            std::string at = detail::str("features[", i, "]");
            const json &f = features[i];
            ImportDocument::FeatureRow x;
            x.workload_id = workload_ref(f, at);
            x.target_id = target_ref(f, at);
            x.config_hash = rd_.str(f, at, "config");
            if (!in_.config_hashes.count(x.config_hash))
                rd_.fail(at, "config '" + x.config_hash + "' is not in the document's configs");
            x.version = rd_.str(f, at, "version");
            for (const json &v : rd_.array(f, at, "vector")) {
                if (!v.is_number() || !std::isfinite(v.get<double>()))
                    rd_.fail(at, "field 'vector' must hold finite numbers");
                x.vector.push_back(v.get<float>());
            }
            in_.features.push_back(std::move(x));
        }
    }

    ImportDocument::MeasurementRow measurement_row(const json &m, const std::string &at) const {
        ImportDocument::MeasurementRow x;
        x.rec.workload_id = workload_ref(m, at);
        x.rec.target_id = target_ref(m, at);
        x.config_hash = rd_.str(m, at, "config");
        if (!in_.config_hashes.count(x.config_hash))
            rd_.fail(at, "config '" + x.config_hash + "' is not in the document's configs");
        x.run_uuid = rd_.str(m, at, "run");
        if (!x.run_uuid.empty() && !in_.run_uuids.count(x.run_uuid))
            rd_.fail(at, "run '" + x.run_uuid + "' is not in the document's runs");
        try {
            x.rec.status = status_from_string(rd_.str(m, at, "status"));
        } catch (const RuntimeError &e) {
            rd_.fail(at, e.what());
        }
        const json &times = rd_.array(m, at, "times_ms");
        for (const json &t : times) {
            if (!t.is_number()) rd_.fail(at, "field 'times_ms' must hold numbers");
            x.rec.times_ms.push_back(t.get<double>());
        }
        x.rec.median_ms = rd_.number(m, at, "median_ms");
        x.rec.spread_ms = rd_.number(m, at, "spread_ms");
        x.rec.compile_ms = rd_.number(m, at, "compile_ms");
        x.rec.error = rd_.str(m, at, "error");
        x.timestamp_us = rd_.integer(m, at, "timestamp_us");
        if (m.contains("closing")) {
            if (!m.at("closing").is_boolean())
                rd_.fail(at, "field 'closing' must be true or false");
            x.rec.closing = m.at("closing").get<bool>();
            if (x.rec.closing && x.run_uuid.empty())
                rd_.fail(at, "field 'closing' is true but 'run' is empty: a closing measurement "
                             "belongs to the run whose closing round took it");
        }
        check_times(rd_, at, x.rec);
        return x;
    }

    int64_t workload_ref(const json &obj, const std::string &at) const {
        int64_t id = rd_.integer(obj, at, "workload");
        if (!in_.workloads.count(id))
            rd_.fail(at, detail::str("workload ", id, " is not in the document's workloads"));
        return id;
    }

    int64_t target_ref(const json &obj, const std::string &at) const {
        int64_t id = rd_.integer(obj, at, "target");
        if (!in_.targets.count(id))
            rd_.fail(at, detail::str("target ", id, " is not in the document's targets"));
        return id;
    }

    const Reader &rd_;
    ImportDocument in_;
};

// --- import: writing the rows --------------------------------------------------------------------

/// Adds a checked document's rows inside import_json's write transaction, table by table, each
/// row with a unique key through upsert; maps the document's ids to this file's.
class Importer {
public:
    Importer(Impl &db, const Reader &rd) : db_(db), rd_(rd) {}

    ImportSummary add(const ImportDocument &in) {
        add_targets(in);
        add_workloads(in);
        add_configs(in);
        add_runs(in);
        add_measurements(in);
        add_features(in);
        return sum_;
    }

private:
    void add_targets(const ImportDocument &in) {
        for (const auto &[id, key] : in.targets) {
            Upserted row = upsert_target(db_, key);
            sum_.targets_added += row.added;
            target_map_[id] = row.id;
        }
    }

    void add_workloads(const ImportDocument &in) {
        for (const auto &[id, key] : in.workloads) {
            Upserted row = upsert_workload(db_, key);
            sum_.workloads_added += row.added;
            workload_map_[id] = row.id;
        }
    }

    void add_configs(const ImportDocument &in) {
        for (const ConfigRecord &c : in.configs) {
            auto conflict = [&](const std::string &) {
                rd_.fail("configs", "config hash '" + c.hash +
                                        "' is already stored with a different config or trace");
            };
            Upserted row = upsert_config(db_, c.hash, c.config_json, c.trace_json, conflict);
            sum_.configs_added += row.added;
            config_map_[c.hash] = row.id;
        }
    }

    void add_runs(const ImportDocument &in) {
        for (const auto &run : in.runs) {
            const RunRecord &r = run.first;
            int64_t workload = workload_map_[run.second.first];
            int64_t target = target_map_[run.second.second];
            auto values = std::tie(r.uuid, workload, target, r.strategy, r.seed, r.budget_trials,
                                   r.budget_seconds, r.elapsed_s, r.trials_done, r.state_json,
                                   r.started_us, r.updated_us, r.finished_us);
            Upserted row = upsert(db_, kRunRow, values, std::tie(r.uuid), [&](const Query &q) {
                if (q.i64(1) != workload || q.i64(2) != target)
                    rd_.fail("runs", "run '" + r.uuid +
                                         "' is already stored for another workload or target");
            });
            sum_.runs_added += row.added;
            run_map_[r.uuid] = row.id;
        }
    }

    /// Measurements have no unique key: one with the same workload, target, config, run and
    /// timestamp is taken as already imported.
    void add_measurements(const ImportDocument &in) {
        for (const ImportDocument::MeasurementRow &x : in.measurements) {
            int64_t w = workload_map_[x.rec.workload_id], t = target_map_[x.rec.target_id];
            int64_t c = config_map_[x.config_hash];
            std::optional<int64_t> run;
            if (!x.run_uuid.empty()) run = run_map_[x.run_uuid];
            Query dup(db_, "SELECT 1 FROM measurements m LEFT JOIN tuning_runs r ON "
                           "r.id = m.run_id WHERE m.workload_id = ? AND m.target_id = ? AND "
                           "m.config_id = ? AND coalesce(r.uuid, '') = ? AND m.timestamp_us = ?");
            if (dup.bind(w, t, c, x.run_uuid, x.timestamp_us).step()) {
                sum_.measurements_skipped++;
                continue;
            }
            Query(db_, "INSERT INTO measurements (run_id, workload_id, target_id, config_id, "
                       "status, times_ms, median_ms, spread_ms, compile_ms, error, timestamp_us, "
                       "closing) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                .bind(run, w, t, c, to_string(x.rec.status), times_to_json(x.rec.times_ms),
                      x.rec.median_ms, x.rec.spread_ms, x.rec.compile_ms, x.rec.error,
                      x.timestamp_us, int64_t(x.rec.closing))
                .run();
            sum_.measurements_added++;
        }
    }

    /// Features stored already (same target, version, workload and config) are kept.
    void add_features(const ImportDocument &in) {
        for (const ImportDocument::FeatureRow &f : in.features) {
            Query q(db_, "INSERT OR IGNORE INTO features (target_id, version, workload_id, "
                         "config_id, vector) VALUES (?, ?, ?, ?, ?)");
            q.bind(target_map_[f.target_id], f.version, workload_map_[f.workload_id],
                   config_map_[f.config_hash], json(f.vector).dump())
                .run();
            sum_.features_added += sqlite3_changes(db_.db);
        }
    }

    Impl &db_;
    const Reader &rd_;
    ImportSummary sum_;
    std::map<int64_t, int64_t> target_map_, workload_map_;
    std::map<std::string, int64_t> config_map_, run_map_;
};

} // namespace

ImportSummary Database::import_json(const json &doc) {
    Impl &db = *impl_;
    Reader rd{db.path};
    ImportDocument in = DocumentReader(rd).read(doc);
    // A fresh Importer per attempt: a transaction retried after SQLITE_BUSY starts over.
    return db.write("importing", [&] { return Importer(db, rd).add(in); });
}

} // namespace kiln::tuning_db
