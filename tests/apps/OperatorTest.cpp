// The operator library: every operator's hand schedule and default schedule against its
// plain-loop reference at a small and an odd shape; the registry's and parse_shape's errors.
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "apps/Operator.h"
#include "codegen/AOT.h"
#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "tests/lang/ErrorOf.h"

namespace kiln::apps {
namespace {

struct Case {
    std::string op;
    std::vector<int64_t> shape;
};

std::string case_name(const testing::TestParamInfo<Case> &info) {
    return info.param.op + "_" + shape_to_string(info.param.shape);
}

class OperatorSchedules : public testing::TestWithParam<Case> {};

TEST_P(OperatorSchedules, HandScheduleMatchesTheReference) {
    const Operator &op = find_operator(GetParam().op);
    OperatorInstance inst = op.make(GetParam().shape);
    op.hand_schedule(inst, Target::host());
    BufferBase out = inst.realize();
    double err = max_relative_error(out, op.reference(inst));
    EXPECT_LE(err, op.tolerance) << op.name << " at " << shape_to_string(inst.shape);
}

TEST_P(OperatorSchedules, DefaultScheduleMatchesTheReference) {
    const Operator &op = find_operator(GetParam().op);
    OperatorInstance inst = op.make(GetParam().shape);
    BufferBase out = inst.realize();
    double err = max_relative_error(out, op.reference(inst));
    EXPECT_LE(err, op.tolerance) << op.name << " at " << shape_to_string(inst.shape);
}

// matmul_u8s8 (tensorized where the CPU has AMX): blocks of 32 x 16 and a k remainder (50 steps
// of 4: three tile multiplies and a narrower one), blocks of 18 rows (a tile of 16 and one of 2),
// and fewer rows than a tile. matmul_bf16 the same in bfloat16 summed in float32 (2 k a lane
// pair: 100 k steps of 2 are six tile multiplies and a remainder of 4 steps). K = 2048 (int8)
// and 1024 (bfloat16): a block's rows of A exceed 32 KB, so K comes in chunks of 256 steps.
// conv2d 20x64x6x14: input channels in blocks with a tail, two or more blocks of output channels
// (tasks of blocks), 14-pixel rows (two tiles of 7). 1 and 2 rows: every row skips kernel rows
// in the padding (RDom::where), one row both of them. conv2d_packed (its weights in the packed
// layout) at the same shapes, conv2d_nhwc (input and output channels innermost) too, and
// conv2d_pack that makes the packed weights.
INSTANTIATE_TEST_SUITE_P(
    Apps, OperatorSchedules,
    testing::Values(Case{"matmul", {64, 96, 40}}, Case{"matmul", {37, 53, 29}},
                    Case{"matmul", {5, 3, 7}}, Case{"matmul_u8s8", {64, 48, 200}},
                    Case{"matmul_u8s8", {36, 32, 96}}, Case{"matmul_u8s8", {5, 16, 8}},
                    Case{"matmul_bf16", {64, 48, 200}}, Case{"matmul_bf16", {36, 32, 96}},
                    Case{"matmul_bf16", {5, 16, 6}}, Case{"matmul_u8s8", {32, 32, 2048}},
                    Case{"matmul_bf16", {32, 32, 1024}}, Case{"conv2d", {4, 32, 8, 16}},
                    Case{"conv2d", {3, 19, 7, 11}}, Case{"conv2d", {20, 64, 6, 14}},
                    Case{"conv2d", {5, 16, 1, 9}}, Case{"conv2d", {3, 8, 2, 5}},
                    Case{"conv2d", {8, 8, 13, 12}}, Case{"conv2d_packed", {20, 64, 6, 14}},
                    Case{"conv2d_packed", {3, 19, 7, 11}}, Case{"conv2d_packed", {16, 16, 13, 12}},
                    Case{"conv2d_nhwc", {20, 64, 6, 14}}, Case{"conv2d_nhwc", {3, 19, 7, 11}},
                    Case{"conv2d_nhwc", {16, 16, 13, 12}}, Case{"conv2d_nhwc", {5, 16, 1, 9}},
                    Case{"conv2d_pack", {20, 64}}, Case{"conv2d_pack", {3, 19}},
                    Case{"blur", {64, 40}}, Case{"blur", {37, 23}}, Case{"blur_u16", {80, 40}},
                    Case{"blur_u16", {37, 23}}, Case{"softmax", {8, 200}}, Case{"softmax", {7, 37}},
                    Case{"layernorm", {8, 200}}, Case{"layernorm", {7, 37}},
                    Case{"harris", {64, 40}}, Case{"harris", {37, 23}}),
    case_name);

// A caller with constant weights: conv2d_pack's kernel packs the OIHW weights once, and
// conv2d_packed's kernel on them computes what conv2d's computes on the OIHW weights, to the
// last bit (the same sums in the same order), at a shape whose 20 input channels are five blocks
// of 4 and whose 40 output channels end in a partial tile (32 + 8).
TEST(Operators, Conv2dOnPackedWeightsComputesWhatConv2dComputes) {
    const std::vector<int64_t> shape = {20, 40, 6, 15};
    const Operator &pack = find_operator("conv2d_pack");
    OperatorInstance p = pack.make({shape[0], shape[1]});
    pack.hand_schedule(p, Target::host());
    BufferBase packed = p.realize();
    EXPECT_EQ(max_relative_error(packed, pack.reference(p)), 0.0);

    const Operator &conv = find_operator("conv2d");
    OperatorInstance plain = conv.make(shape);
    plain.input_data[1] = p.input_data[0]; // the same OIHW weights
    conv.hand_schedule(plain, Target::host());
    const Operator &on_packed = find_operator("conv2d_packed");
    OperatorInstance inst = on_packed.make(shape);
    ASSERT_EQ(inst.input_data[1].dimensions(), 6);
    inst.input_data[1] = packed;
    on_packed.hand_schedule(inst, Target::host());
    EXPECT_EQ(max_relative_error(inst.realize(), plain.realize()), 0.0);
    // The packed layout: w[co][ci][ky][kx] at wp(co % OB, ci % B, kx, ky, ci / B, co / OB),
    // B = 4 and OB = 8 here.
    Buffer<float> w(p.input_data[0]), wp(packed);
    ASSERT_EQ(wp.dimensions(), 6);
    EXPECT_EQ(wp.dim(0).extent, 8);
    EXPECT_EQ(wp.dim(1).extent, 4);
    EXPECT_EQ(wp.dim(4).extent, 5);
    EXPECT_EQ(wp.dim(5).extent, 5);
    EXPECT_EQ(wp(1, 3, 2, 1, 4, 4), w(2, 1, 19, 33));
}

// conv2d_nhwc on the channels-innermost input computes what conv2d_packed computes on the same
// values in planes, to the last bit (the same sums in the same order: a pixel's channels are one
// block in both), at 2 threads and 1, with tasks of rows (56 x 56) and of channel blocks.
TEST(Operators, Conv2dNhwcComputesWhatConv2dPackedComputes) {
    const Operator &planes = find_operator("conv2d_packed");
    const Operator &nhwc = find_operator("conv2d_nhwc");
    for (std::vector<int64_t> shape : {std::vector<int64_t>{32, 32, 9, 56}, {64, 96, 7, 7}}) {
        const int CI = int(shape[0]), CO = int(shape[1]), H = int(shape[2]), W = int(shape[3]);
        for (int threads : {1, 2}) {
            OperatorInstance a = nhwc.make(shape), b = planes.make(shape);
            b.input_data[1] = a.input_data[1]; // the same packed weights
            const float *src = reinterpret_cast<const float *>(a.input_data[0].raw_data());
            float *dst = reinterpret_cast<float *>(b.input_data[0].raw_data());
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    for (int c = 0; c < CI; c++)
                        dst[(size_t(c) * H + y) * W + x] = src[(size_t(y) * W + x) * CI + c];
            Target t = Target::host();
            t.threads = threads;
            nhwc.hand_schedule(a, t);
            planes.hand_schedule(b, t);
            BufferBase got = a.realize(), want = b.realize();
            const float *g = reinterpret_cast<const float *>(got.raw_data());
            const float *w = reinterpret_cast<const float *>(want.raw_data());
            int64_t wrong = 0;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    for (int c = 0; c < CO; c++)
                        wrong += g[(size_t(y) * W + x) * CO + c] != w[(size_t(c) * H + y) * W + x];
            EXPECT_EQ(wrong, 0) << shape_to_string(shape) << ", " << threads << " threads";
        }
    }
}

// conv2d's hand schedule shares the smaller of its operands between its tasks. At 64 -> 64
// channels, 56 x 56 the padded input (861 KB) is larger than the weights (147 KB): the tasks are
// blocks of rows, the outermost loop and parallel, and each pads its own rows inside it; there
// are as many as the target's threads (Target::threads): 2 tasks of 28 rows, or 8 of 7. At
// 256 -> 256 channels, 14 x 14 the weights are larger (2.4 MB): the padded input is computed
// once, at the root, its rows in parallel (all 256 input channels are one block), and the tasks
// are blocks of output channels.
TEST(Operators, Conv2dTasksShareTheSmallerOperand) {
    struct Nest : public IRVisitor {
        std::vector<std::string> loops;
        std::vector<std::string> around_padded; // the loops around padded's production
        std::string first_parallel;
        std::optional<int64_t> rows_per_task; // the extent of the loop inside a task's rows
        using IRVisitor::visit;
        void visit(const For *op) override {
            if (op->for_type == ForType::Parallel && first_parallel.empty())
                first_parallel = op->name;
            if (op->name == "conv2d_packed.s0.yi") rows_per_task = as_const_int(op->extent);
            loops.push_back(op->name);
            IRVisitor::visit(op);
            loops.pop_back();
        }
        void visit(const ProducerConsumer *op) override {
            if (op->is_producer && op->name == "padded") around_padded = loops;
            IRVisitor::visit(op);
        }
    };
    const Operator &op = find_operator("conv2d_packed");
    for (int threads : {2, 8}) {
        OperatorInstance rows = op.make({64, 64, 56, 56});
        op.hand_schedule(rows, Target::parse("x86-64-v4;threads=" + std::to_string(threads)));
        Nest a;
        a.include(rows.pipeline().lower().body);
        EXPECT_EQ(a.first_parallel, "conv2d_packed.s0.yt");
        EXPECT_EQ(a.around_padded, std::vector<std::string>{"conv2d_packed.s0.yt"})
            << testing::PrintToString(a.around_padded);
        EXPECT_EQ(a.rows_per_task, 56 / threads) << threads << " threads";
    }

    OperatorInstance blocks = op.make({256, 256, 14, 14});
    op.hand_schedule(blocks, Target::parse("x86-64-v4"));
    Nest b;
    b.include(blocks.pipeline().lower().body);
    EXPECT_EQ(b.first_parallel, "padded.s0.y");
    EXPECT_EQ(b.around_padded, std::vector<std::string>{})
        << testing::PrintToString(b.around_padded);
}

// check_knob_names (the benchmarks' --knobs): a knob the template declares passes, a misspelt
// one is refused with the operator, the knob and the knobs there are.
TEST(Operators, KnobNamesTheTemplateDoesNotDeclareAreRefused) {
    const Operator &op = find_operator("conv2d");
    const Target avx512 = Target::parse("x86-64-v4");
    EXPECT_NO_THROW(check_knob_names(op, {16, 32, 8, 14}, avx512, {{"tile_x", "7"}}));
    EXPECT_NO_THROW(check_knob_names(op, {16, 32, 8, 14}, avx512, {}));
    try {
        check_knob_names(op, {16, 32, 8, 14}, avx512, {{"tile_x", "7"}, {"tilex", "7"}});
        FAIL() << "a misspelt knob was accepted";
    } catch (const CompileError &e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("operator 'conv2d' has no knob 'tilex' for a CPU target;"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find("its knobs: lanes, tile_co, tile_x,"), std::string::npos) << m;
    }
}

// parse_knob_values (the benchmarks' --knobs text): pairs in, an item without a name or a value
// refused with the item.
TEST(Operators, KnobValuesParseAndAMalformedItemIsNamed) {
    const std::map<std::string, std::string> want = {{"tile_x", "7"}, {"conv_at", "y"}};
    EXPECT_EQ(parse_knob_values("tile_x=7,conv_at=y"), want);
    for (const std::string bad : {"tile_x", "=7", "tile_x="}) {
        try {
            parse_knob_values("lanes=16," + bad);
            ADD_FAILURE() << "'" << bad << "' was accepted";
        } catch (const CompileError &e) {
            EXPECT_EQ(std::string(e.what()),
                      "knob values: '" + bad + "' is not knob=value (e.g. tile_x=16,unroll=1)");
        }
    }
}

TEST(Operators, TestWrongDisagreesWithItsReference) {
    const Operator &op = find_operator("test_wrong");
    OperatorInstance inst = op.make({33, 9});
    op.hand_schedule(inst, Target::host());
    EXPECT_GE(max_relative_error(inst.realize(), op.reference(inst)), 0.5);
}

TEST(Operators, TestHangFinishesAtATinyReductionAndMatches) {
    const Operator &op = find_operator("test_hang");
    EXPECT_EQ(op.default_shape[1], 1 << 20);
    OperatorInstance inst = op.make({5, 3});
    op.hand_schedule(inst, Target::host());
    EXPECT_EQ(max_relative_error(inst.realize(), op.reference(inst)), 0.0);
}

TEST(OperatorsDeathTest, TestCrashSegfaults) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const Operator &op = find_operator("test_crash");
    EXPECT_DEATH(
        {
            OperatorInstance inst = op.make({64, 4});
            op.hand_schedule(inst, Target::host());
            inst.realize();
        },
        "");
}

TEST(Operators, ListingsHideTestOnlyOperators) {
    std::vector<std::string> names, all_names;
    for (const Operator *op : all_operators())
        names.push_back(op->name);
    for (const Operator *op : all_operators(true))
        all_names.push_back(op->name);
    EXPECT_EQ(names,
              (std::vector<std::string>{"blur", "blur_u16", "conv2d", "conv2d_nhwc", "conv2d_pack",
                                        "conv2d_packed", "harris", "layernorm", "matmul",
                                        "matmul_bf16", "matmul_u8s8", "softmax"}));
    EXPECT_EQ(all_names.size(), names.size() + 3);
    EXPECT_TRUE(std::is_sorted(all_names.begin(), all_names.end()));
    for (const Operator *op : all_operators(true)) {
        EXPECT_GT(op->work(op->default_shape), 0) << op->name;
        EXPECT_TRUE(op->work_unit == "GF/s" || op->work_unit == "GOP/s" || op->work_unit == "GB/s")
            << op->name;
        EXPECT_EQ(op->shape_names.size(), op->default_shape.size()) << op->name;
    }
}

// matmul_u8s8's schedule without the matrix unit (what a CPU without AMX gets; knob tensorize = 0
// here): the sums of 16 columns in a vector; exact. Shapes B's layout cannot hold are refused.
TEST(Operators, MatmulU8S8WithoutTheMatrixUnitIsExact) {
    const Operator &op = find_operator("matmul_u8s8");
    for (std::vector<int64_t> bad : {std::vector<int64_t>{8, 20, 64}, {8, 32, 62}}) {
        try {
            op.make(bad);
            ADD_FAILURE() << "no error for " << shape_to_string(bad);
        } catch (const CompileError &e) {
            EXPECT_NE(std::string(e.what()).find(bad[1] == 20 ? "N = 20 is not a multiple of 16"
                                                              : "K = 62 is not a multiple of 4"),
                      std::string::npos)
                << e.what();
        }
    }
    OperatorInstance inst = op.make({20, 48, 64});
    schedule_from_generator(op.generator, op.generator_params, inst, Target::host(),
                            {{"tensorize", "0"}});
    std::string text = inst.pipeline().lowered_text();
    EXPECT_EQ(text.find("tile_matmul("), std::string::npos);
    EXPECT_EQ(max_relative_error(inst.realize(), op.reference(inst)), 0.0);
}

// The tensorized schedule copies a block's rows of A per chunk of k where they are a multiple
// of 2 KB apart (u8s8 K = 2048, bfloat16 K = 1024: 1 KB of each of 32 rows), into rows one chunk
// apart, which the tiles then read; not where the rows are 1 KB apart or K comes whole. Both
// values of the knob compute the product, to the last bit where the machine has AMX.
TEST(Operators, TileMatmulsCopyAWhereItsRowsAlias) {
    const Target spr = Target::parse("sapphirerapids");
    auto lowered = [&](const char *name, const std::vector<int64_t> &shape,
                       const std::map<std::string, std::string> &knobs) {
        const Operator &op = find_operator(name);
        OperatorInstance inst = op.make(shape);
        schedule_from_generator(op.generator, op.generator_params, inst, spr, knobs);
        return inst.pipeline().lowered_text();
    };
    EXPECT_NE(lowered("matmul_u8s8", {32, 32, 2048}, {}).find("allocate A_in_C[uint8 * 1024 * 32]"),
              std::string::npos);
    EXPECT_NE(
        lowered("matmul_bf16", {32, 32, 1024}, {}).find("allocate A_in_C[bfloat16 * 512 * 32]"),
        std::string::npos);
    EXPECT_EQ(lowered("matmul_u8s8", {32, 32, 1024}, {}).find("A_in_C"), std::string::npos);
    EXPECT_EQ(lowered("matmul_u8s8", {32, 32, 2048}, {{"copy_a", "0"}}).find("A_in_C"),
              std::string::npos);
    Target host = Target::host();
    if (!host.has_matrix_unit(UInt(8))) {
        GTEST_SKIP() << "this CPU has no AMX (" << host.cpu << "): the copies' results are not run";
    }
    const Operator &op = find_operator("matmul_u8s8");
    for (const char *copy : {"0", "1"}) {
        OperatorInstance inst = op.make({64, 32, 4096});
        schedule_from_generator(op.generator, op.generator_params, inst, host, {{"copy_a", copy}});
        EXPECT_EQ(max_relative_error(inst.realize(), op.reference(inst)), 0.0) << "copy_a " << copy;
    }
}

// k's chunks: 128 steps where B comes in panels of 256 columns (bf16 at K = 2048: a block's rows
// of A over a chunk 512 bytes each), 256 where the panels are 512 columns wide (u8s8 at K = 2048:
// 1 KB of each row).
TEST(Operators, TileMatmulsTakeShorterChunksOfKWhereThePanelsAreNarrow) {
    const Target spr = Target::parse("sapphirerapids");
    auto lowered = [&](const char *name, const std::vector<int64_t> &shape) {
        const Operator &op = find_operator(name);
        OperatorInstance inst = op.make(shape);
        schedule_from_generator(op.generator, op.generator_params, inst, spr, {});
        return inst.pipeline().lowered_text();
    };
    std::string bf16 = lowered("matmul_bf16", {64, 1024, 2048});
    EXPECT_NE(bf16.find("allocate A_in_C[bfloat16 * 256 * 32]"), std::string::npos) << bf16;
    EXPECT_NE(bf16.find("C.s1.jp.loop_extent = 256"), std::string::npos) << bf16;
    std::string u8s8 = lowered("matmul_u8s8", {64, 1024, 2048});
    EXPECT_NE(u8s8.find("allocate A_in_C[uint8 * 1024 * 32]"), std::string::npos) << u8s8;
    EXPECT_NE(u8s8.find("C.s1.jp.loop_extent = 512"), std::string::npos) << u8s8;
}

// tile_cols = 32: blocks of 2 x 2 tiles, whose two tiles of B come from two of B's blocks of 16
// columns: one tile_matmul of 32 x 32 per block (its b's second tile a block of B further), and
// the product to the last bit where the machine has AMX, in k chunks or whole, u8s8 and bf16.
TEST(Operators, TileMatmulsTakeBlocksTwoTilesWide) {
    const Target spr = Target::parse("sapphirerapids");
    for (const char *name : {"matmul_u8s8", "matmul_bf16"}) {
        const Operator &op = find_operator(name);
        OperatorInstance inst = op.make({64, 96, 2048});
        schedule_from_generator(op.generator, op.generator_params, inst, spr,
                                {{"tile_cols", "32"}});
        std::string text = inst.pipeline().lowered_text();
        EXPECT_NE(text.find(", 32, 32, "), std::string::npos) << name << "\n" << text;
        EXPECT_NE(text.find("B.stride.3)"), std::string::npos) << name << "\n" << text;
    }
    Target host = Target::host();
    if (!host.has_matrix_unit(UInt(8)) || !host.has_matrix_unit(BFloat(16))) {
        GTEST_SKIP() << "this CPU has no AMX int8 and bf16 units (" << host.cpu
                     << "): the blocks' results are not run";
    }
    for (const char *name : {"matmul_u8s8", "matmul_bf16"}) {
        const Operator &op = find_operator(name);
        for (int64_t K : {256, 2048}) {
            OperatorInstance inst = op.make({64, 96, K});
            schedule_from_generator(op.generator, op.generator_params, inst, host,
                                    {{"tile_cols", "32"}});
            EXPECT_LE(max_relative_error(inst.realize(), op.reference(inst)), op.tolerance)
                << name << " K " << K;
        }
    }
}

// matmul_bf16 the same: without the matrix unit within its tolerance; K must be even (2 k a
// lane pair).
TEST(Operators, MatmulBF16WithoutTheMatrixUnitIsWithinTolerance) {
    const Operator &op = find_operator("matmul_bf16");
    try {
        op.make({8, 32, 63});
        ADD_FAILURE() << "no error for K = 63";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("matmul_bf16: K = 63 is not a multiple of 2; B holds "
                                             "2 consecutive k of each column together"),
                  std::string::npos)
            << e.what();
    }
    OperatorInstance inst = op.make({20, 48, 64});
    EXPECT_EQ(inst.input_data[0].type(), BFloat(16));
    schedule_from_generator(op.generator, op.generator_params, inst, Target::host(),
                            {{"tensorize", "0"}});
    std::string text = inst.pipeline().lowered_text();
    EXPECT_EQ(text.find("tile_matmul("), std::string::npos);
    BufferBase got = inst.realize();
    EXPECT_EQ(got.type(), Float(32));
    EXPECT_LE(max_relative_error(got, op.reference(inst)), op.tolerance);
}

TEST(Operators, MatmulUsesTheDocumentedLayout) {
    // A(k, i) is row-major A[i][k]; C(j, i) is C[i][j].
    const Operator &op = find_operator("matmul");
    OperatorInstance inst = op.make({2, 3, 4});
    EXPECT_EQ(inst.input_data[0].dim(0).extent, 4); // K
    EXPECT_EQ(inst.input_data[0].dim(1).extent, 2); // M
    EXPECT_EQ(inst.input_data[1].dim(0).extent, 3); // N
    EXPECT_EQ(inst.output_extents, (std::vector<int>{3, 2}));
    Buffer<float> a(inst.input_data[0]), b(inst.input_data[1]);
    Buffer<float> c(op.reference(inst));
    double c10 = 0;
    for (int k = 0; k < 4; k++)
        c10 += double(a(k, 1)) * b(0, k);
    EXPECT_NEAR(c(0, 1), c10, 1e-6);
}

TEST(Operators, MatmulTakesItsInputsInDeclarationOrder) {
    // The hand schedule reads B before A; the entry point still takes A, B, then C.
    const Operator &op = find_operator("matmul");
    OperatorInstance inst = op.make({64, 48, 32});
    op.hand_schedule(inst, Target::host());
    EXPECT_EQ(c_signature(inst.pipeline().lower("matmul")),
              "int matmul(kiln_buffer_t *A, kiln_buffer_t *B, kiln_buffer_t *C)");
}

using kiln::test::error_of;

TEST(OperatorErrors, UnknownOperatorListsTheKnownOnes) {
    EXPECT_EQ(error_of([] { find_operator("matmull"); }),
              "unknown operator 'matmull'; known operators: blur, blur_u16, conv2d, conv2d_nhwc, "
              "conv2d_pack, conv2d_packed, harris, "
              "layernorm, matmul, matmul_bf16, matmul_u8s8, softmax");
}

// OIHW weights given to conv2d_packed (a caller who forgot conv2d_pack) are a runtime error
// naming the input and its dimensions, not a read past the buffer.
TEST(OperatorErrors, Conv2dPackedRefusesUnpackedWeights) {
    const Operator &op = find_operator("conv2d_packed");
    OperatorInstance inst = op.make({16, 32, 4, 4});
    op.hand_schedule(inst, Target::host());
    inst.input_data[1] = find_operator("conv2d").make({16, 32, 4, 4}).input_data[1];
    EXPECT_EQ(error_of([&] { inst.realize(); }),
              "cannot bind buffer 'w' with 4 dimensions to ImageParam 'wp', which has 6; bind a "
              "buffer with 6 dimensions");
}

// conv2d_nhwc given the planes of an NCHW input (the same rank, another shape) is a runtime error
// from its input's promises, naming the dimension and both extents, not a read past the buffer.
TEST(OperatorErrors, Conv2dNhwcRefusesAnInputInPlanes) {
    const Operator &op = find_operator("conv2d_nhwc");
    OperatorInstance inst = op.make({16, 32, 4, 6});
    op.hand_schedule(inst, Target::host());
    inst.input_data[0] = find_operator("conv2d").make({16, 32, 4, 6}).input_data[0];
    EXPECT_EQ(error_of<RuntimeError>([&] { inst.realize(); }),
              "pipeline 'conv2d_nhwc' failed (kiln_error_bad_dimensions): buffer 'in' dimension 0 "
              "must have extent 16 (ImageParam::dim(0).set_extent), got 6");
}

// matmul's A is dense (its row pitch K is compiled in): a view of rows with a wider pitch (an
// lda > K) is refused when the kernel runs, naming the pitch it needs, and nothing is written.
TEST(OperatorErrors, MatmulRefusesAnAWithRowsWiderThanK) {
    const Operator &op = find_operator("matmul");
    OperatorInstance inst = op.make({8, 16, 12});
    op.hand_schedule(inst, Target::host());
    std::vector<float> wide(size_t(8) * 20, 1.f);
    inst.input_data[0] = BufferBase(Float(32), wide.data(),
                                    std::vector<BufferDim>{{0, 12, 1}, {0, 8, 20}}, "A_view");
    inst.bind_inputs();
    Buffer<float> out({16, 8}, "C");
    out.fill(-3.f);
    EXPECT_EQ(error_of<RuntimeError>([&] { inst.pipeline().realize({out}); }),
              "pipeline 'C' failed (kiln_error_bad_dimensions): buffer 'A' dimension 1 must have "
              "stride 12 (ImageParam::dim(1).set_stride), got 20");
    EXPECT_EQ(out(5, 7), -3.f);
}

// C promises its row pitch too (Func::output_buffer): the kernel's stores index with the
// constant N (no C.stride.1 outside the entry checks), and a C with wider rows is refused with
// nothing written.
TEST(OperatorErrors, MatmulRefusesACWithRowsWiderThanN) {
    const Operator &op = find_operator("matmul");
    OperatorInstance inst = op.make({8, 16, 12});
    op.hand_schedule(inst, Target::host());
    struct Stores : IRVisitor {
        int stores = 0, with_pitch = 0;
        using IRVisitor::visit;
        void visit(const Store *op) override {
            if (op->name == "C") {
                stores++;
                with_pitch += expr_uses_var(op->index, "C.stride.1");
            }
            IRVisitor::visit(op);
        }
    } v;
    v.include(inst.pipeline().lower().body);
    EXPECT_GT(v.stores, 0);
    EXPECT_EQ(v.with_pitch, 0);
    inst.bind_inputs();
    std::vector<float> wide(size_t(8) * 20, -3.f);
    BufferBase out(Float(32), wide.data(), std::vector<BufferDim>{{0, 16, 1}, {0, 8, 20}}, "C");
    EXPECT_EQ(error_of<RuntimeError>([&] { inst.pipeline().realize({out}); }),
              "pipeline 'C' failed (kiln_error_bad_dimensions): buffer 'C' dimension 1 must have "
              "stride 16 (Func::output_buffer().dim(1).set_stride), got 20");
    EXPECT_EQ(wide[5 * 20 + 7], -3.f);
}

TEST(OperatorErrors, RegisteringANameTwiceIsAnError) {
    Operator op = find_operator("blur");
    EXPECT_EQ(error_of([&] { register_operator(op); }),
              "register_operator: an operator named 'blur' is already registered; pick another "
              "name");
}

TEST(OperatorErrors, ParseShapeNamesTheOperatorAndItsShape) {
    const Operator &op = find_operator("matmul");
    EXPECT_EQ(parse_shape(op, "1024x512x256"), (std::vector<int64_t>{1024, 512, 256}));
    EXPECT_EQ(parse_shape(op, "37,53,29"), (std::vector<int64_t>{37, 53, 29}));
    EXPECT_EQ(parse_shape(op, ""), op.default_shape);
    EXPECT_EQ(error_of([&] { parse_shape(op, "1024x1024"); }),
              "shape '1024x1024' for operator 'matmul' has 2 values, but the operator takes 3: "
              "MxNxK (e.g. 1024x1024x1024)");
    EXPECT_EQ(error_of([&] { parse_shape(op, "10x0x10"); }),
              "shape '10x0x10' for operator 'matmul': '0' is not a positive integer below 2^31; "
              "write MxNxK (e.g. 1024x1024x1024)");
    EXPECT_EQ(error_of([&] { parse_shape(op, "10xax10"); }),
              "shape '10xax10' for operator 'matmul': 'a' is not a positive integer below 2^31; "
              "write MxNxK (e.g. 1024x1024x1024)");
    EXPECT_EQ(error_of([&] { parse_shape(op, "10x99999999999x10"); }),
              "shape '10x99999999999x10' for operator 'matmul': '99999999999' is not a positive "
              "integer below 2^31; write MxNxK (e.g. 1024x1024x1024)");
    EXPECT_EQ(error_of([&] { parse_shape(op, "10x10x"); }),
              "shape '10x10x' for operator 'matmul': '' is not a positive integer below 2^31; "
              "write MxNxK (e.g. 1024x1024x1024)");
}

TEST(OperatorErrors, MakeRejectsAShapeTooSmallForTheOperator) {
    const Operator &op = find_operator("harris");
    EXPECT_EQ(error_of([&] {
                  op.make({4, 10});
              }),
              "operator 'harris': W = 4 is out of range; it must be at least 5 and below 2^31");
}

TEST(MaxRelativeError, ComparesRelativelyAboveOneAndAbsolutelyBelow) {
    Buffer<float> a({3}), b({3});
    a(0) = 1.f, a(1) = 200.f, a(2) = 0.5f;
    b(0) = 1.f, b(1) = 100.f, b(2) = 0.25f;
    EXPECT_DOUBLE_EQ(max_relative_error(a, b), 1.0);
    b(1) = 200.f;
    EXPECT_DOUBLE_EQ(max_relative_error(a, b), 0.25);
    Buffer<float> c({4});
    EXPECT_EQ(max_relative_error(a, c), std::numeric_limits<double>::infinity());
    Buffer<int> d({3});
    EXPECT_EQ(max_relative_error(a, d), std::numeric_limits<double>::infinity());
    a(2) = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(max_relative_error(a, b), std::numeric_limits<double>::infinity());
}

} // namespace
} // namespace kiln::apps

namespace kiln::apps {
namespace {

TEST(OperatorErrors, RegisteringWithoutAFunctionNamesWhatIsNeeded) {
    Operator op = find_operator("blur");
    op.name = "blur_without_make";
    op.make = nullptr;
    EXPECT_EQ(error_of([&] { register_operator(op); }),
              "register_operator: operator 'blur_without_make' must set make, hand_schedule and "
              "work");
}

TEST(OperatorRegistry, AnOperatorWithoutAReferenceRegisters) {
    Operator op = find_operator("blur");
    op.name = "blur_checked_by_the_evaluator";
    op.reference = nullptr;
    op.test_only = true; // not in the list of known operators other tests check
    register_operator(op);
    EXPECT_FALSE(find_operator("blur_checked_by_the_evaluator").reference);
}

TEST(OperatorRegistry, TheResolverRegistersUnknownNamesOnDemand) {
    int calls = 0;
    set_operator_resolver([&](const std::string &name) {
        calls++;
        if (name != "blur_resolved") return false;
        Operator op = find_operator("blur");
        op.name = name;
        op.test_only = true;
        register_operator(op);
        return true;
    });
    EXPECT_EQ(find_operator("blur_resolved").name, "blur_resolved");
    EXPECT_EQ(find_operator("blur_resolved").name, "blur_resolved"); // registered: no second call
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(error_of([] { find_operator("not_resolved"); }).rfind("unknown operator", 0), 0u);
    set_operator_resolver(nullptr);
}

} // namespace
} // namespace kiln::apps
