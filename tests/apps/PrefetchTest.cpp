// Stage::prefetch (schedule/InjectPrefetch.h): where the prefetches go in the loop nest, how many
// (one per cache line of the region's innermost dimension), what each bound strategy does at the
// end of the loop, the instruction they become, that results do not change, that the directive
// is recorded, printed as C++ and replayed, and every misuse's message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"
#include "lang/IREquality.h"
#include "lang/IRVisitor.h"
#include "tests/lang/ErrorOf.h"

namespace kiln {
namespace {

// The prefetches of a lowered pipeline: how many prefetch calls, the loops around each, and
// whether an if guards them.
class Prefetches : public IRVisitor {
public:
    int calls = 0, guarded = 0;
    std::vector<std::string> loops_around; ///< of the first call, outermost first
    std::vector<std::string> buffers;
    std::vector<Expr> line_extents; ///< of the loops over cache lines

private:
    std::vector<std::string> loops;
    int ifs = 0;
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (op->name.size() > 5 && op->name.substr(op->name.size() - 5) == ".line")
            line_extents.push_back(op->extent);
        loops.push_back(op->name);
        IRVisitor::visit(op);
        loops.pop_back();
    }
    void visit(const IfThenElse *op) override {
        ifs++;
        IRVisitor::visit(op);
        ifs--;
    }
    void visit(const Call *op) override {
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::prefetch) {
            if (calls++ == 0) loops_around = loops;
            guarded += ifs > 0;
            if (const Load *l = op->args[0].as<Load>()) buffers.push_back(l->name);
        }
        IRVisitor::visit(op);
    }
};

Prefetches prefetches_of(const Func &f) {
    Prefetches p;
    p.include(Pipeline(f).lower().body);
    return p;
}

bool contains(const std::vector<std::string> &v, const std::string &s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

using test::error_of;

struct Rows {
    ImageParam in{Float(32), 2, "pf_in"};
    Func f{"pf_f"};
    Var x{"x"}, y{"y"};
    Rows() { f(x, y) = in(x, y) * 2.f + in(x, y + 1); }
    Buffer<float> input(int w, int h) const {
        Buffer<float> b({w, h + 1}, "pf_in");
        for (int j = 0; j < h + 1; j++) {
            for (int i = 0; i < w; i++)
                b(i, j) = float(i * 3 + j * 17 % 11) * 0.5f;
        }
        return b;
    }
};

// f.prefetch(in, y, y, 2): in the loop over y, before its body, the two rows the body reads
// at y + 2, 300 floats each: 20 lines of 16 floats (the first line's start, every 16 floats
// after, and the last element: 18 steps and the end), a loop over lines in a loop over rows
// (40 lines are more than straight-line code is made of), behind an if for the last two rows.
// Same values as without.
TEST(Prefetch, RowsTwoIterationsAheadOnePrefetchPerCacheLineGuarded) {
    Rows r;
    Buffer<float> in = r.input(300, 20);
    r.in.set(in);
    Buffer<float> plain = Pipeline(r.f).realize({300, 20});
    r.f.bound(r.x, 0, 300).prefetch(r.in, r.y, r.y, 2);
    Prefetches p = prefetches_of(r.f);
    ASSERT_EQ(p.calls, 1);
    ASSERT_EQ(p.line_extents.size(), 1u);
    EXPECT_TRUE(is_const(p.line_extents[0], 20)) << p.line_extents[0];
    EXPECT_EQ(p.guarded, 1);
    EXPECT_TRUE(contains(p.loops_around, "pf_f.s0.y")) << testing::PrintToString(p.loops_around);
    EXPECT_FALSE(contains(p.loops_around, "pf_f.s0.x")) << testing::PrintToString(p.loops_around);
    EXPECT_EQ(p.buffers, std::vector<std::string>{"pf_in"});
    std::string lowered = Pipeline(r.f).lowered_text();
    EXPECT_NE(lowered.find("== after inject prefetches"), std::string::npos);
    EXPECT_NE(lowered.find("prefetch(pf_in("), std::string::npos) << lowered;

    CompiledPipeline c = Pipeline(r.f).compile_jit();
    EXPECT_NE(c.llvm_ir().find("@llvm.prefetch"), std::string::npos);
    EXPECT_NE(c.assembly().find("prefetcht0"), std::string::npos);
    Buffer<float> out({300, 20}, "pf_f");
    c.realize_into({out});
    for (int j = 0; j < 20; j++) {
        for (int i = 0; i < 300; i++)
            ASSERT_EQ(out(i, j), plain(i, j)) << i << ", " << j;
    }
}

// A region of constant size and at most 16 lines is prefetched by straight-line code: each
// prefetch at the region's min plus a constant, no loops (inside a register-tiled loop their
// counters and per-line mins cost the tile its registers). The two rows of 100 floats: lines
// at 0, 16, ..., 96 and the last element 99, for rows y + 2 and y + 3. Same values as without.
TEST(Prefetch, ASmallRegionOfConstantSizeIsPrefetchedByStraightLineCode) {
    Rows r;
    Buffer<float> in = r.input(100, 20);
    r.in.set(in);
    Buffer<float> plain = Pipeline(r.f).realize({100, 20});
    r.f.bound(r.x, 0, 100).prefetch(r.in, r.y, r.y, 2);
    Prefetches p = prefetches_of(r.f);
    EXPECT_EQ(p.calls, 16);
    EXPECT_TRUE(p.line_extents.empty());
    EXPECT_EQ(p.guarded, 16);
    std::string lowered = Pipeline(r.f).lowered_text();
    size_t from = lowered.find("== after inject prefetches");
    ASSERT_NE(from, std::string::npos);
    std::string pass = lowered.substr(from, lowered.find("\n== ", from) - from);
    for (int row : {2, 3}) {
        for (int at : {0, 16, 32, 48, 64, 80, 96, 99}) {
            std::string x = at == 0 ? "pf_f.s0.x.loop_min"
                                    : "(pf_f.s0.x.loop_min + " + std::to_string(at) + ")";
            std::string call =
                "prefetch(pf_in(" + x + ", (pf_f.s0.y + " + std::to_string(row) + ")))";
            EXPECT_NE(pass.find(call), std::string::npos) << call << "\n" << pass;
        }
    }
    EXPECT_EQ(pass.find(".line"), std::string::npos) << pass;
    Buffer<float> out = Pipeline(r.f).realize({100, 20});
    for (int j = 0; j < 20; j++) {
        for (int i = 0; i < 100; i++)
            ASSERT_EQ(out(i, j), plain(i, j)) << i << ", " << j;
    }
}

// Clamp and NonFaulting have no guard (Clamp looks at the last row again, NonFaulting past it);
// from outside at: the loop over x prefetches what its body reads at the next y (8 floats of
// two rows: each row's first and last element, 4 straight-line prefetches); values the same
// with each.
TEST(Prefetch, BoundStrategiesAndAFromLoopOutsideAt) {
    for (PrefetchBoundStrategy s :
         {PrefetchBoundStrategy::Clamp, PrefetchBoundStrategy::NonFaulting}) {
        Rows r;
        Buffer<float> in = r.input(40, 9);
        r.in.set(in);
        Buffer<float> plain = Pipeline(r.f).realize({40, 9});
        Var xo("xo"), xi("xi");
        r.f.split(r.x, xo, xi, 8).prefetch(r.in, xo, r.y, 1, s);
        Prefetches p = prefetches_of(r.f);
        ASSERT_EQ(p.calls, 4) << prefetch_strategy_name(s);
        EXPECT_EQ(p.guarded, 0) << prefetch_strategy_name(s);
        EXPECT_TRUE(contains(p.loops_around, "pf_f.s0.xo"));
        Buffer<float> out = Pipeline(r.f).realize({40, 9});
        for (int j = 0; j < 9; j++) {
            for (int i = 0; i < 40; i++)
                ASSERT_EQ(out(i, j), plain(i, j)) << i << ", " << j;
        }
    }
}

// A Func computed at root can be prefetched by its consumer like an input; recorded, saved to
// JSON, printed as C++ and replayed on a fresh pipeline to the same schedule.
TEST(Prefetch, OfAFuncRecordedPrintedAndReplayed) {
    auto build = [](Func &g, Func &h, ImageParam &in) {
        Var x("x"), y("y");
        g(x, y) = in(x, y) + 1.f;
        h(x, y) = g(x, y) * g(x, y);
    };
    ImageParam in(Float(32), 2, "pfr_in");
    Func g("pfr_g"), h("pfr_h");
    build(g, h, in);
    Var y("y");
    g.compute_root();
    h.prefetch(g, y, y, 3, PrefetchBoundStrategy::Clamp);
    Prefetches p = prefetches_of(h);
    ASSERT_EQ(p.calls, 1);
    EXPECT_TRUE(contains(p.buffers, "pfr_g"));
    ScheduleTrace trace = ScheduleTrace::capture({h});
    EXPECT_NE(
        trace.to_cpp().find(
            "pfr_h.prefetch(pfr_g, Var(\"y\"), Var(\"y\"), 3, PrefetchBoundStrategy::Clamp);"),
        std::string::npos)
        << trace.to_cpp();
    ImageParam in2(Float(32), 2, "pfr_in");
    Func g2("pfr_g"), h2("pfr_h");
    build(g2, h2, in2);
    ScheduleTrace::parse(trace.to_json_string()).apply({h2});
    EXPECT_EQ(ScheduleTrace::capture({h2}), trace);
    EXPECT_EQ(prefetches_of(h2).calls, 1);

    // An ImageParam too, by name.
    ImageParam in3(Float(32), 2, "pfr_in");
    Func g3("pfr_g"), h3("pfr_h");
    build(g3, h3, in3);
    Func(h3).prefetch(in3, y, y);
    ScheduleTrace t3 = ScheduleTrace::capture({h3});
    ImageParam in4(Float(32), 2, "pfr_in");
    Func g4("pfr_g"), h4("pfr_h");
    build(g4, h4, in4);
    t3.apply({h4});
    EXPECT_EQ(ScheduleTrace::capture({h4}), t3);
    Prefetches p4 = prefetches_of(h4);
    EXPECT_EQ(p4.calls, 1);
    EXPECT_TRUE(contains(p4.buffers, "pfr_in"));
}

// The loop of an update under RDom::where is trimmed to where the predicate holds
// (trim_no_ops) with a prefetch at the top of its body as without: the prefetch is looked
// through, not taken for work that every iteration does.
TEST(Prefetch, AGuardedUpdatesLoopIsStillTrimmed) {
    auto r_loop_extent = [](bool prefetch) {
        ImageParam in(Float(32), 1, "pft_in");
        Func g("pft_g");
        Var x("x");
        RDom r(0, 64, "r");
        r.where(r.x <= x);
        g(x) = 0.f;
        g(x) += in(r.x);
        if (prefetch) g.update(0).prefetch(in, RVar("r.x"), RVar("r.x"), 16);
        class Extent : public IRVisitor {
        public:
            Expr extent;

        private:
            using IRVisitor::visit;
            void visit(const For *op) override {
                if (op->name == "pft_g.s1.r.x") extent = op->extent;
                IRVisitor::visit(op);
            }
        } v;
        v.include(Pipeline(g).lower().body);
        Buffer<float> b({64}, "pft_in");
        for (int i = 0; i < 64; i++)
            b(i) = float(i % 7);
        in.set(b);
        Buffer<float> out = Pipeline(g).realize(std::vector<int>{40});
        for (int i = 0; i < 40; i++) {
            float want = 0;
            for (int k = 0; k <= i; k++)
                want += float(k % 7);
            EXPECT_EQ(out(i), want) << i;
        }
        return v.extent;
    };
    Expr plain = r_loop_extent(false), prefetched = r_loop_extent(true);
    ASSERT_TRUE(plain.defined() && prefetched.defined());
    EXPECT_FALSE(is_const(plain)) << plain; // trimmed to min(x, 63) + 1
    EXPECT_TRUE(equal(plain, prefetched)) << plain << " vs " << prefetched;
}

TEST(Prefetch, MisusesAreCompileErrorsNamingTheFuncLoopAndFix) {
    {
        Rows r;
        Var z("z");
        r.f.prefetch(r.in, z, z);
        EXPECT_EQ(error_of([&] { Pipeline(r.f).lower(); }),
                  "prefetch of 'pf_in' in 'pf_f': the 'at' loop 'z' is not a loop of 'pf_f'; its "
                  "loops are x, y (innermost first)");
    }
    {
        Rows r;
        r.f.prefetch(r.in, r.y, r.x);
        EXPECT_EQ(error_of([&] { Pipeline(r.f).lower(); }),
                  "prefetch of 'pf_in' in 'pf_f': 'from' ('x') must be 'at' ('y') or a loop "
                  "outside it, but it is inside; the loops are x, y (innermost first)");
    }
    {
        Rows r;
        Var xo("xo"), xi("xi");
        r.f.split(r.x, xo, xi, 8).vectorize(xi).prefetch(r.in, xi, r.y);
        EXPECT_EQ(error_of([&] { Pipeline(r.f).lower(); }),
                  "prefetch of 'pf_in' in 'pf_f': the loop 'xi' is vectorized; prefetch at a "
                  "serial, parallel or unrolled CPU loop (one outside 'xi')");
    }
    {
        Rows r;
        Param<int> k("pf_k");
        EXPECT_EQ(error_of([&] { r.f.prefetch(r.in, r.y, r.y, k); }),
                  "prefetch of 'pf_in' in 'pf_f' at 'y': the offset pf_k is not a constant "
                  "integer; give the number of iterations of 'y' to look ahead, e.g. 1 or 2");
    }
    {
        ImageParam in(Float(32), 1, "pfi_in");
        Func g("pfi_g"), h("pfi_h");
        Var x("x");
        g(x) = in(x)*2.f;
        h(x) = g(x) + 1.f;
        g.prefetch(in, x, x);
        EXPECT_EQ(error_of([&] { Pipeline(h).lower(); }),
                  "prefetch of 'pfi_in' in 'pfi_g' at 'x': 'pfi_g' has no loop 'x' in the "
                  "lowered pipeline (it is inlined: compute it at root or at a loop)");
    }
    {
        ImageParam in(Float(32), 1, "pfn_in"), other(Float(32), 1, "pfn_other");
        Func h("pfn_h");
        Var x("x");
        h(x) = in(x)*2.f;
        h.prefetch(other, x, x);
        EXPECT_EQ(error_of([&] { Pipeline(h).lower(); }),
                  "prefetch of 'pfn_other' in 'pfn_h' at 'x': the body of 'x' does not read "
                  "'pfn_other'; prefetch something the loop reads, or at a loop that reads it");
    }
    {
        Rows r;
        Func undefined("pfu_nothing");
        ImageParam unset;
        EXPECT_EQ(error_of([&] { r.f.prefetch(undefined, r.y, r.y); }),
                  "prefetch in 'pf_f': the Func to prefetch is undefined");
        EXPECT_EQ(error_of([&] { r.f.prefetch(unset, r.y, r.y); }),
                  "prefetch in 'pf_f': the ImageParam to prefetch is undefined");
        EXPECT_EQ(error_of([&] { r.f.prefetch(r.in, r.y, r.y, Expr(int64_t(1) << 40)); }),
                  "prefetch of 'pf_in' in 'pf_f': the offset 1099511627776 does not fit in int");
        EXPECT_TRUE(r.f.directives().empty()) << "a refused prefetch records nothing";
    }
    {
        // A loop inside a vectorized one: x runs inside the vector lanes of yi.
        Rows r;
        Var yo("yo"), yi("yi");
        r.f.split(r.y, yo, yi, 4).vectorize(yi).prefetch(r.in, r.x, r.x);
        EXPECT_EQ(error_of([&] { Pipeline(r.f).lower(); }),
                  "prefetch of 'pf_in' in 'pf_f' at 'x': the loop lies inside the vectorized "
                  "loop 'pf_f.s0.yi'; prefetch is for CPU loops outside vectorized ones");
    }
}

// A trace naming something the pipeline does not have, or a bound strategy that does not exist,
// is refused before anything is applied.
TEST(Prefetch, ATraceWithAnUnknownTargetOrStrategyIsRefused) {
    Rows recorded;
    recorded.f.prefetch(recorded.in, recorded.y, recorded.y, 2);
    nlohmann::json j = ScheduleTrace::capture({recorded.f}).to_json();
    ASSERT_EQ(j["directives"].size(), 1u) << j.dump();
    {
        nlohmann::json bad = j;
        bad["directives"][0]["target"] = "pf_elsewhere";
        Rows fresh;
        EXPECT_EQ(error_of([&] { ScheduleTrace::from_json(bad).apply({fresh.f}); }),
                  "schedule trace: directives[0] (prefetch of 'pf_f') prefetches 'pf_elsewhere', "
                  "which this pipeline does not have; its Funcs are pf_f and its ImageParams "
                  "pf_in");
        EXPECT_TRUE(fresh.f.directives().empty());
    }
    {
        nlohmann::json bad = j;
        bad["directives"][0]["option"] = "Sometimes";
        EXPECT_EQ(error_of([&] { ScheduleTrace::from_json(bad); }),
                  "schedule trace: directives[0] (prefetch of 'pf_f') has prefetch bound strategy "
                  "'Sometimes'; use one of Clamp, GuardWithIf, NonFaulting");
    }
}

} // namespace
} // namespace kiln
