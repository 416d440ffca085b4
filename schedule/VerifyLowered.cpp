#include "schedule/VerifyLowered.h"

#include <map>
#include <set>
#include <string>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"

namespace kiln {

namespace {

/// Walks host code or one kernel body with the names in scope, raising on the first broken
/// promise. `where` names the body in messages ("host code" or "kernel k").
class Verifier : public IRVisitor {
public:
    Verifier(const LoweredFunc &f, std::string where, bool device)
        : f(f), where(std::move(where)), device(device) {}

    std::multiset<std::string> vars, buffers; ///< names in scope

protected:
    using IRVisitor::visit;

    template <typename... Args>
    [[noreturn]] void fail(const char *promise, const Args &...args) {
        internal_error("verify_lowered: ", promise, " in ", where, " of '", f.name, "': ", args...);
    }

    template <typename Body>
    void bound(std::multiset<std::string> &scope, const std::string &name, Body &&body) {
        auto it = scope.insert(name);
        body();
        scope.erase(it);
    }

    void visit(const Variable *op) override {
        if (!vars.count(op->name)) fail("undefined variable", "'", op->name, "'");
    }
    void visit(const Let *op) override {
        include(op->value);
        bound(vars, op->name, [&] { include(op->body); });
    }
    void visit(const LetStmt *op) override {
        include(op->value);
        bound(vars, op->name, [&] { include(op->body); });
    }
    void visit(const For *op) override {
        include(op->min);
        include(op->extent);
        if (vars.count(op->name)) fail("loop variable rebound", "loop '", op->name, "'");
        if (op->for_type == ForType::Vectorized || op->for_type == ForType::Unrolled ||
            op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread ||
            op->for_type == ForType::Tensorized) {
            fail("loop left", for_type_name(op->for_type), " loop '", op->name, "'");
        }
        bound(vars, op->name, [&] { include(op->body); });
    }
    void visit(const Load *op) override {
        if (!buffers.count(op->name)) fail("unknown buffer", "load from '", op->name, "'");
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        if (!buffers.count(op->name)) fail("unknown buffer", "store to '", op->name, "'");
        IRVisitor::visit(op);
    }
    void visit(const Allocate *op) override {
        for (const Expr &e : op->extents) {
            include(e);
            if (device && !as_const_int(e)) {
                fail("bad kernel", "allocation '", op->name, "' has extent ", e,
                     ", not a constant");
            }
        }
        if (!device && op->memory_type == MemoryType::GPUShared)
            fail("bad kernel", "GPU shared allocation '", op->name, "' outside a kernel");
        include(op->condition);
        // The host code of a GPU pipeline passes an allocation's descriptor to the device
        // intrinsics as `<name>.buffer`, which the code generator defines with the allocation.
        bound(buffers, op->name,
              [&] { bound(vars, buffer_descriptor_name(op->name), [&] { include(op->body); }); });
    }
    void visit(const Call *op) override {
        if (!device && op->call_type == Call::Intrinsic && op->name == intrinsic::gpu_launch) {
            auto k = op->args.empty() ? std::nullopt : as_const_int(op->args[0]);
            if (!k || *k < 0 || *k >= int64_t(f.kernels.size())) {
                fail("bad gpu_launch", Expr(op), " with ", f.kernels.size(), " kernels");
            }
        }
        IRVisitor::visit(op);
    }

private:
    const LoweredFunc &f;
    std::string where;
    bool device;
};

} // namespace

void verify_lowered(const LoweredFunc &f) {
    Verifier host(f, "host code", false);
    for (const LoweredArgument &a : f.args) {
        if (a.kind == LoweredArgument::Scalar) {
            host.vars.insert(a.name);
            continue;
        }
        host.buffers.insert(a.name);
        host.vars.insert(buffer_descriptor_name(a.name));
        for (int d = 0; d < a.dimensions; d++) {
            host.vars.insert(buffer_min_name(a.name, d));
            host.vars.insert(buffer_extent_name(a.name, d));
            host.vars.insert(buffer_stride_name(a.name, d));
        }
    }
    host.include(f.body);

    for (size_t i = 0; i < f.kernels.size(); i++) {
        const DeviceKernel &k = f.kernels[i];
        Verifier device(f, "kernel " + std::to_string(i) + " ('" + k.name + "')", true);
        if (k.block_dims < 1 || k.block_dims > 3 || k.thread_dims < 1 || k.thread_dims > 3) {
            internal_error("verify_lowered: bad kernel in kernel ", i, " ('", k.name, "') of '",
                           f.name, "': ", k.block_dims, " block and ", k.thread_dims,
                           " thread dimensions");
        }
        for (const DeviceArgument &a : k.args)
            (a.is_buffer ? device.buffers : device.vars).insert(a.name);
        device.include(k.body);
    }
}

} // namespace kiln
