#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/autotune/PlainMatmul.h"
#include "tests/lang/ErrorOf.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "apps/Builtin.h"
#include "apps/Operator.h"
#include "autotune/AutoSpace.h"
#include "autotune/Features.h"
#include "autotune/GeneratorOperator.h"
#include "autotune/SearchSpace.h"
#include "autotune/Strategy.h"
#include "autotune/Templates.h"
#include "codegen/MathCost.h"
#include "codegen/Target.h"
#include "lang/Error.h"
#include "lang/IRVisitor.h"
#include "runtime/kiln_runtime.h"
#include "schedule/ScheduleTrace.h"

using namespace kiln;
using namespace kiln::autotune;
using ::testing::HasSubstr;

namespace {

/// A valid config of the space drawn with this seed, as JSON, for a test to set the knobs it is
/// about (the rest stay whatever the draw gave).
nlohmann::json valid_config(const SearchSpace &s, uint64_t seed) {
    std::mt19937_64 rng(seed);
    Config any;
    do {
        any = s.random(rng);
    } while (!s.valid(any));
    return s.to_json(any);
}

/// A config of conv2d's automatic space (drawn with seed 4) with conv as a register tile of
/// tile_x output channels (vectors of `vector`) by tile_y pixels, the padded input at root and
/// w_packed at `w_packed_at`.
nlohmann::json conv2d_register_tile(const SearchSpace &s, int64_t tile_x, int64_t tile_y,
                                    int64_t vector, const std::string &w_packed_at) {
    nlohmann::json j = valid_config(s, 4);
    j["inner_dim"] = "co";
    j["tile_x"] = tile_x;
    j["outer_x"] = 1;
    j["tile_y"] = tile_y;
    j["vector"] = vector;
    j["conv_at"] = "tile:registers";
    j["padded_at"] = "root";
    j["w_packed_at"] = w_packed_at;
    return j;
}

/// The loops whose name contains `part`: their extents, and how many loops run inside them.
class LoopsNamed : public IRVisitor {
public:
    explicit LoopsNamed(std::string part) : part(std::move(part)) {}
    std::vector<Expr> extents;
    int inside = 0;

protected:
    using IRVisitor::visit;
    void visit(const For *op) override {
        const bool named = op->name.find(part) != std::string::npos;
        if (depth > 0) inside++;
        if (named) extents.push_back(op->extent);
        depth += named;
        IRVisitor::visit(op);
        depth -= named;
    }

private:
    std::string part;
    int depth = 0;
};

SearchSpace small_space() {
    SearchSpace s("small");
    s.add_divisors("split", 12);          // 1 2 3 4 6 12
    s.add_powers_of_two("vector", 4, 16); // 4 8 16
    s.add_range("unroll", 1, 3);          // 1 2 3
    s.add_choice("where", {"inline", "root"});
    s.add_bool("parallel");
    s.add_permutation("order", {"x", "y", "c"});
    s.add_constraint("split * vector <= 48",
                     [](const ConfigView &c) { return c.i("split") * c.i("vector") <= 48; });
    return s;
}

} // namespace

TEST(SearchSpace, KnobsListTheirValues) {
    SearchSpace s = small_space();
    ASSERT_EQ(s.knobs().size(), 6u);
    EXPECT_EQ(s.knobs()[0].values, (std::vector<nlohmann::json>{1, 2, 3, 4, 6, 12}));
    EXPECT_EQ(s.knobs()[1].values, (std::vector<nlohmann::json>{4, 8, 16}));
    EXPECT_EQ(s.knobs()[2].values, (std::vector<nlohmann::json>{1, 2, 3}));
    EXPECT_EQ(s.knobs()[4].values, (std::vector<nlohmann::json>{false, true}));
    // All 6 orders, the given one first.
    EXPECT_EQ(s.knobs()[5].values.size(), 6u);
    EXPECT_EQ(s.knobs()[5].values[0], nlohmann::json({"x", "y", "c"}));
    EXPECT_EQ(s.size(), 6 * 3 * 3 * 2 * 2 * 6);
}

TEST(SearchSpace, ConfigJsonRoundTripsAndViewsAreTyped) {
    SearchSpace s = small_space();
    nlohmann::json j = {{"split", 4},      {"vector", 8},      {"unroll", 2},
                        {"where", "root"}, {"parallel", true}, {"order", {"y", "x", "c"}}};
    Config c = s.from_json(j);
    EXPECT_EQ(s.to_json(c), j);
    ConfigView v(s, c);
    EXPECT_EQ(v.i("split"), 4);
    EXPECT_EQ(v.s("where"), "root");
    EXPECT_TRUE(v.b("parallel"));
    EXPECT_EQ(v.perm("order"), (std::vector<std::string>{"y", "x", "c"}));
    EXPECT_EQ(kiln::test::error_of([&] { v.s("split"); }),
              "config: knob 'split' of space 'small' is not a choice knob");
}

TEST(SearchSpace, BadConfigsAreRejectedWithClearMessages) {
    SearchSpace s = small_space();
    nlohmann::json good = {{"split", 4},      {"vector", 8},      {"unroll", 2},
                           {"where", "root"}, {"parallel", true}, {"order", {"x", "y", "c"}}};
    nlohmann::json bad_value = good;
    bad_value["split"] = 5;
    EXPECT_EQ(kiln::test::error_of([&] { s.from_json(bad_value); }),
              "config: knob 'split' of space 'small' must be one of 1, 2, 3, 4, 6, 12, got 5");
    nlohmann::json unknown = good;
    unknown["tile"] = 3;
    EXPECT_EQ(kiln::test::error_of([&] { s.from_json(unknown); }),
              "config: space 'small' has no knob 'tile'; its knobs are: split, vector, unroll, "
              "where, parallel, order");
    nlohmann::json missing = good;
    missing.erase("where");
    EXPECT_EQ(kiln::test::error_of([&] { s.from_json(missing); }),
              "config for space 'small' misses knob 'where'; give one of: \"inline\", \"root\"");
    nlohmann::json broken = good;
    broken["split"] = 12;
    broken["vector"] = 8;
    EXPECT_EQ(kiln::test::error_of([&] { s.from_json(broken); }),
              "config " + broken.dump() +
                  " breaks the constraint 'split * vector <= 48' of space 'small'");
    EXPECT_EQ(kiln::test::error_of([&] { s.from_json(nlohmann::json::array()); }),
              "config for space 'small' must be a JSON object of knob name -> value, got []");
}

TEST(SearchSpace, BuildingErrorsNameTheKnob) {
    SearchSpace s("t");
    s.add_bool("a");
    EXPECT_EQ(kiln::test::error_of([&] { s.add_bool("a"); }),
              "search space 't': knob 'a' is defined twice");
    EXPECT_EQ(kiln::test::error_of([&] { s.add_range("r", 5, 1); }),
              "search space 't': knob 'r' has no values; widen its range");
    EXPECT_EQ(kiln::test::error_of([&] { s.add_range("r", 1, 5, 0); }),
              "search space 't': knob 'r' needs a positive step, got 0");
}

TEST(SearchSpace, ConstraintsFilterRandomAndEnumeratedConfigs) {
    SearchSpace s = small_space();
    std::mt19937_64 rng(7);
    int valid = 0;
    for (int i = 0; i < 500; i++) {
        Config c = s.random(rng);
        if (s.valid(c)) {
            valid++;
            EXPECT_LE(ConfigView(s, c).i("split") * ConfigView(s, c).i("vector"), 48);
        } else {
            EXPECT_EQ(s.violated(c), "split * vector <= 48");
        }
    }
    EXPECT_GT(valid, 0);
    EXPECT_LT(valid, 500);
    // Enumeration visits every config once.
    std::set<std::string> hashes;
    for (int64_t i = 0; i < s.size(); i++)
        hashes.insert(s.hash(s.at(i)));
    EXPECT_EQ(int64_t(hashes.size()), s.size());
}

// Weights are a prior over a knob's values: random draws follow them (a 4:1 value about 80% of
// the time), repair's redraws too, every value stays reachable, and a space without weights draws
// uniformly. Wrong weights are refused naming the knob.
TEST(SearchSpace, WeightsMakeAValueLikelierWithoutExcludingTheOthers) {
    SearchSpace s("weighted");
    s.add_integers("w", {1, 2, 4, 8});
    s.add_bool("p");
    s.set_weights("w", {1, 1, 4, 2});
    s.set_weights("p", {1, 3});
    std::mt19937_64 rng(11);
    std::map<int64_t, int> w;
    int parallel = 0;
    const int draws = 8000;
    for (int i = 0; i < draws; i++) {
        Config c = s.random(rng);
        w[ConfigView(s, c).i("w")]++;
        parallel += ConfigView(s, c).b("p");
    }
    EXPECT_NEAR(w[4] / double(draws), 0.5, 0.03);
    EXPECT_NEAR(w[8] / double(draws), 0.25, 0.03);
    EXPECT_NEAR(w[1] / double(draws), 0.125, 0.03);
    EXPECT_NEAR(parallel / double(draws), 0.75, 0.03);

    // repair redraws by the weights too: a constraint that forbids w = 4 moves a config there to
    // 8 twice as often as to 1 or 2.
    s.add_constraint("w != 4", [](const ConfigView &c) { return c.i("w") != 4; });
    std::map<int64_t, int> repaired;
    const Config bad = s.from_json({{"w", 8}, {"p", true}});
    for (int i = 0; i < 3000; i++) {
        Config c = bad;
        c.index[0] = 2; // w = 4
        std::optional<Config> fixed = s.repair(c, rng);
        ASSERT_TRUE(fixed);
        repaired[ConfigView(s, *fixed).i("w")]++;
    }
    EXPECT_EQ(repaired.count(4), 0u);
    EXPECT_GT(repaired[8], repaired[1] + repaired[2] / 2);
    EXPECT_GT(repaired[1], 0);

    EXPECT_EQ(kiln::test::error_of([&] {
                  s.set_weights("w", {1, 2});
              }),
              "search space 'weighted': set_weights(\"w\") got 2 weights for its 4 values; give "
              "one per value");
    EXPECT_EQ(kiln::test::error_of([&] {
                  s.set_weights("w", {1, 0, 1, 1});
              }),
              "search space 'weighted': set_weights(\"w\"): the weight of 2 is 0; weights must "
              "be positive finite numbers (a value no draw should reach is a constraint, not a "
              "weight)");
    EXPECT_EQ(kiln::test::error_of([&] { s.set_weights("q", {1}); }),
              "config: space 'weighted' has no knob 'q'; its knobs are: w, p");
}

// The generated space's prior: the natural vector width is the likeliest, a parallel outer loop
// three times as likely as none.
TEST(AutoSpace, NewRunsDrawTheNaturalVectorWidthAndParallelLoopsMostOften) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("matmul");
    SearchSpace s = auto_space(op, {256, 256, 256}, Target::host());
    const Knob &vector = s.knobs()[size_t(s.knob_index("vector"))];
    const Knob &parallel = s.knobs()[size_t(s.knob_index("parallel"))];
    ASSERT_EQ(vector.weights.size(), vector.values.size());
    const int64_t lanes = Target::host().vector_bits / 32;
    for (size_t i = 0; i < vector.values.size(); i++) {
        const int64_t w = vector.values[i].get<int64_t>();
        EXPECT_EQ(vector.weights[i], w == lanes ? 4.0 : w == 2 * lanes ? 2.0 : 1.0) << w;
    }
    EXPECT_EQ(parallel.weights, (std::vector<double>{1.0, 3.0}));
}

// A producer of exponentials that two stages read (softmax's e: its row sum and the output) is
// computed twice when inlined: a new run draws inlining it a quarter as often as each place that
// stores it. Producers without a transcendental (harris's gray, Ix, Iy, read by several stages;
// layernorm's mean and rstd, whose sqrt is one instruction) keep uniform draws.
TEST(AutoSpace, NewRunsRarelyInlineAnExpensiveProducerReadTwice) {
    apps::register_builtin_operators();
    SearchSpace softmax = auto_space(apps::find_operator("softmax"), {64, 64}, Target::host());
    const Knob &e = softmax.knobs()[size_t(softmax.knob_index("e_at"))];
    ASSERT_EQ(e.values.front().get<std::string>(), "inline");
    ASSERT_EQ(e.weights.size(), e.values.size());
    EXPECT_EQ(e.weights.front(), 0.25);
    for (size_t i = 1; i < e.weights.size(); i++)
        EXPECT_EQ(e.weights[i], 1.0) << e.values[i].dump();
    for (const char *name : {"harris", "layernorm", "blur"}) {
        const apps::Operator &op = apps::find_operator(name);
        SearchSpace s = auto_space(op, {64, 64}, Target::host());
        for (const Knob &k : s.knobs()) {
            if (k.name.size() > 3 && k.name.substr(k.name.size() - 3) == "_at") {
                EXPECT_TRUE(k.weights.empty()) << name << ": " << k.name;
            }
        }
    }
    // Drawn by the weights: inline in 0.25 / (0.25 + stored places) of the draws.
    std::mt19937_64 rng(5);
    int inlined = 0;
    const int draws = 4000;
    for (int i = 0; i < draws; i++)
        inlined += softmax.to_json(softmax.random(rng))["e_at"] == "inline";
    const double expected = 0.25 / (0.25 + double(e.values.size() - 1));
    EXPECT_NEAR(double(inlined) / draws, expected, 0.02);
}

// repair walks an invalid config to a valid one by redrawing one knob at a time, keeping
// changes that break no more constraints; a valid config comes back unchanged, and a space whose
// constraints nothing meets gives nullopt.
TEST(SearchSpace, RepairWalksAnInvalidConfigToAValidOneNearIt) {
    SearchSpace s = small_space();
    s.add_constraint("split divides 4 * unroll",
                     [](const ConfigView &c) { return 4 * c.i("unroll") % c.i("split") == 0; });
    std::mt19937_64 rng(11);
    int repaired = 0, invalid = 0;
    for (int i = 0; i < 300; i++) {
        Config c = s.random(rng);
        std::optional<Config> r = s.repair(c, rng);
        if (s.valid(c)) {
            ASSERT_TRUE(r.has_value());
            EXPECT_TRUE(*r == c) << s.to_json(c).dump();
            continue;
        }
        invalid++;
        EXPECT_GE(s.violations(c), 1);
        if (!r) continue;
        repaired++;
        EXPECT_TRUE(s.valid(*r)) << s.to_json(*r).dump();
    }
    EXPECT_GT(invalid, 50);
    EXPECT_GT(repaired, invalid * 9 / 10);

    SearchSpace none = small_space();
    none.add_constraint("never", [](const ConfigView &) { return false; });
    EXPECT_FALSE(none.repair(none.random(rng), rng).has_value());
}

// An implication holds a knob at one value where another knob has a given value: draws and
// repaired configs keep it by construction, a config that breaks it is invalid and named.
TEST(SearchSpace, ImplicationsHoldAKnobWhereAnotherHasAValue) {
    SearchSpace s = small_space();
    s.add_implication("parallel", true, "where", "root");
    s.add_implication("parallel", false, "unroll", 1);
    s.add_implication("where", "inline", "vector", 4);
    std::mt19937_64 rng(3);
    for (int i = 0; i < 300; i++) {
        const nlohmann::json j = s.to_json(s.random(rng));
        const bool parallel = j["parallel"].get<bool>();
        EXPECT_TRUE(!parallel || j["where"] == "root") << j.dump();
        EXPECT_TRUE(parallel || j["unroll"] == 1) << j.dump();
        EXPECT_TRUE(j["where"] != "inline" || j["vector"] == 4) << j.dump();
    }
    nlohmann::json j = s.to_json(s.random(rng));
    j["parallel"] = true;
    j["where"] = "inline";
    Config broken{};
    for (const Knob &k : s.knobs())
        broken.index.push_back(
            int(std::find(k.values.begin(), k.values.end(), j[k.name]) - k.values.begin()));
    EXPECT_EQ(s.violated(broken), "parallel needs where root");
    std::optional<Config> r = s.repair(broken, rng);
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(s.valid(*r)) << s.to_json(*r).dump();
    j = s.to_json(*r);
    j["parallel"] = false;
    j["unroll"] = 3;
    EXPECT_THAT(kiln::test::error_of([&] { s.from_json(j); }),
                HasSubstr("breaks the constraint 'unroll is 1 without parallel'"));
    j["unroll"] = 1;
    j["where"] = "inline";
    j["vector"] = 8;
    EXPECT_THAT(kiln::test::error_of([&] { s.from_json(j); }),
                HasSubstr("breaks the constraint 'where inline needs vector 4'"));
    EXPECT_THAT(kiln::test::error_of([&] { s.add_implication("parallel", true, "vector", 5); }),
                HasSubstr("knob 'vector' has no value 5; its values are"));
}

// The incumbent's neighbourhood (what the model strategy ranks each generation): every valid
// config one knob away, a distant value of an integer knob included, nothing that breaks a
// constraint, the config itself excluded.
TEST(SearchSpace, NeighboursAreEveryValidConfigOneKnobAway) {
    SearchSpace s("n");
    s.add_powers_of_two("tile", 1, 64); // 7 values
    s.add_choice("where", {"inline", "root", "tile"});
    s.add_bool("vectorize");
    s.add_constraint("vectorize needs where != inline", [](const ConfigView &c) {
        return !c.b("vectorize") || c.s("where") != "inline";
    });
    const Config start = s.from_json({{"tile", 8}, {"where", "root"}, {"vectorize", true}});
    const std::vector<Config> n = kiln::autotune::detail::neighbours(s, start);
    // 6 other tiles, "tile" (not "inline": vectorize needs it computed), vectorize false.
    ASSERT_EQ(n.size(), 8u);
    std::set<std::string> got;
    for (const Config &c : n) {
        EXPECT_TRUE(s.valid(c));
        int differ = 0;
        for (size_t k = 0; k < c.index.size(); k++)
            differ += c.index[k] != start.index[k];
        EXPECT_EQ(differ, 1) << s.to_json(c).dump();
        got.insert(s.to_json(c).dump());
    }
    EXPECT_EQ(got.size(), n.size());
    EXPECT_TRUE(got.count(R"({"tile":1,"vectorize":true,"where":"root"})"));
    EXPECT_TRUE(got.count(R"({"tile":64,"vectorize":true,"where":"root"})"));
    EXPECT_FALSE(got.count(R"({"tile":8,"vectorize":true,"where":"inline"})"));
}

// Coupled integer knobs step together in mutations (in the same direction), often enough that
// a move of both is common where it would be rare by chance; coupling anything but two
// different integer knobs is an error naming them.
TEST(SearchSpace, CoupledKnobsStepTogetherInMutations) {
    auto space = [](bool coupled) {
        SearchSpace s("coupled");
        for (int k = 0; k < 10; k++)
            s.add_powers_of_two("k" + std::to_string(k), 1, 64);
        s.add_choice("where", {"inline", "root"});
        if (coupled) s.add_coupling("k0", "k1");
        return s;
    };
    auto together = [](const SearchSpace &s) {
        std::mt19937_64 rng(5);
        const Config start = s.at(s.size() / 2);
        int same = 0;
        for (int i = 0; i < 400; i++) {
            const Config m = kiln::autotune::detail::mutate(s, start, rng);
            const int d0 = m.index[0] - start.index[0], d1 = m.index[1] - start.index[1];
            if (d0 != 0 && d0 == d1) same++;
        }
        return same;
    };
    const int coupled = together(space(true)), plain = together(space(false));
    EXPECT_GT(coupled, 20) << "plain: " << plain;
    EXPECT_LT(plain, 10) << "coupled: " << coupled;
    EXPECT_EQ(space(true).coupled(0), std::vector<int>{1});
    EXPECT_EQ(space(true).coupled(1), std::vector<int>{0});
    EXPECT_TRUE(space(true).coupled(2).empty());

    SearchSpace s = space(false);
    EXPECT_EQ(kiln::test::error_of([&] { s.add_coupling("k0", "where"); }),
              "search space 'coupled': add_coupling(\"k0\", \"where\"): knob 'where' is not an "
              "integer knob; only ordered (integer) knobs step together");
    EXPECT_EQ(kiln::test::error_of([&] { s.add_coupling("k3", "k3"); }),
              "search space 'coupled': add_coupling(\"k3\", \"k3\") couples a knob to itself; "
              "name two different integer knobs");
    EXPECT_THAT(kiln::test::error_of([&] { s.add_coupling("k0", "nope"); }),
                ::testing::HasSubstr("has no knob 'nope'"));
}

TEST(SearchSpace, HashDependsOnSaltAndValues) {
    SearchSpace s = small_space();
    Config c = s.at(5);
    std::string h = s.hash(c);
    EXPECT_EQ(h.size(), 16u);
    EXPECT_EQ(h, s.hash(c));
    EXPECT_NE(h, s.hash(s.at(6)));
    s.set_salt("0x1/64x64");
    EXPECT_NE(h, s.hash(c));
}

TEST(SearchSpace, MatmulTemplateContainsTheHandSchedule) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("matmul");
    std::vector<int64_t> shape{64, 64, 64};
    SearchSpace t = space_for(op, shape, "template", Target::host());
    int vec = std::max(4, Target::host().vector_bits / 32);
    // With AVX-512 (32 registers): 4 vectors x 6 rows, k unrolled twice; at N = 64 that tile is
    // all of C's width, so the row blocks are the outer loop, in as many parallel tasks as the
    // runtime has threads (a power of two from 2 to 32), each with its own copy of B.
    bool wide = vec >= 16;
    int tasks = 2;
    while (tasks < std::min(32, kiln_get_num_threads()))
        tasks *= 2;
    nlohmann::json hand = {{"lanes", std::min(vec, 16)},
                           {"tile_j", (wide ? 4 : 2) * std::min(vec, 16)},
                           {"tile_i", wide ? 6 : 8},
                           {"outer_order", wide ? "jo_inner" : "io_inner"},
                           {"b_panel", wide ? "per_task" : "at_jo"},
                           {"b_tasks", wide ? tasks : 1},
                           {"prod_at", "tile"},
                           {"k_unroll", wide ? 2 : 1},
                           {"unroll_i", 1},
                           {"parallel", 1},
                           {"j_tiles", 1},
                           {"k_block", 1}};
    Config c = t.from_json(hand);
    EXPECT_EQ(c, Config{std::vector<int>(t.knobs().size(), 0)}); // the knobs' defaults
    apps::OperatorInstance inst = op.make(shape);
    t.apply(inst, c);
    BufferBase out = inst.realize();
    EXPECT_LE(apps::max_relative_error(out, op.reference(inst)), op.tolerance);
}

// A built-in operator is a generator: its hand schedule is its knobs at their defaults, the
// first config of its template, schedule call for schedule call.
TEST(SearchSpace, EachTemplatesDefaultsAreTheOperatorsHandSchedule) {
    apps::register_builtin_operators();
    for (const auto &[name, shape_text] :
         std::vector<std::pair<std::string, std::string>>{{"matmul", "64x48x32"},
                                                          {"matmul", "24x64x1024"},
                                                          {"blur", "64x48"},
                                                          {"blur_u16", "70x20"},
                                                          {"conv2d", "8x32x12x12"}}) {
        const apps::Operator &op = apps::find_operator(name);
        std::vector<int64_t> shape = apps::parse_shape(op, shape_text);
        SearchSpace t = space_for(op, shape, "template", Target::host());
        EXPECT_EQ(t.name(), name);
        Config defaults{std::vector<int>(t.knobs().size(), 0)};
        ASSERT_EQ(t.violated(defaults), "") << name;
        apps::OperatorInstance hand = op.make(shape), tuned = op.make(shape);
        op.hand_schedule(hand, Target::host());
        t.apply(tuned, defaults);
        std::string hand_trace = ScheduleTrace::capture({hand.output}).to_json_string();
        EXPECT_FALSE(ScheduleTrace::capture({hand.output}).directives.empty()) << name;
        EXPECT_EQ(ScheduleTrace::capture({tuned.output}).to_json_string(), hand_trace) << name;
        EXPECT_LE(apps::max_relative_error(tuned.realize(), op.reference(tuned)), op.tolerance)
            << name;
    }
    // Operators whose generators declare no knobs have no template: the automatic space.
    const apps::Operator &softmax = apps::find_operator("softmax");
    EXPECT_FALSE(generator_knob_space(softmax, {64, 32}, Target::host()));
}

TEST(SearchSpace, BrokenConfigIsRejectedBeforeScheduling) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("matmul");
    SearchSpace t = space_for(op, {64, 64, 64}, "template", Target::host());
    Config c = t.at(0); // the hand schedule: valid
    ASSERT_TRUE(t.valid(c));
    const size_t tile_j = size_t(t.knob_index("tile_j"));
    c.index[tile_j] = int(t.knobs()[tile_j].values.size()) - 1;
    ASSERT_EQ(t.knobs()[tile_j].values.back(), 128); // > N
    EXPECT_NE(t.violated(c).find("generator constraint 'tile_j <= N and tile_i <= M' does not "
                                 "hold for "),
              std::string::npos)
        << t.violated(c);
    std::string message = kiln::test::error_of([&] { t.trace(op, {64, 64, 64}, c); });
    EXPECT_NE(message.find("breaks the constraint 'generator constraint 'tile_j <= N and tile_i "
                           "<= M' does not hold for "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("' of space 'matmul'"), std::string::npos) << message;
}

TEST(SearchSpace, AutoSpaceSchedulesEveryOperator) {
    apps::register_builtin_operators();
    const std::vector<std::pair<std::string, std::string>> ops = {
        {"blur", "64x48"},      {"matmul", "32x32x32"},  {"softmax", "64x32"},
        {"layernorm", "64x32"}, {"conv2d", "8x8x16x16"}, {"blur_u16", "64x48"}};
    for (const auto &[name, shape_text] : ops) {
        const apps::Operator &op = apps::find_operator(name);
        std::vector<int64_t> shape = apps::parse_shape(op, shape_text);
        SearchSpace s = auto_space(op, shape, Target::host());
        ASSERT_GT(s.knobs().size(), 2u) << name;
        std::mt19937_64 rng(3);
        int lowered = 0, tried = 0;
        std::string last_error;
        for (int i = 0; i < 200 && tried < 6; i++) {
            Config c = s.random(rng);
            if (!s.valid(c)) continue;
            tried++;
            try {
                apps::OperatorInstance inst = op.make(shape);
                s.apply(inst, c);
                LoweredFunc f = inst.pipeline().lower();
                std::vector<float> features = loop_nest_features(f, inst);
                EXPECT_EQ(features.size(), feature_names().size());
                lowered++;
            } catch (const CompileError &e) {
                last_error = e.what();
                // Some automatic configs do not fit the pipeline: the tuner records them as
                // compile errors.
            }
        }
        EXPECT_GT(tried, 0) << name;
        EXPECT_GT(lowered, 0) << name
                              << ": no random config of the automatic space lowered; last error: "
                              << last_error;
    }
}

TEST(Features, SeeVectorWidthAndParallelLoops) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("blur");
    std::vector<int64_t> shape{64, 48};
    apps::OperatorInstance plain = op.make(shape);
    std::vector<float> a = loop_nest_features(plain.pipeline().lower(), plain);
    apps::OperatorInstance vec = op.make(shape);
    vec.output.vectorize(Var(vec.output.args()[0]), 8).parallel(Var(vec.output.args()[1]));
    std::vector<float> b = loop_nest_features(vec.pipeline().lower(), vec);
    const auto &names = feature_names();
    auto at = [&](const std::vector<float> &v, const std::string &n) {
        return v[size_t(std::find(names.begin(), names.end(), n) - names.begin())];
    };
    EXPECT_EQ(at(a, "vector_lanes"), 1);
    EXPECT_EQ(at(b, "vector_lanes"), 8);
    EXPECT_EQ(at(a, "parallel_loops"), 0);
    EXPECT_EQ(at(b, "parallel_loops"), 1);
    EXPECT_GT(at(a, "log2_flops"), 0);
}

// A math function counts what codegen emits for it (codegen/MathCost.h), not one flop: exp of
// 16 float32 lanes is an inline polynomial of ~30 instructions, exp of a scalar a libm call.
TEST(Features, AMathFunctionCostsWhatCodegenEmitsForIt) {
    auto flops = [](Expr value) {
        LoweredFunc f;
        f.name = "f";
        const int lanes = value.type().lanes;
        Expr x = Variable::make(Int(32), "x");
        Expr index = lanes > 1 ? Ramp::make(x * lanes, Expr(1), lanes) : x;
        f.body = For::make("x", 0, 64, ForType::Serial, Store::make("out", value, index));
        apps::OperatorInstance inst;
        const auto &names = feature_names();
        std::vector<float> v = loop_nest_features(f, inst);
        return v[size_t(std::find(names.begin(), names.end(), "log2_flops") - names.begin())];
    };
    Expr v16 =
        Load::make(Float(32, 16), "in", Ramp::make(Variable::make(Int(32), "x") * 16, Expr(1), 16));
    const double exp16 = math_call_operations("exp", Float(32, 16));
    EXPECT_GE(exp16, 8.0);
    EXPECT_LE(exp16, 40.0);
    EXPECT_FLOAT_EQ(flops(exp(v16)), std::log2(1.0 + 64 * 16 * exp16));
    EXPECT_FLOAT_EQ(flops(v16 + v16), std::log2(1.0 + 64 * 16));
    Expr v1 = Load::make(Float(32), "in", Variable::make(Int(32), "x"));
    EXPECT_EQ(math_call_operations("exp", Float(32)), libm_call_operations);
    EXPECT_FLOAT_EQ(flops(exp(v1)), std::log2(1.0 + 64 * libm_call_operations));
    // LLVM calls libm once per lane for exp of a float64 vector.
    EXPECT_EQ(math_call_operations("exp", Float(64, 8)), 8 * libm_call_operations);
    for (const char *cheap : {"sqrt", "floor", "ceil", "round", "abs", "fma"})
        EXPECT_EQ(math_call_operations(cheap, Float(32, 16)), 1.0) << cheap;
    EXPECT_GE(math_call_operations("log", Float(32, 16)), 8.0);
    EXPECT_GE(math_call_operations("tanh", Float(32, 16)), 8.0);
}

TEST(Features, EvaluateLoopExtentsWithTheIRsEuclideanDivision) {
    // A loop of extent (-7) / (-2): 4 with the IR's Euclidean division (-7 = 4 * -2 + 1), where a
    // floor division would say 3.
    LoweredFunc f;
    f.name = "f";
    Expr e = Variable::make(Int(32), "e");
    f.body = LetStmt::make(
        "e", Div::make(Expr(-7), Expr(-2)),
        For::make("x", 0, e, ForType::Serial, Store::make("out", Expr(1.0f), Expr(0))));
    apps::OperatorInstance inst;
    std::vector<float> v = loop_nest_features(f, inst);
    EXPECT_FLOAT_EQ(v[0], std::log2(1.0f + 4.0f)); // log2_extent_level0
}

TEST(SearchSpace, BlurAndConv2dTemplatesScheduleCorrectly) {
    apps::register_builtin_operators();
    int vec = std::max(4, Target::host().vector_bits / 32);
    struct Case {
        std::string op, shape;
        nlohmann::json config;
    };
    std::vector<Case> cases = {{"blur",
                                "64x48",
                                {{"layout", "tiles"},
                                 {"tile_x", 32},
                                 {"tile_y", 32},
                                 {"lanes", vec},
                                 {"blur_x_at", "tile"},
                                 {"unroll_y", 0},
                                 {"parallel", 1}}},
                               {"conv2d",
                                "8x32x12x12",
                                {{"lanes", std::min(vec, 16)},
                                 {"tile_co", 2 * std::min(vec, 16)},
                                 {"tile_x", 8},
                                 {"conv_at", "xo"},
                                 {"unroll_x", 1},
                                 {"unroll_kx", 0},
                                 {"parallel", 1},
                                 {"parallel_over", "co_blocks"},
                                 {"tasks", apps::hand_task_count(Target::host())},
                                 {"transpose_copy", 0}}}};
    // Tasks of rows, each padding its own: 13 rows in 4 tasks of 4, the last moved back over
    // rows the third computes; in rows of sums (conv_at y) and per tile (whose copy to the
    // output is a transpose; the case above scatters it).
    for (const char *conv_at : {"y", "xo"}) {
        cases.push_back({"conv2d",
                         "8x32x13x12",
                         {{"lanes", std::min(vec, 16)},
                          {"tile_co", 2 * std::min(vec, 16)},
                          {"tile_x", 6},
                          {"conv_at", conv_at},
                          {"unroll_x", 1},
                          {"unroll_kx", 1},
                          {"parallel", 1},
                          {"parallel_over", "row_tasks"},
                          {"tasks", 4},
                          {"transpose_copy", 1}}});
    }
    for (const Case &c : cases) {
        const apps::Operator &op = apps::find_operator(c.op);
        std::vector<int64_t> shape = apps::parse_shape(op, c.shape);
        SearchSpace t = space_for(op, shape, "template", Target::host());
        apps::OperatorInstance inst = op.make(shape);
        t.apply(inst, t.from_json(c.config));
        BufferBase out = inst.realize();
        EXPECT_LE(apps::max_relative_error(out, op.reference(inst)), op.tolerance)
            << c.op << " " << c.config.dump();
    }
}

// The automatic space's rfactor knob (a long reduction into a small output) gives legal
// schedules: every config that turns it on lowers and computes what the reference computes.
// The register tile of a reduction computed per tile of the output: matmul's prod with its j
// and i loops inside the k loop, vectorized and unrolled, so nothing but k loops around the tile's
// sums (no loop inside it); and it computes what the reference computes.
TEST(AutoSpace, ARegisterTileLeavesNoLoopInsideTheReduction) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("matmul");
    const std::vector<int64_t> shape{64, 64, 48};
    SearchSpace s = auto_space(op, shape, Target::host());
    std::mt19937_64 rng(11);
    int checked = 0;
    for (int i = 0; i < 20000 && checked < 3; i++) {
        Config c = s.random(rng);
        c.index[size_t(s.knob_index("prod_at"))] =
            int(s.knobs()[size_t(s.knob_index("prod_at"))].values.size()) - 1; // tile:registers
        ASSERT_EQ(ConfigView(s, c).s("prod_at"), "tile:registers");
        if (!s.valid(c) || s.to_json(c)["vector"] == 1) continue;
        apps::OperatorInstance inst = op.make(shape);
        s.apply(inst, c);
        LoweredFunc f = inst.pipeline().lower();
        LoopsNamed v("prod.s1.k");
        v.include(f.body);
        EXPECT_GE(v.extents.size(), 1u) << s.to_json(c).dump();
        EXPECT_EQ(v.inside, 0) << s.to_json(c).dump();
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
            << s.to_json(c).dump();
        checked++;
    }
    EXPECT_EQ(checked, 3);
}

// unroll_r 2 splits the register tile's innermost reduction loop in two and unrolls the inner
// half: matmul's k loop around the tile then runs K / 2 times, with nothing inside it, and the
// result is the reference's. An odd K refuses it (the split would need a tail guard in the tile).
TEST(AutoSpace, UnrollRUnrollsTheRegisterTilesInnermostReductionTwice) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("matmul");
    auto config = [](const SearchSpace &s, int64_t unroll_r) {
        nlohmann::json j = valid_config(s, 5);
        j["tile_x"] = 16;
        j["tile_y"] = 4;
        j["vector"] = 8;
        j["outer_x"] = 1;
        j["prod_at"] = "tile:registers";
        j["B_panel_at"] = "strip";
        j["A_in_prod_at"] = "none";
        j["unroll_r"] = unroll_r;
        return j;
    };
    const std::vector<int64_t> shape{32, 48, 40};
    SearchSpace s = auto_space(op, shape, Target::host());
    Config c = s.from_json(config(s, 2));
    apps::OperatorInstance inst = op.make(shape);
    s.apply(inst, c);
    LoweredFunc f = inst.pipeline().lower();
    LoopsNamed v("prod.s1.k");
    v.include(f.body);
    ASSERT_EQ(v.extents.size(), 1u) << s.to_json(c).dump();
    EXPECT_TRUE(is_const(v.extents[0], 20)) << v.extents[0]; // K = 40, two steps an iteration
    EXPECT_EQ(v.inside, 0);
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance);

    SearchSpace odd = auto_space(op, {32, 48, 39}, Target::host());
    nlohmann::json j = config(odd, 2);
    try {
        odd.from_json(j);
        FAIL() << "unroll_r 2 accepted with K = 39";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find(
                      "unroll_r 2 needs a register tile whose innermost reduction extent is even"),
                  std::string::npos)
            << e.what();
    }
    j["unroll_r"] = 1;
    EXPECT_NO_THROW(odd.from_json(j));
}

// tile_y offers the divisors of the extent from 3 to 16 besides the powers of two: at 14 pixels a
// row, conv2d's register tile can be the hand schedule's 2 vectors of output channels by 14
// pixels (28 sums), which divides the row exactly as a register tile must; and it computes what
// the reference computes.
TEST(AutoSpace, TileYOffersTheExtentsDivisorsSoARowIsOneRegisterTile) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("conv2d");
    const std::vector<int64_t> shape{8, 32, 14, 14};
    SearchSpace s = auto_space(op, shape, Target::host());
    const Knob &k = s.knobs()[size_t(s.knob_index("tile_y"))];
    std::set<int64_t> values;
    for (const nlohmann::json &v : k.values)
        values.insert(v.get<int64_t>());
    EXPECT_TRUE(values.count(7) && values.count(14)) << nlohmann::json(k.values).dump();
    EXPECT_FALSE(values.count(5) || values.count(12)) << nlohmann::json(k.values).dump();
    EXPECT_TRUE(std::is_sorted(k.values.begin(), k.values.end()));

    const int64_t vector = std::clamp(Target::host().vector_bits / 32, 4, 16);
    nlohmann::json j = conv2d_register_tile(s, 2 * vector, 14, vector, "root");
    Config c = s.from_json(j);
    apps::OperatorInstance inst = op.make(shape);
    s.apply(inst, c);
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
        << s.to_json(c).dump();
}

// The SSRSRS nest: prod computed per outer tile of C (outer_order x_outer: C's column panels
// outermost), its k split into blocks outside the register tiles. Inside prod the k block loop
// encloses the loop over the outer tile's register tiles, which encloses the k loop of a block,
// with nothing inside that; and it computes what the reference computes, with a block that
// divides K and one that does not.
TEST(AutoSpace, AKBlockedRegisterTileIsSpaceReductionSpaceReductionSpace) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("matmul");
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{40, 128, 96}, std::vector<int64_t>{24, 128, 80}}) {
        SearchSpace s = auto_space(op, shape, Target::host());
        nlohmann::json j = valid_config(s, 2);
        j["tile_x"] = 16;
        j["outer_x"] = 4;
        j["tile_y"] = 4;
        j["vector"] = 8;
        j["outer_order"] = "x_outer";
        j["prod_at"] = "outer_tile:registers:k32";
        j["B_panel_at"] = "strip";
        j["B_panel_vectorize"] = true;
        Config c = s.from_json(j);
        apps::OperatorInstance inst = op.make(shape);
        s.apply(inst, c);
        LoweredFunc f = inst.pipeline().lower();
        class Nest : public IRVisitor {
        public:
            std::vector<std::string> stack, around_k_i;
            int loops_inside_k_i = 0, depth_in_k_i = 0;

        protected:
            using IRVisitor::visit;
            void visit(const For *op) override {
                const bool k_i = op->name.find("prod.s1.k.x_i") != std::string::npos;
                if (depth_in_k_i > 0) loops_inside_k_i++;
                if (k_i && around_k_i.empty()) around_k_i = stack;
                stack.push_back(op->name);
                depth_in_k_i += k_i;
                IRVisitor::visit(op);
                depth_in_k_i -= k_i;
                stack.pop_back();
            }
        } v;
        v.include(f.body);
        auto position = [&](const std::string &suffix) {
            for (size_t i = 0; i < v.around_k_i.size(); i++) {
                // Loop names may carry a uniquifying "$n".
                const std::string n = v.around_k_i[i].substr(0, v.around_k_i[i].find('$'));
                if (n.size() >= suffix.size() &&
                    n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
                    return int(i);
            }
            return -1;
        };
        std::string nest;
        for (const std::string &n : v.around_k_i)
            nest += n + " ";
        const int k_o = position("prod.s1.k.x_o"), tiles = position("prod.s1.j");
        EXPECT_GE(k_o, 0) << nest;
        EXPECT_GT(tiles, k_o) << nest;
        EXPECT_EQ(v.loops_inside_k_i, 0) << nest;
        EXPECT_EQ(position("C.s0.j_o"), 0) << "C's column panels outermost: " << nest;
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
            << j.dump();
    }
}

// With inner_dim the output's last dimension plays x: conv2d's tile is output channels (the
// vectors) by pixels of a row, and conv's register tile vectorizes its own co, stored innermost,
// with nothing inside its reduction loops; both placements compute what the reference computes.
TEST(AutoSpace, TheLastDimensionCanBeTheVectorizedOne) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("conv2d");
    const std::vector<int64_t> shape{8, 32, 12, 12};
    SearchSpace s = auto_space(op, shape, Target::host());
    const nlohmann::json drawn = valid_config(s, 4);
    for (const std::string at : {"tile:registers", "outer_tile:registers"}) {
        nlohmann::json j = drawn;
        j["inner_dim"] = "co";
        j["tile_x"] = 16;
        j["outer_x"] = 2;
        j["tile_y"] = 4;
        j["vector"] = 8;
        j["conv_at"] = at;
        j["conv_vectorize"] = false;
        j["padded_at"] = "root";
        j["w_packed_at"] = "root";
        Config c = s.from_json(j);
        apps::OperatorInstance inst = op.make(shape);
        s.apply(inst, c);
        LoweredFunc f = inst.pipeline().lower();
        class InsideR : public IRVisitor {
        public:
            int loops_inside_r = 0, depth_in_r = 0, co_vector_stores = 0;
            std::set<std::string> r_loops; // copies of a loop (unswitched) count once

        protected:
            using IRVisitor::visit;
            void visit(const For *op) override {
                bool r = op->name.find("conv.s1.r.") != std::string::npos;
                if (depth_in_r > 0 && !r) loops_inside_r++;
                if (r) r_loops.insert(op->name);
                depth_in_r += r;
                IRVisitor::visit(op);
                depth_in_r -= r;
            }
            std::map<std::string, Expr> lets;
            void visit(const LetStmt *op) override {
                lets[op->name] = op->value;
                IRVisitor::visit(op);
            }
            void visit(const Store *op) override {
                Expr index = op->index;
                if (const Variable *v = index.as<Variable>(); v && lets.count(v->name))
                    index = lets[v->name];
                if (op->name == "conv" && op->value.type().lanes == 8) {
                    // Dense vectors: co is conv's innermost dimension in memory.
                    if (const Ramp *ramp = index.as<Ramp>())
                        co_vector_stores += as_const_int(ramp->stride) == 1;
                }
                IRVisitor::visit(op);
            }
        } v;
        v.include(f.body);
        EXPECT_EQ(v.r_loops.size(), 3u) << at;
        EXPECT_EQ(v.loops_inside_r, 0) << at;
        EXPECT_GT(v.co_vector_stores, 0) << at;
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
            << j.dump();
    }
}

// With x_outer a panel of x is the outermost loop of all, the output's other dimensions inside
// it: conv2d's blocks of output channels are the parallel tasks (its rows run inside each), and
// w_packed per strip is repacked once per block, as in the hand schedule, not once per row and
// block. The result is the reference's.
TEST(AutoSpace, WithXOuterThePanelLoopIsOutermostAndAStripProducerIsComputedPerPanel) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("conv2d");
    const std::vector<int64_t> shape{8, 32, 12, 12};
    SearchSpace s = auto_space(op, shape, Target::host());
    nlohmann::json j = conv2d_register_tile(s, 16, 4, 8, "strip");
    j["outer_order"] = "x_outer";
    j["parallel"] = true;
    Config c = s.from_json(j);
    apps::OperatorInstance inst = op.make(shape);
    s.apply(inst, c);
    LoweredFunc f = inst.pipeline().lower();
    class Nest : public IRVisitor {
    public:
        std::vector<std::string> output_loops; ///< the output's, outermost first
        ForType first_type = ForType::Serial;
        std::vector<std::string> around_w_packed; ///< loops around w_packed's production

    protected:
        using IRVisitor::visit;
        std::vector<std::string> loops;
        void visit(const For *op) override {
            if (op->name.rfind("conv2d.s0.", 0) == 0) {
                if (output_loops.empty()) first_type = op->for_type;
                output_loops.push_back(op->name);
            }
            loops.push_back(op->name);
            IRVisitor::visit(op);
            loops.pop_back();
        }
        void visit(const ProducerConsumer *op) override {
            if (op->is_producer && op->name == "w_packed") around_w_packed = loops;
            IRVisitor::visit(op);
        }
    } nest;
    nest.include(f.body);
    ASSERT_FALSE(nest.output_loops.empty());
    EXPECT_EQ(nest.output_loops[0], "conv2d.s0.co_o") << testing::PrintToString(nest.output_loops);
    EXPECT_EQ(nest.first_type, ForType::Parallel);
    EXPECT_EQ(nest.around_w_packed, std::vector<std::string>{"conv2d.s0.co_o"})
        << testing::PrintToString(nest.around_w_packed);
    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
        << j.dump();
}

// An output of 16 MB or more gets the store_nontemporal knob (the hand schedules' streaming
// stores, which the space could not name before): on, the lowered pipeline stores the output
// non-temporally and computes what the reference computes. A smaller output has no such knob.
TEST(AutoSpace, ALargeOutputMayBeStoredNonTemporally) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("softmax");
    EXPECT_THROW(auto_space(op, {64, 256}, Target::host()).knob_index("store_nontemporal"),
                 CompileError);
    const std::vector<int64_t> shape{2048, 2048}; // 16 MB of output
    SearchSpace s = auto_space(op, shape, Target::host());
    const Knob &k = s.knobs()[size_t(s.knob_index("store_nontemporal"))];
    EXPECT_EQ(k.weights, (std::vector<double>{1.0, 2.0}));
    for (bool on : {false, true}) {
        nlohmann::json j = valid_config(s, 3);
        j["store_nontemporal"] = on;
        Config c = s.from_json(j);
        apps::OperatorInstance inst = op.make(shape);
        s.apply(inst, c);
        LoweredFunc f = inst.pipeline().lower();
        EXPECT_EQ(f.nontemporal_stores.count("softmax"), on ? 1u : 0u) << j.dump();
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
            << j.dump();
    }
}

// A register tile vectorizes the producer's variable named like the output's x, rounded up to
// whole vectors: a producer without it (layernorm's row sums over y) has no register placement.
// Every valid config of the row reductions stays inside its input at the shape (before, a register
// tile rounded the rows up and read past the last one: rejected before measuring, a wasted trial).
TEST(AutoSpace, RegisterTilesNeedTheOutputsXAndStayInsideTheInput) {
    apps::register_builtin_operators();
    for (const std::string name : {"layernorm", "softmax"}) {
        const apps::Operator &op = apps::find_operator(name);
        const std::vector<int64_t> shape{24, 40};
        SearchSpace s = auto_space(op, shape, Target::host());
        std::mt19937_64 rng(9);
        int checked = 0;
        for (int i = 0; i < 20000 && checked < 12; i++) {
            Config c = s.random(rng);
            if (!s.valid(c)) continue;
            apps::OperatorInstance inst = op.make(shape);
            s.apply(inst, c);
            std::optional<std::string> failed;
            loop_nest_features(inst.pipeline().lower(), inst, &failed);
            EXPECT_FALSE(failed) << name << " " << s.to_json(c).dump() << ": " << *failed;
            checked++;
        }
        EXPECT_EQ(checked, 12) << name;
    }
    const apps::Operator &op = apps::find_operator("layernorm");
    SearchSpace s = auto_space(op, {24, 40}, Target::host());
    nlohmann::json j = valid_config(s, 9);
    j["row_sum_at"] = "tile:registers";
    std::string message = kiln::test::error_of([&] { s.from_json(j); });
    EXPECT_NE(message.find("knob 'row_sum_at' of space 'auto:layernorm' must be one of"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("registers,"), std::string::npos) << message;
}

// A row reduction's partial sums partial(l, y) at "strip:registers": the lanes l (the row's 64
// accumulators, a constant extent read by the total) are vectorized and unrolled inside the walk
// along the row, so nothing loops inside the block loop and every update is a whole vector: the
// hand schedule's four independent zmm accumulators (per row of the strip). The output's extents
// are the shape's, so the row loops are constants. Rows of N = 200 and 136 (not multiples of 64:
// the total adds the tail) compute what the reference computes, and every such config passes the
// checks at the shape.
TEST(AutoSpace, ARowReductionKeepsItsLanesInVectorRegisters) {
    apps::register_builtin_operators();
    for (const std::string name : {"softmax", "layernorm"}) {
        const apps::Operator &op = apps::find_operator(name);
        for (const std::vector<int64_t> &shape :
             std::vector<std::vector<int64_t>>{{6, 200}, {5, 136}}) {
            SearchSpace s = auto_space(op, shape, Target::host());
            const std::string partial = name == "softmax" ? "row_max_partial" : "row_sum_partial";
            const std::vector<nlohmann::json> &values =
                s.knobs()[size_t(s.knob_index(partial + "_at"))].values;
            ASSERT_NE(std::find(values.begin(), values.end(), nlohmann::json("strip:registers")),
                      values.end())
                << name;
            std::mt19937_64 rng(17);
            int checked = 0;
            for (int i = 0; i < 200000 && checked < 3; i++) {
                Config c = s.random(rng);
                nlohmann::json j = s.to_json(c);
                if (j[partial + "_at"] != "strip:registers" || !s.valid(c)) continue;
                const int64_t vector = j["vector"].get<int64_t>();
                apps::OperatorInstance inst = op.make(shape);
                s.apply(inst, c);
                LoweredFunc f = inst.pipeline().lower();
                std::optional<std::string> failed;
                loop_nest_features(f, inst, &failed);
                EXPECT_FALSE(failed) << j.dump() << ": " << failed.value_or("");
                class RowWalk : public IRVisitor {
                public:
                    std::string block;
                    int64_t vector = 1;
                    int blocks = 0, loops_inside = 0, depth = 0, vector_updates = 0;
                    bool symbolic_output_loop = false;

                protected:
                    using IRVisitor::visit;
                    void visit(const For *op) override {
                        const bool b = op->name.find(block) != std::string::npos;
                        if (depth > 0) loops_inside++;
                        if (op->name.rfind(out + ".s0.", 0) == 0 && !op->extent.as<IntImm>())
                            symbolic_output_loop = true;
                        blocks += b;
                        depth += b;
                        IRVisitor::visit(op);
                        depth -= b;
                    }
                    void visit(const Store *op) override {
                        if (depth > 0 && op->value.type().lanes == vector) vector_updates++;
                        IRVisitor::visit(op);
                    }

                public:
                    std::string out;
                } v;
                v.block = partial + ".s1.";
                v.vector = vector;
                v.out = name;
                v.include(f.body);
                const std::string where = j.dump();
                EXPECT_EQ(v.blocks, 1) << where;
                EXPECT_EQ(v.loops_inside, 0) << where;
                EXPECT_EQ(v.vector_updates, 64 / vector * j["tile_y"].get<int64_t>()) << where;
                EXPECT_FALSE(v.symbolic_output_loop) << where;
                EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)),
                          op.tolerance)
                    << where;
                checked++;
            }
            EXPECT_EQ(checked, 3) << name;
        }
    }
}

// A producer vectorized where its region is narrower than a vector (conv2d's w_packed computed
// inside the output-channel loop: one channel) stays inside its input: every such config passes
// the checks at the shape and matches the reference (with ShiftInwards tails, they read w at
// channel -1 and were rejected before measuring).
TEST(AutoSpace, AProducerNarrowerThanAVectorStaysInsideItsInput) {
    apps::register_builtin_operators();
    const apps::Operator &op = apps::find_operator("conv2d");
    const std::vector<int64_t> shape{4, 16, 8, 12};
    SearchSpace s = auto_space(op, shape, Target::host());
    std::mt19937_64 rng(5);
    int checked = 0;
    for (int i = 0; i < 20000 && checked < 4; i++) {
        Config c = s.random(rng);
        nlohmann::json j = s.to_json(c);
        if (!s.valid(c) || !j["w_packed_vectorize"].get<bool>() || j["w_packed_at"] == "root")
            continue;
        apps::OperatorInstance inst = op.make(shape);
        s.apply(inst, c);
        std::optional<std::string> failed;
        loop_nest_features(inst.pipeline().lower(), inst, &failed);
        EXPECT_FALSE(failed) << j.dump() << ": " << failed.value_or("");
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
            << j.dump();
        checked++;
    }
    EXPECT_EQ(checked, 4);
}

TEST(AutoSpace, RfactorOfALongReductionLowersAndMatchesTheReference) {
    apps::Operator op;
    op.name = "row_sums";
    op.shape_names = {"N", "R"};
    op.make = [](const std::vector<int64_t> &shape) {
        apps::OperatorInstance inst;
        inst.shape = shape;
        int n = int(shape[0]), r_extent = int(shape[1]);
        ImageParam in(Float(32), 2, "in");
        Buffer<float> data({r_extent, n}, "in");
        for (int y = 0; y < n; y++) {
            for (int x = 0; x < r_extent; x++)
                data(x, y) = float((x * 7 + y * 3) % 13) * 0.125f;
        }
        Func sums("sums");
        Var x("x");
        RDom r(0, r_extent, "r");
        sums(x) = 0.f;
        sums(x) += in(r.x, x);
        inst.inputs = {in};
        inst.input_data = {data};
        inst.output = sums;
        inst.output_extents = {n};
        inst.stages = {sums};
        return inst;
    };
    op.reference = [](const apps::OperatorInstance &inst) {
        Buffer<float> in(inst.input_data[0]);
        int n = int(inst.shape[0]), r_extent = int(inst.shape[1]);
        Buffer<float> out({n}, "sums");
        for (int x = 0; x < n; x++) {
            float acc = 0.f;
            for (int r = 0; r < r_extent; r++)
                acc += in(r, x);
            out(x) = acc;
        }
        return BufferBase(out);
    };
    std::vector<int64_t> shape = {8, 4096};
    SearchSpace s = auto_space(op, shape, Target::host());
    int rf = s.knob_index("update0_rfactor"), split = s.knob_index("update0_split_r");
    std::mt19937_64 rng(11);
    int checked = 0;
    for (int i = 0; i < 200 && checked < 6; i++) {
        Config c = s.random(rng);
        c.index[size_t(rf)] = 1; // true
        c.index[size_t(split)] = int(s.knobs()[size_t(split)].values.size()) - 1 - (i % 3);
        ConfigView v(s, c);
        ASSERT_TRUE(v.b("update0_rfactor"));
        if (!s.valid(c) || v.i("update0_split_r") < 2) continue;
        apps::OperatorInstance inst = op.make(shape);
        try {
            s.apply(inst, c);
            BufferBase got = inst.realize();
            // Reassociated float sums of 4096 values in [0, 1.5].
            EXPECT_LE(apps::max_relative_error(got, op.reference(inst)), 1e-4)
                << s.to_json(c).dump();
        } catch (const CompileError &e) {
            ADD_FAILURE() << s.to_json(c).dump() << ": " << e.what();
        }
        checked++;
    }
    EXPECT_GE(checked, 3);
}

namespace kiln::autotune {
namespace {

using autotune_test::plain_matmul;

/// The extents of the first allocation of `name` and the loops around it.
struct FoundAllocation {
    std::vector<int64_t> extents;
    std::vector<std::string> around;
};

FoundAllocation find_allocation(const Stmt &body, const std::string &name) {
    class Find : public IRVisitor {
    public:
        std::string name;
        std::vector<std::string> loops;
        std::optional<FoundAllocation> found;

    protected:
        using IRVisitor::visit;
        void visit(const For *op) override {
            loops.push_back(op->name);
            IRVisitor::visit(op);
            loops.pop_back();
        }
        void visit(const Allocate *op) override {
            if (op->name == name && !found) {
                found = FoundAllocation{{}, loops};
                for (const Expr &e : op->extents)
                    found->extents.push_back(as_const_int(e).value_or(-1));
            }
            IRVisitor::visit(op);
        }
    } v;
    v.name = name;
    v.include(body);
    return v.found.value_or(FoundAllocation{});
}

} // namespace

// An output that is itself the reduction (C(j, i) += A(k, i) * B(j, k)) is tiled in its update
// like in its pure definition; with update0_r_at "tile" the k loop sits between the tile loops and
// the tile, with nothing but the vectorized, unrolled tile inside it (a register tile of sums), and
// with "innermost" k is the innermost loop. Both compute what the reference computes.
TEST(AutoSpace, AnOutputsReductionIsTiledLikeItsPureDefinition) {
    const apps::Operator op = plain_matmul();
    const std::vector<int64_t> shape{20, 48, 36};
    SearchSpace s = auto_space(op, shape, Target::host());
    for (const std::string r_at : {"tile", "innermost"}) {
        nlohmann::json j = valid_config(s, 6);
        j["tile_x"] = 16;
        j["outer_x"] = 1;
        j["tile_y"] = 4;
        j["vector"] = 8;
        j["unroll_y"] = true;
        j["update0_vectorize"] = true;
        j["update0_split_r"] = 1;
        j["update0_r_at"] = r_at;
        j["A_in_C_at"] = "none";
        j["B_in_C_at"] = "none";
        if (j.contains("update0_rfactor")) j["update0_rfactor"] = false;
        Config c = s.from_json(j);
        apps::OperatorInstance inst = op.make(shape);
        s.apply(inst, c);
        LoweredFunc f = inst.pipeline().lower();
        class InsideK : public IRVisitor {
        public:
            int k_loops = 0, loops_inside_k = 0, depth = 0, innermost_k = 0;

        protected:
            using IRVisitor::visit;
            void visit(const For *op) override {
                const bool k = op->name.find("C.s1.k") != std::string::npos;
                if (depth > 0) loops_inside_k++;
                k_loops += k;
                depth += k;
                const int before = loops_inside_k;
                IRVisitor::visit(op);
                if (k && loops_inside_k == before) innermost_k++;
                depth -= k;
            }
        } v;
        v.include(f.body);
        if (r_at == "tile") {
            EXPECT_EQ(v.k_loops, 1) << j.dump();
            EXPECT_EQ(v.loops_inside_k, 0) << j.dump();
        } else {
            EXPECT_GE(v.k_loops, 1) << j.dump(); // one per unrolled row
            EXPECT_EQ(v.innermost_k, v.k_loops) << j.dump();
        }
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), 1e-5) << j.dump();
    }
}

// With C's column panels outermost and B's wrapper at the strip, B's panel (the strip's 32
// columns by all of K) is copied once per panel into a dense buffer inside the panel loop of C's
// update (tiled like its pure definition, with the same loop names): the
// hand-written matmul's B_panel, found for an algorithm without one. A's wrapper per tile copies
// the tile's rows. Both compute what the reference computes, at shapes the tiles divide and not.
// rfactor of C's reduction would leave C without the reads its wrappers stand for: no config has
// both.
TEST(AutoSpace, APackingStageCopiesThePanelOfAReusedInput) {
    const apps::Operator op = plain_matmul();
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{24, 96, 40}, std::vector<int64_t>{19, 70, 33}}) {
        SearchSpace s = auto_space(op, shape, Target::host());
        nlohmann::json j = valid_config(s, 4);
        j["tile_x"] = 16;
        j["outer_x"] = 2;
        j["tile_y"] = 4;
        j["vector"] = 8;
        j["outer_order"] = "x_outer";
        j["B_in_C_at"] = "strip";
        j["A_in_C_at"] = "tile";
        j["update0_r_at"] = "innermost";
        if (j.contains("update0_rfactor")) j["update0_rfactor"] = false;
        Config c = s.from_json(j);
        apps::OperatorInstance inst = op.make(shape);
        s.apply(inst, c);
        LoweredFunc f = inst.pipeline().lower();
        FoundAllocation panel = find_allocation(f.body, "B_in_C");
        EXPECT_EQ(panel.extents, (std::vector<int64_t>{32, shape[2]})) << j.dump();
        ASSERT_FALSE(panel.around.empty()) << j.dump();
        EXPECT_NE(panel.around.back().find("C.s1.j_o"), std::string::npos) << panel.around.back();
        FoundAllocation rows = find_allocation(f.body, "A_in_C");
        EXPECT_EQ(rows.extents, (std::vector<int64_t>{shape[2], 4})) << j.dump();
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), 1e-5) << j.dump();
    }
    SearchSpace s = auto_space(op, {8, 16, 4096}, Target::host());
    std::mt19937_64 rng(8);
    int packed = 0;
    for (int i = 0; i < 20000 && packed < 6; i++) {
        Config c = s.random(rng);
        nlohmann::json j = s.to_json(c);
        if (j["B_in_C_at"] == "none" && j["A_in_C_at"] == "none") continue;
        if (j.contains("update0_rfactor") && j["update0_rfactor"].get<bool>()) {
            EXPECT_FALSE(s.valid(c)) << j.dump();
            continue;
        }
        if (!s.valid(c)) continue;
        apps::OperatorInstance inst = op.make({8, 16, 4096});
        s.apply(inst, c);
        EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), 1e-4) << j.dump();
        packed++;
    }
    EXPECT_EQ(packed, 6);
}

// With update0_r_at "tile:registers" C's reduction moves into an intermediate of sums
// (rfactor({})), a tile_x by tile_y buffer per tile of C whose k loop has nothing inside it (the
// vectorized, unrolled register tile); per outer tile with a K block, the block loop encloses
// the outer tile's register tiles. C's update then has no k loop. A's packing wrapper now wraps
// the intermediate's reads. Both compute what the reference computes. The tiles must cover the
// output exactly (a tail tile's sums would have a symbolic size): at a shape they do not divide
// the configs are invalid.
TEST(AutoSpace, AnOutputsReductionGetsARegisterTileOfSumsInAnIntermediate) {
    const apps::Operator op = plain_matmul();
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{24, 96, 64}, std::vector<int64_t>{8, 64, 48}}) {
        SearchSpace s = auto_space(op, shape, Target::host());
        for (const std::string r_at : {"tile:registers", "outer_tile:registers:k16"}) {
            nlohmann::json j = valid_config(s, 9);
            j["tile_x"] = 16;
            j["outer_x"] = 2;
            j["tile_y"] = 4;
            j["vector"] = 8;
            j["update0_vectorize"] = true;
            j["update0_split_r"] = 1;
            j["update0_r_at"] = r_at;
            j["A_in_C_at"] = "strip";
            j["B_in_C_at"] = "none";
            if (j.contains("update0_rfactor")) j["update0_rfactor"] = false;
            Config c = s.from_json(j);
            ASSERT_TRUE(s.valid(c)) << j.dump();
            apps::OperatorInstance inst = op.make(shape);
            s.apply(inst, c);
            LoweredFunc f = inst.pipeline().lower();
            const bool per_tile = r_at == "tile:registers";
            const std::vector<int64_t> odd{shape[0] + 1, shape[1] + 8, shape[2]};
            EXPECT_FALSE(auto_space(op, odd, Target::host()).valid(c)) << j.dump();
            FoundAllocation sums = find_allocation(f.body, "C_sums");
            EXPECT_EQ(sums.extents, (std::vector<int64_t>{per_tile ? 16 : 32, 4})) << j.dump();
            // The k loop (k within its block, per outer tile) and the loops inside it, and the
            // block loops, each with the register tile loops (over j) inside it.
            class KLoops : public IRVisitor {
            public:
                int in_c = 0, k_loops = 0, loops_inside_k = 0, depth = 0, blocks = 0,
                    tiles_in_block = 0, block_depth = 0;

            protected:
                using IRVisitor::visit;
                void visit(const For *op) override {
                    const bool block = op->name.find("C_sums.s1.k.x_o") != std::string::npos;
                    const bool k = op->name.find("C_sums.s1.k.x") != std::string::npos && !block;
                    if (depth > 0) loops_inside_k++;
                    if (block_depth > 0 && op->name.find("C_sums.s1.j") != std::string::npos)
                        tiles_in_block++;
                    in_c += op->name.find("C.s1.k") != std::string::npos;
                    k_loops += k;
                    blocks += block;
                    depth += k;
                    block_depth += block;
                    IRVisitor::visit(op);
                    depth -= k;
                    block_depth -= block;
                }
            } v;
            v.include(f.body);
            EXPECT_EQ(v.in_c, 0) << j.dump();
            EXPECT_EQ(v.k_loops, 1) << j.dump();
            EXPECT_EQ(v.loops_inside_k, 0) << j.dump();
            EXPECT_EQ(v.blocks, per_tile ? 0 : 1) << j.dump();
            EXPECT_EQ(v.tiles_in_block, per_tile ? 0 : 1) << j.dump();
            EXPECT_FALSE(find_allocation(f.body, "A_in_C_sums").extents.empty()) << j.dump();
            EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)), 1e-5)
                << j.dump();
        }
    }
}

// At a shape with few divisors (1000 = 2^3 x 125) the register tiles of a plain matmul's output
// need tiles that divide it, which uniform draws seldom meet; repaired draws (what the tuner's
// random proposals and mutations are) find many more of them.
TEST(AutoSpace, RepairedDrawsFindTheRareRegisterTilesOfAnOddShape) {
    const apps::Operator op = plain_matmul();
    SearchSpace s = auto_space(op, {1000, 1000, 1000}, Target::host());
    auto registers = [&](const Config &c) {
        return s.to_json(c)["update0_r_at"].get<std::string>().find(":registers") !=
               std::string::npos;
    };
    std::mt19937_64 rng(5);
    std::set<std::string> uniform, repaired;
    for (int i = 0; i < 2000; i++) {
        Config c = s.random(rng);
        if (s.valid(c) && registers(c)) uniform.insert(s.hash(c));
        std::optional<Config> r = s.repair(c, rng);
        if (!r) continue;
        EXPECT_TRUE(s.valid(*r)) << s.to_json(*r).dump();
        if (registers(*r)) repaired.insert(s.hash(*r));
    }
    std::printf("[ repair ] register-tile configs at 1000^3 in 2000 draws: %zu uniform, %zu "
                "repaired\n",
                uniform.size(), repaired.size());
    EXPECT_GT(repaired.size(), 2 * uniform.size() + 5);
}

} // namespace kiln::autotune
