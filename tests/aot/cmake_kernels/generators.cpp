// The generator of the multi-target kernel test: its schedule depends on the target (16 lanes
// where AVX-512 is allowed, else 8), and its argument order is not the declaration order.
#include "driver/Generator.h"

using namespace kiln;

KILN_REGISTER_GENERATOR(scale_by_target, [](GeneratorContext &ctx) -> Pipeline {
    ImageParam in(Float(32), 2, "in");
    Param<float> gain("gain");
    Func out("out");
    Var x("x"), y("y");
    out(x, y) = in(x, y) * gain + 1.0f;
    out.vectorize(x, ctx.target().has_feature("avx512f") ? 16 : 8).parallel(y);
    ctx.set_argument_order({"gain", "in"});
    return out;
});
