#include "codegen/ObjectEmitter.h"

#include "codegen/CodeGenLLVM.h"

namespace kiln {

void compile_to_object(const LoweredFunc &f, const Target &t, const std::string &path) {
    compile_to_llvm_module(f, t).write_object(path);
}

void compile_to_assembly(const LoweredFunc &f, const Target &t, const std::string &path) {
    compile_to_llvm_module(f, t).write_assembly(path);
}

void compile_to_llvm_ir(const LoweredFunc &f, const Target &t, const std::string &path) {
    compile_to_llvm_module(f, t).write_llvm_ir(path);
}

} // namespace kiln
