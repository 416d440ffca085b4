// What a call of a math function (Call::Math: exp, log, tanh, pow, sin, cos, sqrt, ...) costs in
// the host code kiln emits, for whoever estimates a loop nest's work (autotune's features).
// The figure is read from codegen itself, not from a table beside it: the call is emitted by
// codegen_math_call into a scratch LLVM module, once per function and type, and its
// instructions are counted, so a change to codegen/VectorMath.cpp changes the cost with it.
// No LLVM in this header.
#pragma once

#include <string>

#include "lang/Type.h"

namespace kiln {

/// What one lane-level call of a library function (libm's expf, sinf, ...) counts as, in
/// operations: LLVM calls libm once per lane for the math functions it has no vector form of.
/// An estimate (20-40 cycles per call on x86-64, against ~1 per vector instruction).
inline constexpr double libm_call_operations = 20.0;

/// What one call of the math function `name` on a value of type t costs, in instructions of
/// that type's width (an add of the same type costs 1), as codegen_math_call emits it: every
/// instruction of its expansion counts 1, every libm call libm_call_operations. exp, log and
/// tanh of a float32 vector are inline polynomials (codegen/VectorMath.h); everything else
/// transcendental calls libm, once per lane for a vector. So exp of 16 float32 lanes costs ~30
/// (log ~40), exp of a scalar 20, exp of 8 float64 lanes or sin of 8 float32 lanes 160; sqrt,
/// floor, ceil, round, abs and fma cost 1. Thread-safe; measured once per name and type; an
/// unknown name or a non-float type is an internal error.
double math_call_operations(const std::string &name, Type t);

} // namespace kiln
