// Internal to codegen: exp, log and tanh for float32 written out in LLVM IR, so vector calls stay
// vectors (LLVM would otherwise split them into one libm call per lane). Each function accepts a
// float32 scalar or vector and returns the same type.
//
// Accuracy against the correctly rounded result: at most 1 ulp for all three on every 61st float32
// bit pattern (70 million inputs each, denormals included, where an ulp is the denormal spacing;
// measured with FMA, which llvm.fmuladd uses where the target has it);
// tests/codegen/VectorMathTest.cpp asserts 1 ulp for exp and log and 2 for tanh on a sample.
// Special values follow libm: exp overflows to +inf above ~88.72 and underflows to 0 below
// ~-103.97; log(0) = -inf, log(+inf) = +inf, log(x < 0) = NaN; tanh(+-inf) = +-1, tanh(-0) = -0;
// NaN in gives NaN out. Under Target::fast_math special values are not guaranteed (LLVM may then
// assume there are no NaNs or infinities).
// exp's final y * 2^n is one vscalefps per 16 lanes where the function is compiled with AVX-512F
// (its "target-features"), else 2^n is built in the exponent field in two normal halves; both
// round once. vscalefps and fused Cody-Waite steps took softmax 4096² on 1 thread from 12.3-13.4
// to 10.1-10.7 ms on the AMD EPYC Zen 4 (interleaved).
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln {

llvm::Value *codegen_exp_f32(llvm::IRBuilderBase &b, llvm::Value *x);
llvm::Value *codegen_log_f32(llvm::IRBuilderBase &b, llvm::Value *x);
llvm::Value *codegen_tanh_f32(llvm::IRBuilderBase &b, llvm::Value *x);

} // namespace kiln
