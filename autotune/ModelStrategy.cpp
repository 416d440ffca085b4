// The model-guided strategy (see autotune/Strategy.h): until it has seen `warmup` successful
// measurements it samples at random; then, for every batch, it refits the cost model to all ok
// measurements, builds a pool of candidates (random samples and mutations of the best configs),
// ranks them by predicted score and proposes the best, keeping one random proposal per batch so
// the model keeps learning about unexplored regions. Its state counts the proposals that came
// from the ranked pool, so a run shows whether the model guided it or it only sampled at random.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "autotune/CostModel.h"
#include "autotune/Strategy.h"
#include "lang/Error.h"

namespace kiln::autotune {

namespace {

class ModelStrategy : public Strategy {
public:
    explicit ModelStrategy(uint64_t seed) : rng(seed) {}
    std::string name() const override { return "model"; }

    std::vector<Config> propose(ProposalContext &ctx, int n) override {
        std::vector<Config> batch;
        std::vector<std::string> hashes;
        auto fill_random = [&](int until) {
            while (int(batch.size()) < until) {
                auto c = detail::random_new(ctx, rng, hashes);
                if (!c) break;
                batch.push_back(*c);
                hashes.push_back(ctx.space.hash(*c));
            }
        };
        if (int(rows.size()) < warmup || !ctx.features) {
            fill_random(n);
            return batch;
        }
        model.fit(rows, scores);

        // The pool: random samples and mutations of the best configs measured so far.
        std::vector<size_t> order(rows.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return scores[a] > scores[b]; });
        const int pool_size = std::max(32, 6 * n);
        std::vector<Config> pool;
        std::vector<std::string> pool_hashes;
        std::vector<std::vector<float>> pool_rows;
        for (int attempt = 0; int(pool.size()) < pool_size && attempt < 20 * pool_size; attempt++) {
            Config c;
            if (attempt % 2 == 0) {
                size_t parent = order[std::min<size_t>(order.size() - 1, size_t(attempt / 2) % 5)];
                c = detail::mutate(ctx.space, configs[parent], rng);
            } else {
                c = ctx.space.random(rng);
            }
            if (!ctx.space.valid(c)) continue;
            std::string h = ctx.space.hash(c);
            if (ctx.known(h) ||
                std::find(pool_hashes.begin(), pool_hashes.end(), h) != pool_hashes.end())
                continue;
            std::optional<std::vector<float>> f = ctx.features(c);
            if (!f) continue; // does not lower: not worth a measurement
            pool.push_back(c);
            pool_hashes.push_back(h);
            pool_rows.push_back(*f);
        }
        if (!pool.empty()) {
            std::vector<float> predicted = model.predict(pool_rows);
            std::vector<size_t> rank(pool.size());
            std::iota(rank.begin(), rank.end(), 0);
            std::sort(rank.begin(), rank.end(),
                      [&](size_t a, size_t b) { return predicted[a] > predicted[b]; });
            const int greedy = n > 1 ? n - 1 : 1;
            for (size_t r = 0; r < rank.size() && int(batch.size()) < greedy; r++) {
                batch.push_back(pool[rank[r]]);
                hashes.push_back(pool_hashes[rank[r]]);
                ranked_proposals++;
            }
        }
        fill_random(n);
        return batch;
    }

    void observe(ProposalContext &ctx, const Config &c, const Outcome &o) override {
        if (!o.ok() || !ctx.features || o.median_ms <= 0) return;
        for (const Config &seen : configs) {
            if (seen == c) return;
        }
        std::optional<std::vector<float>> f = ctx.features(c);
        if (!f) return;
        configs.push_back(c);
        rows.push_back(*f);
        scores.push_back(float(-std::log(o.median_ms)));
    }

    nlohmann::json state() const override {
        nlohmann::json samples = nlohmann::json::array();
        for (size_t i = 0; i < rows.size(); i++)
            samples.push_back(
                {{"config", configs[i].index}, {"features", rows[i]}, {"score", scores[i]}});
        return {{"rng", detail::save_rng(rng)},
                {"samples", samples},
                {"ranked_proposals", ranked_proposals}};
    }

    void restore(const nlohmann::json &s) override {
        if (!s.is_object() || !s.contains("rng") || !s.contains("samples"))
            throw RuntimeError("strategy state of 'model' misses the field 'rng' or 'samples'");
        detail::load_rng(rng, s["rng"].get<std::string>());
        // States saved before the counter existed have none: count from 0.
        ranked_proposals = s.value("ranked_proposals", int64_t(0));
        configs.clear();
        rows.clear();
        scores.clear();
        for (const auto &x : s["samples"]) {
            configs.push_back(Config{x.at("config").get<std::vector<int>>()});
            rows.push_back(x.at("features").get<std::vector<float>>());
            scores.push_back(x.at("score").get<float>());
        }
    }

private:
    static constexpr int warmup = 8;
    std::mt19937_64 rng;
    CostModel model;
    std::vector<Config> configs;
    std::vector<std::vector<float>> rows;
    std::vector<float> scores;
    int64_t ranked_proposals = 0; ///< proposals taken from the model's ranking of the pool
};

} // namespace

std::unique_ptr<Strategy> make_model_strategy(uint64_t seed) {
    return std::make_unique<ModelStrategy>(seed);
}

} // namespace kiln::autotune
