#include "schedule/AddBufferChecks.h"

#include <algorithm>
#include <map>
#include <set>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "lang/Simplify.h"
#include "schedule/BoundsInference.h"
#include "schedule/BoxesTouched.h"

namespace kiln {

namespace {

Expr var(const std::string &name) {
    return Variable::make(Int(32), name);
}

constexpr int error_access_out_of_bounds = -6;
constexpr int error_param_out_of_range = -8;
constexpr int error_bad_dimensions = -5;
constexpr int error_bad_stride = -7;

class FindInputs : public IRVisitor {
public:
    std::vector<LoweredArgument> images;
    std::map<std::string, std::shared_ptr<ParameterContents>> scalars;

private:
    void add_image(const std::string &name, Type t, int dims,
                   const std::shared_ptr<ParameterContents> &param,
                   const std::shared_ptr<BufferContents> &buffer) {
        for (const LoweredArgument &a : images) {
            if (a.name != name) continue;
            if ((param && a.param && a.param != param) ||
                (buffer && a.buffer && a.buffer != buffer)) {
                user_error("two different inputs are named '", name,
                           "'; give each Buffer and ImageParam of a pipeline its own name");
            }
            return;
        }
        LoweredArgument a;
        a.name = name;
        a.kind = LoweredArgument::Buffer;
        a.type = t;
        a.dimensions = dims;
        a.param = param;
        a.buffer = buffer;
        images.push_back(a);
    }
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type != Call::Image) return;
        add_image(op->name, op->type, int(op->args.size()), op->param, op->buffer);
    }
    void visit(const Variable *op) override {
        if (!op->param) return;
        if (op->param->is_buffer) {
            add_image(op->param->name, op->param->type, op->param->dimensions, op->param, nullptr);
        } else {
            scalars[op->name] = op->param;
        }
    }
};

Stmt check(const Expr &cond, const std::string &message, std::vector<Expr> args, int code,
           const Stmt &body) {
    Expr c = simplify(cond);
    if (is_const_true(c)) return body;
    return Block::make(AssertStmt::make(c, message, std::move(args), code), body);
}

Expr as_wide(const Expr &e) {
    return cast(e.type().is_float() ? Float(64) : Int(64), e);
}

// What a caller promised about a buffer argument: an input's ImageParam, an output's
// Func::output_buffer; null where nothing can have been promised.
const ParameterContents *promises_of(const LoweredArgument &a, const PipelineEnv &env) {
    if (!a.is_output) return a.param.get();
    for (const std::string &o : env.outputs) {
        const FunctionContents &f = *env.funcs.at(o);
        for (size_t i = 0; i < f.output_buffers.size(); i++) {
            if (f.output_buffers[i] && buffer_name(f, int(i)) == a.name)
                return f.output_buffers[i].get();
        }
    }
    return nullptr;
}

} // namespace

std::vector<LoweredArgument> collect_arguments(const Stmt &s, const PipelineEnv &env) {
    FindInputs inputs;
    inputs.include(s);
    // ImageParams and Params in the order they were declared; Buffers used directly (which
    // have no declaration order of their own) after them, in the order the code first uses them.
    std::vector<LoweredArgument> args, buffers;
    for (const LoweredArgument &a : inputs.images)
        (a.param ? args : buffers).push_back(a);
    for (auto &[name, p] : inputs.scalars) {
        LoweredArgument a;
        a.name = name;
        a.kind = LoweredArgument::Scalar;
        a.type = p->type;
        a.param = p;
        args.push_back(a);
    }
    std::stable_sort(args.begin(), args.end(),
                     [](const LoweredArgument &a, const LoweredArgument &b) {
                         return a.param->serial < b.param->serial;
                     });
    args.insert(args.end(), buffers.begin(), buffers.end());
    for (const std::string &o : env.outputs) {
        const FunctionContents &f = *env.funcs.at(o);
        for (size_t i = 0; i < f.output_types.size(); i++) {
            LoweredArgument a;
            a.name = buffer_name(f, int(i));
            a.kind = LoweredArgument::Buffer;
            a.type = f.output_types[i];
            a.dimensions = f.dimensions();
            a.is_output = true;
            args.push_back(a);
        }
    }
    return args;
}

Stmt add_buffer_checks(const Stmt &body, const PipelineEnv &env,
                       const std::vector<LoweredArgument> &args) {
    std::vector<Stmt> checks;
    // Dimension 0 of every buffer is dense (as in Halide): checked here, and assumed by storage
    // flattening, so vector loads and stores along it are contiguous.
    const Stmt &s = body;
    for (const LoweredArgument &a : args) {
        if (a.kind == LoweredArgument::Scalar || a.dimensions == 0) continue;
        std::string stride = buffer_stride_name(a.name, 0);
        checks.push_back(check(var(stride) == 1,
                               "buffer '" + a.name + "' dimension 0 must have stride 1, got %lld",
                               {as_wide(var(stride))}, error_bad_stride, Stmt()));
    }
    // What the caller promised about an input or an output (ImageParam::dim(d).set_min,
    // set_extent, set_stride; Func::output_buffer().dim(d) the same): storage flattening uses
    // the promised values, these checks keep the fields.
    for (const LoweredArgument &a : args) {
        if (a.kind == LoweredArgument::Scalar) continue;
        const ParameterContents *promised = promises_of(a, env);
        if (!promised) continue;
        const ParameterContents &p = *promised;
        const std::string api = p.is_output ? "Func::output_buffer()." : "ImageParam::";
        struct Promised {
            const char *what;
            const std::map<int, Expr> &values;
            std::string (*field)(const std::string &, int);
        };
        for (const Promised &kind : {Promised{"min", p.min_constraint, buffer_min_name},
                                     Promised{"extent", p.extent_constraint, buffer_extent_name},
                                     Promised{"stride", p.stride_constraint, buffer_stride_name}}) {
            for (const auto &[d, value] : kind.values) {
                Expr field = var(kind.field(a.name, d));
                std::string dim = std::to_string(d);
                checks.push_back(
                    check(field == value,
                          "buffer '" + a.name + "' dimension " + dim + " must have " + kind.what +
                              " %lld (" + api + "dim(" + dim + ").set_" + kind.what + "), got %lld",
                          {as_wide(value), as_wide(field)}, error_bad_dimensions, Stmt()));
            }
        }
    }
    // The Func each output buffer holds, to find its writes and reads; inputs are found by their
    // reads.
    std::map<std::string, std::string> func_of;
    std::set<std::string> read, written;
    for (const LoweredArgument &a : args) {
        if (a.kind == LoweredArgument::Scalar) continue;
        func_of[a.name] = a.name;
        if (!a.is_output) read.insert(a.name);
    }
    for (const std::string &o : env.outputs) {
        const FunctionContents &f = *env.funcs.at(o);
        for (size_t i = 0; i < f.output_types.size(); i++)
            func_of[buffer_name(f, int(i))] = o;
        // An output holds what its Func writes, and must also cover what the pipeline reads of
        // it: another output (or its own update) may read it past the region it writes.
        written.insert(o);
        read.insert(o);
    }
    // On the simplified loop nest: the simplifier knows each loop variable's range, so a
    // region's extent such as a GuardWithIf tile's min(loop_max, tile_end) - tile_start becomes
    // the constant it is where the tile divides the loop; interval arithmetic on the unsimplified
    // bounds would add the ranges of the start and the end of a tile (all tiles' extents).
    std::map<std::string, Box> boxes = boxes_touched(simplify(s), read, written);
    for (const LoweredArgument &a : args) {
        if (a.kind == LoweredArgument::Scalar) continue;
        bool is_output = a.is_output;
        Box box = boxes[func_of[a.name]];
        for (size_t d = 0; d < box.size(); d++) {
            Expr mn = var(buffer_min_name(a.name, int(d)));
            Expr mx = mn + var(buffer_extent_name(a.name, int(d))) - 1;
            if (!box[d].is_bounded()) {
                user_error("cannot check the region of '", a.name, "' the pipeline ",
                           is_output ? "writes" : "reads", " in dimension ", d, ": it is ", box[d],
                           "; clamp the coordinates used to access it");
            }
            Expr need_min = simplify(box[d].min), need_max = simplify(box[d].max);
            std::string msg = "buffer '" + a.name + "' dimension " + std::to_string(d) +
                              ": the schedule needs [%lld, %lld] but the buffer covers "
                              "[%lld, %lld]";
            checks.push_back(check(need_min >= mn && need_max <= mx, msg,
                                   {as_wide(need_min), as_wide(need_max), as_wide(mn), as_wide(mx)},
                                   error_access_out_of_bounds, Stmt()));
        }
    }
    // The values of a multi-valued output share the shape of the first.
    for (const std::string &o : env.outputs) {
        const FunctionContents &f = *env.funcs.at(o);
        for (size_t i = 1; i < f.output_types.size(); i++) {
            std::string first = buffer_name(f, 0), other = buffer_name(f, int(i));
            for (int d = 0; d < f.dimensions(); d++) {
                Expr same = var(buffer_min_name(first, d)) == var(buffer_min_name(other, d)) &&
                            var(buffer_extent_name(first, d)) == var(buffer_extent_name(other, d));
                std::string msg = "output buffers '" + first + "' and '" + other +
                                  "' must have the same shape, but differ in dimension " +
                                  std::to_string(d);
                checks.push_back(check(same, msg, {}, error_bad_dimensions, Stmt()));
            }
        }
    }
    FindInputs inputs;
    inputs.include(s);
    for (auto &[name, p] : inputs.scalars) {
        Expr v = Variable::make(p->type, name, p);
        const char *fmt = p->type.is_float() ? "%g" : "%lld";
        if (p->min_value.defined()) {
            checks.push_back(
                check(v >= p->min_value,
                      "param '" + name + "' is " + fmt + " but must be at least " + fmt,
                      {as_wide(v), as_wide(p->min_value)}, error_param_out_of_range, Stmt()));
        }
        if (p->max_value.defined()) {
            checks.push_back(check(
                v <= p->max_value, "param '" + name + "' is " + fmt + " but must be at most " + fmt,
                {as_wide(v), as_wide(p->max_value)}, error_param_out_of_range, Stmt()));
        }
    }
    checks.push_back(s);
    return Block::make(checks);
}

} // namespace kiln
