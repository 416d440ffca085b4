#include "codegen/Arithmetic.h"

#include <map>
#include <mutex>
#include <set>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "codegen/MathCost.h"
#include "codegen/VectorMath.h"
#include "lang/Error.h"

namespace kiln {

llvm::Value *codegen_div_mod(llvm::IRBuilderBase &b, Type t, llvm::Value *a, llvm::Value *divisor,
                             std::optional<int64_t> constant_divisor, bool is_mod) {
    if (t.is_float()) {
        llvm::Value *q = b.CreateFDiv(a, divisor);
        if (!is_mod) return q;
        // Halide's float modulo.
        llvm::Value *f = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, q);
        return b.CreateFSub(a, b.CreateFMul(divisor, f));
    }
    llvm::Type *type = a->getType();
    auto constant = [&](int64_t v) { return llvm::ConstantInt::getSigned(type, v); };
    std::optional<int64_t> k = constant_divisor;
    if (k && *k > 0 && (*k & (*k - 1)) == 0) {
        // Euclidean division by 2^s is an arithmetic shift, modulo a mask, for any sign of a.
        if (is_mod) return b.CreateAnd(a, constant(*k - 1));
        llvm::Value *shift = constant(__builtin_ctzll(uint64_t(*k)));
        return t.is_int() ? b.CreateAShr(a, shift) : b.CreateLShr(a, shift);
    }
    // With a constant divisor the guards below fold away.
    llvm::Value *zero = constant(0), *one = constant(1);
    llvm::Value *is_zero = b.CreateICmpEQ(divisor, zero);
    if (t.is_uint()) {
        llvm::Value *safe = b.CreateSelect(is_zero, one, divisor);
        if (is_mod) return b.CreateURem(a, safe);
        return b.CreateSelect(is_zero, zero, b.CreateUDiv(a, safe));
    }
    // sdiv traps on a zero divisor and on INT_MIN / -1: divide by 1 instead and patch.
    llvm::Value *is_minus_one = b.CreateICmpEQ(divisor, constant(-1));
    llvm::Value *safe = b.CreateSelect(b.CreateOr(is_zero, is_minus_one), one, divisor);
    llvm::Value *r = b.CreateSRem(a, safe);
    llvm::Value *r_negative = b.CreateICmpSLT(r, zero);
    if (is_mod) {
        // r has the sign of a; adding |b| moves it into [0, |b|). |INT_MIN| wraps to INT_MIN,
        // which still gives the right answer modulo 2^bits.
        llvm::Value *abs_b = b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, safe, b.getFalse());
        return b.CreateSelect(r_negative, b.CreateAdd(r, abs_b), r);
    }
    llvm::Value *q = b.CreateSDiv(a, safe);
    // A negative remainder means q was rounded toward zero: step away from zero.
    llvm::Value *step = b.CreateSelect(b.CreateICmpSGT(safe, zero), constant(-1), one);
    q = b.CreateSelect(r_negative, b.CreateAdd(q, step), q);
    q = b.CreateSelect(is_minus_one, b.CreateNeg(a), q);
    return b.CreateSelect(is_zero, zero, q);
}

namespace {

/// like with its lanes' type replaced by scalar.
llvm::Type *with_scalar(llvm::Type *like, llvm::Type *scalar) {
    auto *vector = llvm::dyn_cast<llvm::FixedVectorType>(like);
    return vector ? llvm::FixedVectorType::get(scalar, vector->getNumElements()) : scalar;
}

/// A splat of the 32-bit constant c shaped like v.
llvm::Value *int32_like(llvm::IRBuilderBase &b, llvm::Value *v, uint32_t c) {
    return llvm::ConstantInt::get(with_scalar(v->getType(), b.getInt32Ty()), c);
}

/// bfloat16 to float32 (exact): the bits become the upper half of a float32.
llvm::Value *bfloat16_to_float32(llvm::IRBuilderBase &b, llvm::Value *v) {
    llvm::Type *t = v->getType();
    llvm::Value *bits = b.CreateBitCast(v, with_scalar(t, b.getInt16Ty()));
    llvm::Value *wide = b.CreateZExt(bits, with_scalar(t, b.getInt32Ty()));
    wide = b.CreateShl(wide, int32_like(b, wide, 16));
    return b.CreateBitCast(wide, with_scalar(t, b.getFloatTy()));
}

/// float32 to bfloat16, rounding to nearest even in integer arithmetic (the same on every CPU,
/// as the reference evaluator computes it; vcvtneps2bf16 would flush denormals). NaN stays NaN.
llvm::Value *float32_to_bfloat16(llvm::IRBuilderBase &b, llvm::Value *f) {
    llvm::Type *t = f->getType();
    llvm::Value *u = b.CreateBitCast(f, with_scalar(t, b.getInt32Ty()));
    llvm::Value *high = b.CreateLShr(u, int32_like(b, u, 16));
    llvm::Value *odd = b.CreateAnd(high, int32_like(b, u, 1));
    llvm::Value *rounded = b.CreateAdd(u, b.CreateAdd(odd, int32_like(b, u, 0x7fff)));
    rounded = b.CreateLShr(rounded, int32_like(b, u, 16));
    llvm::Value *quiet_nan = b.CreateOr(high, int32_like(b, u, 0x40));
    llvm::Value *is_nan = b.CreateFCmpUNO(f, f);
    llvm::Value *bits =
        b.CreateTrunc(b.CreateSelect(is_nan, quiet_nan, rounded), with_scalar(t, b.getInt16Ty()));
    return b.CreateBitCast(bits, with_scalar(t, b.getBFloatTy()));
}

} // namespace

llvm::Value *codegen_cast(llvm::IRBuilderBase &b, llvm::Value *v, Type from, Type to,
                          llvm::Type *to_type) {
    if (from == to) return v;
    // bfloat16 converts through float32, both ways (lang/Type.h).
    if (from.is_bfloat()) {
        v = bfloat16_to_float32(b, v);
        from = Float(32, from.lanes);
        if (from == to) return v;
    }
    if (to.is_bfloat()) {
        Type f32 = Float(32, to.lanes);
        v = codegen_cast(b, v, from, f32, with_scalar(to_type, b.getFloatTy()));
        return float32_to_bfloat16(b, v);
    }
    if (to.is_bool()) {
        llvm::Value *zero = llvm::Constant::getNullValue(v->getType());
        return from.is_float() ? b.CreateFCmpUNE(v, zero) : b.CreateICmpNE(v, zero);
    }
    if (from.is_float() && to.is_float()) return b.CreateFPCast(v, to_type);
    if (from.is_float()) {
        // fptosi is poison out of range; the saturating form is defined everywhere.
        auto id = to.is_int() ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
        return b.CreateIntrinsic(id, {to_type, v->getType()}, {v});
    }
    if (to.is_float())
        return from.is_int() ? b.CreateSIToFP(v, to_type) : b.CreateUIToFP(v, to_type);
    return b.CreateIntCast(v, to_type, from.is_int());
}

namespace {

/// Calls the libm function name on each lane of x.
llvm::Value *call_libm_per_lane(llvm::IRBuilderBase &b, const char *name, llvm::Value *x) {
    llvm::Module &module = *b.GetInsertBlock()->getModule();
    llvm::Type *scalar = x->getType()->getScalarType();
    llvm::FunctionCallee fn =
        module.getOrInsertFunction(name, llvm::FunctionType::get(scalar, {scalar}, false));
    auto *vector = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
    if (!vector) return b.CreateCall(fn, {x});
    llvm::Value *result = llvm::PoisonValue::get(vector);
    for (unsigned i = 0; i < vector->getNumElements(); i++) {
        result = b.CreateInsertElement(result, b.CreateCall(fn, {b.CreateExtractElement(x, i)}), i);
    }
    return result;
}

} // namespace

llvm::Value *codegen_math_call(llvm::IRBuilderBase &b, const std::string &name, Type t, Type arg,
                               const std::vector<llvm::Value *> &args) {
    size_t arity = name == "pow" ? 2 : name == "fma" ? 3 : 1;
    internal_assert(args.size() == arity, "codegen: ", name, " takes ", arity, " arguments, got ",
                    args.size());
    if (name == "abs") {
        if (arg.is_float()) return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, args[0]);
        if (!arg.is_int()) return args[0];
        // The result is unsigned, so abs(INT_MIN) = 2^(bits-1), not poison.
        return b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, args[0], b.getFalse());
    }
    internal_assert(t.is_float(), "codegen: math function ", name, " of type ", t);
    bool float32_vector = t.bits == 32 && t.is_vector();
    if (float32_vector && name == "exp") return codegen_exp_f32(b, args[0]);
    if (float32_vector && name == "log") return codegen_log_f32(b, args[0]);
    if (float32_vector && name == "tanh") return codegen_tanh_f32(b, args[0]);
    // LLVM 19 has no tanh intrinsic.
    if (name == "tanh") return call_libm_per_lane(b, t.bits == 32 ? "tanhf" : "tanh", args[0]);
    static const std::map<std::string, llvm::Intrinsic::ID> intrinsics = {
        {"exp", llvm::Intrinsic::exp},     {"log", llvm::Intrinsic::log},
        {"sqrt", llvm::Intrinsic::sqrt},   {"pow", llvm::Intrinsic::pow},
        {"sin", llvm::Intrinsic::sin},     {"cos", llvm::Intrinsic::cos},
        {"floor", llvm::Intrinsic::floor}, {"ceil", llvm::Intrinsic::ceil},
        {"fma", llvm::Intrinsic::fma},     {"round", llvm::Intrinsic::roundeven},
    };
    auto it = intrinsics.find(name);
    internal_assert(it != intrinsics.end(), "codegen: unknown math function '", name, "'");
    // The backend computes vectors of exp, log, pow, sin and cos with one libm call per lane.
    return b.CreateIntrinsic(it->second, {args[0]->getType()}, args);
}

double math_call_operations(const std::string &name, Type t) {
    static std::mutex mutex;
    static std::map<std::pair<std::string, std::string>, double> measured;
    const std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_pair(name, t.to_string());
    if (auto it = measured.find(key); it != measured.end()) return it->second;
    internal_assert(t.is_float(), "math_call_operations: ", name, " of type ", t);
    llvm::LLVMContext context;
    llvm::Module module("kiln.math_cost", context);
    llvm::Type *scalar = t.bits == 64   ? llvm::Type::getDoubleTy(context)
                         : t.bits == 16 ? llvm::Type::getHalfTy(context)
                                        : llvm::Type::getFloatTy(context);
    llvm::Type *type =
        t.is_vector() ? llvm::FixedVectorType::get(scalar, unsigned(t.lanes)) : scalar;
    const size_t arity = name == "pow" ? 2 : name == "fma" ? 3 : 1;
    llvm::Function *fn = llvm::Function::Create(
        llvm::FunctionType::get(type, std::vector<llvm::Type *>(arity, type), false),
        llvm::Function::ExternalLinkage, "cost", module);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", fn));
    std::vector<llvm::Value *> args;
    for (llvm::Argument &a : fn->args())
        args.push_back(&a);
    b.CreateRet(codegen_math_call(b, name, t, t, args));
    // LLVM's intrinsics that the backend lowers to one libm call per lane.
    static const std::set<llvm::Intrinsic::ID> libm = {llvm::Intrinsic::exp, llvm::Intrinsic::log,
                                                       llvm::Intrinsic::pow, llvm::Intrinsic::sin,
                                                       llvm::Intrinsic::cos};
    double cost = 0;
    const double lanes = double(t.lanes);
    for (const llvm::BasicBlock &block : *fn) {
        for (const llvm::Instruction &inst : block) {
            if (llvm::isa<llvm::ReturnInst>(inst)) continue;
            const auto *call = llvm::dyn_cast<llvm::CallInst>(&inst);
            const llvm::Function *callee = call ? call->getCalledFunction() : nullptr;
            if (callee && !callee->isIntrinsic())
                cost += libm_call_operations; // one lane's call in a per-lane loop
            else if (callee && libm.count(callee->getIntrinsicID()))
                cost += libm_call_operations * lanes;
            else
                cost += 1;
        }
    }
    cost = std::max(1.0, cost);
    measured.emplace(key, cost);
    return cost;
}

} // namespace kiln
