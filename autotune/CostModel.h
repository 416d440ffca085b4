// The cost model of the model-guided strategy: gradient-boosted trees (XGBoost, through its C
// API) fitted to loop-nest features (autotune/Features.h) of measured configs, predicting a score
// (minus the log of the time: higher is faster) for configs not yet measured. Only the ranking
// of its predictions is used.
//
// Across runs: the tuner stores the features of every measured config in the tuning database
// (Database::record_features), trains a model on everything the database holds for the target
// (all workloads, all runs) and saves it beside the database with how well it ranked workloads
// it was not trained on (update_saved_model); the model strategy of a new run starts from those
// rows (TrainingRows), so it ranks from its first proposal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tuning_db/TuningDB.h"

namespace kiln::autotune {

class CostModel {
public:
    CostModel();
    ~CostModel();
    CostModel(const CostModel &) = delete;
    CostModel &operator=(const CostModel &) = delete;

    /// Fits a fresh model (rounds boosting rounds) to rows of features and their scores.
    /// Raises RuntimeError with XGBoost's message when XGBoost fails.
    void fit(const std::vector<std::vector<float>> &rows, const std::vector<float> &scores,
             int rounds = 40);
    bool trained() const { return booster != nullptr; }
    /// Predicted scores, one per row; fit must have been called.
    std::vector<float> predict(const std::vector<std::vector<float>> &rows) const;
    /// Writes the model in XGBoost's JSON format (loadable by XGBoost itself); fit must have
    /// been called. Raises RuntimeError naming the file when it cannot be written.
    void save(const std::string &path) const;
    /// Reads a model save() wrote; raises RuntimeError naming the file otherwise.
    void load(const std::string &path);

private:
    void *booster = nullptr;
};

/// Kendall's tau over the pairs whose true scores differ: a pair the prediction orders the same
/// way counts +1, the other way -1, a tie in the prediction 0 (so a constant prediction scores 0).
double kendall_tau(const std::vector<float> &truth, const std::vector<float> &predicted);
/// How many of the k best predicted configs are among the k with the best true scores; ties in
/// the prediction are broken against the model (the truly worse config first), and a config tied
/// with the k-th best true score counts as among them (so which of several equals the k best
/// holds does not decide a hit).
int top_k_hits(const std::vector<float> &truth, const std::vector<float> &predicted, size_t k);

/// Training rows for the model: features and scores. A score is log(best / median) of the
/// config's workload (0 for the workload's fastest config, negative for slower ones), so that
/// workloads of different sizes share one scale.
struct TrainingRows {
    std::vector<std::vector<float>> rows;
    std::vector<float> scores;
    int64_t workloads = 0; ///< how many workloads the rows come from
    bool empty() const { return rows.empty(); }
};
/// The database's rows (Database::feature_rows) as training rows, leaving out one workload's
/// (exclude_workload; 0: none), and rows whose length is not the current feature count.
TrainingRows training_rows(const std::vector<tuning_db::FeatureRow> &rows,
                           int64_t exclude_workload = 0);

/// How well a model trained on the other workloads ranks each workload: per workload with at
/// least `min_rows` configs (at most `max_workloads` of them, those with the most rows), a model
/// is fitted to the rows of every other workload and ranks this one's configs.
struct HeldOutWorkload {
    int64_t workload_id = 0;
    size_t rows = 0;
    double tau = 0; ///< Kendall's tau of the predicted against the measured ranking
    int top_hits = 0;
    size_t top_k = 0; ///< hits of the k fastest among the k best predicted (k = rows / 10, >= 1)
};
struct RankingEvaluation {
    std::vector<HeldOutWorkload> workloads;
    double mean_tau = 0; ///< over `workloads`; 0 when there are none
    nlohmann::json to_json() const;
};
RankingEvaluation evaluate_held_out(const std::vector<tuning_db::FeatureRow> &rows,
                                    size_t min_rows = 5, size_t max_workloads = 16);

/// Where the model of a target is saved: `<database>.models/target-<id>.json`.
std::string saved_model_path(const std::string &db_path, int64_t target_id);
/// Trains a model on every feature row the database holds for the target, evaluates it on held-
/// out workloads, saves it (saved_model_path) and records it (Database::record_cost_model).
/// Nothing when the database has fewer than 2 rows for the target. Raises RuntimeError naming
/// the file when it cannot be written.
std::optional<tuning_db::CostModelRecord> update_saved_model(tuning_db::Database &db,
                                                             int64_t target_id);

/// The summary line of a saved model: "cost model: trained on N configs of W workloads, saved to
/// FILE; ranks held-out workloads with Kendall's tau T (H workloads)" (the last part when it was
/// evaluated), with a newline. The tuner's and a --tasks job's summaries print it.
std::string cost_model_summary(const tuning_db::CostModelRecord &m);

} // namespace kiln::autotune
