#include "schedule/ScheduleTrace.h"

#include <cstdio>
#include <functional>

#include <gtest/gtest.h>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/Param.h"
#include "schedule/Lower.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

// Every Var is named: implicit names ("v12") come from a process-wide counter, so two builds of
// the same pipeline would differ in them.
struct Blur {
    ImageParam in{Float(32), 2, "in"};
    Func blur_x{"blur_x"}, blur_y{"blur_y"};
    std::vector<Func> outputs() const { return {blur_y}; }
};

Blur make_blur(float weight = 1.0f / 3) {
    Blur b;
    Var x("x"), y("y");
    b.blur_x(x, y) = (b.in(x - 1, y) + b.in(x, y) + b.in(x + 1, y)) * weight;
    b.blur_y(x, y) = (b.blur_x(x, y - 1) + b.blur_x(x, y) + b.blur_x(x, y + 1)) * weight;
    return b;
}

// Calls of two Funcs interleaved, so that call order differs from grouping by Func.
void schedule_blur(Blur &b) {
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    b.blur_y.tile(x, y, xo, yo, xi, yi, 64, 32);
    b.blur_x.compute_at(b.blur_y, xo);
    b.blur_y.vectorize(xi, 8).parallel(yo);
    b.blur_x.vectorize(x, 8);
}

// A sum over a 2-D RDom, as an update of a 1-D Func.
struct Total {
    ImageParam in{Float(32), 2, "in"};
    Func total{"total"};
    RDom r{{{0, 64}, {0, 32}}, "r"};
    std::vector<Func> outputs() const { return {total}; }
};

Total make_total() {
    Total t;
    Var x("x");
    t.total(x) = 0.0f;
    t.total(x) += t.in(x + t.r.x, t.r.y);
    return t;
}

// rfactor on r.y with the intermediate's name left to kiln, then a schedule of the intermediate.
Func schedule_total(Total &t) {
    Var x("x"), u("u");
    Func intm = t.total.update(0).rfactor(t.r.y, u);
    intm.compute_root();
    intm.update(0).parallel(u);
    t.total.vectorize(x, 4, TailStrategy::GuardWithIf);
    return intm;
}

// A 3-D Func, for the 3-D gpu_tile.
struct Volume {
    Func vol{"vol"};
    std::vector<Func> outputs() const { return {vol}; }
};

Volume make_volume() {
    Volume v;
    Var x("x"), y("y"), z("z");
    v.vol(x, y, z) = x + y * 2 + z * 3;
    return v;
}

using test::error_of;

Directive directive(const std::string &func, int stage, const std::string &primitive,
                    std::vector<std::string> vars, std::vector<bool> is_rvar,
                    std::vector<int64_t> ints = {}, const std::string &target = "",
                    const std::string &option = "") {
    Directive d;
    d.func = func;
    d.stage = stage;
    d.primitive = primitive;
    d.vars = std::move(vars);
    d.is_rvar = std::move(is_rvar);
    d.ints = std::move(ints);
    d.target = target;
    d.option = option;
    return d;
}

void expect_same_directive(const Directive &want, const Directive &got, size_t i) {
    SCOPED_TRACE("directive " + std::to_string(i));
    EXPECT_EQ(want.func, got.func);
    EXPECT_EQ(want.stage, got.stage);
    EXPECT_EQ(want.primitive, got.primitive);
    EXPECT_EQ(want.vars, got.vars);
    EXPECT_EQ(want.is_rvar, got.is_rvar);
    EXPECT_EQ(want.ints, got.ints);
    EXPECT_EQ(want.target, got.target);
    EXPECT_EQ(want.option, got.option);
}

void expect_same_directives(const std::vector<Directive> &want, const std::vector<Directive> &got) {
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); i++)
        expect_same_directive(want[i], got[i], i);
}

// Saves the trace as JSON, reads it back and replays it on a freshly built pipeline (GPU loops
// are not lowered here, so the pipelines are compared by their traces and C++ text).
void expect_round_trip(const ScheduleTrace &trace, const std::vector<Func> &fresh) {
    ScheduleTrace back = ScheduleTrace::parse(trace.to_json_string());
    EXPECT_TRUE(back == trace) << back.to_json_string();
    back.apply(fresh);
    ScheduleTrace replayed = ScheduleTrace::capture(fresh);
    EXPECT_TRUE(replayed == trace) << replayed.to_json_string();
    EXPECT_EQ(replayed.to_cpp(), trace.to_cpp());
}

TEST(ScheduleTrace, CaptureListsTheDirectivesOfAllFuncsInCallOrder) {
    Blur b = make_blur();
    schedule_blur(b);
    ScheduleTrace trace = ScheduleTrace::capture(b.outputs());
    const std::vector<bool> f1{false}, f3{false, false, false}, f4{false, false, false, false};
    expect_same_directives(
        {
            directive("blur_y", 0, "split", {"x", "xo", "xi"}, f3, {64}, "", "Auto"),
            directive("blur_y", 0, "split", {"y", "yo", "yi"}, f3, {32}, "", "Auto"),
            directive("blur_y", 0, "reorder", {"xi", "yi", "xo", "yo"}, f4),
            directive("blur_x", 0, "compute_at", {"xo"}, f1, {}, "blur_y"),
            directive("blur_y", 0, "split", {"xi", "xi", "xi_vi"}, f3, {8}, "", "Auto"),
            directive("blur_y", 0, "vectorize", {"xi_vi"}, f1),
            directive("blur_y", 0, "parallel", {"yo"}, f1),
            directive("blur_x", 0, "split", {"x", "x", "x_vi"}, f3, {8}, "", "Auto"),
            directive("blur_x", 0, "vectorize", {"x_vi"}, f1),
        },
        trace.directives);
    for (size_t i = 0; i < trace.directives.size(); i++) {
        EXPECT_EQ(trace.directives[i].sequence, int64_t(i) + 1);
    }
    EXPECT_EQ(trace.algorithm_hash, algorithm_hash(b.outputs()));
}

TEST(ScheduleTrace, CaptureIncludesTheIntermediatesMadeByRfactor) {
    Total t = make_total();
    Func intm = schedule_total(t);
    ScheduleTrace trace = ScheduleTrace::capture(t.outputs());
    ASSERT_EQ(trace.directives.size(), 5u);
    EXPECT_EQ(trace.directives[0].primitive, "rfactor");
    EXPECT_EQ(trace.directives[0].target, intm.name());
    EXPECT_EQ(trace.directives[1].func, intm.name());
    EXPECT_EQ(trace.directives[1].primitive, "compute_root");
    EXPECT_EQ(trace.directives[2].func, intm.name());
    EXPECT_EQ(trace.directives[2].stage, 1);
}

TEST(ScheduleTrace, JsonRoundTripGivesAnEqualTrace) {
    Total t = make_total();
    schedule_total(t);
    t.total.store_in(MemoryType::Stack).bound(Var("x"), 0, 64);
    ScheduleTrace trace = ScheduleTrace::capture(t.outputs());
    std::string text = trace.to_json_string();
    ScheduleTrace back = ScheduleTrace::parse(text);
    EXPECT_EQ(back.to_json_string(), text);
    EXPECT_EQ(back.algorithm_hash, trace.algorithm_hash);
    expect_same_directives(trace.directives, back.directives);
    for (size_t i = 0; i < back.directives.size(); i++) {
        EXPECT_EQ(back.directives[i].sequence, trace.directives[i].sequence);
    }
    EXPECT_TRUE(back == trace);
}

TEST(ScheduleTrace, JsonHasTheDocumentedShape) {
    Blur b = make_blur();
    b.blur_y.split(Var("x"), Var("xo"), Var("xi"), 8, TailStrategy::ShiftInwards);
    nlohmann::json j = ScheduleTrace::capture(b.outputs()).to_json();
    EXPECT_EQ(j["schema_version"], 1);
    char hash[24];
    std::snprintf(hash, sizeof(hash), "0x%016llx",
                  static_cast<unsigned long long>(algorithm_hash(b.outputs())));
    EXPECT_EQ(j["algorithm_hash"], hash);
    nlohmann::json want = nlohmann::json::parse(R"({"func": "blur_y", "stage": 0,
        "primitive": "split", "vars": ["x", "xo", "xi"], "rvars": [false, false, false],
        "ints": [8], "target": "", "option": "ShiftInwards"})");
    ASSERT_EQ(j["directives"].size(), 1u);
    EXPECT_EQ(j["directives"][0], want);
}

TEST(ScheduleTrace, ParseAcceptsDirectivesWithTheEmptyFieldsLeftOut) {
    ScheduleTrace trace = ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x2a",
        "directives": [{"func": "f", "primitive": "parallel", "vars": ["y"]},
                       {"func": "f", "primitive": "compute_root"}]})");
    EXPECT_EQ(trace.algorithm_hash, 42u);
    expect_same_directives(
        {directive("f", 0, "parallel", {"y"}, {false}), directive("f", 0, "compute_root", {}, {})},
        trace.directives);
}

TEST(ScheduleTrace, ToCppPrintsOnePasteableCallPerLine) {
    Total t = make_total();
    Var x("x"), u("u");
    Func intm = t.total.update(0).rfactor(t.r.y, u, "total_intm");
    intm.compute_at(t.total, x).store_in(MemoryType::Stack);
    intm.update(0).split(RVar("r.x"), RVar("r.xo"), RVar("r.xi"), 8, TailStrategy::RoundUp);
    t.total.split(x, Var("xo"), Var("xi"), 16, TailStrategy::ShiftInwards);
    t.total.vectorize(Var("xi"), 4).unroll(Var("xo"), 2, TailStrategy::GuardWithIf);
    t.total.update(0).reorder(x, RVar("r.y")).parallel(x);
    t.total.bound(x, 0, 64);
    EXPECT_EQ(ScheduleTrace::capture(t.outputs()).to_cpp(),
              "Func total_intm = total.update(0).rfactor(RVar(\"r.y\"), Var(\"u\"), "
              "\"total_intm\");\n"
              "total_intm.compute_at(total, Var(\"x\"));\n"
              "total_intm.store_in(MemoryType::Stack);\n"
              "total_intm.update(0).split(RVar(\"r.x\"), RVar(\"r.xo\"), RVar(\"r.xi\"), 8, "
              "TailStrategy::RoundUp);\n"
              "total.split(Var(\"x\"), Var(\"xo\"), Var(\"xi\"), 16, TailStrategy::ShiftInwards);\n"
              "total.vectorize(Var(\"xi\"), 4, TailStrategy::Auto);\n"
              "total.unroll(Var(\"xo\"), 2, TailStrategy::GuardWithIf);\n"
              "total.update(0).reorder(Var(\"x\"), RVar(\"r.y\"));\n"
              "total.update(0).parallel(Var(\"x\"));\n"
              "total.bound(Var(\"x\"), 0, 64);\n");
}

TEST(ScheduleTrace, GpuTileRecordsItsSplitsReorderBlocksAndThreads) {
    Blur b = make_blur();
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    b.blur_y.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
    const std::vector<bool> f2{false, false}, f3{false, false, false},
        f4{false, false, false, false};
    expect_same_directives(
        {
            directive("blur_y", 0, "split", {"x", "xo", "xi"}, f3, {16}, "", "Auto"),
            directive("blur_y", 0, "split", {"y", "yo", "yi"}, f3, {8}, "", "Auto"),
            directive("blur_y", 0, "reorder", {"xi", "yi", "xo", "yo"}, f4),
            directive("blur_y", 0, "gpu_blocks", {"xo", "yo"}, f2),
            directive("blur_y", 0, "gpu_threads", {"xi", "yi"}, f2),
        },
        ScheduleTrace::capture(b.outputs()).directives);
}

TEST(ScheduleTrace, GpuTileOfOneLoopRoundTripsAndPrintsItsParts) {
    Blur b = make_blur();
    b.blur_y.gpu_tile(Var("x"), Var("xo"), Var("xi"), 64, TailStrategy::GuardWithIf);
    ScheduleTrace trace = ScheduleTrace::capture(b.outputs());
    EXPECT_EQ(trace.to_cpp(), "blur_y.split(Var(\"x\"), Var(\"xo\"), Var(\"xi\"), 64, "
                              "TailStrategy::GuardWithIf);\n"
                              "blur_y.gpu_blocks(Var(\"xo\"));\n"
                              "blur_y.gpu_threads(Var(\"xi\"));\n");
    expect_round_trip(trace, make_blur().outputs());
}

TEST(ScheduleTrace, GpuTileOfTwoLoopsRoundTripsAndPrintsItsParts) {
    Blur b = make_blur();
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    b.blur_y.gpu_tile(x, y, xo, yo, xi, yi, 16, 8, TailStrategy::RoundUp);
    b.blur_x.compute_at(b.blur_y, xo).gpu_threads(x, y);
    ScheduleTrace trace = ScheduleTrace::capture(b.outputs());
    EXPECT_EQ(trace.to_cpp(),
              "blur_y.split(Var(\"x\"), Var(\"xo\"), Var(\"xi\"), 16, TailStrategy::RoundUp);\n"
              "blur_y.split(Var(\"y\"), Var(\"yo\"), Var(\"yi\"), 8, TailStrategy::RoundUp);\n"
              "blur_y.reorder(Var(\"xi\"), Var(\"yi\"), Var(\"xo\"), Var(\"yo\"));\n"
              "blur_y.gpu_blocks(Var(\"xo\"), Var(\"yo\"));\n"
              "blur_y.gpu_threads(Var(\"xi\"), Var(\"yi\"));\n"
              "blur_x.compute_at(blur_y, Var(\"xo\"));\n"
              "blur_x.gpu_threads(Var(\"x\"), Var(\"y\"));\n");
    expect_round_trip(trace, make_blur().outputs());
}

TEST(ScheduleTrace, GpuTileOfThreeLoopsRoundTripsAndPrintsItsParts) {
    Volume v = make_volume();
    Var x("x"), y("y"), z("z"), xo("xo"), yo("yo"), zo("zo"), xi("xi"), yi("yi"), zi("zi");
    v.vol.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 8, 4, 2);
    ScheduleTrace trace = ScheduleTrace::capture(v.outputs());
    EXPECT_EQ(trace.to_cpp(),
              "vol.split(Var(\"x\"), Var(\"xo\"), Var(\"xi\"), 8, TailStrategy::Auto);\n"
              "vol.split(Var(\"y\"), Var(\"yo\"), Var(\"yi\"), 4, TailStrategy::Auto);\n"
              "vol.split(Var(\"z\"), Var(\"zo\"), Var(\"zi\"), 2, TailStrategy::Auto);\n"
              "vol.reorder(Var(\"xi\"), Var(\"yi\"), Var(\"zi\"), Var(\"xo\"), Var(\"yo\"), "
              "Var(\"zo\"));\n"
              "vol.gpu_blocks(Var(\"xo\"), Var(\"yo\"), Var(\"zo\"));\n"
              "vol.gpu_threads(Var(\"xi\"), Var(\"yi\"), Var(\"zi\"));\n");
    expect_round_trip(trace, make_volume().outputs());
}

TEST(ScheduleTrace, GpuLoopsOfAnUpdateAndGpuSingleThreadRoundTrip) {
    Total t = make_total();
    Var x("x"), u("u");
    Func intm = t.total.update(0).rfactor(t.r.y, u, "total_intm");
    intm.compute_root().gpu_blocks(x, u);
    intm.update(0).gpu_blocks(u).gpu_threads(x);
    t.total.update(0).gpu_single_thread();
    ScheduleTrace trace = ScheduleTrace::capture(t.outputs());
    EXPECT_EQ(trace.to_cpp(),
              "Func total_intm = total.update(0).rfactor(RVar(\"r.y\"), Var(\"u\"), "
              "\"total_intm\");\n"
              "total_intm.compute_root();\n"
              "total_intm.gpu_blocks(Var(\"x\"), Var(\"u\"));\n"
              "total_intm.update(0).gpu_blocks(Var(\"u\"));\n"
              "total_intm.update(0).gpu_threads(Var(\"x\"));\n"
              "total.update(0).gpu_single_thread();\n");
    nlohmann::json j = trace.to_json();
    EXPECT_EQ(j["directives"][5], nlohmann::json::parse(R"({"func": "total", "stage": 1,
        "primitive": "gpu_single_thread", "vars": [], "rvars": [], "ints": [], "target": "",
        "option": ""})"));
    expect_round_trip(trace, make_total().outputs());
}

TEST(ScheduleTrace, PastedGpuCppRecordsTheSameTrace) {
    Blur recorded = make_blur();
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    recorded.blur_y.gpu_tile(x, y, xo, yo, xi, yi, 32, 4, TailStrategy::GuardWithIf);
    recorded.blur_x.compute_root().gpu_single_thread();
    ScheduleTrace trace = ScheduleTrace::capture(recorded.outputs());
    ASSERT_EQ(trace.to_cpp(),
              "blur_y.split(Var(\"x\"), Var(\"xo\"), Var(\"xi\"), 32, "
              "TailStrategy::GuardWithIf);\n"
              "blur_y.split(Var(\"y\"), Var(\"yo\"), Var(\"yi\"), 4, "
              "TailStrategy::GuardWithIf);\n"
              "blur_y.reorder(Var(\"xi\"), Var(\"yi\"), Var(\"xo\"), Var(\"yo\"));\n"
              "blur_y.gpu_blocks(Var(\"xo\"), Var(\"yo\"));\n"
              "blur_y.gpu_threads(Var(\"xi\"), Var(\"yi\"));\n"
              "blur_x.compute_root();\n"
              "blur_x.gpu_single_thread();\n");

    Blur pasted = make_blur();
    Func blur_x = pasted.blur_x, blur_y = pasted.blur_y;
    // The text above, pasted.
    blur_y.split(Var("x"), Var("xo"), Var("xi"), 32, TailStrategy::GuardWithIf);
    blur_y.split(Var("y"), Var("yo"), Var("yi"), 4, TailStrategy::GuardWithIf);
    blur_y.reorder(Var("xi"), Var("yi"), Var("xo"), Var("yo"));
    blur_y.gpu_blocks(Var("xo"), Var("yo"));
    blur_y.gpu_threads(Var("xi"), Var("yi"));
    blur_x.compute_root();
    blur_x.gpu_single_thread();
    EXPECT_TRUE(ScheduleTrace::capture(pasted.outputs()) == trace);
}

TEST(ScheduleTrace, PastedCppRecordsTheSameTrace) {
    Total recorded = make_total();
    Func recorded_intm = recorded.total.update(0).rfactor(recorded.r.y, Var("u"), "total_intm");
    recorded_intm.compute_root();
    recorded.total.vectorize(Var("x"), 4, TailStrategy::RoundUp);
    ScheduleTrace trace = ScheduleTrace::capture(recorded.outputs());
    ASSERT_EQ(trace.to_cpp(),
              "Func total_intm = total.update(0).rfactor(RVar(\"r.y\"), Var(\"u\"), "
              "\"total_intm\");\n"
              "total_intm.compute_root();\n"
              "total.vectorize(Var(\"x\"), 4, TailStrategy::RoundUp);\n");

    Total pasted = make_total();
    Func total = pasted.total;
    // The text above, pasted.
    Func total_intm = total.update(0).rfactor(RVar("r.y"), Var("u"), "total_intm");
    total_intm.compute_root();
    total.vectorize(Var("x"), 4, TailStrategy::RoundUp);
    EXPECT_TRUE(ScheduleTrace::capture(pasted.outputs()) == trace);
}

TEST(ScheduleTrace, ReplayOnAFreshPipelineGivesIdenticalLoweredIR) {
    Blur original = make_blur();
    schedule_blur(original);
    ScheduleTrace trace = ScheduleTrace::capture(original.outputs());

    Blur fresh = make_blur();
    trace.apply(fresh.outputs());
    EXPECT_TRUE(ScheduleTrace::capture(fresh.outputs()) == trace);
    std::string want = lower_to_text(original.outputs(), "blur");
    EXPECT_NE(want.find("vectorized"), std::string::npos) << want;
    EXPECT_EQ(lower_to_text(fresh.outputs(), "blur"), want);
}

/// Schedules a Total with `schedule`, replays its trace (through JSON) on a fresh one and checks
/// that both lower to the same text, in which the update of the rfactor intermediate (the
/// target of directive `intermediate`) runs its u loop in parallel.
void expect_rfactor_replay(const std::function<void(Total &)> &schedule, size_t intermediate) {
    Total original = make_total();
    schedule(original);
    ScheduleTrace trace =
        ScheduleTrace::parse(ScheduleTrace::capture(original.outputs()).to_json_string());
    Total fresh = make_total();
    trace.apply(fresh.outputs());
    EXPECT_TRUE(ScheduleTrace::capture(fresh.outputs()) == trace);
    std::string want = lower_to_text(original.outputs(), "total");
    ASSERT_LT(intermediate, trace.directives.size());
    EXPECT_NE(want.find("parallel (" + trace.directives[intermediate].target + ".s1.u"),
              std::string::npos)
        << want;
    EXPECT_EQ(lower_to_text(fresh.outputs(), "total"), want);
}

TEST(ScheduleTrace, ReplayWithRfactorGivesIdenticalLoweredIR) {
    expect_rfactor_replay(schedule_total, 0);
}

// rfactor of two RVars at once (Halide's list form) replays, and so does rfactor({}), whose
// intermediate does the whole reduction per point of the Func.
TEST(ScheduleTrace, ReplayOfARfactorOfTwoRVarsOrOfNoneGivesIdenticalLoweredIR) {
    expect_rfactor_replay(
        [](Total &t) {
            Var u("u"), v("v");
            Func intm = t.total.update(0).rfactor({{t.r.y, u}, {t.r.x, v}});
            intm.compute_root();
            intm.update(0).parallel(u);
        },
        0);
    Total original = make_total();
    Var x("x"), xo("xo"), xi("xi");
    Func sum = original.total.update(0).rfactor({}, "total_sum");
    original.total.update(0).split(x, xo, xi, 8);
    sum.compute_at(original.total, xo).vectorize(x, 8);
    ScheduleTrace trace = ScheduleTrace::capture(original.outputs());
    EXPECT_EQ(trace.to_cpp(), "Func total_sum = total.update(0).rfactor({}, \"total_sum\");\n"
                              "total.update(0).split(Var(\"x\"), Var(\"xo\"), Var(\"xi\"), 8, "
                              "TailStrategy::Auto);\n"
                              "total_sum.compute_at(total, Var(\"xo\"));\n"
                              "total_sum.vectorize(Var(\"x\"), 8, TailStrategy::Auto);\n");
    Total fresh = make_total();
    ScheduleTrace::parse(trace.to_json_string()).apply(fresh.outputs());
    EXPECT_TRUE(ScheduleTrace::capture(fresh.outputs()) == trace);
    std::string want = lower_to_text(original.outputs(), "total");
    EXPECT_NE(want.find("produce total_sum"), std::string::npos) << want;
    EXPECT_EQ(lower_to_text(fresh.outputs(), "total"), want);
}

// rfactor of the outer part of a split RVar (the split folded into the RDom) replays too: the
// trace keeps the split before the rfactor.
TEST(ScheduleTrace, ReplayOfARfactorOfASplitRVarGivesIdenticalLoweredIR) {
    auto schedule = [](Total &t) {
        Var u("u");
        RVar ro("r_o"), ri("r_i");
        Func intm = t.total.update(0).split(t.r.x, ro, ri, 16).rfactor(ro, u);
        intm.compute_root();
        intm.update(0).parallel(u);
    };
    expect_rfactor_replay(schedule, 1);
}

TEST(ScheduleTrace, SchedulingAndRfactorDoNotChangeTheAlgorithmHash) {
    Total t = make_total();
    uint64_t before = algorithm_hash(t.outputs());
    EXPECT_EQ(algorithm_hash(make_total().outputs()), before);
    schedule_total(t);
    EXPECT_EQ(algorithm_hash(t.outputs()), before);
}

TEST(ScheduleTrace, AChangedConstantChangesTheAlgorithmHash) {
    EXPECT_NE(algorithm_hash(make_blur(0.25f).outputs()), algorithm_hash(make_blur().outputs()));
}

TEST(ScheduleTrace, ReplayOnADifferentAlgorithmFailsNamingBothHashes) {
    Blur original = make_blur();
    schedule_blur(original);
    ScheduleTrace trace = ScheduleTrace::capture(original.outputs());
    Blur other = make_blur(0.25f);
    std::string message = error_of([&] { trace.apply(other.outputs()); });
    char want[200];
    std::snprintf(want, sizeof(want),
                  "schedule trace: recorded for a different algorithm (hash 0x%016llx, this "
                  "pipeline has 0x%016llx); rebuild the pipeline it was recorded on",
                  static_cast<unsigned long long>(trace.algorithm_hash),
                  static_cast<unsigned long long>(algorithm_hash(other.outputs())));
    EXPECT_EQ(message, want);
    EXPECT_TRUE(other.blur_y.directives().empty());
}

TEST(ScheduleTrace, ReplayNamingAnUnknownFuncFailsListingThePipelinesFuncs) {
    Blur original = make_blur();
    schedule_blur(original);
    nlohmann::json j = ScheduleTrace::capture(original.outputs()).to_json();
    j["directives"][6]["func"] = "blur_z";
    ScheduleTrace trace = ScheduleTrace::from_json(j);
    Blur fresh = make_blur();
    EXPECT_EQ(error_of([&] { trace.apply(fresh.outputs()); }),
              "schedule trace: directives[6] (parallel of 'blur_z') names Func 'blur_z', which "
              "this pipeline does not have; its Funcs are blur_x, blur_y");
    EXPECT_TRUE(fresh.blur_y.directives().empty()) << "nothing is applied before the check";
}

TEST(ScheduleTrace, ParseRejectsAnotherSchemaVersion) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(
                      R"({"schema_version": 7, "algorithm_hash": "0x1", "directives": []})");
              }),
              "schedule trace: schema version 7 is not supported (this kiln reads version 1)");
}

TEST(ScheduleTrace, ParseRejectsAMissingFieldNamingIt) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "vars": ["x"]}]})");
              }),
              "schedule trace: missing field 'directives[0].primitive'");
}

TEST(ScheduleTrace, ParseRejectsAFieldOfTheWrongTypeNamingIt) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "primitive": "split", "vars": ["x", "xo", "xi"],
                                      "ints": ["8"]}]})");
              }),
              "schedule trace: field 'directives[0].ints[0]' must be an integer, got string \"8\"");
}

TEST(ScheduleTrace, ParseRejectsADirectiveWithTheWrongNumberOfVariables) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "primitive": "split", "vars": ["x", "xo"],
                                      "ints": [8]}]})");
              }),
              "schedule trace: directives[0] (split of 'f') needs 3 variables, got 2");
}

TEST(ScheduleTrace, ParseRejectsAnUnknownPrimitiveListingTheKnownOnes) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "primitive": "gpu_warp", "vars": ["x"]}]})");
              }),
              "schedule trace: directives[0] has unknown primitive 'gpu_warp'; this kiln knows "
              "split, fuse, reorder, vectorize, unroll, parallel, serial, tensorize, gpu_blocks, "
              "gpu_threads, gpu_single_thread, prefetch, rfactor, compute_at, store_at, "
              "compute_root, "
              "store_root, compute_inline, reorder_storage, bound, store_in, store_nontemporal, "
              "in");
}

TEST(ScheduleTrace, ParseRejectsGpuBlocksOfFourLoopsNamingThem) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "primitive": "gpu_blocks",
                                      "vars": ["x", "y", "z", "w"]}]})");
              }),
              "schedule trace: directives[0] (gpu_blocks of 'f') takes at most 3 loops, got 4 "
              "(x, y, z, w); name at most 3 of them");
}

TEST(ScheduleTrace, ParseRejectsGpuThreadsOfNoLoop) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "primitive": "gpu_threads"}]})");
              }),
              "schedule trace: directives[0] (gpu_threads of 'f') needs at least 1 variables, "
              "got 0");
}

TEST(ScheduleTrace, ParseRejectsGpuSingleThreadWithALoop) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse(R"({"schema_version": 1, "algorithm_hash": "0x1",
                      "directives": [{"func": "f", "stage": 1, "primitive": "gpu_single_thread",
                                      "vars": ["x"]}]})");
              }),
              "schedule trace: directives[0] (gpu_single_thread of 'f.update(0)') needs 0 "
              "variables, got 1");
}

TEST(ScheduleTrace, ReplayOfGpuBlocksNamingALoopTwiceFailsAsTheCallWould) {
    Blur b = make_blur();
    nlohmann::json j = ScheduleTrace::capture(b.outputs()).to_json();
    j["directives"] = nlohmann::json::parse(
        R"([{"func": "blur_y", "primitive": "gpu_blocks", "vars": ["x", "x"]}])");
    ScheduleTrace trace = ScheduleTrace::from_json(j);
    EXPECT_EQ(error_of([&] { trace.apply(b.outputs()); }),
              "gpu_blocks of 'blur_y': 'x' is named twice; name each loop once");
    EXPECT_TRUE(b.blur_y.directives().empty());
}

TEST(ScheduleTrace, ParseRejectsTextThatIsNotJson) {
    EXPECT_EQ(error_of([] {
                  ScheduleTrace::parse("{\"schema_version\": ");
              }).rfind("schedule trace: the text is not valid JSON (", 0),
              0u);
}

TEST(ScheduleTrace, ReplayOntoAnAlreadyScheduledPipelineFails) {
    Blur original = make_blur();
    schedule_blur(original);
    ScheduleTrace trace = ScheduleTrace::capture(original.outputs());
    Blur scheduled = make_blur();
    scheduled.blur_x.compute_root();
    EXPECT_EQ(error_of([&] { trace.apply(scheduled.outputs()); }),
              "schedule trace: 'blur_x' already has 1 scheduling directive (the first is "
              "compute_root); replay a trace only on a freshly built pipeline, before any "
              "scheduling call");
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

// remove_schedule leaves the algorithm as written: no directive, rfactor undone (its intermediate
// no longer called), the same hash, and another schedule replays on it.
TEST(ScheduleTrace, RemoveScheduleRestoresTheAlgorithmAsWritten) {
    Total t = make_total();
    std::string unscheduled = lower_to_text(t.outputs(), "total");
    uint64_t hash = algorithm_hash(t.outputs());
    schedule_total(t);
    ScheduleTrace scheduled = ScheduleTrace::capture(t.outputs());
    remove_schedule(t.outputs());
    EXPECT_TRUE(ScheduleTrace::capture(t.outputs()).directives.empty());
    EXPECT_EQ(algorithm_hash(t.outputs()), hash);
    EXPECT_EQ(reachable_functions({t.total.function()}).size(), 1u);
    EXPECT_EQ(lower_to_text(t.outputs(), "total"), unscheduled);
    scheduled.apply(t.outputs());
    EXPECT_EQ(ScheduleTrace::capture(t.outputs()), scheduled);

    Blur b = make_blur();
    schedule_blur(b);
    remove_schedule(b.outputs());
    EXPECT_TRUE(b.blur_x.directives().empty());
    EXPECT_TRUE(b.blur_y.directives().empty());
}

} // namespace
} // namespace kiln
