#include "autotune/CostModel.h"

#include <xgboost/c_api.h>

#include <string>

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

} // namespace kiln::autotune
