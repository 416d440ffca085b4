// Ahead-of-time output of the LLVM backend: a lowered function compiled to an ELF object (with
// the entry points `name` and `name_argv`, see codegen/CodeGenLLVM.h), to assembly, or to LLVM IR
// text. Each raises RuntimeError when the file cannot be written.
#pragma once

#include <string>

#include "codegen/Target.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

void compile_to_object(const LoweredFunc &f, const Target &t, const std::string &path);
void compile_to_assembly(const LoweredFunc &f, const Target &t, const std::string &path);
void compile_to_llvm_ir(const LoweredFunc &f, const Target &t, const std::string &path);

} // namespace kiln
