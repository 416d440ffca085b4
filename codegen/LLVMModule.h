// A compiled and optimized LLVM module holding one pipeline's entry points, with the ways to look
// at it: textual LLVM IR, assembly, and an ELF object. LLVM itself stays behind a pointer to an
// implementation, so this header needs no LLVM header.
#pragma once

#include <memory>
#include <string>

#include "codegen/Target.h"

namespace kiln {

class LLVMModule {
public:
    struct Impl; ///< defined in codegen/LLVMModuleImpl.h, which only codegen includes

    explicit LLVMModule(std::unique_ptr<Impl> impl);
    LLVMModule(LLVMModule &&) noexcept;
    LLVMModule &operator=(LLVMModule &&) noexcept;
    ~LLVMModule();

    /// The name of the typed entry point; the argv entry point is name() + "_argv".
    const std::string &name() const;
    const Target &target() const;

    /// The optimized module as textual LLVM IR.
    std::string llvm_ir() const;
    /// The module compiled to assembly for the target (AT&T syntax on x86).
    std::string assembly() const;
    /// The module compiled to a relocatable object file, as bytes.
    std::string object_code() const;

    /// Write llvm_ir(), assembly() or object_code() to a file; RuntimeError if it cannot be
    /// written.
    void write_llvm_ir(const std::string &path) const;
    void write_assembly(const std::string &path) const;
    void write_object(const std::string &path) const;

    Impl &impl() const { return *pimpl; }

private:
    std::unique_ptr<Impl> pimpl;
};

} // namespace kiln
