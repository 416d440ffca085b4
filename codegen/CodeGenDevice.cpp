#include "codegen/CodeGenDevice.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "codegen/CodeGenDeviceExpr.h"
#include "lang/Error.h"
#include "lang/ExprEvaluator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"

namespace kiln {

namespace {

using device::ExprPrinter;
using device::Memory;
using device::NameTable;
using device::Preamble;

// Whether an expression loads from the named memory.
class ReadsMemory : public IRVisitor {
public:
    explicit ReadsMemory(const std::string &name) : name(name) {}
    bool found = false;

protected:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        found = found || op->name == name;
        IRVisitor::visit(op);
    }

private:
    const std::string &name;
};

bool reads_memory(const Expr &e, const std::string &name) {
    ReadsMemory r(name);
    r.include(e);
    return r.found;
}

// The variables an expression uses, and whether it loads or calls anything.
class CollectVariables : public IRVisitor {
public:
    std::set<std::string> names;
    bool loads_or_calls = false;

protected:
    using IRVisitor::visit;
    void visit(const Variable *op) override { names.insert(op->name); }
    void visit(const Load *) override { loads_or_calls = true; }
    void visit(const Call *) override { loads_or_calls = true; }
};

// The integer value of e when every variable in it is a let bound to a constant.
std::optional<int64_t> constant_value(const Expr &e, const std::map<std::string, Value> &lets) {
    if (std::optional<int64_t> k = as_const_int(e)) return k;
    if (!e.type().is_scalar() || !e.type().is_int_or_uint()) return std::nullopt;
    CollectVariables vars;
    vars.include(e);
    if (vars.loads_or_calls) return std::nullopt;
    ExprEvaluator evaluator;
    for (const std::string &v : vars.names) {
        auto it = lets.find(v);
        if (it == lets.end()) return std::nullopt;
        evaluator.bind(v, it->second);
    }
    return evaluator.eval(e).as_int();
}

// The shared allocations of a kernel body (at its top, by the device IR's contract), with the
// constant lets around them.
class CollectShared : public IRVisitor {
public:
    std::vector<const Allocate *> shared;
    std::map<std::string, Value> lets;

protected:
    using IRVisitor::visit;
    void visit(const LetStmt *op) override {
        if (std::optional<int64_t> k = constant_value(op->value, lets)) {
            lets[op->name] = Value::make_int(op->value.type(), *k);
        }
        IRVisitor::visit(op);
    }
    void visit(const Allocate *op) override {
        if (op->memory_type == MemoryType::GPUShared) shared.push_back(op);
        IRVisitor::visit(op);
    }
};

/// Prints one kernel function.
class KernelPrinter {
public:
    KernelPrinter(GpuApi api, Preamble &preamble, const std::set<std::string> &globals)
        : api(api), names(globals), exprs(api, preamble, names, memory) {}

    std::string print(const DeviceKernel &k) {
        internal_assert(k.body.defined(), "device code: kernel '", k.name, "' has no body");
        std::vector<std::string> params;
        std::vector<std::string> prologue;
        for (const DeviceArgument &a : k.args)
            params.push_back(parameter(a, &prologue));
        out << signature(k, params) << " {\n";
        declare_shared(k);
        for (const std::string &s : prologue)
            line(s);
        stmt(k.body);
        settle_barrier();
        out << "}\n";
        return out.str();
    }

private:
    GpuApi api;
    NameTable names;
    std::map<std::string, std::vector<Memory>> memory;
    ExprPrinter exprs;
    std::ostringstream out;
    int indent = 1;
    std::map<std::string, Value> constant_lets;
    std::set<const Allocate *> hoisted;

    bool cuda() const { return api == GpuApi::CUDA; }

    /// A barrier is printed lazily, just before the next line: consecutive barriers print as one,
    /// and a loop that opens with its barrier takes the place of one just before it (PoCL 3.1 runs
    /// some kernels with two barriers in a row wrong; tests/pipeline/GPUScheduleFuzzTest.cpp,
    /// GPUScheduleFuzzBugs.PoCLRunsAStagedProducerInASplitReduction).
    bool barrier_pending = false;

    void line(const std::string &s) {
        settle_barrier();
        out << std::string(size_t(indent) * 4, ' ') << s << "\n";
    }
    /// Prints the pending barrier, if any, at the current indentation (before a block closes).
    void settle_barrier() {
        if (!barrier_pending) return;
        barrier_pending = false;
        line(barrier_line());
    }
    void dedent() {
        settle_barrier();
        indent--;
    }
    /// Emits the declarations of the Lets found in the expressions of the statement at hand.
    void flush() {
        for (const std::string &d : exprs.pending)
            line(d);
        exprs.pending.clear();
    }

    std::string parameter(const DeviceArgument &a, std::vector<std::string> *prologue) {
        std::string c_name = names.fresh(a.name);
        if (a.is_buffer) {
            memory[a.name].push_back({c_name, a.type.element_of()});
            std::string type = exprs.memory_type_name(a.type);
            std::string constness = a.written ? "" : "const ";
            if (cuda()) return constness + type + " *__restrict__ " + c_name;
            return "__global " + constness + type + " *restrict " + c_name;
        }
        internal_assert(a.type.is_scalar(), "device code: scalar argument '", a.name,
                        "' of vector type ", a.type);
        names.push(a.name, c_name);
        if (a.type.is_bool() && !cuda()) {
            // OpenCL kernels cannot take bool arguments.
            std::string passed = names.fresh(a.name + "_arg");
            prologue->push_back("const bool " + c_name + " = " + passed + " != 0;");
            return "const uchar " + passed;
        }
        return "const " + exprs.type_name(a.type) + " " + c_name;
    }

    std::string signature(const DeviceKernel &k, const std::vector<std::string> &params) {
        internal_assert(!NameTable::is_reserved(k.name), "device code: kernel name '", k.name,
                        "' is reserved in device code");
        for (char c : k.name) {
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_';
            internal_assert(ok && !k.name.empty(), "device code: kernel name '", k.name,
                            "' is not a C identifier");
        }
        for (int t : k.threads)
            internal_assert(t >= 1, "device code: kernel '", k.name, "' has ", t, " threads");
        std::string head;
        if (cuda()) {
            head = "extern \"C\" __global__ void __launch_bounds__(" +
                   std::to_string(k.threads[0] * k.threads[1] * k.threads[2]) + ") " + k.name;
        } else {
            head = "__kernel __attribute__((reqd_work_group_size(" + std::to_string(k.threads[0]) +
                   ", " + std::to_string(k.threads[1]) + ", " + std::to_string(k.threads[2]) +
                   "))) void " + k.name;
        }
        std::string joined;
        for (size_t i = 0; i < params.size(); i++)
            joined += (i ? ", " : "") + params[i];
        if (head.size() + joined.size() + 4 <= 100) return head + "(" + joined + ")";
        std::string s = head + "(";
        for (size_t i = 0; i < params.size(); i++)
            s += "\n    " + params[i] + (i + 1 < params.size() ? "," : ")");
        return params.empty() ? s + ")" : s;
    }

    int64_t elements(const Allocate *op, const std::map<std::string, Value> &lets) {
        int64_t n = 1;
        for (const Expr &e : op->extents) {
            std::optional<int64_t> k = constant_value(e, lets);
            internal_assert(k && *k >= 0, "device code: allocation '", op->name,
                            "' needs constant extents, got ", e);
            n *= *k;
        }
        return std::max<int64_t>(n, 1);
    }

    /// Shared memory is declared at function scope, as OpenCL requires.
    void declare_shared(const DeviceKernel &k) {
        CollectShared c;
        c.include(k.body);
        for (const Allocate *op : c.shared) {
            internal_assert(op->type.is_scalar(), "device code: allocation '", op->name,
                            "' of vector type ", op->type);
            std::string c_name = names.fresh(op->name);
            line(std::string(cuda() ? "__shared__ " : "__local ") +
                 exprs.memory_type_name(op->type) + " " + c_name + "[" +
                 std::to_string(elements(op, c.lets)) + "];");
            memory[op->name].push_back({c_name, op->type});
            hoisted.insert(op);
        }
    }

    void stmt(const Stmt &s) {
        if (!s.defined()) return;
        exprs.begin_statement();
        switch (s->node_type) {
        case IRNodeType::LetStmt:
            return let_stmt(s.as<LetStmt>());
        case IRNodeType::For:
            return for_loop(s.as<For>());
        case IRNodeType::Store:
            return store(s.as<Store>());
        case IRNodeType::Allocate:
            return allocate(s.as<Allocate>());
        case IRNodeType::Free:
            return;
        case IRNodeType::Block:
            stmt(s.as<Block>()->first);
            return stmt(s.as<Block>()->rest);
        case IRNodeType::IfThenElse:
            return if_then_else(s.as<IfThenElse>(), false);
        case IRNodeType::Evaluate:
            return evaluate(s.as<Evaluate>());
        case IRNodeType::ProducerConsumer: {
            const auto *op = s.as<ProducerConsumer>();
            line(std::string("// ") + (op->is_producer ? "produce " : "consume ") + op->name);
            return stmt(op->body);
        }
        case IRNodeType::AssertStmt:
            internal_error("device code: an assertion reached a kernel (lowering keeps them in "
                           "host code): ",
                           s.as<AssertStmt>()->message);
        default:
            internal_error("device code: ", node_type_name(s->node_type),
                           " should have been lowered before code generation");
        }
    }

    void let_stmt(const LetStmt *op) {
        std::string c_name = names.fresh(op->name);
        std::string d = exprs.declaration(c_name, op->value);
        flush();
        line(d);
        bool constant = false;
        if (std::optional<int64_t> k = constant_value(op->value, constant_lets)) {
            constant_lets[op->name] = Value::make_int(op->value.type(), *k);
            constant = true;
        }
        names.push(op->name, c_name);
        stmt(op->body);
        names.pop(op->name);
        if (constant) constant_lets.erase(op->name);
    }

    /// A loop bound as a name or constant, declared first when it is anything else.
    std::string loop_bound(const Expr &e, const std::string &name) {
        std::string text = exprs.print(e);
        if (is_const(e) || e.as<Variable>()) return text;
        std::string c_name = names.fresh(name);
        flush();
        line("const int " + c_name + " = " + text + ";");
        return c_name;
    }

    void for_loop(const For *op) {
        internal_assert(op->for_type == ForType::Serial || op->for_type == ForType::Unrolled ||
                            op->for_type == ForType::Vectorized,
                        "device code: ", for_type_name(op->for_type), " loop '", op->name,
                        "' inside a kernel");
        // OpenCL: a body that ends with a barrier opens with it instead, and one follows the loop
        // (see the header: PoCL miscompiles the first form). A barrier pending before the loop is
        // one of those two: the loop's first one when it runs, the one after it when it does not.
        Stmt body = cuda() ? Stmt() : without_final_barrier(op->body);
        bool barrier_first = body.defined();
        if (!barrier_first) body = op->body;
        if (barrier_first) barrier_pending = false;
        std::string min = loop_bound(op->min, op->name + ".min");
        std::string extent = loop_bound(op->extent, op->name + ".extent");
        flush();
        std::string v = names.fresh(op->name);
        std::optional<int64_t> kmin = as_const_int(op->min), kextent = as_const_int(op->extent);
        // min + extent does not overflow: the loop's last value fits int32 (as on the CPU).
        std::string end = kmin && kextent ? std::to_string(*kmin + *kextent)
                          : kmin == 0     ? extent
                                          : min + " + " + extent;
        line("for (int " + v + " = " + min + "; " + v + " < " + end + "; " + v + "++) {");
        names.push(op->name, v);
        indent++;
        if (barrier_first) barrier_pending = true;
        stmt(body);
        dedent();
        names.pop(op->name);
        line("}");
        if (barrier_first) barrier_pending = true;
    }

    static bool is_barrier(const Stmt &s) {
        const auto *e = s.as<Evaluate>();
        const auto *c = e ? e->value.as<Call>() : nullptr;
        return c && c->call_type == Call::Intrinsic && c->name == intrinsic::gpu_barrier;
    }

    /// s without the barrier it ends with (through lets and blocks); undefined when it ends with
    /// none.
    static Stmt without_final_barrier(const Stmt &s) {
        if (is_barrier(s)) return Evaluate::make(0);
        if (const auto *l = s.as<LetStmt>()) {
            Stmt body = without_final_barrier(l->body);
            return body.defined() ? LetStmt::make(l->name, l->value, body) : Stmt();
        }
        if (const auto *b = s.as<Block>()) {
            if (is_barrier(b->rest)) {
                // Barriers in a row: all of them go.
                Stmt first = without_final_barrier(b->first);
                return first.defined() ? first : b->first;
            }
            Stmt rest = without_final_barrier(b->rest);
            return rest.defined() ? Block::make(b->first, rest) : Stmt();
        }
        return Stmt();
    }

    std::string barrier_line() const {
        return cuda() ? "__syncthreads();" : "barrier(CLK_LOCAL_MEM_FENCE);";
    }

    void if_then_else(const IfThenElse *op, bool chained) {
        std::string condition = exprs.print(op->condition);
        if (chained && !exprs.pending.empty()) {
            // The condition needs declarations first: a nested if instead of else-if.
            line("} else {");
            indent++;
            if_then_else_body(op, condition, false);
            dedent();
            line("}");
            return;
        }
        if_then_else_body(op, condition, chained);
    }

    void if_then_else_body(const IfThenElse *op, const std::string &condition, bool chained) {
        flush();
        line((chained ? "} else if (" : "if (") + condition + ") {");
        indent++;
        stmt(op->then_case);
        dedent();
        if (const auto *next = op->else_case.as<IfThenElse>()) {
            exprs.begin_statement();
            if_then_else(next, true);
            return;
        }
        if (op->else_case.defined()) {
            line("} else {");
            indent++;
            stmt(op->else_case);
            dedent();
        }
        line("}");
    }

    void evaluate(const Evaluate *op) {
        if (const auto *c = op->value.as<Call>();
            c && c->call_type == Call::Intrinsic && c->name == intrinsic::gpu_barrier) {
            barrier_pending = true;
            return;
        }
        // Anything else is a pure expression, whose value nobody uses.
    }

    void allocate(const Allocate *op) {
        if (hoisted.count(op)) return stmt(op->body);
        internal_assert(op->type.is_scalar(), "device code: allocation '", op->name,
                        "' of vector type ", op->type);
        std::string c_name = names.fresh(op->name);
        line(exprs.memory_type_name(op->type) + " " + c_name + "[" +
             std::to_string(elements(op, constant_lets)) + "];");
        memory[op->name].push_back({c_name, op->type});
        stmt(op->body);
        memory[op->name].pop_back();
    }

    /// A new name bound to e's value, declared by a line added to *lines.
    std::string declare(const std::string &name, const Expr &e, std::vector<std::string> *lines) {
        std::string c_name = names.fresh(name);
        lines->push_back(exprs.declaration(c_name, e));
        return c_name;
    }

    /// OpenCL vectors: a dense store without predicate is vstoreN; other stores compute the
    /// value as a vector, then store lane by lane (each under its predicate lane).
    void store_vector(const Store *op, const Memory &m) {
        std::vector<std::string> lines;
        int lanes = op->value.type().lanes;
        if (!op->predicate.defined()) {
            if (std::optional<device::Code> base = exprs.dense_base(op->index)) {
                device::Code value = exprs.vexpr(op->value);
                std::string text = value.text;
                if (op->value.type().is_bool()) {
                    // Masks hold -1 for true; bool memory holds 1.
                    text = "convert_uchar" + std::to_string(lanes) + "(-" +
                           device::wrap(value, device::Unary) + ")";
                }
                flush();
                line("vstore" + std::to_string(lanes) + "(" + text + ", 0, " + m.c_name + " + " +
                     device::wrap(*base, device::Multiplicative) + ");");
                return;
            }
        }
        // The parts that read the stored memory are computed before any lane is written.
        bool reads_self = reads_memory(op->value, op->name) || reads_memory(op->index, op->name) ||
                          (op->predicate.defined() && reads_memory(op->predicate, op->name));
        std::string value = exprs.vector_variable(op->value);
        if (value.empty()) value = declare(op->name + ".value", op->value, &lines);
        std::string index, predicate;
        if (reads_self) {
            index = declare(op->name + ".index", op->index, &lines);
            if (op->predicate.defined()) {
                predicate = declare(op->name + ".predicate", op->predicate, &lines);
            }
        }
        for (int i = 0; i < lanes; i++) {
            std::string idx = reads_self ? exprs.lane_of(index, i).text : exprs.print(op->index, i);
            std::string s = m.c_name + "[" + idx + "] = " + exprs.lane_of(value, i).text + ";";
            if (op->predicate.defined()) {
                std::string p =
                    reads_self ? exprs.lane_of(predicate, i).text : exprs.print(op->predicate, i);
                s = "if (" + p + ") " + s;
            }
            lines.push_back(s);
        }
        flush();
        for (const std::string &s : lines)
            line(s);
    }

    void store(const Store *op) {
        const Memory &m = exprs.find_memory(op->name);
        int lanes = op->value.type().lanes;
        std::vector<std::string> lines;
        if (lanes == 1) {
            std::string value = exprs.print(op->value), index = exprs.print(op->index);
            std::string s = m.c_name + "[" + index + "] = " + value + ";";
            if (op->predicate.defined()) s = "if (" + exprs.print(op->predicate) + ") " + s;
            flush();
            line(s);
            return;
        }
        if (exprs.native_vector(op->value.type())) return store_vector(op, m);
        if (std::optional<std::string> s = exprs.cuda_vector_store(op, m)) {
            flush();
            line(*s);
            return;
        }
        // A vector store reads every lane before writing any: when its parts read the stored
        // memory, they are computed into arrays first.
        bool reads_self = reads_memory(op->value, op->name) || reads_memory(op->index, op->name) ||
                          (op->predicate.defined() && reads_memory(op->predicate, op->name));
        std::string value_array, index_array, predicate_array;
        if (reads_self) {
            value_array = declare(op->name + ".value", op->value, &lines);
            index_array = declare(op->name + ".index", op->index, &lines);
            if (op->predicate.defined()) {
                predicate_array = declare(op->name + ".predicate", op->predicate, &lines);
            }
        }
        for (int i = 0; i < lanes; i++) {
            auto lane = [&](const std::string &array, const Expr &e) {
                return reads_self ? exprs.lane_of(array, i).text : exprs.print(e, i);
            };
            std::string s = m.c_name + "[" + lane(index_array, op->index) +
                            "] = " + lane(value_array, op->value) + ";";
            if (op->predicate.defined()) {
                s = "if (" + lane(predicate_array, op->predicate) + ") " + s;
            }
            lines.push_back(s);
        }
        flush();
        for (const std::string &s : lines)
            line(s);
    }
};

} // namespace

std::string print_device_source(const std::vector<DeviceKernel> &kernels, GpuApi api) {
    internal_assert(api == GpuApi::CUDA || api == GpuApi::OpenCL,
                    "print_device_source: no GPU API given");
    std::set<std::string> globals;
    for (const DeviceKernel &k : kernels) {
        internal_assert(globals.insert(k.name).second, "device code: two kernels named '", k.name,
                        "'");
    }
    Preamble preamble(api);
    std::string functions;
    for (const DeviceKernel &k : kernels) {
        functions += "\n" + KernelPrinter(api, preamble, globals).print(k);
    }
    std::string header =
        std::string("// Generated by kiln: ") + std::to_string(kernels.size()) +
        (kernels.size() == 1 ? " kernel" : " kernels") +
        (api == GpuApi::CUDA ? " in CUDA C (compile with --fmad=false)" : " in OpenCL C") + ".\n";
    return header + preamble.text() + functions;
}

std::string kernel_source(const LoweredFunc &f, const Target &target) {
    if (f.kernels.empty()) return "";
    if (!target.has_gpu()) {
        const DeviceKernel &k = f.kernels[0];
        user_error("'", f.name, "' has loops bound to gpu_blocks/gpu_threads (kernel ", k.name,
                   "), but the target has no GPU API; compile for "
                   "Target::host().with_gpu(GpuApi::OpenCL) or with_gpu(GpuApi::CUDA)");
    }
    std::string source = print_device_source(f.kernels, target.gpu);
    const char *debug = std::getenv("KILN_DEBUG");
    if (debug && std::atoi(debug) >= 2) {
        std::cerr << "== " << gpu_api_name(target.gpu) << " source of " << f.name << "\n" << source;
    }
    return source;
}

} // namespace kiln
