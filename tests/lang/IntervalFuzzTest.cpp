// Fuzzes bounds_of_expr against ExprEvaluator: every value an expression takes at points sampled
// inside the variables' intervals must lie inside the computed interval, and single-use monotone
// expressions (affine ones among them) must get exact bounds.
//
// Expressions come from the shared generator (RandomExpr.h): int32 at the top most of the time,
// sometimes a narrow, unsigned or 64-bit type, with casts, selects, lets and (in some iterations)
// vectors of four lanes. Int32 arithmetic is assumed not to overflow (see Interval.h), so the
// oracle is exact integer arithmetic: expressions and bounds are evaluated again with int32
// widened to int64, and a sample whose int32 value differs from its int64 value is skipped and
// counted (the generator keeps magnitudes small, so there are few).
//
// Knobs: KILN_FUZZ_ITERATIONS (expressions per test), KILN_FUZZ_SECONDS (a time cap per test,
// FuzzBudget.h) and KILN_FUZZ_SEED. Iteration i of seed s
// uses the seed s + i, so a failure is reproduced by that seed and one iteration.
#include "lang/Interval.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>

#include "lang/Error.h"
#include "lang/ExprEvaluator.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "tests/lang/FuzzBudget.h"
#include "tests/lang/RandomExpr.h"

namespace kiln {
namespace {

uint64_t env_or(const char *name, uint64_t fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

struct FuzzConfig {
    uint64_t seed;
    uint64_t iterations;
};

FuzzConfig fuzz_config(uint64_t default_seed) {
    return {env_or("KILN_FUZZ_SEED", default_seed), env_or("KILN_FUZZ_ITERATIONS", 10000)};
}

std::string reproducer(const char *test, uint64_t iteration_seed) {
    std::ostringstream s;
    s << "KILN_FUZZ_SEED=" << iteration_seed
      << " KILN_FUZZ_ITERATIONS=1 build/tests/kiln_lang_tests --gtest_filter=IntervalFuzz." << test;
    return s.str();
}

/// Rewrites int32 to int64 throughout, so that evaluation follows exact integer arithmetic for
/// the value ranges the fuzzers use.
class WidenInt32 : public IRMutator {
    using IRMutator::visit;
    static Type widen(Type t) { return t.element_of() == Int(32) ? Int(64, t.lanes) : t; }
    Expr visit(const IntImm *op) override {
        if (op->type != Int(32)) return IRMutator::visit(op);
        return IntImm::make(Int(64), op->value);
    }
    Expr visit(const Variable *op) override {
        if (op->type.element_of() != Int(32)) return IRMutator::visit(op);
        return Variable::make(widen(op->type), op->name);
    }
    Expr visit(const Cast *op) override { return cast(widen(op->type), mutate(op->value)); }
};

Expr widen(const Expr &e) {
    return e.defined() ? WidenInt32().mutate(e) : e;
}

std::string describe_point(const std::map<std::string, int64_t> &vars) {
    std::ostringstream s;
    for (const auto &[name, v] : vars)
        s << name << "=" << v << " ";
    return s.str();
}

std::string describe_scope(const Scope &scope) {
    std::ostringstream s;
    for (const auto &[name, i] : scope)
        s << name << " in " << i << "; ";
    return s.str();
}

const std::vector<std::string> var_names = {"x", "y", "z"};

struct Stats {
    uint64_t expressions = 0, samples = 0, overflowed = 0, lower_bounded = 0, upper_bounded = 0;
    uint64_t bound_overflowed = 0; ///< cases skipped because an exact end left int32
    std::optional<uint64_t> exact; ///< both ends bounded and attained by a sample, if counted
};

std::ostream &operator<<(std::ostream &s, const Stats &st) {
    s << st.expressions << " expressions, " << st.samples << " samples checked, " << st.overflowed
      << " overflowing samples and " << st.bound_overflowed
      << " cases with ends outside int32 skipped; lower end bounded "
      << 100.0 * st.lower_bounded / std::max<uint64_t>(st.expressions, 1) << "%, upper "
      << 100.0 * st.upper_bounded / std::max<uint64_t>(st.expressions, 1) << "%";
    if (st.exact) {
        s << ", both ends attained by a sample "
          << 100.0 * *st.exact / std::max<uint64_t>(st.expressions, 1) << "%";
    }
    return s;
}

/// The context of one check, printed with any failure.
struct Trial {
    Trial(const char *test, const FuzzConfig &config, uint64_t iteration)
        : test(test), seed(config.seed), iteration(iteration),
          iteration_seed(config.seed + iteration) {}

    const char *test;
    uint64_t seed, iteration, iteration_seed;
    Expr e;
    Scope scope;
    Interval bounds;

    std::string describe() const {
        std::ostringstream s;
        s << "seed " << seed << ", iteration " << iteration << "\n  expression: " << e
          << "\n  scope: " << describe_scope(scope) << "\n  computed interval: " << bounds
          << "\n  reproduce: " << reproducer(test, iteration_seed);
        return s.str();
    }
};

/// Evaluates an end of the computed interval given the free variables outside the scope; it must
/// not mention the scope's variables.
std::optional<int64_t> eval_end(const Trial &trial, const Expr &end,
                                const std::map<std::string, int64_t> &outer) {
    if (!end.defined()) return std::nullopt;
    try {
        ExprEvaluator eval;
        for (const auto &[name, v] : outer)
            eval.bind(name, Value::make_int(Int(64), v));
        return eval.eval(widen(end)).as_int();
    } catch (const InternalError &err) {
        ADD_FAILURE() << "an end of the interval does not evaluate with " << describe_point(outer)
                      << "bound: " << err.what() << "\n  " << trial.describe();
        return std::nullopt;
    }
}

/// Checks that every lane of e at the point lies within the evaluated ends. Returns the exact
/// values of the lanes that did not overflow int32.
std::vector<int64_t> check_point(const Trial &trial, const Expr &wide_e,
                                 const std::map<std::string, int64_t> &point,
                                 std::optional<int64_t> lo, std::optional<int64_t> hi,
                                 Stats &stats) {
    ExprEvaluator narrow_eval, wide_eval;
    for (const auto &[name, v] : point) {
        narrow_eval.bind(name, Value::make_int(Int(32), v));
        wide_eval.bind(name, Value::make_int(Int(64), v));
    }
    std::vector<Value> narrow = narrow_eval.eval_lanes(trial.e),
                       wide = wide_eval.eval_lanes(wide_e);
    std::vector<int64_t> values;
    for (size_t lane = 0; lane < narrow.size(); lane++) {
        int64_t v = wide[lane].as_int();
        if (narrow[lane].as_int() != v) {
            stats.overflowed++;
            continue;
        }
        stats.samples++;
        values.push_back(v);
        if ((lo && v < *lo) || (hi && v > *hi)) {
            ADD_FAILURE() << "value outside the computed interval: " << v << " in lane " << lane
                          << " at " << describe_point(point) << "(interval evaluates to ["
                          << (lo ? std::to_string(*lo) : "-inf") << ", "
                          << (hi ? std::to_string(*hi) : "+inf") << "])\n  " << trial.describe();
            break;
        }
    }
    return values;
}

int pick(std::mt19937_64 &rng, int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
}

/// A random expression from the shared generator: int32 three times in four, else another integer
/// type; vectors of four lanes one time in five.
Expr random_expr(std::mt19937_64 &rng, int64_t var_limit) {
    test::RandomExprOptions options;
    options.var_limit = var_limit;
    options.lanes = pick(rng, 0, 4) == 0 ? 4 : 1;
    test::RandomExprGenerator gen(rng, var_names, options);
    Type t = pick(rng, 0, 3) == 0 ? gen.random_type() : Int(32);
    return gen.int_expr(t, pick(rng, 1, 4));
}

// ---------------------------------------------------------------------------------------------

TEST(IntervalFuzz, ConstantIntervalsContainEverySampledValue) {
    FuzzConfig config = fuzz_config(20240611);
    Stats stats;
    stats.exact = 0;
    test::FuzzBudget budget;
    uint64_t it = 0;
    for (; it < config.iterations && !HasFailure() && !budget.spent(); it++) {
        std::mt19937_64 rng(config.seed + it);
        Trial trial("ConstantIntervalsContainEverySampledValue", config, it);
        trial.e = random_expr(rng, 50);
        std::map<std::string, std::pair<int, int>> ranges;
        for (const auto &name : var_names) {
            int a = pick(rng, -50, 50), b = pick(rng, -50, 50);
            ranges[name] = {std::min(a, b), std::max(a, b)};
            trial.scope[name] = Interval(std::min(a, b), std::max(a, b));
        }
        trial.bounds = bounds_of_expr(trial.e, trial.scope);
        auto lo = eval_end(trial, trial.bounds.min, {});
        auto hi = eval_end(trial, trial.bounds.max, {});
        Expr wide_e = widen(trial.e);
        std::optional<int64_t> seen_lo, seen_hi;
        // The corners first (where the extremes of monotonic expressions are), then random points.
        for (int s = 0; s < 8 + 24 && !HasFailure(); s++) {
            std::map<std::string, int64_t> point;
            for (size_t k = 0; k < var_names.size(); k++) {
                auto [a, b] = ranges[var_names[k]];
                point[var_names[k]] = s < 8 ? ((s >> k) & 1 ? b : a) : pick(rng, a, b);
            }
            for (int64_t v : check_point(trial, wide_e, point, lo, hi, stats)) {
                seen_lo = seen_lo ? std::min(*seen_lo, v) : v;
                seen_hi = seen_hi ? std::max(*seen_hi, v) : v;
            }
        }
        stats.expressions++;
        stats.lower_bounded += lo.has_value();
        stats.upper_bounded += hi.has_value();
        *stats.exact += lo && hi && seen_lo == lo && seen_hi == hi;
    }
    budget.report("constant ranges", it, config.iterations);
    std::cout << "[ interval fuzz, constant ranges ] " << stats << "\n";
}

TEST(IntervalFuzz, SymbolicIntervalsContainEverySampledValue) {
    FuzzConfig config = fuzz_config(977);
    Stats stats;
    test::FuzzBudget budget;
    uint64_t it = 0;
    for (; it < config.iterations && !HasFailure() && !budget.spent(); it++) {
        std::mt19937_64 rng(config.seed + it);
        Trial trial("SymbolicIntervalsContainEverySampledValue", config, it);
        // With t in [-10, 10] the variables stay within [-70, 70].
        trial.e = random_expr(rng, 70);
        // Each variable ranges over [a*t + b, a*t + b + w] or [a*t + b, max(a*t + b, c*t + d)]
        // for a t outside the scope, as a loop nested in a loop over t would.
        Expr t = Variable::make(Int(32), "t");
        for (const auto &name : var_names) {
            Expr lo = t * pick(rng, -3, 3) + pick(rng, -20, 20);
            Expr hi = pick(rng, 0, 2) ? lo + pick(rng, 0, 15) : max(lo, t * pick(rng, -3, 3) + 5);
            trial.scope[name] = Interval(lo, hi);
        }
        trial.bounds = bounds_of_expr(trial.e, trial.scope);
        // The same interval arithmetic in int64 gives the exact values of the ends, to tell when
        // they leave int32 (outside the assumption, see Interval.h).
        Scope wide_scope;
        for (const auto &[name, i] : trial.scope) {
            wide_scope[name] = Interval(widen(i.min), widen(i.max));
        }
        Interval exact = bounds_of_expr(widen(trial.e), wide_scope);
        Expr wide_e = widen(trial.e);
        for (int tries = 0; tries < 4 && !HasFailure(); tries++) {
            std::map<std::string, int64_t> outer = {{"t", pick(rng, -10, 10)}};
            auto lo = eval_end(trial, trial.bounds.min, outer);
            auto hi = eval_end(trial, trial.bounds.max, outer);
            auto exact_lo = eval_end(trial, exact.min, outer);
            auto exact_hi = eval_end(trial, exact.max, outer);
            bool is_int32 = trial.e.type().element_of() == Int(32);
            if (is_int32 &&
                ((exact_lo && *exact_lo < INT32_MIN) || (exact_hi && *exact_hi > INT32_MAX))) {
                stats.bound_overflowed++;
                continue;
            }
            std::map<std::string, std::pair<int64_t, int64_t>> ranges;
            for (const auto &name : var_names) {
                const Interval &i = trial.scope[name];
                ranges[name] = {*eval_end(trial, i.min, outer), *eval_end(trial, i.max, outer)};
            }
            for (int s = 0; s < 8 + 8 && !HasFailure(); s++) {
                std::map<std::string, int64_t> point = outer;
                for (size_t k = 0; k < var_names.size(); k++) {
                    auto [a, b] = ranges[var_names[k]];
                    point[var_names[k]] = s < 8 ? ((s >> k) & 1 ? b : a)
                                                : std::uniform_int_distribution<int64_t>(a, b)(rng);
                }
                check_point(trial, wide_e, point, lo, hi, stats);
            }
        }
        stats.expressions++;
        stats.lower_bounded += trial.bounds.min.defined();
        stats.upper_bounded += trial.bounds.max.defined();
    }
    budget.report("symbolic ranges", it, config.iterations);
    std::cout << "[ interval fuzz, symbolic ranges ] " << stats << "\n";
}

// ---------------------------------------------------------------------------------------------
// Single-use monotone expressions: every variable appears at most once and every operation is
// monotonic in each operand (+, -, multiplication and division by constants, min, max), so the
// extremes lie at corners of the box and interval arithmetic must find them exactly.

class MonotoneGenerator {
public:
    MonotoneGenerator(std::mt19937_64 &rng, bool affine_only)
        : rng(rng), affine_only(affine_only) {}

    Expr random_expr(int depth) {
        if (depth <= 0 || unused.empty() || pick(0, 9) < 2) return leaf();
        switch (pick(0, affine_only ? 3 : 7)) {
        case 0:
            return random_expr(depth - 1) + random_expr(depth - 1);
        case 1:
            return random_expr(depth - 1) - random_expr(depth - 1);
        case 2:
        case 3:
            return random_expr(depth - 1) * Expr(nonzero(-5, 5));
        case 4:
            return random_expr(depth - 1) / Expr(nonzero(-6, 6));
        case 5:
            return min(random_expr(depth - 1), random_expr(depth - 1));
        case 6:
            return max(random_expr(depth - 1), random_expr(depth - 1));
        default:
            return clamp(random_expr(depth - 1), pick(-30, 0), pick(0, 30));
        }
    }

    int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

    std::vector<std::string> used;

private:
    int nonzero(int lo, int hi) {
        int v = pick(lo, hi - 1);
        return v >= 0 ? v + 1 : v;
    }

    Expr leaf() {
        if (unused.empty() || pick(0, 4) == 0) return Expr(pick(-20, 20));
        size_t k = size_t(pick(0, int(unused.size()) - 1));
        std::string name = unused[k];
        unused.erase(unused.begin() + long(k));
        used.push_back(name);
        return Variable::make(Int(32), name);
    }

    std::mt19937_64 &rng;
    bool affine_only;
    std::vector<std::string> unused = {"x", "y", "z", "w"};
};

TEST(IntervalFuzz, SingleUseMonotoneExpressionsGetExactBounds) {
    FuzzConfig config = fuzz_config(4242);
    Stats stats;
    uint64_t symbolic = 0;
    test::FuzzBudget budget;
    uint64_t it = 0;
    for (; it < config.iterations && !HasFailure() && !budget.spent(); it++) {
        std::mt19937_64 rng(config.seed + it);
        MonotoneGenerator gen(rng, pick(rng, 0, 1) == 0);
        Trial trial("SingleUseMonotoneExpressionsGetExactBounds", config, it);
        trial.e = gen.random_expr(gen.pick(1, 5));
        // Half the cases have ends in terms of an outer t (a tile of an outer loop).
        bool is_symbolic = pick(rng, 0, 1) == 0;
        Expr t = Variable::make(Int(32), "t");
        for (const auto &name : gen.used) {
            int a = gen.pick(-50, 50), b = gen.pick(-50, 50);
            Expr lo = Expr(std::min(a, b)), hi = Expr(std::max(a, b));
            if (is_symbolic) {
                int scale = gen.pick(-8, 8);
                lo = t * scale + lo;
                hi = t * scale + hi;
            }
            trial.scope[name] = Interval(lo, hi);
        }
        trial.bounds = bounds_of_expr(trial.e, trial.scope);
        Expr wide_e = widen(trial.e);
        for (int tries = 0; tries < (is_symbolic ? 3 : 1) && !HasFailure(); tries++) {
            std::map<std::string, int64_t> outer;
            if (is_symbolic) outer["t"] = gen.pick(-10, 10);
            auto lo = eval_end(trial, trial.bounds.min, outer);
            auto hi = eval_end(trial, trial.bounds.max, outer);
            if (!lo || !hi) {
                ADD_FAILURE() << "bounds of a single-use monotone expression must be finite\n  "
                              << trial.describe();
                break;
            }
            std::optional<int64_t> seen_lo, seen_hi;
            for (size_t corner = 0; corner < (size_t(1) << gen.used.size()); corner++) {
                std::map<std::string, int64_t> point = outer;
                for (size_t k = 0; k < gen.used.size(); k++) {
                    const Interval &i = trial.scope[gen.used[k]];
                    const Expr &end = (corner >> k) & 1 ? i.max : i.min;
                    point[gen.used[k]] = *eval_end(trial, end, outer);
                }
                for (int64_t v : check_point(trial, wide_e, point, lo, hi, stats)) {
                    seen_lo = seen_lo ? std::min(*seen_lo, v) : v;
                    seen_hi = seen_hi ? std::max(*seen_hi, v) : v;
                }
            }
            if (!seen_lo) continue; // every corner overflowed
            if (seen_lo != lo || seen_hi != hi) {
                ADD_FAILURE() << "bounds are not exact: the corners span [" << *seen_lo << ", "
                              << *seen_hi << "] but the interval evaluates to [" << *lo << ", "
                              << *hi << "] at " << describe_point(outer) << "\n  "
                              << trial.describe();
            }
        }
        stats.expressions++;
        symbolic += is_symbolic;
    }
    budget.report("exact monotone", it, config.iterations);
    std::cout << "[ interval fuzz, exact monotone ] " << stats.expressions << " expressions ("
              << symbolic << " with symbolic ranges), " << stats.samples << " corners checked, "
              << stats.overflowed << " overflowing corners skipped; all bounds exact\n";
}

} // namespace
} // namespace kiln
