// The automatic space's tensorize: an update the target's matrix unit computes (a product of
// 8-bit integers summed in int32, or of bfloat16 summed in float32) gets blocks of rows and
// columns tensorized onto tile multiplies, found from the algorithm (any names, any layout the
// tensorize pass accepts), not from a template.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/autotune/PlainMatmul.h"
#include "tests/lang/ErrorOf.h"
#include "tests/lang/FuzzBudget.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "apps/Builtin.h"
#include "apps/Operator.h"
#include "autotune/AutoSpace.h"
#include "autotune/SearchSpace.h"
#include "codegen/Target.h"
#include "lang/IRVisitor.h"
#include "lang/ReferenceEvaluator.h"
#include "schedule/Tensorize.h"

using namespace kiln;
using namespace kiln::autotune;
using ::testing::HasSubstr;

namespace {

/// A CPU with AMX (amx-tile, amx-int8, amx-bf16), whatever this machine is.
Target amx_cpu() {
    return Target::parse("sapphirerapids");
}

/// The same CPU without its bfloat16 matrix unit.
Target amx_int8_only() {
    Target t = amx_cpu();
    const std::string bf16 = "+amx-bf16";
    size_t at = t.features.find(bf16);
    if (at != std::string::npos) t.features.replace(at, bf16.size(), "-amx-bf16");
    return t;
}

/// A user's own int8 product, names and layout unlike the built-in operator's: the activations
/// are a Func (halved inputs, computed by the pipeline), the weights an int8 image holding 4
/// consecutive k of each column together but not in blocks of 16 columns:
/// out(x, y) = sum over k of i32(act(k, y)) * i32(w(k % 4, x, k / 4)).
apps::Operator users_int8_product() {
    apps::Operator op;
    op.name = "users_int8_product";
    op.shape_names = {"rows", "cols", "depth"};
    op.make = [](const std::vector<int64_t> &shape) {
        apps::OperatorInstance inst;
        inst.shape = shape;
        const int rows = int(shape[0]), cols = int(shape[1]), depth = int(shape[2]);
        ImageParam in(UInt(8), 2, "in"), w(Int(8), 3, "w");
        Var x("x"), y("y"), kk("kk");
        Func act("act"), out("out");
        act(kk, y) = in(kk, y) / cast<uint8_t>(2);
        RDom r({{0, 4}, {0, depth / 4}}, "r");
        out(x, y) = 0;
        out(x, y) += cast<int32_t>(act(r.x + 4 * r.y, y)) * cast<int32_t>(w(r.x, x, r.y));
        inst.inputs = {in, w};
        inst.input_data = {apps::random_buffer(UInt(8), {depth, rows}, "in", 1, 0, 255),
                           apps::random_buffer(Int(8), {4, cols, depth / 4}, "w", 2, -128, 127)};
        inst.output = out;
        inst.output_extents = {cols, rows};
        inst.stages = {act};
        return inst;
    };
    op.reference = [](const apps::OperatorInstance &inst) {
        inst.bind_inputs();
        return reference_realize(inst.output, inst.output_extents);
    };
    op.tolerance = 0;
    return op;
}

/// A valid config of the space with update0_tensorize as given (a repaired draw of this seed).
nlohmann::json draw_with(const SearchSpace &s, bool tensorize, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 1000; i++) {
        std::optional<Config> c = s.repair(s.random(rng), rng);
        if (c && s.to_json(*c)["update0_tensorize"].get<bool>() == tensorize) return s.to_json(*c);
    }
    ADD_FAILURE() << "no valid config with update0_tensorize " << tensorize;
    return {};
}

/// The names of the loops from the outermost inward along the first path through s, and
/// whether a tile_matmul is inside them.
struct LoopPath {
    std::vector<std::string> names;
    std::vector<bool> parallel;
};
LoopPath loops_to_tile_matmul(const Stmt &s) {
    class Path : public IRVisitor {
    public:
        LoopPath path, current;
        bool found = false;

    protected:
        using IRVisitor::visit;
        void visit(const For *op) override {
            current.names.push_back(op->name);
            current.parallel.push_back(op->for_type == ForType::Parallel);
            IRVisitor::visit(op);
            current.names.pop_back();
            current.parallel.pop_back();
        }
        void visit(const Call *op) override {
            if (!found && op->name == intrinsic::tile_matmul) {
                found = true;
                path = current;
            }
            IRVisitor::visit(op);
        }
    } v;
    v.include(s);
    return v.path;
}

bool host_has_unit(Type input) {
    return Target::host().has_matrix_unit(input);
}

TEST(AutoSpaceTensorize, OfferedWhereTheTargetsMatrixUnitMultipliesTheInputs) {
    const std::vector<int64_t> shape{64, 64, 256};
    const apps::Operator u8s8 = apps::matmul_u8s8_operator(), bf16 = apps::matmul_bf16_operator();
    SearchSpace s = auto_space(u8s8, shape, amx_cpu());
    ASSERT_TRUE(s.has_knob("update0_tensorize"));
    // panels: whole (64 columns) only; k chunks: whole (64 steps of 4 k) only.
    const Knob &panel = s.knobs()[size_t(s.knob_index("update0_panel"))];
    EXPECT_EQ(panel.values.size(), 1u);
    EXPECT_TRUE(auto_space(bf16, shape, amx_cpu()).has_knob("update0_tensorize"));
    EXPECT_TRUE(auto_space(users_int8_product(), shape, amx_cpu()).has_knob("update0_tensorize"));
    // No matrix unit, or not one for bfloat16, or a float32 product: no knob.
    EXPECT_FALSE(
        auto_space(u8s8, shape, Target::parse("skylake-avx512")).has_knob("update0_tensorize"));
    EXPECT_TRUE(auto_space(u8s8, shape, amx_int8_only()).has_knob("update0_tensorize"));
    EXPECT_FALSE(auto_space(bf16, shape, amx_int8_only()).has_knob("update0_tensorize"));
    EXPECT_FALSE(
        auto_space(autotune_test::plain_matmul(), shape, amx_cpu()).has_knob("update0_tensorize"));
    // Larger: panels of 64 to 1024 columns and chunks of 128, 256, 512 steps offered.
    SearchSpace big = auto_space(u8s8, {256, 2048, 4096}, amx_cpu());
    EXPECT_EQ(big.knobs()[size_t(big.knob_index("update0_panel"))].values.size(), 6u);
    EXPECT_EQ(big.knobs()[size_t(big.knob_index("update0_k_chunk"))].values.size(), 4u);
}

// A tensorized config is the hand schedule's structure: panels outermost, the row blocks
// parallel inside them, chunks of k, the panel's column blocks, and the tile multiply; the
// block's own loops are gone.
TEST(AutoSpaceTensorize, ATensorizedConfigIsPanelsRowBlocksChunksAndTiles) {
    const apps::Operator op = apps::matmul_u8s8_operator();
    const std::vector<int64_t> shape{64, 256, 1024};
    SearchSpace s = auto_space(op, shape, amx_cpu());
    nlohmann::json j = draw_with(s, true, 3);
    j["tile_x"] = 16;
    j["tile_y"] = 32;
    j["update0_panel"] = 128;
    j["update0_k_chunk"] = 128;
    j["parallel"] = true;
    Config c = s.from_json(j);
    ASSERT_TRUE(s.valid(c)) << s.violated(c);
    apps::OperatorInstance inst = op.make(shape);
    s.apply(inst, c);
    LoweredFunc f = inst.pipeline().lower();
    ASSERT_EQ(tile_matmul_input(f.body), UInt(8));
    LoopPath path = loops_to_tile_matmul(f.body);
    std::vector<std::string> expected{"C.s1.j_p", "C.s1.i_o", "C.s1.k.y_o", "C.s1.j_o"};
    ASSERT_EQ(path.names.size(), expected.size()) << ::testing::PrintToString(path.names);
    for (size_t i = 0; i < expected.size(); i++) {
        EXPECT_NE(path.names[i].find(expected[i]), std::string::npos)
            << path.names[i] << " is not " << expected[i];
        EXPECT_EQ(path.parallel[i], i == 1) << path.names[i];
    }
    EXPECT_NE(s.trace(op, shape, c).to_json_string(-1).find("tensorize"), std::string::npos);
}

TEST(AutoSpaceTensorize, ConstraintsNameWhatATensorizedConfigNeeds) {
    const apps::Operator op = apps::matmul_u8s8_operator();
    SearchSpace s = auto_space(op, {96, 64, 2048}, amx_cpu());
    const nlohmann::json base = draw_with(s, true, 5);
    auto violated = [&](const std::string &knob, const nlohmann::json &value) {
        nlohmann::json j = base;
        j[knob] = value;
        return kiln::test::error_of([&] { s.from_json(j); });
    };
    auto breaks = [](const std::string &constraint) {
        return "breaks the constraint '" + constraint + "' of space 'auto:matmul_u8s8'";
    };
    EXPECT_EQ(s.violated(s.from_json(base)), "");
    EXPECT_THAT(violated("tile_y", 64),
                HasSubstr(breaks("update0_tensorize needs tile_y <= 32 dividing 96 (a block is at "
                                 "most two tiles of 16 rows, with no tail)")));
    // B in blocks of 16 columns: a block of 32 does not lower (j % 16 is not linear in it).
    EXPECT_THAT(violated("tile_x", 32), HasSubstr(breaks("update0_tensorize needs tile_x 16")));
    EXPECT_THAT(violated("update0_r_at", "tile"),
                HasSubstr(breaks("update0_tensorize needs update0_r_at innermost")));
    EXPECT_THAT(violated("outer_x", 2), HasSubstr(breaks("update0_tensorize needs outer_x 1")));
    // Without tensorize, panels and chunks stay whole (no two configs are one schedule).
    nlohmann::json off = draw_with(s, false, 5);
    off["update0_k_chunk"] = 128;
    EXPECT_THAT(kiln::test::error_of([&] { s.from_json(off); }),
                HasSubstr(breaks("update0_k_chunk is 512 without update0_tensorize")));
    // The user's activations are a Func: a tile multiply reads it from memory, at root.
    const apps::Operator users = users_int8_product();
    SearchSpace u = auto_space(users, {32, 32, 64}, amx_cpu());
    nlohmann::json j = draw_with(u, true, 6);
    EXPECT_EQ(j["act_at"], "root");
    // Its weights are not in blocks: one or two tiles of columns.
    j["tile_x"] = 8;
    EXPECT_THAT(kiln::test::error_of([&] { u.from_json(j); }),
                HasSubstr("breaks the constraint 'update0_tensorize needs tile_x 16 or 32 (the "
                          "block widths that lower)'"));
    j["tile_x"] = 32;
    EXPECT_EQ(kiln::test::error_of([&] { u.from_json(j); }), "(no error)");
    j["act_at"] = "inline";
    EXPECT_THAT(kiln::test::error_of([&] { u.from_json(j); }),
                HasSubstr("breaks the constraint 'update0_tensorize needs act_at root'"));
}

// Four of five new draws try the matrix unit, and repair keeps most of them.
TEST(AutoSpaceTensorize, MostRepairedDrawsAreTensorized) {
    SearchSpace s = auto_space(apps::matmul_u8s8_operator(), {1024, 1024, 1024}, amx_cpu());
    std::mt19937_64 rng(11);
    int valid = 0, tensorized = 0;
    for (int i = 0; i < 400; i++) {
        std::optional<Config> c = s.repair(s.random(rng), rng);
        if (!c) continue;
        ASSERT_TRUE(s.valid(*c));
        valid++;
        tensorized += s.to_json(*c)["update0_tensorize"].get<bool>();
    }
    std::printf("[ tensorize ] %d of %d repaired draws tensorized\n", tensorized, valid);
    EXPECT_GT(valid, 300);
    EXPECT_GT(tensorized, valid / 2);
}

// On a machine with the units: tensorized configs of the user's product and of the bfloat16
// operator compute what the reference computes (int8 sums exactly).
TEST(AutoSpaceTensorize, TensorizedConfigsMatchTheReferenceOnThisMachine) {
    if (!host_has_unit(UInt(8)) || !host_has_unit(BFloat(16))) {
        GTEST_SKIP() << "this CPU has no AMX int8 and bfloat16 units (Target::host() is '"
                     << Target::host().cpu
                     << "'); the tensorized configs' structure is checked by the tests above";
    }
    struct Case {
        apps::Operator op;
        std::vector<int64_t> shape;
    };
    for (const Case &k : {Case{users_int8_product(), {48, 64, 136}},
                          Case{apps::matmul_bf16_operator(), {64, 128, 512}}}) {
        SearchSpace s = auto_space(k.op, k.shape, Target::host());
        for (uint64_t seed = 1; seed <= 4; seed++) {
            nlohmann::json j = draw_with(s, true, seed);
            apps::OperatorInstance inst = k.op.make(k.shape);
            s.apply(inst, s.from_json(j));
            EXPECT_LE(apps::max_relative_error(inst.realize(), k.op.reference(inst)),
                      k.op.tolerance)
                << k.op.name << " " << j.dump();
        }
    }
}

// A random product the matrix unit may compute, from a seed (see products_fuzz).
struct RandomProduct {
    bool bf16 = false, a_func = false, blocked = false;
    Type a, b;
    int rows = 0, cols = 0, depth = 0;
    std::string suffix; ///< letters, so that no name looks like one kiln numbers itself

    explicit RandomProduct(uint64_t seed) {
        std::mt19937_64 rng(seed);
        auto below = [&](uint64_t n) { return int(rng() % n); };
        bf16 = below(3) == 0;
        a = bf16 ? BFloat(16) : below(2) ? UInt(8) : Int(8);
        b = bf16 ? BFloat(16) : below(2) ? UInt(8) : Int(8);
        const int lanes = bf16 ? 2 : 4;
        rows = 1 + below(48);
        cols = 16 * (1 + below(4)) + (below(4) == 0 ? 1 + below(15) : 0);
        depth = lanes * (1 + below(40));
        a_func = below(2);
        blocked = cols % 16 == 0 && below(2);
        for (uint64_t n = seed; suffix.empty() || n > 0; n /= 26)
            suffix.insert(suffix.begin(), char('a' + n % 26));
    }

    std::string describe() const {
        char text[200];
        std::snprintf(text, sizeof text, "%s x %s, %d rows x %d columns x %d k, a %s, b %s",
                      bf16          ? "bfloat16"
                      : a.is_uint() ? "uint8"
                                    : "int8",
                      bf16          ? "bfloat16"
                      : b.is_uint() ? "uint8"
                                    : "int8",
                      rows, cols, depth, a_func ? "a Func" : "an image",
                      blocked ? "in blocks of 16 columns" : "plain");
        return text;
    }

    apps::Operator op() const {
        apps::Operator o;
        o.name = "product_" + suffix;
        o.shape_names = {"rows", "cols", "depth"};
        const RandomProduct p = *this;
        o.make = [p](const std::vector<int64_t> &shape) {
            apps::OperatorInstance inst;
            inst.shape = shape;
            const int lanes = p.bf16 ? 2 : 4, steps = p.depth / lanes;
            const Type sum = p.bf16 ? Float(32) : Int(32);
            ImageParam in(p.a, 2, "lhs_" + p.suffix), w(p.b, p.blocked ? 4 : 3, "rhs_" + p.suffix);
            Var x("col_" + p.suffix), y("row_" + p.suffix), kk("kk_" + p.suffix);
            Func act("act_" + p.suffix), out("out_" + p.suffix);
            RDom r({{0, lanes}, {0, steps}}, "r_" + p.suffix);
            Expr lhs;
            if (p.a_func) {
                act(kk, y) = p.bf16 ? in(kk, y) * make_const(p.a, 0.5)
                                    : in(kk, y) / make_const(p.a, int64_t(2));
                lhs = act(r.x + lanes * r.y, y);
                inst.stages = {act};
            } else {
                lhs = in(r.x + lanes * r.y, y);
            }
            Expr rhs = p.blocked ? w(r.x, x % 16, r.y, x / 16) : w(r.x, x, r.y);
            out(x, y) = make_zero(sum);
            out(x, y) += cast(sum, lhs) * cast(sum, rhs);
            auto range = [&](Type t) {
                return t.is_bfloat() ? std::pair<double, double>{-1, 1}
                       : t.is_uint() ? std::pair<double, double>{0, 255}
                                     : std::pair<double, double>{-128, 127};
            };
            const std::vector<int> w_extents = p.blocked
                                                   ? std::vector<int>{lanes, 16, steps, p.cols / 16}
                                                   : std::vector<int>{lanes, p.cols, steps};
            inst.inputs = {in, w};
            inst.input_data = {apps::random_buffer(p.a, {p.depth, p.rows}, in.name(), 1,
                                                   range(p.a).first, range(p.a).second),
                               apps::random_buffer(p.b, w_extents, w.name(), 2, range(p.b).first,
                                                   range(p.b).second)};
            inst.output = out;
            inst.output_extents = {p.cols, p.rows};
            return inst;
        };
        o.default_shape = {rows, cols, depth};
        o.reference = [](const apps::OperatorInstance &inst) {
            inst.bind_inputs();
            return reference_realize(inst.output, inst.output_extents);
        };
        // int8 sums are exact; bfloat16 products are exact in float32 and summed there in k
        // order, by the matrix unit two k lanes at a time.
        o.tolerance = bf16 ? 1e-5 : 0;
        return o;
    }
};

// Random products of the matrix unit's input types, fuzzed: int8 of either signedness or
// bfloat16, random extents (the columns a multiple of 16 or not), the row input an image or a
// Func, the column input in blocks of 16 columns or not, random names. The space offers
// tensorize exactly where the columns are a multiple of 16 (and the reduction more than one step
// of k lanes); on a machine with AMX, tensorized
// draws compute what the reference evaluator computes, elsewhere they lower to a tile multiply
// for a CPU that has it. KILN_FUZZ_SEED=s KILN_FUZZ_ITERATIONS=1 replays one product.
TEST(AutoSpaceTensorize, RandomProductsTensorizeAndMatchTheReference) {
    const char *seed_text = std::getenv("KILN_FUZZ_SEED");
    const char *iterations_text = std::getenv("KILN_FUZZ_ITERATIONS");
    const uint64_t first = seed_text && *seed_text ? std::strtoull(seed_text, nullptr, 10) : 1;
    const int iterations = iterations_text && *iterations_text ? std::atoi(iterations_text) : 10;
    const bool run = host_has_unit(UInt(8)) && host_has_unit(BFloat(16));
    const Target target = run ? Target::host() : amx_cpu();
    if (!run)
        std::printf("[ fuzz ] this CPU has no AMX: the tensorized configs are lowered for '%s', "
                    "not run\n",
                    target.cpu.c_str());
    kiln::test::FuzzBudget budget;
    int i = 0, tensorized = 0;
    for (; i < iterations && !budget.spent(); i++) {
        const uint64_t seed = first + uint64_t(i);
        const RandomProduct p(seed);
        const std::string repro = "seed " + std::to_string(seed) + " (" + p.describe() +
                                  "); replay: KILN_FUZZ_SEED=" + std::to_string(seed) +
                                  " KILN_FUZZ_ITERATIONS=1 build/tests/kiln_autotune_tests "
                                  "--gtest_filter='AutoSpaceTensorize.RandomProducts*'";
        const apps::Operator op = p.op();
        const std::vector<int64_t> shape = op.default_shape;
        SearchSpace s = auto_space(op, shape, target);
        const bool offered = s.has_knob("update0_tensorize");
        // A reduction of one k step has no k loop left for the pass (a loop of one iteration
        // is a let by then): not offered.
        const int steps = p.depth / (p.bf16 ? 2 : 4);
        EXPECT_EQ(offered, p.cols % 16 == 0 && steps > 1) << repro;
        if (!offered) continue;
        std::mt19937_64 rng(seed);
        for (int draw = 0; draw < 2; draw++) {
            std::optional<Config> c;
            for (int tries = 0; tries < 100; tries++) {
                c = s.repair(s.random(rng), rng);
                if (c && s.to_json(*c)["update0_tensorize"].get<bool>()) break;
                c.reset();
            }
            ASSERT_TRUE(c.has_value()) << "no tensorized draw; " << repro;
            const std::string config = s.to_json(*c).dump();
            try {
                apps::OperatorInstance inst = op.make(shape);
                s.apply(inst, *c);
                EXPECT_TRUE(tile_matmul_input(inst.pipeline().lower().body).has_value())
                    << config << "\n"
                    << repro;
                if (run) {
                    EXPECT_LE(apps::max_relative_error(inst.realize(), op.reference(inst)),
                              op.tolerance)
                        << config << "\n"
                        << repro;
                }
            } catch (const std::exception &e) {
                ADD_FAILURE() << e.what() << "\n" << config << "\n" << repro;
            }
            tensorized++;
        }
    }
    budget.report("AutoSpaceTensorize", uint64_t(i), uint64_t(iterations));
    std::printf("[ fuzz ] AutoSpaceTensorize: %d products from seed %llu, %d tensorized configs "
                "%s\n",
                i, static_cast<unsigned long long>(first), tensorized,
                run ? "ran and matched the reference evaluator" : "lowered");
    if (iterations >= 10 && !budget.spent()) {
        EXPECT_GT(tensorized, 6);
    }
}

} // namespace
