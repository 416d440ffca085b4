#include "schedule/StorageFlattening.h"

#include <algorithm>
#include <map>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "lang/Var.h"
#include "schedule/BoundsInference.h"

namespace kiln {

namespace {

Expr var(const std::string &name) {
    return Variable::make(Int(32), name);
}

/// `dense` marks a pipeline argument, whose dimension 0 has stride 1 (checked at entry).
Expr flat_index(const std::string &buf, const std::vector<Expr> &args, bool dense) {
    Expr index = 0;
    for (size_t d = 0; d < args.size(); d++) {
        Expr offset = args[d] - var(buffer_min_name(buf, int(d)));
        Expr stride = d == 0 && dense ? Expr(1) : var(buffer_stride_name(buf, int(d)));
        index = index + offset * stride;
    }
    return index;
}

class FlattenStorage : public IRMutator {
public:
    explicit FlattenStorage(const PipelineEnv &env) : env(env) {}

protected:
    using IRMutator::visit;

    Stmt visit(const Realize *op) override {
        Stmt body = mutate(op->body);
        const FunctionContents &f = *env.funcs.at(op->name);
        const FuncSchedule &fs = env.schedules.at(op->name);
        // Storage order: position of each dimension in memory, innermost first.
        std::vector<int> order;
        for (const std::string &v : fs.storage_order) {
            order.push_back(int(std::find(f.args.begin(), f.args.end(), v) - f.args.begin()));
        }
        for (int i = int(op->types.size()) - 1; i >= 0; i--) {
            std::string buf = buffer_name(f, i);
            std::vector<Expr> extents;
            for (int d : order)
                extents.push_back(var(buffer_extent_name(buf, d)));
            MemoryType mt = op->memory_type;
            body = Allocate::make(buf, op->types[i], mt, extents, Expr(), body);
            // Strides follow the storage order; the symbols are what Loads and Stores use.
            std::vector<std::pair<std::string, Expr>> lets;
            Expr stride = 1;
            for (int d : order) {
                lets.emplace_back(buffer_stride_name(buf, d), stride);
                stride = stride * var(buffer_extent_name(buf, d));
            }
            for (size_t d = 0; d < op->bounds.size(); d++) {
                lets.emplace_back(buffer_min_name(buf, int(d)), op->bounds[d].min);
                lets.emplace_back(buffer_extent_name(buf, int(d)), op->bounds[d].extent);
            }
            for (auto &[name, value] : lets)
                body = LetStmt::make(name, value, body);
        }
        return body;
    }

    Stmt visit(const Provide *op) override {
        const FunctionContents &f = *env.funcs.at(op->name);
        bool dense =
            std::find(env.outputs.begin(), env.outputs.end(), op->name) != env.outputs.end();
        std::vector<Expr> args = mutate_exprs(op->args, &changed_dummy);
        std::vector<Expr> values = mutate_exprs(op->values, &changed_dummy);
        if (values.size() == 1) {
            std::string buf = buffer_name(f, 0);
            return Store::make(buf, values[0], flat_index(buf, args, dense));
        }
        // Every value is computed before any is stored: values may read the old ones.
        std::vector<Stmt> stores;
        std::vector<std::string> names;
        for (size_t i = 0; i < values.size(); i++) {
            names.push_back(f.name + ".value" + std::to_string(i));
            std::string buf = buffer_name(f, int(i));
            stores.push_back(Store::make(buf, Variable::make(values[i].type(), names.back()),
                                         flat_index(buf, args, dense)));
        }
        Stmt s = Block::make(stores);
        for (int i = int(values.size()) - 1; i >= 0; i--)
            s = LetStmt::make(names[i], values[i], s);
        return s;
    }

    Expr visit(const Call *op) override {
        if (op->call_type != Call::Func && op->call_type != Call::Image) {
            return IRMutator::visit(op);
        }
        std::vector<Expr> args = mutate_exprs(op->args, &changed_dummy);
        std::string buf = op->call_type == Call::Func
                              ? buffer_name(*env.funcs.at(op->name), op->value_index)
                              : op->name;
        // Inputs and outputs (an update reads its output) are pipeline arguments: dense in dim 0.
        bool dense =
            op->call_type == Call::Image ||
            std::find(env.outputs.begin(), env.outputs.end(), op->name) != env.outputs.end();
        return Load::make(op->type, buf, flat_index(buf, args, dense));
    }

private:
    const PipelineEnv &env;
    bool changed_dummy = false;
};

// The promises callers make about input images (ImageParam::dim(d).set_min, set_extent,
// set_stride) and output buffers (Func::output_buffer().dim(d)), by the names of the fields they
// fix.
class FindPromises : public IRVisitor {
public:
    std::map<std::string, Expr> values;

    void add(const std::string &buffer, const ParameterContents &p) {
        for (const auto &[d, v] : p.min_constraint)
            values[buffer_min_name(buffer, d)] = v;
        for (const auto &[d, v] : p.extent_constraint)
            values[buffer_extent_name(buffer, d)] = v;
        for (const auto &[d, v] : p.stride_constraint)
            values[buffer_stride_name(buffer, d)] = v;
    }

protected:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Image && op->param) add(op->name, *op->param);
    }
};

// Uses the promised values in place of the fields, except in the entry checks (AssertStmts),
// which test the promises against the buffer's fields.
class KeepPromises : public IRMutator {
public:
    explicit KeepPromises(const std::map<std::string, Expr> &values) : values(values) {}

protected:
    using IRMutator::visit;
    Stmt visit(const AssertStmt *op) override { return Stmt(op); }
    Expr visit(const Variable *op) override {
        auto it = values.find(op->name);
        return it == values.end() ? Expr(op) : it->second;
    }

private:
    const std::map<std::string, Expr> &values;
};

} // namespace

Stmt storage_flattening(const Stmt &s, const PipelineEnv &env) {
    Stmt flat = FlattenStorage(env).mutate(s);
    FindPromises promises;
    promises.include(s);
    for (const std::string &o : env.outputs) {
        const FunctionContents &f = *env.funcs.at(o);
        for (size_t i = 0; i < f.output_buffers.size(); i++) {
            if (f.output_buffers[i]) promises.add(buffer_name(f, int(i)), *f.output_buffers[i]);
        }
    }
    if (promises.values.empty()) return flat;
    return KeepPromises(promises.values).mutate(flat);
}

} // namespace kiln
