// The generators of the example: each builds a pipeline and returns it; the generator
// executable (this file linked with kiln::generator) compiles it ahead of time when
// kiln_add_kernel runs it at build time.
#include "driver/Generator.h"
#include "kiln.h"

using namespace kiln;

// C = A * B in float32, row-major, for any M, N, K (the sizes come from the buffers):
// A(k, i) is A[i][k], B(j, k) is B[k][j], C(j, i) is C[i][j].
KILN_REGISTER_GENERATOR(matmul, [](GeneratorContext &ctx) -> Pipeline {
    int vector = int(ctx.get_int("vector", ctx.target().vector_bits / 32));
    ImageParam A(Float(32), 2, "A"), B(Float(32), 2, "B");
    Var j("j"), i("i");
    RDom k(0, A.width(), "k");
    Func prod("prod"), C("C");
    prod(j, i) = 0.f;
    prod(j, i) += A(k, i) * B(j, k);
    C(j, i) = prod(j, i);
    // Rows in parallel; within a row, the update walks k outside a vectorized j.
    C.parallel(i).vectorize(j, vector);
    prod.compute_at(C, i).vectorize(j, vector);
    prod.update(0).reorder(j, k).vectorize(j, vector);
    ctx.set_argument_order({"A", "B"}); // matmul(A, B, C)
    return C;
});

// out = in * gain + offset over a 2-D float32 image: a kernel with scalar parameters.
KILN_REGISTER_GENERATOR(brighten, [](GeneratorContext &ctx) -> Pipeline {
    ImageParam in(Float(32), 2, "in");
    Param<float> gain("gain");
    Param<int32_t> offset("offset");
    Func out("out");
    Var x("x"), y("y");
    out(x, y) = in(x, y) * gain + cast<float>(offset);
    out.vectorize(x, int(ctx.get_int("vector", 8)));
    ctx.set_argument_order({"in", "gain", "offset"}); // brighten(in, gain, offset, out)
    return out;
});
