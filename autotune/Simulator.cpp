#include "autotune/Simulator.h"

#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "autotune/Features.h"
#include "autotune/Strategy.h"
#include "autotune/Tuner.h"
#include "codegen/Target.h"
#include "lang/Error.h"

namespace kiln::autotune {

SimulationReport simulate(const SimulateOptions &opt, std::ostream &out) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator(opt.op);
    std::vector<int64_t> shape = opt.shape.empty() ? op.default_shape : opt.shape;
    // Simulation replays this machine's records (host_target_key below): the host's space.
    SearchSpace space = space_for(op, shape, opt.space, Target::host());
    tuning_db::WorkloadKey wk = workload_key(op, shape);
    space.set_salt(wk.algorithm_hash + "/" + wk.shape);
    tuning_db::Database db = tuning_db::Database::open_existing(opt.db_path);
    int threads = opt.threads > 0 ? opt.threads : default_threads();
    tuning_db::TargetKey tk = host_target_key(threads);
    auto w = db.find_workload(wk);
    auto t = db.find_target(tk);
    if (!w || !t)
        throw RuntimeError("simulate: " + opt.db_path + " has no measurements of " +
                           wk.to_string() + " on " + tk.to_string() +
                           "; run `kiln tune` first (with the same --threads)");

    // The recorded outcome of every config: its best ok time, else its last failure.
    std::map<std::string, Outcome> recorded;
    std::map<int64_t, bool> is_baseline;
    std::map<std::string, Config> config_of;
    for (const tuning_db::Measurement &m : db.history(*w, *t)) {
        // Baselines (the default and hand schedules) are not points of the space.
        auto b = is_baseline.find(m.config_id);
        if (b == is_baseline.end())
            b = is_baseline
                    .emplace(m.config_id, nlohmann::json::parse(db.config(m.config_id).config_json)
                                              .contains("baseline"))
                    .first;
        if (b->second) continue;
        if (!config_of.count(m.config_hash)) {
            try {
                config_of.emplace(m.config_hash, space.from_json(nlohmann::json::parse(
                                                     db.config(m.config_id).config_json)));
            } catch (const CompileError &) {
                continue; // another space (--space) or an older version of it
            }
        }
        auto it = recorded.find(m.config_hash);
        Outcome o{m.status, m.median_ms};
        if (it == recorded.end() ||
            (o.ok() && (!it->second.ok() || o.median_ms < it->second.median_ms)))
            recorded[m.config_hash] = o;
    }
    SimulationReport report;
    report.measured_configs = int64_t(recorded.size());
    for (const auto &[h, o] : recorded) {
        if (o.ok() && (!report.best_known_ms || o.median_ms < *report.best_known_ms))
            report.best_known_ms = o.median_ms;
    }
    if (!report.best_known_ms)
        throw RuntimeError("simulate: no ok measurement of " + wk.to_string() + " in " +
                           opt.db_path);

    // The recorded configs as points of the space, in the space's mixed-radix order.
    std::vector<Config> universe;
    {
        std::map<std::vector<int>, Config> ordered;
        for (const auto &[h, o] : recorded) {
            (void)o;
            auto cfg = config_of.find(h);
            if (cfg != config_of.end()) ordered.emplace(cfg->second.index, cfg->second);
        }
        for (auto &[k, c] : ordered)
            universe.push_back(c);
    }

    std::vector<std::string> names = opt.strategies.empty() ? strategy_names() : opt.strategies;
    FeatureCache features(op, shape, space);
    for (const std::string &name : names) {
        std::unique_ptr<Strategy> strategy = make_strategy(name, opt.seed);
        SimulatedStrategy r;
        r.strategy = name;
        std::set<std::string> seen;
        // Only recorded configs are offered: the others count as known, so strategies skip them
        // as they skip measured configs in a real run.
        ProposalContext ctx{
            space,
            [&](const std::string &h) { return seen.count(h) != 0 || recorded.count(h) == 0; },
            [&](const Config &c) { return features(c); }, &universe};
        int empty = 0;
        while (r.trials < opt.trials && empty < 3) {
            std::vector<Config> batch = strategy->propose(ctx, 4);
            if (batch.empty()) {
                empty++;
                continue;
            }
            empty = 0;
            for (const Config &c : batch) {
                std::string h = space.hash(c);
                seen.insert(h);
                auto it = recorded.find(h);
                if (it == recorded.end()) continue;
                if (r.trials >= opt.trials) break;
                r.trials++;
                const Outcome &o = it->second;
                strategy->observe(ctx, c, o);
                if (o.ok() && (!r.best_ms || o.median_ms < *r.best_ms)) r.best_ms = o.median_ms;
                if (!r.trials_to_95 && r.best_ms && *report.best_known_ms / *r.best_ms >= 0.95)
                    r.trials_to_95 = r.trials;
            }
        }
        report.strategies.push_back(r);
    }

    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "simulation of %s %s from %s: %lld configs measured, best known %.4g ms\n",
                  op.name.c_str(), wk.shape.c_str(), opt.db_path.c_str(),
                  (long long)report.measured_configs, *report.best_known_ms);
    out << buf;
    std::snprintf(buf, sizeof buf, "%-10s %8s %12s %22s\n", "strategy", "trials", "best ms",
                  "trials to 95% of best");
    out << buf;
    for (const SimulatedStrategy &r : report.strategies) {
        std::string reach = r.trials_to_95 ? std::to_string(*r.trials_to_95) : "not reached";
        std::string best = r.best_ms ? std::to_string(*r.best_ms) : "-";
        std::snprintf(buf, sizeof buf, "%-10s %8lld %12s %22s\n", r.strategy.c_str(),
                      (long long)r.trials, best.c_str(), reach.c_str());
        out << buf;
    }
    return report;
}

} // namespace kiln::autotune
