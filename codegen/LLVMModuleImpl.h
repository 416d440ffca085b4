// Internal to codegen: the LLVM objects behind an LLVMModule, and the shared steps of the
// backend (target machines, the optimization pipeline, emission). Includes LLVM headers, so only
// codegen's .cpp files include it.
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/LLVMModule.h"

namespace kiln {

struct LLVMModule::Impl {
    std::string name;
    Target target;
    // The context owns every type and constant of the module, so it must outlive it.
    std::unique_ptr<llvm::LLVMContext> context;
    std::unique_ptr<llvm::Module> module;
    std::unique_ptr<llvm::TargetMachine> target_machine;
};

/// Registers LLVM's targets, once per process; safe to call from any thread.
void initialize_llvm();

/// A target machine for t at -O3, position-independent, so that the same object serves the JIT
/// and ahead-of-time linking. CompileError when LLVM does not know the triple.
std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target &t);

/// Runs kiln's optimization pipeline, a short function pipeline tuned for the IR lowering makes
/// (no loop or SLP auto-vectorizer: kiln vectorizes explicitly, as the schedule says), or the
/// one KILN_LLVM_PIPELINE names ("O3", or opt -passes syntax; CompileError if it does not parse).
void optimize_module(llvm::Module &module, llvm::TargetMachine &target_machine);

/// Time the calling thread has spent in optimize_module(), in total: thread CPU and wall
/// milliseconds (for bench/compile_time.cpp, which reports the optimizer's share).
double optimize_cpu_ms_total();
double optimize_wall_ms_total();

/// Compiles a copy of the module to an object file or assembly text, leaving the module as it
/// was (code generation rewrites IR).
std::string emit_machine_code(const LLVMModule::Impl &m, llvm::CodeGenFileType file_type);

} // namespace kiln
