// The cost model of the model-guided strategy: gradient-boosted trees (XGBoost, through its C
// API) fitted to loop-nest features (autotune/Features.h) of measured configs, predicting a score
// (minus the log of the time: higher is faster) for configs not yet measured. Only the ranking
// of its predictions is used.
#pragma once

#include <vector>

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

private:
    void *booster = nullptr;
};

} // namespace kiln::autotune
