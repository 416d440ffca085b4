#include "autotune/Features.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "lang/IRVisitor.h"

namespace kiln::autotune {

namespace {

constexpr int levels = 4;        // innermost loop levels described one by one
constexpr double unknown = 16.0; // extent assumed for a loop whose extent is not a constant

float lg(double v) {
    return float(std::log2(1.0 + std::max(0.0, v)));
}

class Analysis : public IRVisitor {
public:
    std::map<std::string, int64_t> env;

    // Per execution of the innermost frame.
    struct Frame {
        double load_bytes = 0, store_bytes = 0, flops = 0, int_ops = 0;
        int height = 0; ///< loop levels below, this one included
    };
    std::vector<Frame> frames{Frame{}};

    double extent_at_level[levels] = {};
    double bytes_at_level[levels] = {};
    int max_lanes = 1, loops = 0, parallel_loops = 0, unrolled_loops = 0, vector_loops = 0;
    double outer_parallel_extent = 0, alloc_bytes = 0;
    int allocations = 0, depth = 0, max_depth = 0;

    std::optional<int64_t> eval(const Expr &e) const {
        if (!e.defined()) return std::nullopt;
        if (const IntImm *i = e.as<IntImm>()) return i->value;
        if (const Variable *v = e.as<Variable>()) {
            auto it = env.find(v->name);
            if (it == env.end()) return std::nullopt;
            return it->second;
        }
        auto bin = [&](const auto *op, auto fn) -> std::optional<int64_t> {
            auto a = eval(op->a), b = eval(op->b);
            if (!a || !b) return std::nullopt;
            return fn(*a, *b);
        };
        if (const Add *op = e.as<Add>()) return bin(op, [](int64_t a, int64_t b) { return a + b; });
        if (const Sub *op = e.as<Sub>()) return bin(op, [](int64_t a, int64_t b) { return a - b; });
        if (const Mul *op = e.as<Mul>()) return bin(op, [](int64_t a, int64_t b) { return a * b; });
        if (const Min *op = e.as<Min>())
            return bin(op, [](int64_t a, int64_t b) { return std::min(a, b); });
        if (const Max *op = e.as<Max>())
            return bin(op, [](int64_t a, int64_t b) { return std::max(a, b); });
        if (const Div *op = e.as<Div>()) {
            auto a = eval(op->a), b = eval(op->b);
            if (!a || !b || *b == 0) return std::nullopt;
            int64_t q = *a / *b;
            if ((*a % *b != 0) && ((*a < 0) != (*b < 0))) q--;
            return q;
        }
        if (const Cast *op = e.as<Cast>()) return eval(op->value);
        return std::nullopt;
    }

    void count(const Type &t, bool memory, bool store) {
        max_lanes = std::max<int>(max_lanes, t.lanes);
        Frame &f = frames.back();
        if (memory) {
            (store ? f.store_bytes : f.load_bytes) += double(t.bytes()) * t.lanes;
        } else if (t.is_float()) {
            f.flops += t.lanes;
        } else {
            f.int_ops += t.lanes;
        }
    }

protected:
    using IRVisitor::visit;

    void visit(const LetStmt *op) override {
        include(op->value);
        auto v = eval(op->value);
        if (v) env[op->name] = *v;
        include(op->body);
    }
    void visit(const Let *op) override {
        include(op->value);
        auto v = eval(op->value);
        if (v) env[op->name] = *v;
        include(op->body);
    }
    void visit(const Load *op) override {
        count(op->type, true, false);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        count(op->value.type(), true, true);
        IRVisitor::visit(op);
    }
    void visit(const Ramp *op) override {
        max_lanes = std::max(max_lanes, op->lanes);
        IRVisitor::visit(op);
    }
#define KILN_ARITH(Node)                                                                           \
    void visit(const Node *op) override {                                                          \
        count(op->type, false, false);                                                             \
        IRVisitor::visit(op);                                                                      \
    }
    KILN_ARITH(Add)
    KILN_ARITH(Sub)
    KILN_ARITH(Mul)
    KILN_ARITH(Div)
    KILN_ARITH(Min)
    KILN_ARITH(Max)
#undef KILN_ARITH
    void visit(const Call *op) override {
        if (op->name == "fma") count(op->type, false, false);
        count(op->type, false, false);
        IRVisitor::visit(op);
    }
    void visit(const Allocate *op) override {
        double n = double(op->type.bytes()) * op->type.lanes;
        for (const Expr &e : op->extents)
            n *= double(eval(e).value_or(int64_t(unknown)));
        alloc_bytes += n;
        allocations++;
        IRVisitor::visit(op);
    }
    void visit(const For *op) override {
        include(op->min);
        include(op->extent);
        double extent = double(eval(op->extent).value_or(int64_t(unknown)));
        loops++;
        if (op->for_type == ForType::Parallel) {
            parallel_loops++;
            if (outer_parallel_extent == 0) outer_parallel_extent = extent;
        }
        if (op->for_type == ForType::Unrolled) unrolled_loops++;
        if (op->for_type == ForType::Vectorized) vector_loops++;
        depth++;
        max_depth = std::max(max_depth, depth);
        frames.push_back(Frame{});
        include(op->body);
        Frame body = frames.back();
        frames.pop_back();
        depth--;
        int h = body.height + 1;
        if (h <= levels) {
            extent_at_level[h - 1] = std::max(extent_at_level[h - 1], extent);
            bytes_at_level[h - 1] =
                std::max(bytes_at_level[h - 1], (body.load_bytes + body.store_bytes) * extent);
        }
        Frame &parent = frames.back();
        parent.load_bytes += body.load_bytes * extent;
        parent.store_bytes += body.store_bytes * extent;
        parent.flops += body.flops * extent;
        parent.int_ops += body.int_ops * extent;
        parent.height = std::max(parent.height, h);
    }
};

} // namespace

const std::vector<std::string> &feature_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (int l = 0; l < levels; l++)
            n.push_back("log2_extent_level" + std::to_string(l));
        for (int l = 0; l < levels; l++)
            n.push_back("log2_bytes_level" + std::to_string(l));
        for (const char *s : {"vector_lanes", "log2_load_bytes", "log2_store_bytes", "log2_flops",
                              "log2_int_ops", "arithmetic_intensity", "loops", "max_depth",
                              "parallel_loops", "log2_parallel_extent", "unrolled_loops",
                              "vector_loops", "allocations", "log2_alloc_bytes"})
            n.push_back(s);
        return n;
    }();
    return names;
}

std::vector<float> loop_nest_features(const LoweredFunc &f, const apps::OperatorInstance &inst) {
    Analysis a;
    // Bind the shapes of the arguments: inputs from their data, the output from its extents.
    for (size_t i = 0; i < inst.inputs.size() && i < inst.input_data.size(); i++) {
        const std::string &name = inst.inputs[i].name();
        const BufferBase &b = inst.input_data[i];
        int64_t stride = 1;
        for (int d = 0; d < b.dimensions(); d++) {
            a.env[name + ".min." + std::to_string(d)] = 0;
            a.env[name + ".extent." + std::to_string(d)] = b.dim(d).extent;
            a.env[name + ".stride." + std::to_string(d)] = stride;
            stride *= b.dim(d).extent;
        }
    }
    for (const LoweredArgument &arg : f.args) {
        if (!arg.is_output) continue;
        int64_t stride = 1;
        for (size_t d = 0; d < inst.output_extents.size(); d++) {
            a.env[arg.name + ".min." + std::to_string(d)] = 0;
            a.env[arg.name + ".extent." + std::to_string(d)] = inst.output_extents[d];
            a.env[arg.name + ".stride." + std::to_string(d)] = stride;
            stride *= inst.output_extents[d];
        }
    }
    a.include(f.body);
    const Analysis::Frame &top = a.frames.front();
    double bytes = top.load_bytes + top.store_bytes;
    std::vector<float> v;
    for (int l = 0; l < levels; l++)
        v.push_back(lg(a.extent_at_level[l]));
    for (int l = 0; l < levels; l++)
        v.push_back(lg(a.bytes_at_level[l]));
    v.push_back(float(a.max_lanes));
    v.push_back(lg(top.load_bytes));
    v.push_back(lg(top.store_bytes));
    v.push_back(lg(top.flops));
    v.push_back(lg(top.int_ops));
    v.push_back(float(bytes > 0 ? top.flops / bytes : 0));
    v.push_back(float(a.loops));
    v.push_back(float(a.max_depth));
    v.push_back(float(a.parallel_loops));
    v.push_back(lg(a.outer_parallel_extent));
    v.push_back(float(a.unrolled_loops));
    v.push_back(float(a.vector_loops));
    v.push_back(float(a.allocations));
    v.push_back(lg(a.alloc_bytes));
    return v;
}

} // namespace kiln::autotune
