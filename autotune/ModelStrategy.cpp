// The model-guided strategy (see autotune/Strategy.h): until it has `warmup` training rows it
// samples at random. Then, once per `refresh_rows` new rows (or when it has no candidate left),
// it refits the cost model and runs one generation of evolution guided by the model (a
// population kept across batches, children by crossover and mutation, the best predicted
// survive: evolve()); it proposes that generation's best predicted configs not measured yet,
// and every fourth proposal a random config (epsilon-greedy), so the model keeps learning about
// regions it ranks low. Its training rows are its own ok measurements and, when the tuner gives
// them (ProposalContext::prior), the database's rows of other workloads on the target, so a new
// workload is ranked from its first batch. Its own rows are scored like those (log of its best
// time over the config's), so the two share one scale. Its state keeps the population and the
// ranked candidates, and counts the proposals taken from the model's ranking, so a run shows
// whether the model guided it or it only sampled at random.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

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
        const size_t prior_rows = ctx.prior ? ctx.prior->rows.size() : 0;
        if (rows.size() + prior_rows < size_t(warmup) || !ctx.features) {
            fill_random(n);
            return batch;
        }
        // A generation lowers dozens of configs in the tuner's process: one per few new rows,
        // not one per proposal (proposals come one or two at a time, as workers free up).
        bool has_candidate = false;
        for (const Config &c : ranked)
            has_candidate = has_candidate || !ctx.known(ctx.space.hash(c));
        if (!has_candidate || rows.size() >= evolved_rows + refresh_rows ||
            fitted_prior != prior_rows) {
            if (!model.trained() || fitted_rows != rows.size() || fitted_prior != prior_rows)
                fit(ctx, prior_rows);
            evolve(ctx, 32);
            ranked.clear();
            for (const Config &c : population) {
                if (!ctx.known(ctx.space.hash(c))) ranked.push_back(c);
            }
            evolved_rows = rows.size();
        }

        // Epsilon-greedy: every fourth proposal is a random config, so the model keeps learning
        // about regions it ranks low; the others are the best predicted configs not measured yet.
        while (int(batch.size()) < n) {
            if (++proposals % 4 == 0) {
                fill_random(int(batch.size()) + 1);
                continue;
            }
            size_t before = batch.size();
            while (!ranked.empty() && batch.size() == before) {
                Config c = ranked.front();
                ranked.erase(ranked.begin());
                std::string h = ctx.space.hash(c);
                if (ctx.known(h) || std::find(hashes.begin(), hashes.end(), h) != hashes.end())
                    continue;
                batch.push_back(c);
                hashes.push_back(h);
                ranked_proposals++;
            }
            if (batch.size() == before) fill_random(int(batch.size()) + 1);
            if (batch.size() == before) break; // nothing new left at all
        }
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
        nlohmann::json pop = nlohmann::json::array();
        for (const Config &c : population)
            pop.push_back(c.index);
        nlohmann::json next = nlohmann::json::array();
        for (const Config &c : ranked)
            next.push_back(c.index);
        return {{"rng", detail::save_rng(rng)},
                {"samples", samples},
                {"population", pop},
                {"ranked", next},
                {"evolved_rows", evolved_rows},
                {"proposals", proposals},
                {"fitted_prior", fitted_prior},
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
        population.clear();
        // States saved before the population existed have none: it grows again.
        for (const auto &x : s.value("population", nlohmann::json::array()))
            population.push_back(Config{x.get<std::vector<int>>()});
        ranked.clear();
        for (const auto &x : s.value("ranked", nlohmann::json::array()))
            ranked.push_back(Config{x.get<std::vector<int>>()});
        evolved_rows = s.value("evolved_rows", size_t(0));
        proposals = s.value("proposals", int64_t(0));
        fitted_prior = s.value("fitted_prior", size_t(0));
        for (const auto &x : s["samples"]) {
            configs.push_back(Config{x.at("config").get<std::vector<int>>()});
            rows.push_back(x.at("features").get<std::vector<float>>());
            scores.push_back(x.at("score").get<float>());
        }
    }

private:
    /// Fits the model to the prior rows and this run's own (scored against its best).
    void fit(ProposalContext &ctx, size_t prior_rows) {
        std::vector<std::vector<float>> train;
        std::vector<float> train_scores;
        if (ctx.prior) {
            train = ctx.prior->rows;
            train_scores = ctx.prior->scores;
        }
        const float best = scores.empty() ? 0 : *std::max_element(scores.begin(), scores.end());
        for (size_t i = 0; i < rows.size(); i++) {
            train.push_back(rows[i]);
            train_scores.push_back(scores[i] - best);
        }
        model.fit(train, train_scores);
        fitted_rows = rows.size();
        fitted_prior = prior_rows;
    }

    /// One generation of model-guided evolution (as MetaSchedule's evolutionary search): the
    /// parents are the population kept from the previous batch, the best measured configs and,
    /// while there are few, random ones; `children` new configs come from uniform crossover of
    /// two parents (then a mutation, always when the child equals a parent) or a mutation of
    /// one, each parent picked by a tournament of 3 on predicted score. Children that break a
    /// constraint, repeat a config or do not lower are dropped. The next population is the best
    /// predicted `population_size` of parents and children, measured ones included (good
    /// parents are not proposed again: propose skips what is known). Every valid config one knob
    /// away from the best measured one (detail::neighbours) joins the children, ranked with
    /// them: a mutation reaches a distant value of an integer knob rarely (softmax's best strip
    /// of 8 rows was four steps from the hand schedule's single rows), and with neighbours as
    /// parents the next children include moves of two or three knobs from the incumbent.
    void evolve(ProposalContext &ctx, int children) {
        std::vector<Config> parents = population;
        std::set<std::string> seen;
        for (const Config &c : parents)
            seen.insert(ctx.space.hash(c));
        std::vector<size_t> order(rows.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return scores[a] > scores[b]; });
        for (size_t i = 0; i < order.size() && i < 8; i++) {
            if (seen.insert(ctx.space.hash(configs[order[i]])).second)
                parents.push_back(configs[order[i]]);
        }
        for (int attempt = 0; parents.size() < 8 && attempt < 200; attempt++) {
            Config c = ctx.space.random(rng);
            if (std::optional<Config> fixed = ctx.space.repair(c, rng)) c = *fixed;
            if (ctx.space.valid(c) && ctx.features(c) && seen.insert(ctx.space.hash(c)).second)
                parents.push_back(c);
        }
        if (parents.empty()) return;
        std::vector<float> parent_scores = predict(ctx, parents);
        sort_by(parents, parent_scores);
        auto tournament = [&]() -> const Config & {
            size_t best = parents.size();
            for (int t = 0; t < 3; t++)
                best = std::min(best,
                                std::uniform_int_distribution<size_t>(0, parents.size() - 1)(rng));
            return parents[best]; // parents are sorted best predicted first
        };

        std::vector<Config> next = parents;
        for (int attempt = 0, made = 0; made < children && attempt < 20 * children; attempt++) {
            const Config &a = tournament();
            Config child = a;
            if (parents.size() >= 2 && std::uniform_int_distribution<int>(0, 1)(rng)) {
                const Config &b = tournament();
                for (size_t k = 0; k < child.index.size(); k++) {
                    if (std::uniform_int_distribution<int>(0, 1)(rng)) child.index[k] = b.index[k];
                }
                if (child == a || child == b ||
                    std::uniform_real_distribution<double>(0, 1)(rng) < 0.3)
                    child = detail::mutate(ctx.space, child, rng);
            } else {
                child = detail::mutate(ctx.space, child, rng);
            }
            if (!ctx.space.valid(child) || !seen.insert(ctx.space.hash(child)).second) continue;
            if (!ctx.features(child)) continue; // does not lower: not worth a measurement
            next.push_back(child);
            made++;
        }
        // Every config one knob away from the best measured one joins the children, ranked
        // with them.
        if (!order.empty()) {
            for (Config &n : detail::neighbours(ctx.space, configs[order[0]])) {
                if (!seen.insert(ctx.space.hash(n)).second || !ctx.features(n)) continue;
                next.push_back(std::move(n));
            }
        }
        std::vector<float> next_scores = predict(ctx, next);
        sort_by(next, next_scores);
        if (next.size() > population_size) next.resize(population_size);
        population = std::move(next);
    }

    /// The model's predicted scores of configs that lower (those that do not score -infinity).
    std::vector<float> predict(ProposalContext &ctx, const std::vector<Config> &cs) const {
        std::vector<std::vector<float>> features;
        std::vector<size_t> where;
        for (size_t i = 0; i < cs.size(); i++) {
            if (std::optional<std::vector<float>> f = ctx.features(cs[i])) {
                features.push_back(*f);
                where.push_back(i);
            }
        }
        std::vector<float> out(cs.size(), -std::numeric_limits<float>::infinity());
        std::vector<float> p = model.predict(features);
        for (size_t i = 0; i < where.size(); i++)
            out[where[i]] = p[i];
        return out;
    }

    /// Sorts configs by score, best first (stable: ties keep their order).
    static void sort_by(std::vector<Config> &cs, const std::vector<float> &score) {
        std::vector<size_t> order(cs.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return score[a] > score[b]; });
        std::vector<Config> sorted;
        for (size_t i : order)
            sorted.push_back(cs[i]);
        cs = std::move(sorted);
    }

    static constexpr int warmup = 8;
    static constexpr size_t population_size = 32;
    static constexpr size_t refresh_rows = 4; ///< new rows that call for a new generation
    std::vector<Config> population;           ///< kept across batches, best predicted first
    std::vector<Config> ranked; ///< the last generation's unmeasured configs, best first
    size_t evolved_rows = 0;    ///< rows.size() at the last generation
    int64_t proposals = 0;      ///< proposals made past the warm-up
    std::mt19937_64 rng;
    CostModel model;
    std::vector<Config> configs;
    std::vector<std::vector<float>> rows;
    std::vector<float> scores;
    int64_t ranked_proposals = 0; ///< proposals taken from the model's ranking of the pool
    size_t fitted_rows = 0, fitted_prior = 0; ///< the rows the model was last fitted to
};

} // namespace

std::unique_ptr<Strategy> make_model_strategy(uint64_t seed) {
    return std::make_unique<ModelStrategy>(seed);
}

} // namespace kiln::autotune
