#include "autotune/Features.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "codegen/MathCost.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "lang/Simplify.h"

namespace kiln::autotune {

namespace {

constexpr int levels = 4;        // innermost loop levels described one by one
constexpr double unknown = 16.0; // extent assumed for a loop whose extent is not a constant

float lg(double v) {
    return float(std::log2(1.0 + std::max(0.0, v)));
}

/// gpu_thread_id(0) replaced by a Variable, so that an index can be differenced along x.
class ThreadXAsVariable : public IRMutator {
public:
    explicit ThreadXAsVariable(Expr tx) : tx(std::move(tx)) {}

protected:
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        if (op->name == intrinsic::gpu_thread_id && op->args.size() == 1 &&
            is_const_zero(op->args[0]))
            return tx;
        return IRMutator::visit(op);
    }
    Expr tx;
};

/// How coalesced a kernel's global memory accesses are: each load and store of a buffer the
/// kernel does not allocate (shared and private arrays are not global memory), weighted by its
/// bytes and by how often a thread makes it, is coalesced when neighbouring threads in x touch the
/// same element (a broadcast), neighbouring elements, or neighbouring vectors. Indices are
/// expressed in gpu_thread_id(0) through the kernel's lets, and differenced along it with the
/// simplifier; an index whose step is not a constant counts as not coalesced.
class Coalescing : public IRVisitor {
public:
    explicit Coalescing(const std::map<std::string, Expr> &constants) : lets(constants) {}
    double coalesced = 0, total = 0;

protected:
    using IRVisitor::visit;
    const Expr tx = Variable::make(Int(32), "kiln.features.thread_x");
    std::map<std::string, Expr> lets; ///< constants and the kernel's let values, substituted
    std::set<std::string> local;      ///< buffers the kernel allocates
    double trips = 1;                 ///< how often a thread reaches this point

    Expr resolve(const Expr &e) {
        return simplify(substitute(lets, ThreadXAsVariable(tx).mutate(e)));
    }

    void access(const std::string &buffer, const Expr &index, const Type &t) {
        if (local.count(buffer)) return;
        Expr i = resolve(index), base = i;
        int64_t lanes = 1, step_expected = 1;
        if (const auto *r = i.as<Ramp>()) {
            base = r->base;
            lanes = r->lanes;
            std::optional<int64_t> within = as_const_int(simplify(r->stride));
            step_expected = within && *within == 1 ? lanes : -1; // whole vectors side by side
        }
        std::optional<int64_t> step =
            as_const_int(simplify(substitute({{"kiln.features.thread_x", tx + 1}}, base) - base));
        const double bytes = double(t.bytes()) * double(lanes) * trips;
        total += bytes;
        if (step && (*step == 0 || *step == step_expected || (lanes == 1 && *step == -1)))
            coalesced += bytes;
    }
    void visit(const LetStmt *op) override {
        include(op->value);
        lets[op->name] = resolve(op->value);
        include(op->body);
    }
    void visit(const Let *op) override {
        include(op->value);
        lets[op->name] = resolve(op->value);
        include(op->body);
    }
    void visit(const Allocate *op) override {
        local.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        access(op->name, op->index, op->type);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        access(op->name, op->index, op->value.type());
        IRVisitor::visit(op);
    }
    void visit(const For *op) override {
        include(op->min);
        include(op->extent);
        std::optional<int64_t> extent = as_const_int(resolve(op->extent));
        const double before = trips;
        trips *= double(extent.value_or(int64_t(unknown)));
        include(op->body);
        trips = before;
    }
};

class Analysis : public IRVisitor {
public:
    std::map<std::string, Expr> env; ///< names known to be constants, and their values

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

    /// The kernels the host code launches (LoweredFunc::kernels), and what the launches add up to.
    const std::vector<DeviceKernel> *kernels = nullptr;
    int launches = 0, max_threads = 0;
    double gpu_blocks = 0, max_shared = 0;
    double global_bytes = 0, coalesced_bytes = 0; ///< the kernels' global accesses, per run

    /// The value of e when the known constants make it one: the simplifier decides, with the IR's
    /// own (Euclidean) division.
    std::optional<int64_t> eval(const Expr &e) const {
        if (!e.defined()) return std::nullopt;
        return as_const_int(simplify(substitute(env, e)));
    }

    /// Records the value of a let when it is a constant.
    void bind(const std::string &name, const Expr &value) {
        Expr v = simplify(substitute(env, value));
        if (as_const_int(v)) env[name] = v;
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

    /// The message of the first assertion outside every loop that the known constants make
    /// false, its values filled in: the run would fail there, whatever the data.
    std::optional<std::string> failed_check;

protected:
    using IRVisitor::visit;

    void visit(const AssertStmt *op) override {
        IRVisitor::visit(op);
        if (depth > 0 || failed_check) return;
        if (!is_const_false(simplify(substitute(env, op->condition)))) return;
        // The message's printf conversions (%lld, %d, %g) take the arguments in order.
        std::string msg;
        size_t arg = 0;
        for (size_t i = 0; i < op->message.size(); i++) {
            size_t end = op->message.find_first_of("dg", i);
            if (op->message[i] != '%' || end == std::string::npos || end > i + 3) {
                msg += op->message[i];
                continue;
            }
            Expr v = arg < op->args.size() ? simplify(substitute(env, op->args[arg++])) : Expr();
            if (auto n = v.defined() ? as_const_int(v) : std::nullopt)
                msg += std::to_string(*n);
            else if (auto x = v.defined() ? as_const_float(v) : std::nullopt)
                msg += std::to_string(*x);
            else
                msg += "?";
            i = end;
        }
        failed_check = msg;
    }
    void visit(const LetStmt *op) override {
        include(op->value);
        bind(op->name, op->value);
        include(op->body);
    }
    void visit(const Let *op) override {
        include(op->value);
        bind(op->name, op->value);
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
        if (op->name == intrinsic::gpu_launch && kernels) {
            launch(op);
            return;
        }
        if (op->call_type == Call::Math && op->type.is_float()) {
            // What codegen emits for it: exp of a float32 vector is ~30 instructions, of a
            // scalar a libm call, fma two flops in one instruction.
            const double ops = op->name == "fma" ? 2.0 : math_call_operations(op->name, op->type);
            frames.back().flops += ops * op->type.lanes;
            max_lanes = std::max<int>(max_lanes, op->type.lanes);
        } else {
            count(op->type, false, false);
        }
        IRVisitor::visit(op);
    }
    /// A kernel launch: gpu_launch(kernel index, blocks x, y, z, ...). The kernel's body runs
    /// once per thread of every block, so its counts are multiplied by blocks x threads.
    void launch(const Call *op) {
        std::optional<int64_t> index = op->args.empty() ? std::nullopt : eval(op->args[0]);
        if (!index || *index < 0 || size_t(*index) >= kernels->size()) return;
        const DeviceKernel &k = (*kernels)[size_t(*index)];
        double blocks = 1;
        for (size_t d = 1; d <= 3 && d < op->args.size(); d++)
            blocks *= double(eval(op->args[d]).value_or(int64_t(unknown)));
        const int threads = k.threads[0] * k.threads[1] * k.threads[2];
        launches++;
        gpu_blocks += blocks;
        max_threads = std::max(max_threads, threads);
        max_shared = std::max(max_shared, double(k.shared_bytes));
        frames.push_back(Frame{});
        include(k.body);
        Frame body = frames.back();
        frames.pop_back();
        const double runs = blocks * threads;
        Coalescing c(env);
        c.include(k.body);
        global_bytes += c.total * runs;
        coalesced_bytes += c.coalesced * runs;
        Frame &parent = frames.back();
        parent.load_bytes += body.load_bytes * runs;
        parent.store_bytes += body.store_bytes * runs;
        parent.flops += body.flops * runs;
        parent.int_ops += body.int_ops * runs;
        parent.height = std::max(parent.height, body.height);
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
        for (const char *s : {"vector_lanes",
                              "log2_load_bytes",
                              "log2_store_bytes",
                              "log2_flops",
                              "log2_int_ops",
                              "arithmetic_intensity",
                              "loops",
                              "max_depth",
                              "parallel_loops",
                              "log2_parallel_extent",
                              "unrolled_loops",
                              "vector_loops",
                              "allocations",
                              "log2_alloc_bytes",
                              "gpu_launches",
                              "log2_gpu_blocks",
                              "gpu_threads_per_block",
                              "gpu_warps_per_block",
                              "log2_gpu_shared_bytes",
                              "gpu_occupancy",
                              "gpu_coalesced_fraction"})
            n.push_back(s);
        return n;
    }();
    return names;
}

// Changes whenever a feature's meaning changes without its name changing, so that a database's
// features of the old meaning are not mixed with new ones.
constexpr int kFeatureRevision = 2; // 2: math calls cost what codegen emits (MathCost.h)

std::string feature_version() {
    std::string text = "revision " + std::to_string(kFeatureRevision);
    for (const std::string &n : feature_names())
        text += "," + n;
    return hex_digest(text);
}

std::vector<float> loop_nest_features(const LoweredFunc &f, const apps::OperatorInstance &inst,
                                      std::optional<std::string> *failed_check) {
    Analysis a;
    // Bind the shapes of the arguments: inputs from their data, the output from its extents.
    for (size_t i = 0; i < inst.inputs.size() && i < inst.input_data.size(); i++) {
        const std::string &name = inst.inputs[i].name();
        const BufferBase &b = inst.input_data[i];
        int stride = 1;
        for (int d = 0; d < b.dimensions(); d++) {
            a.env[buffer_min_name(name, d)] = Expr(int(b.dim(d).min));
            a.env[buffer_extent_name(name, d)] = Expr(int(b.dim(d).extent));
            a.env[buffer_stride_name(name, d)] = Expr(stride);
            stride *= int(b.dim(d).extent);
        }
    }
    for (const LoweredArgument &arg : f.args) {
        if (!arg.is_output) continue;
        int stride = 1;
        for (int d = 0; d < int(inst.output_extents.size()); d++) {
            a.env[buffer_min_name(arg.name, d)] = Expr(0);
            a.env[buffer_extent_name(arg.name, d)] = Expr(int(inst.output_extents[d]));
            a.env[buffer_stride_name(arg.name, d)] = Expr(stride);
            stride *= int(inst.output_extents[d]);
        }
    }
    a.kernels = &f.kernels;
    a.include(f.body);
    if (failed_check) *failed_check = a.failed_check;
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
    // GPU kernels (zeros for a CPU pipeline). The occupancy is that of a nominal multiprocessor
    // (2048 resident threads, 32 blocks, 100 KiB of shared memory), not of a given device: a
    // ranking feature, where the share of resident threads is what matters.
    v.push_back(float(a.launches));
    v.push_back(lg(a.gpu_blocks));
    v.push_back(float(a.max_threads));
    v.push_back(float(std::ceil(a.max_threads / 32.0)));
    v.push_back(lg(a.max_shared));
    double occupancy = 0;
    if (a.max_threads > 0) {
        double per_sm = std::min(32.0, std::floor(2048.0 / a.max_threads));
        if (a.max_shared > 0) per_sm = std::min(per_sm, std::floor(102400.0 / a.max_shared));
        occupancy = std::min(1.0, per_sm * a.max_threads / 2048.0);
    }
    v.push_back(float(occupancy));
    // The share of the kernels' global memory bytes that neighbouring threads access side by side.
    v.push_back(float(a.global_bytes > 0 ? a.coalesced_bytes / a.global_bytes : 0));
    return v;
}

const FeatureCache::Entry &FeatureCache::entry(const Config &c) {
    std::string h = space.hash(c);
    auto it = cache.find(h);
    if (it != cache.end()) return it->second;
    Entry e;
    try {
        // The input shapes come from one instance made with its data; each config's algorithm is
        // made without (filling the inputs of a large shape would cost more than lowering).
        if (input_data.empty()) input_data = op.make(shape).input_data;
        apps::OperatorInstance inst = apps::make_without_data(op, shape);
        inst.input_data = input_data;
        space.apply(inst, c);
        e.features = loop_nest_features(inst.pipeline().lower(), inst, &e.failed_check);
    } catch (const std::exception &) { // a config that does not lower: no features
    }
    return cache[h] = std::move(e);
}

} // namespace kiln::autotune
