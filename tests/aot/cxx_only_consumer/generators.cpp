// The generator of the C++-only consumer: out(x) = in(x) * factor.
#include "driver/Generator.h"
#include "kiln.h"

using namespace kiln;

KILN_REGISTER_GENERATOR(scale, [](GeneratorContext &ctx) -> Pipeline {
    ImageParam in(Float(32), 1, "in");
    Param<float> factor("factor");
    Var x("x");
    Func out("out");
    out(x) = in(x)*factor;
    out.vectorize(x, 4);
    ctx.set_argument_order({"in", "factor"});
    return out;
});
