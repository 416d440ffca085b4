#include "schedule/GPURegisters.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>

#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Interval.h"
#include "lang/Simplify.h"

namespace kiln {

/// e with + and - moved inside min and max (min(p, q) - b is min(p - b, q - b)), so that a
/// guarded tile's extent min(loop_max, base + 31) - base becomes min(loop_max - base, 31).
Expr distribute(const Expr &e) {
    auto arms = [](const Expr &m, Expr *p, Expr *q) {
        if (const Min *n = m.as<Min>()) {
            *p = n->a;
            *q = n->b;
            return 1;
        }
        if (const Max *n = m.as<Max>()) {
            *p = n->a;
            *q = n->b;
            return 2;
        }
        return 0;
    };
    auto make = [](int kind, const Expr &p, const Expr &q) {
        return kind == 1 ? min(p, q) : max(p, q);
    };
    Expr p, q;
    if (const Add *n = e.as<Add>()) {
        Expr a = distribute(n->a), b = distribute(n->b);
        if (int k = arms(a, &p, &q)) return make(k, distribute(p + b), distribute(q + b));
        if (int k = arms(b, &p, &q)) return make(k, distribute(a + p), distribute(a + q));
        return simplify(a + b);
    }
    if (const Sub *n = e.as<Sub>()) {
        Expr a = distribute(n->a), b = distribute(n->b);
        if (int k = arms(a, &p, &q)) return make(k, distribute(p - b), distribute(q - b));
        if (int k = arms(b, &p, &q)) return make(3 - k, distribute(a - p), distribute(a - q));
        return simplify(a - b);
    }
    // Products and floor quotients by a positive constant are monotone: they move inside too
    // (a tile's end rounded up to a thread's points, ((min(p, q) / 4) * 4), bounds by its arms).
    auto positive = [](const Expr &k) {
        std::optional<int64_t> c = as_const_int(k);
        return c && *c > 0;
    };
    if (const Mul *n = e.as<Mul>()) {
        Expr a = distribute(n->a), b = distribute(n->b);
        if (positive(a)) std::swap(a, b);
        if (positive(b)) {
            if (int k = arms(a, &p, &q)) return make(k, distribute(p * b), distribute(q * b));
        }
        return simplify(a * b);
    }
    if (const Div *n = e.as<Div>()) {
        Expr a = distribute(n->a), b = n->b;
        if (positive(b)) {
            if (int k = arms(a, &p, &q)) return make(k, distribute(p / b), distribute(q / b));
        }
        return simplify(a / b);
    }
    if (const Min *n = e.as<Min>()) return min(distribute(n->a), distribute(n->b));
    if (const Max *n = e.as<Max>()) return max(distribute(n->a), distribute(n->b));
    return simplify(e);
}

/// A constant upper bound of e, if its min and max arms give one.
std::optional<int64_t> constant_upper_bound(const Expr &e) {
    if (std::optional<int64_t> c = as_const_int(e)) return c;
    if (const Min *n = e.as<Min>()) {
        std::optional<int64_t> a = constant_upper_bound(n->a), b = constant_upper_bound(n->b);
        if (a && b) return std::min(*a, *b);
        return a ? a : b;
    }
    if (const Max *n = e.as<Max>()) {
        std::optional<int64_t> a = constant_upper_bound(n->a), b = constant_upper_bound(n->b);
        if (a && b) return std::max(*a, *b);
    }
    return std::nullopt;
}

namespace {

/// A block-level allocation in MemoryType::Register, lifted into a private array per thread.
/// Every access's flat index, with lets substituted, must be T(thread ids) + r: T linear in the
/// thread ids with the same strides in every access, r what the thread moves through (a constant,
/// or linear in loop variables of constant range). The elements of each thread, T(t) + R over the
/// union R of the r values, must not meet another thread's (checked thread by thread), so each
/// element belongs to one thread. Each thread keeps its elements in an array: indexed by the
/// rank of r in R when every r is a constant (after unrolling: what stays in registers; a dense
/// vector access keeps its lanes consecutive), else by r - min(R).
class LiftRegisterArray : public IRMutator {
public:
    LiftRegisterArray(std::string name, const DeviceKernel &kernel, std::string kernel_func)
        : name(std::move(name)), kernel(kernel), kernel_func(std::move(kernel_func)) {}

    /// The body with the array's accesses rewritten and its private allocation around it.
    Stmt lift(const Stmt &body, Type type) {
        mutate(body);              // collects the accesses
        if (!strides) return body; // never touched
        // Every access must have been seen (one hidden in a part of the IR this walk skipped
        // would keep the block-level index into the per-thread array).
        internal_assert(accesses == count_accesses(body), "store_in(Register): ", accesses,
                        " of the ", count_accesses(body), " accesses to '", name,
                        "' were seen by the register lifting");
        check_private();
        rewriting = true;
        Stmt s = simplify(mutate(body));
        int64_t size = dense ? int64_t(values.size()) : *values.rbegin() - *values.begin() + 1;
        return Allocate::make(name, type, MemoryType::Register, {Expr(int(size))}, Expr(), s);
    }

protected:
    using IRMutator::visit;
    Stmt visit(const LetStmt *op) override {
        // The array's own extents (which its strides multiply) at their full tile's constant:
        // the threads' layout, made anew, then has constant strides in every stage, and stays
        // one to one on the coordinates of a clipped tile.
        Expr value = op->value;
        if (op->name.rfind(name + ".extent.", 0) == 0) {
            if (std::optional<int64_t> k = constant_upper_bound(distribute(fold(value))))
                value = Expr(int(*k));
        }
        // The value may read the array itself (a Tuple's values are lets before its stores).
        Expr read = mutate(op->value);
        lets.emplace_back(op->name, value);
        Stmt body = mutate(op->body);
        lets.pop_back();
        return LetStmt::make(op->name, read, body);
    }
    Stmt visit(const For *op) override {
        Expr mn = fold(op->min), mx = simplify(mn + fold(op->extent) - 1);
        Interval lo_range = bounds_of_expr(mn, loops), hi_range = bounds_of_expr(mx, loops);
        Expr lo = lo_range.has_lower_bound() ? simplify(lo_range.min) : mn;
        Expr hi = hi_range.has_upper_bound() ? simplify(hi_range.max) : mx;
        // A loop split at its steady state (loop partitioning) runs between clamped bounds:
        // take the constants the clamps give.
        if (!is_const(lo)) {
            if (std::optional<int64_t> k = constant_upper_bound(distribute(simplify(0 - lo))))
                lo = Expr(int(-*k));
        }
        if (!is_const(hi)) {
            if (std::optional<int64_t> k = constant_upper_bound(distribute(hi))) hi = Expr(int(*k));
        }
        Expr min = mutate(op->min), extent = mutate(op->extent);
        loops[op->name] = Interval(lo, hi);
        Stmt body = mutate(op->body);
        loops.erase(op->name);
        return For::make(op->name, min, extent, op->for_type, body);
    }
    Expr visit(const Load *op) override {
        Expr predicate = op->predicate.defined() ? mutate(op->predicate) : Expr();
        if (op->name == name && !rewriting) accesses++;
        Expr index = op->name == name ? local_index(op->index) : mutate(op->index);
        return Load::make(op->type, op->name, index, predicate);
    }
    Stmt visit(const Store *op) override {
        Expr predicate = op->predicate.defined() ? mutate(op->predicate) : Expr();
        if (op->name == name && !rewriting) accesses++;
        Expr index = op->name == name ? local_index(op->index) : mutate(op->index);
        return Store::make(op->name, mutate(op->value), index, predicate);
    }
    /// A thread guard (id < extent) narrows the threads that run its body.
    Stmt visit(const IfThenElse *op) override {
        Expr condition = mutate(op->condition);
        std::array<int64_t, 3> saved = threads;
        guard(op->condition);
        Stmt then_case = mutate(op->then_case);
        threads = saved;
        Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : Stmt();
        return IfThenElse::make(condition, then_case, else_case);
    }

private:
    static constexpr size_t max_elements = 1 << 14; ///< per thread

    std::string name;
    const DeviceKernel &kernel;
    std::string kernel_func;
    std::vector<std::pair<std::string, Expr>> lets; ///< outermost first
    kiln::Scope loops;
    bool rewriting = false;
    int64_t accesses = 0; ///< loads and stores of the array seen while collecting
    std::array<int64_t, 3> threads{kernel.threads[0], kernel.threads[1], kernel.threads[2]};
    std::array<int64_t, 3> active{1, 1, 1}; ///< threads that touch the array, per dimension
    std::optional<std::array<Expr, 3>> strides;
    std::string first_access;
    std::set<int64_t> values; ///< R: the offsets the threads move through
    bool dense = true;        ///< every offset a constant: index by rank

    static std::string thread_var(int d) { return "gpu.thread." + std::to_string(d); }

    /// The loads and stores of the array anywhere in s.
    int64_t count_accesses(const Stmt &s) const {
        class Count : public IRVisitor {
        public:
            explicit Count(const std::string &name) : name(name) {}
            int64_t n = 0;

        protected:
            using IRVisitor::visit;
            void visit(const Load *op) override {
                n += op->name == name;
                IRVisitor::visit(op);
            }
            void visit(const Store *op) override {
                n += op->name == name;
                IRVisitor::visit(op);
            }

        private:
            const std::string &name;
        } count(name);
        count.include(s);
        return count.n;
    }

    void guard(const Expr &condition) {
        if (const And *a = condition.as<And>()) {
            guard(a->a);
            guard(a->b);
            return;
        }
        const LT *lt = condition.as<LT>();
        const Call *id = lt ? lt->a.as<Call>() : nullptr;
        if (!id || id->call_type != Call::Intrinsic || id->name != intrinsic::gpu_thread_id) return;
        const int d = int(*as_const_int(id->args[0]));
        if (std::optional<int64_t> k = constant_upper_bound(distribute(fold(lt->b))))
            threads[size_t(d)] = std::max<int64_t>(1, std::min(threads[size_t(d)], *k));
    }
    static std::string dim_name(int d) { return std::string(1, "xyz"[d]); }

    Expr fold(const Expr &e) const {
        Expr r = e;
        for (auto it = lets.rbegin(); it != lets.rend(); ++it)
            r = substitute(it->first, it->second, r);
        return simplify(expand(simplify(r)));
    }

    /// e with products by constants spread over sums ((a + b) * 4 is a * 4 + b * 4), so the
    /// thread ids' terms of a 2-D tile's index stand apart.
    static Expr expand(const Expr &e) {
        class Expand : public IRMutator {
        public:
            using IRMutator::visit;
            Expr visit(const Mul *op) override {
                Expr a = mutate(op->a), b = mutate(op->b);
                if (!is_const(b)) std::swap(a, b);
                if (is_const(b)) {
                    if (const Add *s = a.as<Add>()) return mutate(s->a * b) + mutate(s->b * b);
                    if (const Sub *s = a.as<Sub>()) return mutate(s->a * b) - mutate(s->b * b);
                }
                return a * b;
            }
        } expand;
        return expand.mutate(e);
    }

    [[noreturn]] void fail(const std::string &why) const {
        user_error("store_in(Register): '", name,
                   "' is stored at block level in the GPU kernel of '", kernel_func,
                   "', where each thread keeps the elements it touches in its own registers, but ",
                   why,
                   "; make every thread touch only its own elements (the same thread tiles in "
                   "each stage), compute it at a gpu_threads loop, or store it in "
                   "MemoryType::GPUShared");
    }

    /// Coefficients of e in `vars` (e linear in them; a coefficient may be any expression of
    /// none of `vars`), and the rest: nullopt when not linear.
    static std::optional<std::pair<std::vector<Expr>, Expr>>
    linear_in(const Expr &e, const std::vector<std::string> &vars) {
        const std::set<std::string> var_set(vars.begin(), vars.end());
        std::map<std::string, Expr> zeros;
        for (const std::string &v : vars)
            zeros[v] = Expr(0);
        Expr at_zero = simplify(substitute(zeros, e));
        std::vector<Expr> c;
        Expr rest = e;
        for (const std::string &v : vars) {
            std::map<std::string, Expr> one = zeros;
            one[v] = Expr(1);
            Expr k = simplify(substitute(one, e) - at_zero);
            if (expr_uses_vars(k, var_set)) return std::nullopt;
            c.push_back(k);
            rest = rest - k * Variable::make(Int(32), v);
        }
        rest = simplify(rest);
        if (expr_uses_vars(rest, var_set)) return std::nullopt;
        return std::make_pair(c, rest);
    }

    /// Adds the values r takes over the loops around it to R; false when they are not a
    /// constant or a linear function of loop variables of constant range.
    bool add_values(const Expr &r, int64_t step, int lanes) {
        std::vector<std::string> vars;
        std::vector<std::pair<int64_t, int64_t>> ranges;
        for (const auto &[v, range] : loops) {
            if (!expr_uses_var(r, v)) continue;
            if (!range.has_lower_bound() || !range.has_upper_bound()) return false;
            const Expr mn = simplify(range.min), mx = simplify(range.max);
            if (!is_const(mn) || !is_const(mx)) return false;
            vars.push_back(v);
            ranges.emplace_back(*as_const_int(mn), *as_const_int(mx));
        }
        auto lin = linear_in(r, vars);
        if (!lin) return false;
        std::optional<int64_t> base = as_const_int(lin->second);
        std::vector<int64_t> coefficients;
        for (const Expr &k : lin->first) {
            if (!is_const(k)) return false;
            coefficients.push_back(*as_const_int(k));
        }
        if (!base) return false;
        // Ranks keep a dense ramp dense: its lanes are consecutive values of R.
        if (!vars.empty() || (lanes > 1 && step != 1)) dense = false;
        // Enumerate the box of loop values (odometer), every lane of each.
        std::vector<int64_t> at;
        for (const auto &range : ranges)
            at.push_back(range.first);
        while (true) {
            int64_t v = *base;
            for (size_t i = 0; i < at.size(); i++)
                v += coefficients[i] * at[i];
            for (int l = 0; l < lanes; l++)
                values.insert(v + step * l);
            if (values.size() > max_elements) {
                fail("each thread would keep more than " + std::to_string(max_elements) +
                     " elements of it");
            }
            size_t i = 0;
            while (i < at.size() && ++at[i] > ranges[i].second) {
                at[i] = ranges[i].first;
                i++;
            }
            if (i == at.size()) break;
        }
        return true;
    }

    /// No element is kept by two threads: the block's threads' sets T(t) + R do not meet. A
    /// stride that varies from block to block (the row of a tile clipped at the edge of its
    /// Func) is taken at its full tile's value, its largest: the threads of a clipped tile touch
    /// only its coordinates, which the clipped rows keep as far apart as the full ones do.
    void check_private() const {
        std::array<int64_t, 3> strides_at{};
        for (int d = 0; d < 3; d++) {
            if (active[size_t(d)] <= 1) continue;
            std::optional<int64_t> k = constant_upper_bound(distribute((*strides)[size_t(d)]));
            if (k && *k == 0) {
                fail("threads that differ only in thread dimension " + dim_name(d) +
                     " touch the same elements of it (" + first_access + ")");
            }
            if (!k) {
                fail("its stride in thread dimension " + dim_name(d) + ", " +
                     to_string((*strides)[size_t(d)]) + " (" + first_access +
                     "), has no constant bound");
            }
            strides_at[size_t(d)] = *k;
        }
        std::set<int64_t> seen;
        for (int64_t z = 0; z < active[2]; z++) {
            for (int64_t y = 0; y < active[1]; y++) {
                for (int64_t x = 0; x < active[0]; x++) {
                    int64_t t = strides_at[0] * x + strides_at[1] * y + strides_at[2] * z;
                    for (int64_t r : values) {
                        if (!seen.insert(t + r).second) {
                            fail("two threads of the block touch its element " +
                                 std::to_string(t + r) + " (" + first_access + "; thread strides " +
                                 std::to_string(strides_at[0]) + ", " +
                                 std::to_string(strides_at[1]) + ", " +
                                 std::to_string(strides_at[2]) + ")");
                        }
                    }
                }
            }
        }
    }

    /// e without the mins and maxes one arm of which always wins, given that thread ids lie in
    /// the block and loop variables in their loops (a tile shifted inwards clamps its start,
    /// min(t * 2, 14), where no thread of the block reaches the clamp).
    Expr prune_min_max(const Expr &e) const {
        class Prune : public IRMutator {
        public:
            explicit Prune(const kiln::Scope &scope) : scope(scope) {}
            const kiln::Scope &scope;
            using IRMutator::visit;
            Expr visit(const Min *op) override {
                Expr a = mutate(op->a), b = mutate(op->b);
                int order = compare(a, b);
                return order < 0 ? a : order > 0 ? b : min(a, b);
            }
            Expr visit(const Max *op) override {
                Expr a = mutate(op->a), b = mutate(op->b);
                int order = compare(a, b);
                return order > 0 ? a : order < 0 ? b : max(a, b);
            }
            /// -1 when a <= b in the whole scope, 1 when a >= b, else 0.
            int compare(const Expr &a, const Expr &b) const {
                Interval d = bounds_of_expr(simplify(a - b), scope);
                auto constant = [](bool has, const Expr &e) {
                    Expr c = has ? simplify(e) : Expr();
                    return c.defined() && is_const(c) ? as_const_int(c) : std::nullopt;
                };
                std::optional<int64_t> hi = constant(d.has_upper_bound(), d.max);
                std::optional<int64_t> lo = constant(d.has_lower_bound(), d.min);
                if (hi && *hi <= 0) return -1;
                if (lo && *lo >= 0) return 1;
                return 0;
            }
        };
        kiln::Scope scope = loops;
        for (int d = 0; d < 3; d++)
            scope[thread_var(d)] = Interval(Expr(0), Expr(int(threads[size_t(d)] - 1)));
        return simplify(Prune(scope).mutate(e));
    }

    /// Collecting: records the access. Rewriting: the index within the thread's own array.
    Expr local_index(const Expr &index) {
        Expr i = fold(index);
        Expr base = i, stride = Expr(0);
        int lanes = 1;
        if (const Ramp *r = i.as<Ramp>()) {
            base = r->base;
            stride = r->stride;
            lanes = r->lanes;
        } else if (i.type().lanes > 1) {
            fail("its vector index " + to_string(i) + " is not a ramp");
        }
        std::optional<int64_t> step = as_const_int(stride);
        if (!step) fail("its vector index " + to_string(i) + " has no constant stride");
        // Thread ids as variables, to take their strides.
        class Ids : public IRMutator {
        public:
            using IRMutator::visit;
            Expr visit(const Call *op) override {
                if (op->call_type != Call::Intrinsic || op->name != intrinsic::gpu_thread_id)
                    return IRMutator::visit(op);
                return Variable::make(Int(32), thread_var(int(*as_const_int(op->args[0]))));
            }
        } ids;
        auto lin = linear_in(prune_min_max(ids.mutate(base)),
                             {thread_var(0), thread_var(1), thread_var(2)});
        if (!lin) fail("its index " + to_string(i) + " is not linear in the thread ids");
        const Expr &rest = lin->second;
        if (rewriting) {
            Expr local;
            if (dense) {
                int64_t rank = std::distance(values.begin(), values.find(*as_const_int(rest)));
                local = Expr(int(rank));
            } else {
                local = simplify(rest - Expr(int(*values.begin())));
            }
            return lanes > 1 ? Ramp::make(local, stride, lanes) : local;
        }
        for (size_t d = 0; d < 3; d++)
            active[d] = std::max(active[d], threads[d]);
        std::array<Expr, 3> c{lin->first[0], lin->first[1], lin->first[2]};
        for (const Expr &k : c) {
            for (const auto &[v, range] : loops) {
                if (expr_uses_var(k, v))
                    fail("its index " + to_string(i) + " moves with the thread ids by " +
                         to_string(k) + ", which changes with the loop over " + v);
            }
        }
        auto same = [](const std::array<Expr, 3> &a, const std::array<Expr, 3> &b) {
            return equal(a[0], b[0]) && equal(a[1], b[1]) && equal(a[2], b[2]);
        };
        if (!strides) {
            strides = c;
            first_access = "index " + to_string(i);
        } else if (!same(*strides, c)) {
            fail("its index " + to_string(i) + " moves with the thread ids differently from " +
                 first_access);
        }
        if (!add_values(rest, *step, lanes)) {
            fail("the part of its index " + to_string(i) + " that one thread moves through, " +
                 to_string(rest) + ", is neither a constant nor linear in loops of constant range");
        }
        return index;
    }
};

} // namespace

Stmt lift_register_array(const Stmt &body, const std::string &name, Type type,
                         const DeviceKernel &kernel, const std::string &kernel_func) {
    return LiftRegisterArray(name, kernel, kernel_func).lift(body, type);
}

} // namespace kiln
