#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <set>

#include "autotune/CostModel.h"
#include "autotune/Strategy.h"
#include "lang/Error.h"

using namespace kiln;
using namespace kiln::autotune;

namespace {

SearchSpace toy_space() {
    SearchSpace s("toy");
    s.add_powers_of_two("a", 1, 32);    // 6 values
    s.add_powers_of_two("b", 1, 16);    // 5
    s.add_choice("c", {"p", "q", "r"}); // 3
    s.add_bool("d");                    // 2
    s.add_constraint("a * b <= 128",
                     [](const ConfigView &v) { return v.i("a") * v.i("b") <= 128; });
    return s;
}

/// A synthetic cost with a single best point (a = 8, b = 4, c = q, d = true), and failures where
/// a = 32 and b = 1.
Outcome cost(const SearchSpace &s, const Config &c) {
    ConfigView v(s, c);
    if (v.i("a") == 32 && v.i("b") == 1) return {tuning_db::Status::crash, 0};
    double ms = 1.0 + std::abs(std::log2(double(v.i("a"))) - 3) +
                std::abs(std::log2(double(v.i("b"))) - 2) + (v.s("c") == "q" ? 0 : 1) +
                (v.b("d") ? 0 : 0.5);
    return {tuning_db::Status::ok, ms};
}

struct Harness {
    SearchSpace space = toy_space();
    std::set<std::string> measured;
    ProposalContext ctx{space, [this](const std::string &h) { return measured.count(h) != 0; },
                        [this](const Config &c) -> std::optional<std::vector<float>> {
                            std::vector<float> f;
                            for (int i : c.index)
                                f.push_back(float(i));
                            return f;
                        }};

    /// Runs the strategy for `trials` measurements in batches of `batch`; returns the best time.
    double run(Strategy &s, int trials, int batch = 3) {
        double best = INFINITY;
        int done = 0;
        while (done < trials) {
            std::vector<Config> got = s.propose(ctx, std::min(batch, trials - done));
            EXPECT_LE(int(got.size()), std::min(batch, trials - done));
            if (got.empty()) break;
            std::set<std::string> in_batch;
            for (const Config &c : got) {
                std::string h = space.hash(c);
                EXPECT_TRUE(space.valid(c)) << s.name() << " proposed an invalid config";
                EXPECT_FALSE(measured.count(h)) << s.name() << " proposed a measured config";
                EXPECT_TRUE(in_batch.insert(h).second) << s.name() << " repeated in a batch";
            }
            for (const Config &c : got) {
                measured.insert(space.hash(c));
                Outcome o = cost(space, c);
                if (o.ok()) best = std::min(best, o.median_ms);
                s.observe(ctx, c, o);
                done++;
            }
        }
        return best;
    }
};

} // namespace

TEST(Strategy, EachProposesValidDistinctNewConfigsWithinBudget) {
    for (const std::string &name : strategy_names()) {
        Harness h;
        std::unique_ptr<Strategy> s = make_strategy(name, 11);
        EXPECT_EQ(s->name(), name);
        double best = h.run(*s, 40);
        EXPECT_EQ(h.measured.size(), 40u) << name;
        EXPECT_TRUE(std::isfinite(best)) << name;
    }
}

TEST(Strategy, GridEnumeratesEveryValidConfigOnceThenStops) {
    Harness h;
    auto s = make_strategy("grid", 1);
    int64_t valid = 0;
    for (int64_t i = 0; i < h.space.size(); i++)
        valid += h.space.valid(h.space.at(i));
    h.run(*s, 1000, 7);
    EXPECT_EQ(int64_t(h.measured.size()), valid);
    EXPECT_TRUE(s->propose(h.ctx, 3).empty());
}

TEST(Strategy, GuidedStrategiesFindTheOptimumOfASmoothCost) {
    // 162 valid configs; the guided strategies should find the best within 100 trials.
    for (const char *name : {"evolution", "annealing", "model", "bandit"}) {
        Harness h;
        auto s = make_strategy(name, 5);
        EXPECT_EQ(h.run(*s, 100, 4), 1.0) << name;
    }
}

/// The best time a strategy (of this seed) reaches in `trials` measurements (batches of 4) of a
/// wide space: ten knobs of 16 values each (2^40 configs), the time 1 + the distance of each
/// knob from its best value, the features the knobs' indices.
double best_in_wide_space(const std::string &strategy, uint64_t seed, int trials) {
    constexpr int knobs = 10;
    const int best_index[knobs] = {3, 12, 7, 0, 9, 5, 14, 1, 8, 11};
    SearchSpace space("wide");
    for (int k = 0; k < knobs; k++)
        space.add_range("k" + std::to_string(k), 0, 15);
    std::set<std::string> measured;
    ProposalContext ctx{space, [&](const std::string &h) { return measured.count(h) != 0; },
                        [](const Config &c) -> std::optional<std::vector<float>> {
                            return std::vector<float>(c.index.begin(), c.index.end());
                        }};
    std::unique_ptr<Strategy> s = make_strategy(strategy, seed);
    double best = INFINITY;
    for (int done = 0; done < trials;) {
        std::vector<Config> got = s->propose(ctx, std::min(4, trials - done));
        if (got.empty()) break;
        for (const Config &c : got) {
            measured.insert(space.hash(c));
            double ms = 1;
            for (int k = 0; k < knobs; k++)
                ms += std::abs(c.index[size_t(k)] - best_index[k]);
            best = std::min(best, ms);
            s->observe(ctx, c, {tuning_db::Status::ok, ms});
            done++;
        }
    }
    return best;
}

TEST(Strategy, ModelGuidedEvolutionFindsWhatRandomSamplingMisses) {
    // The time is a sum of one term per knob: the model learns the terms from few samples, and
    // its evolution combines parents that are good in different knobs. Means over 4 seeds of the
    // best of 100 trials: random sampling stays far from the optimum (28); the model's earlier
    // pool of random samples and mutations of the 5 best reached 8.0, the evolution 6.25, and
    // 8.25 since every generation also ranks the best config's one-knob neighbours (they take
    // population slots from crossover's parents, which is what pays in this space; on softmax
    // they are what reaches the hand schedule: docs/AUTOTUNE.md).
    double model = 0, random = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        model += best_in_wide_space("model", seed, 100) / 4;
        random += best_in_wide_space("random", seed, 100) / 4;
    }
    std::cout << "[ wide space, best of 100 trials, mean of 4 seeds ] model " << model
              << ", random " << random << "\n";
    EXPECT_LE(model, 8.5);
    EXPECT_GE(random, 20.0) << "the space is too easy to tell the strategies apart";
}

TEST(Strategy, StateRoundTripsThroughJsonAndContinuesTheSameWay) {
    for (const std::string &name : strategy_names()) {
        Harness h;
        auto a = make_strategy(name, 21);
        h.run(*a, 15);
        nlohmann::json state = nlohmann::json::parse(a->state().dump());
        auto b = make_strategy(name, 999); // the seed comes back with the state
        b->restore(state);
        EXPECT_EQ(b->state(), a->state()) << name;
        std::vector<Config> pa = a->propose(h.ctx, 3), pb = b->propose(h.ctx, 3);
        ASSERT_EQ(pa.size(), pb.size()) << name;
        for (size_t i = 0; i < pa.size(); i++)
            EXPECT_EQ(pa[i], pb[i]) << name << " proposal " << i;
    }
}

TEST(Strategy, MalformedStateIsRejectedWithItsFieldName) {
    auto s = make_strategy("evolution", 1);
    try {
        s->restore(nlohmann::json{{"rng", "x"}});
        FAIL() << "no error";
    } catch (const RuntimeError &e) {
        EXPECT_STREQ(e.what(), "strategy state: 'rng' is not a saved generator state");
    }
    auto g = make_strategy("grid", 1);
    try {
        g->restore(nlohmann::json::object());
        FAIL() << "no error";
    } catch (const RuntimeError &e) {
        EXPECT_STREQ(e.what(), "strategy state of 'grid' misses the field 'next'");
    }
}

TEST(Strategy, UnknownNameListsTheStrategies) {
    try {
        make_strategy("hill", 1);
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "unknown strategy 'hill'; choose one of: random, grid, evolution, "
                               "annealing, model, bandit");
    }
}

TEST(CostModel, RanksByTheLearnedFunction) {
    // score = -(x0 - 3)^2: the model should rank x0 = 3 above x0 = 0 and 6.
    std::vector<std::vector<float>> rows;
    std::vector<float> scores;
    for (int i = 0; i < 40; i++) {
        float x = float(i % 7), y = float(i % 3);
        rows.push_back({x, y});
        scores.push_back(-(x - 3) * (x - 3));
    }
    CostModel m;
    m.fit(rows, scores);
    std::vector<float> p = m.predict({{0, 1}, {3, 1}, {6, 1}});
    ASSERT_EQ(p.size(), 3u);
    EXPECT_GT(p[1], p[0]);
    EXPECT_GT(p[1], p[2]);
}
