// The operators of the user_ops example, written as a user of an installed kiln would: each
// generator builds the algorithm, declares knobs for its schedule (the space `kiln tune
// --generator` searches) and writes its default schedule from the knobs' first values.
#include "driver/Generator.h"

using namespace kiln;

// out(c, n) = gelu(in(c, n) + bias(c)), GELU in its tanh form:
//   gelu(v) = 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))).
// c (the channels) is innermost, n the rows. Kernel: bias_gelu(in, bias, out).
KILN_REGISTER_GENERATOR(bias_gelu, [](GeneratorContext &ctx) -> Pipeline {
    ImageParam in(Float(32), 2, "in");
    ImageParam bias(Float(32), 1, "bias");
    Func out("out");
    Var c("c"), n("n"), no("no"), ni("ni");
    Expr v = in(c, n) + bias(c);
    out(c, n) = 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));

    int vector = int(ctx.knob("vector", {8, 4, 16}));
    int rows = int(ctx.knob("rows", {4, 1, 16}));
    int parallel = int(ctx.knob("parallel", {1, 0}));
    out.vectorize(c, vector);
    out.split(n, no, ni, rows);
    if (parallel) out.parallel(no);
    return out;
});

// A 5x5 depthwise convolution, each channel with its own filter, over the valid region:
//   out(c, x, y) = sum over i, j in [0, 5) of in(c, x + i, y + j) * w(c, i, j),
// so the input is 4 wider and 4 taller than the output. Channels innermost (NHWC).
// Kernel: depthwise5x5(in, w, out).
KILN_REGISTER_GENERATOR(depthwise5x5, [](GeneratorContext &ctx) -> Pipeline {
    ImageParam in(Float(32), 3, "in");
    ImageParam w(Float(32), 3, "w");
    Func conv("conv"), out("out");
    Var c("c"), x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    RDom r({{0, 5}, {0, 5}}, "r");
    conv(c, x, y) = 0.0f;
    conv(c, x, y) += in(c, x + r.x, y + r.y) * w(c, r.x, r.y);
    out(c, x, y) = conv(c, x, y);

    int vector = int(ctx.knob("vector", {8, 4, 16}));
    int tile_x = int(ctx.knob("tile_x", {4, 8, 16}));
    int tile_y = int(ctx.knob("tile_y", {4, 1, 8}));
    std::string conv_at = ctx.knob_choice("conv_at", {"tile", "root", "row"});
    out.tile(x, y, xo, yo, xi, yi, tile_x, tile_y).vectorize(c, vector).parallel(yo);
    if (conv_at == "tile") {
        conv.compute_at(out, xo).vectorize(c, vector);
        conv.update(0).vectorize(c, vector);
    } else if (conv_at == "row") {
        conv.compute_at(out, yo).vectorize(c, vector);
        conv.update(0).vectorize(c, vector);
    } else {
        conv.compute_root().vectorize(c, vector).parallel(y);
        conv.update(0).vectorize(c, vector).parallel(y);
    }
    return out;
});
