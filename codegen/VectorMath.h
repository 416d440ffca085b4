// Internal to codegen: exp, log and tanh for float32 written out in LLVM IR, so vector calls stay
// vectors (LLVM would otherwise split them into one libm call per lane). Each function accepts a
// float32 scalar or vector and returns the same type.
//
// Accuracy, measured against the correctly rounded result over the whole float32 range (see
// tests/codegen/VectorMathTest.cpp): exp and log within 1 ulp, tanh within 2 ulp; denormal
// results of exp are within 1 ulp of the denormal spacing. Special values follow libm: exp
// overflows to +inf above ~88.72 and underflows to 0 below ~-103.97; log(0) = -inf,
// log(+inf) = +inf, log(x < 0) = NaN; tanh(+-inf) = +-1; NaN in gives NaN out.
// Under Target::fast_math the special values are not guaranteed (LLVM may assume no NaN or
// infinity).
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln {

llvm::Value *codegen_exp_f32(llvm::IRBuilderBase &b, llvm::Value *x);
llvm::Value *codegen_log_f32(llvm::IRBuilderBase &b, llvm::Value *x);
llvm::Value *codegen_tanh_f32(llvm::IRBuilderBase &b, llvm::Value *x);

} // namespace kiln
