#include "autotune/CostModel.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>

#include "autotune/Features.h"
#include "lang/Error.h"

namespace kiln::autotune {

namespace {

void check(int rc, const char *what) {
    if (rc != 0)
        throw RuntimeError(std::string("cost model: XGBoost ") + what +
                           " failed: " + XGBGetLastError());
}

/// A DMatrix owned for the length of a scope.
struct Matrix {
    DMatrixHandle handle = nullptr;
    explicit Matrix(const std::vector<std::vector<float>> &rows) {
        size_t cols = rows.empty() ? 0 : rows[0].size();
        std::vector<float> flat;
        flat.reserve(rows.size() * cols);
        for (const auto &r : rows) {
            if (r.size() != cols) throw InternalError("cost model: feature rows differ in length");
            flat.insert(flat.end(), r.begin(), r.end());
        }
        check(XGDMatrixCreateFromMat(flat.data(), rows.size(), cols, -1e30f, &handle),
              "XGDMatrixCreateFromMat");
    }
    ~Matrix() {
        if (handle) XGDMatrixFree(handle);
    }
};

} // namespace

CostModel::CostModel() = default;

CostModel::~CostModel() {
    if (booster) XGBoosterFree(booster);
}

void CostModel::fit(const std::vector<std::vector<float>> &rows, const std::vector<float> &scores,
                    int rounds) {
    if (rows.empty() || rows.size() != scores.size())
        throw InternalError("cost model: fit needs one score per feature row");
    Matrix m(rows);
    check(XGDMatrixSetFloatInfo(m.handle, "label", scores.data(), scores.size()), "set labels");
    if (booster) {
        XGBoosterFree(booster);
        booster = nullptr;
    }
    BoosterHandle b = nullptr;
    check(XGBoosterCreate(&m.handle, 1, &b), "XGBoosterCreate");
    booster = b;
    const std::pair<const char *, const char *> params[] = {{"objective", "reg:squarederror"},
                                                            {"max_depth", "6"},
                                                            {"eta", "0.2"},
                                                            {"subsample", "1.0"},
                                                            {"min_child_weight", "1"},
                                                            {"nthread", "1"},
                                                            {"verbosity", "0"},
                                                            {"seed", "0"}};
    for (const auto &[k, v] : params)
        check(XGBoosterSetParam(b, k, v), "XGBoosterSetParam");
    for (int i = 0; i < rounds; i++)
        check(XGBoosterUpdateOneIter(b, i, m.handle), "XGBoosterUpdateOneIter");
}

std::vector<float> CostModel::predict(const std::vector<std::vector<float>> &rows) const {
    if (!booster) throw InternalError("cost model: predict before fit");
    if (rows.empty()) return {};
    Matrix m(rows);
    bst_ulong len = 0;
    const float *out = nullptr;
    check(XGBoosterPredict(booster, m.handle, 0, 0, 0, &len, &out), "XGBoosterPredict");
    return std::vector<float>(out, out + len);
}

void CostModel::save(const std::string &path) const {
    if (!booster) throw InternalError("cost model: save before fit");
    if (XGBoosterSaveModel(booster, path.c_str()) != 0)
        throw RuntimeError("cost model: cannot write '" + path + "': " + XGBGetLastError());
}

void CostModel::load(const std::string &path) {
    BoosterHandle b = nullptr;
    check(XGBoosterCreate(nullptr, 0, &b), "XGBoosterCreate");
    if (XGBoosterLoadModel(b, path.c_str()) != 0) {
        std::string why = XGBGetLastError();
        XGBoosterFree(b);
        throw RuntimeError("cost model: cannot read '" + path + "': " + why);
    }
    if (booster) XGBoosterFree(booster);
    booster = b;
}

double kendall_tau(const std::vector<float> &truth, const std::vector<float> &predicted) {
    int64_t sum = 0, pairs = 0;
    for (size_t i = 0; i < truth.size(); i++) {
        for (size_t j = i + 1; j < truth.size(); j++) {
            if (truth[i] == truth[j]) continue;
            pairs++;
            float t = truth[i] - truth[j], p = predicted[i] - predicted[j];
            if (p != 0) sum += (t > 0) == (p > 0) ? 1 : -1;
        }
    }
    return pairs ? double(sum) / double(pairs) : 0;
}

int top_k_hits(const std::vector<float> &truth, const std::vector<float> &predicted, size_t k) {
    k = std::min(k, truth.size());
    std::vector<size_t> by_truth(truth.size()), by_prediction(truth.size());
    std::iota(by_truth.begin(), by_truth.end(), 0);
    std::iota(by_prediction.begin(), by_prediction.end(), 0);
    std::sort(by_truth.begin(), by_truth.end(),
              [&](size_t a, size_t b) { return truth[a] > truth[b]; });
    std::sort(by_prediction.begin(), by_prediction.end(), [&](size_t a, size_t b) {
        if (predicted[a] != predicted[b]) return predicted[a] > predicted[b];
        return truth[a] < truth[b];
    });
    if (k == 0) return 0;
    const float kth_best = truth[by_truth[k - 1]];
    int hits = 0;
    for (size_t i = 0; i < k; i++)
        hits += int(truth[by_prediction[i]] >= kth_best);
    return hits;
}

TrainingRows training_rows(const std::vector<tuning_db::FeatureRow> &rows,
                           int64_t exclude_workload) {
    const size_t width = feature_names().size();
    std::map<int64_t, double> best; // per workload: its fastest config's median
    for (const tuning_db::FeatureRow &r : rows) {
        if (r.workload_id == exclude_workload || r.features.size() != width || r.median_ms <= 0)
            continue;
        auto [it, fresh] = best.emplace(r.workload_id, r.median_ms);
        if (!fresh) it->second = std::min(it->second, r.median_ms);
    }
    TrainingRows t;
    for (const tuning_db::FeatureRow &r : rows) {
        auto it = best.find(r.workload_id);
        if (it == best.end() || r.features.size() != width || r.median_ms <= 0) continue;
        t.rows.push_back(r.features);
        t.scores.push_back(float(std::log(it->second / r.median_ms)));
    }
    t.workloads = int64_t(best.size());
    return t;
}

nlohmann::json RankingEvaluation::to_json() const {
    nlohmann::json per = nlohmann::json::array();
    for (const HeldOutWorkload &w : workloads)
        per.push_back({{"workload_id", w.workload_id},
                       {"rows", w.rows},
                       {"kendall_tau", w.tau},
                       {"top_k", w.top_k},
                       {"top_k_hits", w.top_hits}});
    return {{"held_out", per}, {"mean_kendall_tau", mean_tau}};
}

RankingEvaluation evaluate_held_out(const std::vector<tuning_db::FeatureRow> &rows, size_t min_rows,
                                    size_t max_workloads) {
    std::map<int64_t, size_t> counts;
    for (const tuning_db::FeatureRow &r : rows)
        counts[r.workload_id]++;
    std::vector<std::pair<size_t, int64_t>> by_size; // (rows, workload), most rows first
    for (auto [w, n] : counts) {
        if (n >= min_rows) by_size.emplace_back(n, w);
    }
    std::sort(by_size.begin(), by_size.end(), [](const auto &a, const auto &b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    if (by_size.size() > max_workloads) by_size.resize(max_workloads);

    RankingEvaluation e;
    for (auto [n, w] : by_size) {
        TrainingRows train = training_rows(rows, w);
        if (train.rows.size() < 2) continue;
        std::vector<tuning_db::FeatureRow> mine;
        for (const tuning_db::FeatureRow &r : rows) {
            if (r.workload_id == w) mine.push_back(r);
        }
        TrainingRows test = training_rows(mine);
        if (test.rows.size() < 2) continue;
        CostModel model;
        model.fit(train.rows, train.scores);
        std::vector<float> predicted = model.predict(test.rows);
        HeldOutWorkload h;
        h.workload_id = w;
        h.rows = test.rows.size();
        h.tau = kendall_tau(test.scores, predicted);
        h.top_k = std::max<size_t>(1, test.rows.size() / 10);
        h.top_hits = top_k_hits(test.scores, predicted, h.top_k);
        e.workloads.push_back(h);
    }
    for (const HeldOutWorkload &h : e.workloads)
        e.mean_tau += h.tau / double(e.workloads.size());
    return e;
}

std::string saved_model_path(const std::string &db_path, int64_t target_id) {
    return db_path + ".models/target-" + std::to_string(target_id) + ".json";
}

std::optional<tuning_db::CostModelRecord> update_saved_model(tuning_db::Database &db,
                                                             int64_t target_id) {
    std::vector<tuning_db::FeatureRow> rows = db.feature_rows(target_id, feature_version());
    TrainingRows all = training_rows(rows);
    if (all.rows.size() < 2) return std::nullopt;
    CostModel model;
    model.fit(all.rows, all.scores);
    tuning_db::CostModelRecord r;
    r.target_id = target_id;
    r.version = feature_version();
    r.rows = int64_t(all.rows.size());
    r.workloads = all.workloads;
    r.file = saved_model_path(db.path(), target_id);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(r.file).parent_path(), ec);
    if (ec)
        throw RuntimeError("cost model: cannot create the directory of '" + r.file +
                           "': " + ec.message());
    model.save(r.file);
    r.evaluation = evaluate_held_out(rows).to_json();
    r.id = db.record_cost_model(r);
    return r;
}

std::string cost_model_summary(const tuning_db::CostModelRecord &m) {
    std::string line = "cost model: trained on " + std::to_string(m.rows) + " configs of " +
                       std::to_string(m.workloads) + " workloads, saved to " + m.file;
    const nlohmann::json &held = m.evaluation["held_out"];
    if (!held.empty()) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "; ranks held-out workloads with Kendall's tau %.2f",
                      m.evaluation["mean_kendall_tau"].get<double>());
        line += std::string(buf) + " (" + std::to_string(held.size()) + " workloads)";
    }
    return line + "\n";
}

} // namespace kiln::autotune
