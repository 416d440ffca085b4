// harris: the Harris corner detector of Halide's apps/harris, a six-stage pipeline on an RGB
// float32 image in(x, y, c) (extents W, H, 3):
//   gray = 0.299 r + 0.587 g + 0.114 b
//   Ix, Iy = 3x3 Sobel derivatives of gray (divided by 12)
//   Sxx, Syy, Sxy = 3x3 box sums of Ix*Ix, Iy*Iy, Ix*Iy
//   out = det(S) - 0.04 * trace(S)^2
// Borders: every stage is computed only where its whole window lies inside the input (no
// boundary condition), so out(x, y) is centred on in(x + 2, y + 2) and the output is
// (W - 4) x (H - 4); the reference does the same. Inputs are 8-bit intensities as floats.
#include <cmath>

#include "apps/Builtin.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

OperatorInstance make_harris(const std::vector<int64_t> &shape) {
    int W = shape_extent("harris", "W", shape[0], 5);
    int H = shape_extent("harris", "H", shape[1], 5);
    OperatorInstance inst;
    inst.shape = shape;
    ImageParam in(Float(32), 3, "in");
    Var x("x"), y("y");
    Func gray("gray"), Ix("Ix"), Iy("Iy"), out("harris");
    gray(x, y) = 0.299f * in(x, y, 0) + 0.587f * in(x, y, 1) + 0.114f * in(x, y, 2);
    const float k = 1.f / 12.f;
    Ix(x, y) = (gray(x + 2, y) - gray(x, y)) * k + (gray(x + 2, y + 1) - gray(x, y + 1)) * (2 * k) +
               (gray(x + 2, y + 2) - gray(x, y + 2)) * k;
    Iy(x, y) = (gray(x, y + 2) - gray(x, y)) * k + (gray(x + 1, y + 2) - gray(x + 1, y)) * (2 * k) +
               (gray(x + 2, y + 2) - gray(x + 2, y)) * k;
    Expr sxx = 0.f, syy = 0.f, sxy = 0.f;
    for (int dy = 0; dy < 3; dy++) {
        for (int dx = 0; dx < 3; dx++) {
            Expr ix = Ix(x + dx, y + dy), iy = Iy(x + dx, y + dy);
            sxx = sxx + ix * ix;
            syy = syy + iy * iy;
            sxy = sxy + ix * iy;
        }
    }
    Expr det = sxx * syy - sxy * sxy, trace = sxx + syy;
    out(x, y) = det - 0.04f * trace * trace;
    inst.inputs = {in};
    inst.input_data = {random_buffer(Float(32), {W, H, 3}, "in", 51, 0, 255)};
    inst.output = out;
    inst.output_extents = {W - 4, H - 4};
    inst.stages = {gray, Ix, Iy};
    return inst;
}

// As Halide's harris schedule: tiles of 256 x 32 outputs, bands of tiles in parallel; gray, Ix
// and Iy are computed per tile (260 x 36 and 258 x 34 floats, ~110 KB: L2) and the products and
// box sums are inlined into the output. Everything is vectorized across x.
void schedule_harris(OperatorInstance &inst, GeneratorContext &ctx) {
    const Target &target = ctx.target();
    int W = int(inst.shape[0]) - 4, H = int(inst.shape[1]) - 4;
    int vec = std::max(1, target.vector_bits / 32);
    const int tile_x = int(halved_to_fit(256, W)), tile_y = int(halved_to_fit(32, H));
    int lanes = std::min(vec, tile_x);
    Func out = inst.output;
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    out.tile(x, y, xo, yo, xi, yi, tile_x, tile_y).vectorize(xi, lanes).parallel(yo);
    for (Func f : inst.stages) {
        f.compute_at(out, xo).vectorize(x, lanes);
    }
}

BufferBase reference_harris(const OperatorInstance &inst) {
    // In float, with the algorithm's operations in the algorithm's order: the output subtracts
    // two nearly equal products (det and 0.04 trace^2) where the image is flat, so a double
    // reference would differ from any float evaluation by far more than float rounding shows
    // elsewhere.
    int W = int(inst.shape[0]), H = int(inst.shape[1]);
    const float *in = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
    size_t plane = size_t(W) * H;
    std::vector<float> gray(plane), ix(plane), iy(plane);
    for (size_t p = 0; p < plane; p++) {
        gray[p] = 0.299f * in[p] + 0.587f * in[plane + p] + 0.114f * in[2 * plane + p];
    }
    auto g = [&](int x, int y) { return gray[size_t(y) * W + x]; };
    const float k = 1.f / 12.f;
    for (int y = 0; y + 2 < H; y++) {
        for (int x = 0; x + 2 < W; x++) {
            ix[size_t(y) * W + x] = (g(x + 2, y) - g(x, y)) * k +
                                    (g(x + 2, y + 1) - g(x, y + 1)) * (2 * k) +
                                    (g(x + 2, y + 2) - g(x, y + 2)) * k;
            iy[size_t(y) * W + x] = (g(x, y + 2) - g(x, y)) * k +
                                    (g(x + 1, y + 2) - g(x + 1, y)) * (2 * k) +
                                    (g(x + 2, y + 2) - g(x + 2, y)) * k;
        }
    }
    BufferBase out(Float(32), {W - 4, H - 4}, "harris");
    float *o = reinterpret_cast<float *>(out.raw_data());
    for (int y = 0; y < H - 4; y++) {
        for (int x = 0; x < W - 4; x++) {
            float sxx = 0, syy = 0, sxy = 0;
            for (int dy = 0; dy < 3; dy++) {
                for (int dx = 0; dx < 3; dx++) {
                    float a = ix[size_t(y + dy) * W + x + dx], b = iy[size_t(y + dy) * W + x + dx];
                    sxx = sxx + a * a;
                    syy = syy + b * b;
                    sxy = sxy + a * b;
                }
            }
            float det = sxx * syy - sxy * sxy, trace = sxx + syy;
            o[size_t(y) * (W - 4) + x] = det - 0.04f * trace * trace;
        }
    }
    return out;
}

} // namespace

Operator harris_operator() {
    Operator op;
    op.name = "harris";
    op.description = "Harris corner response (gray, Sobel, 3x3 structure tensor), float32 RGB";
    op.shape_names = {"W", "H"};
    op.default_shape = {4096, 4096};
    op.make = make_harris;
    op.reference = reference_harris;
    // Bytes of the RGB input read and the output written.
    op.work = [](const std::vector<int64_t> &s) {
        return 4.0 * (3.0 * double(s[0]) * double(s[1]) + double(s[0] - 4) * double(s[1] - 4));
    };
    op.work_unit = "GB/s";
    // Inputs are 8-bit intensities as floats ([0, 255]), so outputs are large (up to ~1e8) and
    // compared relatively. The reference performs the algorithm's float operations in its order,
    // and kiln neither reassociates nor contracts them (strict float): the results are identical
    // here. A contraction into fma by another compiler of the reference would change a term of
    // det by an ulp (~1e-7 of sxx * syy), which the subtraction can magnify to ~1e-4 relative
    // where the image is flat; 1e-3 allows that and still catches a wrong tap (off by O(1)).
    op.tolerance = 1e-3;
    define_by_generator(op, schedule_harris);
    return op;
}

} // namespace kiln::apps
