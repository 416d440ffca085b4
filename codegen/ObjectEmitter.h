// Ahead-of-time output of the LLVM backend: a lowered function compiled to an ELF object (with
// the entry points `name` and `name_argv`, see codegen/CodeGenLLVM.h), to a static library
// holding that object, to assembly, or to LLVM IR text. Each raises RuntimeError when the file
// cannot be written. codegen/AOT.h builds the complete set of files (header, metadata) on these.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "codegen/Target.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

void compile_to_object(const LoweredFunc &f, const Target &t, const std::string &path);
void compile_to_static_library(const LoweredFunc &f, const Target &t, const std::string &path);
void compile_to_assembly(const LoweredFunc &f, const Target &t, const std::string &path);
void compile_to_llvm_ir(const LoweredFunc &f, const Target &t, const std::string &path);

/// A GNU ar archive with a symbol table (what `ar rcs` makes) holding one relocatable object,
/// stored as member_name. Deterministic: no timestamps, uid or gid. InternalError when LLVM
/// cannot read the object.
std::string make_static_library(const std::string &object_code, const std::string &member_name);
/// The same with several objects, each {member name, object bytes}, in the order given.
std::string make_static_library(const std::vector<std::pair<std::string, std::string>> &members);

/// Writes bytes to path, replacing the file; RuntimeError naming `what` and the path on failure.
void write_output_file(const std::string &path, const std::string &bytes, const char *what);

} // namespace kiln
