// Cephes-style float32 exp, log and tanh: a range reduction that is exact in float32, then a
// short minimax polynomial. Coefficients are those of Cephes' expf, logf and tanhf (S. Moshier).
// Polynomials use llvm.fmuladd, which becomes an FMA where the target has one; that is a choice of
// this implementation, not a contraction of user code.
#include "codegen/VectorMath.h"

#include <cmath>
#include <initializer_list>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

namespace kiln {

namespace {

struct Builder {
    llvm::IRBuilderBase &b;
    llvm::Type *float_type;
    llvm::Type *int_type; // int32 with the same lanes

    Builder(llvm::IRBuilderBase &builder, llvm::Value *x)
        : b(builder), float_type(x->getType()),
          int_type(x->getType()->getWithNewType(builder.getInt32Ty())) {}

    llvm::Value *f(double v) const { return llvm::ConstantFP::get(float_type, v); }
    llvm::Value *i(int64_t v) const { return llvm::ConstantInt::get(int_type, v, true); }

    llvm::Value *fmuladd(llvm::Value *x, llvm::Value *y, llvm::Value *z) const {
        return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {float_type}, {x, y, z});
    }

    /// Horner's rule; coefficients from the highest degree down.
    llvm::Value *polynomial(llvm::Value *x, std::initializer_list<double> coefficients) const {
        llvm::Value *p = nullptr;
        for (double c : coefficients)
            p = p ? fmuladd(p, x, f(c)) : f(c);
        return p;
    }

    /// 2^n for integer n in [-126, 127], built in the exponent field.
    llvm::Value *pow2(llvm::Value *n) const {
        return b.CreateBitCast(b.CreateShl(b.CreateAdd(n, i(127)), i(23)), float_type);
    }
};

/// Whether the function being built is compiled with AVX-512F (its "target-features").
bool has_avx512f(llvm::IRBuilderBase &b) {
    const llvm::BasicBlock *block = b.GetInsertBlock();
    const llvm::Function *f = block ? block->getParent() : nullptr;
    if (!f) return false;
    llvm::Attribute a = f->getFnAttribute("target-features");
    if (!a.isValid()) return false;
    return ("," + a.getValueAsString().str() + ",").find(",+avx512f,") != std::string::npos;
}

/// y * 2^n (n integral, as float) with one rounding, denormal and infinite results included:
/// AVX-512's vscalefps on each 16 lanes. nullptr where that does not apply (no AVX-512F, or lanes
/// not a multiple of 16): the caller builds 2^n itself.
llvm::Value *scale_by_pow2(llvm::IRBuilderBase &b, llvm::Value *y, llvm::Value *n) {
    auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(y->getType());
    if (!vt || vt->getNumElements() % 16 != 0 || !has_avx512f(b)) return nullptr;
    const unsigned lanes = vt->getNumElements();
    llvm::Type *v16 = llvm::FixedVectorType::get(b.getFloatTy(), 16);
    llvm::Value *result = lanes == 16 ? nullptr : llvm::PoisonValue::get(vt);
    for (unsigned at = 0; at < lanes; at += 16) {
        llvm::SmallVector<int, 16> part;
        for (unsigned i = 0; i < 16; i++)
            part.push_back(int(at + i));
        llvm::Value *yp = lanes == 16 ? y : b.CreateShuffleVector(y, part);
        llvm::Value *np = lanes == 16 ? n : b.CreateShuffleVector(n, part);
        // Every lane (mask all ones), in the current rounding mode (4: _MM_FROUND_CUR_DIRECTION).
        llvm::Value *scaled = b.CreateIntrinsic(
            llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
            {yp, np, llvm::PoisonValue::get(v16), b.getInt16(0xffff), b.getInt32(4)});
        if (lanes == 16) return scaled;
        llvm::SmallVector<int, 64> widen, merge;
        for (unsigned i = 0; i < lanes; i++) {
            widen.push_back(i < 16 ? int(i) : -1);
            merge.push_back(i >= at && i < at + 16 ? int(lanes + i - at) : int(i));
        }
        result = b.CreateShuffleVector(result, b.CreateShuffleVector(scaled, widen), merge);
    }
    return result;
}

} // namespace

llvm::Value *codegen_exp_f32(llvm::IRBuilderBase &builder, llvm::Value *x) {
    Builder m(builder, x);
    llvm::IRBuilderBase &b = builder;
    // Clamping keeps 2^n below within two normal factors; beyond these bounds the result is inf
    // or 0 anyway. NaN compares false and becomes 89 here; it is put back at the end.
    llvm::Value *xc = b.CreateSelect(b.CreateFCmpOLT(x, m.f(89.0)), x, m.f(89.0));
    xc = b.CreateSelect(b.CreateFCmpOGT(xc, m.f(-104.0)), xc, m.f(-104.0));
    // x = n ln2 + r with |r| <= ln2 / 2. ln2 is split in two (Cody-Waite) so that n * C1 is exact.
    llvm::Value *n = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven,
                                            b.CreateFMul(xc, m.f(1.44269504088896341)));
    // n C1 is exact and x - n C1 too (n is small, C1 has 9 significant bits): one fused step each
    // where the target has FMA, which also rounds x - n C1 - n C2 once instead of twice.
    llvm::Value *r = m.fmuladd(n, m.f(-0.693359375), xc);
    r = m.fmuladd(n, m.f(2.12194440e-4), r);
    llvm::Value *p = m.polynomial(r, {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                                      4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1});
    llvm::Value *y = b.CreateFAdd(m.fmuladd(p, b.CreateFMul(r, r), r), m.f(1.0));
    // n is in [-150, 128]: y 2^n rounded once, so that denormals and infinity come out right.
    // With AVX-512, vscalefps does that in one instruction; else scaling by 2^(n/2) and then
    // 2^(n - n/2) keeps both factors normal, and only the last multiply rounds.
    if (llvm::Value *scaled = scale_by_pow2(b, y, n)) {
        y = scaled;
    } else {
        llvm::Value *ni = b.CreateFPToSI(n, m.int_type);
        llvm::Value *n1 = b.CreateAShr(ni, m.i(1));
        llvm::Value *n2 = b.CreateSub(ni, n1);
        y = b.CreateFMul(b.CreateFMul(y, m.pow2(n1)), m.pow2(n2));
    }
    return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

llvm::Value *codegen_log_f32(llvm::IRBuilderBase &builder, llvm::Value *x) {
    Builder m(builder, x);
    llvm::IRBuilderBase &b = builder;
    // Denormals have no implicit leading bit: scale them into the normal range first.
    llvm::Value *denormal = b.CreateFCmpOLT(x, m.f(1.17549435e-38));
    llvm::Value *xs = b.CreateSelect(denormal, b.CreateFMul(x, m.f(8388608.0)), x);
    // x = mant * 2^e with mant in [0.5, 1).
    llvm::Value *bits = b.CreateBitCast(xs, m.int_type);
    llvm::Value *e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, m.i(23)), m.i(0xff)), m.i(126));
    e = b.CreateSub(e, b.CreateSelect(denormal, m.i(23), m.i(0)));
    llvm::Value *mant = b.CreateBitCast(
        b.CreateOr(b.CreateAnd(bits, m.i(int32_t(0x807fffff))), m.i(0x3f000000)), m.float_type);
    // Re-centre on 1 so the polynomial argument lies in [sqrt(1/2) - 1, sqrt(2) - 1]; both steps
    // are exact in float32.
    llvm::Value *small = b.CreateFCmpOLT(mant, m.f(0.707106781186547524));
    e = b.CreateSub(e, b.CreateZExt(small, m.int_type));
    mant = b.CreateFSub(b.CreateSelect(small, b.CreateFAdd(mant, mant), mant), m.f(1.0));
    llvm::Value *ef = b.CreateSIToFP(e, m.float_type);
    llvm::Value *z = b.CreateFMul(mant, mant);
    llvm::Value *p = m.polynomial(mant, {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1,
                                         -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                                         2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
    llvm::Value *y = b.CreateFMul(b.CreateFMul(p, mant), z);
    y = m.fmuladd(ef, m.f(-2.12194440e-4), y);
    y = m.fmuladd(z, m.f(-0.5), y);
    llvm::Value *result = m.fmuladd(ef, m.f(0.693359375), b.CreateFAdd(mant, y));
    result = b.CreateSelect(b.CreateFCmpOEQ(x, m.f(INFINITY)), x, result);
    result = b.CreateSelect(b.CreateFCmpOEQ(x, m.f(0.0)), m.f(-INFINITY), result);
    // Negative numbers and NaN (unordered compares are true for NaN).
    return b.CreateSelect(b.CreateFCmpULT(x, m.f(0.0)), m.f(NAN), result);
}

llvm::Value *codegen_tanh_f32(llvm::IRBuilderBase &builder, llvm::Value *x) {
    Builder m(builder, x);
    llvm::IRBuilderBase &b = builder;
    llvm::Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    // Near zero, 1 - 2 / (e^2x + 1) cancels badly: use an odd polynomial there.
    llvm::Value *z = b.CreateFMul(x, x);
    llvm::Value *p = m.polynomial(z, {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
                                      1.33314422036E-1, -3.33332819422E-1});
    llvm::Value *near_zero = m.fmuladd(b.CreateFMul(p, z), x, x);
    // Elsewhere the exp form is accurate and saturates to 1 when e^2x overflows.
    llvm::Value *e = codegen_exp_f32(b, b.CreateFMul(ax, m.f(2.0)));
    llvm::Value *far = b.CreateFSub(m.f(1.0), b.CreateFDiv(m.f(2.0), b.CreateFAdd(e, m.f(1.0))));
    llvm::Value *y = b.CreateSelect(b.CreateFCmpOLT(ax, m.f(0.625)), near_zero, far);
    // tanh is odd; copying the sign also makes tanh(-0) = -0, which the polynomial rounds to +0.
    return b.CreateCopySign(y, x);
}

} // namespace kiln
