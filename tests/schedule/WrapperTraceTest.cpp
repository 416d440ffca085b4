// in() wrappers in schedule traces: captured (the in directive before the wrapper's own
// schedule), through JSON and back, printed as C++ that records the same trace when pasted,
// replayed on a fresh pipeline (finding the ImageParam by name) with identical lowered code, and
// removed by remove_schedule; the algorithm hash never changes.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/Param.h"
#include "schedule/Lower.h"
#include "schedule/ScheduleTrace.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

using test::error_of;

// C = A * B as an update over k, with a Func of its own (scaled) that reads B too.
struct MatMul {
    ImageParam A{Float(32), 2, "A"}, B{Float(32), 2, "B"};
    Func C{"C"}, scaled{"scaled"}, out{"out"};
    RDom k{0, 32, "k"};
    std::vector<Func> outputs() const { return {out}; }
};

MatMul make_matmul() {
    MatMul m;
    Var j("j"), i("i");
    m.C(j, i) = 0.0f;
    m.C(j, i) += m.A(m.k, i) * m.B(j, m.k);
    m.scaled(j, i) = m.B(j, i) * 2.0f;
    m.out(j, i) = m.C(j, i) + m.scaled(j, i);
    return m;
}

// B packed per column panel of C for C alone, A wrapped for every consumer (inlined), and the
// scaled Func wrapped for out.
void schedule_matmul(MatMul &m) {
    Var j("j"), i("i"), jo("jo"), ji("ji");
    m.C.compute_root();
    m.C.update(0).split(j, jo, ji, 8).reorder(ji, m.k.x, i, jo);
    Func Bp = m.B.in(m.C);
    Bp.compute_at(m.C, jo).vectorize(_0, 8);
    m.A.in();
    m.scaled.in(m.out).compute_root();
}

const char *matmul_cpp =
    "C.compute_root();\n"
    "C.update(0).split(Var(\"j\"), Var(\"jo\"), Var(\"ji\"), 8, "
    "TailStrategy::Auto);\n"
    "C.update(0).reorder(Var(\"ji\"), RVar(\"k.x\"), Var(\"i\"), Var(\"jo\"));\n"
    "Func B_in_C = B.in(C);\n"
    "B_in_C.compute_at(C, Var(\"jo\"));\n"
    "B_in_C.vectorize(Var(\"_0\"), 8, TailStrategy::Auto);\n"
    "Func A_in = A.in();\n"
    "Func scaled_in_out = scaled.in(out);\n"
    "scaled_in_out.compute_root();\n";

TEST(WrapperTrace, CaptureListsTheInDirectiveBeforeTheWrappersOwnSchedule) {
    MatMul m = make_matmul();
    schedule_matmul(m);
    ScheduleTrace trace = ScheduleTrace::capture(m.outputs());
    ASSERT_EQ(trace.directives.size(), 10u); // vectorize(_0, 8) is a split and a vectorize
    const Directive &in = trace.directives[3];
    EXPECT_EQ(in.func, "B");
    EXPECT_EQ(in.primitive, "in");
    EXPECT_EQ(in.vars, std::vector<std::string>{"C"});
    EXPECT_EQ(in.target, "B_in_C");
    EXPECT_EQ(in.sequence, 4);
    EXPECT_EQ(trace.directives[4].func, "B_in_C");
    EXPECT_EQ(trace.directives[4].primitive, "compute_at");
    EXPECT_EQ(trace.directives[7].func, "A");
    EXPECT_EQ(trace.directives[7].primitive, "in");
    EXPECT_TRUE(trace.directives[7].vars.empty());
    EXPECT_EQ(trace.directives[7].target, "A_in");
}

TEST(WrapperTrace, TheAlgorithmHashIgnoresWrappers) {
    MatMul m = make_matmul();
    uint64_t hash = algorithm_hash(m.outputs());
    schedule_matmul(m);
    EXPECT_EQ(algorithm_hash(m.outputs()), hash);
    EXPECT_EQ(ScheduleTrace::capture(m.outputs()).algorithm_hash, hash);
}

TEST(WrapperTrace, TheTraceRoundTripsThroughJson) {
    MatMul m = make_matmul();
    schedule_matmul(m);
    ScheduleTrace trace = ScheduleTrace::capture(m.outputs());
    nlohmann::json j = trace.to_json();
    EXPECT_EQ(j["directives"][3], nlohmann::json::parse(R"({"func": "B", "stage": 0,
        "primitive": "in", "vars": ["C"], "rvars": [false], "ints": [], "target": "B_in_C",
        "option": ""})"));
    EXPECT_TRUE(ScheduleTrace::parse(trace.to_json_string()) == trace);
}

TEST(WrapperTrace, ToCppDeclaresEachWrapper) {
    MatMul m = make_matmul();
    schedule_matmul(m);
    EXPECT_EQ(ScheduleTrace::capture(m.outputs()).to_cpp(), matmul_cpp);
}

TEST(WrapperTrace, AWrapperOfSeveralConsumersPrintsThemAsAList) {
    MatMul m = make_matmul();
    m.C.compute_root();
    m.scaled.compute_root();
    m.B.in({m.C, m.scaled}).compute_root();
    EXPECT_EQ(ScheduleTrace::capture(m.outputs()).to_cpp(),
              "C.compute_root();\n"
              "scaled.compute_root();\n"
              "Func B_in_C_scaled = B.in({C, scaled});\n"
              "B_in_C_scaled.compute_root();\n");
}

TEST(WrapperTrace, PastedCppRecordsTheSameTrace) {
    MatMul recorded = make_matmul();
    schedule_matmul(recorded);
    ScheduleTrace trace = ScheduleTrace::capture(recorded.outputs());
    ASSERT_EQ(trace.to_cpp(), matmul_cpp);

    MatMul pasted = make_matmul();
    ImageParam A = pasted.A, B = pasted.B;
    Func C = pasted.C, scaled = pasted.scaled, out = pasted.out;
    // The text above, pasted.
    C.compute_root();
    C.update(0).split(Var("j"), Var("jo"), Var("ji"), 8, TailStrategy::Auto);
    C.update(0).reorder(Var("ji"), RVar("k.x"), Var("i"), Var("jo"));
    Func B_in_C = B.in(C);
    B_in_C.compute_at(C, Var("jo"));
    B_in_C.vectorize(Var("_0"), 8, TailStrategy::Auto);
    Func A_in = A.in();
    Func scaled_in_out = scaled.in(out);
    scaled_in_out.compute_root();
    EXPECT_TRUE(ScheduleTrace::capture(pasted.outputs()) == trace);
}

TEST(WrapperTrace, ReplayOnAFreshPipelineGivesIdenticalLoweredIR) {
    MatMul original = make_matmul();
    schedule_matmul(original);
    ScheduleTrace trace =
        ScheduleTrace::parse(ScheduleTrace::capture(original.outputs()).to_json_string());
    MatMul fresh = make_matmul();
    trace.apply(fresh.outputs());
    EXPECT_TRUE(ScheduleTrace::capture(fresh.outputs()) == trace);
    EXPECT_EQ(fresh.B.get_contents()->wrappers.at("C")->name, "B_in_C");
    EXPECT_EQ(fresh.A.get_contents()->wrappers.at("")->name, "A_in");
    std::string want = lower_to_text(original.outputs(), "matmul");
    EXPECT_NE(want.find("produce B_in_C"), std::string::npos) << want;
    EXPECT_NE(want.find("allocate B_in_C"), std::string::npos) << want;
    EXPECT_EQ(lower_to_text(fresh.outputs(), "matmul"), want);
}

TEST(WrapperTrace, RemoveScheduleRemovesTheWrappers) {
    MatMul m = make_matmul();
    std::string unscheduled = lower_to_text(m.outputs(), "matmul");
    schedule_matmul(m);
    ScheduleTrace scheduled = ScheduleTrace::capture(m.outputs());
    remove_schedule(m.outputs());
    EXPECT_TRUE(ScheduleTrace::capture(m.outputs()).directives.empty());
    EXPECT_TRUE(m.B.get_contents()->wrappers.empty());
    EXPECT_TRUE(m.A.get_contents()->wrappers.empty());
    EXPECT_TRUE(m.scaled.function()->wrappers.empty());
    EXPECT_EQ(lower_to_text(m.outputs(), "matmul"), unscheduled);
    scheduled.apply(m.outputs());
    EXPECT_TRUE(ScheduleTrace::capture(m.outputs()) == scheduled);
}

TEST(WrapperTrace, ReplayOfAWrapperOfAnUnknownImageNamesTheFuncsAndImages) {
    MatMul m = make_matmul();
    nlohmann::json j = ScheduleTrace::capture(m.outputs()).to_json();
    j["directives"] =
        nlohmann::json::parse(R"([{"func": "Q", "primitive": "in", "target": "Q_in"}])");
    ScheduleTrace trace = ScheduleTrace::from_json(j);
    EXPECT_EQ(error_of([&] { trace.apply(m.outputs()); }),
              "schedule trace: directives[0] (in of 'Q') wraps 'Q', which this pipeline does not "
              "have; its Funcs are C, scaled, out and its ImageParams A, B");
}

TEST(WrapperTrace, ReplayOfAWrapperForAnUnknownConsumerNamesTheFuncs) {
    MatMul m = make_matmul();
    nlohmann::json j = ScheduleTrace::capture(m.outputs()).to_json();
    j["directives"] = nlohmann::json::parse(
        R"([{"func": "B", "primitive": "in", "vars": ["D"], "target": "B_in_D"}])");
    ScheduleTrace trace = ScheduleTrace::from_json(j);
    EXPECT_EQ(error_of([&] { trace.apply(m.outputs()); }),
              "schedule trace: directives[0] (in of 'B') names consumer Func 'D', which this "
              "pipeline does not have; its Funcs are C, scaled, out");
}

TEST(WrapperTrace, ReplayOfAWrapperUnderAnotherNameFails) {
    MatMul m = make_matmul();
    nlohmann::json j = ScheduleTrace::capture(m.outputs()).to_json();
    j["directives"] = nlohmann::json::parse(
        R"([{"func": "B", "primitive": "in", "vars": ["C"], "target": "B_panel"}])");
    ScheduleTrace trace = ScheduleTrace::from_json(j);
    EXPECT_EQ(error_of([&] { trace.apply(m.outputs()); }),
              "schedule trace: directives[0] (in of 'B') names its wrapper 'B_panel', but B.in() "
              "made 'B_in_C'; keep the name in() gives (B_in_C)");
}

TEST(WrapperTrace, ParseRejectsAConsumerMarkedAsAnRVar) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "primitive": "in", "vars": ["g"],
                                      "rvars": [true], "target": "f_in_g"}]})");
              }),
              "schedule trace: directives[0] (in of 'f') marks consumer 'g' as an RVar; in takes "
              "the names of consumer Funcs");
}

TEST(WrapperTrace, ParseRejectsAnInWithoutItsWrappersName) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "primitive": "in", "vars": ["g"]}]})");
              }),
              "schedule trace: directives[0] (in of 'f') needs a target Func name");
}

} // namespace
} // namespace kiln
