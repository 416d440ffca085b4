#include "lang/BoundaryConditions.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"

namespace kiln {

namespace {

/// "1 dimension", "2 dimensions": a count with its noun, for messages.
std::string count(size_t n, const std::string &noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// a + b and a - b, folded when both are int32 constants, so that the boundary conditions of
// concrete buffers read as plainly as they were written; symbolic bounds stay symbolic.
Expr plus(const Expr &a, const Expr &b) {
    auto x = as_const_int(a), y = as_const_int(b);
    bool int32 = a.type() == Int(32) && b.type() == Int(32);
    if (int32 && x && y) return Expr(int(*x + *y));
    if (int32 && y && *y == 0) return a;
    if (int32 && x && *x == 0) return b;
    return a + b;
}

Expr minus(const Expr &a, const Expr &b) {
    auto x = as_const_int(a), y = as_const_int(b);
    bool int32 = a.type() == Int(32) && b.type() == Int(32);
    if (int32 && x && y) return Expr(int(*x - *y));
    if (int32 && y && *y == 0) return a;
    return a - b;
}

/// A source seen as a function of integer coordinates, with its bounds.
struct Source {
    std::string name;
    std::function<Expr(const std::vector<Expr> &)> call;
    std::vector<Range> bounds;
    std::shared_ptr<const void> identity; ///< the Buffer, ImageParam or Func contents
};

/// The default name of a boundary condition: "<source>_<condition>", the same in every process
/// and every build of the algorithm (the algorithm hash includes Func names, and replaying a
/// schedule finds Funcs by name). Only a second boundary condition of the same kind on the same
/// source object gets a suffix ("in_repeat_edge_2"), so that one pipeline can hold both.
std::string default_name(const Source &s, const char *condition) {
    static std::mutex mutex;
    // Per base name: the sources wrapped so far (while alive), with how many times.
    static std::map<std::string, std::vector<std::pair<std::weak_ptr<const void>, int>>> made;
    std::string base = s.name + "_" + condition;
    std::lock_guard<std::mutex> lock(mutex);
    auto &list = made[base];
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const auto &e) { return e.first.expired(); }),
        list.end());
    for (auto &[source, times] : list) {
        if (source.lock() != s.identity) continue;
        times++;
        return base + "_" + std::to_string(times);
    }
    list.emplace_back(s.identity, 1);
    return base;
}

Source from(const Func &f, const std::vector<Range> &bounds, const char *condition) {
    if (!f.defined()) user_error(condition, ": Func '", f.name(), "' has no definition");
    if (int(bounds.size()) != f.dimensions()) {
        user_error(condition, ": Func '", f.name(), "' has ", count(f.dimensions(), "dimension"),
                   ", but bounds for ", count(bounds.size(), "dimension"), " were given");
    }
    for (size_t d = 0; d < bounds.size(); d++) {
        if (!bounds[d].min.defined() || !bounds[d].extent.defined()) {
            user_error(condition, ": the bounds of dimension ", d, " of Func '", f.name(),
                       "' are undefined; give a Range(min, extent) for every dimension");
        }
    }
    return {f.name(), [f](const std::vector<Expr> &a) { return Expr(f(a)); }, bounds, f.function()};
}

Source from(const BufferBase &b) {
    if (!b.defined()) user_error("boundary condition of an undefined Buffer");
    std::vector<Range> bounds;
    for (int d = 0; d < b.dimensions(); d++)
        bounds.emplace_back(b.dim(d).min, b.dim(d).extent);
    return {b.name(), [b](const std::vector<Expr> &a) { return b.call(a); }, bounds,
            b.get_contents()};
}

Source from(const ImageParam &p) {
    std::vector<Range> bounds;
    for (int d = 0; d < p.dimensions(); d++)
        bounds.emplace_back(p.min(d), p.extent(d));
    return {p.name(), [p](const std::vector<Expr> &a) { return p.call(a); }, bounds,
            p.get_contents()};
}

/// Defines a Func over fresh Vars whose value is body(vars, clamped coordinates).
Func wrap(const Source &s, const char *condition, const std::string &name,
          const std::function<Expr(const std::vector<Expr> &, const std::vector<Expr> &)> &body) {
    Func f(name.empty() ? default_name(s, condition) : name);
    std::vector<Expr> vars, clamped;
    for (size_t d = 0; d < s.bounds.size(); d++) {
        Var v(f.name() + ".d" + std::to_string(d));
        vars.push_back(v);
        Expr lo = s.bounds[d].min, hi = minus(plus(lo, s.bounds[d].extent), 1);
        clamped.push_back(clamp(Expr(v), lo, hi));
    }
    f(vars) = body(vars, clamped);
    return f;
}

Func repeat_edge_impl(const Source &s, const std::string &name) {
    return wrap(s, "repeat_edge", name,
                [&](const std::vector<Expr> &, const std::vector<Expr> &c) { return s.call(c); });
}

Func constant_exterior_impl(const Source &s, const Expr &value, const std::string &name) {
    if (!value.defined()) user_error("constant_exterior of '", s.name, "': value is undefined");
    return wrap(s, "constant_exterior", name,
                [&](const std::vector<Expr> &v, const std::vector<Expr> &c) {
                    Expr inside;
                    for (size_t d = 0; d < v.size(); d++) {
                        const Range &r = s.bounds[d];
                        Expr in_d = v[d] >= r.min && v[d] < plus(r.min, r.extent);
                        inside = inside.defined() ? inside && in_d : in_d;
                    }
                    Expr inner = s.call(c);
                    Type t = inner.type();
                    auto i = as_const_int(value);
                    auto f = as_const_float(value);
                    bool fits = !t.is_int_or_uint() ||
                                (i ? t.can_represent(*i) : !f || *f == std::trunc(*f));
                    if (!fits) {
                        user_error("constant_exterior of '", s.name, "': the value ", value,
                                   " does not fit in ", t, ", the type of '", s.name,
                                   "'; give a value of type ", t);
                    }
                    if (!inside.defined()) return inner; // zero-dimensional: always inside
                    return select(inside, inner, cast(t, value));
                });
}

Func mirror_interior_impl(const Source &s, const std::string &name) {
    return wrap(
        s, "mirror_interior", name, [&](const std::vector<Expr> &v, const std::vector<Expr> &) {
            std::vector<Expr> coords;
            for (size_t d = 0; d < v.size(); d++) {
                Expr mn = s.bounds[d].min, extent = s.bounds[d].extent;
                // Reflect within one period of 2 * (extent - 1); Euclidean modulo keeps it >= 0.
                auto e = as_const_int(extent);
                Expr period = e && extent.type() == Int(32) ? Expr(std::max(2 * (int(*e) - 1), 1))
                                                            : max(2 * (extent - 1), 1);
                Expr m = minus(v[d], mn) % period;
                Expr reflected = select(m < extent, m, period - m);
                coords.push_back(clamp(plus(reflected, mn), mn, minus(plus(mn, extent), 1)));
            }
            return s.call(coords);
        });
}

} // namespace

Func repeat_edge(const Func &source, const std::vector<Range> &bounds, const std::string &name) {
    return repeat_edge_impl(from(source, bounds, "repeat_edge"), name);
}
Func repeat_edge(const BufferBase &source, const std::string &name) {
    return repeat_edge_impl(from(source), name);
}
Func repeat_edge(const ImageParam &source, const std::string &name) {
    return repeat_edge_impl(from(source), name);
}

Func constant_exterior(const Func &source, const Expr &value, const std::vector<Range> &bounds,
                       const std::string &name) {
    return constant_exterior_impl(from(source, bounds, "constant_exterior"), value, name);
}
Func constant_exterior(const BufferBase &source, const Expr &value, const std::string &name) {
    return constant_exterior_impl(from(source), value, name);
}
Func constant_exterior(const ImageParam &source, const Expr &value, const std::string &name) {
    return constant_exterior_impl(from(source), value, name);
}

Func mirror_interior(const Func &source, const std::vector<Range> &bounds,
                     const std::string &name) {
    return mirror_interior_impl(from(source, bounds, "mirror_interior"), name);
}
Func mirror_interior(const BufferBase &source, const std::string &name) {
    return mirror_interior_impl(from(source), name);
}
Func mirror_interior(const ImageParam &source, const std::string &name) {
    return mirror_interior_impl(from(source), name);
}

} // namespace kiln
