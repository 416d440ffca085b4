#include "schedule/OffloadGPULoops.h"

#include <algorithm>
#include <map>
#include <optional>
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
#include "schedule/GPURegisters.h"

namespace kiln {

namespace {

/// e with each min or max that occurs more than once replaced by a variable of its own (*defs maps
/// it to the min or max). Its occurrences are one value, which distributing + and - into the arms
/// of each would treat as unrelated: a tile's base min(...) added and then subtracted would not
/// cancel.
Expr name_repeated_min_max(const Expr &e, std::map<std::string, Expr> *defs) {
    std::map<Expr, int, ExprLess> count;
    class Count : public IRVisitor {
    public:
        explicit Count(std::map<Expr, int, ExprLess> &count) : count(count) {}
        using IRVisitor::visit;
        void visit(const Min *op) override {
            count[Expr(op)]++;
            IRVisitor::visit(op);
        }
        void visit(const Max *op) override {
            count[Expr(op)]++;
            IRVisitor::visit(op);
        }

    private:
        std::map<Expr, int, ExprLess> &count;
    } counter(count);
    counter.include(e);
    class Name : public IRMutator {
    public:
        Name(const std::map<Expr, int, ExprLess> &count, std::map<std::string, Expr> *defs)
            : count(count), defs(defs) {}
        using IRMutator::visit;
        Expr visit(const Min *op) override { return named(Expr(op), op->a, op->b, true); }
        Expr visit(const Max *op) override { return named(Expr(op), op->a, op->b, false); }

    private:
        const std::map<Expr, int, ExprLess> &count;
        std::map<std::string, Expr> *defs;
        std::map<Expr, Expr, ExprLess> names;
        Expr named(const Expr &e, const Expr &a, const Expr &b, bool is_min) {
            if (count.at(e) >= 2) {
                auto [it, added] = names.try_emplace(e);
                if (added) {
                    std::string name = "repeated." + std::to_string(names.size());
                    it->second = Variable::make(e.type(), name);
                    (*defs)[name] = e;
                }
                return it->second;
            }
            Expr na = mutate(a), nb = mutate(b);
            if (na.same_as(a) && nb.same_as(b)) return e;
            return is_min ? Min::make(na, nb) : Max::make(na, nb);
        }
    } namer(count, defs);
    return namer.mutate(e);
}

// ---- Names for messages --------------------------------------------------------------------

/// "f.s1.xi" -> Func "f", stage 1, loop "xi" (the user's names).
struct LoopName {
    std::string func, var;
    int stage = 0;
};

LoopName describe_loop(const std::string &ir_name) {
    for (size_t i = ir_name.find(".s"); i != std::string::npos; i = ir_name.find(".s", i + 1)) {
        size_t j = i + 2;
        while (j < ir_name.size() && std::isdigit(static_cast<unsigned char>(ir_name[j])))
            j++;
        if (j == i + 2 || j >= ir_name.size() || ir_name[j] != '.') continue;
        LoopName n{ir_name.substr(0, i), ir_name.substr(j + 1), std::stoi(ir_name.substr(i + 2))};
        // Splits that reuse a name get a "$n" suffix in the IR.
        n.var = n.var.substr(0, n.var.find('$'));
        return n;
    }
    return {ir_name, ir_name, 0};
}

/// "loop 'xi' of 'f'" or "loop 'xi' of 'f.update(0)'".
std::string loop_text(const std::string &ir_name) {
    LoopName n = describe_loop(ir_name);
    std::string stage = n.stage == 0 ? "" : ".update(" + std::to_string(n.stage - 1) + ")";
    return "loop '" + n.var + "' of '" + n.func + stage + "'";
}

std::string func_of_loop(const std::string &ir_name) {
    return describe_loop(ir_name).func;
}

// ---- Small queries ---------------------------------------------------------------------------

/// Which loop types and statements a statement contains.
class Contents : public IRVisitor {
public:
    bool thread_loop = false, block_loop = false, store = false, launch = false;
    std::set<std::string> loads, stores;

protected:
    using IRVisitor::visit;
    void visit(const For *op) override {
        thread_loop = thread_loop || op->for_type == ForType::GPUThread;
        block_loop = block_loop || op->for_type == ForType::GPUBlock;
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        store = true;
        stores.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        loads.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        launch = launch || (op->call_type == Call::Intrinsic && op->name == intrinsic::gpu_launch);
        IRVisitor::visit(op);
    }
};

Contents contents_of(const Stmt &s) {
    Contents c;
    c.include(s);
    return c;
}

std::vector<Stmt> flatten_block(const Stmt &s) {
    std::vector<Stmt> out;
    if (const Block *b = s.as<Block>()) {
        for (const Stmt &part : {b->first, b->rest}) {
            std::vector<Stmt> inner = flatten_block(part);
            out.insert(out.end(), inner.begin(), inner.end());
        }
    } else if (s.defined()) {
        out.push_back(s);
    }
    return out;
}

Expr gpu_id(const char *which, int dim) {
    return Call::make(Int(32), which, {Expr(dim)}, Call::Intrinsic);
}

Stmt barrier() {
    return Evaluate::make(Call::make(Int(32), intrinsic::gpu_barrier, {}, Call::Intrinsic));
}

bool is_barrier(const Stmt &s) {
    const Evaluate *e = s.as<Evaluate>();
    const Call *c = e ? e->value.as<Call>() : nullptr;
    return c && c->call_type == Call::Intrinsic && c->name == intrinsic::gpu_barrier;
}

Stmt host_intrinsic(const char *name, const std::string &buffer) {
    return Evaluate::make(Call::make(Int(32), name,
                                     {Variable::make(UInt(64), buffer_descriptor_name(buffer))},
                                     Call::Intrinsic));
}

std::string c_identifier(const std::string &s) {
    std::string out;
    for (char c : s)
        out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
    return out;
}

/// The C++ spelling of a memory type, as users write it in store_in().
const char *memory_type_spelling(MemoryType m) {
    switch (m) {
    case MemoryType::Auto:
        return "Auto";
    case MemoryType::Stack:
        return "Stack";
    case MemoryType::Heap:
        return "Heap";
    case MemoryType::Register:
        return "Register";
    case MemoryType::GPUShared:
        return "GPUShared";
    }
    return "?";
}

// ---- Host-level checks -----------------------------------------------------------------------

/// Rejects GPU loops where no kernel can start and shared memory outside kernels.
class CheckHostLoops : public IRVisitor {
protected:
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (op->for_type == ForType::GPUThread) {
            user_error("gpu_threads: ", loop_text(op->name),
                       " is not inside a gpu_blocks loop; bind an outer loop of '",
                       func_of_loop(op->name), "' with gpu_blocks (gpu_tile does both)");
        }
        if (op->for_type == ForType::GPUBlock) {
            if (!enclosing.empty()) {
                user_error("gpu_blocks: ", loop_text(op->name), " is inside the ",
                           for_type_name(enclosing.back().second), " ",
                           loop_text(enclosing.back().first),
                           "; a GPU kernel is launched from serial host code, so make that loop "
                           "serial or bind it to gpu_blocks too");
            }
            return; // the kernel's own checks follow when it is outlined
        }
        bool special = op->for_type == ForType::Parallel || op->for_type == ForType::Vectorized;
        if (special) enclosing.emplace_back(op->name, op->for_type);
        IRVisitor::visit(op);
        if (special) enclosing.pop_back();
    }
    void visit(const Allocate *op) override {
        check_memory(op->name, op->memory_type);
        IRVisitor::visit(op);
    }
    void visit(const Realize *op) override {
        check_memory(op->name, op->memory_type);
        IRVisitor::visit(op);
    }
    static void check_memory(const std::string &name, MemoryType m) {
        if (m != MemoryType::GPUShared) return;
        user_error("store_in(GPUShared): '", name,
                   "' is not computed inside a GPU kernel, so it cannot live in shared "
                   "memory; compute_at a gpu_blocks loop of its consumer, or store it in "
                   "another memory type");
    }

private:
    std::vector<std::pair<std::string, ForType>> enclosing;
};

// ---- One kernel --------------------------------------------------------------------------------

/// The dimension of each thread loop: the number of thread loops nested inside it.
class ThreadDims : public IRVisitor {
public:
    std::map<std::string, int> dims;

protected:
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (op->for_type != ForType::GPUThread) return IRVisitor::visit(op);
        int outside = depth;
        depth = 0;
        IRVisitor::visit(op);
        int inner = depth;
        if (inner >= 3) {
            user_error("gpu_threads: ", loop_text(op->name), " has ", inner,
                       " gpu_threads loops inside it; a block has at most 3 thread dimensions "
                       "(x, y, z): fuse loops or make some of them serial");
        }
        dims[op->name] = inner;
        depth = std::max(outside, inner + 1);
    }

private:
    int depth = 0;
};

class KernelBuilder {
public:
    KernelBuilder(DeviceKernel &kernel) : kernel(kernel) {}

    /// Lowers the body of the innermost block loop (with the block lets already in scope).
    Stmt lower_body(const Stmt &body) {
        ThreadDims td;
        td.include(body);
        thread_dims = td.dims;
        Stmt s = block_level(body);
        for (auto &[dim, extent] : max_extent) {
            kernel.threads[dim] = int(extent);
            kernel.thread_dims = std::max(kernel.thread_dims, dim + 1);
        }
        int64_t threads = int64_t(kernel.threads[0]) * kernel.threads[1] * kernel.threads[2];
        if (threads > gpu_max_threads_per_block) {
            user_error("gpu_threads: the kernel of '", kernel_func, "' has ", kernel.threads[0],
                       " x ", kernel.threads[1], " x ", kernel.threads[2], " = ", threads,
                       " threads per block, more than the ", gpu_max_threads_per_block,
                       " a GPU allows; use smaller thread tiles (gpu_tile factors)");
        }
        return strip_final_barrier(drop_full_guards(s));
    }

    /// A barrier at the very end of a kernel waits for nothing.
    static Stmt strip_final_barrier(const Stmt &s) {
        if (const LetStmt *l = s.as<LetStmt>()) {
            return LetStmt::make(l->name, l->value, strip_final_barrier(l->body));
        }
        std::vector<Stmt> parts = flatten_block(s);
        if (parts.size() < 2) return s;
        Stmt last = strip_final_barrier(parts.back());
        parts.pop_back();
        if (!is_barrier(last)) parts.push_back(last);
        return Block::make(parts);
    }

    /// Wraps the lowered body in the lifted shared allocations.
    Stmt add_shared(Stmt s) {
        int64_t total = 0;
        for (const auto &a : shared)
            total += a.bytes;
        if (total > gpu_max_shared_bytes) {
            std::string list;
            for (const auto &a : shared)
                list += (list.empty() ? "" : ", ") + a.name + " " + std::to_string(a.bytes);
            user_error("GPU shared memory: the kernel of '", kernel_func, "' needs ", total,
                       " bytes of shared memory per block (", list, "), more than the ",
                       gpu_max_shared_bytes,
                       " a GPU allows by default; use smaller tiles or compute_at an inner loop");
        }
        kernel.shared_bytes = total;
        for (auto it = shared.rbegin(); it != shared.rend(); ++it) {
            s = Allocate::make(it->name, it->type, MemoryType::GPUShared, {Expr(int(it->elements))},
                               Expr(), s);
        }
        return s;
    }

    /// Wraps the lowered body (its block lets included) in a private array per thread for each
    /// block-level allocation in MemoryType::Register.
    Stmt add_registers(Stmt s) {
        for (auto it = registers.rbegin(); it != registers.rend(); ++it)
            s = lift_register_array(s, it->first, it->second, kernel, kernel_func);
        return s;
    }

    std::string kernel_func;
    std::vector<std::pair<std::string, Expr>> scope; ///< lets in scope, outermost first

private:
    DeviceKernel &kernel;
    std::map<std::string, int> thread_dims;
    std::map<int, int64_t> max_extent;
    struct Shared {
        std::string name;
        Type type;
        int64_t elements, bytes;
    };
    std::vector<Shared> shared;
    std::vector<std::pair<std::string, Type>> registers; ///< block-level, in MemoryType::Register
    bool thread_zero = false; ///< in a block-level statement that thread 0 runs alone

    /// e with every let in scope substituted, simplified.
    Expr fold(const Expr &e) const {
        Expr r = e;
        for (auto it = scope.rbegin(); it != scope.rend(); ++it)
            r = substitute(it->first, it->second, r);
        return simplify(r);
    }

    /// A constant that e never exceeds (thread extents and allocation sizes of tiles clamped at
    /// the end of their loop are bounded by the full tile).
    std::optional<int64_t> constant(const Expr &e) const {
        Expr folded = fold(e);
        std::map<std::string, Expr> none, defs;
        Expr named = name_repeated_min_max(folded, &defs);
        for (const auto &[g, d] : {std::pair{folded, &none}, std::pair{named, &defs}}) {
            Expr f = distribute(g);
            if (std::optional<int64_t> c = constant_upper_bound(f)) return c;
            if (std::optional<int64_t> c = interval_upper_bound(f, *d)) return c;
        }
        return std::nullopt;
    }

    /// An upper bound by interval arithmetic: block and thread ids stay symbolic first (so the
    /// tile's base cancels), variables used once may be anything (nothing cancels them), and a
    /// named min or max (defs) lies within the bounds of its definition; then ids are >= 0
    /// (thread ids < 1024) and loop variables lie in their loops.
    std::optional<int64_t> interval_upper_bound(const Expr &e,
                                                const std::map<std::string, Expr> &defs) const {
        class Ids : public IRMutator {
        public:
            std::map<std::string, int> uses;
            using IRMutator::visit;
            Expr visit(const Call *op) override {
                bool block = op->name == intrinsic::gpu_block_id;
                if (op->call_type != Call::Intrinsic ||
                    (!block && op->name != intrinsic::gpu_thread_id))
                    return IRMutator::visit(op);
                return Variable::make(Int(32), std::string(block ? "gpu.block." : "gpu.thread.") +
                                                   std::to_string(*as_const_int(op->args[0])));
            }
            Expr visit(const Variable *op) override {
                uses[op->name]++;
                return Expr(op);
            }
        } ids;
        Expr x = ids.mutate(e);
        std::map<std::string, Expr> renamed;
        for (const auto &[name, def] : defs)
            renamed[name] = ids.mutate(def);
        kiln::Scope first;
        for (auto &[name, count] : ids.uses) {
            if (count == 1 && !loops.count(name) && !defs.count(name)) {
                first[name] = Interval::everything();
            }
        }
        for (const auto &[name, def] : renamed)
            first[name] = bounds_of_expr(def, first);
        Interval i = bounds_of_expr(x, first);
        if (!i.has_upper_bound()) return std::nullopt;
        Expr hi = simplify(i.max);
        if (std::optional<int64_t> c = as_const_int(hi)) return c;
        kiln::Scope second;
        for (int d = 0; d < 3; d++) {
            second["gpu.block." + std::to_string(d)] = Interval(Expr(0), Expr());
            second["gpu.thread." + std::to_string(d)] =
                Interval(Expr(0), Expr(int(gpu_max_threads_per_block - 1)));
        }
        for (auto &[name, range] : loops)
            second[name] = range;
        Interval j = bounds_of_expr(hi, second);
        if (!j.has_upper_bound()) return std::nullopt;
        Expr top = simplify(j.max);
        if (std::optional<int64_t> c = as_const_int(top)) return c;
        return constant_upper_bound(distribute(top));
    }

    /// Loops of the kernel body in scope, with their ranges where those are constant.
    std::map<std::string, Interval> loops;
    void enter_loop(const For *op) {
        std::optional<int64_t> mn = as_const_int(fold(op->min)),
                               ext = as_const_int(fold(op->extent));
        loops[op->name] = mn && ext ? Interval(Expr(int(*mn)), Expr(int(*mn + *ext - 1)))
                                    : Interval::everything();
    }

    Expr all_threads_zero() const {
        Expr c;
        for (int d = 0; d < 3; d++) {
            if (!dimension_used(d)) continue;
            Expr z = gpu_id(intrinsic::gpu_thread_id, d) == 0;
            c = c.defined() ? (c && z) : z;
        }
        return c.defined() ? c : gpu_id(intrinsic::gpu_thread_id, 0) == 0;
    }
    /// Whether some thread loop of the kernel runs over thread dimension d.
    bool dimension_used(int d) const {
        for (auto &[name, dim] : thread_dims) {
            if (dim == d) return true;
        }
        return false;
    }

    /// A thread loop; the outermost of a nest also keeps the threads of the dimensions the nest
    /// does not use out (thread_id == 0 there), so its stage runs once per point.
    Stmt thread_loop(const For *op, bool outermost) {
        int dim = thread_dims.at(op->name);
        std::optional<int64_t> extent = constant(op->extent);
        if (!extent) {
            user_error("gpu_threads: the extent of ", loop_text(op->name), " is ", fold(op->extent),
                       ", not a constant; the threads of a block are fixed when the kernel is "
                       "launched, so split the loop by a constant factor (gpu_tile) or bound() "
                       "the Func");
        }
        int64_t &m = max_extent[dim];
        m = std::max(m, *extent);
        Expr id = gpu_id(intrinsic::gpu_thread_id, dim);
        scope.emplace_back(op->name, op->min + id);
        Stmt body = in_thread(op->body);
        scope.pop_back();
        body = LetStmt::make(op->name, op->min + id, body);
        // The actual extent, which may vary from block to block below its constant bound.
        Stmt s = IfThenElse::make(id < op->extent, body);
        if (!outermost) return s;
        std::set<int> used = {dim};
        class Dims : public IRVisitor {
        public:
            Dims(const std::map<std::string, int> &dims, std::set<int> &used)
                : dims(dims), used(used) {}
            const std::map<std::string, int> &dims;
            std::set<int> &used;
            using IRVisitor::visit;
            void visit(const For *f) override {
                if (f->for_type == ForType::GPUThread) used.insert(dims.at(f->name));
                IRVisitor::visit(f);
            }
        } dims(thread_dims, used);
        dims.include(op->body);
        for (int d = 2; d >= 0; d--) {
            if (dimension_used(d) && !used.count(d)) {
                s = IfThenElse::make(gpu_id(intrinsic::gpu_thread_id, d) == 0, s);
            }
        }
        return s;
    }

    /// Code inside a thread loop: every thread runs its own copy.
    Stmt in_thread(const Stmt &s) {
        if (const For *op = s.as<For>()) {
            if (op->for_type == ForType::GPUThread) return thread_loop(op, false);
            check_inner_loop(op);
            enter_loop(op);
            Stmt body = in_thread(op->body);
            loops.erase(op->name);
            return For::make(op->name, op->min, op->extent, op->for_type, body);
        }
        if (const LetStmt *op = s.as<LetStmt>()) {
            scope.emplace_back(op->name, op->value);
            Stmt body = in_thread(op->body);
            scope.pop_back();
            return LetStmt::make(op->name, op->value, body);
        }
        if (const Allocate *op = s.as<Allocate>()) {
            // Block-level code that thread 0 runs alone may still keep its Funcs in shared
            // memory (nothing else touches them there).
            if (thread_zero && op->memory_type == MemoryType::GPUShared) {
                record_shared(op);
                return in_thread(op->body);
            }
            if (op->memory_type == MemoryType::GPUShared || op->memory_type == MemoryType::Heap) {
                user_error("store_in(", memory_type_spelling(op->memory_type), "): '", op->name,
                           "' is stored inside a gpu_threads loop of the kernel of '", kernel_func,
                           "', where each thread has its own copy; store it at the gpu_blocks "
                           "loop (store_at/compute_at) to share it, or use MemoryType::Register");
            }
            int64_t elements = allocation_elements(op, "thread-private");
            return Allocate::make(op->name, op->type, MemoryType::Register, {Expr(int(elements))},
                                  Expr(), in_thread(op->body));
        }
        if (const Block *op = s.as<Block>()) {
            return Block::make(in_thread(op->first), in_thread(op->rest));
        }
        if (const IfThenElse *op = s.as<IfThenElse>()) {
            Stmt e = op->else_case.defined() ? in_thread(op->else_case) : Stmt();
            return IfThenElse::make(op->condition, in_thread(op->then_case), e);
        }
        if (const ProducerConsumer *op = s.as<ProducerConsumer>()) return in_thread(op->body);
        if (const AssertStmt *op = s.as<AssertStmt>()) assert_in_kernel(op);
        return s;
    }

    void check_inner_loop(const For *op) {
        if (op->for_type == ForType::GPUBlock) {
            user_error("gpu_blocks: ", loop_text(op->name), " is inside the GPU kernel of '",
                       kernel_func,
                       "' but not directly inside its outer gpu_blocks loops; block loops must "
                       "be the outermost loops of a kernel");
        }
        if (op->for_type == ForType::Parallel) {
            user_error("parallel: ", loop_text(op->name), " is inside the GPU kernel of '",
                       kernel_func,
                       "', where CPU threads do not exist; use gpu_threads, or make it serial");
        }
    }

    [[noreturn]] void assert_in_kernel(const AssertStmt *op) {
        user_error("the GPU kernel of '", kernel_func, "' contains a run-time check (\"",
                   op->message,
                   "\"); checks run on the host: bound() the Func outside the kernel instead");
    }

    int64_t allocation_elements(const Allocate *op, const char *what) {
        int64_t elements = 1;
        for (const Expr &e : op->extents) {
            std::optional<int64_t> c = constant(e);
            if (!c) {
                user_error("GPU ", what, " memory: the size of '", op->name, "' in the kernel of '",
                           kernel_func, "' is ", fold(e),
                           " elements in one dimension, not a constant; bound() the Func or "
                           "compute it at a loop of constant extent (a constant tile)");
            }
            elements *= std::max<int64_t>(*c, 0);
        }
        return std::max<int64_t>(elements, 1);
    }

    /// Code at block level: lets, loops and ifs run in every thread; see the header.
    Stmt block_level(const Stmt &s) {
        Contents c = contents_of(s);
        if (!c.thread_loop) {
            if (const Allocate *op = s.as<Allocate>()) return shared_allocation(op);
            if (const LetStmt *op = s.as<LetStmt>(); op && c.store) {
                // Keep lets visible to every thread; only the stores are single-threaded.
                scope.emplace_back(op->name, op->value);
                Stmt body = block_level(op->body);
                scope.pop_back();
                return LetStmt::make(op->name, op->value, body);
            }
            if (const AssertStmt *op = s.as<AssertStmt>()) assert_in_kernel(op);
            if (const ProducerConsumer *op = s.as<ProducerConsumer>()) return block_level(op->body);
            if (s.as<Block>()) return block_list(s);
            if (!c.store) return s;
            check_no_parallel(s);
            thread_zero = true;
            Stmt body = in_thread(s);
            thread_zero = false;
            return IfThenElse::make(all_threads_zero(), body);
        }
        if (const For *op = s.as<For>()) {
            if (op->for_type == ForType::GPUThread) return thread_loop(op, true);
            check_inner_loop(op);
            enter_loop(op);
            Stmt body = block_level(op->body);
            loops.erase(op->name);
            // The next iteration must not overwrite what other threads still read.
            if (!ends_with_barrier(body)) body = Block::make(body, barrier());
            return For::make(op->name, op->min, op->extent, op->for_type, body);
        }
        if (const LetStmt *op = s.as<LetStmt>()) {
            scope.emplace_back(op->name, op->value);
            Stmt body = block_level(op->body);
            scope.pop_back();
            return LetStmt::make(op->name, op->value, body);
        }
        if (const Allocate *op = s.as<Allocate>()) return shared_allocation(op);
        if (s.as<Block>()) return block_list(s);
        if (const IfThenElse *op = s.as<IfThenElse>()) {
            Stmt e = op->else_case.defined() ? block_level(op->else_case) : Stmt();
            return IfThenElse::make(op->condition, block_level(op->then_case), e);
        }
        if (const ProducerConsumer *op = s.as<ProducerConsumer>()) return block_level(op->body);
        internal_error("offload: unexpected statement at block level:\n", s);
    }

    void check_no_parallel(const Stmt &s) {
        class Check : public IRVisitor {
        public:
            explicit Check(KernelBuilder &b) : b(b) {}
            KernelBuilder &b;
            using IRVisitor::visit;
            void visit(const For *op) override {
                b.check_inner_loop(op);
                IRVisitor::visit(op);
            }
        } check(*this);
        check.include(s);
    }

    Stmt block_list(const Stmt &s) {
        std::vector<Stmt> out;
        for (const Stmt &part : flatten_block(s)) {
            bool works = contents_of(part).store;
            out.push_back(block_level(part));
            if (works && !ends_with_barrier(out.back())) out.push_back(barrier());
        }
        return Block::make(out);
    }

    /// Whether every path through s ends at a barrier (so another one right after is redundant).
    static bool ends_with_barrier(const Stmt &s) {
        if (is_barrier(s)) return true;
        if (const Block *b = s.as<Block>()) return ends_with_barrier(b->rest);
        if (const LetStmt *l = s.as<LetStmt>()) return ends_with_barrier(l->body);
        // A loop that runs at least once ends with its body's barrier; one that does not run
        // stored nothing that needs another.
        if (const For *f = s.as<For>()) return ends_with_barrier(f->body);
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            return i->else_case.defined() && ends_with_barrier(i->then_case) &&
                   ends_with_barrier(i->else_case);
        }
        return false;
    }

    Stmt shared_allocation(const Allocate *op) {
        if (op->memory_type == MemoryType::Register) {
            // Lifted into a private array per thread once the block's threads are known.
            registers.emplace_back(op->name, op->type);
            return block_level(op->body);
        }
        if (op->memory_type != MemoryType::Auto && op->memory_type != MemoryType::GPUShared) {
            user_error("store_in(", memory_type_spelling(op->memory_type), "): '", op->name,
                       "' is stored at block level in the GPU kernel of '", kernel_func,
                       "', where the threads of a block share it; use MemoryType::GPUShared, "
                       "MemoryType::Register (each thread keeps its own elements), or "
                       "compute_at a gpu_threads loop for storage private to each thread");
        }
        record_shared(op);
        return block_level(op->body);
    }

    /// Adds op to the kernel's shared allocations, lifted to the top of the kernel.
    void record_shared(const Allocate *op) {
        int64_t elements = allocation_elements(op, "shared");
        int64_t bytes = elements * op->type.bytes() * op->type.lanes;
        // Copies of one allocation (loop partitioning duplicates a loop body) never live at
        // the same time: they share the largest size.
        auto same = std::find_if(shared.begin(), shared.end(),
                                 [&](const Shared &a) { return a.name == op->name; });
        if (same == shared.end()) {
            shared.push_back({op->name, op->type, elements, bytes});
        } else {
            same->elements = std::max(same->elements, elements);
            same->bytes = std::max(same->bytes, bytes);
        }
    }

    /// Removes thread guards whose extent is the whole block size.
    Stmt drop_full_guards(const Stmt &s) {
        class Drop : public IRMutator {
        public:
            explicit Drop(const DeviceKernel &k) : k(k) {}
            const DeviceKernel &k;
            using IRMutator::visit;
            Stmt visit(const IfThenElse *op) override {
                Stmt then_case = mutate(op->then_case);
                Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : Stmt();
                const LT *lt = op->condition.as<LT>();
                const Call *id = lt ? lt->a.as<Call>() : nullptr;
                if (id && id->name == intrinsic::gpu_thread_id && !else_case.defined()) {
                    std::optional<int64_t> dim = as_const_int(id->args[0]);
                    std::optional<int64_t> extent = as_const_int(lt->b);
                    if (dim && extent && *extent >= k.threads[*dim]) return then_case;
                }
                return IfThenElse::make(op->condition, then_case, else_case);
            }
        } drop(kernel);
        return drop.mutate(s);
    }
};

/// The free scalars and the buffers of a kernel body, in order of first use.
class KernelArguments : public IRVisitor {
public:
    std::vector<DeviceArgument> buffers;
    std::map<std::string, Type> scalars;

protected:
    using IRVisitor::visit;
    void visit(const Variable *op) override {
        if (!bound.count(op->name)) scalars.emplace(op->name, op->type);
    }
    void visit(const Let *op) override {
        include(op->value);
        scoped(op->name, [&] { include(op->body); });
    }
    void visit(const LetStmt *op) override {
        include(op->value);
        scoped(op->name, [&] { include(op->body); });
    }
    void visit(const For *op) override {
        include(op->min);
        include(op->extent);
        scoped(op->name, [&] { include(op->body); });
    }
    void visit(const Allocate *op) override {
        for (const Expr &e : op->extents)
            include(e);
        scoped(op->name, [&] { include(op->body); });
    }
    void visit(const Load *op) override {
        IRVisitor::visit(op);
        if (!bound.count(op->name)) buffer(op->name, op->type).read = true;
    }
    void visit(const Store *op) override {
        IRVisitor::visit(op);
        if (!bound.count(op->name)) buffer(op->name, op->value.type()).written = true;
    }

private:
    std::multiset<std::string> bound;

    template <typename F>
    void scoped(const std::string &name, F f) {
        auto it = bound.insert(name);
        f();
        bound.erase(it);
    }
    DeviceArgument &buffer(const std::string &name, Type t) {
        for (DeviceArgument &a : buffers) {
            if (a.name == name) return a;
        }
        DeviceArgument a;
        a.name = name;
        a.is_buffer = true;
        a.type = t.element_of();
        buffers.push_back(a);
        return buffers.back();
    }
};

// ---- The host side -----------------------------------------------------------------------------

class Offload : public IRMutator {
public:
    explicit Offload(std::vector<DeviceKernel> *kernels) : kernels(kernels) {}
    std::set<std::string> device_buffers;

protected:
    using IRMutator::visit;
    Stmt visit(const For *op) override {
        if (op->for_type != ForType::GPUBlock) return IRMutator::visit(op);
        return outline(op);
    }

private:
    std::vector<DeviceKernel> *kernels;

    Stmt outline(const For *outer) {
        DeviceKernel kernel;
        KernelBuilder builder(kernel);
        builder.kernel_func = func_of_loop(outer->name);

        // The nest of block loops, with the lets between them.
        std::vector<const For *> blocks;
        std::vector<std::pair<std::string, Expr>> lets; // between block loops, outermost first
        std::vector<size_t> lets_before;                // lets.size() when each block started
        Stmt body = Stmt(outer);
        while (const For *f = body.as<For>()) {
            if (f->for_type != ForType::GPUBlock) break;
            blocks.push_back(f);
            lets_before.push_back(lets.size());
            body = f->body;
            while (const LetStmt *l = body.as<LetStmt>()) {
                lets.emplace_back(l->name, l->value);
                body = l->body;
            }
        }
        if (blocks.size() > 3) {
            user_error("gpu_blocks: the kernel of '", builder.kernel_func, "' has ", blocks.size(),
                       " nested gpu_blocks loops (", loop_text(blocks[0]->name),
                       " outermost); a grid has at most 3 dimensions: fuse block loops or make "
                       "some serial");
        }
        Contents inner = contents_of(body);
        if (inner.block_loop) {
            user_error("gpu_blocks: the gpu_blocks loops of the kernel of '", builder.kernel_func,
                       "' are not directly nested (something is computed between ",
                       loop_text(blocks.back()->name),
                       " and an inner gpu_blocks loop); compute producers at the innermost "
                       "gpu_blocks loop");
        }

        // Block counts, computed on the host: they may use the lets between the block loops, but
        // not the block variables.
        std::set<std::string> block_vars;
        for (const For *f : blocks)
            block_vars.insert(f->name);
        int n = int(blocks.size());
        kernel.block_dims = n;
        std::vector<Expr> counts(3, Expr(1));
        for (int i = 0; i < n; i++) {
            Expr extent = blocks[i]->extent;
            for (size_t k = lets_before[i]; k-- > 0;)
                extent = substitute(lets[k].first, lets[k].second, extent);
            extent = simplify(extent);
            if (expr_uses_vars(extent, block_vars)) {
                user_error("gpu_blocks: the extent of ", loop_text(blocks[i]->name), " is ", extent,
                           ", which depends on an outer gpu_blocks loop; a grid must be "
                           "rectangular, so tile by constant factors");
            }
            counts[n - 1 - i] = max(extent, 0);
        }

        // The kernel body: block variables from block ids, the lets, then the lowered body.
        for (int i = 0; i < n; i++) {
            Expr id = gpu_id(intrinsic::gpu_block_id, n - 1 - i);
            builder.scope.emplace_back(blocks[i]->name, blocks[i]->min + id);
            size_t end = i + 1 < n ? lets_before[i + 1] : lets.size();
            for (size_t k = lets_before[i]; k < end; k++)
                builder.scope.push_back(lets[k]);
        }
        std::vector<std::pair<std::string, Expr>> kernel_lets = builder.scope;
        Stmt device = builder.lower_body(body);
        for (auto it = kernel_lets.rbegin(); it != kernel_lets.rend(); ++it)
            device = LetStmt::make(it->first, it->second, device);
        device = builder.add_registers(simplify(device));
        device = builder.add_shared(device);
        device = simplify(device);

        KernelArguments args;
        args.include(device);
        for (DeviceArgument &a : args.buffers) {
            kernel.args.push_back(a);
            device_buffers.insert(a.name);
        }
        std::vector<Expr> launch = {Expr(int(kernels->size())), counts[0], counts[1], counts[2]};
        for (auto &[name, type] : args.scalars) {
            DeviceArgument a;
            a.name = name;
            a.type = type;
            kernel.args.push_back(a);
            launch.push_back(Variable::make(type, name));
        }
        kernel.name =
            c_identifier(builder.kernel_func) + "_kernel" + std::to_string(kernels->size());
        kernel.body = device;

        std::vector<Stmt> host;
        for (const DeviceArgument &a : args.buffers) {
            host.push_back(host_intrinsic(a.read ? intrinsic::device_copy_to_device
                                                 : intrinsic::device_prepare_output,
                                          a.name));
        }
        host.push_back(
            Evaluate::make(Call::make(Int(32), intrinsic::gpu_launch, launch, Call::Intrinsic)));
        for (const DeviceArgument &a : args.buffers) {
            if (a.written)
                host.push_back(host_intrinsic(intrinsic::device_set_device_dirty, a.name));
        }
        kernels->push_back(std::move(kernel));
        return Block::make(host);
    }
};

/// Copies back before host code touches a buffer that kernels touch, and marks host writes.
class InjectHostCopies : public IRMutator {
public:
    explicit InjectHostCopies(const std::set<std::string> &device_buffers)
        : device_buffers(device_buffers) {}

    Stmt mutate(const Stmt &s) override {
        if (!s.defined()) return s;
        Contents c = contents_of(s);
        if (c.launch) return IRMutator::mutate(s);
        std::vector<Stmt> out;
        for (const std::string &b : touched(c))
            out.push_back(host_intrinsic(intrinsic::device_copy_to_host, b));
        if (out.empty()) return s;
        out.push_back(s);
        for (const std::string &b : c.stores) {
            if (device_buffers.count(b))
                out.push_back(host_intrinsic(intrinsic::device_set_host_dirty, b));
        }
        return Block::make(out);
    }
    using IRMutator::mutate;

protected:
    using IRMutator::visit;
    Stmt visit(const LetStmt *op) override {
        // A let whose value reads a device buffer, above code that launches kernels.
        Stmt body = mutate(op->body);
        Stmt result = LetStmt::make(op->name, op->value, body);
        Contents c;
        c.include(op->value);
        std::vector<Stmt> out;
        for (const std::string &b : touched(c))
            out.push_back(host_intrinsic(intrinsic::device_copy_to_host, b));
        out.push_back(result);
        return Block::make(out);
    }
    Stmt visit(const Evaluate *op) override { return Stmt(op); }

private:
    const std::set<std::string> &device_buffers;

    std::vector<std::string> touched(const Contents &c) const {
        std::vector<std::string> out;
        for (const std::set<std::string> *names : {&c.loads, &c.stores}) {
            for (const std::string &b : *names) {
                if (device_buffers.count(b) && std::find(out.begin(), out.end(), b) == out.end()) {
                    out.push_back(b);
                }
            }
        }
        return out;
    }
};

} // namespace

void check_gpu_loops(const Stmt &s) {
    CheckHostLoops check;
    check.include(s);
}

Stmt offload_gpu_loops(const Stmt &s, std::vector<DeviceKernel> *kernels) {
    check_gpu_loops(s);
    Offload offload(kernels);
    Stmt host = offload.mutate(s);
    if (kernels->empty()) return s;
    return InjectHostCopies(offload.device_buffers).mutate(host);
}

} // namespace kiln
