#include "autotune/Strategy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "lang/Error.h"

namespace kiln::autotune {

std::unique_ptr<Strategy> make_model_strategy(uint64_t seed); // autotune/ModelStrategy.cpp

namespace detail {

std::string save_rng(const std::mt19937_64 &rng) {
    std::ostringstream s;
    s << rng;
    return s.str();
}

void load_rng(std::mt19937_64 &rng, const std::string &text) {
    std::istringstream s(text);
    s >> rng;
    if (!s) throw RuntimeError("strategy state: 'rng' is not a saved generator state");
}

std::vector<Config> neighbours(const SearchSpace &space, const Config &c) {
    std::vector<Config> out;
    for (size_t k = 0; k < space.knobs().size(); k++) {
        for (int v = 0; v < int(space.knobs()[k].values.size()); v++) {
            if (v == c.index[k]) continue;
            Config n = c;
            n.index[k] = v;
            if (space.valid(n)) out.push_back(std::move(n));
        }
    }
    return out;
}

Config mutate(const SearchSpace &space, const Config &c, std::mt19937_64 &rng) {
    Config m = c;
    const int n = int(space.knobs().size());
    if (n == 0) return m;
    int changes = std::uniform_int_distribution<int>(1, 2)(rng);
    for (int t = 0; t < changes; t++) {
        int k = std::uniform_int_distribution<int>(0, n - 1)(rng);
        int count = int(space.knobs()[k].values.size());
        if (count < 2) continue;
        bool ordered = space.knobs()[k].kind == Knob::Kind::integer;
        if (ordered && std::uniform_int_distribution<int>(0, 2)(rng) > 0) {
            int step = std::uniform_int_distribution<int>(0, 1)(rng) ? 1 : -1;
            m.index[k] = std::clamp(m.index[k] + step, 0, count - 1);
            if (m.index[k] == c.index[k]) m.index[k] = std::clamp(c.index[k] - step, 0, count - 1);
            // A coupled knob steps along, half of the time, in the direction this one moved.
            const int moved = m.index[k] - c.index[k];
            for (int other : space.coupled(k)) {
                if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) continue;
                const int last = int(space.knobs()[size_t(other)].values.size()) - 1;
                m.index[size_t(other)] = std::clamp(m.index[size_t(other)] + moved, 0, last);
            }
        } else {
            int v = std::uniform_int_distribution<int>(0, count - 2)(rng);
            m.index[k] = v >= c.index[k] ? v + 1 : v;
        }
    }
    // A change that breaks a constraint is walked back to a valid config near it (the constraints
    // of the space, not the mutation, decide what is legal).
    if (std::optional<Config> fixed = space.repair(m, rng, 16); fixed && !(*fixed == c))
        return *fixed;
    return m;
}

std::optional<Config> random_new(ProposalContext &ctx, std::mt19937_64 &rng,
                                 const std::vector<std::string> &taken, int tries) {
    for (int t = 0; t < tries; t++) {
        Config c = ctx.universe && !ctx.universe->empty()
                       ? (*ctx.universe)[std::uniform_int_distribution<size_t>(
                             0, ctx.universe->size() - 1)(rng)]
                       : ctx.space.random(rng);
        if (std::optional<Config> fixed = ctx.space.repair(c, rng)) c = *fixed;
        if (!ctx.space.valid(c)) continue;
        std::string h = ctx.space.hash(c);
        if (ctx.known(h) || std::find(taken.begin(), taken.end(), h) != taken.end()) continue;
        return c;
    }
    return std::nullopt;
}

} // namespace detail

namespace {

using detail::load_rng;
using detail::save_rng;

nlohmann::json field(const nlohmann::json &state, const std::string &strategy,
                     const std::string &name) {
    if (!state.is_object() || !state.contains(name))
        throw RuntimeError("strategy state of '" + strategy + "' misses the field '" + name + "'");
    return state[name];
}

/// Accepts a config into a batch when it is valid, unknown and not already in the batch.
bool take(ProposalContext &ctx, const Config &c, std::vector<Config> &batch,
          std::vector<std::string> &hashes) {
    if (!ctx.space.valid(c)) return false;
    std::string h = ctx.space.hash(c);
    if (ctx.known(h) || std::find(hashes.begin(), hashes.end(), h) != hashes.end()) return false;
    batch.push_back(c);
    hashes.push_back(h);
    return true;
}

/// Tops a batch up to n configs with new random ones, or fewer when the space runs out.
void fill_random(ProposalContext &ctx, std::mt19937_64 &rng, int n, std::vector<Config> &batch,
                 std::vector<std::string> &hashes) {
    while (int(batch.size()) < n) {
        auto c = detail::random_new(ctx, rng, hashes);
        if (!c) break;
        take(ctx, *c, batch, hashes);
    }
}

class RandomStrategy : public Strategy {
public:
    explicit RandomStrategy(uint64_t seed) : rng(seed) {}
    std::string name() const override { return "random"; }
    std::vector<Config> propose(ProposalContext &ctx, int n) override {
        std::vector<Config> batch;
        std::vector<std::string> hashes;
        fill_random(ctx, rng, n, batch, hashes);
        return batch;
    }
    void observe(ProposalContext &, const Config &, const Outcome &) override {}
    nlohmann::json state() const override { return {{"rng", save_rng(rng)}}; }
    void restore(const nlohmann::json &s) override {
        load_rng(rng, field(s, name(), "rng").get<std::string>());
    }

private:
    std::mt19937_64 rng;
};

class GridStrategy : public Strategy {
public:
    std::string name() const override { return "grid"; }
    std::vector<Config> propose(ProposalContext &ctx, int n) override {
        std::vector<Config> batch;
        std::vector<std::string> hashes;
        if (ctx.universe) {
            while (int(batch.size()) < n && next < int64_t(ctx.universe->size()))
                take(ctx, (*ctx.universe)[size_t(next++)], batch, hashes);
            return batch;
        }
        const int64_t size = ctx.space.size();
        // Bounded work per call, so a space full of invalid configs cannot stall the tuner.
        for (int64_t steps = 0; int(batch.size()) < n && next < size && steps < 1000000; steps++)
            take(ctx, ctx.space.at(next++), batch, hashes);
        return batch;
    }
    void observe(ProposalContext &, const Config &, const Outcome &) override {}
    nlohmann::json state() const override { return {{"next", next}}; }
    void restore(const nlohmann::json &s) override {
        next = field(s, name(), "next").get<int64_t>();
    }

private:
    int64_t next = 0;
};

/// The best configs seen, fastest first, at most `capacity`.
struct Elite {
    size_t capacity = 16;
    std::vector<std::pair<Config, double>> members;

    void add(const Config &c, double ms) {
        for (auto &m : members) {
            if (m.first == c) {
                m.second = std::min(m.second, ms);
                return;
            }
        }
        members.emplace_back(c, ms);
        std::stable_sort(members.begin(), members.end(),
                         [](const auto &a, const auto &b) { return a.second < b.second; });
        if (members.size() > capacity) members.resize(capacity);
    }
    nlohmann::json to_json() const {
        nlohmann::json j = nlohmann::json::array();
        for (const auto &[c, ms] : members)
            j.push_back({{"config", c.index}, {"ms", ms}});
        return j;
    }
    void from_json(const nlohmann::json &j) {
        members.clear();
        for (const auto &m : j)
            members.emplace_back(Config{m.at("config").get<std::vector<int>>()},
                                 m.at("ms").get<double>());
    }
};

class EvolutionStrategy : public Strategy {
public:
    explicit EvolutionStrategy(uint64_t seed) : rng(seed) {}
    std::string name() const override { return "evolution"; }
    std::vector<Config> propose(ProposalContext &ctx, int n) override {
        std::vector<Config> batch;
        std::vector<std::string> hashes;
        const auto &pop = population.members;
        for (int attempt = 0; int(batch.size()) < n && attempt < 50 * n; attempt++) {
            if (pop.size() < 4) break;
            const Config &a = tournament(), &b = tournament();
            Config child = a;
            for (size_t k = 0; k < child.index.size(); k++) {
                if (std::uniform_int_distribution<int>(0, 1)(rng)) child.index[k] = b.index[k];
            }
            if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.7 || child == a)
                child = detail::mutate(ctx.space, child, rng);
            take(ctx, child, batch, hashes);
        }
        fill_random(ctx, rng, n, batch, hashes);
        return batch;
    }
    void observe(ProposalContext &, const Config &c, const Outcome &o) override {
        if (o.ok()) population.add(c, o.median_ms);
    }
    nlohmann::json state() const override {
        return {{"rng", save_rng(rng)}, {"population", population.to_json()}};
    }
    void restore(const nlohmann::json &s) override {
        load_rng(rng, field(s, name(), "rng").get<std::string>());
        population.from_json(field(s, name(), "population"));
    }

private:
    const Config &tournament() {
        const auto &pop = population.members;
        size_t best = pop.size();
        for (int t = 0; t < 3; t++) {
            size_t i = std::uniform_int_distribution<size_t>(0, pop.size() - 1)(rng);
            best = std::min(best, i); // members are sorted fastest first
        }
        return pop[best].first;
    }

    std::mt19937_64 rng;
    Elite population;
};

class AnnealingStrategy : public Strategy {
public:
    explicit AnnealingStrategy(uint64_t seed) : rng(seed) {}
    std::string name() const override { return "annealing"; }
    std::vector<Config> propose(ProposalContext &ctx, int n) override {
        std::vector<Config> batch;
        std::vector<std::string> hashes;
        if (current) {
            for (int attempt = 0; int(batch.size()) < n && attempt < 50 * n; attempt++)
                take(ctx, detail::mutate(ctx.space, *current, rng), batch, hashes);
        }
        fill_random(ctx, rng, n, batch, hashes);
        return batch;
    }
    void observe(ProposalContext &, const Config &c, const Outcome &o) override {
        if (!o.ok()) return;
        temperature = std::max(0.01, temperature * 0.95);
        if (!current || o.median_ms <= current_ms) {
            current = c;
            current_ms = o.median_ms;
            return;
        }
        double worse = (o.median_ms - current_ms) / current_ms;
        if (std::uniform_real_distribution<double>(0, 1)(rng) < std::exp(-worse / temperature)) {
            current = c;
            current_ms = o.median_ms;
        }
    }
    nlohmann::json state() const override {
        nlohmann::json j = {{"rng", save_rng(rng)}, {"temperature", temperature}};
        if (current) j["current"] = {{"config", current->index}, {"ms", current_ms}};
        return j;
    }
    void restore(const nlohmann::json &s) override {
        load_rng(rng, field(s, name(), "rng").get<std::string>());
        temperature = field(s, name(), "temperature").get<double>();
        current.reset();
        if (s.contains("current")) {
            current = Config{s["current"].at("config").get<std::vector<int>>()};
            current_ms = s["current"].at("ms").get<double>();
        }
    }

private:
    std::mt19937_64 rng;
    double temperature = 0.3; ///< relative slowdown accepted with probability 1/e at the start
    std::optional<Config> current;
    double current_ms = 0;
};

class BanditStrategy : public Strategy {
public:
    explicit BanditStrategy(uint64_t seed) : rng(seed) {
        const char *names[] = {"random", "evolution", "annealing", "model"};
        for (int i = 0; i < 4; i++)
            arms.push_back({make_strategy(names[i], seed * 31 + uint64_t(i) + 1), 0, 0});
    }
    std::string name() const override { return "bandit"; }
    std::vector<Config> propose(ProposalContext &ctx, int n) override {
        std::vector<Config> batch;
        std::vector<std::string> hashes;
        // The configs of this batch are known to the arms asked after the first; everything else
        // (features, universe, the database's prior rows for the model arm) is the tuner's.
        ProposalContext inner = ctx;
        inner.known = [&](const std::string &h) {
            return ctx.known(h) || std::find(hashes.begin(), hashes.end(), h) != hashes.end();
        };
        for (int attempt = 0; int(batch.size()) < n && attempt < 4 * n + 8; attempt++) {
            size_t arm = choose();
            std::vector<Config> got = arms[arm].strategy->propose(inner, 1);
            if (got.empty()) {
                arms[arm].plays++; // an arm that has nothing to offer loses its turn
                continue;
            }
            if (take(ctx, got[0], batch, hashes)) {
                arms[arm].plays++;
                pending[hashes.back()] = int(arm);
            }
        }
        return batch;
    }
    void observe(ProposalContext &ctx, const Config &c, const Outcome &o) override {
        std::string h = ctx.space.hash(c);
        auto it = pending.find(h);
        if (o.ok() && o.median_ms < best_ms) {
            best_ms = o.median_ms;
            if (it != pending.end()) arms[it->second].wins++;
        }
        if (it != pending.end()) pending.erase(it);
        for (Arm &a : arms)
            a.strategy->observe(ctx, c, o);
    }
    nlohmann::json state() const override {
        nlohmann::json j = {
            {"rng", save_rng(rng)},
            {"best_ms", std::isfinite(best_ms) ? nlohmann::json(best_ms) : nlohmann::json(nullptr)},
            {"pending", pending}};
        for (const Arm &a : arms)
            j["arms"][a.strategy->name()] = {
                {"plays", a.plays}, {"wins", a.wins}, {"state", a.strategy->state()}};
        return j;
    }
    void restore(const nlohmann::json &s) override {
        load_rng(rng, field(s, name(), "rng").get<std::string>());
        nlohmann::json b = field(s, name(), "best_ms");
        best_ms = b.is_null() ? std::numeric_limits<double>::infinity() : b.get<double>();
        pending = field(s, name(), "pending").get<std::map<std::string, int>>();
        nlohmann::json a = field(s, name(), "arms");
        for (Arm &arm : arms) {
            const nlohmann::json &j = field(a, name(), arm.strategy->name());
            arm.plays = j.at("plays").get<int64_t>();
            arm.wins = j.at("wins").get<int64_t>();
            arm.strategy->restore(j.at("state"));
        }
    }

private:
    struct Arm {
        std::unique_ptr<Strategy> strategy;
        int64_t plays = 0, wins = 0;
    };

    size_t choose() {
        int64_t total = 0;
        for (const Arm &a : arms)
            total += a.plays;
        size_t best = 0;
        double best_score = -1;
        for (size_t i = 0; i < arms.size(); i++) {
            if (arms[i].plays == 0) return i;
            double score = double(arms[i].wins) / double(arms[i].plays) +
                           std::sqrt(2.0 * std::log(double(total)) / double(arms[i].plays));
            // Ties (common early on) go to a random arm.
            score += std::uniform_real_distribution<double>(0, 1e-6)(rng);
            if (score > best_score) {
                best_score = score;
                best = i;
            }
        }
        return best;
    }

    std::mt19937_64 rng;
    std::vector<Arm> arms;
    std::map<std::string, int> pending; ///< config hash -> arm that proposed it
    double best_ms = std::numeric_limits<double>::infinity();
};

} // namespace

const std::vector<std::string> &strategy_names() {
    static const std::vector<std::string> names{"random",    "grid",  "evolution",
                                                "annealing", "model", "bandit"};
    return names;
}

std::unique_ptr<Strategy> make_strategy(const std::string &name, uint64_t seed) {
    if (name == "random") return std::make_unique<RandomStrategy>(seed);
    if (name == "grid") return std::make_unique<GridStrategy>();
    if (name == "evolution") return std::make_unique<EvolutionStrategy>(seed);
    if (name == "annealing") return std::make_unique<AnnealingStrategy>(seed);
    if (name == "model") return make_model_strategy(seed);
    if (name == "bandit") return std::make_unique<BanditStrategy>(seed);
    std::string names;
    for (const std::string &n : strategy_names())
        names += (names.empty() ? "" : ", ") + n;
    throw CompileError("unknown strategy '" + name + "'; choose one of: " + names);
}

} // namespace kiln::autotune
