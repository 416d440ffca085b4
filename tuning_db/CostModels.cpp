// tuning_db::Database, the cost model's data: the loop-nest features of measured configs (the
// training rows of autotune's cost model, across every workload and run of a target) and the
// models trained on them, saved beside the database (autotune/CostModel.h trains and saves them).
#include <cmath>

#include "lang/Error.h"
#include "tuning_db/DatabaseImpl.h"
#include "tuning_db/TuningDB.h"

namespace kiln::tuning_db {

using nlohmann::json;
using namespace internal;

void Database::record_features(int64_t workload_id, int64_t target_id, int64_t config_id,
                               const std::string &version, const std::vector<float> &features) {
    Impl &db = *impl_;
    for (float v : features) {
        if (!std::isfinite(v))
            db.fail_user(detail::str("record_features: a feature of config ", config_id, " is ", v,
                                     "; features must be finite"));
    }
    const std::string vector = json(features).dump();
    db.write("recording features", [&] {
        auto exists = [&](const char *table, int64_t id) {
            Query q(db, std::string("SELECT 1 FROM ") + table + " WHERE id = ?");
            return q.bind(id).step();
        };
        if (!exists("workloads", workload_id) || !exists("targets", target_id) ||
            !exists("configs", config_id))
            db.fail_user(detail::str("record_features: no workload ", workload_id, ", target ",
                                     target_id, " or config ", config_id,
                                     " (get ids from workload_id(), target_id(), config_id())"));
        Query(db, "INSERT OR REPLACE INTO features (target_id, version, workload_id, config_id, "
                  "vector) VALUES (?, ?, ?, ?, ?)")
            .bind(target_id, version, workload_id, config_id, vector)
            .run();
    });
}

std::vector<FeatureRow> Database::feature_rows(int64_t target_id,
                                               const std::string &version) const {
    Impl &db = *impl_;
    if (db.version < kCostModelVersion) return {};
    return db.read("reading the cost model's features", [&] {
        Query q(db, config_medians("0", "FROM measurements m WHERE m.target_id = ?1") +
                        "SELECT f.workload_id, f.config_id, f.vector, cfg.med FROM features f "
                        "JOIN cfg ON cfg.wid = f.workload_id AND cfg.cid = f.config_id "
                        "WHERE f.target_id = ?1 AND f.version = ?2 "
                        "ORDER BY f.workload_id, f.config_id");
        q.bind(target_id, version);
        std::vector<FeatureRow> rows;
        while (q.step()) {
            FeatureRow r;
            r.workload_id = q.i64(0);
            r.config_id = q.i64(1);
            try {
                r.features = json::parse(q.text(2)).get<std::vector<float>>();
            } catch (const json::exception &e) {
                db.fail_user(detail::str("the features of config ", r.config_id, " on workload ",
                                         r.workload_id, " are malformed: ", e.what()));
            }
            r.median_ms = q.dbl(3);
            rows.push_back(std::move(r));
        }
        return rows;
    });
}

int64_t Database::record_cost_model(const CostModelRecord &m) {
    Impl &db = *impl_;
    const std::string evaluation = m.evaluation.dump();
    return db.write("recording a cost model", [&] {
        if (!Query(db, "SELECT 1 FROM targets WHERE id = ?").bind(m.target_id).step())
            db.fail_user(detail::str("record_cost_model: no target with id ", m.target_id));
        Query(db, "INSERT INTO cost_models (target_id, version, trained_us, rows, workloads, "
                  "file, evaluation_json) VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(m.target_id, m.version, m.trained_us ? m.trained_us : now_us(), m.rows,
                  m.workloads, m.file, evaluation)
            .run();
        return int64_t(sqlite3_last_insert_rowid(db.db));
    });
}

std::vector<CostModelRecord> Database::cost_models(int64_t target_id) const {
    Impl &db = *impl_;
    if (db.version < kCostModelVersion) return {};
    return db.read("reading the cost models", [&] {
        Query q(db, "SELECT id, target_id, version, trained_us, rows, workloads, file, "
                    "evaluation_json FROM cost_models c WHERE (?1 = 0 OR target_id = ?1) AND "
                    "id = (SELECT max(id) FROM cost_models d WHERE d.target_id = c.target_id) "
                    "ORDER BY target_id");
        q.bind(target_id);
        std::vector<CostModelRecord> out;
        while (q.step()) {
            CostModelRecord r;
            r.id = q.i64(0);
            r.target_id = q.i64(1);
            r.version = q.text(2);
            r.trained_us = q.i64(3);
            r.rows = q.i64(4);
            r.workloads = q.i64(5);
            r.file = q.text(6);
            try {
                r.evaluation = json::parse(q.text(7));
            } catch (const json::exception &e) {
                db.fail_user(
                    detail::str("cost model ", r.id, " has a malformed evaluation: ", e.what()));
            }
            out.push_back(std::move(r));
        }
        return out;
    });
}

} // namespace kiln::tuning_db
