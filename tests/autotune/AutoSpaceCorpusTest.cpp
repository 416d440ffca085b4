// The automatic search space (autotune/AutoSpace.h) on a corpus of random pipelines: what a user's
// generator may look like, not only the built-in operators (SearchSpaceTest.cpp covers those).
// Each seed builds a small float32 pipeline (2-D or 3-D output; elementwise producers the space
// may inline; stencils over inputs read directly, sized to what the algorithm reads, or through a
// boundary condition; matmul-like and channel-mixing reductions over an RDom; row reductions in
// the form of the apps' row_reduction, partial(l, y) over blocks then total(y); producers read by
// several consumers; outputs with pure, RDom, reduction or scan updates), wraps it as an
// apps::Operator the way the tuner wraps a generator (inputs sized by schedule/InputRegions), and
// draws random valid configs of its automatic space. Each config goes first through what the
// tuner does before it spends a trial (Tuner::add_search_candidate: the trace, then the
// FeatureCache's static check of the lowered code at this shape); a config rejected there is
// counted, with its reason. Every other config must apply, lower, JIT-compile, run and match the
// reference evaluator at every output point: a config the space calls valid that does not lower
// would cost the tuner a trial, so it is a failure of the space.
//
// Knobs (the defaults are what CI runs):
//   KILN_FUZZ_ITERATIONS=n  pipelines (default 16), up to 6 valid configs each
//   KILN_FUZZ_SECONDS=t     starts no pipeline after t seconds (tests/lang/FuzzBudget.h)
//   KILN_FUZZ_SEED=s        the first seed (default 1); pipeline i is seed s + i, and a seed
//                           gives the same pipeline and configs everywhere, so
//                           KILN_FUZZ_SEED=s KILN_FUZZ_ITERATIONS=1 replays one pipeline
//   KILN_FUZZ_CONFIG=json   runs only this config (a failure's "config:" line) of the first seed
//   KILN_FUZZ_VERBOSE=1     prints every pipeline and the outcome of every config
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
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "autotune/AutoSpace.h"
#include "autotune/Checker.h"
#include "autotune/Features.h"
#include "autotune/SearchSpace.h"
#include "codegen/Target.h"
#include "driver/Pipeline.h"
#include "lang/BoundaryConditions.h"
#include "lang/Error.h"
#include "lang/Function.h"
#include "lang/IROperator.h"
#include "lang/ReferenceEvaluator.h"
#include "schedule/InputRegions.h"
#include "schedule/ScheduleTrace.h"
#include "tests/lang/FuzzBudget.h"

namespace kiln::autotune {
namespace {

// ---------------------------------------------------------------------------------------------
// Knobs and random numbers

constexpr int default_pipelines = 16;
constexpr uint64_t default_seed = 1;
constexpr int configs_per_pipeline = 6;
/// Random draws per pipeline to find its valid configs (most spaces need a few dozen).
constexpr int draws_per_pipeline = 5000;
/// As the tuner's checker (autotune/Checker.h): |got - expected| / max(1, |expected|). The
/// corpus uses only +, -, *, min, max, select, abs and fma; a schedule changes the rounding only
/// where it reorders a sum (rfactor), and every sum of the corpus is scaled to an average of
/// terms in [-1, 1], so that rounding stays far below this.
constexpr double tolerance = 1e-4;

int env_int(const char *name, int fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

uint64_t first_seed() {
    const char *v = std::getenv("KILN_FUZZ_SEED");
    return v && *v ? std::strtoull(v, nullptr, 10) : default_seed;
}

/// A small deterministic generator; the distributions are written out (std::uniform_int_
/// distribution differs between standard libraries), so that a seed means the same pipeline and
/// the same configs everywhere.
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

private:
    std::mt19937_64 engine;
};

// ---------------------------------------------------------------------------------------------
// The corpus

/// What the seed's first draws fix before any Func is built: the output's extents (the operator's
/// default shape) and whether the output ends with a reduction long enough for the space's
/// rfactor knob (at least 256 values into at most as many output points).
struct CorpusShape {
    std::vector<int64_t> extents;
    bool long_reduction = false;
};

CorpusShape draw_shape(Rng &rng) {
    CorpusShape s;
    s.long_reduction = rng.chance(12);
    if (s.long_reduction) {
        s.extents = {rng.range(8, 20), rng.range(8, 20)};
    } else if (rng.chance(30)) {
        s.extents = {rng.range(8, 24), rng.range(8, 24), rng.range(3, 12)};
    } else {
        s.extents = {rng.range(8, 48), rng.range(8, 48)};
    }
    return s;
}

/// What a pipeline contains, for the corpus' coverage figures.
struct Coverage {
    bool three_d = false, stencil = false, boundary = false, matmul = false, row_reduction = false,
         channel_mix = false, producer_update = false, output_update = false, scan = false,
         long_reduction = false, padded_input = false;
    bool shared_producer = false; ///< a Func read by two or more others
};

/// Builds the pipeline of a seed at a shape. Every Func, RDom and input is named after its kind
/// and its position ("st_c", "k_d", "in_a"), so a rebuild (each op.make) gives the same names and
/// the space's traces replay on it.
class CorpusBuilder {
public:
    CorpusBuilder(uint64_t seed, const std::vector<int64_t> &shape) : rng(seed) {
        // The same first draws as the default shape's: what follows is then the same too.
        shape_draw = draw_shape(rng);
        for (int64_t e : shape)
            extents.push_back(int(e));
        const char *names[] = {"x", "y", "c"};
        for (size_t i = 0; i < extents.size(); i++)
            vars.emplace_back(names[i]);
        cover.three_d = extents.size() == 3;
        cover.long_reduction = shape_draw.long_reduction;
    }

    Func build() {
        image_input();
        const int producers = rng.range(1, 4);
        for (int i = 0; i < producers; i++) {
            const int kind = rng.below(extents.size() == 3 ? 100 : 85);
            if (kind < 25) {
                elementwise();
            } else if (kind < 50) {
                stencil();
            } else if (kind < 65) {
                matmul();
            } else if (kind < 85) {
                row_reduction();
            } else {
                channel_mix();
            }
        }
        return output();
    }

    std::vector<ImageParam> inputs;
    /// Extra elements around each input's region (0: exactly what the algorithm reads, as the
    /// tuner allocates a generator's inputs).
    std::vector<int> margins;
    Coverage cover;

private:
    /// A value that stages may read, at coordinates of the output's rank.
    struct Source {
        std::function<Expr(const std::vector<Expr> &)> at;
        bool produced = false; ///< a Func of the pipeline, not an input
        int uses = 0;
    };

    /// "kind_a", "kind_b", ... "kind_z", "kind_ba", ...: no digits, so no name looks like one of
    /// the numbered names kiln makes itself.
    std::string next_name(const std::string &kind) {
        std::string suffix;
        for (int n = names_used++; suffix.empty() || n > 0; n /= 26)
            suffix.insert(suffix.begin(), char('a' + n % 26));
        return kind + "_" + suffix;
    }
    std::vector<Expr> coordinates() const { return {vars.begin(), vars.end()}; }
    float weight() { return rng.pick(std::vector<float>{0.5f, -0.75f, 1.5f, 0.25f}); }

    int add(std::function<Expr(const std::vector<Expr> &)> at, bool produced) {
        pool.push_back({std::move(at), produced, 0});
        return int(pool.size()) - 1;
    }

    /// A new input of the output's rank, read directly or through a boundary condition.
    int image_input() {
        ImageParam in(Float(32), int(extents.size()), next_name("in"));
        new_input(in);
        Func bc;
        switch (rng.below(6)) {
        case 0:
            bc = repeat_edge(in);
            break;
        case 1:
            bc = constant_exterior(in, Expr(0.25f));
            break;
        case 2:
            bc = mirror_interior(in);
            break;
        default:
            return add([in](const std::vector<Expr> &a) { return in.call(a); }, false);
        }
        cover.boundary = true;
        return add([bc](const std::vector<Expr> &a) { return Expr(bc(a)); }, true);
    }

    /// A new 2-D input (a matrix operand), read at the coordinates given.
    ImageParam matrix_input() {
        ImageParam m(Float(32), 2, next_name("mat"));
        new_input(m);
        return m;
    }

    void new_input(const ImageParam &in) {
        inputs.push_back(in);
        margins.push_back(rng.chance(60) ? 0 : rng.range(1, 8));
        cover.padded_input |= margins.back() > 0;
    }

    /// A source to read: mostly the latest one (chains), else any (producers with several
    /// consumers), sometimes a new input.
    int pick() {
        if (inputs.size() < 3 && rng.chance(12)) return image_input();
        if (rng.chance(45)) return int(pool.size()) - 1;
        return rng.below(int(pool.size()));
    }

    Expr read(int source, const std::vector<Expr> &at) {
        pool[size_t(source)].uses++;
        return pool[size_t(source)].at(at);
    }

    /// Pure: the space may inline it; sometimes with a pure update, so it may not.
    void elementwise() {
        Func f(next_name("ew"));
        const std::vector<Expr> v = coordinates();
        Expr e = read(pick(), v);
        const int operands = rng.range(1, 3);
        for (int i = 1; i < operands; i++) {
            Expr b = read(pick(), v);
            switch (rng.below(5)) {
            case 0:
                e = e + b * weight();
                break;
            case 1:
                e = e * b;
                break;
            case 2:
                e = max(e, b);
                break;
            case 3:
                e = min(e, b) - b * 0.5f;
                break;
            default:
                e = select(e > b, e - b, b * 0.5f);
                break;
            }
        }
        if (operands == 1 || rng.chance(30)) e = abs(e) * weight() + 0.125f;
        f(v) = e;
        if (rng.chance(15)) {
            f(v) = f(v) * 0.5f + read(pick(), v);
            cover.producer_update = true;
        }
        add([f](const std::vector<Expr> &a) { return Expr(f(a)); }, true);
    }

    /// A mean of 2..5 taps at offsets within 2 of the point (a channel within 1, in 3-D).
    void stencil() {
        Func f(next_name("st"));
        const std::vector<Expr> v = coordinates();
        const int source = pick();
        const int taps = rng.range(2, 5);
        Expr e;
        for (int t = 0; t < taps; t++) {
            std::vector<Expr> at = v;
            at[0] = v[0] + rng.range(-2, 2);
            at[1] = v[1] + rng.range(-2, 2);
            if (v.size() == 3 && rng.chance(25)) at[2] = v[2] + rng.range(-1, 1);
            Expr term = read(source, at);
            e = e.defined() ? e + term : term;
        }
        f(v) = e * (1.0f / float(taps));
        cover.stencil = true;
        add([f](const std::vector<Expr> &a) { return Expr(f(a)); }, true);
    }

    /// The operands a(k, y[, c]) and b(x, k[, c]) of a matmul-like reduction over k: each a new
    /// matrix input or a source read with k in the place of x or y.
    std::pair<Expr, Expr> matmul_operands(const RDom &k) {
        const std::vector<Expr> v = coordinates();
        Expr kx = k.x;
        Expr a, b;
        if (rng.chance(50)) {
            a = matrix_input()(kx, v[1]);
        } else {
            std::vector<Expr> at = v;
            at[0] = kx;
            a = read(pick(), at);
        }
        if (rng.chance(50)) {
            b = matrix_input()(v[0], kx);
        } else {
            std::vector<Expr> at = v;
            at[1] = kx;
            b = read(pick(), at);
        }
        return {a, b};
    }

    /// f(x, y) = sum over k of a(k, y) * b(x, k), as a += or an fma update (apps/Matmul.cpp).
    void matmul() {
        Func f(next_name("mm"));
        const std::vector<Expr> v = coordinates();
        const int K = rng.range(8, 40);
        RDom k(0, K, next_name("k"));
        auto [a, b] = matmul_operands(k);
        f(v) = 0.0f;
        if (rng.chance(50)) {
            f(v) = fma(a, b, f(v));
        } else {
            f(v) += a * b;
        }
        cover.matmul = true;
        const float scale = 1.0f / float(K);
        add([f, scale](const std::vector<Expr> &at) { return f(at) * scale; }, true);
    }

    /// A row reduction written for vectors, as apps' row_reduction: partial(l, y) combines the
    /// values at x = l + lanes * b over the whole blocks b, total(y) combines the lanes and then
    /// the tail of the row. Its consumers read total(y) broadcast along x (a mean or a maximum,
    /// as softmax and layernorm read theirs).
    void row_reduction() {
        const std::string name = next_name("rs");
        Func partial(name + "_partial"), total(name);
        const std::vector<Expr> v = coordinates();
        const int source = pick();
        const int n = rng.chance(50) ? extents[0] : rng.range(8, 48);
        const int lanes = rng.pick(std::vector<int>{4, 8, 16});
        const bool is_max = rng.chance(30);
        const Expr init = is_max ? Expr(std::numeric_limits<float>::lowest()) : Expr(0.0f);
        auto combine = [is_max](const Expr &a, const Expr &b) {
            return is_max ? max(a, b) : a + b;
        };
        Var l("l");
        std::vector<Expr> pv = v, tv(v.begin() + 1, v.end());
        pv[0] = l;
        const int blocks = n / lanes;
        partial(pv) = init;
        if (blocks > 0) {
            RDom b(0, blocks, name + "_b");
            std::vector<Expr> at = v;
            at[0] = l + lanes * Expr(b.x);
            partial(pv) = combine(partial(pv), read(source, at));
        }
        RDom r(0, lanes, name + "_r");
        std::vector<Expr> pr = v;
        pr[0] = r.x;
        total(tv) = init;
        total(tv) = combine(total(tv), partial(pr));
        if (n % lanes) {
            RDom t(blocks * lanes, n % lanes, name + "_t");
            std::vector<Expr> at = v;
            at[0] = t.x;
            total(tv) = combine(total(tv), read(source, at));
        }
        cover.row_reduction = true;
        const float scale = is_max ? 1.0f : 1.0f / float(n);
        add(
            [total, scale](const std::vector<Expr> &at) {
                return total(std::vector<Expr>(at.begin() + 1, at.end())) * scale;
            },
            true);
    }

    /// 3-D only: f(x, y, c) = sum over r of a source's channel r times a weight w(r, c) (a 1x1
    /// convolution: a reduction whose x is not the output's vectorized dimension when inner_dim
    /// picks c).
    void channel_mix() {
        Func f(next_name("cm"));
        const std::vector<Expr> v = coordinates();
        const int cin = rng.range(3, 12);
        RDom r(0, cin, next_name("r"));
        ImageParam w = matrix_input();
        std::vector<Expr> at = v;
        at[2] = r.x;
        f(v) = 0.0f;
        f(v) += read(pick(), at) * w(r.x, v[2]);
        cover.channel_mix = true;
        add([f](const std::vector<Expr> &a) { return Expr(f(a)); }, true);
    }

    /// out reads every producer no one reads yet (so the whole pipeline is reachable), sometimes
    /// one more source, then gets 0..2 updates; a long-reduction seed ends with one of 256 or
    /// 512 values.
    Func output() {
        Func out("out");
        const std::vector<Expr> v = coordinates();
        std::vector<int> sinks;
        for (size_t i = 0; i < pool.size(); i++) {
            if (pool[i].produced && pool[i].uses == 0) sinks.push_back(int(i));
        }
        if (sinks.empty() || rng.chance(40)) sinks.push_back(pick());
        Expr e;
        for (int s : sinks) {
            Expr term = read(s, v) * weight();
            e = e.defined() ? e + term : term;
        }
        out(v) = e;
        const int updates = rng.chance(50) ? 0 : rng.chance(70) ? 1 : 2;
        for (int u = 0; u < updates; u++) {
            cover.output_update = true;
            switch (rng.below(4)) {
            case 0:
                out(v) = out(v) * 0.5f + read(pick(), v);
                break;
            case 1: {
                // A window along x: the update's pure x stays in place, r is its reduction.
                const int R = rng.range(8, 24);
                RDom r(0, R, next_name("w"));
                std::vector<Expr> at = v;
                at[0] = v[0] + r.x;
                out(v) += read(pick(), at) * (1.0f / float(R));
                break;
            }
            case 2: {
                const int K = rng.range(8, 40);
                RDom k(0, K, next_name("k"));
                auto [a, b] = matmul_operands(k);
                out(v) += a * b * (1.0f / float(K));
                cover.matmul = true;
                break;
            }
            default: {
                // A scan along x: the update's first argument is its RVar, not the pure x.
                RDom s(1, extents[0] - 1, next_name("scan"));
                std::vector<Expr> at = v, before = v;
                at[0] = s.x;
                before[0] = s.x - 1;
                out(at) = out(at) + out(before) * 0.5f;
                cover.scan = true;
                break;
            }
            }
        }
        if (shape_draw.long_reduction) {
            int points = 1;
            for (int x : extents)
                points *= x;
            const int K = points <= 256 && rng.chance(50) ? 256 : 512;
            RDom k(0, K, next_name("k"));
            auto [a, b] = matmul_operands(k);
            out(v) += a * b * (1.0f / float(K));
            cover.output_update = cover.matmul = true;
        }
        return out;
    }

    Rng rng;
    CorpusShape shape_draw;
    std::vector<int> extents;
    std::vector<Var> vars;
    std::vector<Source> pool;
    int names_used = 0;
};

/// The operator of a seed: op.make builds the pipeline at the shape and sizes each input as the
/// tuner sizes a generator's (autotune/GeneratorOperator.cpp): the region the unscheduled
/// algorithm reads of it (schedule/InputRegions.h), plus the seed's margin, filled with
/// pseudo-random values from the seed. Its stages are every Func but the output.
apps::Operator corpus_operator(uint64_t seed) {
    Rng rng(seed);
    apps::Operator op;
    op.name = "corpus_" + std::to_string(seed);
    op.description = "random pipeline of seed " + std::to_string(seed);
    op.default_shape = draw_shape(rng).extents;
    op.shape_names = {"W", "H", "C"};
    op.shape_names.resize(op.default_shape.size());
    op.tolerance = tolerance;
    op.test_only = true;
    op.make = [seed](const std::vector<int64_t> &shape) {
        CorpusBuilder b(seed, shape);
        apps::OperatorInstance inst;
        inst.shape = shape;
        inst.output = b.build();
        for (int64_t e : shape)
            inst.output_extents.push_back(int(e));
        const std::vector<InputRegion> regions = input_regions({inst.output}, shape);
        for (size_t i = 0; i < b.inputs.size(); i++) {
            for (const InputRegion &r : regions) {
                if (r.argument.name != b.inputs[i].name()) continue;
                std::vector<int> mins, extents;
                for (size_t d = 0; d < r.extents.size(); d++) {
                    mins.push_back(int(r.mins[d]) - b.margins[i]);
                    extents.push_back(int(r.extents[d]) + 2 * b.margins[i]);
                }
                BufferBase data(Float(32), extents, b.inputs[i].name());
                data.set_min(mins);
                fill_random(data, seed * 16 + i);
                inst.inputs.push_back(b.inputs[i]);
                inst.input_data.push_back(data);
            }
        }
        for (const FunctionPtr &f : reachable_functions({inst.output.function()})) {
            if (f != inst.output.function()) inst.stages.emplace_back(f);
        }
        return inst;
    };
    return op;
}

Coverage coverage_of(uint64_t seed, const std::vector<int64_t> &shape) {
    CorpusBuilder b(seed, shape);
    const Func out = b.build();
    Coverage c = b.cover;
    std::map<std::string, int> consumers;
    for (const FunctionPtr &f : reachable_functions({out.function()})) {
        for (const FunctionPtr &callee : direct_callees(f)) {
            if (callee != f) c.shared_producer |= ++consumers[callee->name] > 1;
        }
    }
    return c;
}

// ---------------------------------------------------------------------------------------------
// Running configs

/// The Funcs of the instance, their definitions and the inputs' regions: a failure's reproducer.
std::string describe(const apps::OperatorInstance &inst) {
    std::ostringstream s;
    s << inst.output.to_string();
    for (size_t i = 0; i < inst.inputs.size(); i++) {
        const BufferBase &b = inst.input_data[i];
        s << "input " << inst.inputs[i].name() << ":";
        for (int d = 0; d < b.dimensions(); d++)
            s << " [" << b.dim(d).min << ", " << b.dim(d).min + b.dim(d).extent - 1 << "]";
        s << "\n";
    }
    s << "output extents:";
    for (int e : inst.output_extents)
        s << " " << e;
    s << "\n";
    return s.str();
}

/// The message up to its first ';' (what follows lists knobs or values), with its numbers
/// replaced by '#': rejections of one kind count together.
std::string reason_kind(const std::string &message) {
    std::string r;
    for (char ch : message.substr(0, std::min<size_t>(160, message.find(';')))) {
        const bool digit = ch >= '0' && ch <= '9';
        if (!digit || r.empty() || r.back() != '#') r += digit ? '#' : ch;
    }
    return r;
}

// A crash in compiled code cannot be caught; the signal handler prints the case first.
char crash_note[4096];

void on_crash(int sig) {
    const char head[] = "\n*** AutoSpaceCorpus: crashed on\n";
    ssize_t ignored = write(2, head, sizeof(head) - 1);
    ignored = write(2, crash_note, std::strlen(crash_note));
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

/// The command that runs the seed's pipeline again (with `config`: that config alone).
std::string reproducer(uint64_t seed, const std::string &config = "") {
    return "reproduce: KILN_FUZZ_SEED=" + std::to_string(seed) + " KILN_FUZZ_ITERATIONS=1 " +
           (config.empty() ? "" : "KILN_FUZZ_CONFIG='" + config + "' ") +
           "build/tests/kiln_autotune_tests --gtest_filter='AutoSpaceCorpus.*'\n";
}

struct Totals {
    int pipelines = 0, valid = 0, rejected = 0, ran = 0, failed = 0;
    int sparse = 0; ///< pipelines with fewer valid configs than asked for
    std::map<std::string, std::pair<int, std::string>> reasons; ///< kind -> count, an example
    double check_s = 0, lower_s = 0, compile_s = 0, reference_s = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Compiles the scheduled instance, runs it on its inputs into an output filled with NaN (so a
/// point never written shows) and compares every point with the reference; "" when all match.
std::string run_and_compare(const apps::OperatorInstance &inst, const BufferBase &expected,
                            Totals &totals) {
    auto start = std::chrono::steady_clock::now();
    CompiledPipeline compiled = inst.pipeline().compile_jit(Target::host());
    totals.compile_s += seconds_since(start);
    inst.bind_inputs();
    BufferBase got = inst.make_output();
    float *g = reinterpret_cast<float *>(got.raw_data());
    const float *e = reinterpret_cast<const float *>(expected.raw_data());
    const int64_t n = got.number_of_elements();
    std::fill(g, g + n, std::numeric_limits<float>::quiet_NaN());
    compiled.realize_into({got});
    int64_t wrong = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double err =
            std::abs(double(g[i]) - double(e[i])) / std::max(1.0, std::abs(double(e[i])));
        if (err <= tolerance) continue; // false for NaN
        if (first < 0) first = i;
        wrong++;
        worst = std::isnan(err) ? err : std::max(worst, err);
    }
    if (wrong == 0) return "";
    std::ostringstream s;
    std::vector<int> point; // of element `first`: the output is dense, dimension 0 innermost
    int64_t rest = first;
    for (int d = 0; d < got.dimensions(); d++) {
        point.push_back(int(rest % got.dim(d).extent));
        rest /= got.dim(d).extent;
    }
    s << "wrong result: " << wrong << " of " << n << " points differ from the reference evaluator"
      << " (largest relative error " << worst << "); first at (";
    for (size_t d = 0; d < point.size(); d++)
        s << (d ? ", " : "") << point[d];
    s << "): got " << g[first] << ", expected " << e[first] << "\n";
    return s.str();
}

/// Draws up to configs_per_pipeline distinct valid configs of the seed's automatic space and
/// runs each as described at the top of the file. Failures are reported with their reproducer.
void check_pipeline(uint64_t seed, Totals &totals) {
    const apps::Operator op = corpus_operator(seed);
    const std::vector<int64_t> shape = op.default_shape;
    const bool verbose = std::getenv("KILN_FUZZ_VERBOSE") != nullptr;
    const apps::OperatorInstance reference_inst = op.make(shape);
    const std::string pipeline = describe(reference_inst);
    std::snprintf(crash_note, sizeof(crash_note), "seed %llu (building the space)\n%s",
                  static_cast<unsigned long long>(seed), reproducer(seed).c_str());
    if (verbose) {
        std::printf("[ seed %llu ]\n%s", static_cast<unsigned long long>(seed), pipeline.c_str());
        std::fflush(stdout);
    }

    auto start = std::chrono::steady_clock::now();
    reference_inst.bind_inputs();
    const BufferBase expected =
        reference_realize(reference_inst.output, reference_inst.output_extents);
    totals.reference_s += seconds_since(start);

    const SearchSpace space = auto_space(op, shape, Target::host());
    FeatureCache features(op, shape, space);
    Rng rng(seed ^ 0xC0FF1Eull);
    std::set<std::string> seen;
    std::map<std::string, int> broken; ///< the first constraint each invalid draw breaks
    const char *only = std::getenv("KILN_FUZZ_CONFIG");
    for (int draw = 0; draw < draws_per_pipeline && int(seen.size()) < configs_per_pipeline;
         draw++) {
        Config c;
        for (const Knob &k : space.knobs())
            c.index.push_back(rng.below(int(k.values.size())));
        if (only && *only) {
            if (draw > 0) break;
            c = space.from_json(nlohmann::json::parse(only));
        }
        if (const std::string why = space.violated(c); !why.empty()) {
            broken[why]++;
            continue;
        }
        if (!seen.insert(space.hash(c)).second) continue;
        totals.valid++;
        const std::string json = space.to_json(c).dump();
        auto failure = [&](const std::string &what) {
            totals.failed++;
            std::string schedule;
            try {
                schedule = space.trace(op, shape, c).to_cpp();
            } catch (const std::exception &e) {
                schedule = std::string("(no trace: ") + e.what() + ")\n";
            }
            ADD_FAILURE() << "seed " << seed << ": a valid config of space '" << space.name()
                          << "' that passed the tuner's static check: " << what
                          << "config: " << json << "\nschedule:\n"
                          << schedule << "pipeline:\n"
                          << pipeline << reproducer(seed, json);
        };
        std::snprintf(crash_note, sizeof(crash_note), "seed %llu, config %s\n%s",
                      static_cast<unsigned long long>(seed), json.c_str(),
                      reproducer(seed, json).c_str());

        // What the tuner does before a trial: a config whose trace raises, or whose lowered code
        // fails a check at this shape whatever the data, is recorded without being measured.
        std::optional<std::string> rejected;
        auto phase = std::chrono::steady_clock::now();
        try {
            const ScheduleTrace trace = space.trace(op, shape, c);
            if (verbose) {
                std::printf("  config %s\n%s", json.c_str(), trace.to_cpp().c_str());
                std::fflush(stdout);
            }
            rejected = features.failed_check(c);
        } catch (const CompileError &e) {
            rejected = std::string("apply: ") + e.what();
        } catch (const std::exception &e) {
            failure(std::string("the tuner's checks raised ") + e.what() + "\n");
            continue;
        }
        totals.check_s += seconds_since(phase);
        if (rejected) {
            totals.rejected++;
            auto &[count, example] = totals.reasons[reason_kind(*rejected)];
            if (count++ == 0) example = "seed " + std::to_string(seed) + ", " + json;
            if (verbose) std::printf("  rejected %s: %s\n", json.c_str(), rejected->c_str());
            continue;
        }

        phase = std::chrono::steady_clock::now();
        apps::OperatorInstance inst = op.make(shape);
        try {
            space.apply(inst, c);
            inst.pipeline().lower();
            totals.lower_s += seconds_since(phase);
        } catch (const CompileError &e) {
            failure(std::string("it does not lower (it costs the tuner a trial): ") + e.what() +
                    "\n");
            continue;
        } catch (const std::exception &e) {
            failure(std::string("lowering raised ") + e.what() + "\n");
            continue;
        }
        std::string error;
        try {
            error = run_and_compare(inst, expected, totals);
        } catch (const CompileError &e) {
            error = std::string("it lowers but does not compile: ") + e.what() + "\n";
        } catch (const RuntimeError &e) {
            error = std::string("it fails at run time: ") + e.what() + "\n";
        } catch (const std::exception &e) {
            error = std::string("compiling or running raised ") + e.what() + "\n";
        }
        if (!error.empty()) {
            failure(error);
            continue;
        }
        totals.ran++;
        if (verbose) std::printf("  ok %s\n", json.c_str());
    }
    if (int(seen.size()) < configs_per_pipeline && !(only && *only)) {
        // Not a failure of this test, but a space whose valid points are this rare is one the
        // tuner's random proposals (2000 draws, autotune/Strategy.h) may find exhausted.
        std::vector<std::pair<int, std::string>> most;
        for (const auto &[why, n] : broken)
            most.emplace_back(n, why);
        std::sort(most.rbegin(), most.rend());
        std::string text;
        for (size_t k = 0; k < most.size() && k < 3; k++)
            text += (k ? "; " : "") + most[k].second + " (" + std::to_string(most[k].first) + ")";
        std::printf(
            "[ fuzz ] seed %llu: only %zu valid configs in %d random draws; the constraints "
            "broken most: %s\n",
            static_cast<unsigned long long>(seed), seen.size(), draws_per_pipeline, text.c_str());
        totals.sparse++;
    }
}

TEST(AutoSpaceCorpus, ValidConfigsOfRandomPipelinesLowerRunAndMatchTheReferenceEvaluator) {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
        signal(sig, on_crash);
    const int iterations = env_int("KILN_FUZZ_ITERATIONS", default_pipelines);
    const uint64_t seed = first_seed();
    kiln::test::FuzzBudget budget;
    Totals totals;
    std::map<std::string, int> covered;
    int i = 0;
    for (; i < iterations && !budget.spent(); i++) {
        const uint64_t s = seed + uint64_t(i);
        try {
            check_pipeline(s, totals);
        } catch (const std::exception &e) {
            // The corpus or the space could not be built: a bug of the test or of auto_space.
            ADD_FAILURE() << "seed " << s << ": " << e.what() << "\n" << reproducer(s);
            totals.failed++;
        }
        totals.pipelines++;
        const Coverage c = coverage_of(s, corpus_operator(s).default_shape);
        const std::pair<const char *, bool> features[] = {
            {"3-D", c.three_d},
            {"stencil", c.stencil},
            {"boundary condition", c.boundary},
            {"padded input", c.padded_input},
            {"matmul", c.matmul},
            {"row reduction", c.row_reduction},
            {"producer with several consumers", c.shared_producer},
            {"channel mix", c.channel_mix},
            {"producer update", c.producer_update},
            {"output update", c.output_update},
            {"scan", c.scan},
            {"long reduction", c.long_reduction}};
        for (const auto &[name, has] : features)
            covered[name] += int(has);
    }
    budget.report("AutoSpaceCorpus", uint64_t(i), uint64_t(iterations));
    std::printf("[ fuzz ] AutoSpaceCorpus: %d pipelines from seed %llu, %d valid configs: %d "
                "rejected before measuring, %d ran and matched, %d failed; %d pipelines with fewer "
                "than %d valid configs (%.1f s: the tuner's checks %.1f s, apply and lower %.1f s, "
                "compile %.1f s, reference %.1f s)\n",
                totals.pipelines, static_cast<unsigned long long>(seed), totals.valid,
                totals.rejected, totals.ran, totals.failed, totals.sparse, configs_per_pipeline,
                budget.elapsed(), totals.check_s, totals.lower_s, totals.compile_s,
                totals.reference_s);
    std::string corpus;
    for (const auto &[name, n] : covered)
        corpus += (corpus.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(n);
    std::printf("[ fuzz ] pipelines with: %s\n", corpus.c_str());
    for (const auto &[kind, entry] : totals.reasons)
        std::printf("[ fuzz ] rejected %d x: %s (e.g. %s)\n", entry.first, kind.c_str(),
                    entry.second.c_str());
    std::fflush(stdout);

    // The default corpus has every kind of pipeline the generator makes: a change to the generator
    // that loses one shows here rather than as a corpus that quietly tests less.
    if (seed == default_seed && totals.pipelines >= default_pipelines) {
        for (const auto &[name, n] : covered)
            EXPECT_GT(n, 0) << "no pipeline of the default corpus has: " << name;
    }
    // Rejections are cheap but no trial is learned from them: most of what the space calls valid
    // must run, or the test would pass without running anything. Only for runs large enough for
    // these figures to mean something (not a one-pipeline reproducer).
    if (totals.pipelines >= 8) {
        EXPECT_GE(totals.valid, totals.pipelines * configs_per_pipeline / 2)
            << "too few valid configs were drawn";
        EXPECT_GT(totals.ran + totals.failed, totals.valid / 2)
            << totals.rejected << " of " << totals.valid
            << " valid configs were rejected before measuring";
    }
}

} // namespace
} // namespace kiln::autotune
