#include "codegen/CodeGenLLVM.h"

#include <cstddef>
#include <map>
#include <optional>
#include <set>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/Arithmetic.h"
#include "codegen/InjectProfiling.h"
#include "codegen/LLVMModuleImpl.h"
#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "lang/Simplify.h"
#include "runtime/kiln_runtime.h"

namespace kiln {

namespace {

// The generated code reads kiln_buffer_t and kiln_dimension_t through LLVM struct types built in
// CodeGen's constructor; these pin the layout those types assume.
static_assert(offsetof(kiln_buffer_t, host) == 16 && offsetof(kiln_buffer_t, type) == 32 &&
                  offsetof(kiln_buffer_t, dim) == 40 && sizeof(kiln_buffer_t) == 56,
              "kiln_buffer_t layout changed: update buffer_type in CodeGenLLVM.cpp");
static_assert(sizeof(kiln_dimension_t) == 16, "kiln_dimension_t layout changed");
static_assert(int(Type::Int) == kiln_type_int && int(Type::UInt) == kiln_type_uint &&
                  int(Type::Float) == kiln_type_float && int(Type::Bool) == kiln_type_bool &&
                  int(Type::BFloat) == kiln_type_bfloat,
              "kiln::Type codes must match kiln_type_code_t");

enum BufferField { buffer_host = 2, buffer_dim = 6 };

/// Whether s holds a tile_matmul (schedule/Tensorize.h), which needs the OS's AMX grant.
bool uses_tile_matmul(const Stmt &s) {
    class Finder : public IRVisitor {
    public:
        bool found = false;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            found =
                found || (op->call_type == Call::Intrinsic && op->name == intrinsic::tile_matmul);
            IRVisitor::visit(op);
        }
    } finder;
    finder.include(s);
    return finder.found;
}

/// Auto allocations of constant size up to this many bytes live on the stack.
constexpr int64_t max_auto_stack_bytes = int64_t(16) * 1024;

/// Names bound in nested scopes; an inner binding hides an outer one until it is popped.
template <typename T>
class Scope {
public:
    void push(const std::string &name, T value) { table[name].push_back(value); }
    void pop(const std::string &name) {
        auto it = table.find(name);
        internal_assert(it != table.end(), "codegen: '", name, "' popped but not in scope");
        it->second.pop_back();
        if (it->second.empty()) table.erase(it);
    }
    const T *find(const std::string &name) const {
        auto it = table.find(name);
        return it == table.end() ? nullptr : &it->second.back();
    }

private:
    std::map<std::string, std::vector<T>> table;
};

/// The buffers whose kiln_buffer_t descriptor the host intrinsics of schedule/OffloadGPULoops.h
/// name ("<buffer>.buffer" Variables).
std::set<std::string> descriptor_names(const Stmt &s) {
    class Find : public IRVisitor {
    public:
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Variable *op) override {
            const std::string suffix = buffer_descriptor_name("");
            if (op->name.size() > suffix.size() &&
                op->name.compare(op->name.size() - suffix.size(), suffix.size(), suffix) == 0) {
                names.insert(op->name.substr(0, op->name.size() - suffix.size()));
            }
        }
    } find;
    find.include(s);
    return find.names;
}

/// What belongs to the LLVM function being generated; a parallel loop's task starts afresh.
struct FunctionState {
    llvm::Function *function = nullptr;
    Scope<llvm::Value *> symbols; ///< scalars
    Scope<llvm::Value *> buffers; ///< host pointers of buffer arguments and allocations
    /// For each let-bound vector, the scalar base when its value is a dense ramp (stride 1),
    /// else null: a load or store at such a let is then one vector access, not a gather or
    /// scatter (common-subexpression elimination puts ramps of indices into lets).
    Scope<llvm::Value *> ramp_bases;
    /// For each let-bound vector whose value is a broadcast, the scalar broadcast, else null.
    Scope<llvm::Value *> broadcast_scalars;
    /// Each let's value, and an undefined Expr for a loop's variable (it hides a let of the
    /// same name): what a transposed copy's index differences are proved constant with.
    Scope<Expr> let_values;
    /// kiln_malloc blocks live at the current point, freed on every error return.
    std::vector<llvm::Value *> heap_allocations;
    /// kiln_buffer_t descriptors of buffer arguments and of allocations that kernels use.
    Scope<llvm::Value *> descriptors;
    /// Descriptors made by kiln_device_buffer_wrap live at the current point, released on every
    /// error return.
    std::vector<llvm::Value *> device_wraps;
    /// The int64 form of int32 index values (CodeGen::wide_index), each placed just after the
    /// value it widens, so that it is available wherever that value is.
    std::map<llvm::Value *, llvm::Value *> wide;
    /// Whether the function has non-temporal stores, so it fences them before returning.
    bool nontemporal = false;
};

class CodeGen : public IRVisitor {
public:
    CodeGen(const Target &t, llvm::Module &m)
        : target(t), context(m.getContext()), module(m), builder(m.getContext()) {
        if (t.fast_math) builder.setFastMathFlags(llvm::FastMathFlags::getFast());
        i32 = builder.getInt32Ty();
        ptr = builder.getPtrTy();
        x86 = llvm::Triple(t.triple).isX86();
        buffer_type = llvm::StructType::create(
            context,
            {builder.getInt64Ty(), ptr, ptr, builder.getInt64Ty(),
             llvm::StructType::get(
                 context, {builder.getInt8Ty(), builder.getInt8Ty(), builder.getInt16Ty()}),
             i32, ptr, ptr},
            "kiln_buffer_t");
        dimension_type =
            llvm::StructType::create(context, {i32, i32, i32, i32}, "kiln_dimension_t");
        auto declare = [&](const char *name, llvm::Type *result,
                           const std::vector<llvm::Type *> &params, bool varargs = false) {
            return module.getOrInsertFunction(name,
                                              llvm::FunctionType::get(result, params, varargs));
        };
        kiln_error_fn = declare("kiln_error", i32, {i32, ptr}, true);
        kiln_malloc_fn = declare("kiln_malloc", ptr, {builder.getInt64Ty()});
        kiln_free_fn = declare("kiln_free", builder.getVoidTy(), {ptr});
        kiln_parallel_for_fn = declare("kiln_parallel_for", i32, {ptr, ptr, i32, i32, ptr});
        kiln_profiler_switch_fn = declare("kiln_profiler_switch", i32, {ptr, i32, i32});
        kiln_amx_request_fn = declare("kiln_amx_request", i32, {});
        // kiln_type_t (4 bytes) is passed by value in one integer register on x86-64 and AArch64.
        kiln_buffer_check_fn = declare("kiln_buffer_check", i32, {ptr, ptr, i32, i32});
        llvm::Type *i64 = builder.getInt64Ty(), *void_type = builder.getVoidTy();
        device_fns.launch =
            declare("kiln_device_launch", i32, {ptr, ptr, i64, ptr, ptr, ptr, i32, ptr, ptr, ptr});
        device_fns.interface = declare("kiln_device_interface", ptr, {i32});
        device_fns.copy_to_device = declare("kiln_buffer_copy_to_device", i32, {ptr, ptr});
        device_fns.malloc = declare("kiln_buffer_prepare_output", i32, {ptr, ptr});
        device_fns.copy_to_host = declare("kiln_buffer_copy_to_host", i32, {ptr});
        device_fns.set_host_dirty = declare("kiln_buffer_set_host_dirty", void_type, {ptr, i32});
        device_fns.set_device_dirty =
            declare("kiln_buffer_set_device_dirty", void_type, {ptr, i32});
        device_fns.wrap = declare("kiln_device_buffer_wrap", ptr, {ptr, i64});
        device_fns.release = declare("kiln_device_buffer_release", void_type, {ptr});
    }

    /// compile's function is profiled (codegen/InjectProfiling.h): `names` is the pipeline's
    /// name, then its Funcs by profile id, one per line, which the runtime's tables take.
    void set_profile_names(const std::string &names) {
        profile_names = builder.CreateGlobalString(names, "kiln.profile_names", 0, &module);
    }

    void compile(const LoweredFunc &f, const std::string &device_source) {
        lowered = &f;
        if (!f.kernels.empty()) {
            internal_assert(target.has_gpu(), "codegen: '", f.name,
                            "' has GPU kernels but the target has no GPU API");
            source_global =
                builder.CreateGlobalString(device_source, f.name + ".device_source", 0, &module);
            source_size = device_source.size();
            wrapped_allocations = descriptor_names(f.body);
        }
        std::vector<llvm::Type *> params;
        for (const LoweredArgument &a : f.args) {
            internal_assert(a.kind == LoweredArgument::Buffer || a.type.is_scalar(),
                            "codegen: scalar argument '", a.name, "' has vector type ", a.type);
            params.push_back(a.kind == LoweredArgument::Buffer ? ptr : llvm_type(a.type));
        }
        llvm::Function *entry = make_function(f.name, llvm::FunctionType::get(i32, params, false),
                                              llvm::Function::ExternalLinkage);
        state.function = entry;
        builder.SetInsertPoint(new_block("entry"));
        for (size_t i = 0; i < f.args.size(); i++) {
            const LoweredArgument &a = f.args[i];
            llvm::Argument *arg = entry->getArg(unsigned(i));
            arg->setName(a.name);
            if (a.kind == LoweredArgument::Buffer) {
                unpack_buffer(a, arg);
            } else {
                state.symbols.push(a.name, arg);
            }
        }
        if (uses_tile_matmul(f.body)) {
            // Before any tile instruction, in this thread: the OS must grant the tile state.
            llvm::Value *code = builder.CreateCall(kiln_amx_request_fn, {});
            return_unless(is_success(code), [&] { return code; });
        }
        codegen(f.body);
        fence_nontemporal_stores();
        builder.CreateRet(builder.getInt32(kiln_success));
        emit_argv_wrapper(f, entry);
    }

private:
    using IRVisitor::visit;

    const Target &target;
    llvm::LLVMContext &context;
    llvm::Module &module;
    llvm::IRBuilder<> builder;
    FunctionState state;
    bool x86 = false;             ///< the target is x86 (non-temporal stores and their fence)
    llvm::Value *value = nullptr; ///< the result of the last expression visited

    llvm::IntegerType *i32;
    llvm::PointerType *ptr;
    llvm::StructType *buffer_type, *dimension_type;
    llvm::FunctionCallee kiln_error_fn, kiln_malloc_fn, kiln_free_fn, kiln_parallel_for_fn,
        kiln_buffer_check_fn, kiln_profiler_switch_fn, kiln_amx_request_fn;
    llvm::Value *profile_names = nullptr; ///< set_profile_names's string
    struct {
        llvm::FunctionCallee launch, interface, copy_to_device, malloc, copy_to_host,
            set_host_dirty, set_device_dirty, wrap, release;
    } device_fns;
    const LoweredFunc *lowered = nullptr;
    llvm::Value *source_global = nullptr; ///< the kernels' source text
    size_t source_size = 0;
    std::set<std::string> wrapped_allocations; ///< allocations whose descriptor is used
    llvm::Value *percent_s = nullptr;          ///< the "%s" format passed to kiln_error

    // ---- Helpers ---------------------------------------------------------------------------

    llvm::Value *codegen(const Expr &e) {
        internal_assert(e.defined(), "codegen: undefined expression");
        value = nullptr;
        include(e);
        internal_assert(value, "codegen: no value for ", e);
        return value;
    }

    void codegen(const Stmt &s) { include(s); }

    llvm::Type *llvm_type(Type t) {
        llvm::Type *scalar;
        if (t.is_bool()) {
            scalar = builder.getInt1Ty();
        } else if (t.is_bfloat()) {
            scalar = builder.getBFloatTy();
        } else if (t.is_float()) {
            internal_assert(t.bits == 32 || t.bits == 64, "codegen: float", int(t.bits),
                            " is not supported");
            scalar = t.bits == 32 ? builder.getFloatTy() : builder.getDoubleTy();
        } else {
            scalar = builder.getIntNTy(t.bits);
        }
        return t.is_scalar() ? scalar : llvm::FixedVectorType::get(scalar, t.lanes);
    }

    /// The type of a value in memory: bool takes a byte there.
    llvm::Type *memory_type(Type t) { return llvm_type(t.is_bool() ? UInt(8, t.lanes) : t); }

    llvm::Value *to_memory(llvm::Value *v, Type t) {
        return t.is_bool() ? builder.CreateZExt(v, memory_type(t)) : v;
    }

    llvm::Value *from_memory(llvm::Value *v, Type t) {
        return t.is_bool() ? builder.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()))
                           : v;
    }

    llvm::BasicBlock *new_block(const std::string &name) {
        return llvm::BasicBlock::Create(context, name, state.function);
    }

    llvm::Function *make_function(const std::string &name, llvm::FunctionType *type,
                                  llvm::GlobalValue::LinkageTypes linkage) {
        auto *f = llvm::Function::Create(type, linkage, name, module);
        internal_assert(linkage != llvm::Function::ExternalLinkage || f->getName() == name,
                        "codegen: two functions are named '", name, "'");
        f->addFnAttr(llvm::Attribute::NoUnwind);
        f->addFnAttr("target-cpu", target.cpu);
        if (!target.features.empty()) f->addFnAttr("target-features", target.features);
        // Without these the x86 backend splits 512-bit vectors in two on CPUs it tunes for 256.
        std::string width = std::to_string(target.vector_bits);
        f->addFnAttr("prefer-vector-width", width);
        f->addFnAttr("min-legal-vector-width", width);
        return f;
    }

    /// An alloca in the entry block, so it is allocated once per call, not once per iteration.
    llvm::Value *entry_alloca(llvm::Type *type, std::optional<llvm::Align> align,
                              const std::string &name) {
        llvm::BasicBlock &entry = state.function->getEntryBlock();
        llvm::IRBuilder<> entry_builder(&entry, entry.getFirstInsertionPt());
        llvm::AllocaInst *a = entry_builder.CreateAlloca(type, nullptr, name);
        if (align) a->setAlignment(*align);
        return a;
    }

    llvm::Value *call_kiln_error(int code, const std::string &message) {
        if (!percent_s) percent_s = builder.CreateGlobalString("%s", "percent_s", 0, &module);
        llvm::Value *text = builder.CreateGlobalString(message, "message", 0, &module);
        return builder.CreateCall(kiln_error_fn, {builder.getInt32(code), percent_s, text});
    }

    /// Continues where ok is true; elsewhere frees the live heap blocks and returns the code
    /// that failure_code emits (it may record a message first).
    template <typename F>
    void return_unless(llvm::Value *ok, F &&failure_code) {
        llvm::BasicBlock *fail = new_block("error"), *pass = new_block("ok");
        builder.CreateCondBr(ok, pass, fail, llvm::MDBuilder(context).createLikelyBranchWeights());
        builder.SetInsertPoint(fail);
        llvm::Value *code = failure_code();
        for (auto it = state.device_wraps.rbegin(); it != state.device_wraps.rend(); ++it) {
            builder.CreateCall(device_fns.release, {*it});
        }
        for (auto it = state.heap_allocations.rbegin(); it != state.heap_allocations.rend(); ++it) {
            builder.CreateCall(kiln_free_fn, {*it});
        }
        builder.CreateRet(code);
        builder.SetInsertPoint(pass);
    }

    llvm::Value *is_success(llvm::Value *code) {
        return builder.CreateICmpEQ(code, builder.getInt32(kiln_success));
    }

    llvm::Value *buffer_pointer(const std::string &name) const {
        const auto *p = state.buffers.find(name);
        internal_assert(p, "codegen: buffer '", name, "' is neither an argument nor allocated");
        return *p;
    }

    /// Type-based alias information: every access to a buffer carries a TBAA tag of its own
    /// name, all siblings under one root, so LLVM knows that a store to one buffer never
    /// changes what a load from another reads (as Halide does, kiln assumes the buffers of a
    /// call do not overlap). Without it, a register tile of an output (a sum updated in place
    /// inside the reduction loop) is stored and reloaded at every step: a load from an input
    /// might read what the store wrote. The tags are uniqued by name in the context, so the
    /// closures of parallel loops share them.
    void mark_access(llvm::Value *access, const std::string &buffer) {
        auto *inst = llvm::dyn_cast<llvm::Instruction>(access);
        if (!inst) return;
        llvm::MDBuilder md(context);
        llvm::MDNode *root = md.createTBAARoot("kiln buffers");
        llvm::MDNode *type = md.createTBAAScalarTypeNode(buffer, root);
        inst->setMetadata(llvm::LLVMContext::MD_tbaa, md.createTBAAStructTagNode(type, type, 0));
    }

    /// A dense vector store with a non-temporal hint (Func::store_nontemporal) where its address
    /// is aligned to the vector (at most 64 bytes), as x86's movnt instructions require; a
    /// plain store where it is not.
    void nontemporal_store(llvm::Value *v, llvm::Value *p, Type t, const std::string &buffer) {
        uint64_t bytes = uint64_t(t.bytes()) * uint64_t(t.lanes);
        llvm::Align element(t.bytes());
        if (bytes < 16 || (bytes & (bytes - 1)) != 0) {
            mark_access(builder.CreateAlignedStore(v, p, element), buffer);
            return;
        }
        uint64_t alignment = std::min<uint64_t>(bytes, 64);
        llvm::Value *offset = builder.CreateAnd(builder.CreatePtrToInt(p, builder.getInt64Ty()),
                                                builder.getInt64(alignment - 1));
        llvm::BasicBlock *streaming = new_block(buffer + ".nontemporal");
        llvm::BasicBlock *plain = new_block(buffer + ".unaligned");
        llvm::BasicBlock *after = new_block(buffer + ".stored");
        builder.CreateCondBr(builder.CreateICmpEQ(offset, builder.getInt64(0)), streaming, plain,
                             llvm::MDBuilder(context).createLikelyBranchWeights());
        builder.SetInsertPoint(streaming);
        llvm::StoreInst *store = builder.CreateAlignedStore(v, p, llvm::Align(alignment));
        store->setMetadata(
            llvm::LLVMContext::MD_nontemporal,
            llvm::MDNode::get(context, {llvm::ConstantAsMetadata::get(builder.getInt32(1))}));
        mark_access(store, buffer);
        builder.CreateBr(after);
        builder.SetInsertPoint(plain);
        mark_access(builder.CreateAlignedStore(v, p, element), buffer);
        builder.CreateBr(after);
        builder.SetInsertPoint(after);
        state.nontemporal = true;
    }

    /// Non-temporal stores are weakly ordered: an sfence makes them visible to other threads
    /// (the caller, or the tasks of a parallel loop) before they read the data.
    void fence_nontemporal_stores() {
        if (!state.nontemporal) return;
        builder.CreateCall(
            llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::x86_sse_sfence));
    }

    /// A <1 x T> vector holding v, for masked operations on one lane.
    llvm::Value *one_lane(llvm::Value *v) {
        auto *type = llvm::FixedVectorType::get(v->getType(), 1);
        return builder.CreateInsertElement(llvm::PoisonValue::get(type), v, uint64_t(0));
    }

    /// The mask of a predicated Load or Store, or null when every lane is accessed.
    llvm::Value *predicate_mask(const Expr &predicate) {
        if (!predicate.defined() || is_const_true(predicate)) return nullptr;
        return codegen(predicate);
    }

    /// Whether two values are provably equal: the same value, or the same pure operation
    /// (arithmetic, comparison, select, min/max) on operands that are, up to a small depth.
    static bool same_value(llvm::Value *a, llvm::Value *b, int depth = 8) {
        if (a == b) return true;
        auto *x = llvm::dyn_cast<llvm::Instruction>(a), *y = llvm::dyn_cast<llvm::Instruction>(b);
        if (depth == 0 || !x || !y || !x->isSameOperationAs(y)) return false;
        if (x->mayReadOrWriteMemory() || llvm::isa<llvm::PHINode>(x)) return false;
        if (x->getNumOperands() != y->getNumOperands()) return false;
        for (unsigned i = 0; i < x->getNumOperands(); i++) {
            if (!same_value(x->getOperand(i), y->getOperand(i), depth - 1)) return false;
        }
        return true;
    }

    /// The address of element `index` of a buffer. An index `e + c` with a small constant c
    /// is addressed as (base + e) + c, so that neighbouring accesses share their address
    /// arithmetic (x86 folds c into the instruction). Indices are int32; they are widened to
    /// int64 by wide_index. Both differ from sext(e + c) only when part of the index wraps
    /// around, which an in-bounds access does only through an index expression that overflows
    /// int32 on purpose, or in a buffer of more than 2^31 - 2^16 elements.
    llvm::Value *element_pointer(llvm::Type *element, llvm::Value *base, llvm::Value *index) {
        auto *add = llvm::dyn_cast<llvm::BinaryOperator>(index);
        if (add && add->getOpcode() == llvm::Instruction::Add) {
            auto *c = llvm::dyn_cast<llvm::ConstantInt>(add->getOperand(1));
            if (c && c->getSExtValue() > -65536 && c->getSExtValue() < 65536) {
                llvm::Value *row = builder.CreateGEP(element, base, wide_index(add->getOperand(0)));
                return builder.CreateGEP(element, row, builder.getInt64(c->getSExtValue()));
            }
        }
        return builder.CreateGEP(element, base, wide_index(index));
    }

    /// An int32 index as an int64: sums, differences and products are widened operand by
    /// operand, down to loop counters, loads, divisions and the other leaves, which are
    /// sign-extended. kiln's int32 arithmetic wraps, so sext(i * stride + j) cannot be split by
    /// LLVM; split here, a loop counter's sign extension is all that is left, which LLVM
    /// removes by counting in int64 (its increment is nsw), and the address becomes a pointer
    /// bumped by a constant. The int64 operations are nsw: each is exact as long as the int32
    /// operation it stands for does not wrap, as above.
    llvm::Value *wide_index(llvm::Value *v, int depth = 8) {
        if (!v->getType()->isIntegerTy(32)) return v;
        if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(v))
            return builder.getInt64(c->getSExtValue());
        if (auto it = state.wide.find(v); it != state.wide.end()) return it->second;
        llvm::IRBuilderBase::InsertPointGuard guard(builder);
        auto *op = llvm::dyn_cast<llvm::BinaryOperator>(v);
        auto opcode = op ? op->getOpcode() : llvm::Instruction::BinaryOpsEnd;
        bool splits = opcode == llvm::Instruction::Add || opcode == llvm::Instruction::Sub ||
                      opcode == llvm::Instruction::Mul;
        llvm::Value *w;
        if (splits && depth > 0) {
            llvm::Value *a = wide_index(op->getOperand(0), depth - 1);
            llvm::Value *b = wide_index(op->getOperand(1), depth - 1);
            builder.SetInsertPoint(op->getParent(), std::next(op->getIterator()));
            w = builder.CreateBinOp(opcode, a, b, v->getName() + ".wide");
            llvm::cast<llvm::BinaryOperator>(w)->setHasNoSignedWrap(true);
        } else {
            if (auto *i = llvm::dyn_cast<llvm::Instruction>(v)) {
                llvm::BasicBlock *block = i->getParent();
                builder.SetInsertPoint(block, llvm::isa<llvm::PHINode>(i)
                                                  ? block->getFirstInsertionPt()
                                                  : std::next(i->getIterator()));
            } else {
                llvm::BasicBlock &entry = state.function->getEntryBlock();
                builder.SetInsertPoint(&entry, entry.getFirstInsertionPt());
            }
            w = builder.CreateSExt(v, builder.getInt64Ty(), v->getName() + ".wide");
        }
        state.wide[v] = w;
        return w;
    }

    static const Ramp *dense_ramp(const Expr &index) {
        const Ramp *r = index.as<Ramp>();
        return r && is_const_one(r->stride) ? r : nullptr;
    }

    // ---- Entry points ----------------------------------------------------------------------

    /// Checks a buffer argument and binds its host pointer and per-dimension symbols.
    void unpack_buffer(const LoweredArgument &a, llvm::Value *buffer) {
        Type t = a.type.element_of();
        uint32_t packed_type = uint32_t(t.code) | uint32_t(t.bits) << 8 | uint32_t(1) << 16;
        llvm::Value *name = builder.CreateGlobalString(a.name, a.name + ".name", 0, &module);
        llvm::Value *code =
            builder.CreateCall(kiln_buffer_check_fn, {buffer, name, builder.getInt32(packed_type),
                                                      builder.getInt32(a.dimensions)});
        return_unless(is_success(code), [&] { return code; });
        llvm::Value *host = builder.CreateLoad(
            ptr, builder.CreateStructGEP(buffer_type, buffer, buffer_host), a.name + ".host");
        llvm::Value *dims =
            builder.CreateLoad(ptr, builder.CreateStructGEP(buffer_type, buffer, buffer_dim));
        for (int d = 0; d < a.dimensions; d++) {
            std::string names[3] = {buffer_min_name(a.name, d), buffer_extent_name(a.name, d),
                                    buffer_stride_name(a.name, d)};
            for (unsigned field = 0; field < 3; field++) {
                llvm::Value *p =
                    builder.CreateConstInBoundsGEP2_32(dimension_type, dims, unsigned(d), field);
                state.symbols.push(names[field], builder.CreateLoad(i32, p, names[field]));
            }
        }
        state.buffers.push(a.name, host);
        state.descriptors.push(a.name, buffer);
    }

    /// `int32_t name_argv(void **args)`: loads each argument through its pointer and calls the
    /// typed entry point.
    void emit_argv_wrapper(const LoweredFunc &f, llvm::Function *entry) {
        llvm::Function *wrapper =
            make_function(f.name + "_argv", llvm::FunctionType::get(i32, {ptr}, false),
                          llvm::Function::ExternalLinkage);
        state = FunctionState{};
        state.function = wrapper;
        builder.SetInsertPoint(new_block("entry"));
        std::vector<llvm::Value *> args;
        for (size_t i = 0; i < f.args.size(); i++) {
            const LoweredArgument &a = f.args[i];
            llvm::Value *slot = builder.CreateLoad(
                ptr, builder.CreateConstInBoundsGEP1_32(ptr, wrapper->getArg(0), unsigned(i)));
            if (a.kind == LoweredArgument::Buffer) {
                args.push_back(builder.CreateLoad(ptr, slot, a.name));
            } else {
                args.push_back(from_memory(builder.CreateLoad(memory_type(a.type), slot), a.type));
            }
        }
        builder.CreateRet(builder.CreateCall(entry, args));
    }

    // ---- Expressions -----------------------------------------------------------------------

    void visit(const IntImm *op) override {
        value = llvm::ConstantInt::getSigned(llvm_type(op->type), op->value);
    }
    void visit(const UIntImm *op) override {
        value = llvm::ConstantInt::get(llvm_type(op->type), op->value);
    }
    void visit(const FloatImm *op) override {
        value = llvm::ConstantFP::get(llvm_type(op->type), op->value);
    }

    void visit(const Cast *op) override {
        llvm::Value *v = codegen(op->value);
        value = codegen_cast(builder, v, op->value.type(), op->type, llvm_type(op->type));
    }

    void visit(const Variable *op) override {
        const auto *v = state.symbols.find(op->name);
        internal_assert(v, "codegen: variable '", op->name, "' is not in scope");
        value = *v;
    }

    void visit(const Add *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFAdd(a, b) : builder.CreateAdd(a, b);
    }
    void visit(const Sub *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFSub(a, b) : builder.CreateSub(a, b);
    }
    void visit(const Mul *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFMul(a, b) : builder.CreateMul(a, b);
    }

    void visit(const Div *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = codegen_div_mod(builder, op->type, a, b, as_const_int(op->b), false);
    }
    void visit(const Mod *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = codegen_div_mod(builder, op->type, a, b, as_const_int(op->b), true);
    }

    void visit(const Min *op) override { value = min_max(op->type, op->a, op->b, true); }
    void visit(const Max *op) override { value = min_max(op->type, op->a, op->b, false); }

    llvm::Value *min_max(Type t, const Expr &ea, const Expr &eb, bool is_min) {
        llvm::Value *a = codegen(ea), *b = codegen(eb);
        if (t.is_float()) {
            // Exactly select(a < b, a, b) (or >), which the IR defines, NaN included; minnum
            // would instead drop a NaN operand.
            llvm::Value *pick_a =
                is_min ? builder.CreateFCmpOLT(a, b) : builder.CreateFCmpOGT(a, b);
            return builder.CreateSelect(pick_a, a, b);
        }
        llvm::Intrinsic::ID id = t.is_int()
                                     ? (is_min ? llvm::Intrinsic::smin : llvm::Intrinsic::smax)
                                     : (is_min ? llvm::Intrinsic::umin : llvm::Intrinsic::umax);
        return builder.CreateBinaryIntrinsic(id, a, b);
    }

    /// Floats compare ordered (false on NaN) except !=, which is true on NaN as in IEEE and C.
    llvm::Value *compare(const Expr &ea, const Expr &eb, llvm::CmpInst::Predicate float_predicate,
                         llvm::CmpInst::Predicate signed_predicate,
                         llvm::CmpInst::Predicate unsigned_predicate) {
        Type t = ea.type();
        llvm::Value *a = codegen(ea), *b = codegen(eb);
        auto p = t.is_float() ? float_predicate
                 : t.is_int() ? signed_predicate
                              : unsigned_predicate;
        return builder.CreateCmp(p, a, b);
    }

    void visit(const EQ *op) override {
        value = compare(op->a, op->b, llvm::CmpInst::FCMP_OEQ, llvm::CmpInst::ICMP_EQ,
                        llvm::CmpInst::ICMP_EQ);
    }
    void visit(const NE *op) override {
        value = compare(op->a, op->b, llvm::CmpInst::FCMP_UNE, llvm::CmpInst::ICMP_NE,
                        llvm::CmpInst::ICMP_NE);
    }
    void visit(const LT *op) override {
        value = compare(op->a, op->b, llvm::CmpInst::FCMP_OLT, llvm::CmpInst::ICMP_SLT,
                        llvm::CmpInst::ICMP_ULT);
    }
    void visit(const LE *op) override {
        value = compare(op->a, op->b, llvm::CmpInst::FCMP_OLE, llvm::CmpInst::ICMP_SLE,
                        llvm::CmpInst::ICMP_ULE);
    }
    void visit(const GT *op) override {
        value = compare(op->a, op->b, llvm::CmpInst::FCMP_OGT, llvm::CmpInst::ICMP_SGT,
                        llvm::CmpInst::ICMP_UGT);
    }
    void visit(const GE *op) override {
        value = compare(op->a, op->b, llvm::CmpInst::FCMP_OGE, llvm::CmpInst::ICMP_SGE,
                        llvm::CmpInst::ICMP_UGE);
    }

    void visit(const And *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateAnd(a, b);
    }
    void visit(const Or *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateOr(a, b);
    }
    void visit(const Not *op) override { value = builder.CreateNot(codegen(op->a)); }

    void visit(const Select *op) override {
        llvm::Value *c = codegen(op->condition);
        llvm::Value *t = codegen(op->true_value), *f = codegen(op->false_value);
        value = builder.CreateSelect(c, t, f);
    }

    void visit(const Load *op) override {
        Type t = op->type;
        llvm::Value *base = buffer_pointer(op->name);
        llvm::Type *element = memory_type(t.element_of());
        llvm::Type *type = memory_type(t);
        llvm::Align align(t.bytes());
        llvm::Value *mask = predicate_mask(op->predicate);
        llvm::Value *zero = llvm::Constant::getNullValue(type);
        llvm::Value *loaded;
        if (t.is_scalar()) {
            llvm::Value *p = element_pointer(element, base, codegen(op->index));
            if (mask) {
                auto *one = llvm::FixedVectorType::get(element, 1);
                loaded = builder.CreateMaskedLoad(one, p, align, one_lane(mask),
                                                  llvm::Constant::getNullValue(one));
                mark_access(loaded, op->name);
                loaded = builder.CreateExtractElement(loaded, uint64_t(0));
            } else {
                loaded = builder.CreateAlignedLoad(element, p, align);
                mark_access(loaded, op->name);
            }
        } else if (const Broadcast *b = op->index.as<Broadcast>(); b && !mask) {
            llvm::Value *p = element_pointer(element, base, codegen(b->value));
            llvm::Value *one = builder.CreateAlignedLoad(element, p, align);
            mark_access(one, op->name);
            loaded = builder.CreateVectorSplat(t.lanes, one);
        } else if (std::optional<ClampedRamp> r = clamped_ramp(op->index); r && !r->ok) {
            // A dense ramp, possibly through lets and plus broadcast offsets.
            llvm::Value *p = element_pointer(element, base, r->base);
            if (mask) {
                loaded = builder.CreateMaskedLoad(type, p, align, mask, zero);
            } else {
                loaded = builder.CreateAlignedLoad(type, p, align);
            }
            mark_access(loaded, op->name);
        } else if (r && !mask) {
            // Clamped coordinates (boundary conditions): one vector load where no lane is
            // clamped, which is everywhere but near the edges; a gather there.
            llvm::BasicBlock *dense = new_block("dense_load"), *gather = new_block("gather");
            llvm::BasicBlock *after = new_block("after_load");
            builder.CreateCondBr(r->ok, dense, gather,
                                 llvm::MDBuilder(context).createLikelyBranchWeights());
            builder.SetInsertPoint(dense);
            llvm::Value *dense_value =
                builder.CreateAlignedLoad(type, element_pointer(element, base, r->base), align);
            mark_access(dense_value, op->name);
            builder.CreateBr(after);
            builder.SetInsertPoint(gather);
            llvm::Value *pointers = builder.CreateGEP(element, base, codegen(op->index));
            llvm::Value *gathered = builder.CreateMaskedGather(type, pointers, align, mask, zero);
            mark_access(gathered, op->name);
            llvm::BasicBlock *gather_end = builder.GetInsertBlock();
            builder.CreateBr(after);
            builder.SetInsertPoint(after);
            llvm::PHINode *phi = builder.CreatePHI(type, 2);
            phi->addIncoming(dense_value, dense);
            phi->addIncoming(gathered, gather_end);
            loaded = phi;
        } else {
            llvm::Value *pointers = builder.CreateGEP(element, base, codegen(op->index));
            loaded = builder.CreateMaskedGather(type, pointers, align, mask, zero);
            mark_access(loaded, op->name);
        }
        value = from_memory(loaded, t);
    }

    void visit(const Ramp *op) override {
        llvm::Value *base = codegen(op->base), *stride = codegen(op->stride);
        Type t = op->base.type();
        std::vector<llvm::Constant *> lanes;
        for (int i = 0; i < op->lanes; i++) {
            lanes.push_back(t.is_float() ? llvm::ConstantFP::get(llvm_type(t), double(i))
                                         : llvm::ConstantInt::get(llvm_type(t), uint64_t(i)));
        }
        llvm::Value *iota = llvm::ConstantVector::get(lanes);
        llvm::Value *b = builder.CreateVectorSplat(op->lanes, base);
        llvm::Value *s = builder.CreateVectorSplat(op->lanes, stride);
        value = t.is_float() ? builder.CreateFAdd(b, builder.CreateFMul(s, iota))
                             : builder.CreateAdd(b, builder.CreateMul(s, iota));
    }

    void visit(const Broadcast *op) override {
        value = builder.CreateVectorSplat(op->lanes, codegen(op->value));
    }

    void visit(const Let *op) override {
        llvm::Value *v = codegen(op->value);
        if (!llvm::isa<llvm::Constant>(v) && !v->hasName()) v->setName(op->name);
        push_let(op->name, op->value, v);
        llvm::Value *body = codegen(op->body);
        pop_let(op->name);
        value = body;
    }

    void push_let(const std::string &name, const Expr &e, llvm::Value *v) {
        state.symbols.push(name, v);
        state.let_values.push(name, e);
        llvm::Value *base = nullptr, *scalar = nullptr;
        if (e.type().is_vector()) {
            base = dense_base(e);
            scalar = broadcast_scalar(e);
        }
        state.ramp_bases.push(name, base);
        state.broadcast_scalars.push(name, scalar);
    }

    void pop_let(const std::string &name) {
        state.symbols.pop(name);
        state.let_values.pop(name);
        state.ramp_bases.pop(name);
        state.broadcast_scalars.pop(name);
    }

    /// The scalar of a vector that is a broadcast (directly or through a let), or null.
    llvm::Value *broadcast_scalar(const Expr &e) {
        if (const Broadcast *b = e.as<Broadcast>()) return codegen(b->value);
        if (const Variable *v = e.as<Variable>()) {
            if (llvm::Value *const *s = state.broadcast_scalars.find(v->name)) return *s;
        }
        return nullptr;
    }

    /// A vector index that is a dense ramp whenever a condition holds: a ramp of stride 1 plus
    /// or minus broadcasts, clamped by min and max against broadcasts, as boundary conditions
    /// (repeat_edge) write it. `ok` (null when always) says that no clamp changes any lane, so
    /// the index is then base, base + 1, ... The comparisons are made in 64 bits, so that
    /// the int32 lanes' wrap-around cannot fake them.
    struct ClampedRamp {
        llvm::Value *base = nullptr, *ok = nullptr;
    };
    std::optional<ClampedRamp> clamped_ramp(const Expr &e) {
        if (e.type().element_of() != Int(32)) return std::nullopt;
        if (llvm::Value *b = dense_base(e)) return ClampedRamp{b, nullptr};
        auto both = [&](llvm::Value *a, llvm::Value *b) { return a ? builder.CreateAnd(a, b) : b; };
        auto wide = [&](llvm::Value *v) { return builder.CreateSExt(v, builder.getInt64Ty()); };
        auto scalar_side =
            [&](const Expr &a, const Expr &b,
                bool commutes) -> std::optional<std::pair<ClampedRamp, llvm::Value *>> {
            if (llvm::Value *s = broadcast_scalar(b)) {
                if (auto r = clamped_ramp(a)) return std::make_pair(*r, s);
            }
            if (commutes) {
                if (llvm::Value *s = broadcast_scalar(a)) {
                    if (auto r = clamped_ramp(b)) return std::make_pair(*r, s);
                }
            }
            return std::nullopt;
        };
        int lanes = e.type().lanes;
        if (const Add *op = e.as<Add>()) {
            if (auto p = scalar_side(op->a, op->b, true)) {
                return ClampedRamp{builder.CreateAdd(p->first.base, p->second), p->first.ok};
            }
        } else if (const Sub *op = e.as<Sub>()) {
            if (auto p = scalar_side(op->a, op->b, false)) {
                return ClampedRamp{builder.CreateSub(p->first.base, p->second), p->first.ok};
            }
        } else if (const Max *op = e.as<Max>()) {
            if (auto p = scalar_side(op->a, op->b, true)) {
                llvm::Value *ok = builder.CreateICmpSGE(wide(p->first.base), wide(p->second));
                return ClampedRamp{p->first.base, both(p->first.ok, ok)};
            }
        } else if (const Min *op = e.as<Min>()) {
            if (auto p = scalar_side(op->a, op->b, true)) {
                llvm::Value *last =
                    builder.CreateAdd(wide(p->first.base), builder.getInt64(lanes - 1));
                llvm::Value *ok = builder.CreateICmpSLE(last, wide(p->second));
                return ClampedRamp{p->first.base, both(p->first.ok, ok)};
            }
        }
        return std::nullopt;
    }

    /// The first index of a vector index that is a dense ramp (directly or through a let), or
    /// null.
    llvm::Value *dense_base(const Expr &index) {
        if (const Ramp *r = dense_ramp(index)) return codegen(r->base);
        if (const Variable *v = index.as<Variable>()) {
            if (llvm::Value *const *b = state.ramp_bases.find(v->name)) return *b;
        }
        return nullptr;
    }

    void visit(const Call *op) override {
        internal_assert(op->call_type == Call::Math || op->call_type == Call::Intrinsic,
                        "codegen: call to ", op->name, " should have been lowered to a Load");
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::likely) {
            internal_assert(op->args.size() == 1, "codegen: likely takes one argument");
            value = codegen(op->args[0]);
            return;
        }
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::prefetch) {
            value = prefetch(op);
            return;
        }
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::tile_matmul) {
            value = tile_matmul(op);
            return;
        }
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::profiler_switch) {
            internal_assert(profile_names && op->args.size() == 2,
                            "codegen: profiler_switch outside a profiled pipeline");
            value = builder.CreateCall(kiln_profiler_switch_fn,
                                       {profile_names, codegen(op->args[0]), codegen(op->args[1])});
            return;
        }
        if (op->call_type == Call::Intrinsic && codegen_device_intrinsic(op)) return;
        internal_assert(op->call_type == Call::Math || op->name == intrinsic::abs ||
                            op->name == intrinsic::fma,
                        "codegen: unknown intrinsic '", op->name, "'");
        internal_assert(!op->args.empty(), "codegen: ", op->name, " without arguments");
        std::vector<llvm::Value *> args;
        for (const Expr &a : op->args) {
            args.push_back(codegen(a));
        }
        value = codegen_math_call(builder, op->name, op->type, op->args[0].type(), args);
    }

    // prefetch(element) (schedule/InjectPrefetch.h): the element's address, never loaded, as a
    // read prefetch into every cache level (locality 3, data cache).
    llvm::Value *prefetch(const Call *op) {
        const Load *load = op->args.size() == 1 ? op->args[0].as<Load>() : nullptr;
        internal_assert(load && load->type.is_scalar() && !load->predicate.defined(),
                        "codegen: prefetch takes one scalar, unpredicated element");
        llvm::Value *p = element_pointer(memory_type(load->type), buffer_pointer(load->name),
                                         codegen(load->index));
        llvm::Function *fn =
            llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::prefetch, {p->getType()});
        llvm::CallInst *call = builder.CreateCall(
            fn, {p, builder.getInt32(0), builder.getInt32(3), builder.getInt32(1)});
        // A prefetch changes no value in memory. Declared as reading its argument, it may alias
        // every buffer, which would keep LLVM from promoting memory to registers across a loop
        // holding one (a register tile's sums); what it touches is the caches only.
        call->setOnlyAccessesInaccessibleMemory();
        return builder.getInt32(0);
    }

    /// The Load naming a tile_matmul operand's buffer and first element.
    static const Load *tile_load_of(const Expr &e) {
        const Load *l = e.as<Load>();
        internal_assert(l && l->type.is_scalar() && !l->predicate.defined(),
                        "codegen: tile_matmul takes its tiles as unpredicated Loads, got ", e);
        return l;
    }

    // tile_matmul (schedule/Tensorize.h) on Intel AMX. C's block (up to 32 x 32 int32 or float32,
    // from int8 or bfloat16 inputs: tdpb*d or tdpbf16ps) is up to
    // 2 x 2 tiles of 16 x 16: each is loaded once, then a loop over the k steps, 16 at a time (64
    // bytes of k), loads one tile of A per row of tiles and one of B per column of tiles and
    // multiplies each pair into its C tile (8 tile registers: 4 sums, 2 A, 2 B; each A and B
    // tile serves two multiplies), the sums carried in x86_amx phis so they stay in tile
    // registers for the whole reduction, and each C tile is stored once. Fewer than 16 k steps
    // take narrower tiles (Tensorize leaves a remainder after whole tiles to loops: a tile
    // register keeps one shape per function). LLVM's AMX passes write the tile configuration
    // (ldtilecfg).
    llvm::Value *tile_matmul(const Call *op) {
        internal_assert(op->args.size() == 11, "codegen: tile_matmul takes 11 arguments");
        const Load *c = tile_load_of(op->args[0]), *a = tile_load_of(op->args[2]),
                   *b = tile_load_of(op->args[4]);
        bool bf16 = a->type.is_bfloat();
        const char *unit = Target::matrix_unit_feature(a->type);
        if (!target.has_matrix_unit(a->type)) {
            user_error("tensorize: the target (cpu '", target.cpu, "') has no AMX (amx-tile, ",
                       unit,
                       "); compile for a CPU that has it "
                       "(the host on a Xeon of the Sapphire Rapids generation or later, or a "
                       "named CPU such as \"sapphirerapids\"), or remove tensorize");
        }
        auto tile_pointer = [&](const Load *l) {
            return element_pointer(memory_type(l->type), buffer_pointer(l->name),
                                   codegen(l->index));
        };
        auto constant = [&](const Expr &e) {
            std::optional<int64_t> v = as_const_int(e);
            internal_assert(v, "codegen: tile_matmul shape ", e, " is not a constant");
            return int(*v);
        };
        llvm::Type *i64 = builder.getInt64Ty(), *i8 = builder.getInt8Ty();
        auto byte_stride = [&](const Expr &e, int bytes) {
            return builder.CreateMul(builder.CreateSExt(codegen(e), i64), builder.getInt64(bytes));
        };
        int rows = constant(op->args[6]), cols = constant(op->args[7]), k4 = constant(op->args[8]);
        llvm::Value *pc = tile_pointer(c), *pa = tile_pointer(a), *pb = tile_pointer(b);
        // a's and b's strides are in elements of 1 (int8) or 2 (bfloat16) bytes; a k step is 4
        // bytes of k either way.
        int in_bytes = a->type.bytes();
        llvm::Value *sc = byte_stride(op->args[1], 4), *sa = byte_stride(op->args[3], in_bytes),
                    *sb = byte_stride(op->args[5], in_bytes);
        // Where b's second tile of columns starts, in bytes (b_column_tile_stride).
        llvm::Value *b_tile = byte_stride(op->args[10], in_bytes);
        auto i16 = [&](int v) { return builder.getInt16(uint16_t(v)); };
        auto at = [&](llvm::Value *base, llvm::Value *bytes) {
            return builder.CreateGEP(i8, base, bytes);
        };
        auto load = [&](int r, int colsb, llvm::Value *p, llvm::Value *stride) {
            return builder.CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64_internal, {},
                                           {i16(r), i16(colsb), p, stride});
        };
        bool a_signed = a->type.is_int(), b_signed = b->type.is_int();
        llvm::Intrinsic::ID dot = bf16       ? llvm::Intrinsic::x86_tdpbf16ps_internal
                                  : a_signed ? (b_signed ? llvm::Intrinsic::x86_tdpbssd_internal
                                                         : llvm::Intrinsic::x86_tdpbsud_internal)
                                             : (b_signed ? llvm::Intrinsic::x86_tdpbusd_internal
                                                         : llvm::Intrinsic::x86_tdpbuud_internal);
        constexpr int tile_rows = 16, tile_int32s = 16, k4_per_tile = 16; // 64 bytes a row
        // The row tiles (first row, rows) and column tiles (first column, columns).
        std::vector<std::pair<int, int>> row_tiles, col_tiles;
        for (int r = 0; r < rows; r += tile_rows)
            row_tiles.emplace_back(r, std::min(tile_rows, rows - r));
        for (int j = 0; j < cols; j += tile_int32s)
            col_tiles.emplace_back(j, std::min(tile_int32s, cols - j));
        std::vector<llvm::Value *> sums, c_at;
        for (auto [r, nr] : row_tiles) {
            for (auto [j, nj] : col_tiles) {
                c_at.push_back(at(pc, builder.CreateAdd(builder.CreateMul(sc, builder.getInt64(r)),
                                                        builder.getInt64(int64_t(j) * 4))));
            }
        }
        // The sums start at c's values, or at zero (tilezero) where the tile is c's first visit
        // (the Func's zero initial value folded into the update); where that is known only at
        // run time, both ways and x86_amx phis after them.
        auto start_sums = [&](bool zero) {
            std::vector<llvm::Value *> start;
            size_t n = 0;
            for (auto [r, nr] : row_tiles) {
                for (auto [j, nj] : col_tiles) {
                    start.push_back(
                        zero ? builder.CreateIntrinsic(llvm::Intrinsic::x86_tilezero_internal, {},
                                                       {i16(nr), i16(4 * nj)})
                             : load(nr, 4 * nj, c_at[n], sc));
                    n++;
                }
            }
            return start;
        };
        const Expr &zero_first = op->args[9];
        if (is_const_false(zero_first) || is_const_true(zero_first)) {
            sums = start_sums(is_const_true(zero_first));
        } else {
            llvm::BasicBlock *zero_block = new_block("tile_matmul.zero");
            llvm::BasicBlock *load_block = new_block("tile_matmul.load");
            llvm::BasicBlock *start = new_block("tile_matmul.start");
            builder.CreateCondBr(codegen(zero_first), zero_block, load_block);
            builder.SetInsertPoint(zero_block);
            std::vector<llvm::Value *> zeros = start_sums(true);
            builder.CreateBr(start);
            builder.SetInsertPoint(load_block);
            std::vector<llvm::Value *> loaded = start_sums(false);
            builder.CreateBr(start);
            builder.SetInsertPoint(start);
            for (size_t n = 0; n < zeros.size(); n++) {
                llvm::PHINode *phi = builder.CreatePHI(llvm::Type::getX86_AMXTy(context), 2);
                phi->addIncoming(zeros[n], zero_block);
                phi->addIncoming(loaded[n], load_block);
                sums.push_back(phi);
            }
        }
        // One k step group: A's and B's tiles at byte offsets a_k (into A's rows) and b_k (into
        // B's k4 rows), `k4s` steps of k4 deep.
        auto multiply_all = [&](std::vector<llvm::Value *> acc, llvm::Value *a_k, llvm::Value *b_k,
                                int k4s) {
            std::vector<llvm::Value *> ta, tb;
            for (auto [r, nr] : row_tiles)
                ta.push_back(
                    load(nr, 4 * k4s,
                         at(pa, builder.CreateAdd(a_k, builder.CreateMul(sa, builder.getInt64(r)))),
                         sa));
            for (auto [j, nj] : col_tiles)
                tb.push_back(
                    load(k4s, 4 * nj, at(pb, j == 0 ? b_k : builder.CreateAdd(b_k, b_tile)), sb));
            size_t n = 0;
            for (size_t t = 0; t < row_tiles.size(); t++) {
                for (size_t u = 0; u < col_tiles.size(); u++, n++) {
                    acc[n] = builder.CreateIntrinsic(dot, {},
                                                     {i16(row_tiles[t].second),
                                                      i16(4 * col_tiles[u].second), i16(4 * k4s),
                                                      acc[n], ta[t], tb[u]});
                }
            }
            return acc;
        };
        int steps = k4 / k4_per_tile, rest = k4 % k4_per_tile;
        llvm::Value *b_step = builder.CreateMul(sb, builder.getInt64(k4_per_tile));
        if (steps > 0) {
            llvm::BasicBlock *preheader = builder.GetInsertBlock();
            llvm::BasicBlock *loop = new_block("tile_matmul.loop");
            llvm::BasicBlock *after = new_block("tile_matmul.after");
            builder.CreateBr(loop);
            builder.SetInsertPoint(loop);
            llvm::PHINode *s = builder.CreatePHI(i64, 2, "tile_matmul.step");
            s->addIncoming(builder.getInt64(0), preheader);
            std::vector<llvm::PHINode *> phis;
            std::vector<llvm::Value *> carried;
            for (llvm::Value *v : sums) {
                phis.push_back(builder.CreatePHI(llvm::Type::getX86_AMXTy(context), 2));
                phis.back()->addIncoming(v, preheader);
                carried.push_back(phis.back());
            }
            std::vector<llvm::Value *> next = multiply_all(
                carried, builder.CreateMul(s, builder.getInt64(uint64_t(4) * k4_per_tile)),
                builder.CreateMul(s, b_step), k4_per_tile);
            llvm::Value *s1 = builder.CreateAdd(s, builder.getInt64(1));
            s->addIncoming(s1, loop);
            for (size_t n = 0; n < phis.size(); n++)
                phis[n]->addIncoming(next[n], loop);
            builder.CreateCondBr(builder.CreateICmpSLT(s1, builder.getInt64(steps)), loop, after);
            builder.SetInsertPoint(after);
            sums = next;
        }
        if (rest > 0) {
            sums = multiply_all(sums, builder.getInt64(int64_t(steps) * 4 * k4_per_tile),
                                builder.CreateMul(b_step, builder.getInt64(steps)), rest);
        }
        size_t n = 0;
        for (auto [r, nr] : row_tiles) {
            for (auto [j, nj] : col_tiles) {
                builder.CreateIntrinsic(llvm::Intrinsic::x86_tilestored64_internal, {},
                                        {i16(nr), i16(4 * nj), c_at[n], sc, sums[n]});
                n++;
            }
        }
        return builder.getInt32(0);
    }

    // ---- Host side of GPU kernels (schedule/OffloadGPULoops.h) --------------------------------

    llvm::Value *descriptor_of(const Expr &e) {
        const Variable *v = e.as<Variable>();
        internal_assert(v, "codegen: a device intrinsic takes a buffer descriptor, got ", e);
        std::string name = v->name.substr(0, v->name.size() - buffer_descriptor_name("").size());
        const auto *d = state.descriptors.find(name);
        internal_assert(d, "codegen: no descriptor for buffer '", name, "'");
        return *d;
    }

    /// The runtime's interface for the target's GPU API; returns kiln_error_no_device (with the
    /// runtime's message) where there is none.
    llvm::Value *device_interface() {
        llvm::Value *iface =
            builder.CreateCall(device_fns.interface, {builder.getInt32(int(target.gpu))});
        return_unless(builder.CreateIsNotNull(iface),
                      [&] { return builder.getInt32(kiln_error_no_device); });
        return iface;
    }

    /// Emits a host intrinsic; false when op is not one.
    bool codegen_device_intrinsic(const Call *op) {
        const std::string &n = op->name;
        llvm::Value *code = nullptr;
        if (n == intrinsic::gpu_launch) {
            code = launch_kernel(op);
        } else if (n == intrinsic::device_copy_to_device || n == intrinsic::device_prepare_output) {
            auto fn = n == intrinsic::device_prepare_output ? device_fns.malloc
                                                            : device_fns.copy_to_device;
            code = builder.CreateCall(fn, {descriptor_of(op->args[0]), device_interface()});
        } else if (n == intrinsic::device_copy_to_host) {
            code = builder.CreateCall(device_fns.copy_to_host, {descriptor_of(op->args[0])});
        } else if (n == intrinsic::device_set_host_dirty ||
                   n == intrinsic::device_set_device_dirty) {
            auto fn = n == intrinsic::device_set_host_dirty ? device_fns.set_host_dirty
                                                            : device_fns.set_device_dirty;
            builder.CreateCall(fn, {descriptor_of(op->args[0]), builder.getInt32(1)});
            value = builder.getInt32(0);
            return true;
        } else {
            return false;
        }
        return_unless(is_success(code), [&] { return code; });
        value = builder.getInt32(0);
        return true;
    }

    /// gpu_launch(kernel, blocks x, y, z, scalars...): packs the arguments as the device
    /// interface's run() takes them and calls kiln_device_launch.
    llvm::Value *launch_kernel(const Call *op) {
        std::optional<int64_t> index = as_const_int(op->args[0]);
        internal_assert(index && *index >= 0 && size_t(*index) < lowered->kernels.size(),
                        "codegen: gpu_launch of an unknown kernel");
        const DeviceKernel &k = lowered->kernels[size_t(*index)];
        auto *dims_type = llvm::ArrayType::get(i32, 3);
        llvm::Value *blocks = entry_alloca(dims_type, std::nullopt, k.name + ".blocks");
        llvm::Value *threads = entry_alloca(dims_type, std::nullopt, k.name + ".threads");
        for (unsigned d = 0; d < 3; d++) {
            builder.CreateStore(codegen(op->args[1 + d]),
                                builder.CreateConstInBoundsGEP2_32(dims_type, blocks, 0, d));
            builder.CreateStore(builder.getInt32(k.threads[d]),
                                builder.CreateConstInBoundsGEP2_32(dims_type, threads, 0, d));
        }
        unsigned n = unsigned(k.args.size());
        auto *ptrs_type = llvm::ArrayType::get(ptr, std::max(n, 1u));
        auto *sizes_type = llvm::ArrayType::get(builder.getInt64Ty(), std::max(n, 1u));
        auto *flags_type = llvm::ArrayType::get(builder.getInt8Ty(), std::max(n, 1u));
        llvm::Value *args = entry_alloca(ptrs_type, std::nullopt, k.name + ".args");
        llvm::Value *sizes = entry_alloca(sizes_type, std::nullopt, k.name + ".arg_sizes");
        llvm::Value *flags = entry_alloca(flags_type, std::nullopt, k.name + ".arg_is_buffer");
        size_t scalar = 4;
        for (unsigned i = 0; i < n; i++) {
            const DeviceArgument &a = k.args[i];
            llvm::Value *v;
            if (a.is_buffer) {
                const auto *d = state.descriptors.find(a.name);
                internal_assert(d, "codegen: kernel argument '", a.name, "' has no descriptor");
                v = *d;
            } else {
                v = codegen(op->args[scalar++]);
                // Device code takes bool scalars as one byte (OpenCL: uchar; CUDA: bool).
                if (a.type.is_bool()) v = builder.CreateZExt(v, builder.getInt8Ty());
            }
            llvm::Value *slot = entry_alloca(v->getType(), std::nullopt, a.name + ".arg");
            builder.CreateStore(v, slot);
            builder.CreateStore(slot, builder.CreateConstInBoundsGEP2_32(ptrs_type, args, 0, i));
            uint64_t bytes = module.getDataLayout().getTypeAllocSize(v->getType());
            builder.CreateStore(builder.getInt64(bytes),
                                builder.CreateConstInBoundsGEP2_32(sizes_type, sizes, 0, i));
            builder.CreateStore(builder.getInt8(a.is_buffer ? 1 : 0),
                                builder.CreateConstInBoundsGEP2_32(flags_type, flags, 0, i));
        }
        llvm::Value *name = builder.CreateGlobalString(k.name, k.name + ".name", 0, &module);
        return builder.CreateCall(
            device_fns.launch, {device_interface(), source_global, builder.getInt64(source_size),
                                name, builder.CreateConstInBoundsGEP2_32(dims_type, blocks, 0, 0),
                                builder.CreateConstInBoundsGEP2_32(dims_type, threads, 0, 0),
                                builder.getInt32(int(n)), args, sizes, flags});
    }

    // ---- Statements ------------------------------------------------------------------------

    void visit(const LetStmt *op) override {
        llvm::Value *v = codegen(op->value);
        if (!llvm::isa<llvm::Constant>(v) && !v->hasName()) v->setName(op->name);
        push_let(op->name, op->value, v);
        codegen(op->body);
        pop_let(op->name);
    }

    void visit(const AssertStmt *op) override {
        llvm::Value *ok = codegen(op->condition);
        return_unless(ok, [&]() -> llvm::Value * {
            if (op->args.empty()) return call_kiln_error(op->error_code, op->message);
            // The message is a printf format; its values are computed only on failure. Varargs
            // take ints of at most 32 bits as int, int64 as long long, floats as double.
            llvm::Value *format = builder.CreateGlobalString(op->message, "format", 0, &module);
            std::vector<llvm::Value *> call_args{builder.getInt32(op->error_code), format};
            for (const Expr &a : op->args) {
                llvm::Value *v = codegen(a);
                Type t = a.type();
                if (t.is_float()) {
                    v = builder.CreateFPExt(v, builder.getDoubleTy());
                } else if (t.bits < 32) {
                    v = t.is_int() ? builder.CreateSExt(v, builder.getInt32Ty())
                                   : builder.CreateZExt(v, builder.getInt32Ty());
                }
                call_args.push_back(v);
            }
            return builder.CreateCall(kiln_error_fn, call_args);
        });
    }

    void visit(const For *op) override {
        internal_assert(op->for_type != ForType::GPUBlock && op->for_type != ForType::GPUThread,
                        "codegen: GPU loop '", op->name, "' reached the CPU backend");
        if (op->for_type == ForType::Parallel) {
            parallel_for(op);
        } else {
            serial_for(op);
        }
    }

    void serial_for(const For *op) {
        llvm::Value *min = codegen(op->min), *extent = codegen(op->extent);
        llvm::Value *end = builder.CreateAdd(min, extent, op->name + ".end");
        llvm::BasicBlock *preheader = builder.GetInsertBlock();
        llvm::BasicBlock *header = new_block(op->name + ".header");
        llvm::BasicBlock *body = new_block(op->name + ".body");
        llvm::BasicBlock *after = new_block(op->name + ".after");
        builder.CreateBr(header);
        builder.SetInsertPoint(header);
        llvm::PHINode *i = builder.CreatePHI(i32, 2, op->name);
        i->addIncoming(min, preheader);
        builder.CreateCondBr(builder.CreateICmpSLT(i, end), body, after);
        builder.SetInsertPoint(body);
        state.symbols.push(op->name, i);
        state.let_values.push(op->name, Expr());
        codegen(op->body);
        state.let_values.pop(op->name);
        state.symbols.pop(op->name);
        // i < end <= INT32_MAX here, so the increment cannot overflow: nsw is a fact, and it
        // lets LLVM widen and vectorize the induction variable.
        i->addIncoming(builder.CreateNSWAdd(i, builder.getInt32(1)), builder.GetInsertBlock());
        builder.CreateBr(header);
        builder.SetInsertPoint(after);
    }

    /// The body becomes `int32_t task(void *user_context, int32_t index, uint8_t *closure)`,
    /// where the closure struct holds every scalar and buffer pointer the body uses.
    void parallel_for(const For *op) {
        llvm::Value *min = codegen(op->min), *extent = codegen(op->extent);
        // The variables and buffers the body names; the closure captures those in scope here.
        IRNames names = collect_names(op->body);
        std::vector<std::pair<std::string, llvm::Value *>> variables, buffers, bases;
        std::vector<llvm::Type *> fields;
        for (const std::string &n : names.variables) {
            if (const auto *v = state.symbols.find(n); v && n != op->name) {
                variables.emplace_back(n, *v);
                fields.push_back((*v)->getType());
            }
        }
        // The scalar bases of dense ramps and the scalars of broadcasts bound in lets outside
        // the loop and used inside it.
        std::vector<std::pair<std::string, llvm::Value *>> scalars;
        for (const auto &[n, v] : variables) {
            if (const auto *b = state.ramp_bases.find(n); b && *b) bases.emplace_back(n, *b);
            if (const auto *b = state.broadcast_scalars.find(n); b && *b)
                scalars.emplace_back(n, *b);
        }
        std::set<std::string> accessed = names.loads;
        accessed.insert(names.stores.begin(), names.stores.end());
        for (const std::string &n : accessed) {
            if (const auto *v = state.buffers.find(n)) {
                buffers.emplace_back(n, *v);
                fields.push_back(ptr);
            }
        }
        // The fields in the order they are stored and loaded: variables, buffers, bases, scalars.
        for (const auto &[n, v] : bases)
            fields.push_back(v->getType());
        for (const auto &[n, v] : scalars)
            fields.push_back(v->getType());
        auto *closure_type = llvm::StructType::get(context, fields);
        llvm::Value *closure = entry_alloca(closure_type, std::nullopt, op->name + ".closure");
        unsigned field = 0;
        for (const auto &[n, v] : variables) {
            builder.CreateStore(v, builder.CreateStructGEP(closure_type, closure, field++));
        }
        for (const auto &[n, v] : buffers) {
            builder.CreateStore(v, builder.CreateStructGEP(closure_type, closure, field++));
        }
        for (const auto &[n, v] : bases) {
            builder.CreateStore(v, builder.CreateStructGEP(closure_type, closure, field++));
        }
        for (const auto &[n, v] : scalars) {
            builder.CreateStore(v, builder.CreateStructGEP(closure_type, closure, field++));
        }

        auto *task_type = llvm::FunctionType::get(i32, {ptr, i32, ptr}, false);
        llvm::Function *task =
            make_function(state.function->getName().str() + "." + op->name + ".task", task_type,
                          llvm::Function::InternalLinkage);
        FunctionState outer = std::move(state);
        llvm::IRBuilderBase::InsertPoint outer_point = builder.saveIP();
        state = FunctionState{};
        state.function = task;
        builder.SetInsertPoint(new_block("entry"));
        llvm::Value *env = task->getArg(2);
        field = 0;
        // Lets with equal values outside the loop (a Func's region min and its buffer's min,
        // say) get one value inside, so that LLVM sees the differences of such names fold to
        // constants (an accumulator's constant offset, which keeps it in a register).
        std::vector<std::pair<llvm::Value *, llvm::Value *>> loaded; // outside, inside
        for (const auto &[n, v] : variables) {
            llvm::Value *p = builder.CreateStructGEP(closure_type, env, field++);
            llvm::Value *inside = nullptr;
            for (const auto &[o, i] : loaded) {
                if (same_value(o, v)) {
                    inside = i;
                    break;
                }
            }
            if (!inside) {
                inside = builder.CreateLoad(v->getType(), p, n);
                loaded.emplace_back(v, inside);
            }
            state.symbols.push(n, inside);
        }
        for (const auto &[n, v] : buffers) {
            llvm::Value *p = builder.CreateStructGEP(closure_type, env, field++);
            state.buffers.push(n, builder.CreateLoad(ptr, p, n));
        }
        for (const auto &[n, v] : bases) {
            llvm::Value *p = builder.CreateStructGEP(closure_type, env, field++);
            state.ramp_bases.push(n, builder.CreateLoad(v->getType(), p, n + ".base"));
        }
        for (const auto &[n, v] : scalars) {
            llvm::Value *p = builder.CreateStructGEP(closure_type, env, field++);
            state.broadcast_scalars.push(n, builder.CreateLoad(v->getType(), p, n + ".scalar"));
        }
        task->getArg(1)->setName(op->name);
        state.symbols.push(op->name, task->getArg(1));
        codegen(op->body);
        fence_nontemporal_stores();
        builder.CreateRet(builder.getInt32(kiln_success));
        state = std::move(outer);
        builder.restoreIP(outer_point);

        fence_nontemporal_stores(); // the tasks may read what this thread stored
        llvm::Value *code =
            builder.CreateCall(kiln_parallel_for_fn,
                               {llvm::ConstantPointerNull::get(ptr), task, min, extent, closure});
        return_unless(is_success(code), [&] { return code; });
    }

    void visit(const Provide *op) override {
        internal_error("codegen: Provide to '", op->name,
                       "' should have been flattened to a Store");
    }

    void visit(const Realize *op) override {
        internal_error("codegen: Realize of '", op->name,
                       "' should have been flattened to an Allocate");
    }

    void visit(const Store *op) override {
        Type t = op->value.type();
        llvm::Value *v = to_memory(codegen(op->value), t);
        llvm::Value *base = buffer_pointer(op->name);
        llvm::Type *element = memory_type(t.element_of());
        llvm::Align align(t.bytes());
        llvm::Value *mask = predicate_mask(op->predicate);
        if (t.is_scalar()) {
            llvm::Value *p = element_pointer(element, base, codegen(op->index));
            if (mask) {
                mark_access(builder.CreateMaskedStore(one_lane(v), p, align, one_lane(mask)),
                            op->name);
            } else {
                mark_access(builder.CreateAlignedStore(v, p, align), op->name);
            }
        } else if (std::optional<ClampedRamp> r = clamped_ramp(op->index); r && !r->ok) {
            // A dense ramp, possibly through lets and plus broadcast offsets.
            llvm::Value *p = element_pointer(element, base, r->base);
            if (mask) {
                mark_access(builder.CreateMaskedStore(v, p, align, mask), op->name);
            } else {
                store_dense(v, p, t, op->name);
            }
        } else {
            // Lanes that share an address are written in lane order, so the last one wins.
            llvm::Value *pointers = builder.CreateGEP(element, base, codegen(op->index));
            mark_access(builder.CreateMaskedScatter(v, pointers, align, mask), op->name);
        }
    }

    /// A dense vector store (non-temporal where the schedule asked for it).
    void store_dense(llvm::Value *v, llvm::Value *p, Type t, const std::string &buffer) {
        if (x86 && lowered->nontemporal_stores.count(buffer)) {
            nontemporal_store(v, p, t, buffer);
        } else {
            mark_access(builder.CreateAlignedStore(v, p, llvm::Align(t.bytes())), buffer);
        }
    }

    void visit(const Allocate *op) override {
        internal_assert(op->memory_type != MemoryType::GPUShared,
                        "codegen: GPU shared allocation '", op->name, "' reached the CPU backend");
        int64_t element_bytes = int64_t(op->type.bytes()) * op->type.lanes;
        std::optional<int64_t> constant_bytes = element_bytes;
        for (const Expr &e : op->extents) {
            std::optional<int64_t> extent = as_const_int(e);
            if (!extent) {
                constant_bytes.reset();
                break;
            }
            *constant_bytes *= std::max<int64_t>(*extent, 0);
        }
        MemoryType m = op->memory_type;
        bool on_stack =
            constant_bytes && (m == MemoryType::Stack || m == MemoryType::Register ||
                               (m == MemoryType::Auto && *constant_bytes <= max_auto_stack_bytes));
        llvm::Value *p;
        if (on_stack) {
            int64_t bytes = std::max<int64_t>(*constant_bytes, 1);
            auto *array = llvm::ArrayType::get(builder.getInt8Ty(), uint64_t(bytes));
            llvm::Align align(bytes >= 64 ? 64 : op->type.bytes());
            p = entry_alloca(array, align, op->name);
        } else {
            llvm::Value *bytes = builder.getInt64(element_bytes);
            for (const Expr &e : op->extents) {
                bytes =
                    builder.CreateMul(bytes, builder.CreateSExt(codegen(e), builder.getInt64Ty()));
            }
            bytes =
                builder.CreateBinaryIntrinsic(llvm::Intrinsic::smax, bytes, builder.getInt64(0));
            if (op->condition.defined()) {
                bytes = builder.CreateSelect(codegen(op->condition), bytes, builder.getInt64(0));
            }
            p = builder.CreateCall(kiln_malloc_fn, {bytes}, op->name);
            return_unless(builder.CreateIsNotNull(p), [&] {
                return call_kiln_error(kiln_error_out_of_memory,
                                       "out of memory allocating '" + op->name + "'");
            });
            state.heap_allocations.push_back(p);
        }
        state.buffers.push(op->name, p);
        llvm::Value *descriptor = nullptr;
        if (wrapped_allocations.count(op->name)) {
            llvm::Value *bytes = builder.getInt64(element_bytes);
            for (const Expr &e : op->extents) {
                bytes =
                    builder.CreateMul(bytes, builder.CreateSExt(codegen(e), builder.getInt64Ty()));
            }
            bytes =
                builder.CreateBinaryIntrinsic(llvm::Intrinsic::smax, bytes, builder.getInt64(0));
            descriptor = builder.CreateCall(device_fns.wrap, {p, bytes}, op->name + ".buffer");
            return_unless(builder.CreateIsNotNull(descriptor), [&] {
                return call_kiln_error(kiln_error_out_of_memory,
                                       "out of memory describing '" + op->name + "'");
            });
            state.device_wraps.push_back(descriptor);
            state.descriptors.push(op->name, descriptor);
        }
        codegen(op->body);
        if (descriptor) {
            builder.CreateCall(device_fns.release, {descriptor});
            state.device_wraps.pop_back();
            state.descriptors.pop(op->name);
        }
        state.buffers.pop(op->name);
        if (!on_stack) {
            builder.CreateCall(kiln_free_fn, {p});
            state.heap_allocations.pop_back();
        }
    }

    // The enclosing Allocate frees its block when its body ends (and on error returns).
    void visit(const Free *) override {}

    void visit(const Block *op) override {
        std::vector<Stmt> stmts;
        flatten_block(op->first, stmts);
        flatten_block(op->rest, stmts);
        for (size_t i = 0; i < stmts.size();) {
            size_t n = transposed_copy(stmts, i);
            if (n == 0) {
                codegen(stmts[i]);
                n = 1;
            }
            i += n;
        }
    }

    static void flatten_block(const Stmt &s, std::vector<Stmt> &out) {
        if (const Block *b = s.as<Block>()) {
            flatten_block(b->first, out);
            flatten_block(b->rest, out);
        } else if (s.defined()) {
            out.push_back(s);
        }
    }

    /// One statement of a transposed copy: a store of a dense vector whose value is a load of
    /// another buffer at a strided ramp, the statement's own lets substituted.
    struct StridedCopy {
        const Store *store = nullptr;
        const Load *load = nullptr;
        Expr load_base, load_stride, store_index;
    };

    static std::optional<StridedCopy> strided_copy(const Stmt &s) {
        LetStack lets;
        Stmt body = s;
        while (const LetStmt *l = body.as<LetStmt>()) {
            lets.push(l->name, l->value);
            body = l->body;
        }
        const Store *store = body.as<Store>();
        if (!store || store->predicate.defined() || !store->value.type().is_vector()) {
            return std::nullopt;
        }
        const Load *load = store->value.as<Load>();
        if (!load || load->predicate.defined() || load->name == store->name ||
            load->type.is_bool()) {
            return std::nullopt;
        }
        const Ramp *r = load->index.as<Ramp>();
        if (!r || is_const_one(r->stride)) return std::nullopt;
        StridedCopy c{store, load, lets.apply(r->base), lets.apply(r->stride),
                      lets.apply(store->index)};
        if (!dense_ramp(c.store_index)) return std::nullopt;
        return c;
    }

    /// a - b as a constant, where the lets in scope make it one (up to four levels of lets).
    std::optional<int64_t> constant_difference(const Expr &a, const Expr &b) {
        Expr d = simplify(a - b);
        for (int level = 0; level < 4; level++) {
            if (std::optional<int64_t> c = as_const_int(d)) return c;
            std::map<std::string, Expr> values;
            for (const std::string &n : collect_names(d).free_variables) {
                const Expr *e = state.let_values.find(n);
                if (e && e->defined()) values.emplace(n, *e);
            }
            if (values.empty()) return std::nullopt;
            d = simplify(substitute(values, d));
        }
        return as_const_int(d);
    }

    /// A run of stores that copies a tile with its two dimensions swapped, as an unrolled loop
    /// over one dimension with the other vectorized leaves it: store k writes a dense vector of
    /// L lanes, element j of it loaded from base + k + j * stride of another buffer (a gather
    /// per store, a scatter per store the other way round). Emitted instead as dense loads of
    /// the rows base + j * stride, K elements each, transposed in registers by a butterfly of
    /// two-input shuffles (log2 N stages of N shuffles for an N x N block) and stored densely.
    /// The loads of a block come before its stores: the buffers differ by name, which kiln
    /// already tells LLVM cannot alias (mark_access). Returns how many statements it emitted
    /// (0: no such run starts at i).
    size_t transposed_copy(const std::vector<Stmt> &stmts, size_t i) {
        std::optional<StridedCopy> first = strided_copy(stmts[i]);
        if (!first) return 0;
        Type t = first->load->type;
        const int lanes = t.lanes;
        int n = 1;
        while (n < lanes)
            n *= 2;
        if (n * t.bits > 512) return 0;
        std::vector<StridedCopy> run{*first};
        for (size_t k = i + 1; k < stmts.size(); k++) {
            std::optional<StridedCopy> c = strided_copy(stmts[k]);
            if (!c || c->load->name != first->load->name || c->store->name != first->store->name ||
                c->load->type != t || !kiln::equal(c->load_stride, first->load_stride)) {
                break;
            }
            std::optional<int64_t> d = constant_difference(c->load_base, first->load_base);
            if (!d || *d != int64_t(run.size())) break;
            run.push_back(*c);
        }
        const int K = int(run.size());
        if (K < 2) return 0;
        llvm::Type *element = memory_type(t.element_of());
        llvm::Value *source = buffer_pointer(first->load->name);
        llvm::Value *base = codegen(first->load_base), *stride = codegen(first->load_stride);
        llvm::Align align(t.bytes());
        llvm::Value *poison = llvm::PoisonValue::get(llvm::FixedVectorType::get(element, n));
        std::vector<llvm::Constant *> lane_on;
        for (int l = 0; l < n; l++)
            lane_on.push_back(builder.getInt1(l < lanes));
        llvm::Value *first_lanes = llvm::ConstantVector::get(lane_on);
        for (int c0 = 0; c0 < K; c0 += n) {
            const int width = std::min(n, K - c0);
            auto *row_type = llvm::FixedVectorType::get(element, unsigned(width));
            std::vector<llvm::Value *> rows(size_t(n), poison);
            for (int j = 0; j < lanes; j++) {
                llvm::Value *row = builder.CreateAdd(
                    builder.CreateAdd(base, builder.CreateMul(stride, builder.getInt32(j))),
                    builder.getInt32(c0));
                llvm::Value *v = builder.CreateAlignedLoad(
                    row_type, element_pointer(element, source, row), align);
                mark_access(v, first->load->name);
                rows[size_t(j)] =
                    width == n ? v : builder.CreateShuffleVector(v, widen_mask(width, n));
            }
            transpose_in_registers(rows);
            for (int k = 0; k < width; k++) {
                const StridedCopy &c = run[size_t(c0) + size_t(k)];
                llvm::Value *p = element_pointer(element, buffer_pointer(c.store->name),
                                                 codegen(dense_ramp(c.store_index)->base));
                if (lanes < n) {
                    // The first `lanes` lanes: one masked store, not a vector cut in pieces.
                    mark_access(builder.CreateMaskedStore(rows[size_t(k)], p, align, first_lanes),
                                c.store->name);
                } else {
                    store_dense(rows[size_t(k)], p, t, c.store->name);
                }
            }
        }
        return size_t(K);
    }

    /// Lanes 0 .. used - 1 of a vector, then poison up to `lanes` lanes.
    static std::vector<int> widen_mask(int used, int lanes) {
        std::vector<int> mask(size_t(lanes), -1);
        for (int l = 0; l < used; l++)
            mask[size_t(l)] = l;
        return mask;
    }

    /// rows[j][l] becomes rows[l][j] for N vectors of N lanes (N a power of two): for each bit
    /// s of the lane index, the pairs of rows j and j + s exchange their off-diagonal halves.
    void transpose_in_registers(std::vector<llvm::Value *> &rows) {
        const int n = int(rows.size());
        for (int s = n / 2; s >= 1; s /= 2) {
            std::vector<int> low(static_cast<size_t>(n)), high(static_cast<size_t>(n));
            for (int l = 0; l < n; l++) {
                const bool upper = (l & s) != 0;
                low[size_t(l)] = upper ? n + l - s : l;
                high[size_t(l)] = upper ? n + l : l + s;
            }
            for (int j = 0; j < n; j++) {
                if ((j & s) != 0) continue;
                llvm::Value *a = rows[size_t(j)], *b = rows[size_t(j) + size_t(s)];
                rows[size_t(j)] = builder.CreateShuffleVector(a, b, low);
                rows[size_t(j) + size_t(s)] = builder.CreateShuffleVector(a, b, high);
            }
        }
    }

    void visit(const IfThenElse *op) override {
        llvm::Value *condition = codegen(op->condition);
        const Call *c = op->condition.as<Call>();
        bool likely = c && c->call_type == Call::Intrinsic && c->name == intrinsic::likely;
        llvm::BasicBlock *then_block = new_block("then");
        llvm::BasicBlock *else_block = op->else_case.defined() ? new_block("else") : nullptr;
        llvm::BasicBlock *after = new_block("after");
        builder.CreateCondBr(condition, then_block, else_block ? else_block : after,
                             likely ? llvm::MDBuilder(context).createLikelyBranchWeights()
                                    : nullptr);
        builder.SetInsertPoint(then_block);
        codegen(op->then_case);
        builder.CreateBr(after);
        if (else_block) {
            builder.SetInsertPoint(else_block);
            codegen(op->else_case);
            builder.CreateBr(after);
        }
        builder.SetInsertPoint(after);
    }

    void visit(const Evaluate *op) override { codegen(op->value); }

    void visit(const ProducerConsumer *op) override { codegen(op->body); }
};

} // namespace

LLVMModule compile_to_llvm_module(const LoweredFunc &f, const Target &t,
                                  const std::string &device_source) {
    internal_assert(!f.name.empty(), "codegen: the lowered function has no name");
    internal_assert(f.body.defined(), "codegen: function '", f.name, "' has no body");
    auto m = std::make_unique<LLVMModule::Impl>();
    m->name = f.name;
    m->target = t;
    m->target_machine = make_target_machine(t);
    m->context = std::make_unique<llvm::LLVMContext>();
    m->module = std::make_unique<llvm::Module>(f.name, *m->context);
    m->module->setTargetTriple(t.triple);
    m->module->setDataLayout(m->target_machine->createDataLayout());
    CodeGen codegen(t, *m->module);
    const LoweredFunc *compiled = &f;
    LoweredFunc profiled;
    if (t.profile) {
        std::vector<std::string> funcs;
        profiled = inject_profiling(f, &funcs);
        std::string names = f.name;
        for (const std::string &func : funcs)
            names += "\n" + func;
        codegen.set_profile_names(names);
        compiled = &profiled;
    }
    codegen.compile(*compiled, device_source);
    std::string problems;
    llvm::raw_string_ostream out(problems);
    bool broken = llvm::verifyModule(*m->module, &out);
    internal_assert(!broken, "codegen: invalid LLVM IR for '", f.name, "': ", out.str());
    optimize_module(*m->module, *m->target_machine);
    return LLVMModule(std::move(m));
}

} // namespace kiln
