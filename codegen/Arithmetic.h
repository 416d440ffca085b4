// Internal to codegen: the IR operations whose LLVM form takes care to keep the semantics of
// lang/IR.h — Euclidean division and modulo that never trap, casts that are never poison, and
// calls to math functions. Includes LLVM headers, so only codegen's .cpp files include it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "lang/Type.h"

namespace kiln {

/// a / b (or a % b when is_mod) of type t: Euclidean for integers, 0 for a zero divisor,
/// wrapping for INT_MIN / -1; IEEE division and a - b * floor(a / b) for floats.
/// constant_divisor is b's value when b is a constant: powers of two become shifts and masks.
llvm::Value *codegen_div_mod(llvm::IRBuilderBase &b, Type t, llvm::Value *a, llvm::Value *divisor,
                             std::optional<int64_t> constant_divisor, bool is_mod);

/// v converted from type from to type to, whose LLVM type is to_type. Integer casts wrap or
/// extend by the source's signedness; float to integer truncates and saturates (NaN gives 0);
/// casts to bool compare with zero (NaN gives true).
llvm::Value *codegen_cast(llvm::IRBuilderBase &b, llvm::Value *v, Type from, Type to,
                          llvm::Type *to_type);

/// A call to the math function name (exp, log, sqrt, pow, sin, cos, tanh, floor, ceil, round,
/// abs, fma) with result type t on arguments already generated; arg is the first argument's
/// type (abs of an integer has an unsigned result). Float32 vector exp, log and tanh use
/// codegen/VectorMath.h; the rest are LLVM intrinsics or libm, lane by lane for vectors.
llvm::Value *codegen_math_call(llvm::IRBuilderBase &b, const std::string &name, Type t, Type arg,
                               const std::vector<llvm::Value *> &args);

} // namespace kiln
