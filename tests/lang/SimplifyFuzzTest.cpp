// Checks the simplifier against ExprEvaluator on random expressions: the simplified expression
// must evaluate exactly like the original at random points. Soundness alone would let a
// simplifier that returns its input pass, so the fuzzers check power too: each run must remove a
// share of all nodes, patterns that simplify away (a - a, a + 0, min(a, a), (a + c1) + c2, ...)
// must be removed case by case, and expressions whose variables are all bound to constants must
// fold to one constant.
//
// Variables are int32 in [-100, 100] (or inside random bounds given to the simplifier). The
// generator (RandomExpr.h) keeps every int32/int64 subexpression below 2^24 in magnitude for such
// values, because the simplifier assumes that those types do not overflow; narrow and unsigned
// types get any value and must be simplified exactly under wrapping.
//
// KILN_FUZZ_ITERATIONS scales a run (the default is quick enough for CI), KILN_FUZZ_SECONDS caps
// its time (FuzzBudget.h) and KILN_FUZZ_SEED changes its seed. Iteration i uses seed + i, so a
// failure reproduces with KILN_FUZZ_SEED set to that sum and one iteration.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <sstream>

#include "lang/Error.h"
#include "lang/ExprEvaluator.h"
#include "lang/IREquality.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"
#include "tests/lang/FuzzBudget.h"
#include "tests/lang/RandomExpr.h"

namespace kiln {
namespace {

const std::vector<std::string> kVars = {"x", "y", "z", "w"};
constexpr int64_t kVarLimit = 100;
constexpr int kPointsPerExpr = 6;

uint64_t env_or(const char *name, uint64_t fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

struct FuzzRun {
    uint64_t seed;
    uint64_t iterations;
};

FuzzRun fuzz_run(uint64_t default_seed, uint64_t default_iterations) {
    return {env_or("KILN_FUZZ_SEED", default_seed),
            env_or("KILN_FUZZ_ITERATIONS", default_iterations)};
}

std::string test_name() {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->test_suite_name()) + "." + info->name();
}

/// The line of a failure message that reruns iteration `iteration` of the current test alone.
std::string reproducer(uint64_t seed, uint64_t iteration) {
    std::ostringstream s;
    s << "\n  reproduce:  KILN_FUZZ_SEED=" << seed + iteration
      << " KILN_FUZZ_ITERATIONS=1 build/tests/kiln_lang_tests --gtest_filter=" << test_name();
    return s.str();
}

struct Stats {
    uint64_t expressions = 0, points = 0, to_constant = 0, nodes_before = 0, nodes_after = 0;
};

class NodeCounter : public IRVisitor {
public:
    size_t count = 0;
    void include_expr(const Expr &e) { include(e); }

protected:
#define EXPR_NODE(Name)                                                                            \
    void visit(const Name *op) override {                                                          \
        count++;                                                                                   \
        IRVisitor::visit(op);                                                                      \
    }
#include "lang/IRNodes.def"
};

size_t count_nodes(const Expr &e) {
    NodeCounter c;
    c.include_expr(e);
    return c.count;
}

struct Sample {
    std::map<std::string, int64_t> values;
    std::string to_string() const {
        std::ostringstream s;
        for (const auto &[name, v] : values)
            s << name << "=" << v << " ";
        return s.str();
    }
};

// Simplifies e, evaluates both at the points and reports the first disagreement, with what is
// needed to reproduce it.
::testing::AssertionResult agrees(const Expr &e,
                                  const std::map<std::string, ConstantBounds> &bounds,
                                  const std::vector<Sample> &points, uint64_t seed,
                                  uint64_t iteration, Stats &stats) {
    auto failure = [&](const std::string &what, const Expr &simplified, const Sample *p) {
        std::ostringstream bounds_text;
        for (const auto &[name, b] : bounds) {
            bounds_text << name << " in [" << *b.min << ", " << *b.max << "] ";
        }
        return ::testing::AssertionFailure()
               << what << "\n  seed " << seed << ", iteration " << iteration
               << "\n  original:   " << e << "\n  simplified: " << simplified
               << "\n  bounds:     " << bounds_text.str()
               << "\n  values:     " << (p ? p->to_string() : "(none)")
               << reproducer(seed, iteration);
    };
    Expr s;
    try {
        s = simplify(e, bounds);
    } catch (const InternalError &err) {
        return failure(std::string("simplify threw: ") + err.what(), Expr(), nullptr);
    }
    if (s.type() != e.type()) return failure("simplify changed the type", s, nullptr);
    stats.expressions++;
    stats.to_constant += is_const(s);
    stats.nodes_before += count_nodes(e);
    stats.nodes_after += count_nodes(s);
    for (const Sample &p : points) {
        ExprEvaluator ev;
        for (const auto &[name, v] : p.values)
            ev.bind(name, Value::make_int(Int(32), v));
        std::vector<Value> want = ev.eval_lanes(e), got;
        try {
            got = ev.eval_lanes(s);
        } catch (const InternalError &err) {
            return failure(std::string("evaluating the simplified expression threw: ") + err.what(),
                           s, &p);
        }
        stats.points++;
        for (size_t lane = 0; lane < want.size(); lane++) {
            if (want[lane] == got[lane]) continue;
            std::ostringstream what;
            what << "lane " << lane << ": original gives " << want[lane] << ", simplified gives "
                 << got[lane];
            return failure(what.str(), s, &p);
        }
    }
    return ::testing::AssertionSuccess();
}

void report(const char *what, const FuzzRun &run, const Stats &stats) {
    double before = stats.expressions ? double(stats.nodes_before) / stats.expressions : 0;
    double after = stats.expressions ? double(stats.nodes_after) / stats.expressions : 0;
    std::printf("[ simplify fuzz, %s ] seed %llu: %llu expressions, %llu points checked, "
                "%llu simplified to a constant; %.1f nodes on average before, %.1f after\n",
                what, (unsigned long long)run.seed, (unsigned long long)stats.expressions,
                (unsigned long long)stats.points, (unsigned long long)stats.to_constant, before,
                after);
}

// Power, not only soundness: over a run of at least this many expressions, the simplifier must
// remove a share of all nodes (an identity simplifier keeps every one). Shorter runs, such as a
// reproducer's single iteration, check soundness only.
constexpr uint64_t kMinExpressionsForTotals = 500;

// Fails unless the run's simplified expressions have at most `max_kept` of the original nodes.
void expect_total_reduction(const char *what, const FuzzRun &run, const Stats &stats,
                            double max_kept) {
    if (stats.expressions < kMinExpressionsForTotals) return;
    double kept = double(stats.nodes_after) / double(stats.nodes_before);
    EXPECT_LE(kept, max_kept) << what << ": the simplifier kept " << stats.nodes_after << " of "
                              << stats.nodes_before << " nodes over " << stats.expressions
                              << " expressions (seed " << run.seed << ")";
}

// Runs `iterations` random expressions; `bounded` also gives the simplifier random bounds of the
// variables and samples only inside them. The simplified expressions must keep at most `max_kept`
// of the nodes in total.
void fuzz(const char *what, uint64_t default_seed, uint64_t default_iterations, int lanes,
          bool bounded, double max_kept) {
    FuzzRun run = fuzz_run(default_seed, default_iterations);
    Stats stats;
    int failures = 0;
    test::FuzzBudget budget;
    uint64_t i = 0;
    for (; i < run.iterations && failures < 3 && !budget.spent(); i++) {
        std::mt19937_64 rng(run.seed + i);
        test::RandomExprOptions options;
        options.var_limit = kVarLimit;
        options.lanes = lanes;
        test::RandomExprGenerator gen(rng, kVars, options);
        int depth = 1 + int(rng() % 5);
        Expr e = gen.int_expr(gen.random_type(), depth);
        std::map<std::string, ConstantBounds> bounds;
        std::map<std::string, std::pair<int64_t, int64_t>> ranges;
        for (const std::string &v : kVars) {
            int64_t lo = -kVarLimit, hi = kVarLimit;
            if (bounded) {
                lo = std::uniform_int_distribution<int64_t>(-kVarLimit, kVarLimit)(rng);
                hi = std::min(kVarLimit, lo + std::uniform_int_distribution<int64_t>(0, 40)(rng));
                bounds[v] = ConstantBounds{lo, hi};
            }
            ranges[v] = {lo, hi};
        }
        std::vector<Sample> points(kPointsPerExpr);
        for (Sample &p : points) {
            for (const auto &[v, r] : ranges) {
                p.values[v] = std::uniform_int_distribution<int64_t>(r.first, r.second)(rng);
            }
        }
        auto result = agrees(e, bounds, points, run.seed, i, stats);
        if (!result) {
            ADD_FAILURE() << result.message();
            failures++;
        }
    }
    budget.report(what, i, run.iterations);
    report(what, run, stats);
    expect_total_reduction(what, run, stats, max_kept);
}

// A random expression `a` inside a pattern that the simplifier must remove: simplifying the
// pattern must give an expression no larger than simplifying what the pattern reduces to by hand
// (a for a + 0, a + (c1 + c2) for (a + c1) + c2), and a constant where the whole pattern is zero.
// Comparing with the simplified reduced form, not with the input, keeps the check exact when the
// simplifier rewrites `a` into something larger (it distributes (x + y) * 10). The pattern always
// has more nodes than its reduced form, so an identity simplifier fails every case.
struct Reducible {
    Expr e;
    Expr reduced;
    const char *pattern;
    bool to_constant = false;
};

Reducible reducible(std::mt19937_64 &rng, test::RandomExprGenerator &gen, int depth) {
    Expr a = gen.int_expr(gen.random_type(), depth);
    Type t = a.type();
    Expr b = gen.int_expr(t, depth);
    auto c = [&] { return int64_t(rng() % 17) - 8; };
    int64_t c1 = c(), c2 = c(), c3 = c();
    auto k = [&](int64_t v) { return make_const(t, v); };
    const int64_t d = 1 + int64_t(rng() % 9);
    const Expr x = gen.int_expr(t, 0);
    int pattern = int(rng() % 14);
    switch (pattern) {
    case 0:
        return {Sub::make(a, a), make_zero(t), "a - a", true};
    case 1:
        return {Mul::make(Sub::make(a, a), b), make_zero(t), "(a - a) * b", true};
    case 2:
        return {Add::make(a, make_zero(t)), a, "a + 0"};
    case 3:
        return {Mul::make(a, make_one(t)), a, "a * 1"};
    case 4:
        return {Div::make(a, make_one(t)), a, "a / 1"};
    case 5:
        return {Min::make(a, a), a, "min(a, a)"};
    case 6:
        return {Max::make(a, a), a, "max(a, a)"};
    case 7:
        return {Select::make(const_true(t.lanes), a, b), a, "select(true, a, b)"};
    case 8:
        return {Select::make(const_false(t.lanes), b, a), a, "select(false, b, a)"};
    case 9:
        return {Add::make(Add::make(a, k(c1)), k(c2)), Add::make(a, k(c1 + c2)), "(a + c1) + c2"};
    case 10:
        return {Add::make(a, Mul::make(k(c1), Add::make(k(c2), k(c3)))),
                Add::make(a, k(c1 * (c2 + c3))), "a + c1 * (c2 + c3)"};
    // A leaf (a variable, a constant, a ramp or broadcast of one) for x, and no b: the
    // simplifier may rewrite x % d and x / d of a larger x apart ((w % 6) % 3 is w % 3), and a
    // random b may hold more of x / d; either way the pair no longer matches, though the sum
    // still equals x.
    case 11:
        return {Add::make(Mod::make(x, k(d)), Mul::make(Div::make(x, k(d)), k(d))), x,
                "x % d + (x / d) * d"};
    case 12:
        return {Sub::make(Mul::make(Div::make(x, k(d)), k(d * (c1 + 9))),
                          Mul::make(Mod::make(x, k(d)), k(-(c1 + 9)))),
                Mul::make(x, k(c1 + 9)), "(x / d) * (d k) - (x % d) * -k, k > 0"};
    default:
        return {Add::make(a, Sub::make(b, b)), a, "a + (b - b)"};
    }
}

// Checks that the simplifier removes the pattern of `reducible` (and stays sound) on `iterations`
// random cases of `lanes` lanes.
void fuzz_reducible(const char *what, uint64_t default_seed, uint64_t default_iterations,
                    int lanes) {
    FuzzRun run = fuzz_run(default_seed, default_iterations);
    Stats stats;
    int failures = 0;
    test::FuzzBudget budget;
    uint64_t i = 0;
    for (; i < run.iterations && failures < 3 && !budget.spent(); i++) {
        std::mt19937_64 rng(run.seed + i);
        test::RandomExprOptions options;
        options.var_limit = kVarLimit;
        options.lanes = lanes;
        test::RandomExprGenerator gen(rng, kVars, options);
        Reducible r = reducible(rng, gen, 1 + int(rng() % 4));
        std::vector<Sample> points(kPointsPerExpr);
        for (Sample &p : points) {
            for (const std::string &v : kVars)
                p.values[v] = std::uniform_int_distribution<int64_t>(-kVarLimit, kVarLimit)(rng);
        }
        auto result = agrees(r.e, {}, points, run.seed, i, stats);
        if (result) {
            Expr s = simplify(r.e), reduced = simplify(r.reduced);
            bool constant = is_const(s);
            bool removed = r.to_constant ? constant : count_nodes(s) <= count_nodes(reduced);
            if (!removed) {
                result = ::testing::AssertionFailure()
                         << "the pattern " << r.pattern << " was not simplified away"
                         << (r.to_constant ? " (a constant expected)" : "") << "\n  seed "
                         << run.seed << ", iteration " << i << "\n  original:   " << r.e
                         << "\n  simplified: " << s << " (" << count_nodes(s) << " nodes)"
                         << "\n  reduced by hand and simplified: " << reduced << " ("
                         << count_nodes(reduced) << " nodes)" << reproducer(run.seed, i);
            }
        }
        if (!result) {
            ADD_FAILURE() << result.message();
            failures++;
        }
    }
    budget.report(what, i, run.iterations);
    report(what, run, stats);
}

// Constant trees over every numeric type with extreme values (type limits, NaN, infinities,
// -0.0, values out of range of the narrower types), so that folding must match the evaluator's
// wrapping, Euclidean division, float32 rounding and saturating float-to-int casts exactly.
class ConstantTreeGenerator {
public:
    explicit ConstantTreeGenerator(std::mt19937_64 &rng) : rng(rng) {}

    Type random_type() {
        static const Type types[] = {Int(8),   Int(16),  Int(32),  Int(64),   UInt(8),
                                     UInt(16), UInt(32), UInt(64), Float(32), Float(64)};
        return types[rng() % 10];
    }

    Expr tree(Type t, int depth) {
        if (depth <= 0 || rng() % 5 == 0) return leaf(t);
        switch (rng() % 9) {
        case 0:
            return Add::make(tree(t, depth - 1), tree(t, depth - 1));
        case 1:
            return Sub::make(tree(t, depth - 1), tree(t, depth - 1));
        case 2:
            return Mul::make(tree(t, depth - 1), tree(t, depth - 1));
        case 3:
            return Div::make(tree(t, depth - 1), tree(t, depth - 1));
        case 4:
            return Mod::make(tree(t, depth - 1), tree(t, depth - 1));
        case 5:
            return Min::make(tree(t, depth - 1), tree(t, depth - 1));
        case 6:
            return Max::make(tree(t, depth - 1), tree(t, depth - 1));
        case 7: {
            Type s = random_type();
            Expr a = tree(s, depth - 1), b = tree(s, depth - 1);
            Expr c = rng() % 2 ? LT::make(a, b) : (rng() % 2 ? EQ::make(a, b) : GE::make(a, b));
            return Select::make(c, tree(t, depth - 1), tree(t, depth - 1));
        }
        default:
            return Cast::make(t, tree(random_type(), depth - 1));
        }
    }

private:
    std::mt19937_64 &rng;

    Expr leaf(Type t) {
        if (t.is_float()) {
            static const double specials[] = {0.0,
                                              -0.0,
                                              1.0,
                                              -1.0,
                                              2.5,
                                              -2.5,
                                              0.1,
                                              1e30,
                                              -1e30,
                                              3e9,
                                              -3e9,
                                              65536,
                                              1e-310,
                                              255.5,
                                              std::numeric_limits<double>::infinity(),
                                              -std::numeric_limits<double>::infinity(),
                                              std::numeric_limits<double>::quiet_NaN()};
            constexpr size_t n = sizeof(specials) / sizeof(specials[0]);
            if (rng() % 3) return make_const(t, specials[rng() % n]);
            return make_const(t, std::uniform_real_distribution<double>(-1e4, 1e4)(rng));
        }
        switch (rng() % 6) {
        case 0:
            return type_min(t);
        case 1:
            return type_max(t);
        case 2:
            return make_const(t, int64_t(rng())); // any bit pattern, wrapped
        default:
            return make_const(t, int64_t(rng() % 33) - 16);
        }
    }
};

TEST(SimplifyFuzz, ConstantExpressionsFoldToTheEvaluatorsValue) {
    FuzzRun run = fuzz_run(3000001, 10000);
    Stats stats;
    int failures = 0;
    test::FuzzBudget budget;
    uint64_t i = 0;
    for (; i < run.iterations && failures < 3 && !budget.spent(); i++) {
        std::mt19937_64 rng(run.seed + i);
        ConstantTreeGenerator gen(rng);
        Expr e = gen.tree(gen.random_type(), 1 + int(rng() % 4));
        auto result = agrees(e, {}, {Sample{}}, run.seed, i, stats);
        if (result && !is_const(simplify(e))) {
            result = ::testing::AssertionFailure()
                     << "did not fold to a constant\n  original:   " << e
                     << "\n  simplified: " << simplify(e) << reproducer(run.seed, i);
        }
        if (!result) {
            ADD_FAILURE() << result.message();
            failures++;
        }
    }
    budget.report("constants", i, run.iterations);
    report("constants", run, stats);
}

TEST(SimplifyFuzz, ScalarExpressionsEvaluateAsBefore) {
    fuzz("scalar", 1, 10000, 1, false, 0.85);
}

TEST(SimplifyFuzz, ScalarExpressionsWithBoundsEvaluateAsBeforeInsideTheBounds) {
    fuzz("scalar, bounded", 1000001, 5000, 1, true, 0.6);
}

TEST(SimplifyFuzz, VectorExpressionsEvaluateAsBeforeInEveryLane) {
    fuzz("vector", 2000001, 20000, 4, false, 0.85);
}

TEST(SimplifyFuzz, ScalarPatternsThatSimplifyAwayGetSmaller) {
    fuzz_reducible("scalar, reducible", 4000001, 3000, 1);
}

TEST(SimplifyFuzz, VectorPatternsThatSimplifyAwayGetSmaller) {
    fuzz_reducible("vector, reducible", 5000001, 10000, 4);
}

TEST(SimplifyFuzz, ExpressionsWithEveryVariableBoundToAConstantFold) {
    // The scalar corpus with every variable bound by an outer let to a constant: nothing is left
    // unknown, so the simplifier must fold the whole expression to one constant.
    FuzzRun run = fuzz_run(6000001, 3000);
    Stats stats;
    int failures = 0;
    test::FuzzBudget budget;
    uint64_t i = 0;
    for (; i < run.iterations && failures < 3 && !budget.spent(); i++) {
        std::mt19937_64 rng(run.seed + i);
        test::RandomExprOptions options;
        options.var_limit = kVarLimit;
        test::RandomExprGenerator gen(rng, kVars, options);
        Expr e = gen.int_expr(gen.random_type(), 1 + int(rng() % 5));
        for (const std::string &v : kVars) {
            int64_t value = std::uniform_int_distribution<int64_t>(-kVarLimit, kVarLimit)(rng);
            e = Let::make(v, make_const(Int(32), value), e);
        }
        auto result = agrees(e, {}, {Sample{}}, run.seed, i, stats);
        if (result && !is_const(simplify(e))) {
            result = ::testing::AssertionFailure()
                     << "did not fold to a constant\n  seed " << run.seed << ", iteration " << i
                     << "\n  original:   " << e << "\n  simplified: " << simplify(e)
                     << reproducer(run.seed, i);
        }
        if (!result) {
            ADD_FAILURE() << result.message();
            failures++;
        }
    }
    budget.report("bound", i, run.iterations);
    report("bound", run, stats);
}

} // namespace
} // namespace kiln
