// The schedule fuzzer: random schedules, which the generator believes legal, of a corpus of small
// pipelines, each compiled with the JIT, run, and compared with the reference evaluator; and each
// schedule's trace saved to JSON, read back and replayed on a freshly built copy of the pipeline,
// which must lower to the same code.
//
// Knobs (the defaults are what CI runs):
//   KILN_FUZZ_ITERATIONS=n  schedules per test (default 300)
//   KILN_FUZZ_SECONDS=t     starts no schedule after t seconds (tests/lang/FuzzBudget.h)
//   KILN_FUZZ_SEED=s        the first seed (default 1); seed s always gives the same pipeline and
//                           schedule, so KILN_FUZZ_SEED=s KILN_FUZZ_ITERATIONS=1 replays one case
//   KILN_FUZZ_VERBOSE=1     prints every schedule as C++
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln.h"
#include "lang/IREquality.h"
#include "lang/IRVisitor.h"
#include "schedule/VerifyLowered.h"
#include "tests/lang/FuzzBudget.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------------------------
// Knobs and random numbers

constexpr int default_iterations = 300;
constexpr uint64_t default_seed = 1;

int env_int(const char *name, int fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

uint64_t first_seed() {
    const char *v = std::getenv("KILN_FUZZ_SEED");
    return v && *v ? std::strtoull(v, nullptr, 10) : default_seed;
}

/// A small deterministic generator; the distributions are written out so that a seed means the
/// same schedule with every standard library.
class Rng {
public:
    explicit Rng(uint64_t seed) : engine(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
    /// Uniform in [0, n).
    int below(int n) { return int(engine() % uint64_t(n)); }
    /// Uniform in [lo, hi].
    int range(int lo, int hi) { return lo + below(hi - lo + 1); }
    bool chance(int percent) { return below(100) < percent; }
    template <typename T>
    const T &pick(const std::vector<T> &v) {
        return v[size_t(below(int(v.size())))];
    }
    template <typename T>
    void shuffle(std::vector<T> &v) {
        for (size_t i = v.size(); i > 1; i--)
            std::swap(v[i - 1], v[size_t(below(int(i)))]);
    }

private:
    std::mt19937_64 engine;
};

// ---------------------------------------------------------------------------------------------
// Inputs

/// Inputs read at coordinates that depend on the schedule get this many extra elements on each
/// side: a split with RoundUp or ShiftInwards computes up to (factor - 1) points past the region
/// a Func needs, which reads its producers that much further. The generator keeps the product of
/// the split factors of any one dimension at most max_grain, and the deepest chain of the corpus
/// has three such Funcs, so the over-read stays well inside the margin.
constexpr int max_grain = 32;
constexpr int margin = 128;

std::vector<int> with_margin(const std::vector<int> &extents) {
    std::vector<int> e;
    for (int x : extents)
        e.push_back(x + 2 * margin);
    return e;
}

/// Integers in [lo, hi], at coordinates [-margin, extent + margin) when padded.
Buffer<int> int_input(const std::string &name, const std::vector<int> &extents, int lo, int hi,
                      uint64_t seed, bool padded = true) {
    Buffer<int> b(padded ? with_margin(extents) : extents, name);
    if (padded) b.set_min(std::vector<int>(extents.size(), -margin));
    Rng rng(seed);
    b.for_each_offset([&](int64_t offset) { b.data()[offset] = rng.range(lo, hi); });
    return b;
}

/// Floats in [-1, 1) with all 24 bits of mantissa in use, so that any change in the order of
/// float operations shows in the results.
Buffer<float> float_input(const std::string &name, const std::vector<int> &extents, uint64_t seed) {
    Buffer<float> b(with_margin(extents), name);
    b.set_min(std::vector<int>(extents.size(), -margin));
    Rng rng(seed);
    b.for_each_offset([&](int64_t offset) {
        b.data()[offset] = float(rng.below(1 << 24) - (1 << 23)) / float(1 << 23) * 0.999f;
    });
    return b;
}

// ---------------------------------------------------------------------------------------------
// The corpus. Every Func, Var, RDom, Buffer and Param is named (without digits), so that a trace
// recorded on one build replays on another and the lowered code of two builds can be compared.

/// An update that rfactor may split: update `update` of Func `func`, over the RVar `rvar`.
struct RfactorSite {
    std::string func;
    int update = 0;
    std::string rvar;
};

struct Instance {
    Func output;
    std::vector<int> extents, mins;
    /// Rfactor reassociates float sums: the results may then differ from the reference by
    /// rounding, up to tolerance_terms terms whose magnitudes `magnitude` sums per output point.
    Func magnitude;
    int tolerance_terms = 0;
    std::vector<RfactorSite> rfactor_sites;
    /// False when the pipeline has Funcs with implicit, process-dependent names, so that its
    /// trace cannot replay on another build (none in the corpus now: boundary conditions have
    /// deterministic names, see TraceOfABoundaryConditionPipelineReplaysOnAFreshBuild).
    bool replayable = true;
};

struct PipelineSpec {
    std::string name, description;
    std::function<Instance()> build;
};

Instance pointwise_int() {
    Buffer<int> in = int_input("pwi_in", {13, 11}, -20, 20, 101);
    Func a("pwi_a"), out("pwi_out");
    Var x("x"), y("y");
    a(x, y) = in(x, y) * 3 - x * y;
    out(x, y) = select(a(x, y) > 0, a(x, y), 0 - a(x, y)) + min(x, y) * 2;
    Instance i;
    i.output = out;
    i.extents = {13, 11};
    return i;
}

Instance pointwise_float() {
    Buffer<float> in = float_input("pwf_in", {17, 5}, 102);
    Func a("pwf_a"), out("pwf_out");
    Var x("x"), y("y");
    // a * b + c is where a compiler might contract to a fused multiply-add, which rounds once.
    a(x, y) = in(x, y) * in(x + 1, y) + 0.5f;
    out(x, y) = a(x, y) * 0.75f - sqrt(abs(in(x, y))) / 3.0f + a(x, y + 1);
    Instance i;
    i.output = out;
    i.extents = {17, 5};
    return i;
}

Instance blur() {
    Buffer<float> in = float_input("blur_in", {23, 13}, 103);
    Func bx("blur_x"), by("blur_y");
    Var x("x"), y("y");
    bx(x, y) = (in(x - 1, y) + in(x, y) + in(x + 1, y)) * (1.0f / 3);
    by(x, y) = (bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) * (1.0f / 3);
    Instance i;
    i.output = by;
    i.extents = {23, 13};
    return i;
}

Instance chain() {
    Buffer<int> in = int_input("ch_in", {13, 17}, -50, 50, 104);
    Func a("ch_a"), b("ch_b"), c("ch_c");
    Var x("x"), y("y");
    a(x, y) = in(x, y) * 2 + 1;
    b(x, y) = a(x - 1, y) + a(x + 1, y) * 3;
    c(x, y) = b(x, y - 1) - b(x, y + 2) + a(x, y);
    Instance i;
    i.output = c;
    i.extents = {13, 17};
    i.mins = {-3, 2};
    return i;
}

Instance dag() {
    Buffer<int> in = int_input("dag_in", {11, 13}, -30, 30, 105);
    Func p("dag_p"), l("dag_l"), r("dag_r"), out("dag_out");
    Var x("x"), y("y");
    p(x, y) = in(x, y) * 3 - y;
    l(x, y) = p(x, y) + p(x + 1, y);
    r(x, y) = p(x, y + 1) * 2 - p(x, y);
    out(x, y) = l(x, y) * 2 - r(x, y) + (l(x, y) - r(x, y)) % 7;
    Instance i;
    i.output = out;
    i.extents = {11, 13};
    return i;
}

Instance boundary() {
    Buffer<int> in = int_input("bc_in", {7, 5}, -9, 9, 106, false);
    Func re = repeat_edge(in), ce = constant_exterior(in, -3), mi = mirror_interior(in);
    Func mid("bc_mid"), out("bc_out");
    Var x("x"), y("y");
    mid(x, y) = re(x - 3, y + 2) * 4 + mi(x + 1, y - 3);
    out(x, y) = mid(x, y) + ce(x - 5, y - 1) * 2 + mid(x + 1, y);
    Instance i;
    i.output = out;
    i.extents = {13, 11};
    return i;
}

Instance matmul() {
    const int ni = 13, nj = 11, nk = 7;
    Buffer<float> a = float_input("mm_a", {nk, nj}, 107), b = float_input("mm_b", {ni, nk}, 108);
    Func mm("mm"), mag("mm_mag");
    Var i("i"), j("j");
    RDom r(0, nk, "mm_r"), s(0, nk, "mm_s");
    mm(i, j) = 0.0f;
    mm(i, j) += a(r, j) * b(i, r);
    mag(i, j) = 0.0f;
    mag(i, j) += abs(a(s, j) * b(i, s));
    Instance inst;
    inst.output = mm;
    inst.extents = {ni, nj};
    inst.magnitude = mag;
    inst.tolerance_terms = nk;
    inst.rfactor_sites = {{"mm", 0, "mm_r.x"}};
    return inst;
}

Instance sum_rfactor() {
    Buffer<float> in = float_input("sr_in", {5 + 17, 13}, 109);
    Func total("sr_total"), mag("sr_mag");
    Var x("x");
    RDom r({{0, 17}, {0, 13}}, "sr_r"), s({{0, 17}, {0, 13}}, "sr_s");
    total(x) = 0.0f;
    total(x) += in(x + r.x, r.y);
    mag(x) = 0.0f;
    mag(x) += abs(in(x + s.x, s.y));
    Instance i;
    i.output = total;
    i.extents = {5};
    i.magnitude = mag;
    i.tolerance_terms = 17 * 13;
    i.rfactor_sites = {{"sr_total", 0, "sr_r.x"}, {"sr_total", 0, "sr_r.y"}};
    return i;
}

// RDom::where with a predicate on both RVars, the pure Vars and a modulo: linear conjuncts the
// lowering may turn into loop bounds (trim_no_ops), under whatever splits, reorders, unrolling
// and vectorization the fuzzer picks, and one that stays a guard. Integer sums: rfactor is exact.
Instance where_triangle() {
    Buffer<int> in = int_input("wt_in", {19, 9}, -50, 50, 121);
    Func out("wt_out");
    Var x("x"), y("y");
    RDom r({{0, 19}, {0, 9}}, "wt_r");
    r.where(r.x <= r.y + x && r.y + y >= 3 && (r.x + r.y) % 3 != 1);
    out(x, y) = x - y;
    out(x, y) += in(r.x, r.y) * (r.x - x);
    Instance i;
    i.output = out;
    i.extents = {7, 6};
    i.rfactor_sites = {{"wt_out", 0, "wt_r.x"}, {"wt_out", 0, "wt_r.y"}};
    return i;
}

Instance sum_int_inline() {
    Buffer<int> in = int_input("si_in", {23, 7}, -1000, 1000, 110);
    Func out("si_out");
    Var y("y");
    RDom r(0, 23, "si_r");
    out(y) = sum(in(r, y), "si_sum") * 2 + 1;
    Instance i;
    i.output = out;
    i.extents = {7};
    i.rfactor_sites = {{"si_sum", 0, "si_r.x"}};
    return i;
}

Instance argmax_rows() {
    // Values from a small range, so that rows have ties and "the first largest" matters.
    Buffer<int> in = int_input("am_in", {13, 11}, 0, 5, 111);
    Func out("am_out");
    Var y("y");
    RDom r(0, 13, "am_r");
    out(y) = Tuple(argmax(in(r, y), "am_red"));
    Instance i;
    i.output = out;
    i.extents = {11};
    return i;
}

Instance euclid() {
    Buffer<int> in = int_input("ed_in", {13, 11}, -100, 100, 112);
    Func a("ed_a"), out("ed_out");
    Var x("x"), y("y");
    // Negative dividends and divisors; no divisor is ever zero, at any coordinate.
    a(x, y) = (in(x, y) - 40) / (y % 3 - 4) + (x - 7) % (x % 5 - 6);
    out(x, y) = a(x, y) * 3 + (a(x + 1, y) / 4) % 5 + (x - 9) / 2 - (y - 6) % 3 + (0 - x) / 3 +
                a(x, y) % -7;
    Instance i;
    i.output = out;
    i.extents = {13, 11};
    return i;
}

Instance param_rdom() {
    Param<int> n("pr_n", 9), k("pr_k", -3);
    Buffer<int> in = int_input("pr_in", {17, 9}, -100, 100, 113);
    Func s("pr_s"), out("pr_out");
    Var x("x");
    RDom r(0, n, "pr_r");
    s(x) = 0;
    s(x) += in(x, r) * k;
    out(x) = s(x) + k * x;
    Instance i;
    i.output = out;
    i.extents = {17};
    i.rfactor_sites = {{"pr_s", 0, "pr_r.x"}};
    return i;
}

Instance histogram() {
    Buffer<int> in = int_input("hi_in", {13, 11}, -2, 18, 114, false);
    Func hist("hi_hist"), out("hi_out");
    Var x("x");
    RDom r({{0, 13}, {0, 11}}, "hi_r");
    hist(x) = 0;
    hist(clamp(in(r.x, r.y), 0, 15)) += 1;
    out(x) = hist(x) * 3 + x;
    Instance i;
    i.output = out;
    i.extents = {16};
    return i;
}

Instance scan() {
    Buffer<int> in = int_input("sc_in", {13, 7}, -100, 100, 115);
    Func cs("sc_cumsum"), out("sc_out");
    Var x("x"), y("y");
    RDom r(1, 12, "sc_r");
    cs(x, y) = in(x, y);
    cs(r, y) = cs(r - 1, y) + cs(r, y);
    out(x, y) = cs(x, y) * 2 - x;
    Instance i;
    i.output = out;
    i.extents = {13, 7};
    return i;
}

Instance independent_update() {
    // g is used by both stages of f, so it can only be computed outside f.
    Buffer<int> in = int_input("iu_in", {23}, -100, 100, 116);
    Func g("iu_g"), f("iu_f"), out("iu_out");
    Var x("x");
    RDom r(2, 19, "iu_r");
    g(x) = in(x)*5 - x;
    f(x) = x * 2 + g(x);
    f(r) = f(r) * 3 - g(r + 1);
    out(x) = f(x) + f(x + 1);
    Instance i;
    i.output = out;
    i.extents = {23};
    return i;
}

Instance matmul_compute() {
    Buffer<int> a = int_input("mc_a", {7, 7}, -20, 20, 117),
                b = int_input("mc_b", {13, 7}, -20, 20, 118);
    RDom k(0, 7, "mc_k");
    Func mc = compute(
        {13, 7}, [&](Var i, Var j) { return sum(a(k, j) * b(i, k), "mc_sum"); }, "mc");
    Instance i;
    i.output = mc;
    i.extents = {13, 7};
    i.rfactor_sites = {{"mc_sum", 0, "mc_k.x"}};
    return i;
}

Instance narrow_blur() {
    // uint8 in, uint16 sums, uint8 out: narrow vector lanes, widening and narrowing casts, and
    // unsigned division; the sums never overflow uint16.
    Buffer<uint8_t> in({21 + 2 * margin, 9 + 2 * margin}, "nb_in");
    in.set_min({-margin, -margin});
    Rng rng(119);
    in.for_each_offset([&](int64_t offset) { in.data()[offset] = uint8_t(rng.below(256)); });
    Func wide("nb_wide"), bx("nb_x"), out("nb_out");
    Var x("x"), y("y");
    wide(x, y) = cast<uint16_t>(in(x, y));
    bx(x, y) = wide(x - 1, y) + wide(x, y) * 2 + wide(x + 1, y);
    out(x, y) = cast<uint8_t>((bx(x, y - 1) + bx(x, y) * 2 + bx(x, y + 1) + 8) / 16);
    Instance i;
    i.output = out;
    i.extents = {21, 9};
    return i;
}

Instance image_param() {
    // The input's shape is symbolic (an ImageParam), and a Param scales the stencil.
    ImageParam in(Int(32), 2, "ip_in");
    in.set(int_input("ip_buffer", {11, 19}, -50, 50, 120));
    Param<int> scale("ip_scale", 3);
    Func a("ip_a"), out("ip_out");
    Var x("x"), y("y");
    a(x, y) = in(x, y) * scale - in(x, y + 1);
    out(x, y) = a(x, y) + a(x + 1, y - 1) * 2 + max(a(x, y + 2), 0);
    Instance i;
    i.output = out;
    i.extents = {11, 19};
    return i;
}

const std::vector<PipelineSpec> &corpus() {
    static const std::vector<PipelineSpec> specs = {
        {"pointwise_int", "two pointwise int32 stages with select and min", pointwise_int},
        {"pointwise_float", "two pointwise float stages (a * b + c, sqrt, abs), exact",
         pointwise_float},
        {"blur", "3x3 box blur in two float stages, exact", blur},
        {"chain", "three int stages with stencils, output min (-3, 2)", chain},
        {"dag", "one producer with two consumers joined by the output", dag},
        {"boundary", "repeat_edge, constant_exterior and mirror_interior of a 7x5 Buffer",
         boundary},
        {"matmul", "13x11x7 float matrix product as an update over an RDom", matmul},
        {"sum_rfactor", "sum over a 17x13 RDom per output, rfactor candidate", sum_rfactor},
        {"sum_int_inline", "inline sum() over a 1-D RDom, rfactor candidate", sum_int_inline},
        {"where_triangle", "an update over an RDom restricted by where(), rfactor candidate",
         where_triangle},
        {"argmax_rows", "Tuple-valued argmax over the rows of an image with ties", argmax_rows},
        {"euclid", "Euclidean division and modulo of negative values", euclid},
        {"param_rdom", "a Param as an RDom extent and in arithmetic", param_rdom},
        {"histogram", "16-bin histogram (scattered update) consumed by a pure stage", histogram},
        {"scan", "prefix sum along x (an update reading its previous site)", scan},
        {"independent_update",
         "an update whose RVar writes only its own site; a producer used by both stages",
         independent_update},
        {"matmul_compute", "TVM-style compute() and sum() integer matrix product", matmul_compute},
        {"narrow_blur", "uint8 blur through uint16 sums, 21x9", narrow_blur},
        {"image_param", "stencil over an ImageParam (symbolic shape) with a Param", image_param},
    };
    return specs;
}

// ---------------------------------------------------------------------------------------------
// The reference: each pipeline evaluated once, unscheduled, by the reference evaluator.

struct Reference {
    std::vector<BufferBase> values;
    BufferBase magnitude;
};

const Reference &reference_of(size_t index) {
    static std::map<size_t, Reference> cache;
    auto it = cache.find(index);
    if (it != cache.end()) return it->second;
    Instance inst = corpus()[index].build();
    Reference r;
    r.values = reference_realize_all(inst.output, inst.extents, inst.mins);
    if (inst.magnitude.defined()) {
        r.magnitude = reference_realize(inst.magnitude, inst.extents, inst.mins);
    }
    return cache[index] = r;
}

// ---------------------------------------------------------------------------------------------
// The call graph

/// The Funcs a definition calls, other than the Func itself.
class FuncCalls : public IRVisitor {
public:
    explicit FuncCalls(const std::string &self) : self(self) {}
    std::map<std::string, FunctionPtr> calls;

    void include_definition(const Definition &d) {
        for (const Expr &e : d.args)
            include(e);
        for (const Expr &e : d.values)
            include(e);
        if (!d.rdom) return;
        for (const ReductionVariable &v : d.rdom->vars) {
            include(v.min);
            include(v.extent);
        }
    }

private:
    std::string self;
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Func && op->name != self && op->func) {
            calls[op->name] = op->func;
        }
    }
};

/// Whether the update may run its RVar `r` in any order: it writes a site that has r as a whole
/// argument and reads its own Func only at that site.
class ReadsOtherSites : public IRVisitor {
public:
    ReadsOtherSites(const std::string &f, const std::vector<Expr> &site) : f(f), site(site) {}
    bool found = false;

private:
    const std::string &f;
    const std::vector<Expr> &site;
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type != Call::Func || op->name != f) return;
        for (size_t i = 0; i < site.size(); i++)
            found |= !equal(op->args[i], site[i]);
    }
};

bool rvar_is_independent(const FunctionContents &f, const Definition &d, const std::string &r) {
    bool in_site = false;
    for (const Expr &a : d.args) {
        const Variable *v = a.as<Variable>();
        in_site |= v && v->name == r;
    }
    if (!in_site) return false;
    ReadsOtherSites reads(f.name, d.args);
    for (const Expr &v : d.values)
        reads.include(v);
    return !reads.found;
}

// ---------------------------------------------------------------------------------------------
// The schedule generator. It keeps a model of every stage's loop nest (as schedule/Schedule.cpp
// builds it from the directives) and of where every Func is computed and stored, and calls only
// public scheduling methods, choosing among the choices it believes legal.

struct LoopModel {
    std::string name;
    bool is_rvar = false;
    /// The original RVars (or Var) this loop covers, through splits and fuses: an RVar loop may
    /// run in any order only when every one of them is independent.
    std::set<std::string> originals;
    std::optional<int> constant; ///< the extent, when the compiler sees a constant
    std::optional<int> known;    ///< the extent in this run, when the generator knows it
    int grain = 1;               ///< product of the factors that split the original dimension
    bool from_inner = false;     ///< an inner loop of a split, or made from one
    ForType type = ForType::Serial;
    bool no_parallel = false;  ///< a Func is stored outside this loop and computed inside it
    bool no_vectorize = false; ///< a Func is computed inside this loop
};

struct StageModel {
    int index = 0;
    std::vector<LoopModel> loops; ///< innermost first
    bool rvars_reorderable = true;
    std::set<std::string> independent_rvars;
    std::set<std::string> names; ///< every loop name the stage has had
    bool fused = false;          ///< the stage has a fused loop
    std::map<std::string, FunctionPtr> calls;
};

/// A loop of a stage of a Func, as a compute or store level.
struct Level {
    std::string func;
    int stage = 0;
    std::string loop;
    bool is_rvar = false;
    bool operator==(const Level &o) const {
        return func == o.func && stage == o.stage && loop == o.loop;
    }
};

struct FuncModel {
    Func func;
    bool is_output = false;
    bool inlined = false;
    std::vector<StageModel> stages;
    std::vector<Level> chain; ///< the loops around its computation, outermost first
};

class ScheduleGenerator {
public:
    ScheduleGenerator(Rng &rng, const Instance &inst) : rng(rng), inst(inst) {}

    void generate() {
        apply_rfactors();
        build_models();
        if (rng.chance(15)) bound_output();
        decide_inlining();
        for (const std::string &name : consumers_first) {
            FuncModel &fm = funcs.at(name);
            if (fm.inlined) continue;
            for (StageModel &st : fm.stages)
                transform_stage(fm, st);
        }
        for (const std::string &name : consumers_first)
            place(funcs.at(name));
        for (const std::string &name : consumers_first) {
            FuncModel &fm = funcs.at(name);
            if (fm.inlined) continue;
            for (StageModel &st : fm.stages)
                choose_loop_types(fm, st);
            choose_storage(fm);
        }
    }

private:
    Rng &rng;
    const Instance &inst;
    std::map<std::string, FuncModel> funcs;
    std::vector<std::string> consumers_first;
    int counter = 0;

    // -- models ---------------------------------------------------------------------------------

    void apply_rfactors() {
        std::set<std::string> done;
        for (const RfactorSite &site : inst.rfactor_sites) {
            std::string key = site.func + "/" + std::to_string(site.update);
            if (done.count(key) || !rng.chance(45)) continue;
            done.insert(key);
            FunctionPtr f = find_function(site.func);
            Func(f).update(site.update).rfactor(RVar(site.rvar), Var("u"), site.func + "_intm");
        }
    }

    FunctionPtr find_function(const std::string &name) const {
        for (const FunctionPtr &f : reachable_functions({inst.output.function()})) {
            if (f->name == name) return f;
        }
        ADD_FAILURE() << "the corpus names Func '" << name << "', which the pipeline lacks";
        return inst.output.function();
    }

    void build_models() {
        std::vector<std::string> producers_first;
        std::set<std::string> seen;
        std::function<void(const FunctionPtr &)> visit = [&](const FunctionPtr &f) {
            if (!seen.insert(f->name).second) return;
            FuncModel fm;
            fm.func = Func(f);
            fm.is_output = f == inst.output.function();
            for (int s = 0; s <= int(f->updates.size()); s++)
                fm.stages.push_back(stage_model(*f, s));
            for (const StageModel &st : fm.stages) {
                for (auto &[name, g] : st.calls)
                    visit(g);
            }
            funcs[f->name] = std::move(fm);
            producers_first.push_back(f->name);
        };
        visit(inst.output.function());
        consumers_first.assign(producers_first.rbegin(), producers_first.rend());
    }

    StageModel stage_model(const FunctionContents &f, int s) {
        const Definition &d = s == 0 ? f.init : f.updates[size_t(s) - 1];
        StageModel st;
        st.index = s;
        FuncCalls calls(f.name);
        calls.include_definition(d);
        st.calls = calls.calls;
        bool is_output = &f == inst.output.function().get();
        if (d.rdom) {
            for (const ReductionVariable &rv : d.rdom->vars) {
                LoopModel l;
                l.name = rv.name;
                l.originals = {rv.name};
                l.is_rvar = true;
                if (auto e = as_const_int(rv.extent)) l.constant = l.known = int(*e);
                add_loop(st, l);
                if (rvar_is_independent(f, d, rv.name)) {
                    st.independent_rvars.insert(rv.name);
                } else {
                    st.rvars_reorderable = false;
                }
            }
        }
        for (size_t i = 0; i < f.args.size(); i++) {
            bool in_site = s == 0;
            for (const Expr &a : d.args) {
                const Variable *v = a.as<Variable>();
                in_site |= v && !v->rdom && v->name == f.args[i];
            }
            if (!in_site) continue;
            LoopModel l;
            l.name = f.args[i];
            l.originals = {f.args[i]};
            if (is_output) l.known = inst.extents[i];
            add_loop(st, l);
        }
        return st;
    }

    static void add_loop(StageModel &st, const LoopModel &l) {
        st.loops.push_back(l);
        st.names.insert(l.name);
    }

    static Stage stage_of(const FuncModel &fm, const StageModel &st) {
        return st.index == 0 ? Stage(fm.func.function(), 0) : fm.func.update(st.index - 1);
    }

    static VarOrRVar var_of(const LoopModel &l) { return VarOrRVar(l.name, l.is_rvar); }

    std::string fresh(StageModel &st, const LoopModel &from, const char *tag) {
        std::string name;
        do {
            // RVars keep their RDom name as a prefix: the compiler finds the RVar a split loop
            // came from by its name.
            name = from.name + (from.is_rvar ? "" : "_") + tag + std::to_string(++counter);
        } while (st.names.count(name));
        st.names.insert(name);
        return name;
    }

    // -- output bounds and inlining ---------------------------------------------------------------

    void bound_output() {
        FuncModel &out = funcs.at(inst.output.name());
        const std::vector<std::string> &args = out.func.args();
        for (size_t d = 0; d < args.size(); d++) {
            int mn = inst.mins.empty() ? 0 : inst.mins[d];
            out.func.bound(Var(args[d]), mn, inst.extents[d]);
            for (StageModel &st : out.stages) {
                for (LoopModel &l : st.loops) {
                    if (!l.is_rvar && l.name == args[d]) l.constant = inst.extents[d];
                }
            }
        }
    }

    void decide_inlining() {
        for (const std::string &name : consumers_first) {
            FuncModel &fm = funcs.at(name);
            bool can_inline = !fm.is_output && fm.stages.size() == 1;
            if (can_inline && rng.chance(35)) {
                fm.inlined = true;
                if (rng.chance(50)) fm.func.compute_inline();
            }
        }
    }

    // -- loop structure ---------------------------------------------------------------------------

    /// The tail strategies legal for a split of loop l by factor in stage st of fm.
    std::vector<TailStrategy> legal_tails(const FuncModel &fm, const StageModel &st,
                                          const LoopModel &l, int factor) const {
        if (l.is_rvar) return {TailStrategy::GuardWithIf, TailStrategy::Auto};
        std::vector<TailStrategy> tails = {TailStrategy::GuardWithIf};
        // Outputs write exactly their buffer: no shifting below it, no rounding past it.
        bool fits = !fm.is_output || (l.known && *l.known >= factor);
        bool divides = !fm.is_output || (l.known && *l.known % factor == 0);
        if (st.index == 0 && fits) {
            tails.push_back(TailStrategy::ShiftInwards);
            tails.push_back(TailStrategy::Auto);
        }
        if (st.index > 0) tails.push_back(TailStrategy::Auto);
        // In an update, the iterations past the end of a loop made from the inner loop of a
        // split run points of the next tile again, applying the update twice; the compiler
        // rejects it. Past the end of an original or outer loop lies only the region's end.
        bool round_up_ok = st.index == 0 || !l.from_inner;
        if (divides && round_up_ok) tails.push_back(TailStrategy::RoundUp);
        return tails;
    }

    int pick_factor(int limit_grain) {
        static const std::vector<int> factors = {2, 3, 4, 5, 7, 8, 16};
        std::vector<int> ok;
        for (int f : factors) {
            if (f <= limit_grain) ok.push_back(f);
        }
        return ok.empty() ? 0 : rng.pick(ok);
    }

    /// Applies a split to the model: loop i becomes inner (at i) and outer (at i + 1).
    static void model_split(StageModel &st, size_t i, const std::string &outer,
                            const std::string &inner, int factor) {
        LoopModel old = st.loops[i];
        LoopModel in = old, out = old;
        in.name = inner;
        in.constant = in.known = factor;
        in.from_inner = true;
        out.name = outer;
        if (old.constant) out.constant = (*old.constant + factor - 1) / factor;
        if (old.known) out.known = (*old.known + factor - 1) / factor;
        out.grain = old.grain * factor;
        st.loops[i] = in;
        st.loops.insert(st.loops.begin() + long(i) + 1, out);
        st.names.insert(outer);
        st.names.insert(inner);
    }

    /// Splits loop i of the stage, choosing factor, names and tail; false if it cannot.
    bool split(FuncModel &fm, StageModel &st, size_t i) {
        LoopModel l = st.loops[i];
        int factor = pick_factor(max_grain / l.grain);
        if (!factor) return false;
        std::vector<TailStrategy> tails = legal_tails(fm, st, l, factor);
        TailStrategy tail = rng.pick(tails);
        std::string outer = !l.is_rvar && rng.chance(30) ? l.name : fresh(st, l, "o");
        std::string inner = fresh(st, l, "i");
        VarOrRVar o(outer, l.is_rvar), in(inner, l.is_rvar);
        if (st.index == 0 && rng.chance(50)) {
            fm.func.split(var_of(l), o, in, factor, tail);
        } else {
            stage_of(fm, st).split(var_of(l), o, in, factor, tail);
        }
        model_split(st, i, outer, inner, factor);
        return true;
    }

    void reorder_model(StageModel &st, const std::vector<std::string> &order) {
        std::vector<size_t> positions;
        for (const std::string &n : order)
            positions.push_back(index_of(st, n));
        std::vector<size_t> sorted(positions);
        std::sort(sorted.begin(), sorted.end());
        std::vector<LoopModel> loops = st.loops;
        for (size_t k = 0; k < sorted.size(); k++)
            loops[sorted[k]] = st.loops[positions[k]];
        st.loops = loops;
    }

    static size_t index_of(const StageModel &st, const std::string &name) {
        for (size_t i = 0; i < st.loops.size(); i++) {
            if (st.loops[i].name == name) return i;
        }
        ADD_FAILURE() << "generator: no loop '" << name << "'";
        return 0;
    }

    void tile(FuncModel &fm, StageModel &st) {
        std::vector<size_t> pure;
        for (size_t i = 0; i < st.loops.size(); i++) {
            if (!st.loops[i].is_rvar) pure.push_back(i);
        }
        if (pure.size() < 2) return;
        rng.shuffle(pure);
        LoopModel a = st.loops[pure[0]], b = st.loops[pure[1]];
        int fa = pick_factor(max_grain / a.grain), fb = pick_factor(max_grain / b.grain);
        if (!fa || !fb) return;
        std::vector<TailStrategy> ta = legal_tails(fm, st, a, fa), tb = legal_tails(fm, st, b, fb);
        std::vector<TailStrategy> both;
        for (TailStrategy t : ta) {
            if (std::find(tb.begin(), tb.end(), t) != tb.end()) both.push_back(t);
        }
        TailStrategy tail = rng.pick(both);
        Stage s = stage_of(fm, st);
        std::string ai = fresh(st, a, "i"), bi = fresh(st, b, "i");
        std::string ao = a.name, bo = b.name;
        if (rng.chance(50)) {
            s.tile(var_of(a), var_of(b), Var(ai), Var(bi), fa, fb, tail);
        } else if (rng.chance(50)) {
            ao = fresh(st, a, "o");
            bo = fresh(st, b, "o");
            s.tile(var_of(a), var_of(b), Var(ao), Var(bo), Var(ai), Var(bi), fa, fb, tail);
        } else {
            ao = fresh(st, a, "o");
            bo = fresh(st, b, "o");
            s.tile({var_of(a), var_of(b)}, {Var(ao), Var(bo)}, {Var(ai), Var(bi)}, {fa, fb}, tail);
        }
        model_split(st, index_of(st, a.name), ao, ai, fa);
        model_split(st, index_of(st, b.name), bo, bi, fb);
        reorder_model(st, {ai, bi, ao, bo});
    }

    void fuse(FuncModel &fm, StageModel &st) {
        std::vector<size_t> candidates;
        for (size_t i = 0; i + 1 < st.loops.size(); i++) {
            const LoopModel &a = st.loops[i], &b = st.loops[i + 1];
            if (a.is_rvar != b.is_rvar || a.grain * b.grain > max_grain) continue;
            candidates.push_back(i);
        }
        if (candidates.empty()) return;
        size_t i = rng.pick(candidates);
        LoopModel in = st.loops[i], out = st.loops[i + 1];
        LoopModel fused = in;
        fused.name = !in.is_rvar && rng.chance(30) ? in.name : fresh(st, in, "fz");
        fused.originals.insert(out.originals.begin(), out.originals.end());
        fused.constant.reset();
        fused.known.reset();
        if (in.constant && out.constant) fused.constant = *in.constant * *out.constant;
        if (in.known && out.known) fused.known = *in.known * *out.known;
        fused.grain = in.grain * out.grain;
        fused.from_inner = in.from_inner || out.from_inner;
        stage_of(fm, st).fuse(var_of(in), var_of(out), VarOrRVar(fused.name, in.is_rvar));
        st.loops[i] = fused;
        st.loops.erase(st.loops.begin() + long(i) + 1);
        st.fused = true;
        st.names.insert(fused.name);
    }

    void reorder(FuncModel &fm, StageModel &st) {
        if (st.loops.size() < 2) return;
        std::vector<size_t> subset;
        for (size_t i = 0; i < st.loops.size(); i++) {
            if (rng.chance(70)) subset.push_back(i);
        }
        if (subset.size() < 2) return;
        std::vector<std::string> names;
        for (size_t i : subset)
            names.push_back(st.loops[i].name);
        rng.shuffle(names);
        StageModel after = st;
        reorder_model(after, names);
        if (!st.rvars_reorderable) {
            // The RVars of a reduction keep their relative order: put them back, in order, in
            // the slots the shuffle left to RVars, and name every loop.
            std::vector<LoopModel> rvars;
            for (const LoopModel &l : st.loops) {
                if (l.is_rvar) rvars.push_back(l);
            }
            size_t next = 0;
            for (LoopModel &l : after.loops) {
                if (l.is_rvar) l = rvars[next++];
            }
            names.clear();
            for (const LoopModel &l : after.loops)
                names.push_back(l.name);
        }
        std::vector<VarOrRVar> vars;
        for (const std::string &n : names)
            vars.push_back(var_of(st.loops[index_of(st, n)]));
        if (st.index == 0 && rng.chance(50)) {
            fm.func.reorder(vars);
        } else {
            stage_of(fm, st).reorder(vars);
        }
        reorder_model(st, names);
    }

    void transform_stage(FuncModel &fm, StageModel &st) {
        int ops = rng.range(0, 3);
        for (int k = 0; k < ops; k++) {
            int what = rng.below(10);
            if (what < 4) {
                split(fm, st, size_t(rng.below(int(st.loops.size()))));
            } else if (what < 6) {
                tile(fm, st);
            } else if (what < 7) {
                fuse(fm, st);
            } else if (what < 9) {
                reorder(fm, st);
            }
        }
    }

    // -- compute and store levels -----------------------------------------------------------------

    /// The non-inlined Funcs that a stage calls, looking through inlined Funcs.
    std::set<std::string> effective_calls(const StageModel &st) const {
        std::set<std::string> out;
        std::vector<std::string> work;
        for (auto &[name, f] : st.calls)
            work.push_back(name);
        std::set<std::string> seen;
        while (!work.empty()) {
            std::string n = work.back();
            work.pop_back();
            if (!seen.insert(n).second) continue;
            const FuncModel &g = funcs.at(n);
            if (!g.inlined) {
                out.insert(n);
                continue;
            }
            for (auto &[name, f] : g.stages[0].calls)
                work.push_back(name);
        }
        return out;
    }

    /// The levels at which fm may be computed: the loops that enclose every use of it.
    std::vector<Level> legal_levels(const FuncModel &fm) const {
        std::optional<std::vector<Level>> common;
        for (const std::string &cname : consumers_first) {
            const FuncModel &c = funcs.at(cname);
            if (c.inlined || &c == &fm) continue;
            for (const StageModel &st : c.stages) {
                if (!effective_calls(st).count(fm.func.name())) continue;
                std::vector<Level> around = c.chain;
                for (auto it = st.loops.rbegin(); it != st.loops.rend(); ++it) {
                    around.push_back({cname, st.index, it->name, it->is_rvar});
                }
                if (!common) {
                    common = around;
                    continue;
                }
                size_t n = 0;
                while (n < common->size() && n < around.size() && (*common)[n] == around[n])
                    n++;
                common->resize(n);
            }
        }
        return common ? *common : std::vector<Level>{};
    }

    LoopModel &loop_at(const Level &l) {
        StageModel &st = funcs.at(l.func).stages[size_t(l.stage)];
        return st.loops[index_of(st, l.loop)];
    }

    void place(FuncModel &fm) {
        if (fm.is_output || fm.inlined) return;
        std::vector<Level> levels = legal_levels(fm);
        bool has_updates = fm.stages.size() > 1;
        if (levels.empty() || rng.chance(35)) {
            // Funcs with updates are computed at root by default; pure ones are inlined.
            if (!has_updates || rng.chance(50)) fm.func.compute_root();
            if (rng.chance(15)) fm.func.store_root();
            return;
        }
        size_t k = size_t(rng.below(int(levels.size())));
        const Level &at = levels[k];
        fm.func.compute_at(funcs.at(at.func).func, VarOrRVar(at.loop, at.is_rvar));
        fm.chain.assign(levels.begin(), levels.begin() + long(k) + 1);
        size_t stored = k + 1; // the levels outside the storage
        int how = rng.below(100);
        if (how < 20) {
            fm.func.store_root();
            stored = 0;
        } else if (how < 45) {
            stored = size_t(rng.below(int(k) + 1)) + 1;
            const Level &s = levels[stored - 1];
            fm.func.store_at(funcs.at(s.func).func, VarOrRVar(s.loop, s.is_rvar));
        } else if (how < 55) {
            fm.func.store_at(funcs.at(at.func).func, VarOrRVar(at.loop, at.is_rvar));
        }
        // Iterations of a parallel loop between the storage and the computation would compute
        // into the same allocation at once: for a pure Func they write the same values (a
        // benign race, sometimes allowed), for a Func with updates they would interleave.
        // Vectorizing a loop around a computation is sometimes allowed (it must fall back to
        // scalar code or vectorize the producer too).
        bool race_ok = !has_updates && rng.chance(30);
        bool vector_ok = rng.chance(30);
        for (size_t i = 0; i <= k; i++) {
            LoopModel &l = loop_at(levels[i]);
            l.no_vectorize |= !vector_ok;
            if (i >= stored) l.no_parallel |= !race_ok;
        }
    }

    // -- loop types -------------------------------------------------------------------------------

    bool may_run_in_any_order(const StageModel &st, const LoopModel &l) const {
        if (!l.is_rvar) return true;
        for (const std::string &r : l.originals) {
            if (!st.independent_rvars.count(r)) return false;
        }
        return true;
    }

    void choose_loop_types(FuncModel &fm, StageModel &st) {
        Stage s = stage_of(fm, st);
        int vectorized = -1;
        if (st.loops.size() > 1 && rng.chance(10)) {
            // A vectorized loop with serial loops inside it.
            LoopModel &l = st.loops[1];
            if (!l.no_vectorize && may_run_in_any_order(st, l) && l.constant && *l.constant >= 2 &&
                *l.constant <= 16) {
                s.vectorize(var_of(l));
                l.type = ForType::Vectorized;
                vectorized = 1;
            }
        }
        if (vectorized < 0 && !st.loops.empty() && rng.chance(50)) {
            LoopModel &inner = st.loops[0];
            if (!inner.no_vectorize && may_run_in_any_order(st, inner)) {
                if (inner.constant && *inner.constant >= 2 && *inner.constant <= 16 &&
                    rng.chance(50)) {
                    s.vectorize(var_of(inner));
                    inner.type = ForType::Vectorized;
                    vectorized = 0;
                } else if (!st.names.count(inner.name + "_vi")) {
                    static const std::vector<int> widths = {2, 3, 4, 8, 16};
                    int factor = rng.pick(widths);
                    if (inner.grain * factor <= max_grain) {
                        TailStrategy tail = rng.pick(legal_tails(fm, st, inner, factor));
                        s.vectorize(var_of(inner), factor, tail);
                        std::string name = inner.name; // model_split overwrites inner
                        model_split(st, 0, name, name + "_vi", factor);
                        st.loops[0].type = ForType::Vectorized;
                        vectorized = 0;
                    }
                }
            }
        }
        if (rng.chance(30)) {
            std::vector<size_t> candidates;
            for (size_t i = 0; i < st.loops.size(); i++) {
                const LoopModel &l = st.loops[i];
                if (int(i) != vectorized && l.constant && *l.constant <= 16) {
                    candidates.push_back(i);
                }
            }
            if (!candidates.empty()) {
                LoopModel &l = st.loops[rng.pick(candidates)];
                s.unroll(var_of(l));
                l.type = ForType::Unrolled;
            } else {
                size_t i = size_t(rng.below(int(st.loops.size())));
                LoopModel l = st.loops[i];
                int factor = rng.range(2, 4);
                std::string inner = l.name + "_ui";
                if (int(i) > vectorized && !st.names.count(inner) &&
                    l.grain * factor <= max_grain) {
                    TailStrategy tail = rng.pick(legal_tails(fm, st, l, factor));
                    s.unroll(var_of(l), factor, tail);
                    model_split(st, i, l.name, inner, factor);
                    st.loops[i].type = ForType::Unrolled;
                    if (vectorized >= int(i)) vectorized++;
                }
            }
        }
        if (rng.chance(40)) {
            std::vector<size_t> candidates;
            for (size_t i = size_t(vectorized + 1); i < st.loops.size(); i++) {
                const LoopModel &l = st.loops[i];
                if (l.type == ForType::Serial && !l.no_parallel && may_run_in_any_order(st, l)) {
                    candidates.push_back(i);
                }
            }
            rng.shuffle(candidates);
            // Usually one parallel loop, sometimes two nested ones.
            size_t count = std::min(candidates.size(), size_t(rng.chance(15) ? 2 : 1));
            for (size_t k = 0; k < count; k++) {
                LoopModel &l = st.loops[candidates[k]];
                s.parallel(var_of(l));
                l.type = ForType::Parallel;
                if (rng.chance(10)) {
                    s.serial(var_of(l));
                    l.type = ForType::Serial;
                }
            }
        }
    }

    void choose_storage(FuncModel &fm) {
        if (fm.is_output) return;
        const std::vector<std::string> &args = fm.func.args();
        if (args.size() > 1 && rng.chance(25)) {
            std::vector<Var> order;
            for (const std::string &a : args)
                order.emplace_back(a);
            rng.shuffle(order);
            if (rng.chance(30)) order.pop_back(); // the rest keep their order, outermost
            fm.func.reorder_storage(order);
        }
        if (rng.chance(30)) {
            static const std::vector<MemoryType> types = {MemoryType::Auto, MemoryType::Stack,
                                                          MemoryType::Heap};
            fm.func.store_in(rng.pick(types));
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Running and comparing

/// Everything about one fuzz case, for failure messages.
struct Case {
    uint64_t seed = 0;
    size_t pipeline = 0;
    std::string schedule; ///< as C++

    std::string describe() const {
        const PipelineSpec &p = corpus()[pipeline];
        std::ostringstream s;
        s << "seed " << seed << ", pipeline '" << p.name << "' (" << p.description << ")\n"
          << "schedule:\n"
          << (schedule.empty() ? "(default)\n" : schedule) << "reproduce: KILN_FUZZ_SEED=" << seed
          << " KILN_FUZZ_ITERATIONS=1 build/tests/kiln_pipeline_tests "
             "--gtest_filter='ScheduleFuzz.*'\n";
        return s.str();
    }
};

/// The pipeline of a seed; consecutive seeds go round the corpus.
size_t pipeline_of(uint64_t seed) {
    return size_t(seed % corpus().size());
}

// A crash in compiled code cannot be caught; the signal handler prints the case first.
char crash_note[8192];

void on_crash(int sig) {
    const char head[] = "\n*** kiln schedule fuzzer: crashed on\n";
    ssize_t ignored = write(2, head, sizeof(head) - 1);
    ignored = write(2, crash_note, std::strlen(crash_note));
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

void install_crash_handler() {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
        signal(sig, on_crash);
}

void note_case(const Case &c) {
    std::snprintf(crash_note, sizeof(crash_note), "%s", c.describe().c_str());
}

/// Seconds spent compiling (lowering and JIT) and running, and how often each primitive was
/// used, over a fuzz run.
struct Timings {
    double compile = 0, run = 0;
    std::map<std::string, int> primitives;
} timings;

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Builds the pipeline of the case and schedules it with the generator.
Instance build_scheduled(Case &c) {
    Instance inst = corpus()[c.pipeline].build();
    Rng rng(c.seed);
    ScheduleGenerator(rng, inst).generate();
    ScheduleTrace trace = ScheduleTrace::capture({inst.output});
    c.schedule = trace.to_cpp();
    for (const Directive &d : trace.directives) {
        timings.primitives[d.primitive + (d.primitive == "split" ? " " + d.option : "")]++;
    }
    return inst;
}

template <typename T>
T element(const BufferBase &b, const std::vector<int> &at) {
    return *reinterpret_cast<const T *>(b.address_of(at));
}

/// An integer element of any integer type, widened.
int64_t int_element(const BufferBase &b, const std::vector<int> &at) {
    Type t = b.type();
    if (t == Int(8)) return element<int8_t>(b, at);
    if (t == Int(16)) return element<int16_t>(b, at);
    if (t == Int(32)) return element<int32_t>(b, at);
    if (t == UInt(8)) return element<uint8_t>(b, at);
    if (t == UInt(16)) return element<uint16_t>(b, at);
    if (t == UInt(32)) return element<uint32_t>(b, at);
    ADD_FAILURE() << "the fuzzer compares no buffers of " << t;
    return 0;
}

/// Compares one output value with the reference; returns a description of the first
/// differences, or "" when they agree.
std::string compare(const BufferBase &want, const BufferBase &got, const BufferBase &magnitude,
                    int terms) {
    std::ostringstream s;
    int bad = 0;
    std::vector<int> at(size_t(want.dimensions()));
    for (int d = 0; d < want.dimensions(); d++)
        at[size_t(d)] = want.dim(d).min;
    auto where = [&] {
        std::string w;
        for (int c : at)
            w += (w.empty() ? "" : ", ") + std::to_string(c);
        return "(" + w + ")";
    };
    for (int64_t n = 0; n < want.number_of_elements(); n++) {
        if (want.type() == Float(32)) {
            float w = element<float>(want, at), g = element<float>(got, at);
            // Reference and compiled code each sum the same n terms in some order, each with an
            // error of at most (n - 1) * u * sum(|term|) (u = 2^-24, the float unit roundoff;
            // Higham, "Accuracy and Stability of Numerical Algorithms", 4.2); products add one
            // rounding each. So they differ by at most 2 * (n + 1) * u * sum(|term|). Without
            // rfactor (terms == 0) the operations and their order are the same: exact.
            double tolerance = 0;
            if (terms > 0) {
                tolerance = 2.0 * (terms + 1) * std::ldexp(1.0, -24) *
                            double(element<float>(magnitude, at));
            }
            if (!(std::fabs(double(w) - double(g)) <= tolerance) && bad++ < 4) {
                s << "  at " << where() << ": want " << w << ", got " << g
                  << (terms > 0 ? " (tolerance " + std::to_string(tolerance) + ")" : "") << "\n";
            }
        } else {
            int64_t w = int_element(want, at), g = int_element(got, at);
            if (w != g && bad++ < 4) {
                s << "  at " << where() << ": want " << w << ", got " << g << "\n";
            }
        }
        for (int d = 0; d < want.dimensions(); d++) {
            if (++at[size_t(d)] < want.dim(d).min + want.dim(d).extent) break;
            at[size_t(d)] = want.dim(d).min;
        }
    }
    if (bad) s << "  " << bad << " of " << want.number_of_elements() << " elements differ\n";
    return s.str();
}

/// Whether the schedule reassociates a float sum (an rfactor was applied).
bool reassociates(const Instance &inst) {
    for (const FunctionPtr &f : reachable_functions({inst.output.function()})) {
        if (f->made_by_rfactor) return true;
    }
    return false;
}

/// Compiles, runs and compares one case; "" when it passes.
std::string run_case(Case &c) {
    note_case(c);
    std::string error;
    try {
        Instance inst = build_scheduled(c);
        note_case(c);
        if (std::getenv("KILN_FUZZ_VERBOSE")) std::printf("%s", c.describe().c_str());
        const Reference &ref = reference_of(c.pipeline);
        std::vector<BufferBase> outputs;
        for (size_t v = 0; v < ref.values.size(); v++) {
            BufferBase b(ref.values[v].type(), inst.extents,
                         inst.output.name() + "_" + std::to_string(v));
            if (!inst.mins.empty()) b.set_min(inst.mins);
            outputs.push_back(b);
        }
        auto start = std::chrono::steady_clock::now();
        CompiledPipeline compiled = Pipeline(inst.output).compile_jit();
        timings.compile += seconds_since(start);
        verify_lowered(compiled.lowered());
        start = std::chrono::steady_clock::now();
        compiled.realize_into(outputs);
        timings.run += seconds_since(start);
        int terms = reassociates(inst) ? inst.tolerance_terms : 0;
        for (size_t v = 0; v < outputs.size(); v++) {
            std::string diff = compare(ref.values[v], outputs[v], ref.magnitude, terms);
            if (!diff.empty()) error += "value " + std::to_string(v) + " differs:\n" + diff;
        }
    } catch (const CompileError &e) {
        error = std::string("CompileError (a generator bug unless the schedule is legal): ") +
                e.what() + "\n";
    } catch (const RuntimeError &e) {
        error = std::string("RuntimeError: ") + e.what() + "\n";
    } catch (const InternalError &e) {
        error = std::string("InternalError: ") + e.what() + "\n";
    } catch (const std::exception &e) {
        error = std::string("exception: ") + e.what() + "\n";
    }
    return error;
}

/// The first line where two texts differ, with the lines around it.
std::string first_difference(const std::string &a, const std::string &b) {
    std::istringstream sa(a), sb(b);
    std::string la, lb;
    for (int line = 1;; line++) {
        bool ga = bool(std::getline(sa, la)), gb = bool(std::getline(sb, lb));
        if (!ga && !gb) return "";
        if (!ga || !gb || la != lb) {
            return "line " + std::to_string(line) + ":\n  original: " + (ga ? la : "(end)") +
                   "\n  replayed: " + (gb ? lb : "(end)") + "\n";
        }
    }
}

/// Saves the case's trace to JSON, replays it on a fresh build, and compares; "" when equal.
std::string round_trip_case(Case &c) {
    note_case(c);
    try {
        Instance inst = build_scheduled(c);
        note_case(c);
        if (!inst.replayable) return "";
        ScheduleTrace trace = ScheduleTrace::capture({inst.output});
        std::string json = trace.to_json_string();
        ScheduleTrace parsed = ScheduleTrace::parse(json);
        if (parsed != trace) return "the trace read back from JSON differs:\n" + json + "\n";
        Instance fresh = corpus()[c.pipeline].build();
        parsed.apply({fresh.output});
        ScheduleTrace again = ScheduleTrace::capture({fresh.output});
        if (again != trace) {
            return "the replayed pipeline's trace differs:\n" + again.to_json_string() + "\n";
        }
        if (again.to_cpp() != c.schedule) return "to_cpp differs:\n" + again.to_cpp() + "\n";
        std::string original = lower_to_text({inst.output}, "fuzz");
        std::string replayed = lower_to_text({fresh.output}, "fuzz");
        if (original != replayed) {
            return "the replayed pipeline lowers differently, first at " +
                   first_difference(original, replayed);
        }
    } catch (const std::exception &e) {
        return std::string("exception: ") + e.what() + "\n";
    }
    return "";
}

/// Runs `iterations` cases from the first seed, reporting each failure with its reproducer.
void fuzz(const char *what, const std::function<std::string(Case &)> &run_one) {
    install_crash_handler();
    int iterations = env_int("KILN_FUZZ_ITERATIONS", default_iterations);
    uint64_t seed = first_seed();
    auto start = std::chrono::steady_clock::now();
    timings = {};
    int failures = 0;
    std::vector<int> per_pipeline(corpus().size());
    kiln::test::FuzzBudget budget;
    int i = 0;
    for (; i < iterations && !budget.spent(); i++) {
        Case c;
        c.seed = seed + uint64_t(i);
        c.pipeline = pipeline_of(c.seed);
        per_pipeline[c.pipeline]++;
        std::string error = run_one(c);
        if (!error.empty()) {
            failures++;
            ADD_FAILURE() << what << " failed for " << c.describe() << error;
        }
        if (iterations >= 1000 && (i + 1) % 500 == 0) {
            std::printf("[ fuzz ] %s: %d of %d, %d failed, %.0f s\n", what, i + 1, iterations,
                        failures, seconds_since(start));
            std::fflush(stdout);
        }
    }
    budget.report(what, uint64_t(i), uint64_t(iterations));
    std::printf("[ fuzz ] %s: %d schedules from seed %llu, %d failed, %.1f s (compile %.1f s, "
                "run %.1f s)\n",
                what, i, static_cast<unsigned long long>(seed), failures, seconds_since(start),
                timings.compile, timings.run);
    std::string used;
    for (auto &[p, n] : timings.primitives)
        used += (used.empty() ? "" : ", ") + p + " " + std::to_string(n);
    std::printf("[ fuzz ] directives: %s\n", used.c_str());
}

TEST(ScheduleFuzz, RandomSchedulesMatchTheReferenceEvaluator) {
    fuzz("compile and run", run_case);
}

TEST(ScheduleFuzz, TracesRoundTripThroughJsonAndReplayToTheSameLoweredCode) {
    fuzz("trace round trip", round_trip_case);
}

// Regression: boundary conditions were once named from a process-wide counter, so the same
// algorithm built twice hashed differently and its trace was refused. They are now named after
// their source ("replay_bc_in_repeat_edge"), the same in every build.
TEST(ScheduleFuzz, TraceOfABoundaryConditionPipelineReplaysOnAFreshBuild) {
    auto build = [] {
        Buffer<int> in({7, 5}, "replay_bc_in");
        Func re = repeat_edge(in), out("replay_bc_out");
        Var x("x"), y("y");
        out(x, y) = re(x - 1, y) + re(x + 1, y);
        return out;
    };
    Func a = build();
    a.split(Var("x"), Var("xo"), Var("xi"), 4);
    ScheduleTrace trace = ScheduleTrace::capture({a});
    Func b = build();
    EXPECT_EQ(algorithm_hash({a}), algorithm_hash({b}));
    EXPECT_NO_THROW(trace.apply({b}));
}

TEST(ScheduleFuzz, BoundaryConditionsAreNamedAfterTheirSourceAndCanBeScheduledByName) {
    Buffer<int> in({6, 4}, "bc_named_in");
    Func a = repeat_edge(in), b = repeat_edge(in), c = mirror_interior(in, "bc_named_mirror");
    EXPECT_EQ(a.name(), "bc_named_in_repeat_edge");
    EXPECT_EQ(b.name(), "bc_named_in_repeat_edge_2"); // a second one on the same source
    EXPECT_EQ(c.name(), "bc_named_mirror");
    EXPECT_EQ(constant_exterior(in, 0).name(), "bc_named_in_constant_exterior");
    // Both repeat_edge Funcs in one pipeline, one of them scheduled: no name clash.
    Func out("bc_named_out");
    Var x("x"), y("y");
    out(x, y) = a(x - 1, y) + b(x + 1, y) * 3 + c(x - 2, y + 1);
    a.compute_root();
    Buffer<int> got = out.realize({8, 5});
    Buffer<int> want = reference_realize(out, {8, 5});
    for (int yy = 0; yy < 5; yy++) {
        for (int xx = 0; xx < 8; xx++)
            EXPECT_EQ(got(xx, yy), want(xx, yy)) << xx << ", " << yy;
    }
}

TEST(ScheduleFuzz, TheCorpusHasDistinctlyNamedPipelinesThatMatchTheirReference) {
    ASSERT_GE(corpus().size(), 12u);
    std::set<std::string> names;
    for (size_t i = 0; i < corpus().size(); i++) {
        SCOPED_TRACE(corpus()[i].name);
        EXPECT_TRUE(names.insert(corpus()[i].name).second);
        // Unscheduled, each pipeline already agrees with the reference evaluator.
        Instance inst = corpus()[i].build();
        const Reference &ref = reference_of(i);
        std::vector<BufferBase> outputs;
        for (const BufferBase &r : ref.values) {
            BufferBase b(r.type(), inst.extents, "unscheduled");
            if (!inst.mins.empty()) b.set_min(inst.mins);
            outputs.push_back(b);
        }
        Pipeline(inst.output).realize(outputs);
        for (size_t v = 0; v < outputs.size(); v++) {
            EXPECT_EQ(compare(ref.values[v], outputs[v], ref.magnitude, 0), "");
        }
    }
}

} // namespace
} // namespace kiln
