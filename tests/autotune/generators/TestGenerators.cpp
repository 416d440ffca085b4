// Generators for the tests of tuning generators (tests/autotune/GeneratorTuneTest.cpp): built into
// the test executable (in-process tests) and into kiln_test_generators, a generator executable
// like a user's (end-to-end tests of `kiln tune --generator` and `--kiln-worker`).
#include <csignal>
#include <stdexcept>

#include "driver/Generator.h"

namespace {

using namespace kiln;

/// out = in * gain + offset: a scalar Param with a default and a generator parameter.
Pipeline brighten(GeneratorContext &ctx) {
    ImageParam in(Float(32), 2, "in");
    Param<float> gain("gain", 1.5f);
    Func out("brightened");
    Var x("x"), y("y");
    out(x, y) = in(x, y) * gain + float(ctx.get_float("offset", 0.0));
    out.vectorize(x, int(ctx.get_int("vector", 8))).parallel(y);
    ctx.set_argument_order({"in", "gain"});
    return out;
}

/// A 3x3 box blur in two passes whose schedule is a user-written space of knobs.
Pipeline tiled_blur(GeneratorContext &ctx) {
    ImageParam in(Float(32), 2, "in");
    Func blur_x("blur_x"), blur_y("blur_y");
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    blur_x(x, y) = (in(x - 1, y) + in(x, y) + in(x + 1, y)) / 3;
    blur_y(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3;
    int tile = int(ctx.knob("tile", {8, 16, 32}));
    int vector = int(ctx.knob("vector", {4, 8}));
    std::string at = ctx.knob_choice("blur_x_at", {"tile", "root", "inline"});
    ctx.constraint("tile >= 2 * vector", tile >= 2 * vector);
    blur_y.tile(x, y, xo, yo, xi, yi, tile, tile).vectorize(xi, vector).parallel(yo);
    if (at == "tile") blur_x.compute_at(blur_y, xo).vectorize(x, vector);
    if (at == "root") blur_x.compute_root().vectorize(x, vector);
    return blur_y;
}

/// A wrong schedule on demand: rows=8 promises (bound) that only 8 rows of the output are
/// needed, so the rest is never written.
Pipeline bounded(GeneratorContext &ctx) {
    ImageParam in(Float(32), 2, "in");
    Func out("bounded");
    Var x("x"), y("y");
    out(x, y) = in(x, y) + 1.0f;
    int rows = int(ctx.knob("rows", {0, 8}));
    if (rows) out.bound(y, 0, rows);
    return out;
}

/// Integer output: unwritten points are caught by a sentinel, not NaN.
Pipeline threshold(GeneratorContext &ctx) {
    ImageParam in(UInt(8), 2, "in");
    Func out("thresholded");
    Var x("x"), y("y");
    out(x, y) = select(in(x, y) > uint8_t(ctx.get_int("level", 128)), uint8_t(255), uint8_t(0));
    ctx.set_tolerance(0);
    return out;
}

/// Two outputs: the tuner tunes single-output generators only.
Pipeline two_outputs(GeneratorContext &) {
    Func a("a"), b("b");
    Var x("x");
    a(x) = x;
    b(x) = x * 2;
    return Pipeline(std::vector<Func>{a, b});
}

/// A scalar Param without a default: the tuner needs --param offset=VALUE.
Pipeline needs_offset(GeneratorContext &) {
    ImageParam in(Int(32), 1, "in");
    Param<int> offset("offset");
    Func out("shifted");
    Var x("x");
    out(x) = in(x) + offset;
    return out;
}

/// A schedule that cannot run at some shapes: tail=round_up vectorizes by 8 and rounds the
/// output's width up to a multiple of 8, which needs more of the buffers than a width that is not
/// one provides. The tuner rejects that config before measuring.
Pipeline rounds_up(GeneratorContext &ctx) {
    ImageParam in(Float(32), 2, "in");
    Func out("doubled");
    Var x("x"), y("y");
    out(x, y) = in(x, y) * 2.0f;
    std::string tail = ctx.knob_choice("tail", {"guard", "round_up"});
    out.vectorize(x, 8, tail == "round_up" ? TailStrategy::RoundUp : TailStrategy::GuardWithIf);
    return out;
}

/// C = A * B, whose shape (M, N, K) is not its output's extents (N, M): it declares it, and the
/// estimates say what region to tune. The algorithm reads K from A's width, so its kernel takes
/// any K. The tile knob's values depend on the shape: tiles that divide N.
Pipeline sgemm(GeneratorContext &ctx) {
    std::vector<int64_t> s = ctx.shape({"M", "N", "K"}, {64, 64, 64});
    ImageParam A(Float(32), 2, "A"), B(Float(32), 2, "B");
    Var j("j"), i("i"), jo("jo"), ji("ji");
    RDom k(0, A.width(), "k");
    Func C("C");
    C(j, i) = 0.0f;
    C(j, i) += A(k, i) * B(j, k);
    C.set_estimates({{0, s[1]}, {0, s[0]}});
    A.set_estimates({{0, s[2]}, {0, s[0]}});
    std::vector<int64_t> tiles;
    for (int64_t t : {4, 8, 16, 32})
        if (s[1] % t == 0) tiles.push_back(t);
    if (tiles.empty()) tiles.push_back(1);
    int tile = int(ctx.knob("tile_j", tiles));
    std::string order = ctx.knob_choice("order", {"kji", "jki"});
    C.split(j, jo, ji, tile).vectorize(ji);
    Stage up = C.update(0);
    up.split(j, jo, ji, tile).vectorize(ji);
    if (order == "jki") up.reorder(ji, VarOrRVar("k.x", true), jo, i);
    ctx.set_argument_order({"A", "B"});
    ctx.set_tolerance(1e-3); // float sums of up to K products
    return C;
}

/// Declares its shape but not its output's region (or, with from=F, a region starting at F).
Pipeline shape_without_estimates(GeneratorContext &ctx) {
    int64_t n = ctx.shape({"N"}, {16})[0];
    int64_t from = ctx.get_int("from", -1);
    Func out("ramp");
    Var x("x");
    out(x) = x * int(n);
    if (from >= 0) out.set_estimate(x, from, n);
    return out;
}

Pipeline throws(GeneratorContext &) {
    throw std::runtime_error("no coefficients for this shape");
}

Pipeline crashes(GeneratorContext &) {
    std::raise(SIGSEGV);
    return Func("never");
}

} // namespace

KILN_REGISTER_GENERATOR(brighten, brighten);
KILN_REGISTER_GENERATOR(tiled_blur, tiled_blur);
KILN_REGISTER_GENERATOR(bounded, bounded);
KILN_REGISTER_GENERATOR(threshold, threshold);
KILN_REGISTER_GENERATOR(two_outputs, two_outputs);
KILN_REGISTER_GENERATOR(needs_offset, needs_offset);
KILN_REGISTER_GENERATOR(rounds_up, rounds_up);
KILN_REGISTER_GENERATOR(sgemm, sgemm);
KILN_REGISTER_GENERATOR(shape_without_estimates, shape_without_estimates);
KILN_REGISTER_GENERATOR(throws, throws);
KILN_REGISTER_GENERATOR(crashes, crashes);
