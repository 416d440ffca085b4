#include "schedule/Tensorize.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

// A tile is at most 16 rows of 64 bytes (AMX palette 1); a nest covers up to 2 x 2 tiles of c
// (the 8 tile registers hold 4 tiles of sums and 2 of each input).
constexpr int64_t max_tile_rows = 32;
constexpr int64_t max_tile_int32_columns = 32;
// A tile row is 64 bytes: 16 int32 or float32 columns of c.
constexpr int64_t tile_int32_columns = 16;
// The k steps (of 4 bytes of k: 4 int8 or 2 bfloat16 values) one tile multiply takes: a tile
// row of a is 64 bytes.
constexpr int64_t k4_per_tile = 16;
// kiln_error_bad_stride (runtime/kiln_runtime.h).
constexpr int kiln_error_bad_stride_code = -7;

struct NestLoop {
    std::string name;
    Expr min;
    int64_t extent;
};

// How an index moves with each loop of the nest: index = origin + sum(coefficient * (v - min)).
struct LinearIndex {
    Expr origin;
    std::vector<Expr> coefficients; // per loop of the nest
};

// The operands of c[ic] = c[ic] + i32(a[ia]) * i32(b[ib]) (8-bit a and b) or of
// c[ic] = c[ic] + f32(a[ia]) * f32(b[ib]) (bfloat16 a and b).
struct MatmulStore {
    const Load *c = nullptr, *a = nullptr, *b = nullptr;
    /// c = select(first, 0, c) + a * b: where `first` holds, the sum starts at zero (a Func's
    /// initial value folded into its update: ScheduleFunctions.h). Undefined: c + a * b.
    Expr first;
    /// The values of k a column of b holds together: 4 bytes of them.
    int64_t k_lanes() const { return a->type.is_bfloat() ? 2 : 4; }
};

// The Load under e = cast<sum type>(Load) of an input the matrix unit multiplies into sums of
// type sum: 8-bit integers into int32, bfloat16 into float32.
const Load *tile_operand(const Expr &e, Type sum) {
    const auto *cast = e.as<Cast>();
    if (!cast || cast->type != sum) return nullptr;
    const auto *load = cast->value.as<Load>();
    if (!load || !load->type.is_scalar() || load->predicate.defined()) return nullptr;
    Type t = load->type;
    bool fits = sum == Int(32) ? t.is_int_or_uint() && t.bits == 8 : t == BFloat(16);
    return fits ? load : nullptr;
}

std::optional<MatmulStore> match_matmul(const Store *store, const Expr &value, const Expr &index) {
    const auto *add = value.as<Add>();
    Type sum = value.type();
    if (!add || (sum != Int(32) && sum != Float(32)) || store->predicate.defined())
        return std::nullopt;
    for (int side = 0; side < 2; side++) {
        const Expr &acc = side == 0 ? add->a : add->b;
        const Expr &product = side == 0 ? add->b : add->a;
        // select(first, 0, c): the sum starts at +0 where `first` holds (tilezero's value).
        Expr first;
        const Expr *c_expr = &acc;
        if (const auto *sel = acc.as<Select>()) {
            if (!is_positive_zero(sel->true_value) || !sel->condition.type().is_scalar()) {
                continue;
            }
            first = sel->condition;
            c_expr = &sel->false_value;
        }
        const auto *c = c_expr->as<Load>();
        const auto *mul = product.as<Mul>();
        if (!c || !mul || c->name != store->name || c->predicate.defined()) continue;
        if (!is_const_zero(simplify(c->index - index))) continue;
        const Load *x = tile_operand(mul->a, sum), *y = tile_operand(mul->b, sum);
        if (!x || !y) continue;
        return MatmulStore{c, x, y, first};
    }
    return std::nullopt;
}

// The coefficient of loop variable v in e, when e is a sum of terms each linear in v (products
// with one factor free of v); nullopt otherwise (v under a division, a modulo, a min...).
std::optional<Expr> coefficient(const Expr &e, const std::string &v) {
    if (!expr_uses_var(e, v)) return make_zero(e.type());
    if (const auto *var = e.as<Variable>())
        return var->name == v ? make_one(e.type()) : make_zero(e.type());
    if (const auto *add = e.as<Add>()) {
        std::optional<Expr> a = coefficient(add->a, v), b = coefficient(add->b, v);
        if (!a || !b) return std::nullopt;
        return *a + *b;
    }
    if (const auto *sub = e.as<Sub>()) {
        std::optional<Expr> a = coefficient(sub->a, v), b = coefficient(sub->b, v);
        if (!a || !b) return std::nullopt;
        return *a - *b;
    }
    if (const auto *mul = e.as<Mul>()) {
        bool in_a = expr_uses_var(mul->a, v), in_b = expr_uses_var(mul->b, v);
        if (in_a && in_b) return std::nullopt;
        std::optional<Expr> c = coefficient(in_a ? mul->a : mul->b, v);
        if (!c) return std::nullopt;
        return *c * (in_a ? mul->b : mul->a);
    }
    return std::nullopt;
}

class TileNest {
public:
    TileNest(const For *root, const LetStack &outer) : root(root), outer(outer) {}

    Stmt lower() {
        Stmt s = Stmt(root);
        const Store *store = nullptr;
        while (!store) {
            if (const auto *f = s.as<For>()) {
                add_loop(f);
                s = f->body;
            } else if (const auto *l = s.as<LetStmt>()) {
                lets.emplace_back(l->name, l->value);
                s = l->body;
            } else if (const auto *st = s.as<Store>()) {
                store = st;
            } else {
                std::ostringstream text;
                text << s;
                user_error("tensorize: the loops from '", root->name,
                           "' inward must hold one assignment and nothing else, but hold:\n",
                           text.str(),
                           "tensorize the update that sums the products, at a loop whose inner "
                           "loops are its own; for a tail guard (likely(... <= ....loop_max)), "
                           "give the Func constant extents that the split factors divide "
                           "(f.bound(x, 0, N)), so that no tail is left");
            }
        }
        // With the loops' ranges known, a blocked layout's j % 16 and j / 16 (j = 16 jo + ji,
        // ji in [0, 16)) become ji and jo: linear.
        std::map<std::string, ConstantBounds> ranges;
        for (const NestLoop &l : loops) {
            if (std::optional<int64_t> lo = as_const_int(l.min))
                ranges[l.name] = {*lo, *lo + l.extent - 1};
        }
        Expr index = simplify(inner(store->index), ranges);
        Expr value = simplify(inner(store->value), ranges);
        std::optional<MatmulStore> m = match_matmul(store, value, index);
        if (!m) {
            user_error("tensorize: loop '", root->name, "' holds ", store->name, "[", index,
                       "] = ", value,
                       ", which is not c = c + i32(a) * i32(b) of an int32 c and "
                       "8-bit a and b, nor c = c + f32(a) * f32(b) of a float32 c and bfloat16 a "
                       "and b; the matrix unit sums products of 8-bit integers into int32 and of "
                       "bfloat16 into float32 (write f32(a(...)) * f32(b(...)): a product of "
                       "bfloat16 values is rounded to bfloat16)");
        }
        // The product's order is the simplifier's: a is the factor the tile's columns (the loop
        // moving c by 1) leave in place. If the other order is the one that fits, take it; if
        // neither does, report against the first.
        LinearIndex c = linearize(index, m->c->name);
        LinearIndex x = linearize(m->a->index, m->a->name);
        LinearIndex y = linearize(m->b->index, m->b->name);
        Operands first{*m, c, x, y}, second{{m->c, m->b, m->a, m->first}, c, y, x};
        for (size_t i = 0; i < loops.size(); i++) {
            if (loops[i].extent > 1 && is_const(c.coefficients[i], 1) &&
                !is_const_zero(x.coefficients[i])) {
                std::swap(first, second);
                break;
            }
        }
        try {
            return classify(first);
        } catch (const CompileError &) {
            try {
                return classify(second);
            } catch (const CompileError &) {
                // The first order's message names the roles as the user most likely meant them.
            }
            throw;
        }
    }

private:
    const For *root;
    const LetStack &outer;
    std::vector<std::pair<std::string, Expr>> lets; // the nest's own, outermost first
    std::vector<NestLoop> loops;

    // e with the nest's lets substituted, innermost first.
    Expr inner(Expr e) const {
        for (auto it = lets.rbegin(); it != lets.rend(); ++it)
            e = substitute({{it->first, it->second}}, e);
        return simplify(e);
    }

    void add_loop(const For *f) {
        if (f != root && f->for_type != ForType::Serial) {
            user_error("tensorize: loop '", f->name, "' inside '", root->name, "' is ",
                       for_type_name(f->for_type),
                       "; the loops of a tensorized nest must be plain loops: remove its ",
                       for_type_name(f->for_type), " directive");
        }
        Expr extent = simplify(outer.apply(inner(f->extent)));
        std::optional<int64_t> e = as_const_int(extent);
        if (!e) {
            user_error("tensorize: loop '", f->name, "' has extent ", extent,
                       ", which is not a constant; split the loops inside '", root->name,
                       "' by constant factors that divide the extents");
        }
        Expr min = inner(f->min);
        for (const NestLoop &l : loops) {
            if (expr_uses_var(min, l.name)) {
                user_error("tensorize: loop '", f->name, "' starts at ", min,
                           ", which depends on loop '", l.name,
                           "'; tensorize needs a rectangular nest (no ShiftInwards tails)");
            }
        }
        loops.push_back({f->name, min, *e});
    }

    LinearIndex linearize(const Expr &index, const std::string &buffer) const {
        std::map<std::string, Expr> at_min;
        for (const NestLoop &l : loops)
            at_min[l.name] = l.min;
        LinearIndex r;
        r.origin = simplify(substitute(at_min, index));
        bool linear = true;
        for (const NestLoop &l : loops) {
            std::optional<Expr> c = coefficient(index, l.name);
            linear = linear && c.has_value();
            if (!linear) break;
            r.coefficients.push_back(simplify(*c));
            for (const NestLoop &other : loops)
                linear = linear && !expr_uses_var(r.coefficients.back(), other.name);
        }
        if (!linear) {
            user_error("tensorize: the index ", index, " of '", buffer, "' inside loop '",
                       root->name,
                       "' is not linear in the nest's loops; write the reduction as RDom r(0, 4, "
                       "0, K / 4) with a(r.x + 4 * r.y, i) and b(r.x, j, r.y), not r % 4 or r / 4");
        }
        return r;
    }

    // A matmul store in one order of its factors, with its indices' linear forms.
    struct Operands {
        MatmulStore m;
        LinearIndex c, a, b;
    };

    Stmt classify(const Operands &o) const {
        const MatmulStore &m = o.m;
        const LinearIndex &c = o.c, &a = o.a, &b = o.b;
        const int64_t k_lanes = m.k_lanes();
        std::optional<size_t> row, col, col_tile, lane, k4;
        auto take = [&](std::optional<size_t> &slot, size_t i, const char *what) {
            if (slot) {
                user_error("tensorize: loops '", loops[*slot].name, "' and '", loops[i].name,
                           "' inside '", root->name, "' are both the ", what,
                           " of the tile; fuse them or move one outside '", root->name, "'");
            }
            slot = i;
        };
        for (size_t i = 0; i < loops.size(); i++) {
            if (loops[i].extent == 1) continue;
            const Expr &cc = c.coefficients[i], &ca = a.coefficients[i], &cb = b.coefficients[i];
            // b's column stride may be a buffer's stride, known when the pipeline runs: checked
            // there (below).
            if (is_const(cc, 1) && is_const_zero(ca) && (is_const(cb, k_lanes) || !is_const(cb))) {
                take(col, i, "columns");
            } else if (is_const_zero(cb) && !is_const_zero(ca) && !is_const_zero(cc)) {
                take(row, i, "rows");
            } else if (is_const_zero(cc) && is_const(ca, 1) && is_const(cb, 1) &&
                       loops[i].extent == k_lanes) {
                take(lane, i, "k lanes");
            } else if (is_const_zero(cc) && is_const(ca, k_lanes) && !is_const_zero(cb)) {
                take(k4, i, "k steps");
            } else if (is_const(cc, tile_int32_columns) && is_const_zero(ca) &&
                       !is_const_zero(cb) && loops[i].extent == 2) {
                take(col_tile, i, "column tiles");
            } else {
                user_error("tensorize: loop '", loops[i].name, "' inside '", root->name, "' moves ",
                           m.c->name, " by ", cc, ", ", m.a->name, " by ", ca, " and ", m.b->name,
                           " by ", cb,
                           " elements; a tensorized loop is the tile's rows (b by 0), its "
                           "columns (",
                           m.c->name, " by 1, ", m.b->name, " by ", k_lanes, "), the ", k_lanes,
                           " k lanes (a and b by 1), the k steps (", m.a->name, " by ", k_lanes,
                           ", ", m.c->name, " by 0) or two tiles of 16 columns (", m.c->name,
                           " by 16, ", m.a->name, " by 0, extent 2)");
            }
        }
        if (!lane || !k4) {
            user_error("tensorize: loop '", root->name, "' has no ", !lane ? "k lanes" : "k steps",
                       " loop; the reduction must be RDom r(0, ", k_lanes, ", 0, K / ", k_lanes,
                       ") reading a(r.x + ", k_lanes,
                       " * r.y, i) and b(r.x, j, r.y), with both of r's loops inside '", root->name,
                       "'");
        }
        int64_t rows = row ? loops[*row].extent : 1, cols = col ? loops[*col].extent : 1;
        Expr b_tile = Expr(int(tile_int32_columns * k_lanes));
        if (col_tile) {
            if (cols != tile_int32_columns) {
                user_error("tensorize: loop '", loops[*col_tile].name, "' inside '", root->name,
                           "' steps over two tiles of 16 columns, but the columns loop ",
                           col ? "'" + loops[*col].name + "' has extent " + std::to_string(cols)
                               : std::string("is missing"),
                           "; split the columns by 32 and then by 16, the 16 innermost");
            }
            cols *= 2;
            b_tile = b.coefficients[*col_tile];
        }
        if (rows > max_tile_rows || cols > max_tile_int32_columns) {
            const NestLoop &l = rows > max_tile_rows ? loops[*row] : loops[*col];
            user_error("tensorize: loop '", l.name, "' has extent ", l.extent,
                       " but a tensorized nest covers at most 2 x 2 tiles, 32 rows and 32 ",
                       m.c->type,
                       " columns; split it by 32 or less and keep the outer loop "
                       "outside '",
                       root->name, "'");
        }
        Expr c_row = row ? c.coefficients[*row] : make_zero(Int(32)),
             a_row = row ? a.coefficients[*row] : make_zero(Int(32));
        Stmt check;
        if (col && !is_const(b.coefficients[*col])) {
            const Expr &stride = b.coefficients[*col];
            check = AssertStmt::make(
                stride == Expr(int(k_lanes)),
                "tensorize: the columns of '" + m.b->name + "' must be " + std::to_string(k_lanes) +
                    " elements apart (" + std::to_string(k_lanes) +
                    " consecutive k of a column together, the matrix unit's "
                    "layout), but they are %d " +
                    "apart; pass a dense buffer of extents (" + std::to_string(k_lanes) +
                    ", N, K / " + std::to_string(k_lanes) + ")",
                {stride}, kiln_error_bad_stride_code);
        }
        // The k steps in whole tiles (16 at a time). A remainder after whole tiles would need
        // tiles of other shapes live beside a 2 x 2 block's eight, and each of the 8 tile
        // registers holds one shape per function: the remainder runs as the nest's own loops,
        // over the last k steps (a few multiply-adds per element of c).
        int64_t k4_extent = loops[*k4].extent;
        int64_t k4_tiled =
            k4_extent >= k4_per_tile ? k4_extent / k4_per_tile * k4_per_tile : k4_extent;
        Expr zero = zero_first(m, {*lane, *k4});
        Stmt call = Evaluate::make(
            Call::make(Int(32), intrinsic::tile_matmul,
                       {Load::make(m.c->type, m.c->name, c.origin), c_row,
                        Load::make(m.a->type, m.a->name, a.origin), a_row,
                        Load::make(m.b->type, m.b->name, b.origin), b.coefficients[*k4],
                        Expr(int(rows)), Expr(int(cols)), Expr(int(k4_tiled)), zero, b_tile},
                       Call::Intrinsic));
        Stmt rest;
        if (k4_tiled < k4_extent) rest = remainder_loops(loops[*k4].name, k4_tiled);
        return Block::make({check, call, rest});
    }

    // Where the tile's sums start at zero instead of c's values (c = select(first, 0, c) + a * b),
    // as a condition on the loops outside the nest: first's terms on the nest's own loops must
    // hold exactly at the first value of its k loops (where the tile multiply starts) and
    // nowhere else, each checked at every value of its loop; the other terms are the answer.
    Expr zero_first(const MatmulStore &m, const std::vector<size_t> &k_loops) const {
        if (!m.first.defined()) return const_false();
        std::vector<Expr> terms;
        std::vector<Expr> pending{m.first};
        while (!pending.empty()) {
            Expr t = pending.back();
            pending.pop_back();
            if (const auto *a = t.as<And>()) {
                pending.push_back(a->a);
                pending.push_back(a->b);
            } else {
                terms.push_back(t);
            }
        }
        Expr outside = const_true();
        std::vector<bool> at_first(loops.size(), false);
        for (const Expr &t : terms) {
            std::vector<size_t> used;
            for (size_t i = 0; i < loops.size(); i++) {
                if (expr_uses_var(t, loops[i].name)) used.push_back(i);
            }
            if (used.empty()) {
                outside = outside && t;
                continue;
            }
            const NestLoop &l = loops[used[0]];
            bool is_k = std::find(k_loops.begin(), k_loops.end(), used[0]) != k_loops.end();
            bool first_only = used.size() == 1 && (is_k || l.extent == 1) && l.extent <= 4096;
            std::optional<int64_t> lo = as_const_int(l.min);
            first_only = first_only && lo.has_value();
            for (int64_t v = 0; first_only && v < l.extent; v++) {
                Expr holds = simplify(substitute(l.name, Expr(int(*lo + v)), t));
                first_only = v == 0 ? is_const_true(holds) : is_const_false(holds);
            }
            if (!first_only) {
                user_error("tensorize: loop '", root->name, "' sums into '", m.c->name,
                           "' from zero where ", m.first, ", but its term ", t,
                           " does not hold exactly at the first value of one of the nest's k "
                           "loops; the matrix unit starts a tile at zero only before its first "
                           "multiply: write select(r.x == 0 && r.y == 0, 0, c(...)) + a * b "
                           "(every RVar at its first value), or give the Func its zero as "
                           "its pure definition");
            }
            at_first[used[0]] = true;
        }
        for (size_t i : k_loops) {
            if (loops[i].extent > 1 && !at_first[i]) {
                user_error("tensorize: loop '", root->name, "' sums into '", m.c->name,
                           "' from zero where ", m.first, ", which does not put k loop '",
                           loops[i].name,
                           "' at its first value: the sums would restart inside the tile "
                           "multiply; start them once per element, where every RVar is at its "
                           "first value");
            }
        }
        return simplify(outside);
    }

    // The nest as plain loops, its k steps loop starting `skip` steps later.
    Stmt remainder_loops(const std::string &k4_loop, int64_t skip) const {
        class Shift : public IRMutator {
        public:
            const std::string &name;
            int64_t skip;
            Shift(const std::string &name, int64_t skip) : name(name), skip(skip) {}

        protected:
            using IRMutator::visit;
            Stmt visit(const For *op) override {
                Stmt body = mutate(op->body);
                if (op->name == name) {
                    return For::make(op->name, op->min + Expr(int(skip)),
                                     op->extent - Expr(int(skip)), ForType::Serial, body);
                }
                return For::make(op->name, op->min, op->extent, ForType::Serial, body);
            }
        } shift(k4_loop, skip);
        return shift.mutate(Stmt(root));
    }
};

class Tensorize : public LetScopedMutator {
protected:
    using LetScopedMutator::visit;

    Stmt visit(const For *op) override {
        bool gpu = op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread;
        if (op->for_type == ForType::Tensorized) {
            if (in_gpu_loop) {
                user_error("tensorize: loop '", op->name,
                           "' is inside a GPU loop; tensorize maps CPU loops onto the CPU's "
                           "matrix unit (AMX)");
            }
            return TileNest(op, lets).lower();
        }
        bool was = in_gpu_loop;
        in_gpu_loop = in_gpu_loop || gpu;
        Stmt s = LetScopedMutator::visit(op);
        in_gpu_loop = was;
        return s;
    }

private:
    bool in_gpu_loop = false;
};

} // namespace

Stmt tensorize_loops(const Stmt &s) {
    return Tensorize().mutate(s);
}

std::optional<Type> tile_matmul_input(const Stmt &s) {
    class Find : public IRVisitor {
    public:
        std::optional<Type> input;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (!input && op->name == intrinsic::tile_matmul && op->args.size() > 2) {
                if (const auto *a = op->args[2].as<Load>()) input = a->type;
            }
            IRVisitor::visit(op);
        }
    } find;
    find.include(s);
    return find.input;
}

} // namespace kiln
