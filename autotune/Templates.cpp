#include "autotune/Templates.h"

#include <algorithm>

#include "autotune/AutoSpace.h"
#include "autotune/GeneratorOperator.h"
#include "codegen/Target.h"
#include "lang/Error.h"

namespace kiln::autotune {

namespace {

// Capitalised as the Var it stands for.
VarOrRVar V(const std::string &n) { // NOLINT(readability-identifier-naming)
    return VarOrRVar(n, false);
}

// matmul (apps/Matmul.cpp): C(j, i) = prod(j, i), prod reduces fma(A(k, i), B_panel(j, k), .)
// over k, B_panel copies B. The hand schedule tiles C by 2 vectors x 8 rows, keeps the tile of
// prod in registers (computed at the row block), packs a panel of B per column block, and
// parallelizes the column blocks. The template makes each of those numbers and choices a knob.
SearchSpace matmul_template(const std::vector<int64_t> &shape, const Target &target) {
    const int64_t M = shape[0], N = shape[1], K = shape[2];
    const int vec = std::max(1, target.vector_bits / 32);
    SearchSpace s("matmul");
    s.add_integers("lanes", {4, 8, 16});
    s.add_powers_of_two("tile_j", 4, 128);
    s.add_integers("tile_i", {1, 2, 4, 6, 8, 12, 16});
    s.add_choice("outer_order", {"io_inner", "jo_inner"});
    s.add_choice("b_panel", {"at_jo", "inline", "root"});
    s.add_choice("prod_at", {"tile", "strip"});
    s.add_integers("k_unroll", {1, 2, 4});
    s.add_bool("unroll_i");
    s.add_bool("parallel");
    s.add_constraint("lanes <= natural vector width (" + std::to_string(vec) + ")",
                     [vec](const ConfigView &c) { return c.i("lanes") <= std::max(4, vec); });
    s.add_constraint("tile_j is a multiple of lanes", [](const ConfigView &c) {
        return c.i("tile_j") >= c.i("lanes") && c.i("tile_j") % c.i("lanes") == 0;
    });
    s.add_constraint("tile_j <= N and tile_i <= M", [M, N](const ConfigView &c) {
        return c.i("tile_j") <= N && c.i("tile_i") <= M;
    });
    s.add_constraint("tile_j / lanes * tile_i <= 32 accumulators", [](const ConfigView &c) {
        return c.i("tile_j") / c.i("lanes") * c.i("tile_i") <= 32;
    });
    s.add_constraint("k_unroll divides K",
                     [K](const ConfigView &c) { return K % c.i("k_unroll") == 0; });
    // prod at the strip (a column panel of C, all rows) has a row count that is not a constant.
    s.add_constraint("prod_at strip needs outer_order io_inner and no unroll_i",
                     [](const ConfigView &c) {
                         return c.s("prod_at") == "tile" ||
                                (c.s("outer_order") == "io_inner" && !c.b("unroll_i"));
                     });
    s.add_constraint("b_panel at_jo needs jo outside io", [](const ConfigView &c) {
        return c.s("b_panel") != "at_jo" || c.s("outer_order") == "io_inner";
    });
    s.set_apply([](apps::OperatorInstance &inst, const ConfigView &c) {
        Func C = inst.output, B_panel = inst.stages.at(0), prod = inst.stages.at(1);
        int lanes = int(c.i("lanes")), tj = int(c.i("tile_j")), ti = int(c.i("tile_i"));
        C.tile(V("j"), V("i"), V("jo"), V("io"), V("ji"), V("ii"), tj, ti);
        if (c.s("outer_order") == "io_inner")
            C.reorder(V("ji"), V("ii"), V("io"), V("jo"));
        else
            C.reorder(V("ji"), V("ii"), V("jo"), V("io"));
        C.vectorize(V("ji"), lanes);
        if (c.b("unroll_i")) C.unroll(V("ii"));
        if (c.b("parallel")) C.parallel(V(c.s("outer_order") == "io_inner" ? "jo" : "io"));
        if (c.s("b_panel") == "at_jo") {
            B_panel.compute_at(C, V("jo")).vectorize(V("j"), lanes);
        } else if (c.s("b_panel") == "root") {
            B_panel.compute_root().vectorize(V("j"), lanes).parallel(V("kv"));
        }
        // The tile: the inner of the two outer loops; the strip: the outer one.
        bool io_inner = c.s("outer_order") == "io_inner";
        std::string tile = io_inner ? "io" : "jo", strip = io_inner ? "jo" : "io";
        prod.compute_at(C, V(c.s("prod_at") == "tile" ? tile : strip)).vectorize(V("j"), lanes);
        Stage up = prod.update(0);
        up.split(V("j"), V("j"), V("jv"), lanes);
        VarOrRVar k("k.x", true);
        if (c.i("k_unroll") > 1) {
            VarOrRVar ko("k.x_o", true), ki("k.x_i", true);
            up.split(k, ko, ki, int(c.i("k_unroll")));
            up.reorder(V("jv"), V("j"), V("i"), ki, ko).unroll(ki);
        } else {
            up.reorder(V("jv"), V("j"), V("i"), k);
        }
        up.vectorize(V("jv")).unroll(V("j"));
        if (c.b("unroll_i")) {
            prod.unroll(V("i"));
            up.unroll(V("i"));
        }
    });
    return s;
}

// blur and blur_u16 (apps/Blur.cpp): blur_y(x, y) reads blur_x over three rows. The hand
// schedule tiles the output (256 x 32), computes blur_x per tile, vectorizes both stages and
// parallelizes the tile rows. Knobs: the tile, the vector width, where blur_x is computed, and
// whether the tile's rows are unrolled.
SearchSpace blur_template(const apps::Operator &op, const std::vector<int64_t> &shape,
                          const Target &target) {
    const int64_t W = shape[0] - 2, H = shape[1] - 2;
    const int bits = op.name == "blur_u16" ? 16 : 32;
    const int vec = std::max(1, target.vector_bits / bits);
    SearchSpace s(op.name);
    s.add_powers_of_two("tile_x", 8, 1024);
    s.add_powers_of_two("tile_y", 1, 128);
    std::vector<int64_t> lanes;
    for (int l = std::max(2, vec / 2); l <= 2 * vec; l *= 2)
        lanes.push_back(l);
    s.add_integers("lanes", lanes);
    s.add_choice("blur_x_at", {"tile", "row", "root", "inline"});
    s.add_bool("unroll_y");
    s.add_bool("parallel");
    s.add_constraint("lanes <= tile_x <= W and tile_y <= H", [W, H](const ConfigView &c) {
        return c.i("lanes") <= c.i("tile_x") && c.i("tile_x") <= std::max<int64_t>(W, 8) &&
               c.i("tile_y") <= std::max<int64_t>(H, 1);
    });
    s.add_constraint("unroll_y needs tile_y <= 8",
                     [](const ConfigView &c) { return !c.b("unroll_y") || c.i("tile_y") <= 8; });
    s.set_apply([](apps::OperatorInstance &inst, const ConfigView &c) {
        Func blur_y = inst.output, blur_x = inst.stages.at(0);
        int lanes = int(c.i("lanes"));
        blur_y
            .tile(V("x"), V("y"), V("xo"), V("yo"), V("xi"), V("yi"), int(c.i("tile_x")),
                  int(c.i("tile_y")))
            .vectorize(V("xi"), lanes);
        if (c.b("unroll_y")) blur_y.unroll(V("yi"));
        if (c.b("parallel")) blur_y.parallel(V("yo"));
        const std::string &at = c.s("blur_x_at");
        if (at == "inline") return;
        if (at == "tile") blur_x.compute_at(blur_y, V("xo"));
        if (at == "row") blur_x.compute_at(blur_y, V("yo"));
        if (at == "root") {
            blur_x.compute_root();
            if (c.b("parallel")) blur_x.parallel(V("y"));
        }
        blur_x.vectorize(V("x"), lanes);
    });
    return s;
}

// conv2d (apps/Conv2d.cpp): out(x, y, co) = conv, a 3 x 3 x C_in reduction with fma, over padded
// input and repacked weights. The hand schedule holds a tile of 2 vectors of output channels by
// 8 pixels in registers (conv computed per tile, stored channel-innermost), with padded and
// w_packed at root and rows in parallel. Knobs: the channel tile and vector width, the pixel
// tile, whether to unroll it, where conv is computed, the loop order of the reduction.
SearchSpace conv2d_template(const std::vector<int64_t> &shape, const Target &target) {
    const int64_t CO = shape[1], W = shape[3];
    const int vec = std::max(1, target.vector_bits / 32);
    SearchSpace s("conv2d");
    s.add_integers("lanes", {4, 8, 16});
    s.add_powers_of_two("tile_co", 4, 64);
    s.add_integers("tile_x", {1, 2, 4, 6, 8, 12, 16});
    s.add_choice("conv_at", {"xo", "y"});
    s.add_permutation("r_order", {"r.x", "r.y", "r.z"});
    s.add_bool("unroll_x");
    s.add_bool("parallel");
    s.add_constraint("lanes <= natural vector width (" + std::to_string(vec) + ")",
                     [vec](const ConfigView &c) { return c.i("lanes") <= std::max(4, vec); });
    s.add_constraint("tile_co is a multiple of lanes and <= C_out", [CO](const ConfigView &c) {
        return c.i("tile_co") % c.i("lanes") == 0 && c.i("tile_co") <= std::max<int64_t>(CO, 4);
    });
    s.add_constraint("tile_x <= W", [W](const ConfigView &c) { return c.i("tile_x") <= W; });
    s.add_constraint("tile_co / lanes * tile_x <= 32 accumulators", [](const ConfigView &c) {
        return c.i("tile_co") / c.i("lanes") * c.i("tile_x") <= 32;
    });
    s.add_constraint(
        "conv_at y needs no unroll_x (the row is not a constant)",
        [](const ConfigView &c) { return c.s("conv_at") == "xo" || !c.b("unroll_x"); });
    s.set_apply([vec](apps::OperatorInstance &inst, const ConfigView &c) {
        Func out = inst.output, padded = inst.stages.at(0), w_packed = inst.stages.at(1),
             conv = inst.stages.at(2);
        int lanes = int(c.i("lanes"));
        out.split(V("co"), V("coo"), V("coi"), int(c.i("tile_co")))
            .split(V("x"), V("xo"), V("xi"), int(c.i("tile_x")))
            .reorder(V("coi"), V("xi"), V("xo"), V("y"), V("coo"))
            .vectorize(V("coi"), lanes);
        if (c.b("parallel")) out.parallel(V("y"));
        padded.compute_root().vectorize(V("x"), vec);
        w_packed.compute_root().vectorize(V("co"), lanes);
        conv.compute_at(out, V(c.s("conv_at")))
            .reorder_storage(Var("co"), Var("x"), Var("y"))
            .reorder(V("co"), V("x"), V("y"))
            .vectorize(V("co"), lanes);
        std::vector<VarOrRVar> order{V("cv"), V("co"), V("x"), V("y")};
        for (const std::string &r : c.perm("r_order"))
            order.push_back(VarOrRVar(r, true));
        Stage up = conv.update(0);
        up.split(V("co"), V("co"), V("cv"), lanes)
            .reorder(order)
            .vectorize(V("cv"))
            .unroll(V("co"));
        if (c.b("unroll_x")) up.unroll(V("x"));
    });
    return s;
}

} // namespace

std::optional<SearchSpace> template_space(const apps::Operator &op,
                                          const std::vector<int64_t> &shape, const Target &target) {
    if (op.name == "matmul") return matmul_template(shape, target);
    if (op.name == "blur" || op.name == "blur_u16") return blur_template(op, shape, target);
    if (op.name == "conv2d") return conv2d_template(shape, target);
    return std::nullopt;
}

SearchSpace space_for(const apps::Operator &op, const std::vector<int64_t> &shape,
                      const std::string &kind, const Target &target, const GpuLimits *gpu_limits) {
    if (kind != "template" && kind != "auto")
        throw CompileError("search space kind must be 'template' or 'auto', got '" + kind + "'");
    if (kind == "template") {
        if (auto knobs = generator_knob_space(op, shape, target)) return std::move(*knobs);
    }
    if (target.has_gpu()) {
        std::string api = gpu_api_name(target.gpu);
        const GpuLimits limits = gpu_limits ? *gpu_limits : GpuLimits{};
        if (kind == "auto") return auto_gpu_space(op, shape, limits);
        if (auto t = gpu_template_space(op, shape, limits)) return std::move(*t);
        throw CompileError("operator '" + op.name + "' has no GPU template (gpu=" + api +
                           "); GPU templates: matmul, conv2d, blur, blur_u16, softmax, layernorm; "
                           "or tune it with --space auto (the automatic GPU space)");
    }
    if (kind == "auto") return auto_space(op, shape, target);
    if (auto t = template_space(op, shape, target)) return std::move(*t);
    return auto_space(op, shape, target);
}

} // namespace kiln::autotune
