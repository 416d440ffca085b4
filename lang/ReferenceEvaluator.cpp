#include "lang/ReferenceEvaluator.h"

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "lang/Error.h"
#include "lang/ExprEvaluator.h"
#include "lang/Function.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"

// How updates are evaluated
// -------------------------
// A Func with updates is materialized lazily, one "column" of one update at a time. The column of
// a point for update k is its coordinates at the positions where update k's left-hand side has
// the pure Var in place; an update writes only inside the column it runs for, so producing f at
// a point p means running, for each update in order, that update over p's column: the pure Vars
// are fixed to p's coordinates and the whole RDom is iterated (r.x fastest). This is Halide's
// "each update over its whole domain", restricted to the columns that are demanded. An update
// whose left-hand side has no pure Var in place has a single column: the whole Func.
//
// Inside update k at column c, a read of f at a point of c sees the values written so far by this
// run (the iteration is sequential, so scans see earlier iterations); a read of f at a point of
// another column sees f after updates 0..k-1 there. Valid Halide programs never observe the
// difference between this and any legal loop order, because a read of another column in the same
// update would be a race once the pure Var is parallelized.
//
// Storage per Func: the pure values by point, and per update the values it wrote by point. A
// point an update did not write falls through to the previous stage.

namespace kiln {

namespace {

using Point = std::vector<int>;
using Values = std::vector<Value>;

std::string point_string(const Point &p) {
    std::string s = "(";
    for (size_t i = 0; i < p.size(); i++)
        s += (i ? ", " : "") + std::to_string(p[i]);
    return s + ")";
}

Point to_point(const std::vector<Value> &args) {
    Point p;
    p.reserve(args.size());
    for (const Value &a : args)
        p.push_back(int(a.as_int()));
    return p;
}

template <typename T>
T read_raw(const uint8_t *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename T>
void write_raw(uint8_t *p, T v) {
    std::memcpy(p, &v, sizeof v);
}

Value load_element(const BufferContents &b, const Point &p) {
    const uint8_t *a = b.host + b.offset_of(p.data(), int(p.size()));
    Type t = b.type;
    if (t == Float(32)) return Value::make_float(t, read_raw<float>(a));
    if (t == Float(64)) return Value::make_float(t, read_raw<double>(a));
    if (t == BFloat(16)) return Value::make_float(t, float_of_bfloat16_bits(read_raw<uint16_t>(a)));
    if (t == Bool()) return Value::make_bool(read_raw<uint8_t>(a) != 0);
    if (t == Int(8)) return Value::make_int(t, read_raw<int8_t>(a));
    if (t == Int(16)) return Value::make_int(t, read_raw<int16_t>(a));
    if (t == Int(32)) return Value::make_int(t, read_raw<int32_t>(a));
    if (t == Int(64)) return Value::make_int(t, read_raw<int64_t>(a));
    if (t == UInt(8)) return Value::make_uint(t, read_raw<uint8_t>(a));
    if (t == UInt(16)) return Value::make_uint(t, read_raw<uint16_t>(a));
    if (t == UInt(32)) return Value::make_uint(t, read_raw<uint32_t>(a));
    if (t == UInt(64)) return Value::make_uint(t, read_raw<uint64_t>(a));
    runtime_error("buffer '", b.name, "' holds ", t, ", which the reference evaluator cannot read");
}

void store_element(const BufferBase &b, const Point &p, const Value &v) {
    Type t = b.type();
    internal_assert(v.type == t, "reference evaluator: storing a ", v.type, " into buffer '",
                    b.name(), "' of ", t);
    uint8_t *a = b.address_of(p);
    if (t == Float(32)) return write_raw(a, float(v.f));
    if (t == Float(64)) return write_raw(a, v.f);
    if (t == BFloat(16)) return write_raw(a, bfloat16_bits_of(float(v.f))); // v.f is exact
    if (t == Bool()) return write_raw(a, uint8_t(v.bits != 0));
    // Integer payloads are already wrapped into the type, so truncating the bits is exact.
    if (t.is_int_or_uint() && t.bits == 8) return write_raw(a, uint8_t(v.bits));
    if (t.is_int_or_uint() && t.bits == 16) return write_raw(a, uint16_t(v.bits));
    if (t.is_int_or_uint() && t.bits == 32) return write_raw(a, uint32_t(v.bits));
    if (t.is_int_or_uint() && t.bits == 64) return write_raw(a, uint64_t(v.bits));
    user_error("reference evaluator: cannot store values of type ", t, " into buffer '", b.name(),
               "'");
}

// Every Func reachable from the output, by identity rather than by name, and every Param and
// ImageParam their definitions use (RDom bounds included).
class PipelineScan : public IRVisitor {
public:
    std::vector<FunctionPtr> funcs;
    std::vector<std::shared_ptr<ParameterContents>> params;

    explicit PipelineScan(const FunctionPtr &output) {
        add_func(output);
        // funcs grows while it is scanned.
        for (size_t i = 0; i < funcs.size(); i++) {
            FunctionPtr f = funcs[i];
            scan(f->init);
            for (const Definition &u : f->updates)
                scan(u);
        }
    }

private:
    std::set<const FunctionContents *> seen_funcs;
    std::set<const ParameterContents *> seen_params;

    void add_func(const FunctionPtr &f) {
        internal_assert(f != nullptr, "reference evaluator: a Func call without its function");
        if (seen_funcs.insert(f.get()).second) funcs.push_back(f);
    }
    void add_param(const std::shared_ptr<ParameterContents> &p) {
        if (seen_params.insert(p.get()).second) params.push_back(p);
    }
    void scan(const Definition &d) {
        for (const Expr &e : d.args)
            include(e);
        for (const Expr &e : d.values)
            include(e);
        if (d.predicate.defined()) include(d.predicate);
        if (!d.rdom) return;
        for (const ReductionVariable &r : d.rdom->vars) {
            include(r.min);
            include(r.extent);
        }
    }

    using IRVisitor::visit;
    void visit(const Variable *op) override {
        if (op->param) add_param(op->param);
    }
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Func) add_func(op->func);
        if (op->call_type == Call::Image && op->param) add_param(op->param);
    }
};

// The first variable in an expression that is neither a Param nor an ImageParam shape.
class FindNonParamVariable : public IRVisitor {
public:
    const Variable *found = nullptr;

private:
    using IRVisitor::visit;
    void visit(const Variable *op) override {
        if (!op->param && !found) found = op;
    }
};

// The values of every Func of one pipeline, computed on demand and memoized.
class Realization {
public:
    explicit Realization(const FunctionPtr &output);

    // The values of f at p after all of its definitions.
    const Values &final_values(const FunctionContents *f, const Point &p) {
        FuncState &s = state_of(f);
        return values_after(s, int(s.updates.size()), p);
    }

private:
    struct UpdateState {
        std::vector<int> pure_positions; // where the LHS has the pure Var in place
        std::set<Point> finished, running;
        std::map<Point, Values> written;
    };
    struct FuncState {
        const FunctionContents *func = nullptr;
        std::map<Point, Values> pure;
        std::set<Point> pure_running;
        std::vector<UpdateState> updates;
    };

    std::map<const FunctionContents *, FuncState> states;
    std::vector<std::pair<std::string, Value>> param_values;

    void bind_params(const std::vector<std::shared_ptr<ParameterContents>> &params);
    void prepare(const FunctionPtr &f, const std::set<std::string> &param_names);

    FuncState &state_of(const FunctionContents *f) {
        auto it = states.find(f);
        internal_assert(it != states.end(), "reference evaluator: Func '", f->name,
                        "' was not found when scanning the pipeline");
        return it->second;
    }

    ExprEvaluator new_evaluator() const {
        ExprEvaluator ev;
        for (const auto &[name, v] : param_values)
            ev.bind(name, v);
        return ev;
    }

    static Point column_of(const UpdateState &u, const Point &p) {
        Point c;
        for (int i : u.pure_positions)
            c.push_back(p[i]);
        return c;
    }

    const Values &values_after(FuncState &s, int stages, const Point &p);
    const Values &pure_values(FuncState &s, const Point &p);
    void run_update(FuncState &s, int index, const Point &column);
    Value call(const Call *op, const std::vector<Value> &args,
               const std::function<std::string()> &reader);
};

Realization::Realization(const FunctionPtr &output) {
    PipelineScan scan(output);
    bind_params(scan.params);
    std::set<std::string> param_names;
    for (const auto &[name, v] : param_values)
        param_names.insert(name);
    for (const FunctionPtr &f : scan.funcs)
        prepare(f, param_names);
}

void Realization::bind_params(const std::vector<std::shared_ptr<ParameterContents>> &params) {
    // Params are bound by name, so two different Params with one name would be ambiguous.
    std::map<std::string, const ParameterContents *> by_name;
    for (const auto &p : params) {
        auto [it, inserted] = by_name.emplace(p->name, p.get());
        if (!inserted) {
            user_error("two different parameters are named '", p->name,
                       "'; give each Param and ImageParam its own name");
        }
        if (!p->is_buffer) {
            if (!p->scalar_value.defined()) {
                runtime_error("param '", p->name, "' has no value; call set() before realizing");
            }
            ExprEvaluator ev;
            Value v = ev.eval(p->scalar_value);
            internal_assert(v.type == p->type, "param '", p->name, "' of type ", p->type,
                            " holds a value of type ", v.type);
            bool below = p->min_value.defined() &&
                         ev.eval(LT::make(p->scalar_value, p->min_value)).as_bool();
            bool above = p->max_value.defined() &&
                         ev.eval(GT::make(p->scalar_value, p->max_value)).as_bool();
            if (below || above) {
                runtime_error("param '", p->name, "' is ", p->scalar_value, ", outside its range [",
                              p->min_value, ", ", p->max_value, "]");
            }
            param_values.emplace_back(p->name, v);
            continue;
        }
        const BufferBase &b = p->buffer;
        if (!b.defined()) {
            runtime_error("image param '", p->name, "' has no buffer; call set() before realizing");
        }
        if (b.type() != p->type || b.dimensions() != p->dimensions) {
            runtime_error("image param '", p->name, "' is ", p->type, " with ", p->dimensions,
                          " dimensions, but its buffer '", b.name(), "' is ", b.type(), " with ",
                          b.dimensions());
        }
        for (int d = 0; d < b.dimensions(); d++) {
            param_values.emplace_back(buffer_min_name(p->name, d),
                                      Value::make_int(Int(32), b.dim(d).min));
            param_values.emplace_back(buffer_extent_name(p->name, d),
                                      Value::make_int(Int(32), b.dim(d).extent));
            param_values.emplace_back(buffer_stride_name(p->name, d),
                                      Value::make_int(Int(32), b.dim(d).stride));
        }
    }
}

void Realization::prepare(const FunctionPtr &f, const std::set<std::string> &param_names) {
    if (!f->has_pure_definition()) {
        user_error("reference_realize: Func '", f->name, "' is used but has no definition");
    }
    // Variables and Params share one namespace in the expression evaluator.
    auto check_name = [&](const std::string &name) {
        if (param_names.count(name)) {
            user_error("Func '", f->name, "': variable '", name,
                       "' has the same name as a parameter; rename one of them");
        }
    };
    for (const std::string &a : f->args)
        check_name(a);

    FuncState &s = states[f.get()];
    s.func = f.get();
    for (size_t k = 0; k < f->updates.size(); k++) {
        const Definition &d = f->updates[k];
        UpdateState u;
        for (size_t i = 0; i < d.args.size(); i++) {
            const Variable *v = d.args[i].as<Variable>();
            if (v && !v->rdom && !v->param && v->name == f->args[i]) u.pure_positions.push_back(i);
        }
        if (d.rdom) {
            for (const ReductionVariable &r : d.rdom->vars) {
                check_name(r.name);
                for (const Expr &bound : {r.min, r.extent}) {
                    FindNonParamVariable find;
                    find.include(bound);
                    if (find.found) {
                        user_error("update ", k, " of '", f->name, "': the bounds of RDom '",
                                   d.rdom->name, "' use variable '", find.found->name,
                                   "'; RDom bounds may use only constants, Params, ImageParam "
                                   "shapes and calls");
                    }
                }
            }
        }
        s.updates.push_back(std::move(u));
    }
}

const Values &Realization::values_after(FuncState &s, int stages, const Point &p) {
    if (stages == 0) return pure_values(s, p);
    UpdateState &u = s.updates[stages - 1];
    Point column = column_of(u, p);
    if (!u.finished.count(column)) run_update(s, stages - 1, column);
    auto it = u.written.find(p);
    if (it != u.written.end()) return it->second;
    return values_after(s, stages - 1, p);
}

const Values &Realization::pure_values(FuncState &s, const Point &p) {
    auto it = s.pure.find(p);
    if (it != s.pure.end()) return it->second;
    const FunctionContents &f = *s.func;
    // Only a call cycle that reachable_functions missed (two Funcs sharing a name) gets here.
    if (!s.pure_running.insert(p).second) {
        user_error("recursive definition: the value of '", f.name, "' at ", point_string(p),
                   " depends on itself");
    }
    ExprEvaluator ev = new_evaluator();
    for (size_t i = 0; i < f.args.size(); i++)
        ev.bind(f.args[i], Value::make_int(Int(32), p[i]));
    auto reader = [&] { return f.name + point_string(p); };
    ev.on_call = [&](const Call *op, const std::vector<Value> &args) {
        return call(op, args, reader);
    };
    Values values;
    for (const Expr &e : f.init.values)
        values.push_back(ev.eval(e));
    s.pure_running.erase(p);
    return s.pure.emplace(p, std::move(values)).first->second;
}

void Realization::run_update(FuncState &s, int index, const Point &column) {
    const FunctionContents &f = *s.func;
    const Definition &d = f.updates[index];
    UpdateState &u = s.updates[index];
    if (!u.running.insert(column).second) {
        user_error("recursive definition: update ", index, " of '", f.name,
                   "' depends on its own result at column ", point_string(column));
    }

    ExprEvaluator ev = new_evaluator();
    for (size_t j = 0; j < u.pure_positions.size(); j++) {
        ev.bind(f.args[u.pure_positions[j]], Value::make_int(Int(32), column[j]));
    }
    std::vector<std::string> rnames;
    std::vector<int64_t> rmin, rend, r;
    auto reader = [&] {
        std::ostringstream where;
        where << f.name << ".update(" << index << ") with ";
        for (size_t j = 0; j < u.pure_positions.size(); j++) {
            where << f.args[u.pure_positions[j]] << " = " << column[j] << ", ";
        }
        for (size_t j = 0; j < r.size(); j++)
            where << rnames[j] << " = " << r[j] << ", ";
        std::string text = where.str();
        return text.substr(0, text.size() - 2);
    };
    ev.on_call = [&](const Call *op, const std::vector<Value> &args) -> Value {
        if (op->call_type != Call::Func || op->func.get() != s.func) {
            return call(op, args, reader);
        }
        // A read of f itself: this run's values in this column, the previous stage elsewhere.
        Point q = to_point(args);
        internal_assert(q.size() == f.args.size(), "call to '", f.name, "' with ", q.size(),
                        " arguments");
        auto it = u.written.find(q);
        bool same_column = column_of(u, q) == column;
        const Values &v =
            same_column && it != u.written.end() ? it->second : values_after(s, index, q);
        return v.at(op->value_index);
    };

    if (d.rdom) {
        for (const ReductionVariable &rv : d.rdom->vars) {
            rnames.push_back(rv.name);
            rmin.push_back(ev.eval(rv.min).as_int());
            rend.push_back(rmin.back() + ev.eval(rv.extent).as_int());
        }
    }
    bool empty = false;
    for (size_t j = 0; j < rmin.size(); j++)
        empty |= rend[j] <= rmin[j];
    r = rmin;
    while (!empty) {
        for (size_t j = 0; j < r.size(); j++)
            ev.bind(rnames[j], Value::make_int(Int(32), r[j]));
        Point site;
        for (const Expr &a : d.args)
            site.push_back(int(ev.eval(a).as_int()));
        internal_assert(column_of(u, site) == column, "update ", index, " of '", f.name,
                        "' wrote outside its column");
        // RDom::where: the points where the predicate is false are skipped.
        if (!d.predicate.defined() || ev.eval(d.predicate).as_int() != 0) {
            // All values of a tuple update are computed before any of them is stored.
            Values values;
            for (const Expr &e : d.values)
                values.push_back(ev.eval(e));
            u.written[site] = std::move(values);
        }
        // The next point of the RDom, first dimension fastest.
        size_t j = 0;
        for (; j < r.size(); j++) {
            if (++r[j] < rend[j]) break;
            r[j] = rmin[j];
        }
        if (j == r.size()) break;
    }
    u.running.erase(column);
    u.finished.insert(column);
}

Value Realization::call(const Call *op, const std::vector<Value> &args,
                        const std::function<std::string()> &reader) {
    Point p = to_point(args);
    if (op->call_type == Call::Func) {
        internal_assert(op->func != nullptr, "call to Func '", op->name, "' without its function");
        return final_values(op->func.get(), p).at(op->value_index);
    }
    internal_assert(op->call_type == Call::Image, "reference evaluator: unexpected call to '",
                    op->name, "'");
    const BufferContents *b = op->buffer ? op->buffer.get() : nullptr;
    if (!b && op->param) b = op->param->buffer.get_contents().get();
    internal_assert(b != nullptr, "image call to '", op->name, "' without a buffer");
    internal_assert(b->type == op->type, "image call to '", op->name, "' of type ", op->type,
                    " reads a buffer of ", b->type);
    try {
        return load_element(*b, p);
    } catch (const RuntimeError &e) {
        // Say who read out of bounds, which offset_of cannot know.
        throw RuntimeError(std::string(e.what()) + "; read by " + reader());
    }
}

std::string plural(size_t n, const char *word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

void check_output(const char *who, const Func &output) {
    if (!output.defined()) {
        user_error(who, ": Func '", output.name(), "' has no definition; define it first");
    }
    // Raises a CompileError naming the cycle.
    reachable_functions({output.function()});
}

void check_count(const char *who, const Func &output, size_t given, const char *what) {
    if (int(given) == output.dimensions()) return;
    user_error(who, ": '", output.name(), "' has ", plural(output.dimensions(), "dimension"),
               ", but ", plural(given, what), (given == 1 ? " was" : " were"), " given");
}

// Fills the buffers (one per value of the output, all over the same region) point by point.
void evaluate_into(const Func &output, const std::vector<BufferBase> &outs) {
    Realization realization(output.function());
    const BufferBase &first = outs.at(0);
    int n = first.dimensions();
    Point p(n), mins(n), ends(n);
    for (int d = 0; d < n; d++) {
        mins[d] = p[d] = first.dim(d).min;
        ends[d] = mins[d] + first.dim(d).extent;
        if (ends[d] <= mins[d]) return;
    }
    while (true) {
        const Values &v = realization.final_values(output.function().get(), p);
        for (size_t i = 0; i < outs.size(); i++)
            store_element(outs[i], p, v[i]);
        int d = 0;
        for (; d < n; d++) {
            if (++p[d] < ends[d]) break;
            p[d] = mins[d];
        }
        if (d == n) return;
    }
}

std::vector<BufferBase> realize_all(const char *who, const Func &output,
                                    const std::vector<int> &extents, const std::vector<int> &mins) {
    check_output(who, output);
    check_count(who, output, extents.size(), "extent");
    if (!mins.empty()) check_count(who, output, mins.size(), "min");
    for (size_t d = 0; d < extents.size(); d++) {
        if (extents[d] < 0) {
            user_error(who, ": extent ", d, " of '", output.name(), "' must be >= 0, got ",
                       extents[d]);
        }
    }
    std::vector<BufferBase> outs;
    for (int i = 0; i < output.num_values(); i++) {
        std::string name = output.name();
        if (output.num_values() > 1) name += "." + std::to_string(i);
        outs.emplace_back(output.output_types()[i], extents, name);
        if (!mins.empty()) outs.back().set_min(mins);
    }
    evaluate_into(output, outs);
    return outs;
}

} // namespace

std::vector<BufferBase> reference_realize_all(const Func &output, const std::vector<int> &extents,
                                              const std::vector<int> &mins) {
    return realize_all("reference_realize_all", output, extents, mins);
}

BufferBase reference_realize(const Func &output, const std::vector<int> &extents,
                             const std::vector<int> &mins) {
    if (output.defined() && output.num_values() != 1) {
        user_error("reference_realize: '", output.name(), "' has ", output.num_values(),
                   " values; use reference_realize_all");
    }
    return realize_all("reference_realize", output, extents, mins)[0];
}

void reference_realize_into(const Func &output, BufferBase &out) {
    const char *who = "reference_realize_into";
    check_output(who, output);
    if (output.num_values() != 1) {
        user_error(who, ": '", output.name(), "' has ", output.num_values(),
                   " values; use reference_realize_all");
    }
    if (!out.defined())
        user_error(who, ": the output buffer of '", output.name(), "' is undefined");
    if (out.dimensions() != output.dimensions()) {
        user_error(who, ": '", output.name(), "' has ", plural(output.dimensions(), "dimension"),
                   ", but buffer '", out.name(), "' has ", out.dimensions());
    }
    if (out.type() != output.output_type()) {
        user_error(who, ": '", output.name(), "' has type ", output.output_type(), ", but buffer '",
                   out.name(), "' holds ", out.type());
    }
    evaluate_into(output, {out});
}

BufferBase reference_realize_points(const Func &output,
                                    const std::vector<std::vector<int>> &points) {
    const char *who = "reference_realize_points";
    check_output(who, output);
    if (output.num_values() != 1) {
        user_error(who, ": '", output.name(), "' has ", output.num_values(),
                   " values; evaluate one value at a time");
    }
    for (const Point &p : points)
        check_count(who, output, p.size(), "coordinate");
    BufferBase out(output.output_type(), {int(points.size())}, output.name());
    Realization realization(output.function());
    for (size_t i = 0; i < points.size(); i++)
        store_element(out, Point{int(i)},
                      realization.final_values(output.function().get(), points[i])[0]);
    return out;
}

} // namespace kiln
